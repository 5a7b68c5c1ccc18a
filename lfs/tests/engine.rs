//! The engine without a mount: operations, remount, durability.

use std::sync::Arc;

use lfs::blockdev::{BlockDevice, MemDevice};
use lfs::format::ROOT_INO;
use lfs::fs::{Fs, MountOptions, RenameFlags, SetAttr};
use lfs::mkfs::{format, MkfsOptions};
use lfs::Error;

fn fresh(len: u64) -> Arc<MemDevice> {
    let dev = Arc::new(MemDevice::new(len));
    let mut o = MkfsOptions::new([1; 16], 0xabcd, 1_700_000_000, 0);
    o.blocks_per_segment = 64;
    o.discard = false;
    format(dev.as_ref(), &o).unwrap();
    dev
}

/// Mounts `dev` after checking that fsck finds it consistent.
fn mount(dev: &Arc<MemDevice>) -> Arc<Fs> {
    let d: Arc<dyn BlockDevice> = dev.clone();
    let r = lfs::fsck::fsck(d.clone()).unwrap();
    assert!(r.is_clean(), "fsck: {:#?}", r.errors);
    Fs::mount(d, MountOptions::default()).unwrap()
}

#[test]
fn files_and_directories_survive_remount() {
    let dev = fresh(32 << 20);
    let fs = mount(&dev);
    let d = fs.mkdir(ROOT_INO, b"dir", 0o755, 0, 0).unwrap();
    let f = fs.create(d.ino, b"file", 0o644, 0, 1000, 1000).unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(fs.write(f.ino, 0, &data).unwrap() as usize, data.len());
    assert_eq!(fs.read(f.ino, 0, 400_000).unwrap(), data);
    assert_eq!(fs.read(f.ino, 4000, 200).unwrap(), data[4000..4200]);
    let dsize = fs.getattr(d.ino).unwrap().size;
    assert_eq!(dsize, 4096, "a directory's size follows its blocks at once");
    fs.symlink(ROOT_INO, b"link", b"dir/file", 0, 0).unwrap();
    fs.setxattr(f.ino, b"user.k", b"v", 0).unwrap();
    fs.unmount().unwrap();
    drop(fs);

    let fs = mount(&dev);
    let d2 = fs.lookup(ROOT_INO, b"dir").unwrap();
    assert_eq!(d2.ino, d.ino);
    assert_eq!(d2.size, dsize);
    let f2 = fs.lookup(d.ino, b"file").unwrap();
    assert_eq!(f2.size, data.len() as u64);
    assert_eq!(f2.uid, 1000);
    assert_eq!(fs.read(f2.ino, 0, 400_000).unwrap(), data);
    let l = fs.lookup(ROOT_INO, b"link").unwrap();
    assert_eq!(fs.readlink(l.ino).unwrap(), b"dir/file");
    assert_eq!(fs.getxattr(f2.ino, b"user.k").unwrap(), b"v");
    let names: Vec<Vec<u8>> = fs
        .readdir(ROOT_INO, 0)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(
        names,
        vec![
            b".".to_vec(),
            b"..".to_vec(),
            b"dir".to_vec(),
            b"link".to_vec()
        ]
    );
    fs.unmount().unwrap();
}

