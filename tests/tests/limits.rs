//! End to end, issue 8 item 5's limits on a real mount: names of 255 and
//! 256 bytes (and past the kernel's own FUSE limit), names with `/`, "."
//! and ".." as the target of every call that makes, removes or moves a
//! name; a tree thousands of directories deep, with paths at and past
//! PATH_MAX; sparse files written at huge offsets, up to and past the
//! largest file size. Each call gets the errno Linux gives (for `/`,
//! "." and ".." and PATH_MAX the kernel answers itself; the values are
//! those ext4 gives on the same kernel), nothing refused leaves a trace,
//! and after a remount fsck is clean and everything made is there.
//!
//! A name with NUL cannot be passed through a path at all (the C string
//! ends there); lfs/tests/limits.rs calls the engine with such names.

#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{symlink, FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use harness::*;
use lfs_e2e::temp_dir;
use nix::errno::Errno;
use nix::fcntl::{fallocate, renameat2, FallocateFlags, RenameFlags};
use nix::sys::signal::Signal;
use nix::sys::stat::Mode;
use nix::unistd::mkfifo;

/// The longest name (NAME_MAX).
const NAME_MAX: usize = 255;
/// The kernel refuses longer names before asking a FUSE daemon
/// (FUSE_NAME_MAX).
const FUSE_NAME_MAX: usize = 1024;
/// The longest path, with its NUL (PATH_MAX).
const PATH_MAX: usize = 4096;

/// The errno of a call (`None`: it succeeded).
fn err<T>(r: io::Result<T>) -> Option<Errno> {
    r.err()
        .map(|e| Errno::from_raw(e.raw_os_error().unwrap_or(0)))
}

fn nerr<T>(r: nix::Result<T>) -> Option<Errno> {
    r.err()
}

