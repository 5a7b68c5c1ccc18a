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
//! 3. read and verify their logs with no lock held (writers and fsync
//!    never wait for cleaning's reads, seed 004), and take the live blocks
//!    from the verified bodies; a victim with a live block in a log whose
//!    body fails its checksum is skipped, and that log recorded as damaged
//!    (`fs/damage.rs`): cleaning never moves damaged bytes under a fresh
//!    checksum;
//! 4. under the state lock, keep the blocks that are still where they were,
//!    check that the pass pays, and queue them; metadata blocks of the DAT,
//!    checkpoint and segment usage files are simply marked for rewriting;
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

use crate::format::{
    BlockEntry, BlockKind, MetaBlockHeader, MetaKind, CPFILE_INO, DATJ_INO, DAT_INO, IFILE_INO,
    SUFILE_INO,
};
use crate::fs::state::State;
use crate::fs::{lock, Fs};
use crate::inspect::read_segment;
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
    /// Keep the checkpoints younger than this pass's protection period
    /// even when space runs short (nilfs's behaviour: NoSpace rather than
    /// lose history); without it, history yields to space (`fs/space.rs`).
    /// Remembered until a pass says otherwise.
    pub strict_protection: bool,
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

/// A metadata-file block found live in a victim segment: rewritten from
/// memory by the next checkpoint, never copied.
#[derive(Debug, Clone, Copy)]
pub(crate) enum MetaBlock {
    Dat(u64),
    DatJ(u64),
    Cp(u64),
    Su(u64),
}

/// What a summary entry found at an address is, if the current state
/// still uses the block there.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Live {
    /// A virtually addressed block the DAT points at (seen by the current
    /// tree or by an older valid checkpoint).
    Virtual,
    /// A block of a physically addressed metadata file.
    Meta(MetaBlock),
}

/// Tells which summary entries are live, by the state's maps: the
/// cleaner's test, and fsck's for damaged logs.
pub(crate) struct LiveIndex {
    dat_nodes: HashSet<u64>,
    datj_nodes: HashSet<u64>,
    cp_nodes: HashSet<u64>,
    su_nodes: HashSet<u64>,
}

impl LiveIndex {
    pub(crate) fn new(st: &State) -> LiveIndex {
        let nodes = |m: &crate::fs::bmap::BlockMap| m.node_addrs().map(|(_, a)| a).collect();
        LiveIndex {
            dat_nodes: nodes(&st.dat_map),
            datj_nodes: nodes(&st.datj_map),
            cp_nodes: nodes(&st.cp_map),
            su_nodes: nodes(&st.su_map),
        }
    }

    /// Whether the block at `addr`, which summary entry `e` describes, is
    /// live, and as what.
    pub(crate) fn live(&self, st: &State, addr: u64, e: &BlockEntry) -> Option<Live> {
        if e.vblock != 0 {
            return (st.dat.phys(e.vblock) == addr).then_some(Live::Virtual);
        }
        let (map, nodes, mk): (_, _, fn(u64) -> MetaBlock) = match e.ino {
            DAT_INO => (&st.dat_map, &self.dat_nodes, MetaBlock::Dat),
            DATJ_INO => (&st.datj_map, &self.datj_nodes, MetaBlock::DatJ),
            CPFILE_INO => (&st.cp_map, &self.cp_nodes, MetaBlock::Cp),
            SUFILE_INO => (&st.su_map, &self.su_nodes, MetaBlock::Su),
            _ => return None,
        };
        let live = match e.kind {
            BlockKind::Data => map.get(e.offset) == addr,
            _ => nodes.contains(&addr),
        };
        // Rewriting the block at `offset` rewrites the indirect blocks on
        // its path too.
        live.then(|| Live::Meta(mk(e.offset)))
    }
}

/// Whether block `b`, which summary entry `e` describes, checks out on its
/// own: metadata blocks (indirect, inode file, directory, extended
/// attribute) carry a header with their own checksum; file data has none,
/// and only its log's body checksum vouches for it.
pub(crate) fn verifies_alone(e: &BlockEntry, b: &[u8], seed: u32) -> bool {
    let kind = match e.kind {
        BlockKind::Indirect(_) => MetaKind::Node,
        BlockKind::Xattr => MetaKind::Xattr,
        BlockKind::Data if e.ino == IFILE_INO => MetaKind::Ifile,
        // A directory block, or file data (which fails).
        BlockKind::Data => MetaKind::Dir,
        BlockKind::Inode => return false,
    };
    MetaBlockHeader::verify(b, kind, seed).is_ok()
}

/// A victim's live blocks, to take from its verified log bodies.
struct Found {
    /// (address, summary entry, log index, index in the log's body) of
    /// each live virtual block.
    blocks: Vec<(u64, BlockEntry, usize, usize)>,
    /// Live metadata-file blocks, to rewrite from memory.
    meta: Vec<MetaBlock>,
}

