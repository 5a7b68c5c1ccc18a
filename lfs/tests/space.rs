//! The space guarantee (`fs/space.rs`, issue 23): with no cleaner at all,
//! sustained overwrites of a nearly full filesystem never get NoSpace
//! while the data fits, and NoSpace comes only when live data plus
//! snapshots really do not fit.

use std::sync::Arc;

use lfs::blockdev::{BlockDevice, MemDevice};
use lfs::format::ROOT_INO;
use lfs::fs::{Fs, MountOptions};
use lfs::mkfs::{format, MkfsOptions};
use lfs::Error;
use lfs_e2e::rng::SplitMix64;

const BS: u64 = 4096;

/// A fresh filesystem of `len` bytes in segments of `bps` blocks.
fn fresh_with(len: u64, bps: u32) -> Arc<MemDevice> {
    let dev = Arc::new(MemDevice::new(len));
    let mut o = MkfsOptions::new([5; 16], 0x5ace, 1_700_000_000, 0);
    o.blocks_per_segment = bps;
    o.discard = false;
    format(dev.as_ref(), &o).unwrap();
    dev
}

fn fresh(len: u64) -> Arc<MemDevice> {
    fresh_with(len, 64)
}

fn mount(dev: &Arc<MemDevice>) -> Arc<Fs> {
    let d: Arc<dyn BlockDevice> = dev.clone();
    Fs::mount(d, MountOptions::default()).unwrap()
}

fn fsck_clean(dev: &Arc<MemDevice>) {
    let d: Arc<dyn BlockDevice> = dev.clone();
    let r = lfs::fsck::fsck(d).unwrap();
    assert!(r.is_clean(), "fsck: {:#?}", r.errors);
}

/// The valid checkpoints, oldest first.
fn checkpoints(fs: &Fs) -> Vec<u64> {
    fs.cpinfo(1, 10_000, false)
        .unwrap()
        .iter()
        .map(|e| e.cno)
        .collect()
}

/// Chunk `c` of file `f` at version `v`: distinct for each.
fn chunk(f: u64, c: u64, v: u64, len: usize) -> Vec<u8> {
    let x = f.wrapping_mul(0x9e37) ^ c.wrapping_mul(0x85eb) ^ v.wrapping_mul(0xc2b2);
    (0..len)
        .map(|i| (x.wrapping_add(i as u64 / 7) % 251) as u8 + 1)
        .collect()
}

