//! Continuous checkpoints: which ones are kept, and the blocks only they
//! keep.
//!
//! Every checkpoint stays valid (listed, mountable read-only, its blocks
//! kept) until it is deleted: by `rmcp`, or by cleaning once it is older
//! than the cleaner's protection period. A snapshot is a checkpoint that
//! cannot be deleted until it is turned back into a plain one.
//!
//! Invariants:
//! * `valid` holds every checkpoint whose checkpoint-file entry is valid,
//!   with its flags and creation time; the last one built is always in it.
//! * A retired DAT entry (`end_cno != CNO_LIVE`) that still has a block is
//!   seen by some valid checkpoint `c` with `start_cno <= c < end_cno`,
//!   except between a deletion and the `State::commit_history_freeing` that follows
//!   it in the same critical section.
//! * `changed` lists the entries whose flags in the checkpoint file differ
//!   from `valid` (deleted: `CP_FLAG_INVALID`); the next checkpoint
//!   rewrites their blocks.
//! * A checkpoint mounted read-only (`mounted`) is neither deleted nor,
//!   while it is a snapshot, turned back into a plain checkpoint.

use std::collections::{BTreeMap, BTreeSet};

use crate::format::{CheckpointEntry, MetaKind, CP_FLAG_INVALID, CP_FLAG_SNAPSHOT};
use crate::fs::state::State;
use crate::{Error, Result};

/// What is known in memory about one valid checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpMeta {
    /// On-disk `CP_FLAG_*` bits.
    pub flags: u32,
    /// Creation time, ns since the epoch.
    pub ctime_ns: u64,
}

/// The valid checkpoints.
#[derive(Debug, Clone, Default)]
pub struct History {
    valid: BTreeMap<u64, CpMeta>,
    mounted: BTreeMap<u64, usize>,
    changed: BTreeSet<u64>,
}

impl History {
    /// From the valid entries of the checkpoint file.
    pub fn from_entries(entries: impl IntoIterator<Item = CheckpointEntry>) -> Self {
        History {
            valid: entries
                .into_iter()
                .filter(|e| e.flags & CP_FLAG_INVALID == 0)
                .map(|e| {
                    (
                        e.cno,
                        CpMeta {
                            flags: e.flags,
                            ctime_ns: e.ctime_ns,
                        },
                    )
                })
                .collect(),
            ..History::default()
        }
    }

    /// Whether any checkpoint numbered in `range` is valid.
    pub fn any_valid_in(&self, range: std::ops::Range<u64>) -> bool {
        self.valid.range(range).next().is_some()
    }

    /// The first valid checkpoint after `cno`.
    pub fn next_valid_after(&self, cno: u64) -> Option<u64> {
        self.valid
            .range(cno.saturating_add(1)..)
            .next()
            .map(|(&c, _)| c)
    }

    /// Records a new checkpoint (its entry is written with it).
    pub fn add(&mut self, cno: u64, flags: u32, ctime_ns: u64) {
        self.valid.insert(cno, CpMeta { flags, ctime_ns });
    }

    /// The checkpoint `cno`, if valid.
    pub fn get(&self, cno: u64) -> Option<CpMeta> {
        self.valid.get(&cno).copied()
    }

    /// Valid checkpoints.
    pub fn len(&self) -> u64 {
        self.valid.len() as u64
    }

    /// True if no checkpoint is valid (only before the first one).
    pub fn is_empty(&self) -> bool {
        self.valid.is_empty()
    }

