//! The crash matrix on FaultDevice: a scripted workload that covers file
//! data, every namespace operation, fsync and fdatasync, checkpoints,
//! snapshot changes and a cleaning pass, crashed at every one of its writes
//! under every way the block layer contract allows unflushed writes to be
//! lost: all dropped, all kept, kept up to a prefix, the last one torn at
//! 512-byte sectors, and random subsets torn and reordered.
//! After each crash the image must pass fsck, mount, and show exactly the
//! state of the last acknowledged fsync or sync, or of the checkpoint that
//! was being written: every synced byte, name, mode, owner, link count,
//! extended attribute and link target present, nothing never written
//! visible.
//!
//! `LFS_LONG=1` runs the long matrix (more tear points and
//! `LFS_CRASH_SEEDS` random seeds, 200 by default, instead of 8); each test
//! prints how many crash images it checked (`--nocapture`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use lfs::blockdev::{BlockDevice, CrashMode, FaultDevice, MemDevice};
use lfs::format::{FileType, ROOT_INO};
use lfs::fs::{
    Fs, MountOptions, RenameFlags, SetAttr, TimeSet, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE,
    XATTR_CREATE,
};
use lfs::mkfs::{format, MkfsOptions};

const DEV_LEN: u64 = 12 << 20;
const S_IFIFO: u32 = 0o010000;

/// Everything a user can observe of one name, as it must survive a crash.
/// The inode number is in it so hard links must still share an inode.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    ino: u64,
    kind: FileType,
    mode: u32,
    uid: u32,
    gid: u32,
    nlink: u32,
    mtime_ns: u128,
    xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    /// A regular file's bytes, a symlink's target, empty otherwise.
    data: Vec<u8>,
}

/// path → what is there.
type Tree = BTreeMap<String, Entry>;

fn image() -> Vec<u8> {
    let dev = MemDevice::new(DEV_LEN);
    let mut o = MkfsOptions::new([3; 16], 0x5eed, 1_700_000_000, 0);
    o.blocks_per_segment = 32;
    o.discard = false;
    format(&dev, &o).unwrap();
    dev.into_vec()
}

fn opts() -> MountOptions {
    MountOptions {
        // Only the workload's fsyncs make checkpoints.
        checkpoint_interval: Duration::from_secs(3600),
        ..MountOptions::default()
    }
}

/// The tree of the freshly formatted image, the state acknowledged before
/// the workload's first step.
fn fresh_tree() -> Tree {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::from_vec(image()));
    tree(&Fs::mount(dev, opts()).unwrap()).unwrap()
}

fn entry(fs: &Fs, ino: u64, kind: FileType) -> lfs::Result<Entry> {
    let a = fs.getattr(ino)?;
    let mut xattrs = BTreeMap::new();
    for name in fs.listxattr(ino)? {
        let v = fs.getxattr(ino, &name)?;
        xattrs.insert(name, v);
    }
    let data = match kind {
        FileType::Regular => fs.read(ino, 0, a.size as u32 + 1)?,
        FileType::Symlink => fs.readlink(ino)?,
        _ => Vec::new(),
    };
    Ok(Entry {
        ino,
        kind,
        mode: a.mode,
        uid: a.uid,
        gid: a.gid,
        nlink: a.nlink,
        mtime_ns: a
            .mtime
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
        xattrs,
        data,
    })
}

fn walk(fs: &Fs, ino: u64, prefix: &str, out: &mut Tree) -> lfs::Result<()> {
    let mut cookie = 0;
    loop {
        let batch = fs.readdir(ino, cookie)?;
        let Some(last) = batch.last() else { break };
        cookie = last.cookie;
        for e in batch {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let path = format!("{prefix}/{}", String::from_utf8_lossy(&e.name));
            out.insert(path.clone(), entry(fs, e.ino, e.kind)?);
            if e.kind == FileType::Directory {
                walk(fs, e.ino, &path, out)?;
            }
        }
    }
    Ok(())
}

