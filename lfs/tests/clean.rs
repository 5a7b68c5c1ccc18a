//! The cleaning mechanism: `Fs::clean_segments` moves live blocks to the
//! cold log and frees the segments, keeping every byte, every snapshot and
//! fsck clean; checks refuse what cannot be cleaned.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use lfs::blockdev::{BlockDevice, MemDevice};
use lfs::format::{ROOT_INO, SU_FLAG_ACTIVE};
use lfs::fs::clean::Placement;
use lfs::fs::{Fs, MountOptions};
use lfs::mkfs::{format, MkfsOptions};
use lfs::Error;

const BS: usize = 4096;

fn fresh(len: u64) -> Arc<MemDevice> {
    let dev = Arc::new(MemDevice::new(len));
    let mut o = MkfsOptions::new([2; 16], 0x5eed, 1_700_000_000, 0);
    o.blocks_per_segment = 64;
    o.discard = false;
    format(dev.as_ref(), &o).unwrap();
    dev
}

fn fsck_clean(dev: &Arc<MemDevice>) {
    let d: Arc<dyn BlockDevice> = dev.clone();
    let r = lfs::fsck::fsck(d).unwrap();
    assert!(r.is_clean(), "fsck: {:#?}", r.errors);
}

fn mount(dev: &Arc<MemDevice>) -> Arc<Fs> {
    fsck_clean(dev);
    let d: Arc<dyn BlockDevice> = dev.clone();
    Fs::mount(d, MountOptions::default()).unwrap()
}

/// Block `b` of version `ver`: distinct per block and version.
fn block(b: u64, ver: u64) -> Vec<u8> {
    let mut v = vec![0u8; BS];
    for (i, x) in v.iter_mut().enumerate() {
        *x = (b.wrapping_mul(31) ^ ver.wrapping_mul(131) ^ i as u64) as u8;
    }
    v
}

/// Asserts that blocks `0..nblocks` of `ino` hold version `ver(b)`.
fn verify(fs: &Fs, ino: u64, nblocks: u64, ver: impl Fn(u64) -> u64, when: &str) {
    for b in 0..nblocks {
        let got = fs.read(ino, b * BS as u64, BS as u32).unwrap();
        assert!(got == block(b, ver(b)), "block {b} {when}");
    }
}

/// Unmounts `fs`, mounts `dev` again and verifies as [`verify`] does,
/// then unmounts: what cleaning did is on the device.
fn verify_after_remount(dev: &Arc<MemDevice>, fs: Arc<Fs>, ino: u64, nblocks: u64, ver: &[u64]) {
    fs.unmount().unwrap();
    drop(fs);
    let fs = mount(dev);
    verify(&fs, ino, nblocks, |b| ver[b as usize], "after remount");
    fs.unmount().unwrap();
}

/// Writes version 0 of blocks `0..nblocks` of `ino`, then syncs.
fn fill(fs: &Fs, ino: u64, nblocks: u64) {
    for b in 0..nblocks {
        fs.write(ino, b * BS as u64, &block(b, 0)).unwrap();
    }
    fs.sync().unwrap();
}

/// A fresh 24 MiB filesystem with file "f" of `nblocks` blocks of
/// version 0, synced; the versions to verify.
fn with_file(nblocks: u64) -> (Arc<MemDevice>, Arc<Fs>, lfs::fs::Attr, Vec<u64>) {
    let dev = fresh(24 << 20);
    let fs = mount(&dev);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    fill(&fs, f.ino, nblocks);
    (dev, fs, f, vec![0u64; nblocks as usize])
}

fn clean_some(fs: &Fs, n: usize) -> lfs::fs::clean::CleanReport {
    let mut total = lfs::fs::clean::CleanReport::default();
    for s in fs.greedy_victims(n) {
        match fs.clean_segments(&[s], Duration::ZERO) {
            Ok(r) => {
                total.blocks_moved += r.blocks_moved;
                total.segments_freed += r.segments_freed;
                total.checkpoints_deleted += r.checkpoints_deleted;
            }
            // The cold head may have taken it since the list was made.
            Err(Error::Again(_)) => {}
            Err(e) => panic!("cleaning segment {s}: {e}"),
        }
    }
    total
}