    /// Snapshots, in order.
    pub fn snapshots(&self) -> impl Iterator<Item = u64> + '_ {
        self.valid
            .iter()
            .filter(|(_, m)| m.flags & CP_FLAG_SNAPSHOT != 0)
            .map(|(&c, _)| c)
    }

    /// Whether a valid checkpoint in `[start, end)` sees a block with that
    /// lifetime.
    pub fn keeps(&self, start: u64, end: u64) -> bool {
        start < end && self.valid.range(start..end).next().is_some()
    }

    /// Whether a snapshot keeps a block of lifetime `[start, end)`: then
    /// deleting plain checkpoints (cleaning's expiry, `rmcp`) cannot free
    /// it, whatever plain checkpoints see it too.
    pub fn kept_by_a_snapshot(&self, start: u64, end: u64) -> bool {
        start < end
            && self
                .valid
                .range(start..end)
                .any(|(_, m)| m.flags & CP_FLAG_SNAPSHOT != 0)
    }

    /// Makes `cno` a snapshot or a plain checkpoint.
    pub fn set_snapshot(&mut self, cno: u64, snapshot: bool) -> Result<bool> {
        let busy = self.mounted.contains_key(&cno);
        let m = self.valid.get_mut(&cno).ok_or(Error::NotFound)?;
        let was = m.flags & CP_FLAG_SNAPSHOT != 0;
        if was == snapshot {
            return Ok(false);
        }
        if !snapshot && busy {
            return Err(Error::Busy(format!(
                "snapshot {cno} is mounted; unmount it first"
            )));
        }
        m.flags ^= CP_FLAG_SNAPSHOT;
        self.changed.insert(cno);
        Ok(true)
    }

    /// Deletes `cno`, which must be valid, a plain checkpoint, not mounted
    /// and not `latest`.
    pub fn delete(&mut self, cno: u64, latest: u64) -> Result<()> {
        let m = self.valid.get(&cno).ok_or(Error::NotFound)?;
        if m.flags & CP_FLAG_SNAPSHOT != 0 {
            return Err(Error::Busy(format!(
                "checkpoint {cno} is a snapshot; make it a plain checkpoint first (fsctl chcp cp {cno})"
            )));
        }
        if self.mounted.contains_key(&cno) {
            return Err(Error::Busy(format!("checkpoint {cno} is mounted")));
        }
        if cno == latest {
            return Err(Error::Busy(format!(
                "checkpoint {cno} is the latest one, which the filesystem is mounted from"
            )));
        }
        self.valid.remove(&cno);
        self.changed.insert(cno);
        Ok(())
    }

    /// Deletes the oldest `limit` plain, unmounted checkpoints other than
    /// `latest` created before `before_ns`; returns how many.
    pub fn delete_older(&mut self, before_ns: u64, latest: u64, limit: usize) -> u64 {
        let doomed: Vec<u64> = self.deletable(before_ns, latest).take(limit).collect();
        for &c in &doomed {
            self.valid.remove(&c);
            self.changed.insert(c);
        }
        doomed.len() as u64
    }

    /// The plain checkpoints older than `before_ns` that may be deleted,
    /// oldest first: never `latest`, a snapshot or a mounted one.
    pub fn deletable(&self, before_ns: u64, latest: u64) -> impl Iterator<Item = u64> + '_ {
        self.valid
            .iter()
            .filter(move |&(&c, m)| {
                c != latest
                    && m.ctime_ns < before_ns
                    && m.flags & CP_FLAG_SNAPSHOT == 0
                    && !self.mounted.contains_key(&c)
            })
            .map(|(&c, _)| c)
    }

    /// Pins `cno` while it is mounted read-only.
    pub fn mount(&mut self, cno: u64) -> Result<()> {
        if !self.valid.contains_key(&cno) {
            return Err(Error::NotFound);
        }
        *self.mounted.entry(cno).or_default() += 1;
        Ok(())
    }

    /// Releases one mount of `cno`.
    pub fn unmount(&mut self, cno: u64) {
        if let Some(n) = self.mounted.get_mut(&cno) {
            *n -= 1;
            if *n == 0 {
                self.mounted.remove(&cno);
            }
        }
    }

    /// Whether `cno` is mounted read-only.
    pub fn is_mounted(&self, cno: u64) -> bool {
        self.mounted.contains_key(&cno)
    }

    /// Entries to rewrite, and forgets them.
    pub fn take_changed(&mut self) -> BTreeSet<u64> {
        std::mem::take(&mut self.changed)
    }

    /// Entries changed since the last [`Self::take_changed`].
    pub fn changed(&self) -> &BTreeSet<u64> {
        &self.changed
    }

    /// The on-disk flags of slot `cno` now: its flags if valid, else
    /// `CP_FLAG_INVALID`.
    pub fn disk_flags(&self, cno: u64, old: u32) -> u32 {
        match self.valid.get(&cno) {
            Some(m) => m.flags,
            None => (old & !CP_FLAG_SNAPSHOT) | CP_FLAG_INVALID,
        }
    }
}

/// Most blocks one step of deleting old checkpoints frees
/// (`State::delete_oldest_checkpoints`): bounds how long it holds the
/// state lock, and the DAT records the next checkpoint journals for it.
pub const MAX_FREED_PER_STEP: u64 = 8192;

/// What one step of deleting the oldest checkpoints did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deleted {
    /// Checkpoints deleted.
    pub checkpoints: u64,
    /// What that freed.
    pub freed: Freed,
    /// Deletable checkpoints (of those asked for) were left for another
    /// step.
    pub more: bool,
}