/// Files of `chunks` chunks of `CHUNK` bytes each, filling `live_share`
/// percent of the filesystem, then overwritten at random, 90 % of the
/// writes going to 10 % of the chunks, with an fsync every 64 writes,
/// until `rounds` times the free space has been written: no NoSpace, and
/// every byte is there at the end and after a remount.
fn sustained_overwrites(len: u64, bps: u32, live_share: u64, rounds: u64, seed: u64) {
    const CHUNK: usize = 16 << 10;
    const FILE_CHUNKS: u64 = 64;
    let dev = fresh_with(len, bps);
    let fs = mount(&dev);
    let total = fs.statfs().unwrap().blocks;
    let live_blocks = total * live_share / 100;
    let nchunks = live_blocks * BS / CHUNK as u64;
    let nfiles = nchunks.div_ceil(FILE_CHUNKS);
    let mut files = Vec::new();
    let mut version = vec![0u64; nchunks as usize];
    for f in 0..nfiles {
        let a = fs
            .create(ROOT_INO, format!("f{f}").as_bytes(), 0o644, 0, 0, 0)
            .unwrap();
        files.push(a.ino);
    }
    let write = |c: u64, v: u64| -> lfs::Result<u32> {
        let (f, k) = (c / FILE_CHUNKS, c % FILE_CHUNKS);
        fs.write(files[f as usize], k * CHUNK as u64, &chunk(f, k, v, CHUNK))
    };
    for c in 0..nchunks {
        write(c, 0).unwrap_or_else(|e| panic!("filling chunk {c} of {nchunks}: {e}"));
    }
    fs.sync().unwrap();
    let free = total - live_blocks;
    let writes = free * rounds * BS / CHUNK as u64;
    let hot = (nchunks / 10).max(1);
    let mut rng = SplitMix64(seed);
    for i in 0..writes {
        let c = if rng.below(10) < 9 {
            rng.below(hot as usize) as u64
        } else {
            hot + rng.below((nchunks - hot) as usize) as u64
        };
        version[c as usize] += 1;
        if let Err(e) = write(c, version[c as usize]) {
            let df = fs.df();
            panic!(
                "overwrite {i} of {writes} ({live_share} % live): {e}; df: {df:?}; stats: {:?}",
                fs.stats().counters
            );
        }
        if i % 64 == 63 {
            fs.fsync(files[(c / FILE_CHUNKS) as usize], false).unwrap();
        }
    }
    // The engine made the room itself: it deleted history and cleaned.
    assert!(fs.stats().counter("checkpoints_expired_for_space").unwrap() > 0);
    assert!(
        fs.stats().counter("space_passes").unwrap() + fs.stats().counter("segments_freed").unwrap()
            > 0
    );
    let check = |fs: &Fs, when: &str| {
        for c in 0..nchunks {
            let (f, k) = (c / FILE_CHUNKS, c % FILE_CHUNKS);
            let got = fs
                .read(files[f as usize], k * CHUNK as u64, CHUNK as u32)
                .unwrap();
            assert!(
                got == chunk(f, k, version[c as usize], CHUNK),
                "{when}: chunk {c} (file {f}, version {})",
                version[c as usize]
            );
        }
    };
    check(&fs, "at the end");
    fs.unmount().unwrap();
    drop(fs);
    fsck_clean(&dev);
    let fs = mount(&dev);
    check(&fs, "after a remount");
    fs.unmount().unwrap();
}

/// No cleaner: the engine alone keeps a filesystem 85 % full of live
/// data writable under skewed overwrites of ten times its free space
/// (64 segments of 1 MiB, as 512 MiB in 8 MiB ones).
#[test]
fn overwrites_at_85_percent_live_never_run_out_without_a_cleaner() {
    sustained_overwrites(64 << 20, 256, 85, 10, 1);
}

/// The same at 60 %, with small segments (whose dead blocks are few each).
#[test]
fn overwrites_at_60_percent_live_never_run_out_without_a_cleaner() {
    sustained_overwrites(24 << 20, 64, 60, 10, 2);
}

/// A snapshot keeps what it saw: with half the filesystem live and a
/// snapshot of it, overwriting all of it needs the whole filesystem, and
/// NoSpace comes only when live data plus the snapshot no longer fit
/// (fsctl df says so then); deleting the snapshot makes room again.
#[test]
fn nospace_comes_only_when_live_data_and_snapshots_do_not_fit() {
    let dev = fresh(24 << 20);
    let fs = mount(&dev);
    let st = fs.statfs().unwrap();
    let usable = st.bavail;
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap().ino;
    let half = usable / 2;
    let block = |b: u64, v: u8| vec![v.wrapping_add((b % 200) as u8); BS as usize];
    for b in 0..half {
        fs.write(f, b * BS, &block(b, 1)).unwrap();
    }
    let snap = fs.make_checkpoint(true).unwrap();
    // Overwrite it all: live + snapshot = the whole usable space, which
    // cannot fit with the filesystem's own metadata.
    let mut failed_at = None;
    for b in 0..half {
        match fs.write(f, b * BS, &block(b, 2)) {
            Ok(_) => {}
            Err(Error::NoSpace) => {
                failed_at = Some(b);
                break;
            }
            Err(e) => panic!("overwrite of block {b}: {e}"),
        }
    }
    let b = failed_at.expect("overwriting a snapshot's worth of data on a full filesystem fit");
    let df = fs.df();
    // When it came, live data and the snapshot filled what is not
    // reserved (to within a few segments of metadata and dirty data).
    let held = df.live_blocks + df.snapshot_blocks;
    let room = df.total_blocks - df.reserved_blocks;
    assert!(
        held + 8 * 64 >= room,
        "NoSpace at block {b} of {half} with {held} live and snapshot blocks of {room}: {df:?}"
    );
    // The snapshot goes: the rest fits.
    fs.change_cpmode(snap, false).unwrap();
    for b in b..half {
        fs.write(f, b * BS, &block(b, 2))
            .unwrap_or_else(|e| panic!("block {b} with the snapshot gone: {e}"));
    }
    for b in 0..half {
        assert_eq!(fs.read(f, b * BS, BS as u32).unwrap(), block(b, 2));
    }
    fs.unmount().unwrap();
    drop(fs);
    fsck_clean(&dev);
}

