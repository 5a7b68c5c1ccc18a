//! The engine as it runs: checkpoints on their own timer, cleaning passes
//! on their own thread, and writers, all at once, for many operations,
//! with every file checked against a model of its contents.
//!
//! Each worker thread owns a directory of files and runs fsx's mix of
//! operations on them (buffered, O_DIRECT-like aligned and mmap-like
//! page writes, reads, truncate down and up, punch hole, fallocate with
//! and without KEEP_SIZE, fsync and fdatasync, unlink while open, rename
//! over a file, snapshots of files cut and regrown), checking every read
//! against its model. Meanwhile the checkpoint timer fires every couple
//! of milliseconds, a cleaner thread cleans greedily with no protection
//! period, and the device stalls some writes, so that operations keep
//! landing while a checkpoint is being written. At the end every file is
//! compared, then the filesystem is unmounted, checked by fsck, mounted
//! again and compared once more.
//!
//! The tests here pick no checkpoint point: the timer and the cleaner do.
//! (Every other engine test chose where its checkpoints fell; none found
//! issue 22, a truncate racing a checkpoint's write. Those exact races
//! are pinned down deterministically in `inflight.rs`.)
//!
//! `LFS_SOAK_OPS` sets the operations per worker (default
//! [`DEFAULT_OPS`]); `LFS_SOAK_SEED` runs one seed instead of the fixed
//! ones. `bench/reliability.sh` runs it with millions of operations.
//!
//! Why not Shuttle or loom: the engine's lock protocol uses std's
//! primitives with timed waits (the checkpoint timer, waits for space and
//! for the dirty limit), a cleaning pass changes its OS scheduling class
//! (`fs/background.rs`), and the bugs of this class live in what the data
//! structures promise across the windows where no lock is held (a log
//! being written), not in the lock order itself. Shuttle would need every
//! primitive and thread of the engine behind a facade and a virtual clock
//! for the timer; loom's exhaustive search does not scale past a few
//! operations. A real timer, real threads and a device that stalls
//! exercise those windows millions of times in a reliability run, and
//! the deterministic tests in `inflight.rs` hold each known window open.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lfs::blockdev::{BlockDevice, MemDevice};
use lfs::format::ROOT_INO;
use lfs::fs::{Fs, MountOptions, RenameFlags, SetAttr, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE};
use lfs::mkfs::{format, MkfsOptions};
use lfs::Error;
use lfs_e2e::rng::SplitMix64;

const BS: u64 = 4096;
/// Largest file (fsx's default).
const MAX_FILE: u64 = 256 << 10;
/// Longest write (fsx's default).
const MAX_IO: u64 = 64 << 10;
/// Operations per worker unless `LFS_SOAK_OPS` says otherwise.
const DEFAULT_OPS: usize = 6_000;
/// Worker threads, each with [`FILES`] files of its own.
const WORKERS: usize = 2;
const FILES: usize = 3;
/// Operations a file unlinked while open lives on before its last close.
const ORPHAN_OPS: u32 = 12;
/// Operations between taking a snapshot and checking it.
const SNAPSHOT_AGE: usize = 400;
/// Operations shown when a check fails.
const LOG_TAIL: usize = 40;

/// The tests' PRNG, reproducible from the seed, with the draws used here.
struct Rng(SplitMix64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(SplitMix64(seed))
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n.max(1)
    }
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

/// A memory device that stalls some writes and flushes for up to half a
/// millisecond: a checkpoint stays in flight while operations go on.
#[derive(Debug)]
struct StallingDevice {
    inner: MemDevice,
    calls: AtomicU64,
    seed: u64,
}

impl StallingDevice {
    fn stall(&self) {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let mut r = Rng::new(self.seed ^ n.wrapping_mul(0x51_7cc1_b727_220a));
        if r.chance(250) {
            std::thread::sleep(Duration::from_micros(r.below(500)));
        }
    }
}

