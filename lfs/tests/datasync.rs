//! fdatasync through data-sync logs: what it writes, what a crash keeps,
//! when it writes a checkpoint instead, and recovery's roll-forward.
//! (The crash matrix, crash.rs, crashes inside these writes too.)

use std::sync::Arc;

use lfs::blockdev::{BlockDevice, FaultDevice, MemDevice};
use lfs::format::{FEATURE_INCOMPAT_DATA_SYNC, FEATURE_INCOMPAT_DAT_JOURNAL, ROOT_INO};
use lfs::fs::{Fs, MountOptions, SetAttr};
use lfs::mkfs::{format, MkfsOptions};

fn fresh() -> Arc<FaultDevice<MemDevice>> {
    let dev = MemDevice::new(24 << 20);
    let mut o = MkfsOptions::new([4; 16], 0xd5, 1_700_000_000, 0);
    o.blocks_per_segment = 32;
    o.discard = false;
    format(&dev, &o).unwrap();
    Arc::new(FaultDevice::new(dev))
}

fn opts() -> MountOptions {
    MountOptions {
        // Only the test's own syncs write.
        checkpoint_interval: std::time::Duration::from_secs(3600),
        ..MountOptions::default()
    }
}

/// The device as a crash now would leave it (unflushed writes dropped),
/// checked by fsck.
fn crash_image(dev: &FaultDevice<MemDevice>) -> Arc<dyn BlockDevice> {
    dev.crash_now().unwrap();
    let img: Arc<dyn BlockDevice> = Arc::new(MemDevice::from_vec(dev.durable().snapshot()));
    let r = lfs::fsck::fsck(img.clone()).unwrap();
    assert!(r.is_clean(), "fsck of the crash image: {:#?}", r.errors);
    img
}

fn bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i % 241) as u8))
        .collect()
}

#[test]
fn fdatasync_writes_a_data_sync_log_and_a_crash_keeps_that_file_only() {
    let dev = fresh();
    let fs = Fs::mount(dev.clone(), opts()).unwrap();
    let a = fs.create(ROOT_INO, b"a", 0o644, 0, 0, 0).unwrap().ino;
    let b = fs.create(ROOT_INO, b"b", 0o644, 0, 0, 0).unwrap().ino;
    fs.write(a, 0, &bytes(1, 100_000)).unwrap();
    fs.write(b, 0, &bytes(2, 10_000)).unwrap();
    fs.sync().unwrap();

    // a: overwritten in the middle (sub-block too) and extended over more
    // than one segment; b and the namespace change too, unsynced.
    let mut want_a = bytes(1, 100_000);
    for (off, data) in [(5_000usize, bytes(3, 20_000)), (99_000, bytes(4, 250_000))] {
        fs.write(a, off as u64, &data).unwrap();
        want_a.resize(want_a.len().max(off + data.len()), 0);
        want_a[off..off + data.len()].copy_from_slice(&data);
    }
    fs.write(a, 3, b"xyz").unwrap();
    want_a[3..6].copy_from_slice(b"xyz");
    fs.write(b, 0, b"unsynced").unwrap();
    fs.create(ROOT_INO, b"c", 0o644, 0, 0, 0).unwrap();
    let mtime = fs.getattr(a).unwrap().mtime;

    let (checkpoints, flushes) = (fs.stats().counter("checkpoints").unwrap(), dev.flushes());
    fs.fsync(a, true).unwrap();
    assert_eq!(fs.stats().counter("data_sync_writes").unwrap(), 1);
    assert_eq!(
        fs.stats().counter("checkpoints").unwrap(),
        checkpoints,
        "no checkpoint"
    );
    assert_eq!(dev.flushes(), flushes + 1, "one flush");
    assert_eq!(
        fs.read(a, 0, 1 << 20).unwrap(),
        want_a,
        "read back before the crash"
    );

    let img = crash_image(&dev);
    let fs = Fs::mount(img.clone(), opts()).unwrap();
    let rf = fs.recovery_report().rolled_forward;
    assert!(rf.logs >= 2, "the write spans segments: {rf:?}");
    assert_eq!(rf.files, 1);
    // The blocks the writes since the checkpoint touched: 0 to 6 and 24
    // to 85.
    assert_eq!(rf.blocks, 7 + 62);
    let ga = fs.getattr(a).unwrap();
    assert_eq!(ga.size, want_a.len() as u64);
    assert_eq!(ga.mtime, mtime);
    assert_eq!(fs.read(a, 0, 1 << 20).unwrap(), want_a);
    assert_eq!(fs.read(b, 0, 1 << 20).unwrap(), bytes(2, 10_000));
    assert!(fs.lookup(ROOT_INO, b"c").is_err(), "c was never synced");
    // The mount made what it rolled forward a checkpoint: the next crash
    // needs no roll-forward.
    fs.write(b, 0, b"later").unwrap();
    drop(fs);
    let r = lfs::fsck::fsck(img.clone()).unwrap();
    assert!(r.is_clean(), "{:#?}", r.errors);
    let fs = Fs::mount(img, opts()).unwrap();
    assert_eq!(fs.recovery_report().rolled_forward.logs, 0);
    assert_eq!(fs.read(a, 0, 1 << 20).unwrap(), want_a);
    fs.unmount().unwrap();
}