/// Every (what, expected, got) whose errno differs, one line each.
fn mismatches(table: &[(String, Option<Errno>, Option<Errno>)]) -> String {
    table
        .iter()
        .filter(|(_, want, got)| want != got)
        .map(|(what, want, got)| format!("{what}: expected {want:?}, got {got:?}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Stops fsd cleanly, asserts fsck is clean, and starts it again.
fn remount(fsd: Fsd, image: &Path, mnt: &Path, when: &str) -> Fsd {
    let mut fsd = fsd;
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit(when);
    assert_fsck_clean(image, when);
    // Dropped after the new one started, the guard would unmount it.
    drop(fsd);
    Fsd::start(image, mnt, &[])
}

/// `ls -a` of a directory, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn open_create(path: &Path, excl: bool) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(!excl)
        .create_new(excl)
        .open(path)
}

#[test]
fn names_get_the_errno_linux_gives() {
    let tmp = temp_dir();
    let image = mkfs(tmp.path(), "names.img");
    let mnt = mkdir(tmp.path(), "mnt");
    let fsd = Fsd::start(&image, &mnt, &[]);
    let m = |p: &str| mnt.join(p);
    fs::create_dir(m("d")).unwrap();
    fs::create_dir(m("d/sub")).unwrap();
    fs::create_dir(m("e")).unwrap();
    fs::write(m("f"), b"f").unwrap();

    // 255 bytes: every call that makes or moves a name.
    let long = |c: char, n: usize| c.to_string().repeat(n);
    File::create(m(&long('a', NAME_MAX))).unwrap();
    fs::create_dir(m(&long('b', NAME_MAX))).unwrap();
    symlink("f", m(&long('c', NAME_MAX))).unwrap();
    fs::hard_link(m("f"), m(&long('d', NAME_MAX))).unwrap();
    mkfifo(&m(&long('e', NAME_MAX)), Mode::from_bits_truncate(0o644)).unwrap();
    File::create(m(&long('g', NAME_MAX))).unwrap();
    fs::rename(m(&long('g', NAME_MAX)), m(&long('h', NAME_MAX))).unwrap();
    assert!(fs::symlink_metadata(m(&long('e', NAME_MAX)))
        .unwrap()
        .file_type()
        .is_fifo());
    // A symlink's target: 4095 bytes (PATH_MAX with the NUL).
    let target = "t".repeat(PATH_MAX - 1);
    symlink(&target, m("s")).unwrap();

    let mut table: Vec<(String, Option<Errno>, Option<Errno>)> = Vec::new();
    let too_long = Some(Errno::ENAMETOOLONG);
    for n in [NAME_MAX + 1, FUSE_NAME_MAX + 1, PATH_MAX] {
        let name = m(&long('x', n));
        let mut row =
            |what: &str, got| table.push((format!("{what} with a {n}-byte name"), too_long, got));
        row("open O_CREAT", err(open_create(&name, false)));
        row("stat", err(fs::symlink_metadata(&name)));
        row("mkdir", err(fs::create_dir(&name)));
        row("symlink", err(symlink("f", &name)));
        row("link", err(fs::hard_link(m("f"), &name)));
        row(
            "mkfifo",
            nerr(mkfifo(&name, Mode::from_bits_truncate(0o644))),
        );
        row("rename onto", err(fs::rename(m("f"), &name)));
        row("rename from", err(fs::rename(&name, m("y"))));
        row("unlink", err(fs::remove_file(&name)));
        row("rmdir", err(fs::remove_dir(&name)));
    }
    table.push((
        "symlink with a 4096-byte target".into(),
        too_long,
        err(symlink("t".repeat(PATH_MAX), m("s2"))),
    ));

    // `/` separates names: it cannot be in one.
    for (what, want, got) in [
        (
            "mkdir under a file",
            Errno::ENOTDIR,
            err(fs::create_dir(m("f/x"))),
        ),
        (
            "create under a file",
            Errno::ENOTDIR,
            err(open_create(&m("f/x"), false)),
        ),
        (
            "open a file with a trailing /",
            Errno::ENOTDIR,
            err(File::open(m("f/"))),
        ),
        (
            "create with a trailing /",
            Errno::EISDIR,
            err(open_create(&m("new/"), false)),
        ),
        (
            "create under a missing directory",
            Errno::ENOENT,
            err(open_create(&m("no/x"), false)),
        ),
        (
            "mkdir under a missing directory",
            Errno::ENOENT,
            err(fs::create_dir(m("no//x"))),
        ),
    ] {
        table.push((what.into(), Some(want), got));
    }
    fs::create_dir(m("d//made")).unwrap();
    assert!(m("d/made").is_dir(), "// is one separator");

    // "." and "..": the answers of Linux's VFS (checked on ext4).
    let mode = Mode::from_bits_truncate(0o644);
    for name in ["d/.", "d/..", "."] {
        let p = m(name);
        let rmdir_want = if name.ends_with("..") {
            Errno::ENOTEMPTY
        } else {
            Errno::EINVAL
        };
        for (call, want, got) in [
            ("mkdir", Some(Errno::EEXIST), err(fs::create_dir(&p))),
            (
                "open O_CREAT",
                Some(Errno::EISDIR),
                err(open_create(&p, false)),
            ),
            (
                "open O_CREAT|O_EXCL",
                Some(Errno::EEXIST),
                err(open_create(&p, true)),
            ),
            ("mkfifo", Some(Errno::EEXIST), nerr(mkfifo(&p, mode))),
            ("symlink", Some(Errno::EEXIST), err(symlink("t", &p))),
            ("link", Some(Errno::EEXIST), err(fs::hard_link(m("f"), &p))),
            ("unlink", Some(Errno::EISDIR), err(fs::remove_file(&p))),
            ("rmdir", Some(rmdir_want), err(fs::remove_dir(&p))),
            (
                "rename from",
                Some(Errno::EBUSY),
                err(fs::rename(&p, m("y"))),
            ),
            (
                "rename a file onto",
                Some(Errno::EBUSY),
                err(fs::rename(m("f"), &p)),
            ),
            (
                "rename a directory onto",
                Some(Errno::EBUSY),
                err(fs::rename(m("e"), &p)),
            ),
            (
                "RENAME_NOREPLACE onto",
                Some(Errno::EEXIST),
                nerr(renameat2(
                    None,
                    &m("f"),
                    None,
                    &p,
                    RenameFlags::RENAME_NOREPLACE,
                )),
            ),
            (
                "RENAME_EXCHANGE with",
                Some(Errno::EBUSY),
                nerr(renameat2(
                    None,
                    &m("f"),
                    None,
                    &p,
                    RenameFlags::RENAME_EXCHANGE,
                )),
            ),
        ] {
            table.push((format!("{call} {name:?}"), want, got));
        }
    }
    // The mount's root is a mount point.
    table.push((
        "rmdir of the mount point".into(),
        Some(Errno::EBUSY),
        err(fs::remove_dir(&mnt)),
    ));
    table.push((
        "rename of the mount point".into(),
        Some(Errno::EBUSY),
        err(fs::rename(&mnt, tmp.path().join("moved"))),
    ));
    let wrong = mismatches(&table);
    assert!(wrong.is_empty(), "{} calls:\n{wrong}", table.len());

    let mut names = vec!["d", "e", "f", "s"]
        .into_iter()
        .map(String::from)
        .chain("abcdeh".chars().map(|c| long(c, NAME_MAX)))
        .collect::<Vec<_>>();
    names.sort();
    assert_eq!(listing(&mnt), names, "refused calls left a trace");
    assert_eq!(listing(&m("d")), ["made", "sub"]);

    let mut fsd = remount(fsd, &image, &mnt, "after the name calls");
    assert_eq!(listing(&mnt), names);
    assert_eq!(
        fs::read_link(m("s")).unwrap().to_str(),
        Some(target.as_str())
    );
    assert_eq!(
        fs::read_link(m(&long('c', NAME_MAX))).unwrap(),
        Path::new("f")
    );
    assert_eq!(fs::metadata(m("f")).unwrap().nlink(), 2);
    assert!(m(&long('b', NAME_MAX)).is_dir());
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&image, "at the end");
    println!(
        "limits, names: {} calls with names of 256 to 4096 bytes, with /, . and .., each the \
         errno Linux gives; names of 255 bytes of every kind kept across a remount",
        table.len()
    );
}

/// Levels of the deep tree in the bounded run: its paths pass PATH_MAX
/// (2 bytes a level) well before the bottom.
const DEPTH: usize = 2500;
/// Levels with `LFS_LONG=1`.
const LONG_DEPTH: usize = 10_000;

/// `dir/name` through the directory's descriptor (`/proc/self/fd/N`),
/// so the path stays short however deep `dir` is.
fn at(dir: &File, name: &str) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}/{name}", dir.as_raw_fd()))
}