fn tree(fs: &Fs) -> lfs::Result<Tree> {
    let mut t = Tree::new();
    t.insert("/".into(), entry(fs, ROOT_INO, FileType::Directory)?);
    walk(fs, ROOT_INO, "", &mut t)?;
    Ok(t)
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_mul(31).wrapping_add((i % 253) as u8))
        .collect()
}

/// The states a crash may recover: every acknowledged one, and the one an
/// fsync, sync, checkpoint or cleaning pass was making durable when the
/// crash hit it.
struct Journal {
    acked: Vec<Tree>,
    in_flight: Option<Tree>,
}

impl Journal {
    /// Runs `op`, which must not change the tree but makes it durable.
    fn durable<T>(&mut self, fs: &Fs, op: impl FnOnce() -> lfs::Result<T>) -> lfs::Result<T> {
        self.in_flight = Some(tree(fs)?);
        let r = op()?;
        self.acked.extend(self.in_flight.take());
        Ok(r)
    }

    /// Whether `rec` is a state this crash may recover.
    fn allows(&self, rec: &Tree) -> bool {
        self.acked.last() == Some(rec) || self.in_flight.as_ref() == Some(rec)
    }
}

/// Runs the workload, recording each state as it is made durable. Stops
/// at the first error (the simulated crash).
fn workload(fs: &Fs, j: &mut Journal) -> lfs::Result<()> {
    let r = ROOT_INO;
    let mut files = Vec::new();
    for i in 0..6u8 {
        let f = fs.create(r, format!("f{i}").as_bytes(), 0o644, 0, 0, 0)?;
        fs.write(f.ino, 0, &pattern(i, 3000 + usize::from(i) * 9000))?;
        files.push(f.ino);
        if i % 2 == 1 {
            j.durable(fs, || fs.fsync(f.ino, i % 4 == 1))?;
        }
    }
    fs.rename(r, b"f0", r, b"g0", RenameFlags::default())?;
    j.durable(fs, || fs.fsync(files[0], false))?;
    fs.unlink(r, b"f1")?;
    fs.setattr(
        files[2],
        &SetAttr {
            size: Some(100),
            ..SetAttr::default()
        },
    )?;
    j.durable(fs, || fs.sync())?;
    fs.write(files[3], 5000, &pattern(9, 20_000))?;
    let d = fs.mkdir(r, b"d", 0o755, 0, 0)?;
    let x = fs.create(d.ino, b"x", 0o600, 0, 0, 0)?;
    fs.write(x.ino, 0, b"inside")?;
    j.durable(fs, || fs.fsync(x.ino, false))?;
    fs.fallocate(
        files[4],
        4096,
        8192,
        FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
    )?;
    fs.rename(r, b"g0", d.ino, b"moved", RenameFlags::default())?;
    j.durable(fs, || fs.fsync(files[4], true))?;
    // The rest of the namespace: hard and symbolic links, a FIFO, extended
    // attributes, mode, owner and times, then every kind of rename, an
    // xattr removed and an empty directory removed.
    fs.link(files[3], d.ino, b"hard")?;
    fs.symlink(r, b"sym", b"d/x", 0, 0)?;
    fs.create(r, b"pipe", S_IFIFO | 0o640, 0, 0, 0)?;
    fs.setxattr(files[3], b"user.colour", b"blue", XATTR_CREATE)?;
    fs.setxattr(d.ino, b"user.dir", &pattern(5, 300), 0)?;
    fs.setattr(
        files[2],
        &SetAttr {
            mode: Some(0o4750),
            uid: Some(1000),
            gid: Some(100),
            mtime: Some(TimeSet::At(UNIX_EPOCH + Duration::from_secs(1_234_567_890))),
            ..SetAttr::default()
        },
    )?;
    j.durable(fs, || fs.fsync(files[2], false))?;
    let e = fs.mkdir(r, b"empty", 0o700, 0, 0)?;
    fs.rename(
        r,
        b"sym",
        d.ino,
        b"x",
        RenameFlags {
            exchange: true,
            ..RenameFlags::default()
        },
    )?;
    fs.rename(
        r,
        b"pipe",
        e.ino,
        b"pipe",
        RenameFlags {
            noreplace: true,
            ..RenameFlags::default()
        },
    )?;
    j.durable(fs, || fs.fsync(e.ino, true))?;
    // f3 replaces f2 (one of f3's two links), the xattr goes, the FIFO is
    // unlinked and its directory removed.
    fs.rename(r, b"f3", r, b"f2", RenameFlags::default())?;
    fs.removexattr(files[3], b"user.colour")?;
    fs.unlink(e.ino, b"pipe")?;
    fs.rmdir(r, b"empty")?;
    j.durable(fs, || fs.sync())?;
    for k in 0..4u8 {
        fs.write(files[5], u64::from(k) * 30_000, &pattern(k + 50, 30_000))?;
        j.durable(fs, || fs.sync())?;
    }
    // Checkpoint history and cleaning: a snapshot, overwrites, the old
    // checkpoints deleted, then a cleaning pass over the emptiest segments;
    // each is durable when it returns.
    let snap = j.durable(fs, || fs.make_checkpoint(true))?;
    fs.write(files[5], 0, &pattern(77, 60_000))?;
    j.durable(fs, || fs.sync())?;
    fs.change_cpmode(snap, false)?;
    j.durable(fs, || fs.delete_checkpoints_older_than(Duration::ZERO))?;
    let (usage, _) = fs.segment_usage();
    let mut victims: Vec<(u32, u64)> = usage
        .iter()
        .enumerate()
        .filter(|(_, u)| !u.is_clean() && u.flags & lfs::format::SU_FLAG_ACTIVE == 0)
        .map(|(s, u)| (u.nlive, s as u64))
        .collect();
    victims.sort_unstable();
    let victims: Vec<u64> = victims.into_iter().take(3).map(|(_, s)| s).collect();
    let rep = j.durable(fs, || fs.clean_segments(&victims, Duration::ZERO))?;
    assert!(
        rep.blocks_moved > 0 && rep.segments_freed > 0,
        "the cleaning pass did nothing: {rep:?}"
    );
    Ok(())
}