#[test]
fn cleaning_moves_live_blocks_and_frees_segments() {
    let nblocks = 600u64;
    let (dev, fs, f, mut ver) = with_file(nblocks);
    // Overwrite every third block: the old copies are dead once the old
    // checkpoints go.
    for b in (0..nblocks).step_by(3) {
        ver[b as usize] = 1;
        fs.write(f.ino, b * BS as u64, &block(b, 1)).unwrap();
    }
    fs.sync().unwrap();
    // First only the checkpoints go: the overwritten copies become dead.
    let r = fs.clean_segments(&[], Duration::ZERO).unwrap();
    assert!(r.checkpoints_deleted >= 1 && r.blocks_freed >= 200, "{r:?}");
    let reclaimable = fs.df().reclaimable_blocks;
    assert!(reclaimable >= 200, "{:?}", fs.df());
    let r = clean_some(&fs, 6);
    assert!(r.blocks_moved > 0 && r.segments_freed >= 3, "{r:?}");
    fs.sync().unwrap();
    assert!(fs.df().reclaimable_blocks < reclaimable);
    verify(&fs, f.ino, nblocks, |b| ver[b as usize], "after cleaning");
    let s = fs.stats();
    let get = |n: &str| s.counter(n).unwrap();
    assert!(get("device_gc_bytes_written") > 0);
    assert!(get("gc_passes") >= 1);
    verify_after_remount(&dev, fs, f.ino, nblocks, &ver);
}

/// File data in the GC-flagged logs of the side heads, on the device.
fn side_log_file_blocks(dev: &Arc<MemDevice>) -> u64 {
    let pair = lfs::inspect::read_superblocks(dev.as_ref()).unwrap();
    let sb = pair.current().unwrap().clone();
    (0..sb.nsegments)
        .flat_map(|s| {
            lfs::inspect::dump_segment(dev.as_ref(), &sb, s)
                .unwrap()
                .logs
        })
        .filter(|l| l.summary.header.flags & lfs::format::LOG_FLAG_GC != 0)
        .map(|l| {
            l.summary
                .entries
                .iter()
                .filter(|e| e.ino >= lfs::format::FIRST_USER_INO)
                .count() as u64
        })
        .sum()
}