/// A chain of directories named `d` thousands of levels deep, built and
/// walked through descriptors: absolute paths work up to PATH_MAX and
/// get ENAMETOOLONG past it; moving the top into the bottom is EINVAL;
/// `fsctl diff` lists every level (it overflowed fsd's stack and killed
/// the daemon); `find` walks it; after a remount fsck is clean and the
/// file at the bottom is there; `rm -rf` removes it all.
#[test]
fn a_tree_deeper_than_path_max() {
    let depth = env_usize(
        "LFS_DEEP_LEVELS",
        if long_mode() { LONG_DEPTH } else { DEPTH },
    );
    let tmp = temp_dir();
    let image = mkfs(tmp.path(), "deep.img");
    let mnt = mkdir(tmp.path(), "mnt");
    let sock = mnt.with_extension("sock");
    let s = sock.to_str().unwrap();
    let fsd = Fsd::start(&image, &mnt, &[]);
    let o = fsctl(&["mkcp", "-s", "-p", s]).assert_success();
    let before = o.stdout.trim().to_string();

    let top = mnt.join("deep");
    fs::create_dir(&top).unwrap();
    let mut dir = File::open(&top).unwrap();
    for level in 0..depth {
        fs::create_dir(at(&dir, "d")).unwrap_or_else(|e| panic!("mkdir at level {level}: {e}"));
        dir = File::open(at(&dir, "d")).unwrap_or_else(|e| panic!("opening level {level}: {e}"));
    }
    fs::write(at(&dir, "leaf"), b"at the bottom").unwrap();
    File::open(at(&dir, "leaf")).unwrap().sync_all().unwrap();

    // Absolute paths: the longest that fits PATH_MAX (with its NUL)
    // resolves, one byte more does not. A trailing `/` adjusts the
    // length by one.
    let base = top.to_str().unwrap().to_string();
    let path_of = |len: usize| {
        let levels = (len - base.len()) / 2;
        let mut p = base.clone() + &"/d".repeat(levels);
        if p.len() < len {
            p.push('/');
        }
        assert_eq!(p.len(), len);
        p
    };
    assert!(
        base.len() + 2 * depth > PATH_MAX,
        "the tree does not pass PATH_MAX"
    );
    let fits = path_of(PATH_MAX - 1);
    assert!(
        fs::metadata(&fits).unwrap().is_dir(),
        "a {}-byte path",
        fits.len()
    );
    let over = path_of(PATH_MAX);
    assert_eq!(
        err(fs::metadata(&over)),
        Some(Errno::ENAMETOOLONG),
        "a {}-byte path",
        over.len()
    );
    assert_eq!(err(fs::create_dir(over + "/x")), Some(Errno::ENAMETOOLONG));

    // The top into its own bottom.
    assert_eq!(
        err(fs::rename(&top, at(&dir, "top"))),
        Some(Errno::EINVAL),
        "moving a directory into itself"
    );

    // Every level, listed by fsctl diff and by find.
    let o = fsctl(&["diff", "--json", "-t", s, &before, "0"]).assert_success();
    let v: serde_json::Value =
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("bad JSON ({e})"));
    let rows = v["changes"]
        .as_array()
        .unwrap_or_else(|| panic!("diff printed no changes"));
    let created = rows.iter().filter(|r| r["change"] == "created").count();
    assert_eq!(
        rows.len(),
        depth + 3,
        "diff rows (the top, {depth} levels, the leaf and the root)"
    );
    assert_eq!(created, depth + 2, "created rows");
    let o = sh(&format!("find '{}' | wc -l", top.display()));
    assert_eq!(o.stdout.trim(), (depth + 2).to_string(), "find");

    drop(dir);
    let mut fsd = remount(fsd, &image, &mnt, "with the deep tree");
    let mut dir = File::open(&top).unwrap();
    for level in 0..depth {
        dir = File::open(at(&dir, "d"))
            .unwrap_or_else(|e| panic!("level {level} after the remount: {e}"));
    }
    assert_eq!(fs::read(at(&dir, "leaf")).unwrap(), b"at the bottom");
    drop(dir);
    sh(&format!("rm -rf '{}'", top.display()));
    assert_eq!(listing(&mnt), Vec::<String>::new());
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&image, "after rm -rf of the deep tree");
    println!(
        "limits, deep tree: {depth} levels, paths to {} bytes; {} bytes resolve, {PATH_MAX} \
         are ENAMETOOLONG; moving the top into the bottom EINVAL; fsctl diff and find list \
         every level; kept across a remount; rm -rf removes it",
        base.len() + 2 * depth + "/leaf".len(),
        PATH_MAX - 1
    );
}

