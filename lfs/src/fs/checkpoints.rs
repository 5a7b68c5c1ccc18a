//! Managing checkpoints: making one (or a snapshot), turning one into a
//! snapshot and back, deleting them. Each change is durable when the call
//! returns: it is written by a (minor) checkpoint of its own.

use std::time::Duration;

use crate::checkpoint::history::Deleted;
use crate::fs::{now_ns, Fs};
use crate::{Error, Result};

/// What [`Fs::expire_checkpoints`] deleted.
pub(crate) struct Expired {
    /// Checkpoints deleted.
    pub deleted: u64,
    /// Blocks no remaining checkpoint sees.
    pub blocks_freed: u64,
    /// Whether whole segments became free (they wait for a checkpoint).
    pub segments_freed: bool,
    /// The modification count a checkpoint must cover to make it durable.
    pub want: u64,
}

impl Fs {
    /// Writes a checkpoint now, even if nothing changed, as a snapshot if
    /// asked; returns its number.
    pub fn make_checkpoint(&self, snapshot: bool) -> Result<u64> {
        let _pass = self.gate.enter();
        let want = {
            let mut st = self.st();
            st.writable()?;
            st.mods += 1;
            st.next_is_snapshot |= snapshot;
            st.mods
        };
        self.checkpoint_covering(want, false)?;
        let st = self.st();
        Ok(if snapshot {
            st.last_snapshot_built
        } else {
            st.cno
        })
    }

    /// Makes checkpoint `cno` a snapshot (`true`) or a plain checkpoint.
    /// NotFound if there is no such checkpoint; Busy to unmake a mounted
    /// snapshot.
    pub fn change_cpmode(&self, cno: u64, snapshot: bool) -> Result<()> {
        let _pass = self.gate.enter();
        let want = {
            let mut st = self.st();
            st.change_cpmode(cno, snapshot)?;
            st.mods
        };
        self.checkpoint_covering(want, true)
    }

    /// Deletes plain checkpoint `cno`; returns the blocks that became
    /// free. NotFound if there is no such checkpoint; Busy for a snapshot,
    /// a mounted checkpoint or the latest one.
    pub fn delete_checkpoint(&self, cno: u64) -> Result<u64> {
        let _pass = self.gate.enter();
        let (want, freed) = {
            let mut st = self.st();
            let f = st.delete_checkpoint(cno)?;
            (st.mods, f.blocks)
        };
        self.checkpoint_covering(want, true)?;
        Ok(freed)
    }

    /// Deletes every plain checkpoint older than `age` (never a snapshot, a
    /// mounted checkpoint or the latest one); returns (checkpoints deleted,
    /// blocks freed). Durable on return.
    pub fn delete_checkpoints_older_than(&self, age: Duration) -> Result<(u64, u64)> {
        let _pass = self.gate.enter();
        let e = self.expire_checkpoints(age)?;
        if e.deleted > 0 || e.blocks_freed > 0 {
            self.checkpoint_covering(e.want, true)?;
        }
        Ok((e.deleted, e.blocks_freed))
    }

    /// [`Self::delete_checkpoints_older_than`] in memory only: a later
    /// checkpoint (`want` covers it) makes it durable. Cleaning uses it so
    /// that a pass writes one checkpoint, not one more for the deletion.
    pub(crate) fn expire_checkpoints(&self, age: Duration) -> Result<Expired> {
        let before = now_ns().saturating_sub(age.as_nanos().min(u128::from(u64::MAX)) as u64);
        let pending = self.st().segs.npending();
        let mut e = Expired {
            deleted: 0,
            blocks_freed: 0,
            segments_freed: false,
            want: 0,
        };
        // In bounded steps, each under the lock once: writers get in
        // between.
        loop {
            let mut st = self.st();
            let d = match st.delete_oldest_checkpoints(before, usize::MAX, e.deleted > 0) {
                Ok(d) => d,
                // Room ran out after a step: what it freed comes first.
                Err(Error::NoSpace) if e.deleted > 0 => Deleted::default(),
                Err(err) => return Err(err),
            };
            e.deleted += d.checkpoints;
            e.blocks_freed += d.freed.blocks;
            e.segments_freed |= st.segs.npending() > pending;
            e.want = st.mods;
            if !d.more {
                return Ok(e);
            }
        }
    }

    /// Sets the last-modified time (seconds) of segments, as a cleaner does
    /// to defer them [nilfs SET_SUINFO]; written with the next checkpoint.
    /// InvalidArgument for a segment out of range, and then nothing is
    /// changed.
    pub fn set_segment_mtimes(&self, updates: &[(u64, u64)]) -> Result<()> {
        let _pass = self.gate.enter();
        let mut st = self.st();
        st.writable()?;
        let n = st.segs.len();
        if let Some(&(s, _)) = updates.iter().find(|(s, _)| *s >= n) {
            return Err(crate::Error::InvalidArgument(format!(
                "segment {s} is out of range (the filesystem has {n})"
            )));
        }
        for &(s, t) in updates {
            st.segs.set_last_mod(s, t);
        }
        if !updates.is_empty() {
            st.mods += 1;
        }
        Ok(())
    }
}
