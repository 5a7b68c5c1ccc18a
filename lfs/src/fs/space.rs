//! The space guarantee: a change fails with NoSpace only when live data
//! plus snapshots really do not fit (DESIGN §7).
//!
//! cleanerd is the policy brain (victims, placement, pacing), but the
//! engine never depends on it to give space back. Space comes back in
//! three ways, cheapest first, each bounded:
//! 1. **History yields.** Checkpoints that are not snapshots are kept
//!    while space allows. Below the history level ([`Levels::history`],
//!    clean segments counting those freed and waiting for release), the
//!    oldest plain ones are deleted (never a snapshot, a mounted
//!    checkpoint or the latest): that frees what only they held, with no
//!    data moved. cleanerd's protection period does not stop this unless
//!    it asked for strict protection (nilfs's behaviour: ENOSPC rather
//!    than lose history).
//! 2. **Freed segments are released**: a checkpoint records the deletions
//!    and frees the segments left empty; the superblock write that
//!    follows makes them reusable.
//! 3. **The engine cleans.** Below the cleaning level ([`Levels::clean`]),
//!    or when a change finds no space and 1 and 2 gave nothing, the
//!    engine runs a cleaning pass itself on greedy victims (f2fs's
//!    foreground GC), bounded to [`MAX_PASS_BLOCKS`] of victims.
//!
//! Two callers run these steps: the space thread
//! ([`Fs::reclaim_background`]), woken after every checkpoint, acts
//! below the levels, in the background (a pass it runs is in SCHED_IDLE,
//! as cleanerd's); and a change that finds no space runs them itself
//! ([`Fs::reclaim_urgent`]), and retries after each step that made
//! progress: all deletable history at once, then up to
//! [`MAX_URGENT_PASSES`] passes. So a writer waits for a bounded
//! step of its own, or for a pass already running (cleanerd's, which ends
//! with a checkpoint), never for another process's timer; it gets
//! NoSpace once no step can make progress: every plain checkpoint that
//! may go is gone and no segment can be cleaned for a net gain.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::format::{SU_FLAG_ACTIVE, SU_FLAG_ERROR};
use crate::fs::clean::{Caller, Placement};
use crate::fs::state::State;
use crate::fs::{lock, now_ns, Fs};
use crate::stats::Stats;
use crate::{Error, Result};

/// The history level: clean segments beyond the reserve below which the
/// oldest plain checkpoints are deleted, as a share of all segments
/// (1/5: cleanerd's default `max_clean_segments` is 20 %, so by the time
/// cleanerd works hard its victims' live counts no longer include blocks
/// that only old history keeps) ...
const HISTORY_SHARE: u64 = 5;
/// ... and at least this many segments.
const HISTORY_MIN: u64 = 8;
/// The cleaning level: clean segments beyond the reserve below which the
/// engine cleans itself, as a share of all segments (1/32: well below
/// cleanerd's default `min_clean_segments`, 10 %, so it only acts when
/// cleanerd is absent or falls behind) ...
const CLEAN_SHARE: u64 = 32;
/// ... and at least this many segments.
const CLEAN_MIN: u64 = 2;
/// Most blocks (of victim segments) one pass the engine runs itself reads:
/// a writer that waits for it waits for at most this much reading and
/// copying (32 MiB at 4 KiB: four 8 MiB segments, or many small ones,
/// whose dead blocks are each few).
pub(crate) const MAX_PASS_BLOCKS: u64 = 8192;
/// What a pass writes besides its victims' live blocks and a few blocks
/// each, in the estimate that chooses them (the pass's own estimate,
/// `fs/clean.rs`, decides).
const PASS_OVERHEAD_BLOCKS: u64 = 16;
/// Most passes one change's wait for space runs itself: each frees at
/// least a segment, so this bounds the wait, not the guarantee (a change
/// that still finds no space after them is most likely racing writers
/// that take what is freed; it gets NoSpace, as it would on a full
/// filesystem, and may try again).
pub(crate) const MAX_URGENT_PASSES: u32 = 16;
/// Refused passes (EAGAIN) one step of the engine's cleaning tries
/// before it gives up: with victims chosen again, then halved.
const MAX_REFUSALS: u32 = 8;
/// Share of the deletable checkpoints one step deletes below the history
/// level (the oldest); a change waiting for space deletes twice as many.
const HISTORY_STEP_SHARE: u64 = 4;
/// How long the space thread sleeps when nothing wakes it.
const SPACE_IDLE: Duration = Duration::from_secs(1);

/// Clean-segment counts at which the engine acts (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Levels {
    /// Below it, history yields.
    pub history: u64,
    /// Below it, the engine cleans.
    pub clean: u64,
}

