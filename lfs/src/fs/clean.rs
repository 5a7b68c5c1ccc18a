//! Cleaning, the mechanism (DESIGN §7): make chosen segments clean by
//! moving their live blocks to the cold log head.
//!
//! The policy (which segments, when) is cleanerd's. One pass:
//! 1. delete the plain checkpoints older than the protection period, so
//!    that what only they kept is dead (`checkpoint::history`), in memory:
//!    the pass's checkpoint (step 5) records it;
//! 2. check the segments (in range, dirty, not a log head), with the
//!    checkpoint lock held for a moment so that no checkpoint is being
//!    written into them;
//! 3. read their summaries and the live blocks with no lock held: writers
//!    and fsync never wait for cleaning's reads (seed 004);
//! 4. under the state lock, keep the blocks that are still where they were
//!    and queue them; metadata blocks of the DAT, checkpoint and segment
//!    usage files are simply marked for rewriting;
//! 5. write a checkpoint, which puts the queued blocks in the cold log
//!    (logs flagged GC, without a super root), points their DAT entries
//!    at the new copies and frees the emptied segments.
//!
//! The whole pass runs in SCHED_IDLE, so that writers never wait for a
//! CPU it has, and whoever waits for it raises it until it next holds
//! nothing (`background.rs`). A second pass while one runs gets Busy.

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::format::{BlockKind, CPFILE_INO, DATJ_INO, DAT_INO, SUFILE_INO};
use crate::fs::Fs;
use crate::inspect::dump_segment;
use crate::stats::Stats;
use crate::{Error, Result};

/// A live block cleaning read, waiting for the next checkpoint to move it.
#[derive(Debug, Clone)]
pub(crate) struct GcBlock {
    /// Virtual block number.
    pub vblock: u64,
    /// Where it was read from.
    pub from: u64,
    /// Owner and offset, for the new log's summary.
    pub ino: u64,
    /// File offset (first offset it maps, for an indirect block).
    pub offset: u64,
    /// Kind of block.
    pub kind: BlockKind,
    /// Its contents.
    pub data: Vec<u8>,
    /// It goes to the warm head: its victim was one the cleaner found hot.
    pub warm: bool,
}

/// The cleaner's head for survivors of most victims.
pub(crate) const COLD_HEAD: usize = 0;
/// The cleaner's head for survivors of victims the cleaner found hot
/// (still dying fast): kept apart from the cold ones, which they would
/// otherwise riddle with holes soon after.
pub(crate) const WARM_HEAD: usize = 1;
/// The head for file data whose previous version lived longer than most,
/// while the cleaner asks for writes to be separated
/// ([`Placement::separate_writes`]): such data is likely cold again, and
/// kept out of the segments of hot data it would otherwise pin.
pub(crate) const LONG_HEAD: usize = 2;
/// Side heads: logs flagged GC, without a super root, flushed before the
/// logs that end in it (`Plan::cold_runs`).
pub(crate) const SIDE_HEADS: usize = 3;

/// Where a cleaning pass puts what it writes, the cleaner's policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// Victims whose live blocks go to the warm head, not the cold one.
    pub warm: Vec<u64>,
    /// From this pass on (until a pass says otherwise), file data whose
    /// previous version lived longer than the running mean lifespan of
    /// overwritten blocks goes to the long head (SepBIT's separation of
    /// user writes by the lifespan of the block they invalidate).
    pub separate_writes: bool,
    /// This pass's moved blocks written more recently than the running
    /// mean lifespan go to the warm head, older ones to the cold head
    /// (SepBIT's classes of cleaned blocks by age): a victim holds hot
    /// and cold survivors alike, and sent whole to one head it mixes them
    /// again.
    pub warm_young: bool,
}

/// What one cleaning pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanReport {
    /// Live blocks copied to the cold log (metadata file blocks included).
    pub blocks_moved: u64,
    /// Segments the pass made clean.
    pub segments_freed: u64,
    /// Bytes its checkpoint wrote.
    pub bytes_written: u64,
    /// Checkpoints deleted for being older than the protection period.
    pub checkpoints_deleted: u64,
    /// Blocks freed because no valid checkpoint sees them any more.
    pub blocks_freed: u64,
}