#[test]
fn overwrite_truncate_unlink_and_space_is_reused() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    let chunk = vec![7u8; 1 << 20];
    // Write 40 MiB through a 16 MiB device: only possible if the blocks
    // old checkpoints kept are freed once they are deleted (what cleaning
    // does with no protection period), and dead segments reused.
    for round in 0..40u64 {
        if let Err(e) = fs.write(f.ino, (round % 4) << 20, &chunk) {
            panic!("round {round}: {e} {:?}", fs.statfs());
        }
        fs.sync().unwrap();
        let (deleted, _) = fs
            .delete_checkpoints_older_than(std::time::Duration::ZERO)
            .unwrap();
        assert!(round == 0 || deleted >= 1, "round {round}");
        if std::env::var("LFS_DEBUG").is_ok() {
            let (u, c) = fs.segment_usage();
            let v: Vec<String> = u
                .iter()
                .map(|u| format!("{}/{}/{}", u.nlive, u.nblocks, u.flags))
                .collect();
            eprintln!("round {round}: clean {c}: {}", v.join(" "));
        }
    }
    fs.setattr(
        f.ino,
        &SetAttr {
            size: Some(5000),
            ..SetAttr::default()
        },
    )
    .unwrap();
    assert_eq!(fs.read(f.ino, 0, 10_000).unwrap(), vec![7u8; 5000]);
    fs.write(f.ino, 10_000, b"x").unwrap();
    let r = fs.read(f.ino, 4990, 20).unwrap();
    assert_eq!(&r[..10], &[7u8; 10]);
    assert_eq!(&r[10..], &[0u8; 10]);
    fs.unlink(ROOT_INO, b"f").unwrap();
    assert!(matches!(fs.lookup(ROOT_INO, b"f"), Err(Error::NotFound)));
    fs.unmount().unwrap();
    let fs = mount(&dev);
    assert!(matches!(fs.lookup(ROOT_INO, b"f"), Err(Error::NotFound)));
    fs.unmount().unwrap();
}

#[test]
fn rename_rules() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev);
    let a = fs.mkdir(ROOT_INO, b"a", 0o755, 0, 0).unwrap();
    let b = fs.mkdir(ROOT_INO, b"b", 0o755, 0, 0).unwrap();
    fs.create(a.ino, b"x", 0o644, 0, 0, 0).unwrap();
    fs.create(b.ino, b"y", 0o644, 0, 0, 0).unwrap();
    let nr = RenameFlags {
        noreplace: true,
        exchange: false,
    };
    assert!(matches!(
        fs.rename(a.ino, b"x", b.ino, b"y", nr),
        Err(Error::Exists)
    ));
    fs.rename(a.ino, b"x", b.ino, b"y", RenameFlags::default())
        .unwrap();
    assert!(matches!(fs.lookup(a.ino, b"x"), Err(Error::NotFound)));
    assert!(matches!(
        fs.rename(ROOT_INO, b"a", a.ino, b"inside", RenameFlags::default()),
        Err(Error::InvalidArgument(_))
    ));
    fs.rename(ROOT_INO, b"a", b.ino, b"a2", RenameFlags::default())
        .unwrap();
    assert_eq!(fs.lookup(b.ino, b"a2").unwrap().ino, a.ino);
    assert_eq!(fs.lookup(a.ino, b"..").unwrap().ino, b.ino);
    assert_eq!(fs.getattr(b.ino).unwrap().nlink, 3);
    assert!(matches!(fs.rmdir(ROOT_INO, b"b"), Err(Error::NotEmpty)));
    let ex = RenameFlags {
        noreplace: false,
        exchange: true,
    };
    fs.create(ROOT_INO, b"z", 0o644, 0, 0, 0).unwrap();
    fs.rename(ROOT_INO, b"z", b.ino, b"y", ex).unwrap();
    fs.unmount().unwrap();
}

#[test]
fn many_entries_in_one_directory() {
    let dev = fresh(64 << 20);
    let fs = mount(&dev);
    for i in 0..5000 {
        fs.create(ROOT_INO, format!("f{i}").as_bytes(), 0o644, 0, 0, 0)
            .unwrap();
    }
    fs.unmount().unwrap();
    let fs = mount(&dev);
    for i in (0..5000).step_by(97) {
        fs.lookup(ROOT_INO, format!("f{i}").as_bytes()).unwrap();
    }
    let mut n = 0;
    let mut cookie = 0;
    loop {
        let batch = fs.readdir(ROOT_INO, cookie).unwrap();
        let Some(last) = batch.last() else { break };
        cookie = last.cookie;
        n += batch.len();
    }
    assert_eq!(n, 5002);
    fs.unmount().unwrap();
}