/// What freeing dead blocks did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Freed {
    /// Blocks freed.
    pub blocks: u64,
}

impl State {
    /// Retired blocks that no valid checkpoint of `h` sees.
    fn dead_under(&self, h: &History) -> Vec<u64> {
        self.dat
            .iter_retired()
            .filter(|(_, e)| !h.keeps(e.start_cno, e.end_cno))
            .map(|(v, _)| v)
            .collect()
    }

    /// Replaces the history by `h` (some checkpoints deleted or changed)
    /// and frees what no valid checkpoint sees any more; their segments'
    /// live counts drop at the next checkpoint. Refused (NoSpace) if the
    /// next checkpoint could not hold the metadata this changes: it may use
    /// all but a quarter of the cleaning reserve (deleting checkpoints is
    /// how a full filesystem is emptied), the rest stays for checkpoints.
    fn commit_history(&mut self, h: History) -> Result<Freed> {
        let dead = self.dead_under(&h);
        self.commit_history_freeing(h, dead)
    }

    /// [`Self::commit_history`] with `dead`, what [`Self::dead_under`]
    /// said of `h`, already known.
    fn commit_history_freeing(&mut self, h: History, dead: Vec<u64>) -> Result<Freed> {
        let per_cp = MetaKind::Cpfile.per_block(self.bs) as u64;
        // Their DAT entries go to the journal.
        let dat_blocks = self.dat.cost_of_changes(dead.len() as u64);
        let segs: BTreeSet<u64> = dead
            .iter()
            .filter_map(|&v| self.seg_of(self.dat.phys(v)))
            .map(|s| self.segs.block_of(s))
            .collect();
        let cp_blocks: BTreeSet<u64> = h.changed().iter().map(|c| c / per_cp).collect();
        let cost = dat_blocks + (segs.len() + cp_blocks.len()) as u64;
        if cost > self.avail_for_cleaning() {
            return Err(Error::NoSpace);
        }
        self.history = h;
        self.dirty_blocks += cost;
        self.mods += 1;
        // Live counts drop now, so that segment usage (and a cleaner's
        // choice) sees the deletion at once; a segment left empty is
        // freed by the next checkpoint, which writes its usage block.
        for &v in &dead {
            let p = self.dat.free(v);
            if let Some(s) = self.seg_of(p).filter(|_| p != 0) {
                self.segs.add_live(s, -1);
            }
        }
        Ok(Freed {
            blocks: dead.len() as u64,
        })
    }

    /// Deletes checkpoint `cno` and frees what only it kept.
    pub fn delete_checkpoint(&mut self, cno: u64) -> Result<Freed> {
        self.writable()?;
        let mut h = self.history.clone();
        h.delete(cno, self.cno)?;
        self.commit_history(h)
    }

    /// Turns `cno` into a snapshot or back.
    pub fn change_cpmode(&mut self, cno: u64, snapshot: bool) -> Result<()> {
        self.writable()?;
        let mut h = self.history.clone();
        if h.set_snapshot(cno, snapshot)? {
            // Nothing is freed: the checkpoint stays valid either way.
            self.commit_history(h)?;
        }
        Ok(())
    }

    /// Deletes, oldest first, up to `most` of the plain checkpoints older
    /// than `before_ns` (never the latest, a snapshot or a mounted one)
    /// and frees what only they kept, stopping once
    /// [`MAX_FREED_PER_STEP`] blocks died: the caller holds the state
    /// lock, and freeing (then journaling) a hundred thousand blocks at
    /// once stalled every writer for tens of milliseconds.
    ///
    /// Checkpoints that keep no block of their own are left for an
    /// expiry that frees something: deleting them gives nothing back, yet
    /// a checkpoint must record it, which makes the one before it
    /// deletable in turn. A cleaner expiring every few seconds kept that
    /// going on an idle filesystem, 5 blocks a checkpoint, until a full
    /// one had used up its reserve and could not even unlink
    /// (docs/RELIABILITY.md, §5). `continued` says an earlier step of the
    /// same expiry freed something: then these go even if they free
    /// nothing themselves, as they would have with it in one step. Short
    /// of room to record them all, the oldest half, and so on: a nearly
    /// full filesystem gives space back a little at a time.
    pub fn delete_oldest_checkpoints(
        &mut self,
        before_ns: u64,
        most: usize,
        continued: bool,
    ) -> Result<Deleted> {
        self.writable()?;
        let doomed: Vec<u64> = self
            .history
            .deletable(before_ns, self.cno)
            .take(most)
            .collect();
        let mut take = doomed.len();
        loop {
            let (h, dead, n) = self.plan_deletions(&doomed[..take])?;
            if n == 0 || (dead.is_empty() && !continued) {
                return Ok(Deleted::default());
            }
            match self.commit_history_freeing(h, dead) {
                Ok(freed) => {
                    return Ok(Deleted {
                        checkpoints: n as u64,
                        freed,
                        more: n < doomed.len(),
                    })
                }
                Err(Error::NoSpace) if n > 1 => take = n / 2,
                Err(e) => return Err(e),
            }
        }
    }

