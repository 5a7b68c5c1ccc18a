//! Crash tests on FaultDevice: a scripted workload with fsyncs, snapshot
//! changes, checkpoint deletion and a cleaning pass, crashed at every one of
//! its writes under several ways of losing unflushed writes.
//! After each crash the image must mount and show exactly the state of the
//! last acknowledged fsync or of the checkpoint that was being written.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lfs::blockdev::{BlockDevice, CrashMode, FaultDevice, MemDevice};
use lfs::format::{FileType, ROOT_INO};
use lfs::fs::{Fs, MountOptions, RenameFlags, SetAttr, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE};
use lfs::mkfs::{format, MkfsOptions};

const DEV_LEN: u64 = 12 << 20;

/// path → Some(contents) for files, None for directories.
type Tree = BTreeMap<String, Option<Vec<u8>>>;

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
            if e.kind == FileType::Directory {
                out.insert(path.clone(), None);
                walk(fs, e.ino, &path, out)?;
            } else {
                let a = fs.getattr(e.ino)?;
                out.insert(path, Some(fs.read(e.ino, 0, a.size as u32 + 1)?));
            }
        }
    }
    Ok(())
}

fn tree(fs: &Fs) -> lfs::Result<Tree> {
    let mut t = Tree::new();
    walk(fs, ROOT_INO, "", &mut t)?;
    Ok(t)
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_mul(31).wrapping_add((i % 253) as u8))
        .collect()
}

/// Runs the workload; after every acknowledged fsync, records the tree.
/// Stops at the first error (the simulated crash).
fn workload(fs: &Fs, acked: &mut Vec<Tree>) -> lfs::Result<()> {
    let r = ROOT_INO;
    let mut files = Vec::new();
    for i in 0..6u8 {
        let f = fs.create(r, format!("f{i}").as_bytes(), 0o644, 0, 0, 0)?;
        fs.write(f.ino, 0, &pattern(i, 3000 + usize::from(i) * 9000))?;
        files.push(f.ino);
        if i % 2 == 1 {
            fs.fsync(f.ino, i % 4 == 1)?;
            acked.push(tree(fs)?);
        }
    }
    fs.rename(r, b"f0", r, b"g0", RenameFlags::default())?;
    fs.fsync(files[0], false)?;
    acked.push(tree(fs)?);
    fs.unlink(r, b"f1")?;
    fs.setattr(
        files[2],
        &SetAttr {
            size: Some(100),
            ..SetAttr::default()
        },
    )?;
    fs.sync()?;
    acked.push(tree(fs)?);
    fs.write(files[3], 5000, &pattern(9, 20_000))?;
    let d = fs.mkdir(r, b"d", 0o755, 0, 0)?;
    let x = fs.create(d.ino, b"x", 0o600, 0, 0, 0)?;
    fs.write(x.ino, 0, b"inside")?;
    fs.fsync(x.ino, false)?;
    acked.push(tree(fs)?);
    fs.fallocate(
        files[4],
        4096,
        8192,
        FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
    )?;
    fs.rename(r, b"g0", d.ino, b"moved", RenameFlags::default())?;
    fs.fsync(files[4], true)?;
    acked.push(tree(fs)?);
    for k in 0..4u8 {
        fs.write(files[5], u64::from(k) * 30_000, &pattern(k + 50, 30_000))?;
        fs.sync()?;
        acked.push(tree(fs)?);
    }
    // Checkpoint history and cleaning: a snapshot, overwrites, the old
    // checkpoints deleted, then a cleaning pass over the emptiest segments;
    // each is durable when it returns.
    let snap = fs.make_checkpoint(true)?;
    acked.push(tree(fs)?);
    fs.write(files[5], 0, &pattern(77, 60_000))?;
    fs.sync()?;
    acked.push(tree(fs)?);
    fs.change_cpmode(snap, false)?;
    fs.delete_checkpoints_older_than(Duration::ZERO)?;
    acked.push(tree(fs)?);
    let (usage, _) = fs.segment_usage();
    let mut victims: Vec<(u32, u64)> = usage
        .iter()
        .enumerate()
        .filter(|(_, u)| !u.is_clean() && u.flags & lfs::format::SU_FLAG_ACTIVE == 0)
        .map(|(s, u)| (u.nlive, s as u64))
        .collect();
    victims.sort_unstable();
    let victims: Vec<u64> = victims.into_iter().take(3).map(|(_, s)| s).collect();
    let rep = fs.clean_segments(&victims, Duration::ZERO)?;
    assert!(
        rep.blocks_moved > 0 && rep.segments_freed > 0,
        "the cleaning pass did nothing: {rep:?}"
    );
    acked.push(tree(fs)?);
    Ok(())
}

fn run(mode: CrashMode, at: Option<u64>) -> (u64, Vec<Tree>, Result<Tree, String>) {
    let fault = Arc::new(FaultDevice::new(MemDevice::from_vec(image())));
    fault.set_crash_mode(mode);
    if let Some(n) = at {
        fault.crash_at_write(n);
    }
    let dev: Arc<dyn BlockDevice> = fault.clone();
    // A fresh filesystem is empty; the mount itself writes the superblock
    // and may be where the crash hits.
    let mut acked = vec![Tree::new()];
    if let Ok(fs) = Fs::mount(dev, opts()) {
        let r = workload(&fs, &mut acked);
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
        Ok(r) => return (writes, acked, Err(format!("fsck: {:?}", r.errors))),
        Err(e) => return (writes, acked, Err(format!("fsck: {e}"))),
    }
    let recovered = Fs::mount(dev, opts())
        .map_err(|e| e.to_string())
        .and_then(|fs| tree(&fs).map_err(|e| e.to_string()));
    (writes, acked, recovered)
}

fn check(mode: CrashMode) -> u64 {
    let (total, full, rec) = run(mode, None);
    assert_eq!(rec.as_ref().ok(), full.last(), "clean run lost data");
    for n in 1..=total {
        let (_, acked, rec) = run(mode, Some(n));
        let rec = rec.unwrap_or_else(|e| panic!("{mode:?} crash at write {n}: mount failed: {e}"));
        let last = acked.len() - 1;
        // Either the last acknowledged state, or the next checkpoint that
        // was being written when the crash hit.
        let ok = rec == acked[last] || full.get(last + 1) == Some(&rec);
        assert!(
            ok,
            "{mode:?} crash at write {n}: recovered state is neither acknowledged state {last} nor the next\n\
             recovered: {:?}\nacked: {:?}",
            rec.keys().collect::<Vec<_>>(),
            acked[last].keys().collect::<Vec<_>>()
        );
    }
    total
}

#[test]
fn crash_at_every_write_dropping_unflushed_writes() {
    let writes = check(CrashMode::DropAll);
    eprintln!("crash points per mode: {writes}");
    assert!(writes > 10, "only {writes} writes");
}

#[test]
fn crash_at_every_write_keeping_unflushed_writes() {
    check(CrashMode::KeepAll);
}

#[test]
fn crash_at_every_write_tearing_the_last_write() {
    check(CrashMode::TearLast { sectors: 3 });
}

#[test]
fn crash_at_every_write_with_random_reorder_and_tears() {
    for seed in 1..=4 {
        check(CrashMode::Random { seed });
    }
}