#[test]
fn a_cleaner_that_separates_writes_sends_long_lived_data_to_its_own_head() {
    let nblocks = 300u64;
    let (dev, fs, f, mut ver) = with_file(nblocks);
    // Blocks 0..50 are hot: rewritten every checkpoint, they live one.
    // The last round rewrites long-lived blocks too: not separated yet,
    // nothing goes to side logs (and nothing was cleaned).
    for round in 1..=12 {
        for b in (0..50).chain(if round == 12 { 200..210 } else { 0..0 }) {
            ver[b as usize] = round;
            fs.write(f.ino, b * BS as u64, &block(b, round)).unwrap();
        }
        fs.sync().unwrap();
    }
    assert_eq!(side_log_file_blocks(&dev), 0);
    // A cleaner asks for separation (with no segment to clean).
    let sep = Placement {
        warm: Vec::new(),
        separate_writes: true,
        warm_young: false,
        strict_protection: false,
    };
    fs.clean_segments_placed(&[], &sep, Duration::from_secs(3600))
        .unwrap();
    // Hot blocks still go with the checkpoint; blocks 100..160, last
    // written 13 checkpoints ago, are predicted long-lived.
    for b in (0..50).chain(100..160) {
        ver[b as usize] += 1;
        fs.write(f.ino, b * BS as u64, &block(b, ver[b as usize]))
            .unwrap();
    }
    fs.sync().unwrap();
    assert_eq!(side_log_file_blocks(&dev), 60);
    verify(
        &fs,
        f.ino,
        nblocks,
        |b| ver[b as usize],
        "after separated writes",
    );
    // A warm victim: its survivors go to a head of their own.
    let v = fs.greedy_victims(2);
    let warm = Placement {
        warm: v[..1].to_vec(),
        separate_writes: true,
        warm_young: false,
        strict_protection: false,
    };
    let r = fs.clean_segments_placed(&v, &warm, Duration::ZERO).unwrap();
    assert!(r.segments_freed >= 1, "{r:?}");
    // A warm segment that is not a victim is refused.
    let bad = Placement {
        warm: vec![v[0]],
        separate_writes: false,
        warm_young: false,
        strict_protection: false,
    };
    assert!(matches!(
        fs.clean_segments_placed(&v[1..], &bad, Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
    fs.sync().unwrap();
    verify(&fs, f.ino, nblocks, |b| ver[b as usize], "after cleaning");
    verify_after_remount(&dev, fs, f.ino, nblocks, &ver);
}

/// For each block of `ino` whose live copy a cleaner's log holds, the
/// segment holding it.
fn cleaned_block_segments(fs: &Fs, ino: u64) -> std::collections::HashMap<u64, u64> {
    let mut out = std::collections::HashMap::new();
    for s in 0..fs.sustat().nsegs {
        let d = fs.segment_summary(s).unwrap();
        let inside = d.start_block..d.start_block + d.nblocks;
        for l in &d.logs {
            if l.summary.header.flags & lfs::format::LOG_FLAG_GC == 0 {
                continue;
            }
            for e in l.summary.entries.iter().filter(|e| e.ino == ino) {
                if inside.contains(&fs.vinfo(&[e.vblock])[0].1.phys) {
                    out.insert(e.offset, s);
                }
            }
        }
    }
    out
}

/// With `warm_young`, a pass sends the moved blocks written more recently
/// than the mean lifespan of overwritten blocks to the warm head and the
/// older ones to the cold head, whichever victim they come from; without
/// it, they share the cold head's segments.
#[test]
fn cleaning_sends_young_survivors_apart_from_old_ones_by_age() {
    for warm_young in [false, true] {
        let nblocks = 300u64;
        let (dev, fs, f, mut ver) = with_file(nblocks);
        // Three checkpoints of appended blocks: new blocks measure no
        // lifespan.
        for b in nblocks..nblocks + 3 {
            fs.write(f.ino, b * BS as u64, &block(b, 0)).unwrap();
            fs.sync().unwrap();
        }
        // Blocks 0..40 in four groups, one group a checkpoint: each lives
        // four checkpoints, so the mean lifespan is about 4 and every one
        // of them is younger; blocks 40..300 are some 20 checkpoints old.
        for round in 0..16u64 {
            let g = round % 4;
            for b in g * 10..g * 10 + 10 {
                ver[b as usize] += 1;
                fs.write(f.ino, b * BS as u64, &block(b, ver[b as usize]))
                    .unwrap();
            }
            fs.sync().unwrap();
        }
        fs.clean_segments(&[], Duration::ZERO).unwrap();
        let v = fs.greedy_victims(64);
        let place = Placement {
            warm: Vec::new(),
            separate_writes: false,
            warm_young,
            strict_protection: false,
        };
        let r = fs
            .clean_segments_placed(&v, &place, Duration::ZERO)
            .unwrap();
        assert!(r.segments_freed >= 4, "{r:?}");
        let at = cleaned_block_segments(&fs, f.ino);
        let young: std::collections::BTreeSet<u64> =
            (0..40).filter_map(|b| at.get(&b).copied()).collect();
        let old: std::collections::BTreeSet<u64> =
            (40..nblocks).filter_map(|b| at.get(&b).copied()).collect();
        assert!(!young.is_empty() && old.len() >= 2, "{at:?}");
        assert_eq!(
            young.is_disjoint(&old),
            warm_young,
            "segments of young blocks {young:?}, of old ones {old:?}"
        );
        verify(&fs, f.ino, nblocks, |b| ver[b as usize], "after cleaning");
        verify_after_remount(&dev, fs, f.ino, nblocks, &ver);
    }
}

/// The "done when": overwrite several times the free space with a
/// cleaner running whenever clean segments run low; no NoSpace, every
/// byte verifies, fsck is clean.
#[test]
fn overwriting_five_times_the_free_space_with_cleaning() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    let nblocks = 1200u64; // about 4.7 MiB of a 16 MiB device
    let mut ver = vec![0u64; nblocks as usize];
    fill(&fs, f.ino, nblocks);
    let free = fs.statfs().unwrap().bavail * fs.statfs().unwrap().bsize as u64;
    let mut written = 0u64;
    let mut rng = 0x1234_5678_u64;
    let mut cleaned = 0;
    let mut i = 0u64;
    while written < 5 * free {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // Skewed: 80 % of the writes go to the first 20 % of the file.
        let b = if rng % 10 < 8 {
            (rng >> 8) % (nblocks / 5)
        } else {
            (rng >> 8) % nblocks
        };
        ver[b as usize] += 1;
        if let Err(e) = fs.write(f.ino, b * BS as u64, &block(b, ver[b as usize])) {
            panic!(
                "write {i} after {written} of {} bytes: {e}\n{:?}",
                5 * free,
                fs.sustat()
            );
        }
        written += BS as u64;
        i += 1;
        if i % 64 == 0 {
            fs.sync().unwrap();
            let su = fs.sustat();
            if su.nclean < su.nreserved + 8 {
                cleaned += clean_some(&fs, 4).segments_freed;
            }
        }
    }
    fs.sync().unwrap();
    assert!(cleaned > 0);
    verify(&fs, f.ino, nblocks, |b| ver[b as usize], "");
    fs.unmount().unwrap();
    drop(fs);
    fsck_clean(&dev);
}

#[test]
fn snapshots_survive_cleaning_of_their_segments() {
    let dev = fresh(24 << 20);
    let fs = mount(&dev);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    let g = fs.create(ROOT_INO, b"g", 0o644, 0, 0, 0).unwrap();
    // f's blocks share segments with g's first copies, which are dead by
    // the snapshot (cleaning refuses segments it cannot gain from); a
    // checkpoint groups each file's blocks, so one every 8 pairs mixes them.
    for b in 0..300u64 {
        fs.write(f.ino, b * BS as u64, &block(b, 0)).unwrap();
        fs.write(g.ino, b * BS as u64, &block(b, 7)).unwrap();
        if b % 8 == 7 {
            fs.sync().unwrap();
        }
    }
    fs.sync().unwrap();
    for b in 0..300u64 {
        fs.write(g.ino, b * BS as u64, &block(b, 8)).unwrap();
    }
    fs.sync().unwrap();
    let snap = fs.make_checkpoint(true).unwrap();
    for b in 0..300u64 {
        fs.write(f.ino, b * BS as u64, &block(b, 1)).unwrap();
    }
    fs.sync().unwrap();
    // Everything of version 0 is kept by the snapshot: cleaning its
    // segments moves it rather than dropping it.
    fs.clean_segments(&[], Duration::ZERO).unwrap();
    let r = clean_some(&fs, 24);
    assert!(r.blocks_moved >= 250, "{r:?}");
    assert!(fs.df().snapshot_blocks >= 300);
    fs.unmount().unwrap();
    drop(fs);
    let fs = mount(&dev);
    // The snapshot's blocks are readable where the DAT now says.
    let view = fs.open_checkpoint(snap).unwrap();
    for b in 0..300u64 {
        let got = view.read(f.ino, b * BS as u64, BS as u32).unwrap();
        assert!(got == block(b, 0), "snapshot block {b}");
        let cur = fs.read(f.ino, b * BS as u64, BS as u32).unwrap();
        assert!(cur == block(b, 1), "current block {b}");
    }
    drop(view);
    fs.unmount().unwrap();
}

#[test]
fn bad_requests_are_refused() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev);
    let n = fs.sustat().nsegs;
    assert!(matches!(
        fs.clean_segments(&[n], Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
    let head = fs
        .segment_usage()
        .0
        .iter()
        .position(|u| u.flags & SU_FLAG_ACTIVE != 0)
        .unwrap() as u64;
    assert!(matches!(
        fs.clean_segments(&[head], Duration::ZERO),
        Err(Error::Again(_))
    ));
    let clean = fs
        .segment_usage()
        .0
        .iter()
        .position(|u| u.is_clean())
        .unwrap() as u64;
    assert!(matches!(
        fs.clean_segments(&[clean], Duration::ZERO),
        Err(Error::Again(_))
    ));
    // Only deleting checkpoints: nothing else happens.
    let r = fs.clean_segments(&[], Duration::from_secs(3600)).unwrap();
    assert_eq!(r.blocks_moved, 0);
    fs.unmount().unwrap();
}

#[test]
fn a_checkpoint_view_sees_the_attributes_of_its_time() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev);
    let f = fs.create(ROOT_INO, b"f", 0o100600, 0, 0, 0).unwrap();
    fs.write(f.ino, 0, b"hello").unwrap();
    let set = |m| lfs::fs::SetAttr {
        mode: Some(m),
        ..lfs::fs::SetAttr::default()
    };
    fs.setattr(f.ino, &set(0o755)).unwrap();
    let snap = fs.make_checkpoint(false).unwrap();
    fs.change_cpmode(snap, true).unwrap();
    fs.setattr(f.ino, &set(0o644)).unwrap();
    fs.sync().unwrap();
    let view = fs.open_checkpoint(snap).unwrap();
    assert_eq!(view.getattr(f.ino).unwrap().mode & 0o7777, 0o755);
    assert_eq!(fs.getattr(f.ino).unwrap().mode & 0o7777, 0o644);
    assert!(matches!(
        view.setattr(f.ino, &set(0o600)),
        Err(Error::ReadOnly(_))
    ));
    drop(view);
    fs.unmount().unwrap();
}

/// A cleaner at work, as cleanerd through fsd, until `stop`: it asks for
/// the segment counts (fsd then notes a cleaner at work) and, short of
/// clean segments, deletes every older checkpoint and cleans a few
/// segments.
/// A cleaner as cleanerd runs one; with `placed`, its passes send every
/// other victim's survivors and every young moved block to the warm head
/// and have fsd separate long-lived file data (declining-cost's
/// placement).
fn cleaner_thread(fs: &Arc<Fs>, stop: &Arc<AtomicBool>, placed: bool) -> JoinHandle<()> {
    let (fs, stop) = (fs.clone(), stop.clone());
    // At work from the start, as a cleanerd polling before the writes
    // begin: noted in the thread only, the first writes out of space
    // could come before the thread first ran (on a loaded machine, at
    // write 646 of 2,000) and fail at once instead of waiting for it.
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            // What fsd does when cleanerd polls the segment counts.
            let su = fs.sustat();
            if su.nclean < su.nreserved + 8 {
                // Busy: the engine's own pass for space runs (fs/space.rs).
                match fs.clean_segments(&[], Duration::ZERO) {
                    Ok(_) | Err(Error::NoSpace | Error::Busy(_)) => {}
                    Err(e) => panic!("deleting checkpoints: {e}"),
                }
                // Several segments a pass, halved when refused, as
                // cleanerd does: with 64-block segments one alone costs
                // more in DAT blocks than it frees, and six may not fit
                // in what is left.
                for n in [6, 3, 2] {
                    let v = fs.greedy_victims(n);
                    let placement = Placement {
                        warm: if placed {
                            v.iter().copied().step_by(2).collect()
                        } else {
                            Vec::new()
                        },
                        separate_writes: placed,
                        warm_young: placed,
                        strict_protection: false,
                    };
                    match fs.clean_segments_placed(&v, &placement, Duration::ZERO) {
                        Ok(_) | Err(Error::Busy(_)) => break,
                        Err(Error::Again(_)) => {}
                        Err(e) => panic!("cleaning: {e}"),
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

/// Deleting every file of a full filesystem, each unlink made durable
/// (as fsd's checkpoint timer does between the unlinks of an `rm`), with
/// no cleaner at all: every unlink succeeds. The checkpoints that record
/// them rewrite DAT blocks and free nothing until older checkpoints go;
/// the engine deletes those and cleans itself (`fs/space.rs`). Without
/// that, an unlink failed with NoSpace after a few dozen, and with a
/// cleaner they had to wait for its passes.
#[test]
fn deleting_every_file_of_a_full_filesystem_needs_no_cleaner() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev);
    let mut names = Vec::new();
    'fill: for i in 0u64.. {
        let name = format!("f{i}").into_bytes();
        let f = match fs.create(ROOT_INO, &name, 0o644, 0, 0, 0) {
            Ok(a) => a.ino,
            Err(Error::NoSpace) => break,
            Err(e) => panic!("create {i}: {e}"),
        };
        names.push(name);
        for b in 0..16 {
            match fs.write(f, b * BS as u64, &block(b, i)) {
                Ok(_) => {}
                Err(Error::NoSpace) => break 'fill,
                Err(e) => panic!("write {i}: {e}"),
            }
        }
        if i % 8 == 7 {
            fs.sync().unwrap();
        }
    }
    let total = names.len();
    assert!(total > 100, "only {total} files fit");
    for name in &names {
        fs.unlink(ROOT_INO, name).unwrap_or_else(|e| {
            panic!(
                "unlink of {} on a full filesystem: {e}\n{:?}",
                String::from_utf8_lossy(name),
                fs.df()
            )
        });
        fs.sync().unwrap();
    }
    assert_eq!(
        fs.readdir(ROOT_INO, 0).unwrap().len(),
        2,
        "{total} files, not all deleted"
    );
    fs.unmount().unwrap();
    drop(fs);
    fsck_clean(&dev);
}

/// Fills a fresh filesystem: one file written a MiB at a time, each
/// synced (so older checkpoints hold nothing but metadata), then a block
/// at a time until not even one fits; returns the file.
fn fill_up(fs: &Fs) -> u64 {
    let f = fs.create(ROOT_INO, b"full", 0o644, 0, 0, 0).unwrap().ino;
    let (mut off, mut chunk) = (0u64, 1u64 << 20);
    loop {
        match fs.write(f, off, &vec![7u8; chunk as usize]) {
            Ok(n) => off += u64::from(n),
            Err(Error::NoSpace) if chunk > BS as u64 => chunk /= 2,
            Err(Error::NoSpace) => return f,
            Err(e) => panic!("write at {off}: {e}"),
        }
        fs.sync().unwrap();
    }
}

/// A cleaner expiring checkpoints again and again on an idle, full
/// filesystem uses no space: deleting a checkpoint that keeps nothing
/// of its own is skipped. Each such deletion needed a checkpoint to
/// record it, which made its predecessor deletable at the next pass, 5
/// blocks a round, until the reserve was gone and not even an unlink
/// was admitted.
#[test]
fn expiring_checkpoints_of_an_idle_full_filesystem_uses_no_space() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev);
    fill_up(&fs);
    // The engine's own passes for space (fs/space.rs) may be running on
    // a full filesystem: a request then waits its turn.
    let expire = || loop {
        match fs.clean_segments(&[], Duration::ZERO) {
            Err(Error::Busy(_)) => std::thread::sleep(Duration::from_millis(10)),
            r => return r.unwrap(),
        }
    };
    expire();
    fs.sync().unwrap();
    let free = fs.df().free_blocks;
    for round in 0..20 {
        let r = expire();
        fs.sync().unwrap();
        assert_eq!(
            (r.checkpoints_deleted, fs.df().free_blocks),
            (0, free),
            "round {round}: {r:?}"
        );
    }
    fs.unmount().unwrap();
    drop(fs);
    fsck_clean(&dev);
}

