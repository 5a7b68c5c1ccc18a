//! The scripted workload the crash matrix (crash.rs) and the I/O error
//! tests (ioerrors.rs) run; the tree a user can observe and the journal
//! of the states the workload made durable are in [`durable`], the
//! operation-sequence crash target in [`ops`] and [`plan`].

#![allow(dead_code)]

pub mod durable;
pub mod ops;
pub mod plan;

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

// What crash.rs and ioerrors.rs use; each test binary uses part of it.
#[allow(unused_imports)]
pub use durable::{data_sync_writes, first_difference, tree, Journal, Tree};

use lfs::blockdev::{BlockDevice, MemDevice};
use lfs::format::ROOT_INO;
use lfs::fs::{
    Fs, MountOptions, RenameFlags, SetAttr, TimeSet, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE,
    XATTR_CREATE,
};
use lfs::mkfs::{format, MkfsOptions};

pub const DEV_LEN: u64 = 12 << 20;
pub const S_IFIFO: u32 = 0o010000;

pub fn image() -> Vec<u8> {
    let dev = MemDevice::new(DEV_LEN);
    let mut o = MkfsOptions::new([3; 16], 0x5eed, 1_700_000_000, 0);
    o.blocks_per_segment = 32;
    o.discard = false;
    format(&dev, &o).unwrap();
    dev.into_vec()
}

pub fn opts() -> MountOptions {
    MountOptions {
        // Only the workload's fsyncs make checkpoints.
        checkpoint_interval: Duration::from_secs(3600),
        ..MountOptions::default()
    }
}

/// The tree of the freshly formatted image, the state acknowledged before
/// the workload's first step.
pub fn fresh_tree() -> Tree {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::from_vec(image()));
    tree(&Fs::mount(dev, opts()).unwrap()).unwrap()
}

pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_mul(31).wrapping_add((i % 253) as u8))
        .collect()
}

/// Runs the workload, recording each state as it is made durable. Stops
/// at the first error (the simulated crash).
pub fn workload(fs: &Fs, j: &mut Journal) -> lfs::Result<()> {
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
    // fdatasync of files whose only changes since the checkpoint are data,
    // size and times writes data-sync logs, not checkpoints: the new name
    // beside them is not made durable. The first is an overwrite and an
    // extension of 50 blocks, more than a 32-block segment holds, so its
    // write is several logs, all or nothing.
    let syncs = data_sync_writes(fs);
    fs.write(files[5], 1000, &pattern(60, 5000))?;
    fs.write(files[5], 130_000, &pattern(61, 200_000))?;
    fs.create(r, b"never-synced", 0o644, 0, 0, 0)?;
    j.file_durable(fs, files[5], || fs.fsync(files[5], true))?;
    fs.write(files[4], 10, b"tail")?;
    fs.write(files[5], 200_000, &pattern(62, 9000))?;
    j.file_durable(fs, files[4], || fs.fsync(files[4], true))?;
    j.file_durable(fs, files[5], || fs.fsync(files[5], true))?;
    assert_eq!(
        data_sync_writes(fs) - syncs,
        3,
        "each fdatasync wrote a data-sync log"
    );
    fs.unlink(r, b"never-synced")?;
    // Checkpoint history and cleaning: a snapshot, overwrites, the old
    // checkpoints deleted, then a cleaning pass over the emptiest segments;
    // each is durable when it returns.
    let snap = j.durable(fs, || fs.make_checkpoint(true))?;
    // From here a cleaner separates writes by lifespan (side logs of file
    // data, written before the super root); this deletes nothing.
    let place = lfs::fs::clean::Placement {
        warm: Vec::new(),
        separate_writes: true,
        warm_young: false,
        strict_protection: false,
    };
    fs.clean_segments_placed(&[], &place, Duration::from_secs(1 << 30))?;
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
    // The emptiest victim's survivors to the warm head, the others' young
    // blocks too, their old ones to the cold head.
    let place = lfs::fs::clean::Placement {
        warm: victims[..1].to_vec(),
        separate_writes: true,
        warm_young: true,
        strict_protection: false,
    };
    let rep = j.durable(fs, || {
        fs.clean_segments_placed(&victims, &place, Duration::ZERO)
    })?;
    assert!(
        rep.blocks_moved > 0 && rep.segments_freed > 0,
        "the cleaning pass did nothing: {rep:?}"
    );
    Ok(())
}

pub fn long() -> bool {
    std::env::var_os("LFS_LONG").is_some_and(|v| !v.is_empty() && v != "0")
}