/// The live blocks of victim `seg` (`dump` and `bodies` from
/// `read_segment`), under the state lock. None if a live file data block
/// lies in a log whose body fails its checksum: that log is recorded as
/// damaged (`fs/damage.rs`), each such block logged, and the victim is
/// not cleaned (moving it would put damaged bytes under a fresh
/// checksum). Blocks that carry their own checksum and pass it
/// ([`verifies_alone`]) are moved, and metadata-file blocks are rewritten
/// from memory, so a damaged log does not stop them.
fn take_live(
    st: &mut State,
    seg: u64,
    dump: &crate::inspect::SegmentDump,
    bodies: &[Vec<u8>],
    bs: usize,
) -> Option<Found> {
    let index = LiveIndex::new(st);
    let mut found = Found {
        blocks: Vec::new(),
        meta: Vec::new(),
    };
    let mut damaged = Vec::new();
    let last_seq = st.segs.get(seg).seq;
    for (li, (log, body)) in dump.logs.iter().zip(bodies).enumerate() {
        // Past the last log segment usage records: a tail recovery
        // discarded, of which nothing is live.
        if log.summary.header.seq > last_seq {
            break;
        }
        let first = log.block + u64::from(log.summary.header.nsummary_blocks);
        for (i, e) in log.summary.entries.iter().enumerate() {
            let addr = first + i as u64;
            match index.live(st, addr, e) {
                None => {}
                Some(Live::Meta(m)) => found.meta.push(m),
                Some(Live::Virtual) => match body.get(i * bs..(i + 1) * bs) {
                    Some(data) if log.body_error.is_none() || verifies_alone(e, data, st.seed) => {
                        found.blocks.push((addr, *e, li, i));
                    }
                    // File data of a log that fails its checksum (or a
                    // body shorter than its summary says, which cannot
                    // have verified): never copied.
                    _ => damaged.push((addr, *e)),
                },
            }
        }
    }
    let logs = crate::fs::damage::damaged_logs(dump, last_seq);
    if logs.is_empty() {
        return Some(found);
    }
    let new = st.note_damage(seg, logs);
    if damaged.is_empty() {
        return Some(found);
    }
    if new {
        for (addr, e) in &damaged {
            log::error!(
                "segment {seg}: block {addr}, inode {} offset {} ({:?}), lies in a log whose \
                 body fails its checksum: not moved by cleaning; reads of it get EIO",
                e.ino,
                e.offset,
                e.kind
            );
        }
    }
    None
}

/// Who asks for a cleaning pass ([`Fs::clean_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// A cleaner (cleanerd, `fsctl clean`): in the background, after the
    /// pass running now, as nilfs's CLEAN_SEGMENTS waits for its lock.
    Cleaner,
    /// The engine's space thread: in the background, not at all if a
    /// pass runs (Busy: its checkpoint wakes the thread again).
    SpaceThread,
    /// A change waiting for space: at its own priority, not at all if a
    /// pass runs (Busy: it waits for that pass's checkpoint).
    Waiter,
}

