//! End to end, issue 8 item 5: a full filesystem, with cleanerd running.
//! Each round fills the filesystem to ENOSPC with writers in parallel
//! (threads writing many small files, threads writing large ones in
//! chunks, a `cp` process copying one file again and again, every file
//! fsync'd), deletes about half of what is there, and lets cleanerd and
//! `fsctl clean --once` give the space back; the next round fills it
//! again. Along the way:
//! - nothing hangs: every phase has a deadline (out of space, a change
//!   waits for a cleaner at work before ENOSPC: fsd's `space_wait`, set
//!   to [`SPACE_WAIT_SECS`] here, 30 s by default);
//! - ENOSPC is the only error, and it comes when the filesystem is full;
//! - every byte a write acknowledged reads back, on the mount and after
//!   each remount: the files fsync'd, and the one each writer was
//!   writing when ENOSPC came, up to its last acknowledged byte;
//! - the space figures are exact (see [`account`]): `fsctl df` against
//!   the geometry, statfs, what the test wrote and, after every round's
//!   unmount, the blocks and inodes `fsctl fsck` counts (it must also be
//!   clean).
//!
//! `LFS_FULL_ROUNDS` sets the rounds (3; bench/reliability.sh's long
//! mode runs 10), `LFS_FULL_SEED` the random seed.

#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use harness::*;
use lfs_e2e::rng::SplitMix64;
use lfs_e2e::{run, temp_dir};
use nix::sys::signal::Signal;
use nix::sys::statvfs::statvfs;

/// Rounds in the bounded run.
const ROUNDS: usize = 3;
/// mkfs.lfs options: 47 segments of 1 MiB, 3 of them the cleaning
/// reserve; small, so a round is quick, with room for many files.
const MKFS_ARGS: &[&str] = &["--size", "48M", "-B", "256"];
/// Threads writing small files (one write, then fsync).
const SMALL_WRITERS: usize = 2;
/// Largest small file.
const SMALL_MAX: usize = 48 << 10;
/// Threads writing large files (in chunks, then fsync).
const LARGE_WRITERS: usize = 2;
/// Smallest and largest large file.
const LARGE: (usize, usize) = (1 << 20, 6 << 20);
/// A large file's write size.
const CHUNK: usize = 128 << 10;
/// The size of the file the `cp` process copies.
const CP_LEN: usize = 256 << 10;
/// The seed of that file's bytes.
const CP_SEED: u64 = 0xc0b1;
/// fsd's `space_wait` in this test: how long a change out of space waits
/// for the cleaner. The default, 30 s, made most of the test's time two
/// such waits at the end of each fill.
const SPACE_WAIT_SECS: u64 = 5;
/// Longest a fill may take (changes out of space wait `SPACE_WAIT_SECS`
/// each).
const FILL_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest cleaning may take to give the deleted space back.
const CLEAN_TIMEOUT: Duration = Duration::from_secs(120);
/// At ENOSPC, less than 1/this of the size is still available.
const FULL_LEFT_MAX: u64 = 20;
/// A fill writes at least this fraction (numerator, denominator) of the
/// space available when it began.
const FILL_MIN: (u64, u64) = (3, 4);
/// statfs's free blocks are df's free less this when nothing waits to
/// be written (fsctl(8), df; lfs's CHECKPOINT_MARGIN_BLOCKS).
const CHECKPOINT_MARGIN_BLOCKS: u64 = 64;
/// How many times `account` reads the figures, waiting for two `df`s
/// that agree.
const SETTLE_TRIES: usize = 50;

const ENOSPC: i32 = nix::libc::ENOSPC;

/// Lines of a daemon's log a failure message shows.
const LOG_TAIL: usize = 40;

/// The last `n` lines of `log`.
fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// What the test wrote to one file.
#[derive(Debug, Clone)]
struct Content {
    /// The seed of its bytes (`pattern(len, seed)`).
    seed: u64,
    /// Bytes acknowledged; for `exact: false`, the most there may be.
    len: usize,
    /// Whether the file holds exactly `len` bytes; else a prefix of them
    /// (the file `cp` was copying when ENOSPC came).
    exact: bool,
    /// Whether its fsync returned.
    synced: bool,
}