#[test]
fn sub_block_writes_over_blocks_on_the_device() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    let mut model = vec![3u8; 5 * 4096];
    fs.write(f.ino, 0, &model).unwrap();
    fs.unmount().unwrap();
    drop(fs);
    // After a remount every block is on the device only: each 512-byte
    // write must read its block first (outside the state lock).
    let fs = mount(&dev);
    for (k, off) in [0usize, 1000, 4090, 8192 + 512, 5 * 4096 - 512]
        .into_iter()
        .enumerate()
    {
        let data = vec![k as u8 + 10; 512.min(model.len() - off)];
        fs.write(f.ino, off as u64, &data).unwrap();
        model[off..off + data.len()].copy_from_slice(&data);
    }
    assert_eq!(fs.read(f.ino, 0, 1 << 20).unwrap(), model);
    fs.unmount().unwrap();
    drop(fs);
    let fs = mount(&dev);
    assert_eq!(fs.read(f.ino, 0, 1 << 20).unwrap(), model);
    fs.unmount().unwrap();
}

#[test]
fn queries_report_truthful_figures() {
    let dev = fresh(32 << 20);
    let fs = mount(&dev);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    fs.write(f.ino, 0, &vec![1u8; 400 * 4096]).unwrap();
    fs.fsync(f.ino, false).unwrap();
    let df = fs.df();
    // 400 data blocks plus a little metadata are live.
    assert!(df.live_blocks >= 400 && df.live_blocks < 430, "{df:?}");
    assert_eq!(df.total_blocks, fs.sustat().nsegs * 64);
    let before = fs.cpstat().0;
    let cno = fs.make_checkpoint(false).unwrap();
    assert_eq!(cno, before + 1);
    let cps = fs.cpinfo(1, 100, false).unwrap();
    assert_eq!(cps.len() as u64, cno);
    assert_eq!(cps.last().unwrap().cno, cno);
    assert!(cps
        .windows(2)
        .all(|w| w[0].cno < w[1].cno && w[0].ctime_ns <= w[1].ctime_ns));
    let s = fs.stats();
    let get = |n: &str| s.counter(n).unwrap();
    assert_eq!(get("user_bytes_written"), 400 * 4096);
    assert_eq!(get("device_data_bytes_written"), 400 * 4096);
    assert!(get("device_meta_bytes_written") > 0);
    assert_eq!(get("fsyncs"), 1);
    assert!(get("checkpoints") >= 2);
    let su = fs.sustat();
    assert_eq!(su.last_cno, cno);
    assert!(su.nclean + su.ndirty + su.npending <= su.nsegs + 1);
    let usage = fs.segment_usage_range(0, 3);
    assert_eq!(usage.len(), 3);
    let live: u64 = fs
        .segment_usage_range(0, 1 << 20)
        .iter()
        .map(|(_, u)| u64::from(u.nlive))
        .sum();
    let df = fs.df();
    assert_eq!(
        live,
        df.live_blocks + df.snapshot_blocks + df.protected_blocks
    );
    let seg = fs.segment_summary(0).unwrap();
    assert!(!seg.logs.is_empty());
    fs.unmount().unwrap();
}