impl BlockDevice for StallingDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> std::io::Result<()> {
        self.stall();
        self.inner.write_at(bufs, offset)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.stall();
        self.inner.flush()
    }
    fn discard(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.inner.discard(offset, len)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

fn fresh(seed: u64) -> Arc<StallingDevice> {
    let dev = MemDevice::new(48 << 20);
    let mut o = MkfsOptions::new([7; 16], 0xc0c0, 1_700_000_000, 0);
    // Small segments: cleaning passes are frequent and cheap.
    o.blocks_per_segment = 32;
    o.discard = false;
    format(&dev, &o).unwrap();
    Arc::new(StallingDevice {
        inner: dev,
        calls: AtomicU64::new(0),
        seed,
    })
}

/// The timer fires every 2 ms, and a small dirty limit adds checkpoints
/// the writers kick.
fn busy_opts() -> MountOptions {
    MountOptions {
        checkpoint_interval: Duration::from_millis(2),
        dirty_limit_bytes: 512 << 10,
        ..MountOptions::default()
    }
}

/// One file of a worker: its name, inode, open state and contents.
#[derive(Debug, Clone)]
struct File {
    name: Vec<u8>,
    ino: u64,
    data: Vec<u8>,
    /// Operations left before the last close, once unlinked while open.
    orphan: Option<u32>,
}

/// What a worker checks a snapshot against.
struct Snapshot {
    cno: u64,
    taken_at: usize,
    files: Vec<(Vec<u8>, Vec<u8>)>,
}

struct Worker {
    fs: Arc<Fs>,
    id: usize,
    dir: u64,
    rng: Rng,
    files: Vec<File>,
    log: VecDeque<String>,
    op: usize,
    seed: u64,
    snapshot: Option<Snapshot>,
    /// Names made so far (each new file gets a fresh one).
    made: u64,
    stop: Arc<AtomicBool>,
}

/// Bytes that tell apart the operation and the offset they were written
/// at (never zero, so a hole that shows old data is not mistaken for it).
fn pattern(op: usize, off: u64, len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| {
            let x = (op as u64).wrapping_mul(131) ^ (off + i).wrapping_mul(7) ^ ((off + i) >> 9);
            (x % 255) as u8 + 1
        })
        .collect()
}

fn apply_write(data: &mut Vec<u8>, off: u64, bytes: &[u8]) {
    let end = off as usize + bytes.len();
    if data.len() < end {
        data.resize(end, 0);
    }
    data[off as usize..end].copy_from_slice(bytes);
}

/// The first difference between `got` and `want`, if any.
fn first_difference(got: &[u8], want: &[u8]) -> Option<String> {
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        return Some(format!(
            "byte {i:#x} is {:#04x}, expected {:#04x}",
            got[i], want[i]
        ));
    }
    (got.len() != want.len()).then(|| format!("{} bytes, expected {}", got.len(), want.len()))
}

fn is_transient(e: &Error) -> bool {
    matches!(e, Error::Again(_) | Error::Busy(_) | Error::NoSpace)
}

impl Worker {
    fn new(fs: Arc<Fs>, id: usize, seed: u64, stop: Arc<AtomicBool>) -> Result<Worker, String> {
        let name = format!("w{id}");
        let dir = fs
            .mkdir(ROOT_INO, name.as_bytes(), 0o755, 0, 0)
            .map_err(|e| format!("mkdir {name}: {e}"))?
            .ino;
        let mut w = Worker {
            fs,
            id,
            dir,
            rng: Rng::new(seed.wrapping_add(id as u64 * 7919)),
            files: Vec::new(),
            log: VecDeque::new(),
            op: 0,
            seed,
            snapshot: None,
            made: 0,
            stop,
        };
        for _ in 0..FILES {
            let f = w.new_file()?;
            w.files.push(f);
        }
        Ok(w)
    }