/// What one step of [`Fs::reclaim`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reclaim {
    /// Something was freed or made reusable: try again.
    Progress,
    /// A cleaning pass is running (cleanerd's, or the other caller's):
    /// wait for its checkpoint and try again.
    Busy,
    /// Nothing more can be freed now.
    Nothing,
}

/// What the steps of one change's wait for space did so far.
#[derive(Debug, Default)]
pub(crate) struct Tried {
    /// History was deleted (all that may go).
    expired: bool,
    /// Cleaning passes that freed something.
    passes: u32,
    /// Waits for another pass (cleanerd's, the space thread's) that
    /// ended with nothing made reusable.
    idle_waits: u32,
}

/// The space thread's wake-up call and what it needs between steps.
#[derive(Debug, Default)]
pub(crate) struct SpaceKeeper {
    kicked: Mutex<bool>,
    wake: Condvar,
    /// The protection period cleanerd asked to be kept even for space
    /// (`Placement::strict_protection`), if it did.
    pub strict: Mutex<Option<Duration>>,
    /// Changes waiting for space right now (GET_SUSTAT reports it, so
    /// that cleanerd cleans at once).
    pub waiters: AtomicU64,
    /// The modification count (`State::mods`) at which the space thread's
    /// cleaning last found nothing to gain: it does not try again until
    /// something changed. A full filesystem of live data otherwise had it
    /// read and refuse the same victims every second, and a waiting
    /// writer found a pass of its always running.
    futile_at: Mutex<Option<u64>>,
}

impl SpaceKeeper {
    /// Wakes the space thread (after a checkpoint, or a change that found
    /// no space).
    pub(crate) fn kick(&self) {
        *lock(&self.kicked) = true;
        self.wake.notify_all();
    }

    /// Waits until kicked, `SPACE_IDLE` passes or `stop` says so.
    fn wait(&self, stop: &Mutex<bool>) {
        let mut k = lock(&self.kicked);
        if !*k && !*lock(stop) {
            k = self
                .wake
                .wait_timeout(k, SPACE_IDLE)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *k = false;
    }
}

/// Counts a change waiting for space while it lives.
pub(crate) struct Waiting<'a>(&'a AtomicU64);