/// Continuous checkpoints: every checkpoint stays valid with its blocks
/// until deleted; a snapshot cannot be deleted; deleting the checkpoints
/// that kept overwritten data frees it; all of it survives a remount.
#[test]
fn checkpoints_are_kept_until_deleted_and_snapshots_refuse_deletion() {
    let dev = fresh(32 << 20);
    let fs = mount(&dev);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    fs.write(f.ino, 0, &vec![1u8; 100 * 4096]).unwrap();
    let snap = fs.make_checkpoint(true).unwrap();
    fs.write(f.ino, 0, &vec![2u8; 100 * 4096]).unwrap();
    let plain = fs.make_checkpoint(false).unwrap();
    fs.write(f.ino, 0, &vec![3u8; 100 * 4096]).unwrap();
    fs.sync().unwrap();
    let df = fs.df();
    // Versions 1 (the snapshot) and 2 (a plain checkpoint) are kept.
    assert!(df.snapshot_blocks >= 100, "{df:?}");
    assert!(df.protected_blocks >= 100, "{df:?}");
    assert!(matches!(fs.delete_checkpoint(snap), Err(Error::Busy(_))));
    let last = fs.cpstat().0;
    assert!(matches!(fs.delete_checkpoint(last), Err(Error::Busy(_))));
    assert!(matches!(fs.delete_checkpoint(9999), Err(Error::NotFound)));
    let freed = fs.delete_checkpoint(plain).unwrap();
    // Version 2's data was seen by `plain` only.
    assert!(freed >= 100, "{freed}");
    assert!(fs
        .cpinfo(1, 1000, false)
        .unwrap()
        .iter()
        .all(|e| e.cno != plain));
    let snaps = fs.cpinfo(1, 1000, true).unwrap();
    assert_eq!(snaps.iter().map(|e| e.cno).collect::<Vec<_>>(), [snap]);
    fs.unmount().unwrap();
    drop(fs);

    let fs = mount(&dev);
    let (_, ncp, nss) = fs.cpstat();
    assert_eq!(nss, 1);
    assert!(ncp >= 2);
    assert!(matches!(fs.delete_checkpoint(plain), Err(Error::NotFound)));
    assert!(fs.df().snapshot_blocks >= 100);
    fs.change_cpmode(snap, false).unwrap();
    let (deleted, freed) = fs
        .delete_checkpoints_older_than(std::time::Duration::ZERO)
        .unwrap();
    assert!(deleted >= 1 && freed >= 100, "{deleted} {freed}");
    let df = fs.df();
    assert_eq!((df.snapshot_blocks, df.protected_blocks), (0, 0), "{df:?}");
    assert_eq!(fs.read(f.ino, 0, 4096).unwrap(), vec![3u8; 4096]);
    fs.unmount().unwrap();
    drop(fs);
    mount(&dev).unmount().unwrap();
}

/// POSIX: a file unlinked while open keeps its data for the open
/// descriptors; the last close frees it, and so does the next mount after
/// a crash. fsck is clean at every step.
#[test]
fn a_file_unlinked_while_open_lives_until_its_last_close() {
    let dev = fresh(32 << 20);
    let fs = mount(&dev);
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    let before = fs.statfs().unwrap();
    let f = fs.create_open(ROOT_INO, b"tmp", 0o600, 0, 0).unwrap();
    fs.write(f.ino, 0, &data).unwrap();
    fs.open(f.ino).unwrap(); // a second descriptor
    fs.unlink(ROOT_INO, b"tmp").unwrap();
    assert!(matches!(fs.lookup(ROOT_INO, b"tmp"), Err(Error::NotFound)));
    assert_eq!(fs.read(f.ino, 0, 300_000).unwrap(), data);
    assert_eq!(fs.getattr(f.ino).unwrap().nlink, 0);
    assert!(matches!(
        fs.link(f.ino, ROOT_INO, b"back"),
        Err(Error::NotFound)
    ));
    fs.write(f.ino, data.len() as u64, b"more").unwrap();
    fs.sync().unwrap();
    let held = fs.statfs().unwrap();
    assert!(
        held.ffree < before.ffree,
        "the orphan still holds its inode"
    );
    fs.release(f.ino).unwrap();
    assert_eq!(
        fs.read(f.ino, 0, 4).unwrap(),
        data[..4],
        "one descriptor left"
    );
    fs.release(f.ino).unwrap();
    assert!(fs.getattr(f.ino).is_err(), "freed at the last close");
    assert_eq!(fs.statfs().unwrap().ffree, before.ffree);
    fs.unmount().unwrap();
    drop(fs);

    // Again, but the filesystem stops (no unmount) while the file is open
    // and unlinked: the next mount frees it.
    let fs = mount(&dev);
    let g = fs.create_open(ROOT_INO, b"tmp2", 0o600, 0, 0).unwrap();
    fs.write(g.ino, 0, &data).unwrap();
    fs.unlink(ROOT_INO, b"tmp2").unwrap();
    fs.sync().unwrap();
    drop(fs);
    let fs = mount(&dev); // fsck first: the orphan is accounted for
    assert!(fs.getattr(g.ino).is_err(), "freed at mount");
    assert_eq!(fs.statfs().unwrap().ffree, before.ffree);
    fs.unmount().unwrap();
    drop(fs);
    mount(&dev).unmount().unwrap();
}