    /// Creates (and opens) a new empty file with a fresh name.
    fn new_file(&mut self) -> Result<File, String> {
        self.made += 1;
        let name = format!("f{}", self.made).into_bytes();
        let a = self
            .fs
            .create_open(self.dir, &name, 0o644, 0, 0)
            .map_err(|e| self.fail(&format!("create: {e}")))?;
        Ok(File {
            name,
            ino: a.ino,
            data: Vec::new(),
            orphan: None,
        })
    }

    fn note(&mut self, s: String) {
        if self.log.len() == LOG_TAIL {
            self.log.pop_front();
        }
        self.log.push_back(format!("{:>7}: {s}", self.op));
    }

    fn fail(&self, what: &str) -> String {
        let log: Vec<&str> = self.log.iter().map(String::as_str).collect();
        format!(
            "worker {} (seed {}), operation {}: {what}\nlast operations:\n{}",
            self.id,
            self.seed,
            self.op,
            log.join("\n")
        )
    }

    fn check<T>(&self, r: lfs::Result<T>, what: &str) -> Result<T, String> {
        r.map_err(|e| self.fail(&format!("{what}: {e}")))
    }

    /// Reads `[off, off + len)` of file `k` and compares it with the model.
    fn verify_range(&self, k: usize, off: u64, len: u64, how: &str) -> Result<(), String> {
        let f = &self.files[k];
        let got = self.check(self.fs.read(f.ino, off, len as u32), "read")?;
        let size = f.data.len() as u64;
        let end = (off + len).min(size);
        let want: &[u8] = if off >= size {
            &[]
        } else {
            &f.data[off as usize..end as usize]
        };
        if let Some(d) = first_difference(&got, want) {
            return Err(self.fail(&format!(
                "{how} of {:#x}..{:#x} in inode {}: {d} (offset {off:#x} + the byte)",
                off,
                off + len,
                f.ino
            )));
        }
        Ok(())
    }

    fn verify_file(&self, k: usize, when: &str) -> Result<(), String> {
        let f = &self.files[k];
        let a = self.check(self.fs.getattr(f.ino), "getattr")?;
        if a.size != f.data.len() as u64 {
            return Err(self.fail(&format!(
                "{when}: inode {} has size {:#x}, expected {:#x}",
                f.ino,
                a.size,
                f.data.len()
            )));
        }
        self.verify_range(k, 0, MAX_FILE + BS, when)
    }

    fn run(mut self, nops: usize) -> Result<Vec<File>, String> {
        while self.op < nops && !self.stop.load(Ordering::Relaxed) {
            self.op += 1;
            let k = self.rng.below(self.files.len() as u64) as usize;
            self.step(k)?;
            self.age_orphan(k)?;
            self.maybe_check_snapshot()?;
        }
        for k in 0..self.files.len() {
            self.verify_file(k, "at the end")?;
        }
        if let Some(s) = self.snapshot.take() {
            self.check_snapshot(s)?;
        }
        // Last closes: unlinked files go, linked ones are returned.
        let mut out = Vec::new();
        for f in std::mem::take(&mut self.files) {
            self.check(self.fs.release(f.ino), "release")?;
            if f.orphan.is_none() {
                out.push(f);
            }
        }
        Ok(out)
    }

    /// One operation on file `k`, fsx's mix.
    fn step(&mut self, k: usize) -> Result<(), String> {
        let r = self.rng.below(1000);
        match r {
            0..=199 => self.read(k, false),
            200..=249 => self.read(k, true),
            250..=479 => self.write(k),
            480..=559 => self.direct_write(k),
            560..=659 => self.map_write(k),
            660..=739 => self.truncate(k),
            740..=819 => self.punch(k),
            820..=899 => self.falloc(k),
            900..=939 => self.sync(k),
            940..=959 => self.replace(k),
            960..=974 => self.unlink_open(k),
            975..=979 => self.take_snapshot(),
            _ => self.read(k, false),
        }
    }

