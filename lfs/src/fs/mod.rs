//! The filesystem: the engine's public interface.
//!
//! Locks, in the order they are taken:
//! 0. `gate` (`freeze.rs`): not a lock but a pass every changing call
//!    takes first and holds until its change is in memory; while the
//!    filesystem is frozen no pass is handed out.
//! 1. `ckpt` serialises checkpoints (and so group-commits fsync: callers
//!    queue on it, and whoever gets it after a checkpoint covering their
//!    change returns at once).
//! 2. `state` protects all in-memory state. It is never held across device
//!    writes: a checkpoint is built under it, written without it.
//! 3. `reuse` is taken shared by a reader while it still holds `state`
//!    (having looked up its block addresses), then held alone across the
//!    device reads; it is taken exclusively, under `state`, while freed
//!    segments join the clean pool. So no reader ever reads a block whose
//!    segment was reused under it, and the two orders cannot deadlock.
//!
//! After a failed device write or flush the filesystem goes read-only and
//! says why; it never guesses what reached the disk.

mod background;
pub mod bmap;
mod checkpoints;
pub mod clean;
mod damage;
mod datasync;
pub mod diff;
pub mod dir;
mod freeze;
mod ops;
mod orphans;
pub mod query;
mod snapshot;
mod space;
pub(crate) mod state;
pub mod types;
pub mod xattr;

use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use ops::{Source, CHECKPOINT_MARGIN_BLOCKS};

/// The directory-entry type of an st_mode, if it has a known type.
pub fn file_type_of_mode(mode: u32) -> Option<crate::format::FileType> {
    ops::file_type(mode).ok()
}
pub use types::*;

use crate::blockdev::BlockDevice;
use crate::checkpoint::recover::RecoveryReport;
use crate::checkpoint::SB_UPDATE_EVERY;
use crate::fs::state::State;
use crate::stats::{Stats, StatsSnapshot};
use crate::{Error, Result};

/// Entries returned by one readdir call.
const READDIR_BATCH: usize = 256;

/// A mounted filesystem.
pub struct Fs {
    state: Mutex<State>,
    ckpt: Mutex<()>,
    /// A cleaning pass runs in SCHED_IDLE; whoever waits for it (for the
    /// state lock, [`Self::st`], the checkpoint lock, [`Self::lock_ckpt`],
    /// or for space, [`Self::waiting_for_space`]) raises it back until it
    /// next holds nothing.
    pass_pi: background::Inheritance,
    reuse: RwLock<()>,
    opts: Mutex<MountOptions>,
    timer: Arc<Timer>,
    timer_thread: Mutex<Option<JoinHandle<()>>>,
    /// The space thread's controls (`space.rs`).
    space: Arc<space::SpaceKeeper>,
    space_thread: Mutex<Option<JoinHandle<()>>>,
    report: RecoveryReport,
    read_only: bool,
    /// The device's name, for log lines.
    device: String,
    stats: Stats,
    /// Held while a cleaning pass runs: one at a time (`Caller`).
    cleaning: Mutex<()>,
    /// Passed by every change; closed while frozen.
    gate: freeze::Gate,
    /// For a view of an older checkpoint (`open_checkpoint`): its number,
    /// pinned in the live filesystem until this is dropped.
    pinned: Option<u64>,
    /// Block size (fixed).
    bs: u64,
    /// Dirty data in bytes as of the last write or checkpoint
    /// ([`Self::note_dirty`]).
    dirty_bytes: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Fs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fs")
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Fs {
    /// Recovers and mounts the filesystem on `dev`, and starts the
    /// checkpoint timer.
    pub fn mount(dev: Arc<dyn BlockDevice>, opts: MountOptions) -> Result<Arc<Fs>> {
        let (mut st, report) = State::recover(dev, opts.read_only)?;
        st.load_damage()?;
        if opts.read_only {
            st.read_only = Some(": mounted read-only".into());
        } else {
            let n = st.free_orphans()?;
            if n > 0 {
                log::info!("freed {n} file(s) unlinked while open before the last unmount");
            }
        }

        let rf = report.rolled_forward;
        log::info!(
            "mounted checkpoint {} ({} logs scanned, {} data-sync logs rolled forward ({} blocks of {} files), {} discarded, {})",
            report.cno,
            report.logs_scanned,
            rf.logs,
            rf.blocks,
            rf.files,
            report.logs_discarded,
            if report.was_clean {
                "clean"
            } else {
                "recovered after a crash"
            }
        );
        let read_only = opts.read_only;
        let fs = Fs::from_state(st, report, opts, None)?;
        if rf.logs > 0 && !read_only {
            // What was rolled forward becomes a checkpoint at once, so the
            // logs are needed for no longer than this.
            fs.sync()?;
        }
        Ok(fs)
    }

    /// The filesystem over a loaded state; the checkpoint timer runs unless
    /// it is read-only.
    fn from_state(
        st: State,
        report: RecoveryReport,
        opts: MountOptions,
        pinned: Option<u64>,
    ) -> Result<Arc<Fs>> {
        let bs = st.bs as u64;
        let fs = Arc::new(Fs {
            bs,
            dirty_bytes: Default::default(),
            state: Mutex::new(st),
            ckpt: Mutex::new(()),
            pass_pi: Default::default(),
            reuse: RwLock::new(()),
            read_only: opts.read_only,
            device: opts.device.clone(),
            opts: Mutex::new(opts),
            timer: Arc::new(Timer::default()),
            timer_thread: Mutex::new(None),
            space: Default::default(),
            space_thread: Mutex::new(None),
            report,
            stats: Stats::default(),
            cleaning: Default::default(),
            gate: Default::default(),
            pinned,
        });
        if !fs.read_only {
            let weak = Arc::downgrade(&fs);
            let timer = fs.timer.clone();
            let h = std::thread::Builder::new()
                .name("lfs-checkpoint".into())
                .spawn(move || timer_loop(&timer, weak))
                .map_err(|e| Error::io("starting the checkpoint thread", e))?;
            *lock(&fs.timer_thread) = Some(h);
        }
        if !fs.read_only && lock(&fs.opts).background_space {
            let weak = Arc::downgrade(&fs);
            let h = std::thread::Builder::new()
                .name("lfs-space".into())
                .spawn(move || space::space_loop(weak))
                .map_err(|e| Error::io("starting the space thread", e))?;
            *lock(&fs.space_thread) = Some(h);
        }
        Ok(fs)
    }

    /// What recovery found at mount.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// The state lock. A thread that has to wait for it first raises a
    /// cleaning pass in SCHED_IDLE, which may be the holder
    /// ([`background::Inheritance`]).
    fn st(&self) -> MutexGuard<'_, State> {
        try_lock(&self.state).unwrap_or_else(|| {
            let t = Instant::now();
            let g = self.lock_raising(&self.state);
            self.stats.state_lock_wait.record(t.elapsed());
            g
        })
    }