impl Fs {
    /// Up to `n` segments a pass may take, greedily: dirty, not active,
    /// not a log head, not holding damaged logs (`fs/damage.rs`), with
    /// blocks written, fewest live blocks first.
    pub fn greedy_victims(&self, n: usize) -> Vec<u64> {
        let st = self.st();
        let mut c: Vec<(u64, u32)> = (0..st.segs.len())
            .map(|s| (s, st.segs.get(s)))
            .filter(|(s, u)| {
                !u.is_clean()
                    && u.flags & (crate::format::SU_FLAG_ACTIVE | crate::format::SU_FLAG_ERROR) == 0
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
    /// the filesystem is frozen (a frozen filesystem writes nothing, and a
    /// cleaner waiting for the thaw would only time out); while another
    /// pass runs (the engine's own) it waits for it to end. Durable on return when it cleaned; a deletion
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
        *lock(&self.space.strict) = placement.strict_protection.then_some(protection);
        self.clean_with(segments, placement, protection, Caller::Cleaner)
    }

    /// [`Self::clean_segments_placed`] for `caller`: in the background
    /// (the pass in SCHED_IDLE at nice 10: cleanerd's and the space
    /// thread's) or at the calling thread's priority (a change waiting for
    /// the space); one pass at a time.
    pub(crate) fn clean_with(
        &self,
        segments: &[u64],
        placement: &Placement,
        protection: Duration,
        caller: Caller,
    ) -> Result<CleanReport> {
        // A whole pass is one change: a freeze waits for it to end.
        let Some(_pass) = self.gate.try_enter() else {
            return Err(Error::Busy(
                "the filesystem is frozen; cleaning resumes after THAW".into(),
            ));
        };
        let _running = match caller {
            Caller::Cleaner => lock(&self.cleaning),
            Caller::SpaceThread | Caller::Waiter => super::try_lock(&self.cleaning)
                .ok_or_else(|| Error::Busy("another cleaning pass is running".into()))?,
        };
        let victims: BTreeSet<u64> = segments.iter().copied().collect();
        if caller == Caller::Waiter {
            return self.pass(&victims, placement, protection);
        }
        super::background::lower_this_thread();
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

        // 3. Each victim's logs, read and verified with no lock held (the
        // segments are full, and no checkpoint writes into a dirty
        // segment that is not a head), then, under the state lock, its
        // live blocks taken from the verified bodies: what moves is
        // exactly what was verified. (Reading the live blocks again after
        // the summaries, as before, moved a log whose body failed its
        // checksum under a fresh one, and the damage became invisible.)
        let bs = sb.block_size as usize;
        let mut moving: Vec<(u64, BlockEntry, Vec<u8>)> = Vec::new();
        let mut meta: Vec<MetaBlock> = Vec::new();
        let mut cleaned: BTreeSet<u64> = BTreeSet::new();
        let mut damaged_victims = Vec::new();
        for &s in victims {
            let (dump, bodies) = read_segment(dev.as_ref(), &sb, s, true)?;
            let found = take_live(&mut self.st(), s, &dump, &bodies, bs);
            self.pass_pi.relax();
            let Some(found) = found else {
                damaged_victims.push(s);
                continue;
            };
            // The copies are made without the lock (a segment's worth of
            // memory copies took milliseconds under it).
            for (addr, e, log, i) in found.blocks {
                if let Some(data) = bodies.get(log).and_then(|b| b.get(i * bs..(i + 1) * bs)) {
                    moving.push((addr, e, data.to_vec()));
                }
            }
            meta.extend(found.meta);
            cleaned.insert(s);
        }
        if cleaned.is_empty() {
            return Err(Error::Again(format!(
                "segment(s) {damaged_victims:?} hold live blocks in logs that fail their \
                 checksum (logged, and read as EIO); they are not cleaned"
            )));
        }

        // 4. Under the state lock: keep what is still where it was read,
        // check that the pass pays, and queue the blocks.
        let want = {
            let mut st = self.st();
            st.writable()?;
            moving.retain(|(addr, e, _)| st.dat.phys(e.vblock) == *addr);
            // What the pass will write: the moved blocks, the metadata
            // blocks rewritten in place of moved ones, the DAT journal
            // records of the moved entries, usage and checkpoint blocks.
            // It must fit in the room cleaning may use, and free clearly
            // more than it writes (MIN_NET_SHARE), or cleaning would eat
            // the reserve: a pass that nets a few blocks, by an estimate,
            // can lose them.
            let moved = moving.len() as u64;
            let bps = u64::from(sb.blocks_per_segment);
            let dat_blocks = st.dat.cost_of_changes(moved);
            // A log's summary per segment the cleaner's logs enter.
            let heads = 1 + u64::from(!warm.is_empty() || placement.warm_young);
            let summaries = crate::format::LogHeader::summary_blocks_for(moved as usize, bs) as u64
                + moved.div_ceil(crate::log::layout::payload_per_segment(bs, bps))
                + heads;
            // Usage blocks of the victims, and of the segments the
            // cleaner's logs and the checkpoint enter.
            let su_blocks = cleaned
                .iter()
                .map(|&s| st.segs.block_of(s))
                .collect::<HashSet<_>>()
                .len() as u64
                + 1
                + heads;
            let cost =
                moved + meta.len() as u64 + dat_blocks + summaries + su_blocks + PASS_FIXED_BLOCKS;
            let gain = cleaned.len() as u64 * bps;
            let room = st.avail_for_cleaning();
            let margin = (gain / MIN_NET_SHARE).max(MIN_NET_BLOCKS);
            if cost > room || cost + margin > gain {
                log::debug!(
                    "cleaning {cleaned:?} refused: about {cost} blocks to write ({moved} moved, {} \
                     metadata, {dat_blocks} DAT) to free {gain}, {room} left for cleaning ({} \
                     clean, {} freed pending, {} dirty)",
                    meta.len(),
                    st.segs.nclean(),
                    st.segs.npending(),
                    st.dirty_blocks
                );
                return Err(Error::Again(format!(
                    "cleaning segments {cleaned:?} would write about {cost} blocks to free \
                     {gain}, with {room} left for cleaning; clean fewer or emptier segments"
                )));
            }
            // Metadata blocks: rewritten by the next checkpoint.
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
            for (addr, e, data) in moving {
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
            report.blocks_moved += meta.len() as u64;
            st.mods += 1;
            st.mods
        };
        self.pass_pi.relax();
        let meta = meta.len() as u64;

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
            report.segments_freed = cleaned
                .iter()
                .filter(|&&s| st.segs.get(s).is_clean())
                .count() as u64;
        }
        Stats::add(&self.stats.gc_passes, 1);
        Stats::add(&self.stats.gc_blocks_moved, report.blocks_moved);
        if !damaged_victims.is_empty() {
            log::warn!(
                "segment(s) {damaged_victims:?} skipped: live blocks in logs that fail their checksum"
            );
        }
        log::info!(
            "cleaned {} segment(s): {} freed, {} blocks moved, {} bytes written, {} checkpoint(s) deleted",
            cleaned.len(),
            report.segments_freed,
            report.blocks_moved,
            report.bytes_written,
            report.checkpoints_deleted
        );
        Ok(report)
    }
}