/// Every file the test wrote and has not deleted, by path.
type Files = BTreeMap<PathBuf, Content>;

fn is_enospc(e: &io::Error) -> bool {
    e.raw_os_error() == Some(ENOSPC)
}

/// Writes files `dir/PREFIX-N` until ENOSPC: small ones in one write
/// (`large: false`) or large ones in chunks, each fsync'd. Any other
/// error is the thread's failure.
fn write_files(
    dir: &Path,
    prefix: &str,
    large: bool,
    rng: &mut SplitMix64,
) -> Result<Files, String> {
    let mut files = Files::new();
    for n in 0.. {
        let path = dir.join(format!("{prefix}-{n}"));
        let len = if large {
            LARGE.0 + rng.below(LARGE.1 - LARGE.0)
        } else {
            rng.below(SMALL_MAX + 1)
        };
        let seed = rng.next_u64();
        let data = pattern(len, seed);
        let fail = |what: &str, e: io::Error| format!("{what} {}: {e}", path.display());
        let mut f = match File::create(&path) {
            Ok(f) => f,
            Err(e) if is_enospc(&e) => return Ok(files),
            Err(e) => return Err(fail("creating", e)),
        };
        let mut content = Content {
            seed,
            len: 0,
            exact: true,
            synced: false,
        };
        let step = if large { CHUNK } else { len.max(1) };
        while content.len < len {
            let end = (content.len + step).min(len);
            match f.write(&data[content.len..end]) {
                Ok(0) => return Err(format!("writing {}: wrote nothing", path.display())),
                Ok(k) => content.len += k,
                Err(e) if is_enospc(&e) => {
                    files.insert(path, content);
                    return Ok(files);
                }
                Err(e) => return Err(fail("writing", e)),
            }
        }
        match f.sync_all() {
            Ok(()) => content.synced = true,
            Err(e) if is_enospc(&e) => {
                files.insert(path, content);
                return Ok(files);
            }
            Err(e) => return Err(fail("fsync of", e)),
        }
        files.insert(path, content);
    }
    unreachable!("the loop ends only by returning")
}

/// The `cp` writer: copies `src` to `dir/PREFIX-N` and fsyncs it
/// (`sync FILE`) until one fails, which must be for ENOSPC.
fn copy_files(src: &Path, dir: &Path, prefix: &str) -> Result<Files, String> {
    let script = r#"i=0
        while cp "$1" "$2/$3-$i" && sync "$2/$3-$i"; do i=$((i + 1)); done
        echo "$i""#;
    let o = run(
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("sh")
            .arg(src)
            .arg(dir)
            .arg(prefix),
        FILL_TIMEOUT,
    );
    let done: usize = o
        .stdout
        .trim()
        .parse()
        .map_err(|e| format!("the cp loop's count ({e}): {o}"))?;
    let errors: Vec<&str> = o.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    if errors.is_empty() || !errors.iter().all(|l| l.contains("No space left on device")) {
        return Err(format!("the cp loop stopped, not for ENOSPC alone: {o}"));
    }
    let content = |exact| Content {
        seed: CP_SEED,
        len: CP_LEN,
        exact,
        synced: exact,
    };
    let mut files: Files = (0..done)
        .map(|i| (dir.join(format!("{prefix}-{i}")), content(true)))
        .collect();
    let last = dir.join(format!("{prefix}-{done}"));
    if last.exists() {
        files.insert(last, content(false));
    }
    Ok(files)
}

/// What one fill did.
struct Fill {
    files: Files,
    /// Bytes acknowledged.
    bytes: u64,
    /// Files fsync'd.
    synced: usize,
}

