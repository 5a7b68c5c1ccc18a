//! Read-only queries for the control protocol and `fsctl`: segment usage,
//! checkpoints, block lifetimes, space accounting. All are answered from
//! the in-memory state under the state lock (the checkpoint file's entries
//! are read from the device, which is small and rare).

use crate::format::{CheckpointEntry, DatEntry, MetaKind, SegUsage, CP_FLAG_SNAPSHOT};
use crate::fs::Fs;
use crate::inspect::{dump_segment, SegmentDump, SuperblockBytes};
use crate::Result;

/// Segment statistics [nilfs GET_SUSTAT].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuStat {
    /// Segments.
    pub nsegs: u64,
    /// Clean and available.
    pub nclean: u64,
    /// Holding written blocks.
    pub ndirty: u64,
    /// Freed, waiting for the superblock before reuse.
    pub npending: u64,
    /// Reserved for the cleaner.
    pub nreserved: u64,
    /// Blocks per segment.
    pub blocks_per_segment: u32,
    /// Block size.
    pub block_size: u32,
    /// Last checkpoint number.
    pub last_cno: u64,
    /// Creation time of the last checkpoint (ns).
    pub ctime_ns: u64,
    /// Creation time of the last checkpoint not made by the cleaner (ns).
    pub nongc_ctime_ns: u64,
    /// Sequence number below which logs are protected (the next one to be
    /// written: nothing newer exists).
    pub prot_seq: u64,
    /// Changes waiting for space right now (`fs/space.rs`).
    pub space_waiters: u64,
}

/// Where the space went (`fsctl df`), in blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Df {
    /// Block size.
    pub block_size: u32,
    /// Blocks in all segments.
    pub total_blocks: u64,
    /// Blocks in clean segments and the rest of the head segment.
    pub free_blocks: u64,
    /// Blocks of the segments reserved for cleaning.
    pub reserved_blocks: u64,
    /// Blocks the current state references.
    pub live_blocks: u64,
    /// Blocks the current state no longer sees that a snapshot keeps
    /// (plain checkpoints may see them too: deleting those frees nothing).
    pub snapshot_blocks: u64,
    /// Blocks only older plain checkpoints keep: cleaning gives them back
    /// once those checkpoints are older than its protection period.
    pub protected_blocks: u64,
    /// Dead blocks in dirty segments: what cleaning would give back.
    pub reclaimable_blocks: u64,
    /// Free blocks kept back for a DAT merge that is due (the next
    /// checkpoint with room writes every stale DAT block): counted in
    /// `free_blocks`, but statfs counts them as used.
    pub booked_blocks: u64,
    /// Plain checkpoints deleted since mount because space ran short
    /// (`fs/space.rs`).
    pub checkpoints_expired_for_space: u64,
}

impl Fs {
    /// Segment statistics.
    pub fn sustat(&self) -> SuStat {
        let st = self.st();
        let nsegs = st.segs.len();
        let ndirty = (0..nsegs).filter(|&s| !st.segs.get(s).is_clean()).count() as u64;
        SuStat {
            nsegs,
            nclean: st.segs.nclean(),
            ndirty,
            npending: st.segs.npending(),
            nreserved: st.sb.reserved_segments(),
            blocks_per_segment: st.sb.blocks_per_segment,
            block_size: st.bs as u32,
            last_cno: st.cno,
            ctime_ns: st.last_ctime_ns,
            nongc_ctime_ns: st.nongc_ctime_ns,
            prot_seq: st.seq,
            space_waiters: self.space.waiters.load(std::sync::atomic::Ordering::SeqCst),
        }
    }

    /// Usage of `count` segments from `start` (fewer past the last).
    pub fn segment_usage_range(&self, start: u64, count: u64) -> Vec<(u64, SegUsage)> {
        let st = self.st();
        let end = start.saturating_add(count).min(st.segs.len());
        (start..end).map(|s| (s, st.segs.get(s))).collect()
    }

    /// (last checkpoint, checkpoints, snapshots).
    pub fn cpstat(&self) -> (u64, u64, u64) {
        let st = self.st();
        (
            st.cno,
            st.history.len(),
            st.history.snapshots().count() as u64,
        )
    }