impl<'a> Waiting<'a> {
    pub(crate) fn new(n: &'a AtomicU64) -> Self {
        n.fetch_add(1, Ordering::SeqCst);
        Waiting(n)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl State {
    /// The levels of this filesystem.
    pub(crate) fn space_levels(&self) -> Levels {
        let n = self.segs.len();
        let r = self.sb.reserved_segments();
        Levels {
            history: r + (n / HISTORY_SHARE).max(HISTORY_MIN),
            clean: r + (n / CLEAN_SHARE).max(CLEAN_MIN),
        }
    }

    /// Clean segments, counting those freed and waiting for release.
    pub(crate) fn clean_segments_soon(&self) -> u64 {
        self.segs.nclean() + self.segs.npending()
    }

    /// Victims for a pass the engine runs itself: greedy (fewest live
    /// blocks first), each with something to gain, until their dead
    /// blocks make two segments' worth (a pass then nets about one
    /// after its own metadata) or they reach [`MAX_PASS_BLOCKS`], and
    /// together no more to copy than the room cleaning may use.
    fn space_victims(&self) -> Vec<u64> {
        let bps = u64::from(self.sb.blocks_per_segment);
        let mut c: Vec<(u64, u32)> = (0..self.segs.len())
            .map(|s| (s, self.segs.get(s)))
            .filter(|(s, u)| {
                !u.is_clean()
                    && u.flags & (SU_FLAG_ACTIVE | SU_FLAG_ERROR) == 0
                    && u.nblocks > 0
                    && u64::from(u.nlive) < bps
                    && !self.is_head(*s)
            })
            .map(|(s, u)| (s, u.nlive))
            .collect();
        c.sort_by_key(|&(s, live)| (live, s));
        // Each victim costs its live blocks and a few of metadata, the
        // pass some more (its DAT journal, usage and checkpoint blocks).
        let room = self
            .avail_for_cleaning()
            .saturating_sub(PASS_OVERHEAD_BLOCKS);
        let (mut copied, mut dead, mut read) = (0, 0, 0);
        let mut out = Vec::new();
        for (s, live) in c {
            let live = u64::from(live);
            if !out.is_empty() && (read + bps > MAX_PASS_BLOCKS || copied + live + 8 > room) {
                break;
            }
            copied += live + 8;
            dead += bps - live;
            read += bps;
            out.push(s);
            if dead >= 2 * bps {
                break;
            }
        }
        out
    }
}

impl Fs {
    /// One bounded step of the space thread (module doc): below the
    /// history level, a quarter of the deletable history goes, at most
    /// [`MAX_FREED_PER_STEP`](crate::checkpoint::history::MAX_FREED_PER_STEP) blocks' worth (made durable by the next
    /// checkpoint, the timer's or a pass's, which wakes the thread for
    /// the next step: writing one for it here would make the checkpoint
    /// just written deletable at the next step, a checkpoint a step);
    /// below the cleaning level,
    /// freed segments are released and a pass runs in the background.
    pub(crate) fn reclaim_background(&self) -> Result<Reclaim> {
        let Some(levels) = self.space_levels_if_writable() else {
            return Ok(Reclaim::Nothing);
        };
        let clean = self.st().clean_segments_soon();
        let mut progress = false;
        if clean < levels.history {
            progress |= self.expire_for_space(HISTORY_STEP_SHARE)? > 0;
        }
        if clean >= levels.clean {
            // What the deletion freed counts once a checkpoint wrote it:
            // deleting more before then (a step after another) took the
            // whole history at once, and stalled writers while the state
            // lock freed it and the next checkpoint journaled it.
            return Ok(if progress {
                Reclaim::Busy
            } else {
                Reclaim::Nothing
            });
        }
        if self.release_space()? {
            return Ok(Reclaim::Progress);
        }
        let mods = self.st().mods;
        let futile = *lock(&self.space.futile_at) == Some(mods);
        match if futile {
            Reclaim::Nothing
        } else {
            self.clean_for_space(true)?
        } {
            Reclaim::Nothing => {
                *lock(&self.space.futile_at) = Some(mods);
                Ok(if progress {
                    Reclaim::Progress
                } else {
                    Reclaim::Nothing
                })
            }
            r => Ok(r),
        }
    }

    /// One bounded step for a change that found no space and waits
    /// (module doc), `tried` saying what the earlier steps of the same
    /// wait did: first every plain checkpoint that may go (at once: the
    /// writer waits, and deleting them a few at a time wrote a checkpoint
    /// each, which the next step deleted again), with a checkpoint and a
    /// superblock write that make what was freed reusable; then cleaning
    /// passes at the caller's priority, at most [`MAX_URGENT_PASSES`].
    /// While another pass runs (cleanerd's, the space thread's), it waits
    /// for that pass to end and answers Busy: try again. Such waits count
    /// when the pass made nothing reusable, at most
    /// [`MAX_URGENT_PASSES`] of them, so that a filesystem whose data
    /// does not fit answers NoSpace after a bounded wait however busy its
    /// cleaners are (a writer used to wait out all of `space_wait` behind
    /// passes refused for gaining nothing).
    pub(crate) fn reclaim_urgent(&self, tried: &mut Tried) -> Result<Reclaim> {
        if self.space_levels_if_writable().is_none() {
            return Ok(Reclaim::Nothing);
        }
        if !tried.expired {
            tried.expired = true;
            let deleted = self.expire_for_space(1)?;
            if self.release_space()? || deleted > 0 {
                return Ok(Reclaim::Progress);
            }
        } else if self.release_space()? {
            return Ok(Reclaim::Progress);
        }
        if tried.passes >= MAX_URGENT_PASSES || tried.idle_waits >= MAX_URGENT_PASSES {
            return Ok(Reclaim::Nothing);
        }
        let epoch = self.st().reuse_epoch;
        let r = self.clean_for_space(false)?;
        match r {
            Reclaim::Progress => tried.passes += 1,
            Reclaim::Busy => {
                // Bounded: a pass is.
                drop(lock(&self.cleaning));
                if self.st().reuse_epoch == epoch {
                    tried.idle_waits += 1;
                }
            }
            Reclaim::Nothing => {}
        }
        Ok(r)
    }

    /// The space levels, unless nothing may be written.
    fn space_levels_if_writable(&self) -> Option<Levels> {
        if self.read_only {
            return None;
        }
        let st = self.st();
        st.read_only.is_none().then(|| st.space_levels())
    }

    /// Deletes the oldest `1/share` of the plain checkpoints that may go
    /// (at least one, more while deleting that many frees nothing),
    /// keeping those inside cleanerd's protection period if it asked for
    /// strict protection; returns how many were deleted. Durable with the
    /// next checkpoint. With `share` 1 (a change waiting for space) every
    /// one goes, in bounded steps that each take the state lock once;
    /// otherwise (the space thread) one step at most.
    fn expire_for_space(&self, share: u64) -> Result<u64> {
        let Some(_pass) = self.gate.try_enter() else {
            return Ok(0);
        };
        let before = match *lock(&self.space.strict) {
            Some(p) => now_ns().saturating_sub(p.as_nanos().min(u128::from(u64::MAX)) as u64),
            None => u64::MAX,
        };
        let (mut deleted, mut freed, mut most) = (0, 0, None);
        loop {
            let mut st = self.st();
            let deletable = st.history.deletable(before, st.cno).count() as u64;
            if deletable == 0 {
                break;
            }
            let m = *most.get_or_insert(deletable.div_ceil(share.max(1)));
            let d = match st.delete_oldest_checkpoints(before, m as usize, deleted > 0) {
                Ok(d) => d,
                // No room even to record a deletion: cleaning must come
                // first.
                Err(Error::NoSpace) => break,
                Err(e) => return Err(e),
            };
            if d.checkpoints == 0 {
                // Nothing only the oldest `m` keep: more of them.
                if m >= deletable {
                    break;
                }
                most = Some((m * 2).min(deletable));
                continue;
            }
            deleted += d.checkpoints;
            freed += d.freed.blocks;
            if share > 1 || !d.more {
                break;
            }
            most = Some(m.saturating_sub(d.checkpoints).max(1));
        }
        if deleted > 0 {
            Stats::add(&self.stats.checkpoints_expired_for_space, deleted);
            let st = self.st();
            log::info!(
                "space: deleted the {deleted} oldest plain checkpoint(s), freeing {freed} \
                 block(s): {} clean segment(s), history yields below {}",
                st.clean_segments_soon(),
                st.space_levels().history
            );
        }
        Ok(deleted)
    }

    /// Writes a checkpoint of whatever changed (deletions, frees) and
    /// releases the segments it freed; true if segments were released.
    fn release_space(&self) -> Result<bool> {
        let want = self.st().mods;
        self.checkpoint_covering(want, true)?;
        let _c = self.lock_ckpt();
        let st = self.st();
        if st.segs.npending() == 0 || st.read_only.is_some() || self.frozen_solid() {
            return Ok(false);
        }
        drop(self.release_freed(st)?);
        Ok(true)
    }

    /// A cleaning pass of the engine's own on greedy victims; in the
    /// background (SCHED_IDLE, as cleanerd's passes) for the space thread,
    /// at the caller's priority for a waiting change.
    fn clean_for_space(&self, background: bool) -> Result<Reclaim> {
        let protection = lock(&self.space.strict).unwrap_or(Duration::ZERO);
        let mut victims = self.st().space_victims();
        let mut refused = 0;
        loop {
            if victims.is_empty() {
                return Ok(Reclaim::Nothing);
            }
            let caller = if background {
                Caller::SpaceThread
            } else {
                Caller::Waiter
            };
            let r = self.clean_with(&victims, &Placement::default(), protection, caller);
            match r {
                Ok(rep) if rep.segments_freed > 0 || rep.blocks_freed > 0 => {
                    Stats::add(&self.stats.space_passes, 1);
                    log::info!(
                        "space: cleaned segment(s) {victims:?} itself: {} freed, {} blocks moved",
                        rep.segments_freed,
                        rep.blocks_moved
                    );
                    return Ok(Reclaim::Progress);
                }
                Ok(_) => return Ok(Reclaim::Nothing),
                Err(Error::Busy(_)) => return Ok(Reclaim::Busy),
                Err(Error::Again(_) | Error::NoSpace) => {
                    refused += 1;
                    // Another pass may have cleaned a victim since they
                    // were chosen (the space thread's, which had just
                    // ended): choose again. Else fewer victims may fit
                    // where these do not.
                    // One victim fewer, not half: a batch whose copies do
                    // not quite fit often fits without its last victim,
                    // while one victim alone may not pay for the pass's
                    // own metadata (measured at 85 % live: three victims
                    // 1 block over the room, one 1 block short of paying,
                    // two fine).
                    let fresh = self.st().space_victims();
                    victims = if fresh != victims {
                        fresh
                    } else if victims.len() > 1 {
                        victims[..victims.len() - 1].to_vec()
                    } else {
                        return Ok(Reclaim::Nothing);
                    };
                    if refused > MAX_REFUSALS {
                        return Ok(Reclaim::Nothing);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// The space thread: one step of [`Fs::reclaim`] whenever a checkpoint
/// wakes it (or a second passes), more while steps make progress.
pub(crate) fn space_loop(fs: std::sync::Weak<Fs>) {
    loop {
        let Some(f) = fs.upgrade() else { return };
        if *lock(&f.timer.stop) {
            return;
        }
        let keeper = std::sync::Arc::clone(&f.space);
        let stop = std::sync::Arc::clone(&f.timer);
        let again = if f.frozen_solid() {
            false
        } else {
            match f.reclaim_background() {
                Ok(Reclaim::Progress) => true,
                Ok(_) => false,
                Err(e) => {
                    log::warn!("space: reclaiming failed: {e}");
                    false
                }
            }
        };
        drop(f);
        if !again {
            keeper.wait(&stop.stop);
        }
    }
}
