//! Freezing: Linux's FIFREEZE/FITHAW for lfs.
//!
//! [`Fs::freeze`] waits for the changes in progress to finish, writes a
//! checkpoint of whatever changed, writes the superblock naming it and
//! flushes the device; from then until [`Fs::thaw`] the device is not
//! written: every call that changes the filesystem (file writes,
//! namespace and attribute changes, the last close of an unlinked file,
//! checkpoint management, cleaning passes) waits at the gate, the
//! checkpoint timer skips its turns, and a sync or fsync has nothing to
//! write. Reads and queries go on. So a copy of the device taken while
//! frozen is a clean image of the last checkpoint.
//!
//! Invariants:
//! * Every changing entry point passes the gate ([`Gate::enter`]) before
//!   it takes any other lock, and holds its [`Pass`] until its change is
//!   in memory; none enters the gate again while holding a pass (a pass
//!   held while waiting to enter again would deadlock a freeze in
//!   progress, which waits for the first to finish).
//! * While the phase is not `Thawed`, no pass is handed out; `freeze`
//!   writes its checkpoint only once no pass is held, so no change lands
//!   after the frozen checkpoint.
//! * Unmounting a frozen filesystem thaws it first (with a log line):
//!   otherwise the writers waiting at the gate would never finish, and
//!   the final checkpoint could not be written.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::fs::{lock, Fs};
use crate::{Error, Result};

/// Where the gate stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Phase {
    /// Changes pass.
    #[default]
    Thawed,
    /// A freeze is waiting for the changes in progress and writing its
    /// checkpoint; new changes wait.
    Freezing,
    /// Frozen: the device is not written until thawed.
    Frozen,
}

#[derive(Debug, Default)]
struct Inner {
    phase: Phase,
    /// Passes held: changes in progress.
    active: usize,
}

/// The freeze gate every changing call passes.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    inner: Mutex<Inner>,
    /// Signalled when the phase changes or the last pass is dropped.
    cv: Condvar,
    /// `phase != Thawed`, readable without the mutex.
    closed: AtomicBool,
}

/// Held by a change in progress; a freeze waits until none is held.
#[derive(Debug)]
pub(crate) struct Pass<'a>(&'a Gate);

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        let mut g = lock(&self.0.inner);
        g.active -= 1;
        if g.active == 0 {
            self.0.cv.notify_all();
        }
    }
}

impl Gate {
    fn wait<'a>(&self, g: MutexGuard<'a, Inner>) -> MutexGuard<'a, Inner> {
        self.cv.wait(g).unwrap_or_else(|p| p.into_inner())
    }

    fn set_phase(&self, g: &mut Inner, phase: Phase) {
        g.phase = phase;
        self.closed.store(phase != Phase::Thawed, Ordering::Release);
        self.cv.notify_all();
    }

    /// Waits until the filesystem is not frozen, then lets one change in.
    pub(crate) fn enter(&self) -> Pass<'_> {
        let mut g = lock(&self.inner);
        while g.phase != Phase::Thawed {
            g = self.wait(g);
        }
        g.active += 1;
        Pass(self)
    }

    /// Lets one change in unless a freeze is in force or in progress:
    /// for work that should be refused, not delayed, while frozen.
    pub(crate) fn try_enter(&self) -> Option<Pass<'_>> {
        let mut g = lock(&self.inner);
        if g.phase != Phase::Thawed {
            return None;
        }
        g.active += 1;
        Some(Pass(self))
    }

    /// Whether a freeze is in force or in progress.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether the filesystem is frozen (its checkpoint written).
    fn is_frozen(&self) -> bool {
        lock(&self.inner).phase == Phase::Frozen
    }

    /// Closes the gate and waits for the changes in progress to finish.
    fn begin_freeze(&self) -> Result<()> {
        let mut g = lock(&self.inner);
        match g.phase {
            Phase::Thawed => {}
            Phase::Freezing => return Err(Error::Busy("a freeze is in progress".into())),
            Phase::Frozen => return Err(Error::Busy("the filesystem is already frozen".into())),
        }
        self.set_phase(&mut g, Phase::Freezing);
        while g.active > 0 {
            g = self.wait(g);
        }
        Ok(())
    }

    /// Ends a freeze begun by [`Self::begin_freeze`]: frozen, or (after a
    /// failure) thawed again.
    fn end_freeze(&self, frozen: bool) {
        let mut g = lock(&self.inner);
        self.set_phase(&mut g, if frozen { Phase::Frozen } else { Phase::Thawed });
    }

    /// Opens the gate. InvalidArgument unless frozen; with `wait`, a freeze
    /// in progress is waited for first (unmount), otherwise refused.
    fn thaw(&self, wait: bool) -> Result<()> {
        let mut g = lock(&self.inner);
        while wait && g.phase == Phase::Freezing {
            g = self.wait(g);
        }
        if g.phase != Phase::Frozen {
            return Err(Error::InvalidArgument(
                "the filesystem is not frozen".into(),
            ));
        }
        self.set_phase(&mut g, Phase::Thawed);
        Ok(())
    }
}

impl Fs {
    /// Freezes the filesystem (FIFREEZE): waits for the changes in
    /// progress, writes a checkpoint of whatever changed (none if nothing
    /// did), writes the superblock naming the last checkpoint and flushes
    /// the device. Until [`Self::thaw`], calls that change anything wait;
    /// reads and queries do not. Returns the last checkpoint's number.
    /// Busy if frozen already (or being frozen); on any other error the
    /// filesystem is left thawed.
    pub fn freeze(&self) -> Result<u64> {
        self.gate.begin_freeze()?;
        // The caller logs the freeze (fsd names who asked).
        let r = self.write_frozen_state();
        self.gate.end_freeze(r.is_ok());
        r
    }

    /// The checkpoint, superblock and flush of [`Self::freeze`]; no pass
    /// is held by anyone.
    fn write_frozen_state(&self) -> Result<u64> {
        self.sync()?;
        let _c = self.lock_ckpt();
        let mut st = self.st();
        if !self.read_only && st.read_only.is_none() && st.sb_written_cno != st.sb.last_cno {
            // The superblock names the checkpoint just written, so a copy
            // of the frozen device mounts it without scanning the log.
            st = self.release_freed(st)?;
        }
        if !self.read_only {
            if let Err(e) = st.dev.flush() {
                let e = Error::io("flushing the device to freeze it", e);
                self.stop_writing(&mut st, "the freeze failed", &e);
                return Err(e);
            }
        }
        Ok(st.cno)
    }

    /// Thaws a frozen filesystem (FITHAW): the changes waiting go on.
    /// InvalidArgument if it is not frozen.
    pub fn thaw(&self) -> Result<()> {
        self.gate.thaw(false)
    }

    /// Whether the filesystem is frozen or being frozen: a change made now
    /// would wait. (fsd hands such changes to threads of their own rather
    /// than hold a FUSE request thread.)
    pub fn is_frozen(&self) -> bool {
        self.gate.is_closed()
    }

    /// For unmount: thaws the filesystem if it is frozen (after a freeze
    /// in progress ends), so that the changes waiting finish and the final
    /// checkpoint can be written.
    pub(crate) fn thaw_for_unmount(&self) {
        if self.gate.thaw(true).is_ok() {
            log::warn!("unmounting a frozen filesystem: thawed it first");
        }
    }

    /// Whether the checkpoint timer and any checkpoint must keep off the
    /// device (frozen; a freeze in progress still writes its own).
    pub(crate) fn frozen_solid(&self) -> bool {
        self.gate.is_frozen()
    }
}