    fn read(&mut self, k: usize, aligned: bool) -> Result<(), String> {
        let size = self.files[k].data.len() as u64;
        let (off, len) = if aligned {
            let off = self.rng.below(size / BS + 1) * BS;
            (off, (self.rng.below(MAX_IO / BS) + 1) * BS)
        } else {
            (self.rng.below(size + 1), self.rng.below(MAX_IO) + 1)
        };
        self.note(format!(
            "READ {off:#x} +{len:#x}{}",
            if aligned { " (aligned)" } else { "" }
        ));
        self.verify_range(k, off, len, "read")
    }

    fn do_write(&mut self, k: usize, off: u64, len: u64, what: &str) -> Result<(), String> {
        let bytes = pattern(self.op, off, len);
        self.note(format!(
            "{what} {off:#x} +{len:#x} (size {:#x})",
            self.files[k].data.len()
        ));
        let ino = self.files[k].ino;
        let n = self.check(self.fs.write(ino, off, &bytes), what)?;
        if u64::from(n) != len {
            return Err(self.fail(&format!("{what}: {n} bytes written of {len}")));
        }
        apply_write(&mut self.files[k].data, off, &bytes);
        Ok(())
    }

    fn write(&mut self, k: usize) -> Result<(), String> {
        let size = self.files[k].data.len() as u64;
        // Now and then well past the end, leaving a hole.
        let off = if self.rng.chance(150) {
            size + self.rng.below(MAX_IO)
        } else {
            self.rng.below(size + 1)
        };
        let off = off.min(MAX_FILE - 1);
        let len = (self.rng.below(MAX_IO) + 1).min(MAX_FILE - off);
        self.do_write(k, off, len, "WRITE")
    }

    /// As O_DIRECT with 4 KiB alignment (fsx -Z -r 4096 -w 4096).
    fn direct_write(&mut self, k: usize) -> Result<(), String> {
        let size = self.files[k].data.len() as u64;
        let off = (self.rng.below(size.div_ceil(BS) + 2) * BS).min(MAX_FILE - BS);
        let len = ((self.rng.below(MAX_IO / BS) + 1) * BS).min(MAX_FILE - off);
        self.do_write(k, off, len, "DIRECT WRITE")
    }

    /// As an mmap write: the file is first extended to cover the range
    /// (fsx does so), then the kernel writes back whole pages up to the
    /// end of file, bytes around the change included.
    fn map_write(&mut self, k: usize) -> Result<(), String> {
        let size = self.files[k].data.len() as u64;
        let off = self.rng.below(size + MAX_IO).min(MAX_FILE - 1);
        let len = (self.rng.below(MAX_IO) + 1).min(MAX_FILE - off);
        let bytes = pattern(self.op, off, len);
        self.note(format!("MAPWRITE {off:#x} +{len:#x} (size {size:#x})"));
        let ino = self.files[k].ino;
        if off + len > size {
            self.set_size(k, off + len)?;
        }
        apply_write(&mut self.files[k].data, off, &bytes);
        let new_size = self.files[k].data.len() as u64;
        let first = off / BS * BS;
        let last = ((off + len).div_ceil(BS) * BS).min(new_size);
        let pages = self.files[k].data[first as usize..last as usize].to_vec();
        let n = self.check(self.fs.write(ino, first, &pages), "page writeback")?;
        if n as usize != pages.len() {
            return Err(self.fail("page writeback: short"));
        }
        Ok(())
    }

    fn set_size(&mut self, k: usize, size: u64) -> Result<(), String> {
        let set = SetAttr {
            size: Some(size),
            ..SetAttr::default()
        };
        let ino = self.files[k].ino;
        self.check(self.fs.setattr(ino, &set), "truncate")?;
        self.files[k].data.resize(size as usize, 0);
        Ok(())
    }