#[test]
fn fdatasync_writes_a_checkpoint_when_more_than_data_changed() {
    let dev = fresh();
    let fs = Fs::mount(dev.clone(), opts()).unwrap();
    let old = fs.create(ROOT_INO, b"old", 0o644, 0, 0, 0).unwrap().ino;
    fs.write(old, 0, &bytes(5, 9000)).unwrap();
    fs.sync().unwrap();
    type Change = Box<dyn Fn(&Fs, u64)>;
    let cases: Vec<(&str, Change)> = vec![
        (
            "a new file",
            Box::new(|fs: &Fs, _| {
                let n = fs.create(ROOT_INO, b"new", 0o644, 0, 0, 0).unwrap().ino;
                fs.write(n, 0, b"data").unwrap();
            }),
        ),
        (
            "chmod",
            Box::new(|fs: &Fs, f| {
                fs.write(f, 0, b"data").unwrap();
                let s = SetAttr {
                    mode: Some(0o600),
                    ..SetAttr::default()
                };
                fs.setattr(f, &s).unwrap();
            }),
        ),
        (
            "truncation",
            Box::new(|fs: &Fs, f| {
                let s = SetAttr {
                    size: Some(10),
                    ..SetAttr::default()
                };
                fs.setattr(f, &s).unwrap();
                fs.write(f, 0, b"data").unwrap();
            }),
        ),
        (
            "an extended attribute",
            Box::new(|fs: &Fs, f| {
                fs.write(f, 0, b"data").unwrap();
                fs.setxattr(f, b"user.x", b"1", 0).unwrap();
            }),
        ),
    ];
    for (what, change) in cases {
        change(&fs, old);
        let ino = fs.lookup(ROOT_INO, b"new").map_or(old, |a| a.ino);
        let (cps, dsyncs) = (
            fs.stats().counter("checkpoints").unwrap(),
            fs.stats().counter("data_sync_writes").unwrap(),
        );
        fs.fsync(ino, true).unwrap();
        assert_eq!(
            fs.stats().counter("checkpoints").unwrap(),
            cps + 1,
            "{what}: a checkpoint"
        );
        assert_eq!(
            fs.stats().counter("data_sync_writes").unwrap(),
            dsyncs,
            "{what}: no data-sync log"
        );
        if ino != old {
            fs.unlink(ROOT_INO, b"new").unwrap();
        }
        fs.sync().unwrap();
    }
    // With nothing changed, fdatasync writes nothing at all.
    let (writes, flushes) = (dev.writes(), dev.flushes());
    fs.fsync(old, true).unwrap();
    assert_eq!((dev.writes(), dev.flushes()), (writes, flushes));
    // A size change alone fits a data-sync log.
    let s = SetAttr {
        size: Some(1 << 20),
        ..SetAttr::default()
    };
    fs.setattr(old, &s).unwrap();
    fs.fsync(old, true).unwrap();
    assert_eq!(fs.stats().counter("data_sync_writes").unwrap(), 1);
    let img = crash_image(&dev);
    let fs = Fs::mount(img, opts()).unwrap();
    assert_eq!(fs.getattr(old).unwrap().size, 1 << 20);
    assert_eq!(fs.recovery_report().rolled_forward.files, 1);
    assert_eq!(fs.recovery_report().rolled_forward.blocks, 0);
}

#[test]
fn concurrent_fdatasyncs_all_survive_a_crash() {
    const FILES: usize = 8;
    let dev = fresh();
    let fs = Fs::mount(dev.clone(), opts()).unwrap();
    let inos: Vec<u64> = (0..FILES)
        .map(|i| {
            let ino = fs
                .create(ROOT_INO, format!("f{i}").as_bytes(), 0o644, 0, 0, 0)
                .unwrap()
                .ino;
            fs.write(ino, 0, b"first").unwrap();
            ino
        })
        .collect();
    fs.sync().unwrap();
    std::thread::scope(|s| {
        for (i, &ino) in inos.iter().enumerate() {
            let fs = &fs;
            s.spawn(move || {
                for round in 0..5u8 {
                    let data = bytes(i as u8 * 16 + round, 6000 + 1000 * usize::from(round));
                    fs.write(ino, 0, &data).unwrap();
                    fs.fsync(ino, true).unwrap();
                }
            });
        }
    });
    let writes = fs.stats().counter("data_sync_writes").unwrap();
    assert!(
        (1..=(FILES * 5) as u64).contains(&writes),
        "{writes} data-sync writes"
    );
    let img = crash_image(&dev);
    let fs = Fs::mount(img, opts()).unwrap();
    for (i, &ino) in inos.iter().enumerate() {
        let want = bytes(i as u8 * 16 + 4, 10_000);
        assert_eq!(fs.read(ino, 0, 1 << 20).unwrap(), want, "file {i}");
    }
}