/// History yields to space: plain checkpoints are deleted, oldest first,
/// but never a snapshot; a snapshot's data stays readable through it.
#[test]
fn history_yields_to_space_but_snapshots_stay() {
    let dev = fresh(24 << 20);
    let fs = mount(&dev);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap().ino;
    let data = |v: u8| vec![v; 256 << 10];
    fs.write(f, 0, &data(1)).unwrap();
    let snap = fs.make_checkpoint(true).unwrap();
    let first_plain = fs.make_checkpoint(false).unwrap();
    // Overwrite the same 256 KiB hundreds of times: far more than the
    // filesystem holds, all of it history but the last version.
    for v in 2..=250u8 {
        fs.write(f, 0, &data(v)).unwrap();
        fs.sync().unwrap();
    }
    assert!(fs.stats().counter("checkpoints_expired_for_space").unwrap() > 0);
    let cps = checkpoints(&fs);
    assert!(cps.contains(&snap), "the snapshot was deleted: {cps:?}");
    assert!(
        !cps.contains(&first_plain),
        "the oldest plain checkpoint stayed: {cps:?}"
    );
    let view = fs.open_checkpoint(snap).unwrap();
    assert_eq!(view.read(f, 0, 256 << 10).unwrap(), data(1));
    drop(view);
    assert_eq!(fs.read(f, 0, 256 << 10).unwrap(), data(250));
    fs.unmount().unwrap();
    drop(fs);
    fsck_clean(&dev);
}