    fn truncate(&mut self, k: usize) -> Result<(), String> {
        let size = self.files[k].data.len() as u64;
        let to = if self.rng.chance(600) {
            self.rng.below(size + 1)
        } else {
            self.rng.below(MAX_FILE + 1)
        };
        self.note(format!(
            "TRUNCATE {} from {size:#x} to {to:#x}",
            if to < size { "DOWN" } else { "UP" }
        ));
        self.set_size(k, to)?;
        // A cut block is often read right after: the pattern of issue 22.
        if to < size && self.rng.chance(500) {
            let b = to / BS * BS;
            self.verify_range(k, b, 2 * BS, "read after truncate")?;
        }
        Ok(())
    }

    fn punch(&mut self, k: usize) -> Result<(), String> {
        let size = self.files[k].data.len() as u64;
        if size == 0 {
            return Ok(());
        }
        let off = self.rng.below(size);
        let len = self.rng.below(MAX_IO) + 1;
        self.note(format!("PUNCH {off:#x} +{len:#x} (size {size:#x})"));
        let ino = self.files[k].ino;
        self.check(
            self.fs
                .fallocate(ino, off, len, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE),
            "punch",
        )?;
        let end = (off + len).min(size) as usize;
        self.files[k].data[off as usize..end].fill(0);
        if self.rng.chance(500) {
            self.verify_range(k, off / BS * BS, len + BS, "read after punch")?;
        }
        Ok(())
    }

    fn falloc(&mut self, k: usize) -> Result<(), String> {
        let size = self.files[k].data.len() as u64;
        let off = self.rng.below(size + MAX_IO).min(MAX_FILE - 1);
        let len = (self.rng.below(MAX_IO) + 1).min(MAX_FILE - off);
        let keep = self.rng.chance(300);
        self.note(format!(
            "FALLOC {off:#x} +{len:#x}{} (size {size:#x})",
            if keep { " KEEP_SIZE" } else { "" }
        ));
        let ino = self.files[k].ino;
        let mode = if keep { FALLOC_FL_KEEP_SIZE } else { 0 };
        self.check(self.fs.fallocate(ino, off, len, mode), "fallocate")?;
        if !keep && off + len > size {
            self.files[k].data.resize((off + len) as usize, 0);
        }
        Ok(())
    }

    fn sync(&mut self, k: usize) -> Result<(), String> {
        let data_only = self.rng.chance(600);
        self.note(if data_only { "FDATASYNC" } else { "FSYNC" }.to_string());
        let ino = self.files[k].ino;
        self.check(self.fs.fsync(ino, data_only), "fsync")
    }

    /// Writes a new file and renames it over file `k`, which stays open
    /// until the last close (as an editor's save while a reader has it).
    fn replace(&mut self, k: usize) -> Result<(), String> {
        if self.files[k].orphan.is_some() {
            return Ok(());
        }
        let mut f = self.new_file()?;
        let len = self.rng.below(MAX_IO) + 1;
        let bytes = pattern(self.op, 0, len);
        self.note(format!(
            "REPLACE inode {} by {} of {len:#x} bytes",
            self.files[k].ino, f.ino
        ));
        self.check(self.fs.write(f.ino, 0, &bytes), "write of the new file")?;
        f.data = bytes;
        let (dir, from, to) = (self.dir, f.name.clone(), self.files[k].name.clone());
        self.check(
            self.fs.rename(dir, &from, dir, &to, RenameFlags::default()),
            "rename over",
        )?;
        f.name = to;
        let old = std::mem::replace(&mut self.files[k], f);
        // The replaced file lives on through its descriptor for a while.
        self.files.push(File {
            orphan: Some(ORPHAN_OPS),
            ..old
        });
        Ok(())
    }

    fn unlink_open(&mut self, k: usize) -> Result<(), String> {
        if self.files[k].orphan.is_some() {
            return Ok(());
        }
        self.note(format!("UNLINK open inode {}", self.files[k].ino));
        let name = self.files[k].name.clone();
        self.check(self.fs.unlink(self.dir, &name), "unlink")?;
        self.files[k].orphan = Some(ORPHAN_OPS);
        let f = self.new_file()?;
        self.files.push(f);
        Ok(())
    }