#[test]
fn a_read_only_mount_rolls_forward_in_memory_and_writes_nothing() {
    let dev = fresh();
    let fs = Fs::mount(dev.clone(), opts()).unwrap();
    let a = fs.create(ROOT_INO, b"a", 0o644, 0, 0, 0).unwrap().ino;
    fs.sync().unwrap();
    fs.write(a, 0, b"synced by fdatasync").unwrap();
    fs.fsync(a, true).unwrap();
    let img = crash_image(&dev);
    let contents = |d: &Arc<dyn BlockDevice>| {
        let mut b = vec![0u8; d.len() as usize];
        d.read_at(&mut b, 0).unwrap();
        b
    };
    let before = contents(&img);
    let ro = MountOptions {
        read_only: true,
        ..opts()
    };
    let fs = Fs::mount(img.clone(), ro).unwrap();
    assert_eq!(fs.recovery_report().rolled_forward.files, 1);
    assert_eq!(fs.read(a, 0, 100).unwrap(), b"synced by fdatasync");
    drop(fs);
    assert!(before == contents(&img), "a read-only mount wrote");
}

#[test]
fn a_format_1_0_filesystem_is_upgraded_by_its_first_read_write_mount() {
    let dev = fresh();
    // Make it a 1.0 filesystem: feature bits clear, version 1.0, in both
    // superblock copies.
    {
        let pair = lfs::inspect::read_superblocks(dev.as_ref()).unwrap();
        let mut sb = pair.current().unwrap().clone();
        sb.feature_incompat &= !(FEATURE_INCOMPAT_DATA_SYNC | FEATURE_INCOMPAT_DAT_JOURNAL);
        sb.version_minor = 0;
        let bs = u64::from(sb.block_size);
        dev.write_all_at(&sb.encode(), 0).unwrap();
        dev.write_all_at(&sb.encode(), sb.secondary_block() * bs)
            .unwrap();
        dev.flush().unwrap();
    }
    let ro = MountOptions {
        read_only: true,
        ..opts()
    };
    drop(Fs::mount(dev.clone(), ro).unwrap());
    let sb = lfs::inspect::read_superblocks(dev.as_ref()).unwrap();
    assert_eq!(
        sb.current().unwrap().feature_incompat,
        0,
        "read-only: unchanged"
    );
    let fs = Fs::mount(dev.clone(), opts()).unwrap();
    fs.unmount().unwrap();
    let pair = lfs::inspect::read_superblocks(dev.as_ref()).unwrap();
    let sb = pair.current().unwrap();
    assert_eq!(
        sb.feature_incompat,
        FEATURE_INCOMPAT_DATA_SYNC | FEATURE_INCOMPAT_DAT_JOURNAL
    );
    assert_eq!(sb.version_minor, 2);
}

/// A block a data-sync log placed, queued by a cleaning pass and
/// overwritten before the pass's checkpoint, is freed by that checkpoint
/// and must not be moved (it once was: the cold segment kept a live count
/// for a block that did not exist, and fsck found it).
#[test]
fn a_block_placed_by_fdatasync_and_overwritten_is_not_moved_by_cleaning() {
    let dev = fresh();
    let fs = Fs::mount(dev.clone(), opts()).unwrap();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap().ino;
    fs.write(f, 0, &bytes(0, 4096)).unwrap();
    fs.sync().unwrap();
    // Rounds of data-sync writes over 41 blocks, each freeing the last
    // round's copies at once; the last round leaves block 0 alone, so its
    // copy stays live in a segment otherwise dead.
    for round in 0..4u8 {
        let first = if round == 3 { 1 } else { 0 };
        for b in first..41u64 {
            fs.write(f, b * 4096, &bytes(round * 41 + b as u8, 4096))
                .unwrap();
        }
        fs.fsync(f, true).unwrap();
    }
    assert_eq!(fs.stats().counter("data_sync_writes").unwrap(), 4);
    let (usage, _) = fs.segment_usage();
    let victims: Vec<u64> = usage
        .iter()
        .enumerate()
        .filter(|(_, u)| {
            !u.is_clean() && u.flags & lfs::format::SU_FLAG_ACTIVE == 0 && u.nlive <= 2
        })
        .map(|(s, _)| s as u64)
        .collect();
    assert!(!victims.is_empty(), "{usage:?}");
    // Overwritten in memory only: the pass's checkpoint frees the copy.
    fs.write(f, 0, b"new block 0").unwrap();
    let rep = fs
        .clean_segments(&victims, std::time::Duration::ZERO)
        .unwrap();
    assert!(rep.segments_freed > 0, "{rep:?}");
    let mut want = bytes(2 * 41, 4096);
    want[..11].copy_from_slice(b"new block 0");
    assert_eq!(fs.read(f, 0, 4096).unwrap(), want);
    fs.unmount().unwrap();
    drop(fs);
    let d: Arc<dyn BlockDevice> = dev;
    let r = lfs::fsck::fsck(d).unwrap();
    assert!(r.is_clean(), "{:#?}", r.errors);
}