    /// The history without `doomed` (valid plain checkpoints, oldest
    /// first) and the entries that leaves unseen, deleting them in order
    /// until [`MAX_FREED_PER_STEP`] entries died; returns how many were
    /// deleted too. An entry a deletion leaves unseen ends after it and
    /// no later than the next valid checkpoint (which would keep it
    /// otherwise), so only those groups of the DAT's retired entries are
    /// read, each once.
    fn plan_deletions(&mut self, doomed: &[u64]) -> Result<(History, Vec<u64>, usize)> {
        let mut h = self.history.clone();
        let mut dead = Vec::new();
        let mut n = 0;
        for &c in doomed {
            if dead.len() as u64 >= MAX_FREED_PER_STEP {
                break;
            }
            h.delete(c, self.cno)?;
            n += 1;
            let next = h.next_valid_after(c).unwrap_or(u64::MAX);
            dead.extend(
                self.dat
                    .retired_ending_in(c + 1..=next)
                    .into_iter()
                    .filter(|(_, e)| !h.keeps(e.start_cno, e.end_cno))
                    .map(|(v, _)| v),
            );
        }
        Ok((h, dead, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(cnos: &[(u64, u32)]) -> History {
        let mut h = History::default();
        for &(c, f) in cnos {
            h.add(c, f, c * 10);
        }
        h
    }

    #[test]
    fn keeps_needs_a_valid_checkpoint_inside_the_lifetime() {
        let h = hist(&[(2, 0), (5, CP_FLAG_SNAPSHOT), (9, 0)]);
        assert!(h.keeps(1, 3));
        assert!(!h.keeps(3, 5));
        assert!(h.keeps(3, 6));
        assert!(!h.keeps(6, 6));
        assert!(h.kept_by_a_snapshot(3, 6));
        assert!(h.kept_by_a_snapshot(3, 10));
        assert!(!h.kept_by_a_snapshot(1, 3));
        assert!(!h.kept_by_a_snapshot(6, 10));
    }

    #[test]
    fn snapshots_and_mounts_refuse_deletion() {
        let mut h = hist(&[(1, 0), (2, 0), (3, 0)]);
        assert!(h.set_snapshot(2, true).unwrap());
        assert!(!h.set_snapshot(2, true).unwrap());
        assert!(matches!(h.delete(2, 3), Err(Error::Busy(m)) if m.contains("chcp cp 2")));
        assert!(matches!(h.delete(3, 3), Err(Error::Busy(_))));
        assert!(matches!(h.delete(7, 3), Err(Error::NotFound)));
        h.mount(2).unwrap();
        assert!(matches!(h.set_snapshot(2, false), Err(Error::Busy(_))));
        h.unmount(2);
        assert!(h.set_snapshot(2, false).unwrap());
        h.mount(1).unwrap();
        assert!(matches!(h.delete(1, 3), Err(Error::Busy(_))));
        h.unmount(1);
        h.delete(1, 3).unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!(h.take_changed().into_iter().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(h.disk_flags(1, CP_FLAG_SNAPSHOT), CP_FLAG_INVALID);
        assert_eq!(h.disk_flags(2, 0), 0);
    }

    #[test]
    fn delete_older_keeps_the_latest_snapshots_and_young_ones() {
        let mut h = hist(&[(1, 0), (2, CP_FLAG_SNAPSHOT), (3, 0), (4, 0), (5, 0)]);
        h.mount(3).unwrap();
        // ctime = cno * 10: everything before 45 ns is old.
        assert_eq!(h.delete_older(45, 5, 1), 1);
        assert_eq!(h.valid.keys().copied().collect::<Vec<_>>(), [2, 3, 4, 5]);
        assert_eq!(h.delete_older(45, 5, usize::MAX), 1);
        assert_eq!(h.valid.keys().copied().collect::<Vec<_>>(), [2, 3, 5]);
        assert_eq!(h.delete_older(u64::MAX, 5, usize::MAX), 0);
        assert_eq!(h.snapshots().collect::<Vec<_>>(), [2]);
    }
}