/// Every change that needs space finds it as writes do, with no cleaner:
/// a create, mkdir, symlink, link and rename on a full filesystem whose
/// older checkpoints hold dead data succeed, the engine deleting them
/// (`fs/space.rs`). They got NoSpace at once without a cleaner, and had
/// to wait for one's passes.
#[test]
fn new_names_on_a_full_filesystem_need_no_cleaner() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev);
    let f = fill_up(&fs);
    // Half of the file rewritten as a hole: its blocks are dead but held
    // by the older checkpoints.
    let size = fs.getattr(f).unwrap().size;
    fs.fallocate(
        f,
        0,
        size / 2,
        lfs::fs::FALLOC_FL_PUNCH_HOLE | lfs::fs::FALLOC_FL_KEEP_SIZE,
    )
    .unwrap();
    fs.sync().unwrap();
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    for i in 0..32u64 {
        let name = format!("f{i}").into_bytes();
        let a = fs.create(d, &name, 0o644, 0, 0, 0).unwrap().ino;
        fs.write(a, 0, &block(i, 1)).unwrap();
        fs.link(a, ROOT_INO, &name).unwrap();
        fs.symlink(d, format!("s{i}").as_bytes(), &name, 0, 0)
            .unwrap();
        fs.rename(d, &name, d, format!("r{i}").as_bytes(), Default::default())
            .unwrap();
    }
    fs.sync().unwrap();
    let s = fs.stats();
    let get = |n: &str| s.counter(n).unwrap();
    assert!(get("checkpoints_expired_for_space") >= 1, "{s:?}");
    fs.unmount().unwrap();
    drop(fs);
    fsck_clean(&dev);
}