    /// Counts down an unlinked open file's last operations; then closes it.
    fn age_orphan(&mut self, k: usize) -> Result<(), String> {
        let Some(left) = self.files.get(k).and_then(|f| f.orphan) else {
            return Ok(());
        };
        if left > 0 {
            self.files[k].orphan = Some(left - 1);
            return Ok(());
        }
        self.verify_file(k, "before the last close")?;
        let f = self.files.swap_remove(k);
        self.note(format!("CLOSE unlinked inode {}", f.ino));
        self.check(self.fs.release(f.ino), "release")
    }

    /// Worker 0 only (one snapshot at a time; a snapshot another worker
    /// turned back into a plain checkpoint could be cleaned away).
    fn take_snapshot(&mut self) -> Result<(), String> {
        if self.id != 0 || self.snapshot.is_some() {
            return Ok(());
        }
        let cno = self.check(self.fs.make_checkpoint(true), "make snapshot")?;
        self.note(format!("SNAPSHOT {cno}"));
        let files = self
            .files
            .iter()
            .filter(|f| f.orphan.is_none())
            .map(|f| (f.name.clone(), f.data.clone()))
            .collect();
        self.snapshot = Some(Snapshot {
            cno,
            taken_at: self.op,
            files,
        });
        Ok(())
    }

    fn maybe_check_snapshot(&mut self) -> Result<(), String> {
        if self
            .snapshot
            .as_ref()
            .is_some_and(|s| self.op - s.taken_at >= SNAPSHOT_AGE)
        {
            let s = self.snapshot.take().expect("checked");
            self.check_snapshot(s)?;
        }
        Ok(())
    }

    /// Every file as it was when the snapshot was taken, read through a
    /// view of it after hundreds of cuts, regrowths and cleaning passes;
    /// then the snapshot becomes a plain checkpoint, for the cleaner.
    fn check_snapshot(&mut self, s: Snapshot) -> Result<(), String> {
        self.note(format!("CHECK SNAPSHOT {}", s.cno));
        let view = self.check(self.fs.open_checkpoint(s.cno), "open snapshot")?;
        let name = format!("w{}", self.id);
        let dir = self.check(view.lookup(ROOT_INO, name.as_bytes()), "snapshot lookup")?;
        for (fname, want) in &s.files {
            let a = self.check(view.lookup(dir.ino, fname), "snapshot lookup")?;
            let got = self.check(view.read(a.ino, 0, (MAX_FILE + BS) as u32), "snapshot read")?;
            if let Some(d) = first_difference(&got, want) {
                return Err(self.fail(&format!(
                    "snapshot {}: file {}: {d}",
                    s.cno,
                    String::from_utf8_lossy(fname)
                )));
            }
        }
        drop(view);
        self.check(self.fs.change_cpmode(s.cno, false), "unsnapshot")
    }
}

/// Cleans greedily, with no protection period, until told to stop.
fn cleaner(fs: Arc<Fs>, seed: u64, stop: Arc<AtomicBool>) -> Result<u64, String> {
    let mut rng = Rng::new(seed ^ 0xc1ea);
    let mut passes = 0;
    while !stop.load(Ordering::Relaxed) {
        let v = fs.greedy_victims(1 + rng.below(3) as usize);
        match fs.clean_segments(&v, Duration::ZERO) {
            Ok(r) => passes += u64::from(r.blocks_moved > 0),
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(format!("cleaning {v:?}: {e}")),
        }
        std::thread::sleep(Duration::from_micros(rng.below(3000)));
    }
    Ok(passes)
}