/// Fills the filesystem: every writer in parallel until each meets
/// ENOSPC, within [`FILL_TIMEOUT`]; or the first failure.
fn fill(dirs: &[PathBuf], src: &Path, round: usize, rng: &mut SplitMix64) -> Result<Fill, String> {
    let mut writers = Vec::new();
    for (w, dir) in dirs.iter().enumerate() {
        let dir = dir.clone();
        let prefix = format!("r{round}");
        let mut wrng = SplitMix64(rng.next_u64());
        let src = src.to_path_buf();
        writers.push(thread::spawn(move || {
            if w < SMALL_WRITERS {
                write_files(&dir, &prefix, false, &mut wrng)
            } else if w < SMALL_WRITERS + LARGE_WRITERS {
                write_files(&dir, &prefix, true, &mut wrng)
            } else {
                copy_files(&src, &dir, &prefix)
            }
        }));
    }
    let deadline = Instant::now() + FILL_TIMEOUT;
    while !writers.iter().all(|w| w.is_finished()) {
        if Instant::now() >= deadline {
            return Err(format!(
                "the writers did not all meet ENOSPC within {FILL_TIMEOUT:?}"
            ));
        }
        thread::sleep(POLL);
    }
    let mut files = Files::new();
    for w in writers {
        files.extend(w.join().expect("a writer panicked")?);
    }
    Ok(Fill {
        bytes: files.values().map(|c| c.len as u64).sum(),
        synced: files.values().filter(|c| c.synced).count(),
        files,
    })
}

/// Reads every file back (see [`Content`]) and checks that the writers'
/// directories hold nothing else. Returns the bytes read.
fn verify(dirs: &[PathBuf], files: &Files, when: &str) -> u64 {
    let mut bytes = 0;
    for (path, c) in files {
        let data = fs::read(path).unwrap_or_else(|e| panic!("{when}: {}: {e}", path.display()));
        let ok = if c.exact {
            data.len() == c.len && data == pattern(c.len, c.seed)
        } else {
            data.len() <= c.len && data == pattern(data.len(), c.seed)
        };
        assert!(
            ok,
            "{when}: {} holds {} bytes that are not the {} written{}",
            path.display(),
            data.len(),
            c.len,
            if c.synced { " and fsync'd" } else { "" }
        );
        bytes += data.len() as u64;
    }
    for dir in dirs {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            assert!(
                files.contains_key(&path),
                "{when}: {} was never written (or was deleted)",
                path.display()
            );
        }
    }
    bytes
}

/// The geometry `fsctl super` reads from the image.
struct Geometry {
    block: u64,
    size: u64,
    reserved: u64,
}

fn geometry(image: &Path) -> Geometry {
    let o = fsctl(&[Path::new("super"), Path::new("--json"), image]).assert_success();
    let v: serde_json::Value =
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {o}"));
    let sb = &v["superblock"];
    let n = |k: &str| sb[k].as_u64().unwrap_or_else(|| panic!("no {k} in {o}"));
    Geometry {
        block: n("block_size"),
        size: n("nsegments") * n("segment_bytes"),
        reserved: n("reserved_segments") * n("segment_bytes"),
    }
}

/// The figures of a filesystem at rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Figures {
    free: u64,
    reserved: u64,
    live: u64,
    snapshots: u64,
    older: u64,
    reclaimable: u64,
    /// statfs: available bytes.
    avail: u64,
    /// statfs: inodes in use.
    inodes: u64,
    /// The bytes of the files' blocks (st_blocks).
    data: u64,
    /// The last checkpoint.
    cno: u64,
}

impl Figures {
    /// Blocks some checkpoint references: what fsck counts.
    fn referenced_blocks(&self, g: &Geometry) -> u64 {
        (self.live + self.snapshots + self.older) / g.block
    }
}