/// A writer that keeps a filesystem at the edge of full with random
/// single-block overwrites while a cleaner thread runs passes: every write
/// succeeds (waiting for space where it must) and no checkpoint ever fails
/// for space (once, repeated small checkpoints at the edge ate the cleaning
/// reserve until one could not be built and the filesystem went read-only).
#[test]
fn random_overwrites_at_the_edge_of_full_with_a_concurrent_cleaner() {
    overwrites_with_a_concurrent_cleaner(16, false);
}

/// The same with fdatasync every 4 writes: data-sync logs place blocks
/// that the cleaner moves, and that writes overwrite, between checkpoints
/// (once, a block placed so, queued by a pass and overwritten before the
/// pass's checkpoint, was moved after it had been freed: the cold segment
/// kept a live count for a block that did not exist).
#[test]
fn skewed_overwrites_with_a_cleaner_that_separates_hot_from_cold() {
    overwrites_with_a_concurrent_cleaner_placing(100, false, true);
}

#[test]
fn fdatasync_overwrites_with_a_concurrent_cleaner() {
    overwrites_with_a_concurrent_cleaner(4, true);
}

/// Random single-block overwrites near full, a sync (or fdatasync) every
/// `every` writes, while a thread runs cleaning passes; then every block
/// verifies and fsck is clean.
fn overwrites_with_a_concurrent_cleaner(every: u64, datasync: bool) {
    overwrites_with_a_concurrent_cleaner_placing(every, datasync, false);
}