#[test]
fn a_mounted_filesystem_reads_its_superblocks_as_an_unmounted_device_is_read() {
    use lfs::inspect::{read_superblocks, SbCopy};
    let dev = fresh(32 << 20);
    let fs = mount(&dev);
    fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap();
    fs.sync().unwrap();
    let bytes = fs.superblock_copies().unwrap();
    assert_eq!(bytes.device_bytes, 32 << 20);
    assert_eq!(bytes.secondary_offset, (32 << 20) - 4096);
    let live = bytes.decode();
    let here = read_superblocks(dev.as_ref()).unwrap();
    assert_eq!(format!("{live:?}"), format!("{here:?}"));
    assert!(live.current().is_some());
    // A damaged copy decodes to the same error either way.
    let mut bad = bytes.clone();
    bad.primary[100] ^= 0xff;
    let pair = bad.decode();
    assert!(pair.primary.is_err());
    assert_eq!(pair.current_copy(), Some(SbCopy::Secondary));
    fs.unmount().unwrap();
}

/// Blocks of the checkpoint file whose checkpoints are all deleted become
/// holes: the file does not grow with every checkpoint ever made (it grew
/// by a block per dozen checkpoints, about 26 MiB in 80,000 fsyncs).
#[test]
fn deleted_checkpoints_give_their_checkpoint_file_blocks_back() {
    // Blocks of the checkpoint file in the last checkpoint, from its super
    // root (what `fsctl dumpseg` prints).
    fn cpfile_blocks(dev: &Arc<MemDevice>) -> u64 {
        let d: &dyn BlockDevice = dev.as_ref();
        let pair = lfs::inspect::read_superblocks(d).unwrap();
        let sb = pair.current().unwrap().clone();
        let seg = sb.segment_of(sb.last_log_block).unwrap();
        let dump = lfs::inspect::dump_segment(d, &sb, seg).unwrap();
        let log = dump
            .logs
            .iter()
            .find(|l| l.block == sb.last_log_block)
            .expect("the cursor's log");
        let sr = log.super_root.clone().expect("a super root").unwrap();
        sr.cpfile.blocks
    }
    let dev = fresh(32 << 20);
    let fs = mount(&dev);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    for i in 0..300u32 {
        fs.write(f.ino, 0, &i.to_le_bytes()).unwrap();
        fs.sync().unwrap();
    }
    fs.unmount().unwrap();
    drop(fs);
    let before = cpfile_blocks(&dev);
    // 12 entries a block at 4 KiB.
    assert!(
        before >= 25,
        "{before} checkpoint file blocks for 300 checkpoints"
    );
    let fs = mount(&dev);
    let (deleted, _) = fs
        .delete_checkpoints_older_than(std::time::Duration::ZERO)
        .unwrap();
    assert!(deleted >= 299, "deleted {deleted}");
    fs.unmount().unwrap();
    drop(fs);
    let after = cpfile_blocks(&dev);
    // The header's block and the latest checkpoint's (an indirect block
    // maps them).
    assert!(
        after <= 3,
        "{after} checkpoint file blocks after the deletion"
    );
    let fs = mount(&dev);
    assert_eq!(fs.read(f.ino, 0, 4).unwrap(), 299u32.to_le_bytes());
    assert!(fs.cpstat().1 <= 3, "{} checkpoints left", fs.cpstat().1);
    fs.unmount().unwrap();
}