/// Pauses cleanerd, makes everything written durable (an fsync), waits
/// until nothing moves (two `df`s agree around a statfs), and checks
/// that the figures are exact:
/// - df's size is the geometry's (segments × segment size) and statfs's
///   total, its reserve the geometry's reserved segments;
/// - nothing waiting to be written, statfs's free bytes are df's free
///   less [`CHECKPOINT_MARGIN_BLOCKS`], its available bytes that less
///   the reserve;
/// - no snapshot holds anything (the test makes none);
/// - every file's blocks (st_blocks) are its size rounded up to a block
///   (every file is written densely), their sum is within df's live
///   bytes, and the rest of live (metadata) is at most `metadata_max`;
/// - statfs's inodes in use are the test's files and directories and
///   the root.
///
/// cleanerd stays suspended; the caller resumes it.
fn account(
    mnt: &Path,
    sock: &str,
    g: &Geometry,
    dirs: &[PathBuf],
    files: &Files,
    when: &str,
) -> Figures {
    fsctl(&["clean", sock, "--suspend"]).assert_success();
    File::open(mnt).unwrap().sync_all().unwrap();
    let u =
        |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"));
    let mut tries = 0;
    let (df, sv) = loop {
        let a = df_json(sock);
        let sv = statvfs(mnt).unwrap();
        let b = df_json(sock);
        if a == b {
            break (a, sv);
        }
        tries += 1;
        assert!(
            tries < SETTLE_TRIES,
            "{when}: df keeps changing with cleanerd suspended: {a} then {b}"
        );
        thread::sleep(Duration::from_millis(100));
    };
    let at = format!("{when}: df {df}, statfs {sv:?}");
    let frsize = sv.fragment_size();
    assert_eq!(frsize, g.block, "{at}");
    assert_eq!(u(&df, "block_size"), g.block, "{at}");
    assert_eq!(u(&df, "total_bytes"), g.size, "{at}");
    assert_eq!(sv.blocks() * frsize, g.size, "{at}");
    assert_eq!(u(&df, "reserved_bytes"), g.reserved, "{at}");
    let free = u(&df, "free_bytes");
    // A DAT merge that is due has its blocks booked (lfs(5)).
    let bfree = free.saturating_sub(CHECKPOINT_MARGIN_BLOCKS * g.block + u(&df, "booked_bytes"));
    assert_eq!(sv.blocks_free() * frsize, bfree, "{at}");
    assert_eq!(
        sv.blocks_available() * frsize,
        bfree.saturating_sub(g.reserved),
        "{at}"
    );
    assert_eq!(u(&df, "snapshot_bytes"), 0, "{at}");

    let mut data = 0;
    for (path, c) in files {
        let m = fs::metadata(path).unwrap_or_else(|e| panic!("{when}: {}: {e}", path.display()));
        let blocks = m.len().div_ceil(g.block) * g.block;
        assert_eq!(
            m.blocks() * 512,
            blocks,
            "{when}: st_blocks of {} ({} bytes)",
            path.display(),
            m.len()
        );
        if c.exact {
            assert_eq!(m.len(), c.len as u64, "{when}: size of {}", path.display());
        }
        data += blocks;
    }
    let live = u(&df, "live_bytes");
    assert!(
        data <= live,
        "{at}: the files hold {data} bytes, more than live"
    );
    let meta = live - data;
    let cno = last_checkpoint(sock);
    let meta_max = metadata_max(files.len() as u64, data, cno, g);
    assert!(
        meta <= meta_max,
        "{at}: {meta} bytes of metadata for {} files of {data} bytes, more than {meta_max}",
        files.len()
    );
    let inodes = sv.files() - sv.files_free();
    assert_eq!(
        inodes,
        (files.len() + dirs.len() + 1) as u64,
        "{at}: inodes in use"
    );
    Figures {
        free,
        reserved: g.reserved,
        live,
        snapshots: 0,
        older: u(&df, "protected_bytes"),
        reclaimable: u(&df, "reclaimable_bytes"),
        avail: sv.blocks_available() * frsize,
        inodes,
        data,
        cno,
    }
}

/// DAT entries in a block (lfs(5): 32-byte entries after a 16-byte
/// header in 4 KiB blocks).
const DAT_PER_BLOCK: u64 = 127;
/// Checkpoint file entries in a block (320 bytes each).
const CPFILE_PER_BLOCK: u64 = 12;
/// Pointers in an indirect block.
const PTRS_PER_BLOCK: u64 = 510;
/// Blocks of metadata beyond what grows with the files: the segment
/// usage file, the root and the writers' directories, a super root.
const METADATA_FIXED_BLOCKS: u64 = 64;

/// The most metadata (live bytes beyond the files' blocks) `files` files
/// of `data` bytes may take after checkpoint `cno`: the checkpoint file
/// (at most a block per 12 checkpoints ever made; blocks whose
/// checkpoints are all deleted are holes, so usually far less), the DAT
/// entries of the data and of the
/// metadata blocks (twice, for slots left by freed blocks), the indirect
/// blocks, a block per file for its inode record, directory entry and a
/// partly used indirect block, and the fixed part.
fn metadata_max(files: u64, data: u64, cno: u64, g: &Geometry) -> u64 {
    let blocks = data / g.block;
    let cpfile = cno.div_ceil(CPFILE_PER_BLOCK);
    let dat = 2 * (blocks + files + cpfile).div_ceil(DAT_PER_BLOCK);
    let indirect = blocks.div_ceil(PTRS_PER_BLOCK);
    (cpfile + dat + indirect + files + METADATA_FIXED_BLOCKS) * g.block
}