    /// Up to `count` valid checkpoints from `start` on (snapshots only if
    /// asked).
    pub fn cpinfo(
        &self,
        start: u64,
        count: usize,
        snapshots_only: bool,
    ) -> Result<Vec<CheckpointEntry>> {
        let st = self.st();
        let bs = st.bs;
        let mut out = Vec::new();
        let mut cno = start.max(1);
        let mut cached: Option<(u64, Vec<u8>)> = None;
        while cno <= st.cno && out.len() < count {
            let (b, off) = MetaKind::Cpfile.locate(cno, bs);
            if cached.as_ref().is_none_or(|(cb, _)| *cb != b) {
                cached = Some((b, st.cp_block(b)?));
            }
            let blk = &cached.as_ref().expect("set above").1;
            let rec = &blk[off..off + MetaKind::Cpfile.record_size()];
            // Validity and flags from memory: a change made since the last
            // checkpoint is not in the block yet.
            if let (Some(m), Ok(mut e)) = (st.history.get(cno), CheckpointEntry::decode(rec)) {
                e.flags = m.flags;
                if e.cno == cno && (!snapshots_only || e.flags & CP_FLAG_SNAPSHOT != 0) {
                    out.push(e);
                }
            }
            cno += 1;
        }
        Ok(out)
    }

    /// DAT entries of virtual blocks (zero entries for unallocated ones).
    pub fn vinfo(&self, vblocks: &[u64]) -> Vec<(u64, DatEntry)> {
        let st = self.st();
        vblocks.iter().map(|&v| (v, st.dat.entry(v))).collect()
    }

    /// The logs of one segment as they are on the device now.
    pub fn segment_summary(&self, segno: u64) -> Result<SegmentDump> {
        let (dev, sb) = {
            let st = self.st();
            (st.dev.clone(), st.sb.clone())
        };
        dump_segment(dev.as_ref(), &sb, segno)
    }

    /// Both superblock copies as the device holds them. Read with the
    /// checkpoint lock held, under which every superblock write happens,
    /// so neither copy is caught half-written; FUSE requests do not wait
    /// for it.
    pub fn superblock_copies(&self) -> Result<SuperblockBytes> {
        let _c = self.lock_ckpt();
        let (dev, offset) = {
            let st = self.st();
            (
                st.dev.clone(),
                st.sb.secondary_block() * u64::from(st.sb.block_size),
            )
        };
        SuperblockBytes::read(dev.as_ref(), offset)
    }

    /// Space accounting.
    pub fn df(&self) -> Df {
        let st = self.st();
        let bps = u64::from(st.sb.blocks_per_segment);
        let total = st.segs.len() * bps;
        let mut live = 0;
        let mut reclaimable = 0;
        for s in 0..st.segs.len() {
            let u = st.segs.get(s);
            live += u64::from(u.nlive);
            if !u.is_clean() && s != st.head.seg {
                reclaimable += u64::from(u.nblocks.saturating_sub(u.nlive));
            }
        }
        let head_room = st.sb.segment_start(st.head.seg) + bps - st.head.block;
        let (mut snapshot, mut older) = (0, 0);
        for (_, e) in st.dat.iter_retired() {
            if st.history.kept_by_a_snapshot(e.start_cno, e.end_cno) {
                snapshot += 1;
            } else {
                older += 1;
            }
        }
        Df {
            block_size: st.bs as u32,
            total_blocks: total,
            free_blocks: (st.segs.nclean() + st.segs.npending()) * bps + head_room,
            reserved_blocks: st.sb.reserved_segments() * bps,
            live_blocks: live.saturating_sub(snapshot + older),
            snapshot_blocks: snapshot,
            protected_blocks: older,
            reclaimable_blocks: reclaimable,
            booked_blocks: st.dat.merge_booking(),
            checkpoints_expired_for_space: self
                .stats
                .checkpoints_expired_for_space
                .load(std::sync::atomic::Ordering::Relaxed),
        }
    }
}