/// Random overwrites (80 % of them to the first fifth of the file if
/// `placed`, which also has the cleaner send the survivors of every other
/// victim to the warm head and ask for writes to be separated) with a
/// cleaner keeping the filesystem at the edge of full; every byte
/// verifies, fsck is clean.
fn overwrites_with_a_concurrent_cleaner_placing(every: u64, datasync: bool, placed: bool) {
    let dev = fresh(16 << 20);
    let fs = mount(&dev);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    let st = fs.statfs().unwrap();
    let nblocks = st.bavail * 7 / 10;
    let mut ver = vec![0u64; nblocks as usize];
    fill(&fs, f.ino, nblocks);
    let stop = Arc::new(AtomicBool::new(false));
    let cleaner = cleaner_thread(&fs, &stop, placed);
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    for i in 0..3 * nblocks {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let hot = nblocks / 5;
        let b = if placed && (rng >> 40) % 10 < 8 {
            (rng >> 8) % hot
        } else {
            (rng >> 8) % nblocks
        };
        ver[b as usize] += 1;
        if let Err(e) = fs.write(f.ino, b * BS as u64, &block(b, ver[b as usize])) {
            panic!("write {i}: {e}\n{:?}", fs.sustat());
        }
        if i % every == 0 {
            let r = if datasync {
                fs.fsync(f.ino, true)
            } else {
                fs.sync()
            };
            r.unwrap_or_else(|e| panic!("sync after write {i}: {e}"));
        }
    }
    stop.store(true, Ordering::Relaxed);
    cleaner.join().unwrap();
    fs.sync().unwrap();
    verify(&fs, f.ino, nblocks, |b| ver[b as usize], "");
    fs.unmount().unwrap();
    drop(fs);
    fsck_clean(&dev);
}

