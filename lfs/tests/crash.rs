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

mod common;

use std::sync::Arc;

use common::{first_difference, fresh_tree, image, long, opts, tree, workload, Journal, Tree};
use lfs::blockdev::{BlockDevice, CrashMode, FaultDevice, MemDevice};
use lfs::format::FileType;
use lfs::fs::Fs;

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
        in_flight_alt: None,
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
        22,
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