/// A pass must free at least this share (1/64) of what it empties, and
/// [`MIN_NET_BLOCKS`], more than it writes, by an estimate that counts
/// every block its checkpoint writes for it (moved blocks and their
/// summaries, the DAT journal, usage, checkpoint file and super root
/// blocks): else the policy is asked for other segments (EAGAIN). A
/// share of 1/16 with a rough estimate refused every pass of a 90 %
/// full filesystem, whose every segment was ~91 % live, and writers got
/// ENOSPC; a pass that nets little is expensive, but it is progress.
const MIN_NET_SHARE: u64 = 64;

/// See [`MIN_NET_SHARE`].
const MIN_NET_BLOCKS: u64 = 8;

/// Blocks a pass's checkpoint writes besides the moved blocks, their
/// summaries, the journal and the usage blocks: checkpoint file blocks
/// (its header's and the new entry's), the super root, the summary and
/// an indirect block of the physical files.
const PASS_FIXED_BLOCKS: u64 = 5;

/// Most blocks [`read_live`] reads in one request (256 KiB at 4 KiB).
const READ_LIVE_BLOCKS: usize = 64;

/// Reads the live blocks `wanted` (address, summary entry), physically
/// consecutive ones together, [`READ_LIVE_BLOCKS`] at most a request.
fn read_live(
    dev: &dyn crate::blockdev::BlockDevice,
    wanted: &[(u64, crate::format::BlockEntry)],
    bs: usize,
) -> Result<Vec<(u64, crate::format::BlockEntry, Vec<u8>)>> {
    let mut read = Vec::with_capacity(wanted.len());
    // One buffer for every read, of at most READ_LIVE_BLOCKS: a buffer
    // per run of consecutive blocks was up to a whole segment (8 MiB on a
    // 2 GiB filesystem), zeroed, mapped and unmapped at every run.
    let mut buf = Vec::new();
    for run in wanted.chunk_by(|a, b| b.0 == a.0 + 1) {
        for part in run.chunks(READ_LIVE_BLOCKS) {
            buf.resize(part.len() * bs, 0);
            dev.read_at(&mut buf, part[0].0 * bs as u64)
                .map_err(|e| Error::io(format!("reading block {} to clean it", part[0].0), e))?;
            for (&(addr, e), data) in part.iter().zip(buf.chunks_exact(bs)) {
                read.push((addr, e, data.to_vec()));
            }
        }
    }
    Ok(read)
}

/// A metadata-file block found live in a victim segment.
enum MetaBlock {
    Dat(u64),
    DatJ(u64),
    Cp(u64),
    Su(u64),
}

/// Clears the cleaning flag when a pass ends, however it ends.
struct Running<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Fs {
    /// Up to `n` segments a pass may take, greedily: dirty, not active,
    /// not a log head, with blocks written, fewest live blocks first.
    pub fn greedy_victims(&self, n: usize) -> Vec<u64> {
        let st = self.st();
        let mut c: Vec<(u64, u32)> = (0..st.segs.len())
            .map(|s| (s, st.segs.get(s)))
            .filter(|(s, u)| {
                !u.is_clean()
                    && u.flags & crate::format::SU_FLAG_ACTIVE == 0
                    && u.nblocks > 0
                    && !st.is_head(*s)
            })
            .map(|(s, u)| (s, u.nlive))
            .collect();
        c.sort_by_key(|&(s, live)| (live, s));
        c.into_iter().take(n).map(|(s, _)| s).collect()
    }

    /// Cleans `segments` after deleting the plain checkpoints older than
    /// `protection` (an empty list only deletes them). InvalidArgument for
    /// a segment out of range; Again for one that is clean or a log head,
    /// or for a pass that would not pay (see MIN_NET_SHARE); Busy while
    /// another pass runs or while the filesystem is frozen (a frozen
    /// filesystem writes nothing, and a cleaner waiting for the thaw would
    /// only time out). Durable on return when it cleaned; a deletion
    /// alone is durable at once only if it emptied segments, else with
    /// the next checkpoint. Moved blocks go to the cold head.
    pub fn clean_segments(&self, segments: &[u64], protection: Duration) -> Result<CleanReport> {
        self.clean_segments_placed(segments, &Placement::default(), protection)
    }

