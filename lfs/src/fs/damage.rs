//! Logs whose body fails its checksum.
//!
//! A log's body checksum covers all of its payload; file data blocks have
//! no checksum of their own, so when it fails no data block of that log
//! can be trusted. Such logs are found by a cleaning pass, which reads
//! whole victim segments and verifies them (`fs/clean.rs`), by fsck, and
//! at mount for the segments flagged so before. Here the engine keeps
//! their bodies' block ranges and flags their segment `SU_FLAG_ERROR`
//! (written with the next checkpoint, so the next mount finds them
//! again, and cleanerd leaves the segment alone):
//! * a read of a file block in one is `Corrupted` (EIO), never the
//!   damaged bytes ([`State::source_of`]);
//! * the cleaner never copies a block of one under a fresh checksum: it
//!   skips a victim while any of its live blocks lies in one;
//! * the segment is freed as any other once none of its blocks is live,
//!   and its ranges are forgotten with it.

use std::collections::BTreeMap;

use crate::format::{DecodeError, SU_FLAG_ERROR};
use crate::fs::state::State;
use crate::inspect::SegmentDump;
use crate::{Error, Result};

/// A damaged log body: its blocks and what its verification said.
#[derive(Debug, Clone)]
pub(crate) struct Damaged {
    /// One past its last block.
    pub end: u64,
    /// The log's first (summary) block.
    pub log: u64,
    /// Why its body does not verify.
    pub why: DecodeError,
}

/// Damaged log bodies by first payload block.
pub(crate) type DamageMap = BTreeMap<u64, Damaged>;

/// The damaged bodies among the logs of `d`: (first payload block,
/// what). Only logs up to sequence `last_seq`, the segment's last log
/// that segment usage records (`SegUsage::seq`), count: a log past it is
/// a tail that recovery discarded (a write torn by a crash), not damage.
pub(crate) fn damaged_logs(d: &SegmentDump, last_seq: u64) -> Vec<(u64, Damaged)> {
    d.logs
        .iter()
        .filter(|l| l.summary.header.seq <= last_seq)
        .filter_map(|l| {
            let why = l.body_error.clone()?;
            let start = l.block + u64::from(l.summary.header.nsummary_blocks);
            let end = l.block + u64::from(l.summary.header.nblocks);
            Some((
                start,
                Damaged {
                    end,
                    log: l.block,
                    why,
                },
            ))
        })
        .collect()
}

impl State {
    /// The damaged log body holding block `p`, if one does.
    pub(crate) fn damage_at(&self, p: u64) -> Option<&Damaged> {
        self.damaged
            .range(..=p)
            .next_back()
            .map(|(_, d)| d)
            .filter(|d| p < d.end)
    }

    /// `Corrupted` for a file block at `p` in a damaged log, naming it.
    pub(crate) fn check_undamaged(&self, p: u64) -> Result<()> {
        match self.damage_at(p) {
            None => Ok(()),
            Some(d) => Err(Error::Corrupted {
                what: "log body holding a file block",
                location: format!(
                    "block {p} (log at block {}, segment {})",
                    d.log,
                    self.seg_of(p).unwrap_or(0)
                ),
                reason: d.why.clone(),
            }),
        }
    }

    /// Records the damaged logs found in segment `seg` and flags it. True
    /// if any was new (the flag is then written by the next checkpoint).
    pub(crate) fn note_damage(&mut self, seg: u64, found: Vec<(u64, Damaged)>) -> bool {
        let mut new = false;
        for (start, d) in found {
            new |= self.damaged.insert(start, d).is_none();
        }
        if new && self.segs.get(seg).flags & SU_FLAG_ERROR == 0 {
            self.segs.set_flags(seg, SU_FLAG_ERROR);
            self.mods += 1;
        }
        new
    }

    /// Forgets the damaged logs of segments no longer flagged (freed).
    pub(crate) fn forget_freed_damage(&mut self) {
        if self.damaged.is_empty() {
            return;
        }
        let sb = &self.sb;
        let segs = &self.segs;
        self.damaged.retain(|&p, _| {
            sb.segment_of(p)
                .is_some_and(|s| segs.get(s).flags & SU_FLAG_ERROR != 0)
        });
    }

    /// At mount: the damaged logs of the segments flagged before (only
    /// those are read). A flagged segment whose logs all verify now (the
    /// damage was transient) keeps its flag until it is freed.
    pub(crate) fn load_damage(&mut self) -> Result<()> {
        let flagged: Vec<u64> = (0..self.segs.len())
            .filter(|&s| self.segs.get(s).flags & SU_FLAG_ERROR != 0)
            .collect();
        for s in flagged {
            let d = crate::inspect::dump_segment(self.dev.as_ref(), &self.sb, s)?;
            for (start, dmg) in damaged_logs(&d, self.segs.get(s).seq) {
                self.damaged.insert(start, dmg);
            }
        }
        if !self.damaged.is_empty() {
            log::warn!(
                "{} damaged log(s) in segments flagged as holding errors: their file blocks read as EIO",
                self.damaged.len()
            );
        }
        Ok(())
    }
}