/// Runs the workers, the timer and the cleaner on one filesystem, then
/// checks everything after a remount.
fn soak(seed: u64, nops: usize) {
    let dev = fresh(seed);
    let fs = Fs::mount(dev.clone(), busy_opts()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let failure: Arc<Mutex<Option<String>>> = Arc::default();
    let cleaner_h = {
        let (fs, stop) = (fs.clone(), stop.clone());
        std::thread::spawn(move || cleaner(fs, seed, stop))
    };
    let workers: Vec<_> = (0..WORKERS)
        .map(|id| {
            let (fs, stop, failure) = (fs.clone(), stop.clone(), failure.clone());
            std::thread::spawn(move || {
                let r = Worker::new(fs, id, seed, stop.clone()).and_then(|w| w.run(nops));
                if let Err(e) = &r {
                    // The others stop at once: the first failure is the one
                    // to read.
                    stop.store(true, Ordering::Relaxed);
                    failure.lock().unwrap().get_or_insert_with(|| e.clone());
                }
                r
            })
        })
        .collect();
    let ends: Vec<_> = workers.into_iter().map(|h| h.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    let passes = cleaner_h.join().unwrap();
    if let Some(e) = failure.lock().unwrap().take() {
        panic!("{e}");
    }
    let passes = passes.unwrap_or_else(|e| panic!("cleaner (seed {seed}): {e}"));
    let ends: Vec<Vec<File>> = ends.into_iter().map(Result::unwrap).collect();

    // The test must have run what it is about: checkpoints by the timer,
    // while operations ran, and cleaning passes that moved blocks.
    let checkpoints = fs.stats().counter("checkpoints").unwrap();
    assert!(
        checkpoints > nops as u64 / 50,
        "only {checkpoints} checkpoints in {nops} operations a worker"
    );
    assert!(passes > 0, "no cleaning pass moved a block (seed {seed})");

    fs.unmount().unwrap();
    drop(fs);
    let d: Arc<dyn BlockDevice> = dev.clone();
    let r = lfs::fsck::fsck(d.clone()).unwrap();
    assert!(r.is_clean(), "fsck (seed {seed}): {:#?}", r.errors);
    let fs = Fs::mount(d, MountOptions::default()).unwrap();
    for (id, files) in ends.iter().enumerate() {
        let dir = fs.lookup(ROOT_INO, format!("w{id}").as_bytes()).unwrap();
        let names = fs.list_dir(dir.ino).unwrap();
        assert_eq!(
            names.len(),
            files.len(),
            "worker {id}: files after remount (seed {seed}): {:?}",
            names
                .iter()
                .map(|e| String::from_utf8_lossy(&e.name))
                .collect::<Vec<_>>()
        );
        for f in files {
            let a = fs.lookup(dir.ino, &f.name).unwrap();
            let got = fs.read(a.ino, 0, (MAX_FILE + BS) as u32).unwrap();
            if let Some(d) = first_difference(&got, &f.data) {
                panic!(
                    "after remount (seed {seed}): worker {id} file {}: {d}",
                    String::from_utf8_lossy(&f.name)
                );
            }
        }
    }
    fs.unmount().unwrap();
    eprintln!(
        "concurrent model, seed {seed}: {} operations, {checkpoints} checkpoints, {passes} cleaning passes that moved blocks, remount and fsck clean",
        nops * WORKERS
    );
}

fn nops() -> usize {
    std::env::var("LFS_SOAK_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_OPS)
}

/// Before the fix of issue 22 every seed failed within a few hundred
/// operations, a punched range reading back its bytes in flight: seed 1
/// at worker 1's operation 197, seed 2 at worker 0's 55, seed 3 at worker
/// 0's 48 (timing decides the exact point). With the first half of the
/// fix only (in-flight data keyed by virtual block), seed 1 still failed
/// at operation 4,144, opening a snapshot whose checkpoint file block was
/// being rewritten. Keep these seeds.
#[test]
fn workers_checkpoints_and_cleaning_agree_with_the_model() {
    let seeds: Vec<u64> = match std::env::var("LFS_SOAK_SEED") {
        Ok(s) => vec![s.parse().expect("LFS_SOAK_SEED is a number")],
        Err(_) => vec![1, 2, 3],
    };
    for seed in seeds {
        soak(seed, nops());
    }
}