    /// [`Self::clean_segments`] with the cleaner's [`Placement`]: the live
    /// blocks of the victims in `warm` (each one of `segments`, else
    /// InvalidArgument) go to the warm head, and file data is separated
    /// by lifespan from now on if it asks.
    pub fn clean_segments_placed(
        &self,
        segments: &[u64],
        placement: &Placement,
        protection: Duration,
    ) -> Result<CleanReport> {
        let warm = &placement.warm;
        if let Some(w) = warm.iter().find(|w| !segments.contains(w)) {
            return Err(Error::InvalidArgument(format!(
                "segment {w} is placed warm but is not among the segments to clean"
            )));
        }
        // A whole pass is one change: a freeze waits for it to end.
        let Some(_pass) = self.gate.try_enter() else {
            return Err(Error::Busy(
                "the filesystem is frozen; cleaning resumes after THAW".into(),
            ));
        };
        if self.cleaning.swap(true, Ordering::AcqRel) {
            return Err(Error::Busy("another cleaning pass is running".into()));
        }
        let _running = Running(&self.cleaning);
        super::background::lower_this_thread();
        let victims: BTreeSet<u64> = segments.iter().copied().collect();
        // The whole pass in SCHED_IDLE; whoever waits for it raises it
        // until it next holds nothing (`relax`; background.rs).
        self.pass_pi
            .idle_holding(|| self.pass(&victims, placement, protection))
    }