/// The largest file with `bs`-byte blocks (lfs(5), LIMITS).
fn max_file_bytes(bs: u64) -> u64 {
    let p = (bs - 16) / 8;
    (12 + p + p * p + p * p * p) * bs
}

/// Sparse writes at huge offsets, with 4 KiB blocks (largest file
/// 507 GiB) and 64 KiB blocks (32 PiB): a byte at 2^38, at 2^40 where it
/// fits, the last byte of the largest file; EFBIG at the limit and past
/// it (2^40 with 4 KiB blocks, 2^62), a short count for a write across
/// it, EFBIG for truncate and fallocate past it. Holes read as zeros, the
/// files take a few blocks, and all is there after a remount.
#[test]
fn sparse_offsets_up_to_and_past_the_largest_file() {
    for bs in [4096u64, 65536] {
        let tmp = temp_dir();
        let image = mkfs_with(
            tmp.path(),
            "sparse.img",
            &["--size", "64M", "-b", &bs.to_string(), "-B", "64"],
        );
        let mnt = mkdir(tmp.path(), "mnt");
        let fsd = Fsd::start(&image, &mnt, &[]);
        let max = max_file_bytes(bs);
        let at = |what: &str| format!("{what} ({bs}-byte blocks, largest file {max} bytes)");
        let path = mnt.join("sparse");
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let mut fits = vec![1u64 << 38, max - 1];
        if max > 1 << 40 {
            fits.push(1 << 40);
        }
        for &off in &fits {
            assert_eq!(
                f.write_at(b"x", off).unwrap(),
                1,
                "{}",
                at(&format!("a byte at {off}"))
            );
        }
        assert_eq!(f.metadata().unwrap().len(), max);
        let mut table = Vec::new();
        for off in [max, max + 1, 1 << 40, 1 << 62] {
            if off >= max {
                table.push((
                    format!("write at {off}"),
                    Some(Errno::EFBIG),
                    err(f.write_at(b"y", off)),
                ));
            }
        }
        let g = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(mnt.join("across"))
            .unwrap();
        assert_eq!(
            g.write_at(b"abcdef", max - 3).unwrap(),
            3,
            "{}",
            at("a write across the limit")
        );
        let h = File::create(mnt.join("trunc")).unwrap();
        h.set_len(max).unwrap();
        table.push((
            "truncate past the limit".into(),
            Some(Errno::EFBIG),
            err(h.set_len(max + 1)),
        ));
        let e = File::create(mnt.join("falloc")).unwrap();
        table.push((
            "fallocate across the limit".into(),
            Some(Errno::EFBIG),
            nerr(fallocate(
                e.as_raw_fd(),
                FallocateFlags::empty(),
                (max - bs) as i64,
                (2 * bs) as i64,
            )),
        ));
        let wrong = mismatches(&table);
        assert!(wrong.is_empty(), "{}:\n{wrong}", at("limits"));
        assert_eq!(
            e.metadata().unwrap().len(),
            0,
            "{}",
            at("fallocate past the limit changed the size")
        );

        let check = |when: &str| {
            let f = File::open(&path).unwrap();
            let mut buf = [7u8; 1];
            for &off in &fits {
                assert_eq!(f.read_at(&mut buf, off).unwrap(), 1, "{}", at(when));
                assert_eq!(
                    buf[0],
                    b'x',
                    "{}",
                    at(&format!("{when}: the byte at {off}"))
                );
            }
            let mut hole = vec![7u8; 8192];
            f.read_exact_at(&mut hole, 1 << 30).unwrap();
            assert!(
                hole.iter().all(|&b| b == 0),
                "{}",
                at(&format!("{when}: a hole"))
            );
            let m = f.metadata().unwrap();
            assert_eq!(m.len(), max, "{}", at(when));
            assert_eq!(
                m.blocks() * 512,
                fits.len() as u64 * bs,
                "{}",
                at(&format!("{when}: st_blocks"))
            );
            let mut tail = [0u8; 8];
            let across = File::open(mnt.join("across")).unwrap();
            assert_eq!(
                across.read_at(&mut tail, max - 4).unwrap(),
                4,
                "{}",
                at(when)
            );
            assert_eq!(&tail[..4], b"\0abc", "{}", at(when));
            assert_eq!(
                fs::metadata(mnt.join("trunc")).unwrap().len(),
                max,
                "{}",
                at(when)
            );
        };
        check("written");
        drop((f, g, h, e));
        let mut fsd = remount(fsd, &image, &mnt, &at("after the sparse writes"));
        check("remounted");
        fsd.signal(Signal::SIGTERM);
        fsd.assert_clean_exit("SIGTERM");
        assert_fsck_clean(&image, &at("at the end"));
        println!(
            "limits, sparse files, {bs}-byte blocks: bytes at {fits:?} (the last before the \
             largest file), EFBIG at {max} and past it, a write across it short (3 of 6 \
             bytes), truncate and fallocate past it EFBIG; {} blocks used",
            fits.len()
        );
    }
}