/// The number of the last checkpoint (`fsctl lscp -a`).
fn last_checkpoint(sock: &str) -> u64 {
    let o = fsctl(&["lscp", "-a", "--json", sock]).assert_success();
    let v: serde_json::Value =
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {o}"));
    v["checkpoints"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(|c| c["cno"].as_u64())
        .unwrap_or_else(|| panic!("no checkpoint in {o}"))
}

/// Deletes about half of the files (each with probability 1/2); returns
/// how many and their bytes (blocks, as st_blocks counts them), or the
/// first failure.
fn delete_half(
    files: &mut Files,
    g: &Geometry,
    rng: &mut SplitMix64,
) -> Result<(usize, u64), String> {
    let victims: Vec<PathBuf> = files
        .keys()
        .filter(|_| rng.below(2) == 0)
        .cloned()
        .collect();
    let mut bytes = 0;
    for path in &victims {
        let len = fs::metadata(path).unwrap().len();
        let t = Instant::now();
        fs::remove_file(path)
            .map_err(|e| format!("deleting {} (after {:?}): {e}", path.display(), t.elapsed()))?;
        bytes += len.div_ceil(g.block) * g.block;
        files.remove(path);
    }
    Ok((victims.len(), bytes))
}

/// Asks cleanerd for a pass now (`fsctl clean --once`), then waits until
/// statfs shows at least `want` bytes available, within
/// [`CLEAN_TIMEOUT`]; returns them.
fn clean_until(mnt: &Path, sock: &str, want: u64, when: &str) -> u64 {
    // The pass may clean, defer or find nothing to do: cleanerd goes on
    // at its own pace anyway.
    fsctl(&["clean", sock, "--once", "--protection-period", "0"]).assert_success();
    let deadline = Instant::now() + CLEAN_TIMEOUT;
    loop {
        let sv = statvfs(mnt).unwrap();
        let avail = sv.blocks_available() * sv.fragment_size();
        if avail >= want {
            return avail;
        }
        assert!(
            Instant::now() < deadline,
            "{when}: {avail} bytes available after {CLEAN_TIMEOUT:?} of cleaning, not {want}; df {}",
            df_json(sock)
        );
        thread::sleep(POLL);
    }
}

/// After a clean unmount: fsck is clean and counts the blocks and inodes
/// the mount counted at rest just before.
fn assert_fsck_counts(image: &Path, g: &Geometry, at_rest: &Figures, when: &str) {
    let o = run(
        &mut lfs_e2e::daemons::fsctl(&["fsck".as_ref(), "--json".as_ref(), image.as_os_str()]),
        CMD_TIMEOUT,
    );
    let v: serde_json::Value = serde_json::from_str(&o.stdout)
        .unwrap_or_else(|e| panic!("{when}: fsck printed no JSON ({e}): {o}"));
    assert!(
        o.status.success() && v["clean"] == true,
        "{when}: fsctl fsck: {o}"
    );
    assert_eq!(
        v["blocks"].as_u64(),
        Some(at_rest.referenced_blocks(g)),
        "{when}: blocks fsck counts against df's {at_rest:?}"
    );
    assert_eq!(
        v["inodes"].as_u64(),
        Some(at_rest.inodes),
        "{when}: inodes fsck counts against statfs's"
    );
}

#[test]
fn fill_delete_clean_refill_rounds_keep_every_byte_and_exact_figures() {
    let rounds = env_usize("LFS_FULL_ROUNDS", ROUNDS);
    let seed = env_usize("LFS_FULL_SEED", 0xf011) as u64;
    let tmp = temp_dir();
    let conf = tmp.path().join("fsd.toml");
    fs::write(&conf, format!("space_wait = {SPACE_WAIT_SECS}\n")).unwrap();
    let fsd_args = [
        "--config",
        conf.to_str().expect("temporary paths are UTF-8"),
    ];
    let (image, mnt, s, mut fsd, mut cleanerd) =
        serve_with_cleanerd_args(tmp.path(), "full.img", MKFS_ARGS, &fsd_args);
    let g = geometry(&image);
    let src = tmp.path().join("cp-source");
    fs::write(&src, pattern(CP_LEN, CP_SEED)).unwrap();
    let nwriters = SMALL_WRITERS + LARGE_WRITERS + 1;
    let dirs: Vec<PathBuf> = (0..nwriters)
        .map(|w| mkdir(&mnt, &format!("w{w}")))
        .collect();

    let mut rng = SplitMix64(seed);
    let mut files = Files::new();
    let (mut written, mut synced, mut verified, mut deleted) = (0u64, 0usize, 0u64, 0usize);
    let mut avail = statvfs(&mnt).unwrap().blocks_available() as u64 * g.block;
    let started = Instant::now();
    for round in 0..rounds {
        let when = |what: &str| format!("round {round} (seed {seed:#x}), {what}");
        let t = Instant::now();
        let logs = |fsd: &Fsd, cleanerd: &Cleanerd| {
            format!(
                "df: {}\ncleanerd:\n{}\nfsd:\n{}",
                df_json(&s),
                tail(&cleanerd.log(), LOG_TAIL),
                tail(&fsd.log(), LOG_TAIL)
            )
        };
        let f = fill(&dirs, &src, round, &mut rng)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", when("filling"), logs(&fsd, &cleanerd)));
        let fill_time = t.elapsed().as_secs();
        let nfiles = f.files.len();
        files.extend(f.files);
        written += f.bytes;
        synced += f.synced;
        verified += verify(&dirs, &files, &when("full"));
        let full = account(&mnt, &s, &g, &dirs, &files, &when("full"));
        // ENOSPC came when the space was used: little is left, and the
        // fill wrote most of what was available when it began (the rest
        // went to metadata; cleaning during the fill may add some).
        assert!(
            full.avail * FULL_LEFT_MAX < g.size,
            "{}: {} bytes still available at ENOSPC ({full:?})",
            when("full"),
            full.avail
        );
        assert!(
            f.bytes * FILL_MIN.1 >= avail * FILL_MIN.0,
            "{}: only {} bytes written of {avail} available",
            when("full"),
            f.bytes
        );
        fsctl(&["clean", &s, "--resume"]).assert_success();

        let (n, bytes) = delete_half(&mut files, &g, &mut rng)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", when("deleting"), logs(&fsd, &cleanerd)));
        deleted += n;
        let t = Instant::now();
        let want = full.avail + bytes / 2;
        let avail_before = avail;
        avail = clean_until(&mnt, &s, want, &when("cleaning"));
        let clean_time = t.elapsed().as_secs();
        let rest = account(&mnt, &s, &g, &dirs, &files, &when("cleaned"));

        let before = connections(&cleanerd.log());
        fsd.signal(Signal::SIGTERM);
        fsd.assert_clean_exit(&when("SIGTERM"));
        assert_fsck_counts(&image, &g, &rest, &when("after the unmount"));
        // The old guard would unmount the new mount when dropped.
        drop(fsd);
        fsd = Fsd::start(&image, &mnt, &fsd_args);
        verified += verify(&dirs, &files, &when("remounted"));
        fsctl(&["clean", &s, "--resume"]).assert_success();
        assert_reconnects(&cleanerd, &s, before, &when("remounted"));
        println!(
            "full disk, round {round}: {} bytes in {nfiles} files to ENOSPC ({avail_before} \
             available) in {fill_time} s; deleted {n} files ({bytes} bytes), cleaning gave \
             {avail} bytes available in {clean_time} s; at rest live {} bytes, {} of them \
             metadata, checkpoint {}; fsck counted df's {} blocks and statfs's {} inodes",
            f.bytes,
            rest.live,
            rest.live - rest.data,
            rest.cno,
            rest.referenced_blocks(&g),
            rest.inodes
        );
    }
    cleanerd.terminate();
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM after the rounds");
    assert_fsck_clean(&image, "after the rounds");
    println!(
        "full disk: {rounds} rounds in {} s, {written} bytes written, {synced} files fsync'd, \
         {deleted} deleted, {verified} bytes verified, 0 lost",
        started.elapsed().as_secs()
    );
}