/// Deleting a long history, in the bounded steps that let writers in
/// between (`checkpoint/history.rs`), frees exactly what no remaining
/// checkpoint sees: all of it but what a snapshot or a mounted checkpoint
/// keeps, which stays readable. Several steps' worth: 4 versions of
/// 6144 blocks die.
#[test]
fn deleting_a_long_history_frees_exactly_what_no_checkpoint_sees() {
    use std::time::Duration;
    const BLOCKS: u64 = 6144;
    const { assert!(4 * BLOCKS > 2 * lfs::checkpoint::history::MAX_FREED_PER_STEP) };
    let dev = fresh_with(512 << 20, 256);
    let d: Arc<dyn BlockDevice> = dev.clone();
    let opts = MountOptions {
        background_space: false,
        ..MountOptions::default()
    };
    let fs = Fs::mount(d, opts).unwrap();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap().ino;
    let chunk = |v: u64, c: u64| chunk(1, c, v, 1 << 20);
    let write = |v: u64| {
        for c in 0..(BLOCKS * BS) >> 20 {
            fs.write(f, c << 20, &chunk(v, c)).unwrap();
        }
    };
    let (mut snap, mut mounted) = (0, 0);
    for v in 0..=6 {
        write(v);
        match v {
            2 => snap = fs.make_checkpoint(true).unwrap(),
            3 => mounted = fs.make_checkpoint(false).unwrap(),
            _ => {
                fs.make_checkpoint(false).unwrap();
            }
        }
    }
    let latest = fs.make_checkpoint(false).unwrap();
    let view = fs.open_checkpoint(mounted).unwrap();
    let (deleted, freed) = fs.delete_checkpoints_older_than(Duration::ZERO).unwrap();
    assert!(deleted >= 4, "{deleted} checkpoints deleted");
    assert!(freed >= 4 * BLOCKS, "{freed} blocks freed");
    let cps = checkpoints(&fs);
    // Left: the snapshot, the mounted one, the latest and the one that
    // recorded the deletion.
    assert_eq!(cps[..3], [snap, mounted, latest], "left: {cps:?}");
    assert_eq!(cps.len(), 4, "left: {cps:?}");
    // What is left: the snapshot's version, the mounted one's (not kept
    // by a snapshot), and nothing else but a little metadata.
    let df = fs.df();
    assert!(
        df.snapshot_blocks >= BLOCKS && df.snapshot_blocks < BLOCKS + 64,
        "{df:?}"
    );
    assert!(
        df.protected_blocks >= BLOCKS && df.protected_blocks < BLOCKS + 64,
        "{df:?}"
    );
    let check = |fs: &Fs, v: u64| {
        for c in 0..(BLOCKS * BS) >> 20 {
            assert_eq!(
                fs.read(f, c << 20, 1 << 20).unwrap(),
                chunk(v, c),
                "chunk {c}"
            );
        }
    };
    check(&view, 3);
    check(&fs.open_checkpoint(snap).unwrap(), 2);
    check(&fs, 6);
    // Unmounted, the plain checkpoint goes too.
    drop(view);
    let (deleted, freed) = fs.delete_checkpoints_older_than(Duration::ZERO).unwrap();
    assert_eq!(deleted, 2);
    assert!(freed >= BLOCKS, "{freed} blocks freed");
    assert!(fs.df().protected_blocks < 64, "{:?}", fs.df());
    fs.unmount().unwrap();
    drop(fs);
    fsck_clean(&dev);
}

/// With strict protection (cleanerd's `strict_protection`), checkpoints
/// younger than the protection period are kept even for space: writes
/// get NoSpace instead, as on nilfs. Once the cleaner stops asking for
/// it, history yields again.
#[test]
fn strict_protection_keeps_young_history_and_refuses_writes() {
    use lfs::fs::clean::Placement;
    use std::time::Duration;
    let dev = fresh(24 << 20);
    let fs = mount(&dev);
    let strict = |on: bool| Placement {
        strict_protection: on,
        ..Placement::default()
    };
    fs.clean_segments_placed(&[], &strict(true), Duration::from_secs(3600))
        .unwrap();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap().ino;
    let first = fs.make_checkpoint(false).unwrap();
    let data = |v: u8| vec![v; 1 << 20];
    let mut refused = None;
    for v in 1..=200u8 {
        match fs.write(f, 0, &data(v)).and_then(|_| fs.sync()) {
            Ok(()) => {}
            Err(Error::NoSpace) => {
                refused = Some(v);
                break;
            }
            Err(e) => panic!("version {v}: {e}"),
        }
    }
    let v = refused.expect("200 MiB of history fit in 24 MiB");
    // Every checkpoint of the last hour is still there (only mkfs's,
    // dated 2023, may have gone).
    let kept: Vec<u64> = fs
        .cpinfo(first, 100_000, false)
        .unwrap()
        .iter()
        .map(|e| e.cno)
        .collect();
    let latest = *kept.last().unwrap();
    assert_eq!(kept, (first..=latest).collect::<Vec<_>>());
    // (The space thread may delete history as soon as strictness ends.)
    let before = fs.stats().counter("checkpoints_expired_for_space").unwrap();
    fs.clean_segments_placed(&[], &strict(false), Duration::from_secs(3600))
        .unwrap();
    fs.write(f, 0, &data(v)).unwrap();
    fs.sync().unwrap();
    assert!(fs.stats().counter("checkpoints_expired_for_space").unwrap() > before);
    assert_eq!(fs.read(f, 0, 1 << 20).unwrap(), data(v));
    fs.unmount().unwrap();
    drop(fs);
    fsck_clean(&dev);
}