    /// The body of [`Self::clean_segments_placed`], in SCHED_IDLE.
    fn pass(
        &self,
        victims: &BTreeSet<u64>,
        placement: &Placement,
        protection: Duration,
    ) -> Result<CleanReport> {
        let warm = &placement.warm;
        self.st().separate_writes = placement.separate_writes;
        let mut report = CleanReport::default();
        // 1. Expired checkpoints go in memory; the pass's own checkpoint
        // makes that durable (one checkpoint a pass: writing one for the
        // deletion as well doubled cleaning's metadata writes). Without
        // room to delete them, moving blocks may still make some (a
        // segment's dead blocks are freed with it).
        let expired = match self.expire_checkpoints(protection) {
            Err(Error::NoSpace) if !victims.is_empty() => None,
            r => Some(r?),
        };
        self.pass_pi.relax();
        if let Some(e) = &expired {
            report.checkpoints_deleted = e.deleted;
            report.blocks_freed = e.blocks_freed;
        }
        if victims.is_empty() {
            // Segments the deletion emptied are reusable only after a
            // checkpoint; anything else waits for the next one.
            if let Some(e) = expired.filter(|e| e.segments_freed) {
                self.checkpoint_covering(e.want, true)?;
            }
            self.note_cleaner();
            return Ok(report);
        }

        // 2. Check them, with no checkpoint in flight.
        let (dev, sb) = {
            let _c = self.lock_ckpt();
            let st = self.st();
            st.writable()?;
            for &s in victims {
                if s >= st.segs.len() {
                    return Err(Error::InvalidArgument(format!(
                        "segment {s} is out of range (the filesystem has {})",
                        st.segs.len()
                    )));
                }
                let u = st.segs.get(s);
                if u.is_clean() {
                    return Err(Error::Again(format!("segment {s} is clean")));
                }
                if u.flags & crate::format::SU_FLAG_ACTIVE != 0 || st.is_head(s) {
                    return Err(Error::Again(format!("segment {s} is a log head")));
                }
            }
            (st.dev.clone(), st.sb.clone())
        };
        self.pass_pi.relax();

        // 3. Summaries, without locks: the segments are full and no
        // checkpoint writes into a dirty segment that is not a head.
        let mut found = Vec::new();
        for &s in victims {
            let d = dump_segment(dev.as_ref(), &sb, s)?;
            for log in d.logs {
                let first = log.block + u64::from(log.summary.header.nsummary_blocks);
                for (i, e) in log.summary.entries.iter().enumerate() {
                    found.push((first + i as u64, *e));
                }
            }
        }
        let bs = sb.block_size as usize;
        let (wanted, meta) = {
            let mut st = self.st();
            let dat_nodes: HashSet<u64> = st.dat_map.node_addrs().map(|(_, a)| a).collect();
            let datj_nodes: HashSet<u64> = st.datj_map.node_addrs().map(|(_, a)| a).collect();
            let cp_nodes: HashSet<u64> = st.cp_map.node_addrs().map(|(_, a)| a).collect();
            let su_nodes: HashSet<u64> = st.su_map.node_addrs().map(|(_, a)| a).collect();
            let mut wanted = Vec::new();
            let mut meta = Vec::new();
            for &(addr, e) in &found {
                if e.vblock != 0 {
                    if st.dat.phys(e.vblock) == addr {
                        wanted.push((addr, e));
                    }
                    continue;
                }
                let (map, nodes, mk): (_, _, fn(u64) -> MetaBlock) = match e.ino {
                    DAT_INO => (&st.dat_map, &dat_nodes, MetaBlock::Dat),
                    DATJ_INO => (&st.datj_map, &datj_nodes, MetaBlock::DatJ),
                    CPFILE_INO => (&st.cp_map, &cp_nodes, MetaBlock::Cp),
                    SUFILE_INO => (&st.su_map, &su_nodes, MetaBlock::Su),
                    _ => continue,
                };
                let live = match e.kind {
                    BlockKind::Data => map.get(e.offset) == addr,
                    _ => nodes.contains(&addr),
                };
                if live {
                    // Rewriting the block at `offset` rewrites the
                    // indirect blocks on its path too.
                    meta.push(mk(e.offset));
                }
            }
            // What the pass will write: the moved blocks, the metadata
            // blocks rewritten in place of moved ones, the DAT journal
            // records of the moved entries, usage and checkpoint blocks.
            // It must fit in the room cleaning may use, and free clearly
            // more than it writes (MIN_NET_SHARE), or cleaning would eat
            // the reserve: a pass that nets a few blocks, by an estimate,
            // can lose them.
            let moved = wanted.len() as u64;
            let bps = u64::from(sb.blocks_per_segment);
            let dat_blocks = st.dat.cost_of_changes(moved);
            // A log's summary per segment the cleaner's logs enter.
            let heads = 1 + u64::from(!warm.is_empty() || placement.warm_young);
            let summaries = crate::format::LogHeader::summary_blocks_for(moved as usize, bs) as u64
                + moved.div_ceil(crate::log::layout::payload_per_segment(bs, bps))
                + heads;
            // Usage blocks of the victims, and of the segments the
            // cleaner's logs and the checkpoint enter.
            let su_blocks = victims
                .iter()
                .map(|&s| st.segs.block_of(s))
                .collect::<HashSet<_>>()
                .len() as u64
                + 1
                + heads;
            let cost =
                moved + meta.len() as u64 + dat_blocks + summaries + su_blocks + PASS_FIXED_BLOCKS;
            let gain = victims.len() as u64 * bps;
            let room = st.avail_for_cleaning();
            let margin = (gain / MIN_NET_SHARE).max(MIN_NET_BLOCKS);
            if cost > room || cost + margin > gain {
                log::debug!(
                    "cleaning {victims:?} refused: about {cost} blocks to write ({} moved, {} \
                     metadata, {} DAT) to free {gain}, {room} left for cleaning ({} clean, {} \
                     freed pending, {} dirty)",
                    wanted.len(),
                    meta.len(),
                    dat_blocks,
                    st.segs.nclean(),
                    st.segs.npending(),
                    st.dirty_blocks
                );
                return Err(Error::Again(format!(
                    "cleaning segments {victims:?} would write about {cost} blocks to free \
                     {gain}, with {room} left for cleaning; clean fewer or emptier segments"
                )));
            }
            // Booked until the blocks are queued (4b), so that writers
            // cannot take the room while they are read.
            st.gc_booked = cost;
            // 4a. Metadata blocks: rewritten by the next checkpoint.
            for m in &meta {
                match *m {
                    MetaBlock::Dat(b) => st.dat.force_block(b),
                    MetaBlock::DatJ(b) => st.dat.force_journal_block(b),
                    MetaBlock::Cp(b) => {
                        st.cp_force.insert(b);
                    }
                    MetaBlock::Su(b) => st.segs.mark_block_dirty(b),
                }
            }
            if !meta.is_empty() {
                st.mods += 1;
            }
            (wanted, meta.len() as u64)
        };
        self.pass_pi.relax();

        // 3b. The live blocks, without locks. The victims cannot be reused
        // meanwhile: they are not clean, and only this pass frees them.
        // Physically consecutive blocks are read together.
        let read = match read_live(dev.as_ref(), &wanted, bs) {
            Ok(r) => r,
            Err(e) => {
                self.st().gc_booked = 0;
                return Err(e);
            }
        };

        // 4b. Keep what is still where it was read.
        let want = {
            let mut st = self.st();
            st.gc_booked = 0;
            st.writable()?;
            for (addr, e, data) in read {
                if st.dat.phys(e.vblock) != addr {
                    continue;
                }
                report.blocks_moved += 1;
                let warm = st.seg_of(addr).is_some_and(|s| warm.contains(&s))
                    || (placement.warm_young && st.is_young(e.vblock));
                st.gc_queue.push(GcBlock {
                    vblock: e.vblock,
                    from: addr,
                    ino: e.ino,
                    offset: e.offset,
                    kind: e.kind,
                    data,
                    warm,
                });
            }
            report.blocks_moved += meta;
            st.mods += 1;
            st.mods
        };
        self.pass_pi.relax();

        // 5. The checkpoint that moves them and frees the segments.
        let before = self.stats.gc_bytes.load(Ordering::Relaxed);
        let ckpts = self.stats.checkpoints.load(Ordering::Relaxed);
        self.checkpoint_covering(want, true)?;
        let after = self.stats.gc_bytes.load(Ordering::Relaxed);
        if self.stats.checkpoints.load(Ordering::Relaxed) != ckpts {
            Stats::add(&self.stats.gc_checkpoints, 1);
        }
        // The cold log, and the metadata blocks rewritten in place of the
        // ones moved out.
        report.bytes_written = after.saturating_sub(before) + meta * bs as u64;
        {
            let st = self.st();
            report.segments_freed = victims
                .iter()
                .filter(|&&s| st.segs.get(s).is_clean())
                .count() as u64;
        }
        Stats::add(&self.stats.gc_passes, 1);
        Stats::add(&self.stats.gc_blocks_moved, report.blocks_moved);
        self.note_cleaner();
        log::info!(
            "cleaned {} segment(s): {} freed, {} blocks moved, {} bytes written, {} checkpoint(s) deleted",
            victims.len(),
            report.segments_freed,
            report.blocks_moved,
            report.bytes_written,
            report.checkpoints_deleted
        );
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blockdev::{BlockDevice, MemDevice};
    use crate::format::{BlockEntry, BlockKind};

    /// Runs longer than one request and lone blocks come back whole, each
    /// with its own entry, in the order asked.
    #[test]
    fn read_live_splits_long_runs_and_keeps_every_block() {
        let bs = 512;
        let dev = MemDevice::new(400 * bs as u64);
        for b in 0..400u64 {
            dev.write_all_at(&[b as u8; 512], b * bs as u64).unwrap();
        }
        let addrs: Vec<u64> = (10..10 + 2 * READ_LIVE_BLOCKS as u64 + 7)
            .chain([300, 302, 303])
            .collect();
        let wanted: Vec<(u64, BlockEntry)> = addrs
            .iter()
            .map(|&a| {
                let e = BlockEntry {
                    ino: 16,
                    offset: a * 3,
                    vblock: a + 1,
                    kind: BlockKind::Data,
                };
                (a, e)
            })
            .collect();
        let got = read_live(&dev, &wanted, bs).unwrap();
        assert_eq!(got.len(), wanted.len());
        for ((addr, e, data), (want_addr, want_e)) in got.iter().zip(&wanted) {
            assert_eq!((addr, e), (want_addr, want_e));
            assert_eq!(data, &vec![*addr as u8; bs], "block {addr}");
        }
    }
}