    /// Locks `m`, one of the locks a cleaning pass holds; if that means
    /// waiting, raises the pass first (it may be the holder).
    fn lock_raising<'a, T>(&'a self, m: &'a Mutex<T>) -> MutexGuard<'a, T> {
        try_lock(m).unwrap_or_else(|| {
            let _boost = self.pass_pi.waiter();
            lock(m)
        })
    }

    /// Changes the checkpoint interval, the dirty limit and the wait for
    /// space (SIGHUP).
    pub fn set_options(&self, interval: Duration, dirty_limit: u64, space_wait: Duration) {
        let mut o = lock(&self.opts);
        o.checkpoint_interval = interval;
        o.dirty_limit_bytes = dirty_limit;
        o.space_wait = space_wait;
        self.timer.wake.notify_all();
    }

    /// Usage of every segment, and the number in the clean pool.
    pub fn segment_usage(&self) -> (Vec<crate::format::SegUsage>, u64) {
        let st = self.st();
        (
            (0..st.segs.len()).map(|s| st.segs.get(s)).collect(),
            st.segs.nclean(),
        )
    }

    /// Block size.
    pub fn block_size(&self) -> u32 {
        self.bs as u32
    }

    /// Writes a checkpoint if anything changed; returns once it is durable.
    pub fn sync(&self) -> Result<()> {
        let want = self.st().mods;
        self.checkpoint_covering(want, false)
    }

    /// fsync(2) (`datasync` false) writes a checkpoint: every change so
    /// far is durable when it returns, as nilfs2 does. fdatasync(2) makes
    /// the file's data, size and times durable, with a data-sync log when
    /// nothing else of it changed since the last checkpoint
    /// (`datasync.rs`), else with a checkpoint. Concurrent callers share
    /// one write.
    pub fn fsync(&self, ino: u64, datasync: bool) -> Result<()> {
        let t = Instant::now();
        let r = if datasync {
            self.data_sync(ino)
        } else {
            self.sync()
        };
        Stats::add(&self.stats.fsyncs, 1);
        self.stats.fsync_latency.record(t.elapsed());
        r
    }

