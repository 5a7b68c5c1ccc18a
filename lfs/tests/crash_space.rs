//! The crash matrix over the space guarantee's own writes (issue 23): a
//! nearly full filesystem whose writes need the engine to make room
//! itself, deleting history for space and cleaning in the foreground
//! (`fs/space.rs`), crashed at every one of its writes. A write that
//! finds no space writes checkpoints of the state before it (it changed
//! nothing yet): the journal takes that state as in flight during each
//! write, and as acknowledged once the write returns if the engine wrote
//! a checkpoint meanwhile. After each crash the image must pass fsck,
//! mount, and show the last acknowledged state or the one being made
//! durable, and a snapshot taken at the start must still read as it
//! was.

mod common;

use std::sync::Arc;

use common::{first_difference, long, tree, Journal, Tree};
use lfs::blockdev::{BlockDevice, CrashMode, FaultDevice, MemDevice};
use lfs::format::ROOT_INO;
use lfs::fs::{Fs, MountOptions};
use lfs::mkfs::{format, MkfsOptions};

const BS: u64 = 4096;
/// 4 MiB in 32 segments of 128 KiB: a 1.75 MiB file, a snapshot and
/// the reserve nearly fill it.
const DEV_LEN: u64 = 4 << 20;
const FILE_BLOCKS: u64 = 448;
/// Rounds of scattered writes, each made durable: several rounds of
/// history yielding and foreground cleaning (twice as many with
/// `LFS_LONG=1`).
fn steps() -> u64 {
    if long() {
        24
    } else {
        12
    }
}
/// Writes of [`RUN`] blocks a round.
const WRITES: u64 = 4;
const RUN: u64 = 8;

fn image() -> Vec<u8> {
    let dev = MemDevice::new(DEV_LEN);
    let mut o = MkfsOptions::new([6; 16], 0x5ca1e, 1_700_000_000, 0);
    o.blocks_per_segment = 32;
    o.discard = false;
    format(&dev, &o).unwrap();
    dev.into_vec()
}

/// The workload chooses every checkpoint but those the engine writes to
/// make room, which are the point here: no timer, no space thread.
fn opts() -> MountOptions {
    MountOptions {
        checkpoint_interval: std::time::Duration::from_secs(3600),
        background_space: false,
        ..MountOptions::default()
    }
}

fn block(b: u64, v: u64) -> Vec<u8> {
    let x = b.wrapping_mul(0x9e37) ^ v.wrapping_mul(0x7f4a_7c15);
    (0..BS)
        .map(|i| (x.wrapping_add(i / 9) % 251) as u8 + 1)
        .collect()
}

/// What the workload wrote: the two files' bytes.
struct Model {
    s: Vec<u8>,
    f: Vec<u8>,
}

impl Model {
    /// The tree the engine must show now, from the model's bytes and the
    /// engine's attributes (reading the files back at every write would
    /// be the slow part of the test).
    fn tree(&self, fs: &Fs) -> lfs::Result<Tree> {
        let mut t = Tree::new();
        t.insert(
            "/".into(),
            common::durable::entry(fs, ROOT_INO, lfs::format::FileType::Directory)?,
        );
        for (name, data) in [("s", &self.s), ("f", &self.f)] {
            let Ok(a) = fs.lookup(ROOT_INO, name.as_bytes()) else {
                continue;
            };
            let e = common::durable::entry_with(
                fs,
                a.ino,
                lfs::format::FileType::Regular,
                data.clone(),
            )?;
            t.insert(format!("/{name}"), e);
        }
        Ok(t)
    }
}

/// A write during which the engine may make room, writing checkpoints of
/// the state before it: that state is in flight during the write, and
/// acknowledged after it if a checkpoint was written.
fn write(fs: &Fs, j: &mut Journal, m: &Model, ino: u64, off: u64, data: &[u8]) -> lfs::Result<()> {
    let before = m.tree(fs)?;
    let checkpoints = fs.stats().counter("checkpoints");
    j.in_flight = Some(before);
    fs.write(ino, off, data)?;
    let state = j.in_flight.take();
    if fs.stats().counter("checkpoints") != checkpoints {
        j.acked.extend(state);
    }
    Ok(())
}

/// The workload; the snapshot's number.
fn workload(fs: &Fs, j: &mut Journal) -> lfs::Result<u64> {
    let mut m = Model {
        s: snapshot_data(),
        f: Vec::new(),
    };
    let s = fs.create(ROOT_INO, b"s", 0o644, 0, 0, 0)?.ino;
    fs.write(s, 0, &m.s)?;
    j.durable(fs, || fs.fsync(s, false))?;
    let snap = j.durable(fs, || fs.make_checkpoint(true))?;
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0)?.ino;
    let fill: Vec<u8> = (0..FILE_BLOCKS).flat_map(|b| block(b, 0)).collect();
    write(fs, j, &m, f, 0, &fill)?;
    m.f = fill;
    j.durable(fs, || fs.fsync(f, false))?;
    // Scattered overwrites: segments end up partly live, so room comes
    // from cleaning as well as from deleting history.
    let mut x = 0x2545_f491u64;
    for step in 1..=steps() {
        for _ in 0..WRITES {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x % (FILE_BLOCKS - RUN);
            let data: Vec<u8> = (b..b + RUN).flat_map(|k| block(k, step)).collect();
            write(fs, j, &m, f, b * BS, &data)?;
            let o = (b * BS) as usize;
            m.f[o..o + data.len()].copy_from_slice(&data);
        }
        j.durable(fs, || fs.fsync(f, false))?;
    }
    Ok(snap)
}