fn run(mode: CrashMode, at: Option<u64>) -> (u64, Journal, Result<Tree, String>) {
    let fault = Arc::new(FaultDevice::new(MemDevice::from_vec(image())));
    fault.set_crash_mode(mode);
    if let Some(n) = at {
        fault.crash_at_write(n);
    }
    let dev: Arc<dyn BlockDevice> = fault.clone();
    // The fresh filesystem is acknowledged; the mount itself writes the
    // superblock and may be where the crash hits.
    let mut j = Journal {
        acked: vec![fresh_tree()],
        in_flight: None,
    };
    if let Ok(fs) = Fs::mount(dev, opts()) {
        let r = workload(&fs, &mut j);
        if at.is_none() {
            // Without a crash every step must succeed, or the crash points
            // would not cover it.
            r.unwrap_or_else(|e| panic!("the workload failed without a crash: {e}"));
            fs.unmount().unwrap();
        }
    } else {
        assert!(at.is_some(), "fresh image does not mount");
    }
    let writes = fault.writes();
    if !fault.is_crashed() {
        fault.crash_now().unwrap();
    }
    let after = MemDevice::from_vec(fault.durable().snapshot());
    let dev: Arc<dyn BlockDevice> = Arc::new(after);
    let report = lfs::fsck::fsck(dev.clone()).map_err(|e| e.to_string());
    match report {
        Ok(r) if r.is_clean() => {}
        Ok(r) => return (writes, j, Err(format!("fsck: {:?}", r.errors))),
        Err(e) => return (writes, j, Err(format!("fsck: {e}"))),
    }
    let recovered = Fs::mount(dev, opts())
        .map_err(|e| format!("mount failed: {e}"))
        .and_then(|fs| tree(&fs).map_err(|e| format!("reading the tree: {e}")));
    (writes, j, recovered)
}