/// The live copy of file block `off` of `ino`: its segment, address and
/// virtual block, found in the segments' summaries (the DAT decides which
/// copy is live).
fn live_copy(fs: &Fs, ino: u64, off: u64) -> (u64, u64, u64) {
    let (usage, _) = fs.segment_usage();
    for s in 0..usage.len() as u64 {
        if usage[s as usize].is_clean() {
            continue;
        }
        for log in fs.segment_summary(s).unwrap().logs {
            let first = log.block + u64::from(log.summary.header.nsummary_blocks);
            for (i, e) in log.summary.entries.iter().enumerate() {
                let addr = first + i as u64;
                if e.ino == ino && e.offset == off && fs.vinfo(&[e.vblock])[0].1.phys == addr {
                    return (s, addr, e.vblock);
                }
            }
        }
    }
    panic!("no live copy of block {off} of inode {ino}");
}

/// Issue 22: a cleaning pass takes the blocks it moves from the logs it
/// verified. A victim whose log holding a live block fails its body
/// checksum (bits flipped at rest) is not cleaned: the block is never
/// moved under a fresh checksum. The damage is reported (the pass's
/// error, the segment's error flag, fsck naming the file and offset), a
/// read of the block gets EIO instead of the flipped bytes, before and
/// after a remount, and the segment is freed once nothing in it is live.
#[test]
fn cleaning_refuses_a_damaged_log_and_reads_of_it_fail() {
    use lfs::blockdev::FaultDevice;
    use lfs::format::SU_FLAG_ERROR;

    let mem = MemDevice::new(24 << 20);
    let mut o = MkfsOptions::new([2; 16], 0x5eed, 1_700_000_000, 0);
    o.blocks_per_segment = 64;
    o.discard = false;
    format(&mem, &o).unwrap();
    let dev = Arc::new(FaultDevice::new(mem));
    let opts = MountOptions::default();
    let fs = Fs::mount(dev.clone(), opts.clone()).unwrap();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    let nblocks = 150u64;
    fill(&fs, f.ino, nblocks);
    // Odd blocks overwritten: the first segments are half live.
    for b in (1..nblocks).step_by(2) {
        fs.write(f.ino, b * BS as u64, &block(b, 1)).unwrap();
    }
    fs.sync().unwrap();
    let (seg, addr, vblock) = live_copy(&fs, f.ino, 10);
    assert_eq!(
        fs.read(f.ino, 10 * BS as u64, BS as u32).unwrap(),
        block(10, 0)
    );
    dev.flip_bits(addr * BS as u64 + 100, 0x10).unwrap();

    let e = fs.clean_segments(&[seg], Duration::ZERO).unwrap_err();
    assert!(
        matches!(&e, Error::Again(m) if m.contains("checksum")),
        "cleaning a damaged segment: {e}"
    );
    // Not moved: the DAT still points at the damaged copy.
    assert_eq!(fs.vinfo(&[vblock])[0].1.phys, addr);
    let (usage, _) = fs.segment_usage();
    assert_ne!(usage[seg as usize].flags & SU_FLAG_ERROR, 0);
    assert!(!fs.greedy_victims(1000).contains(&seg));
    let read = fs.read(f.ino, 10 * BS as u64, BS as u32);
    assert!(
        matches!(read, Err(Error::Corrupted { .. })),
        "read of a block in a damaged log: {read:?}"
    );
    // Blocks of other logs read as ever (the whole damaged log is
    // suspect: its checksum cannot say which block changed).
    assert_eq!(fs.read(f.ino, BS as u64, BS as u32).unwrap(), block(1, 1));

    fs.unmount().unwrap();
    drop(fs);
    let d: Arc<dyn BlockDevice> = dev.clone();
    let r = lfs::fsck::fsck(d).unwrap();
    let want = format!("inode {} offset 10)", f.ino);
    assert!(
        r.errors
            .iter()
            .any(|e| e.contains("fails its body checksum") && e.contains(&want)),
        "fsck: {:#?}",
        r.errors
    );
    let fs = Fs::mount(dev.clone(), opts.clone()).unwrap();
    let read = fs.read(f.ino, 10 * BS as u64, BS as u32);
    assert!(
        matches!(read, Err(Error::Corrupted { .. })),
        "after a remount: {read:?}"
    );
    // Once the damaged file data is dead, the segment can be cleaned
    // (asked for by number: cleanerd leaves flagged segments alone), and
    // the damage goes with it.
    fs.setattr(
        f.ino,
        &lfs::fs::SetAttr {
            size: Some(0),
            ..Default::default()
        },
    )
    .unwrap();
    fs.sync().unwrap();
    let r = fs.clean_segments(&[seg], Duration::ZERO).unwrap();
    assert_eq!(r.segments_freed, 1, "{r:?}");
    let (usage, _) = fs.segment_usage();
    assert_eq!(usage[seg as usize].flags & SU_FLAG_ERROR, 0);
    fs.unmount().unwrap();
    drop(fs);
    let d: Arc<dyn BlockDevice> = dev.clone();
    let r = lfs::fsck::fsck(d).unwrap();
    assert!(r.is_clean(), "fsck once freed: {:#?}", r.errors);
}

/// A damaged log whose blocks are all dead stops nothing: the victim is
/// cleaned (nothing of that log is moved) and freed.
#[test]
fn a_damaged_log_of_dead_blocks_is_cleaned_away() {
    let (dev, fs, f, _) = with_file(64);
    let (seg, addr, _) = live_copy(&fs, f.ino, 3);
    // Every block of the file overwritten: the first copies are dead
    // once their checkpoints go.
    for b in 0..64u64 {
        fs.write(f.ino, b * BS as u64, &block(b, 2)).unwrap();
    }
    fs.sync().unwrap();
    let mut b = vec![0u8; BS];
    dev.read_at(&mut b, addr * BS as u64).unwrap();
    b[7] ^= 1;
    dev.write_all_at(&b, addr * BS as u64).unwrap();
    let r = fs.clean_segments(&[seg], Duration::ZERO).unwrap();
    assert_eq!(r.segments_freed, 1, "{r:?}");
    verify(&fs, f.ino, 64, |_| 2, "after cleaning");
    verify_after_remount(&dev, fs, f.ino, 64, &[2; 64]);
}
