//! A damaged last checkpoint: a mount refuses it (never silently older),
//! its older checkpoints stay readable, and a rollback makes the newest
//! intact one current (`lfs::checkpoint::rollback`, issue 26 item 5).

use std::sync::Arc;

use lfs::blockdev::{BlockDevice, MemDevice};
use lfs::checkpoint::rollback::{newest_intact, rollback};
use lfs::format::ROOT_INO;
use lfs::fs::{Fs, MountOptions};
use lfs::inspect::read_superblocks;
use lfs::mkfs::{format, MkfsOptions};

const DEV_LEN: u64 = 12 << 20;

fn write_file(dev: &Arc<dyn BlockDevice>, name: &[u8], data: &[u8]) -> u64 {
    let fs = Fs::mount(Arc::clone(dev), MountOptions::default()).unwrap();
    let f = fs.create(ROOT_INO, name, 0o644, 0, 0, 0).unwrap();
    fs.write(f.ino, 0, data).unwrap();
    fs.unmount().unwrap();
    read_superblocks(dev.as_ref())
        .unwrap()
        .current()
        .unwrap()
        .last_cno
}

#[test]
fn a_damaged_last_checkpoint_is_rolled_back_explicitly() {
    let mem = Arc::new(MemDevice::new(DEV_LEN));
    let mut o = MkfsOptions::new([7; 16], 0x5eed, 1_700_000_000, 0);
    o.blocks_per_segment = 32;
    o.discard = false;
    format(mem.as_ref(), &o).unwrap();
    let dev: Arc<dyn BlockDevice> = mem.clone();
    let kept = write_file(&dev, b"kept", b"before");
    let lost = write_file(&dev, b"lost", b"after");
    assert!(lost > kept);
    assert_eq!(newest_intact(Arc::clone(&dev)).unwrap(), None);
    assert!(matches!(
        rollback(Arc::clone(&dev), kept),
        Err(lfs::Error::InvalidArgument(_))
    ));

    // Garbage over the last checkpoint's log.
    let sb = read_superblocks(dev.as_ref())
        .unwrap()
        .current()
        .unwrap()
        .clone();
    let bs = u64::from(sb.block_size);
    dev.write_all_at(&vec![0xa5; bs as usize], sb.last_log_block * bs)
        .unwrap();

    let e = Fs::mount(Arc::clone(&dev), MountOptions::default()).unwrap_err();
    assert!(matches!(e, lfs::Error::Corrupted { .. }), "{e}");
    let (intact, damaged) = newest_intact(Arc::clone(&dev)).unwrap().unwrap();
    assert_eq!(damaged, lost);
    assert!(intact < lost && intact >= kept, "{intact}");

    // Read-only, the intact checkpoint mounts.
    let ro = Fs::mount_checkpoint(Arc::clone(&dev), intact).unwrap();
    let f = ro.lookup(ROOT_INO, b"kept").unwrap();
    assert_eq!(ro.read(f.ino, 0, 100).unwrap(), b"before");
    drop(ro);

    let report = lfs::fsck::fsck(Arc::clone(&dev)).unwrap();
    assert_eq!(report.rollback_to, Some(intact));
    assert_eq!(report.cno, intact);
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);

    // Only the newest intact checkpoint can become current.
    if intact > 1 {
        assert!(rollback(Arc::clone(&dev), 1).is_err());
    }
    let done = rollback(Arc::clone(&dev), intact).unwrap();
    assert_eq!((done.cno, done.damaged), (intact, lost));
    let pair = read_superblocks(dev.as_ref()).unwrap();
    for copy in [&pair.primary, &pair.secondary] {
        assert_eq!(copy.as_ref().unwrap().last_cno, intact);
    }
    assert!(lfs::fsck::fsck(Arc::clone(&dev)).unwrap().is_clean());

    // Read-write again: the kept file is there, the lost one is not, and
    // the filesystem goes on.
    let fs = Fs::mount(Arc::clone(&dev), MountOptions::default()).unwrap();
    let f = fs.lookup(ROOT_INO, b"kept").unwrap();
    assert_eq!(fs.read(f.ino, 0, 100).unwrap(), b"before");
    assert!(matches!(
        fs.lookup(ROOT_INO, b"lost"),
        Err(lfs::Error::NotFound)
    ));
    let g = fs.create(ROOT_INO, b"new", 0o644, 0, 0, 0).unwrap();
    fs.write(g.ino, 0, b"later").unwrap();
    fs.unmount().unwrap();
    assert!(lfs::fsck::fsck(dev).unwrap().is_clean());
}