/// The first path where two trees differ, for a failure message.
fn first_difference(a: &Tree, b: &Tree) -> String {
    let paths: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for p in paths {
        if a.get(p) != b.get(p) {
            let show = |e: Option<&Entry>| match e {
                None => "absent".to_string(),
                Some(e) => format!(
                    "{:?} ino {} mode {:o} {}:{} nlink {} mtime {} xattrs {:?} {} bytes",
                    e.kind,
                    e.ino,
                    e.mode,
                    e.uid,
                    e.gid,
                    e.nlink,
                    e.mtime_ns,
                    e.xattrs
                        .keys()
                        .map(|k| String::from_utf8_lossy(k))
                        .collect::<Vec<_>>(),
                    e.data.len()
                ),
            };
            return format!(
                "{p}: recovered {} / expected {}",
                show(a.get(p)),
                show(b.get(p))
            );
        }
    }
    "no difference".into()
}

/// Crashes the workload at each of its writes under `mode`; returns how
/// many crash images were checked.
fn check(mode: CrashMode) -> u64 {
    let (total, full, rec) = run(mode, None);
    assert_eq!(rec.as_ref().ok(), full.acked.last(), "clean run lost data");
    for n in 1..=total {
        let (_, j, rec) = run(mode, Some(n));
        let rec = rec.unwrap_or_else(|e| panic!("{mode:?} crash at write {n}: {e}"));
        let last = j.acked.len() - 1;
        assert!(
            j.allows(&rec),
            "{mode:?} crash at write {n}: recovered state is neither acknowledged state {last} nor the one being made durable: {}",
            first_difference(&rec, &j.acked[last])
        );
    }
    total
}

fn long() -> bool {
    std::env::var_os("LFS_LONG").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Runs `check` for every mode and prints the figure for RELIABILITY.md.
fn matrix(what: &str, modes: &[CrashMode]) {
    let images: u64 = modes.iter().map(|&m| check(m)).sum();
    eprintln!(
        "crash matrix, {what}: {} modes, {images} crash images, 0 lost",
        modes.len()
    );
}

#[test]
fn the_workload_writes_enough_to_crash_inside_every_step() {
    let (writes, j, rec) = run(CrashMode::DropAll, None);
    assert!(writes > 20, "only {writes} writes");
    assert_eq!(
        j.acked.len(),
        19,
        "the workload's acknowledged states changed"
    );
    let last = rec.unwrap();
    for kind in [FileType::Regular, FileType::Directory, FileType::Symlink] {
        assert!(
            last.values().any(|e| e.kind == kind),
            "no {kind:?} survives the workload"
        );
    }
    assert!(last
        .values()
        .any(|e| e.nlink == 2 && e.kind == FileType::Regular));
    assert!(last.values().any(|e| !e.xattrs.is_empty()));
}

#[test]
fn crash_at_every_write_dropping_or_keeping_unflushed_writes() {
    matrix(
        "drop all / keep all",
        &[CrashMode::DropAll, CrashMode::KeepAll],
    );
}

#[test]
fn crash_at_every_write_keeping_a_prefix_of_unflushed_writes() {
    let modes: Vec<CrashMode> = (1..=if long() { 16 } else { 4 })
        .map(CrashMode::KeepPrefix)
        .collect();
    matrix("keep a prefix", &modes);
}

#[test]
fn crash_at_every_write_tearing_the_last_write_at_512_bytes() {
    // 1..8 sectors tear inside the first block; 9 just after it; larger
    // counts inside a log's later blocks.
    let tears: Vec<usize> = if long() {
        (1..=72).collect()
    } else {
        vec![1, 3, 7, 8, 9, 17, 64]
    };
    let modes: Vec<CrashMode> = tears
        .into_iter()
        .map(|sectors| CrashMode::TearLast { sectors })
        .collect();
    matrix("tear the last write", &modes);
}

#[test]
fn crash_at_every_write_with_random_reorder_and_tears() {
    let seeds: u64 = if long() {
        std::env::var("LFS_CRASH_SEEDS")
            .ok()
            .map(|v| v.parse().expect("LFS_CRASH_SEEDS must be a number"))
            .unwrap_or(200)
    } else {
        8
    };
    let modes: Vec<CrashMode> = (1..=seeds).map(|seed| CrashMode::Random { seed }).collect();
    matrix("random subsets, torn and reordered", &modes);
}