    /// The engine's counters and latency histograms.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    fn checkpoint_covering(&self, want: u64, minor: bool) -> Result<()> {
        let r = self.checkpoint_locked(want, minor);
        let mut d = lock(&self.timer.done);
        d.0 += 1;
        if let Err(e) = &r {
            d.1 = Some(format!(": {e}"));
        }
        self.timer.done_cv.notify_all();
        drop(d);
        // Space may have been freed, or used up: the space thread looks.
        self.space.kick();
        r
    }

    /// The checkpoint lock. A thread that has to wait for it first raises
    /// a cleaning pass holding it in SCHED_IDLE ([`background::Inheritance`]).
    fn lock_ckpt(&self) -> MutexGuard<'_, ()> {
        self.lock_raising(&self.ckpt)
    }

    fn checkpoint_locked(&self, want: u64, minor: bool) -> Result<()> {
        let _c = self.lock_ckpt();
        let mut st = self.st();
        // Frozen, nothing can have changed since the freeze's checkpoint
        // (every change waits at the gate), and nothing may be written.
        if st.durable_mods >= want || !st.needs_checkpoint() || self.frozen_solid() {
            return Ok(());
        }
        if let Some(r) = self.durable_refusal(&st) {
            return r;
        }
        // Freed segments wait for a superblock write before reuse (lfs(5));
        // do it now if this checkpoint might need them.
        let need = crate::log::layout::segments_needed(
            st.dirty_blocks + st.dirty_blocks / 8 + 64,
            st.bs,
            u64::from(st.sb.blocks_per_segment),
        );
        if st.segs.npending() > 0 && st.segs.nclean() < low_water(&st) + need {
            st = self.release_freed(st)?;
        }
        let t0 = Instant::now();
        let plan = st.build_checkpoint(now_ns(), minor);
        let built = t0.elapsed();
        let mut plan = match plan {
            Ok(p) => p,
            Err(e) => {
                let what = format!("checkpoint {} could not be built", st.cno + 1);
                self.stop_writing(&mut st, &what, &e);
                return Err(e);
            }
        };
        self.note_dirty(&st);
        let (dev, seed) = (st.dev.clone(), st.seed);
        drop(st);
        let bs = self.bs;
        // Made by a cleaning pass, the sealing and writing is in
        // SCHED_IDLE again, unless someone waits for the pass.
        self.pass_pi.relax();
        let io = (|| -> Result<()> {
            plan.seal(bs as usize, seed);
            for (i, run) in plan.runs.iter().enumerate() {
                // The cold log is durable before the logs that end in the
                // super root (see `Plan::cold_runs`).
                if i == plan.cold_runs && i > 0 {
                    dev.flush().map_err(|e| {
                        let cold = &plan.runs[..i];
                        Error::io(
                            format!(
                                "flushing the cold log of checkpoint {} (at block {})",
                                plan.cno, cold[0].block
                            ),
                            e,
                        )
                    })?;
                }
                datasync::write_run(dev.as_ref(), run, bs)?;
            }
            dev.flush().map_err(|e| {
                Error::io(
                    format!(
                        "flushing checkpoint {} (its super root at block {})",
                        plan.cno, plan.sr_block
                    ),
                    e,
                )
            })
        })();
        let blocks_written: u64 = plan.runs.iter().map(|r| r.blocks.len() as u64).sum();
        let io_time = t0.elapsed().saturating_sub(built);
        let bytes: u64 = plan.runs.iter().map(|r| r.blocks.len() as u64).sum::<u64>() * bs;
        if bytes >= BANDWIDTH_SAMPLE_MIN && io_time > Duration::ZERO {
            let bw = (bytes as f64 / io_time.as_secs_f64()) as u64;
            self.timer
                .bandwidth
                .store(bw, std::sync::atomic::Ordering::Relaxed);
        }
        let mut st = self.st();
        if let Err(e) = io {
            let what = format!("checkpoint {} failed", plan.cno);
            self.stop_writing(&mut st, &what, &e);
            return Err(e);
        }
        st.inflight.clear();
        st.durable_mods = plan.mods;
        let bsz = st.bs as u64;
        Stats::add(&self.stats.checkpoints, 1);
        debug_assert_eq!(plan.written.total(), blocks_written);
        self.stats.add_written(&plan.written, bsz);
        Stats::add(&self.stats.segments_freed, plan.freed.len() as u64);
        st.dat.release_pending();
        let inos = std::mem::take(&mut st.pending_inos);
        st.free_inos.extend(inos);
        st.sb.last_log_block = plan.sr_block;
        st.sb.last_seq = plan.sr_seq;
        st.sb.last_cno = plan.cno;
        let behind = plan.cno - st.sb_cursor_cno();
        if behind >= SB_UPDATE_EVERY
            || (st.segs.npending() > 0 && st.segs.nclean() < low_water(&st))
        {
            drop(self.release_freed(st)?);
        } else {
            drop(st);
        }
        let blocks: usize = plan.runs.iter().map(|r| r.blocks.len()).sum();
        let total = t0.elapsed();
        self.stats.checkpoint_latency.record(total);
        let level = if total > SLOW_CHECKPOINT {
            log::Level::Info
        } else {
            log::Level::Debug
        };
        log::log!(
            level,
            "checkpoint {} durable: {blocks} blocks in {} log(s) at block {}, built in {:?}, total {:?}",
            plan.cno,
            plan.runs.len(),
            plan.sr_block,
            built,
            total
        );
        Ok(())
    }

    /// What a call that makes changes durable returns on a filesystem
    /// that went read-only: nothing to do on a read-only mount; EIO after
    /// a failed write or flush (`stop_writing`), since what the caller
    /// wants durable never will be on this mount, as after a writeback
    /// error, even when a background checkpoint was the one that failed.
    fn durable_refusal(&self, st: &State) -> Option<Result<()>> {
        let why = st.read_only.as_ref()?;
        if self.read_only {
            return Some(Ok(()));
        }
        Some(Err(Error::io(
            "making changes durable",
            std::io::Error::other(format!("the filesystem went read-only{why}")),
        )))
    }

    /// Writes the superblock naming the last durable checkpoint, then lets
    /// the segments freed up to it be reused. The caller holds the
    /// checkpoint lock; the state lock is released across the write and
    /// its flush (taken again, it is returned), so writers do not wait for
    /// the device (a flush behind the lock stalled every writer).
    fn release_freed<'a>(&'a self, mut st: MutexGuard<'a, State>) -> Result<MutexGuard<'a, State>> {
        let w = st.prepare_superblock(crate::checkpoint::recover::now_secs());
        let dev = st.dev.clone();
        drop(st);
        let r = w.write(dev.as_ref());
        let mut st = self.st();
        if let Err(e) = r {
            self.stop_writing(&mut st, "the superblock update failed", &e);
            return Err(e);
        }
        st.superblock_written(&w);
        let _w = self.reuse.write().unwrap_or_else(|p| p.into_inner());
        st.segs.release_pending();
        st.reuse_epoch += 1;
        drop(_w);
        Ok(st)
    }

    /// Final checkpoint, superblock marked clean, timer stopped. Further
    /// calls do nothing. A frozen filesystem is thawed first.
    pub fn unmount(&self) -> Result<()> {
        self.thaw_for_unmount();
        {
            let mut stop = lock(&self.timer.stop);
            if *stop {
                return Ok(());
            }
            *stop = true;
            self.timer.wake.notify_all();
        }
        self.space.kick();
        for t in [&self.timer_thread, &self.space_thread] {
            if let Some(h) = lock(t).take() {
                let _ = h.join();
            }
        }
        if self.read_only {
            return Ok(());
        }
        self.sync()?;
        let _c = self.lock_ckpt();
        let mut st = self.st();
        if st.read_only.is_some() {
            return Ok(());
        }
        st.sb.state = crate::format::FsState::Clean;
        if let Err(e) = st.write_superblock(crate::checkpoint::recover::now_secs()) {
            self.stop_writing(&mut st, "marking the filesystem clean failed", &e);
            return Err(e);
        }
        log::info!("unmounted cleanly at checkpoint {}", st.cno);
        Ok(())
    }

    /// After a failed write or flush nothing more is written: what is
    /// durable stays as it is, and every later change gets ReadOnly (the
    /// reason says why). Logs the one line an administrator needs: the
    /// device, what failed (with its block) and the checkpoint a remount
    /// will find.
    pub(crate) fn stop_writing(&self, st: &mut State, what: &str, e: &Error) {
        st.read_only = Some(format!(" after an error ({what}: {e})"));
        log::error!(
            "{}: {what}: {e}; going read-only, nothing more is written; checkpoint {} is the last one known durable, a remount recovers it",
            self.device,
            st.sb.last_cno
        );
    }

    /// Keeps dirty data bounded without a cliff (seed 002: averages hide
    /// spikes), as the kernel's balance_dirty_pages does: above
    /// `limit / BACKGROUND_FRACTION` the checkpoint thread is woken to write
    /// in the background; from a quarter of the limit on, writers are
    /// paced, a writer of `len` bytes sleeping `len / bandwidth` times
    /// `x / (1 - x)`, `x` being how far dirty data is across the band from
    /// a quarter of the limit to the limit (0 at the start, 1 at the
    /// middle: the device's speed, and steeply more toward the limit),
    /// with the device bandwidth measured by the last checkpoints and one
    /// pace for all writers, each sleep at most [`MAX_THROTTLE_SLEEP`].
    /// So writers slow down smoothly to the speed of the disk instead of
    /// all stopping at once, and no writer that did not ask for durability
    /// waits for a flush: only at the limit itself (the device fell behind
    /// the pace) does a writer wait, in steps of `MAX_THROTTLE_SLEEP`, for
    /// a checkpoint to take dirty data (never writing one of its own). Dirty
    /// data is as of the last write or checkpoint
    /// ([`Self::note_dirty`]), read without the state lock.
    fn throttle(&self, len: usize) -> Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        let limit = lock(&self.opts).dirty_limit_bytes;
        let dirty = self.dirty_bytes.load(Relaxed);
        if dirty > limit / BACKGROUND_FRACTION {
            self.timer.kick();
        }
        let start = limit / PACE_FRACTION;
        if dirty <= start {
            return Ok(());
        }
        if dirty < limit {
            let bw = self.timer.bandwidth.load(Relaxed);
            if bw == 0 {
                // No checkpoint has measured the device yet: pacing by a
                // guess would only slow a fresh mount down (the limit still
                // bounds memory).
                return Ok(());
            }
            let x = (dirty - start) as f64 / (limit - start).max(1) as f64;
            let factor = x / (1.0 - x);
            let delay = Duration::from_secs_f64(len as f64 / bw.max(MIN_BANDWIDTH) as f64 * factor);
            // One pace for all writers, so that the aggregate rate, not
            // each thread's, follows the disk.
            let now = Instant::now();
            let wake = {
                let mut pace = lock(&self.timer.pace);
                let start = pace.map_or(now, |p| p.max(now));
                let wake = (start + delay).min(now + MAX_THROTTLE_SLEEP);
                *pace = Some(wake);
                wake
            };
            std::thread::sleep(wake.saturating_duration_since(now));
            Stats::add(&self.stats.throttle_sleeps, 1);
            return Ok(());
        }
        // At the limit: the device fell behind the pace. Wait for a
        // checkpoint to take dirty data, a step at a time.
        Stats::add(&self.stats.throttle_waits, 1);
        let t = Instant::now();
        while self.dirty_bytes.load(Relaxed) >= limit && t.elapsed() < THROTTLE_WAIT {
            self.timer.kick();
            if let Some(why) = self.wait_for_checkpoint(MAX_THROTTLE_SLEEP) {
                return Err(Error::ReadOnly(why));
            }
        }
        Ok(())
    }

    /// Attributes of `ino`.
    pub fn getattr(&self, ino: u64) -> Result<Attr> {
        self.st().attr(ino)
    }
    /// Looks up `name` in `parent`.
    pub fn lookup(&self, parent: u64, name: &[u8]) -> Result<Attr> {
        self.st().lookup(parent, name)
    }
    /// Changes attributes (and size).
    pub fn setattr(&self, ino: u64, set: &SetAttr) -> Result<Attr> {
        self.change(|st| st.setattr(ino, set))
    }
    /// Creates a regular file, FIFO, socket or device node.
    pub fn create(
        &self,
        parent: u64,
        name: &[u8],
        mode: u32,
        rdev: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        self.change(|st| st.create(parent, name, mode, rdev, uid, gid))
    }
    /// [`Self::create`] and [`Self::open`] in one step (FUSE's create), so
    /// that no unlink comes between them.
    pub fn create_open(
        &self,
        parent: u64,
        name: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        self.change(|st| {
            let a = st.create(parent, name, mode, 0, uid, gid)?;
            st.open_file(a.ino);
            Ok(a)
        })
    }
    /// Creates a directory.
    pub fn mkdir(&self, parent: u64, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        self.change(|st| st.mkdir(parent, name, mode, uid, gid))
    }
    /// Creates a symbolic link.
    pub fn symlink(
        &self,
        parent: u64,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        self.change(|st| st.symlink(parent, name, target, uid, gid))
    }
    /// Reads a symbolic link.
    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>> {
        self.st().readlink(ino)
    }
    /// Counts an open of `ino` (fsd: open and create): unlinked, it stays
    /// until [`Self::release`] counts the last close.
    pub fn open(&self, ino: u64) -> Result<()> {
        let mut st = self.st();
        st.inode(ino)?;
        st.open_file(ino);
        Ok(())
    }
    /// Counts a close of `ino`; the last close of a file unlinked while
    /// open frees it.
    pub fn release(&self, ino: u64) -> Result<()> {
        let _pass = self.gate.enter();
        self.st().close_file(ino)
    }
    /// Removes a name that is not a directory.
    pub fn unlink(&self, parent: u64, name: &[u8]) -> Result<()> {
        self.change(|st| st.unlink(parent, name))
    }
    /// Removes an empty directory.
    pub fn rmdir(&self, parent: u64, name: &[u8]) -> Result<()> {
        self.change(|st| st.rmdir(parent, name))
    }
    /// Renames.
    pub fn rename(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        self.change(|st| st.rename(parent, name, newparent, newname, flags))
    }
    /// Adds a hard link.
    pub fn link(&self, ino: u64, newparent: u64, newname: &[u8]) -> Result<Attr> {
        self.change(|st| st.link(ino, newparent, newname))
    }

    /// Reads up to `size` bytes at `offset`; short at end of file, zeros in
    /// holes. Device reads happen outside the state lock.
    pub fn read(&self, ino: u64, offset: u64, size: u32) -> Result<Vec<u8>> {
        if self.pinned.is_none() {
            return self.read_once(ino, offset, size);
        }
        let Some(live) = self.st().source.clone() else {
            return self.read_once(ino, offset, size);
        };
        // A view translates through the live filesystem and cannot hold
        // its reuse guard: it reads again if freed segments were released
        // meanwhile (rare: at most once per superblock write).
        loop {
            let epoch = live.reuse_epoch();
            let out = self.read_once(ino, offset, size)?;
            if live.reuse_epoch() == epoch {
                return Ok(out);
            }
        }
    }

    fn read_once(&self, ino: u64, offset: u64, size: u32) -> Result<Vec<u8>> {
        // The reuse guard is taken before the state lock is released (so no
        // segment can be reused between looking up an address and reading
        // it) and held without it (so `release_freed`, which takes it
        // exclusively under the state lock, cannot deadlock with a reader).
        let (sources, len, bs, dev, _reuse) = {
            let mut st = self.st();
            let (s, len) = st.read_sources(ino, offset, size)?;
            let guard = self.reuse.read().unwrap_or_else(|p| p.into_inner());
            (s, len, st.bs as u64, st.dev.clone(), guard)
        };
        let mut out = Vec::with_capacity(len as usize);
        let first = offset / bs;
        let mut i = 0;
        while i < sources.len() {
            // Coalesce physically contiguous device blocks into one read.
            let mut buf;
            let mut n = 1;
            match &sources[i] {
                Source::Mem(b) => buf = b.clone(),
                Source::Zero => buf = vec![0u8; bs as usize],
                Source::Dev(p) => {
                    while i + n < sources.len()
                        && matches!(sources[i + n], Source::Dev(q) if q == p + n as u64)
                    {
                        n += 1;
                    }
                    buf = vec![0u8; bs as usize * n];
                    dev.read_at(&mut buf, p * bs)
                        .map_err(|e| Error::io(format!("reading block {p}"), e))?;
                }
            }
            for k in 0..n {
                let b = first + (i + k) as u64;
                let chunk = &buf[k * bs as usize..(k + 1) * bs as usize];
                let from = if b == first {
                    (offset % bs) as usize
                } else {
                    0
                };
                let want = len as usize - out.len();
                let take = (bs as usize - from).min(want);
                out.extend_from_slice(&chunk[from..from + take]);
            }
            i += n;
        }
        Ok(out)
    }

    /// Writes `data` at `offset`. Out of space, it waits as
    /// `Self::waiting_for_space` says.
    pub fn write(&self, ino: u64, offset: u64, data: &[u8]) -> Result<u32> {
        let t = Instant::now();
        let r = self.waiting_for_space(|| self.write_inner(ino, offset, data));
        if let Ok(n) = r {
            // What was written: a write that meets the largest file size
            // is short.
            Stats::add(&self.stats.user_bytes, u64::from(n));
        }
        self.stats.write_latency.record(t.elapsed());
        r
    }

    /// Runs `attempt` (which takes its own pass of the freeze gate, so
    /// that waiting holds none up); out of space, runs the engine's own
    /// steps toward space (`fs/space.rs`: history yields, freed segments
    /// are released, the engine cleans) and tries again after each one
    /// that made progress, or after a cleaning pass already running ends
    /// (for up to the mount's `space_wait` in all). NoSpace once no step
    /// can make progress (and passes of others made nothing reusable
    /// [`space::MAX_URGENT_PASSES`] times): live data plus snapshots do
    /// not fit. (A change used to wait for an external cleaner's timer, up to
    /// 30 s, and to get NoSpace at once without one.)
    fn waiting_for_space<T>(&self, attempt: impl Fn() -> Result<T>) -> Result<T> {
        let mut r = attempt();
        if !matches!(r, Err(Error::NoSpace)) {
            return r;
        }
        Stats::add(&self.stats.space_waits, 1);
        let _waiting = space::Waiting::new(&self.space.waiters);
        self.space.kick();
        // The pass this may wait for must not wait for an idle CPU.
        let _boost = self.pass_pi.waiter();
        let most = lock(&self.opts).space_wait;
        let t = Instant::now();
        let mut tried = space::Tried::default();
        loop {
            match self.reclaim_urgent(&mut tried)? {
                space::Reclaim::Progress => {}
                // Waited for another pass to end.
                space::Reclaim::Busy => {
                    if t.elapsed() >= most {
                        break;
                    }
                }
                space::Reclaim::Nothing => break,
            }
            r = attempt();
            if !matches!(r, Err(Error::NoSpace)) {
                break;
            }
        }
        r
    }

    /// Applies `f` to the state, with a pass of the freeze gate, waiting
    /// for space as `Self::waiting_for_space` says.
    fn change<T>(&self, f: impl Fn(&mut State) -> Result<T>) -> Result<T> {
        self.waiting_for_space(|| {
            let _pass = self.gate.enter();
            f(&mut self.st())
        })
    }

    /// Waits up to `most` for the next checkpoint (every cleaning pass
    /// ends with one) to finish; returns the last checkpoint failure.
    fn wait_for_checkpoint(&self, most: Duration) -> Option<String> {
        let gen = lock(&self.timer.done).0;
        let (g, _) = self
            .timer
            .done_cv
            .wait_timeout_while(lock(&self.timer.done), most, |d| d.0 == gen)
            .unwrap_or_else(|p| p.into_inner());
        g.1.clone()
    }

    fn write_inner(&self, ino: u64, offset: u64, data: &[u8]) -> Result<u32> {
        // Per attempt: a write waiting for space between attempts holds
        // no pass, so it never holds up a freeze.
        let _pass = self.gate.enter();
        self.throttle(data.len())?;
        // Whole blocks are cut into their buffers before the state lock is
        // taken: the copies and allocations are most of a large write's
        // work, and under the lock they serialised every writer (16 % of
        // W1's context switches were waits for it).
        let whole = ops::whole_blocks(offset, data, self.bs);
        let mut st = self.st();
        let reads = st.write_reads(ino, offset, data.len())?;
        if reads.is_empty() {
            let r = st.write_with(ino, offset, data, &mut Default::default(), whole);
            self.note_dirty(&st);
            return r;
        }
        // Read the partially overwritten blocks without the state lock (as
        // `read` does); `write_with` uses them only if they are still what
        // the device holds.
        let guard = self.reuse.read().unwrap_or_else(|p| p.into_inner());
        let (dev, bs, epoch) = (st.dev.clone(), st.bs, st.reuse_epoch);
        drop(st);
        let mut got = std::collections::HashMap::new();
        for (b, p) in reads {
            let blk = crate::fs::state::read_block(dev.as_ref(), p, bs)?;
            got.insert(b, (p, blk));
        }
        drop(guard);
        let mut st = self.st();
        if st.reuse_epoch != epoch {
            // A segment may have been reused since the read: trust nothing.
            got.clear();
        }
        let r = st.write_with(ino, offset, data, &mut got, whole);
        self.note_dirty(&st);
        r
    }

    /// Records the dirty data for [`Self::throttle`], which reads it
    /// without the state lock.
    fn note_dirty(&self, st: &State) {
        self.dirty_bytes.store(
            st.dirty_blocks * self.bs,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
    /// Entries of directory `ino` after `cookie` (0 = start); empty at the end.
    pub fn readdir(&self, ino: u64, cookie: u64) -> Result<Vec<DirItem>> {
        self.st().readdir(ino, cookie, READDIR_BATCH)
    }
    /// Every entry of directory `ino` but `.` and `..`, read batch by
    /// batch with [`Self::readdir`] (the state lock is not held between
    /// batches).
    pub fn list_dir(&self, ino: u64) -> Result<Vec<DirItem>> {
        let mut out = Vec::new();
        let mut cookie = 0;
        loop {
            let batch = self.readdir(ino, cookie)?;
            let Some(last) = batch.last() else { break };
            cookie = last.cookie;
            out.extend(
                batch
                    .into_iter()
                    .filter(|e| e.name != b"." && e.name != b".."),
            );
        }
        Ok(out)
    }
    /// statfs(2).
    pub fn statfs(&self) -> Result<StatFs> {
        Ok(self.st().statfs())
    }
    /// fallocate(2).
    pub fn fallocate(&self, ino: u64, offset: u64, len: u64, mode: i32) -> Result<()> {
        self.change(|st| st.fallocate(ino, offset, len, mode))
    }
    /// getxattr(2).
    pub fn getxattr(&self, ino: u64, name: &[u8]) -> Result<Vec<u8>> {
        self.st().getxattr(ino, name)
    }
    /// setxattr(2).
    pub fn setxattr(&self, ino: u64, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        self.change(|st| st.setxattr(ino, name, value, flags))
    }
    /// listxattr(2).
    pub fn listxattr(&self, ino: u64) -> Result<Vec<Vec<u8>>> {
        self.st().listxattr(ino)
    }
    /// removexattr(2).
    pub fn removexattr(&self, ino: u64, name: &[u8]) -> Result<()> {
        self.change(|st| st.removexattr(ino, name))
    }
}

impl Drop for Fs {
    fn drop(&mut self) {
        *lock(&self.timer.stop) = true;
        self.timer.wake.notify_all();
        self.space.kick();
        if let Some(cno) = self.pinned {
            let live = lock(&self.state).source.take();
            if let Some(live) = live {
                live.st().history.unmount(cno);
                log::info!("checkpoint {cno} closed");
            }
        }
    }
}

/// Checkpoints slower than this are logged at info level.
const SLOW_CHECKPOINT: Duration = Duration::from_millis(200);

/// Dirty data above `limit / BACKGROUND_FRACTION` starts a background
/// checkpoint: one of at most an eighth of the limit (4 MiB by default)
/// takes tens of milliseconds, which is what a paced writer may find
/// itself waiting behind.
const BACKGROUND_FRACTION: u64 = 8;
/// Writers are paced from `limit / PACE_FRACTION` on ([`Fs::throttle`]).
const PACE_FRACTION: u64 = 4;

/// Checkpoints smaller than this do not update the bandwidth estimate
/// (their time is mostly the flush).
const BANDWIDTH_SAMPLE_MIN: u64 = 4 << 20;
/// Lowest bandwidth pacing assumes (bytes/s), whatever was measured.
const MIN_BANDWIDTH: u64 = 16 << 20;
/// Longest sleep of a paced write, and the step of a wait at the limit:
/// well under the 25 ms a write may take at worst (issue 23).
const MAX_THROTTLE_SLEEP: Duration = Duration::from_millis(10);

/// Longest a throttled writer waits for the checkpoint in flight.
const THROTTLE_WAIT: Duration = Duration::from_secs(5);

/// The checkpoint thread's controls; shared without keeping `Fs` alive.
#[derive(Debug, Default)]
struct Timer {
    stop: Mutex<bool>,
    wake: Condvar,
    kicked: std::sync::atomic::AtomicBool,
    /// When the next throttled write may proceed.
    pace: Mutex<Option<Instant>>,
    /// Device write bandwidth of the last large checkpoint, bytes/s.
    bandwidth: std::sync::atomic::AtomicU64,
    /// Checkpoints finished (or failed) so far, and the last failure.
    done: Mutex<(u64, Option<String>)>,
    done_cv: Condvar,
}

impl Timer {
    /// Asks for a checkpoint now.
    fn kick(&self) {
        if !self.kicked.swap(true, std::sync::atomic::Ordering::AcqRel) {
            self.wake.notify_all();
        }
    }
}

impl State {
    /// Checkpoint number the on-disk superblock cursor names.
    fn sb_cursor_cno(&self) -> u64 {
        self.sb_written_cno
    }
}

/// Clean segments below which freed ones are released early: the cleaning
/// reserve plus room for a few checkpoints.
fn low_water(st: &State) -> u64 {
    st.sb.reserved_segments() + 4
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// [`lock`] if `m` is free now, else None.
fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// Writes a checkpoint whenever the interval passes with changes pending,
/// or when kicked by the dirty-data throttle.
fn timer_loop(timer: &Timer, fs: Weak<Fs>) {
    use std::sync::atomic::Ordering;
    let mut last = Instant::now();
    loop {
        let interval = match fs.upgrade() {
            Some(f) => lock(&f.opts).checkpoint_interval,
            None => return,
        };
        {
            let stop = lock(&timer.stop);
            if *stop {
                return;
            }
            if !timer.kicked.load(Ordering::Acquire) {
                let wait = interval.saturating_sub(last.elapsed());
                let (stop, _) = timer
                    .wake
                    .wait_timeout(stop, wait.max(Duration::from_millis(10)))
                    .unwrap_or_else(|p| p.into_inner());
                if *stop {
                    return;
                }
            }
        }
        let kicked = timer.kicked.swap(false, Ordering::AcqRel);
        if kicked || last.elapsed() >= interval {
            last = Instant::now();
            let Some(f) = fs.upgrade() else { return };
            if f.frozen_solid() {
                // Nothing changes while frozen; the turn is skipped.
                continue;
            }
            let want = f.st().mods;
            if let Err(e) = f.checkpoint_covering(want, true) {
                log::error!("background checkpoint failed: {e}");
            }
        }
    }
}