/// The snapshot's file as the workload wrote it.
fn snapshot_data() -> Vec<u8> {
    (0..32).flat_map(|b| block(b, 1000)).collect()
}

fn run(mode: CrashMode, at: Option<u64>) -> (u64, Journal, Result<(Tree, Fs2), String>) {
    let fault = Arc::new(FaultDevice::new(MemDevice::from_vec(image())));
    fault.set_crash_mode(mode);
    if let Some(n) = at {
        fault.crash_at_write(n);
    }
    let dev: Arc<dyn BlockDevice> = fault.clone();
    let fresh = {
        let d: Arc<dyn BlockDevice> = Arc::new(MemDevice::from_vec(image()));
        tree(&Fs::mount(d, opts()).unwrap()).unwrap()
    };
    let mut j = Journal {
        acked: vec![fresh],
        in_flight: None,
        in_flight_alt: None,
    };
    let mut snap = None;
    if let Ok(fs) = Fs::mount(dev, opts()) {
        let r = workload(&fs, &mut j);
        if at.is_none() {
            snap = Some(r.unwrap_or_else(|e| panic!("the workload failed without a crash: {e}")));
            let s = fs.stats();
            let count = |n: &str| s.counter(n).unwrap();
            assert!(
                count("checkpoints_expired_for_space") > 0 && count("space_passes") > 0,
                "the workload never made room itself: {:?}",
                s.counters
            );
            fs.unmount().unwrap();
        } else if let Ok(c) = r {
            snap = Some(c);
        }
    }
    let writes = fault.writes();
    if !fault.is_crashed() {
        fault.crash_now().unwrap();
    }
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::from_vec(fault.durable().snapshot()));
    match lfs::fsck::fsck(dev.clone()) {
        Ok(r) if r.is_clean() => {}
        Ok(r) => return (writes, j, Err(format!("fsck: {:?}", r.errors))),
        Err(e) => return (writes, j, Err(format!("fsck: {e}"))),
    }
    let recovered = Fs::mount(dev, opts())
        .map_err(|e| format!("mount failed: {e}"))
        .and_then(|fs| {
            let t = tree(&fs).map_err(|e| format!("reading the tree: {e}"))?;
            Ok((t, Fs2(fs, snap)))
        });
    (writes, j, recovered)
}

/// The recovered filesystem and the snapshot made before the crash, if
/// the workload got that far.
struct Fs2(Arc<Fs>, Option<u64>);

impl Fs2 {
    /// The snapshot, if it was acknowledged, still reads as written.
    fn check_snapshot(&self) -> Result<(), String> {
        let Some(cno) = self.1 else { return Ok(()) };
        let Ok(view) = self.0.open_checkpoint(cno) else {
            // Made but not yet durable when the crash came.
            return Ok(());
        };
        let s = view
            .lookup(ROOT_INO, b"s")
            .map_err(|e| format!("snapshot: {e}"))?;
        let got = view
            .read(s.ino, 0, 32 * BS as u32)
            .map_err(|e| format!("snapshot read: {e}"))?;
        if got != snapshot_data() {
            return Err("the snapshot's file changed".into());
        }
        Ok(())
    }
}

fn check(mode: CrashMode) -> u64 {
    let (total, full, rec) = run(mode, None);
    let (t, _) = rec.as_ref().unwrap();
    assert_eq!(Some(t), full.acked.last(), "clean run lost data");
    for n in 1..=total {
        let (_, j, rec) = run(mode, Some(n));
        let (rec, fs) = rec.unwrap_or_else(|e| panic!("{mode:?} crash at write {n}: {e}"));
        let last = j.acked.len() - 1;
        assert!(
            j.allows(&rec),
            "{mode:?} crash at write {n}: recovered state is neither acknowledged state {last} nor the one being made durable: {}; against the one in flight: {}",
            first_difference(&rec, &j.acked[last]),
            j.in_flight
                .as_ref()
                .map_or("none".into(), |t| first_difference(&rec, t))
        );
        fs.check_snapshot()
            .unwrap_or_else(|e| panic!("{mode:?} crash at write {n}: {e}"));
    }
    total
}

#[test]
fn crash_at_every_write_while_the_engine_makes_room() {
    // Bounded: every write dropped, and torn with the rest reordered;
    // long: every way the device contract allows, with 32 random seeds.
    let mut modes = vec![CrashMode::DropAll];
    if long() {
        modes.extend([
            CrashMode::KeepAll,
            CrashMode::KeepPrefix(2),
            CrashMode::TearLast { sectors: 1 },
        ]);
    }
    let seeds = if long() { 32 } else { 1 };
    modes.extend((0..seeds).map(|seed| CrashMode::Random { seed }));
    let images: u64 = modes.iter().map(|&m| check(m)).sum();
    eprintln!(
        "crash matrix, history yielding and foreground cleaning: {} modes, {images} crash images, 0 lost",
        modes.len()
    );
}
