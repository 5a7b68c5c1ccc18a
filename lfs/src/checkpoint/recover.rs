//! Mount-time recovery: find the last checkpoint and load the state.
//!
//! From the current superblock's cursor, logs are followed in increasing
//! sequence order: end to end inside a segment, then to the segment named
//! by the logs' next-segment field. The last valid log that ends in a
//! super root is the checkpoint; logs after it (a checkpoint that was
//! being written when the system stopped) are discarded. They may be
//! overwritten at once: every log written afterwards has a higher sequence
//! number, so a leftover never continues a chain (lfs(5)).

use std::sync::Arc;

use crate::blockdev::BlockDevice;
use crate::checkpoint::dsync::{decode_inode_block, RolledForward, SyncLog};
use crate::checkpoint::history::History;
use crate::format::{
    BlockKind, CheckpointEntry, CpFileHeader, DecodeError, LogHeader, LogSummary, MetaKind,
    SuperRoot, Superblock, FEATURE_INCOMPAT_DATA_SYNC, FEATURE_INCOMPAT_DAT_JOURNAL,
    LOG_FLAG_DATA_SYNC, LOG_FLAG_SYNC_END,
};
use crate::fs::bmap::BlockMap;
use crate::fs::state::{read_block, Loaded, State};
use crate::inspect::read_superblocks;
use crate::log::dat::Dat;
use crate::log::layout::{Head, MIN_LOG_BLOCKS};
use crate::log::segments::Segments;
use crate::{Error, Result};

/// What recovery found, for the mount's log line.
#[derive(Debug, Clone)]
pub struct RecoveryReport {
    /// Checkpoint mounted.
    pub cno: u64,
    /// Valid logs read from the cursor on.
    pub logs_scanned: usize,
    /// Logs after the checkpoint that were discarded.
    pub logs_discarded: usize,
    /// Data-sync logs after the checkpoint that were rolled forward.
    pub rolled_forward: RolledForward,
    /// Whether the filesystem had been unmounted cleanly.
    pub was_clean: bool,
    /// With [`Target::Intact`]: the checkpoint the superblock names, when
    /// it was not found intact and `cno`, an older one, was loaded.
    pub damaged: Option<u64>,
}

/// Which checkpoint recovery loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The one the superblock names, or a later one: never an older one
    /// (a damaged last checkpoint is an error). What a mount does.
    Latest,
    /// The newest checkpoint found intact on the log chain, older than the
    /// one the superblock names if that one is damaged: for a read-only
    /// look at an older checkpoint and for a rollback (`rollback.rs`).
    Intact,
}

struct Found {
    block: u64,
    header: LogHeader,
    super_root: Option<SuperRoot>,
    /// For a data-sync log: what roll-forward needs of it.
    sync: Option<SyncLog>,
}

/// Why a block does not start a usable log.
enum Rejected {
    /// The device failed to read it.
    Io(Error),
    /// It does not decode or verify.
    Bad(DecodeError),
}

impl From<Error> for Rejected {
    fn from(e: Error) -> Self {
        Rejected::Io(e)
    }
}

impl From<DecodeError> for Rejected {
    fn from(e: DecodeError) -> Self {
        Rejected::Bad(e)
    }
}

fn read_log(dev: &dyn BlockDevice, sb: &Superblock, block: u64) -> Result<Found, Rejected> {
    let bs = sb.block_size as usize;
    let invalid = |field, value| DecodeError::InvalidField {
        what: "log",
        field,
        value,
    };
    let seg = sb.segment_of(block).ok_or(invalid("block", block))?;
    let seg_end = sb.segment_start(seg) + u64::from(sb.blocks_per_segment);
    let first = read_block(dev, block, bs)?;
    let header = LogHeader::decode_unverified(&first)?;
    if block + u64::from(header.nblocks) > seg_end {
        return Err(invalid("block count", header.nblocks.into()).into());
    }
    let mut sum = first;
    for b in 1..u64::from(header.nsummary_blocks) {
        sum.extend(read_block(dev, block + b, bs)?);
    }
    let summary = LogSummary::decode(&sum, bs, sb.crc_seed)?;
    let nbody = u64::from(header.nblocks - header.nsummary_blocks);
    let start = block + u64::from(header.nsummary_blocks);
    let body: Vec<Vec<u8>> = (0..nbody)
        .map(|i| read_block(dev, start + i, bs))
        .collect::<Result<_>>()?;
    let refs: Vec<&[u8]> = body.iter().map(|b| b.as_slice()).collect();
    summary.verify_body(sb.crc_seed, &refs)?;
    let super_root = if header.has_super_root() {
        let last = body
            .last()
            .ok_or(invalid("block count", header.nblocks.into()))?;
        let sr = SuperRoot::decode(last, sb.crc_seed)?;
        if sr.seq != header.seq {
            return Err(invalid("super root sequence", sr.seq).into());
        }
        if sr.cno != header.cno {
            return Err(invalid("super root checkpoint", sr.cno).into());
        }
        Some(sr)
    } else {
        None
    };
    let sync = if header.flags & LOG_FLAG_DATA_SYNC != 0 {
        let inodes = summary
            .entries
            .iter()
            .zip(&body)
            .filter(|(e, _)| e.kind == BlockKind::Inode)
            .map(|(_, b)| decode_inode_block(b))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Some(SyncLog {
            block,
            header,
            entries: summary.entries,
            inodes,
        })
    } else {
        None
    };
    Ok(Found {
        block,
        header,
        super_root,
        sync,
    })
}

/// The error for a superblock whose checkpoint was not found: its log, at
/// the superblock's cursor, was written and flushed before the superblock
/// named it, and its segment is not reused until a later superblock names
/// a later checkpoint (`Fs::release_freed`), so only damage (or a device
/// that lost flushed writes) makes recovery fall back to an older one.
fn missing_checkpoint(dev: &dyn BlockDevice, sb: &Superblock, found: Option<u64>) -> Error {
    let at = sb.last_log_block;
    let source = match read_log(dev, sb, at) {
        Err(Rejected::Io(e)) => return e,
        Err(Rejected::Bad(d)) => d,
        Ok(l) if l.header.seq != sb.last_seq => DecodeError::InvalidField {
            what: "log",
            field: "sequence",
            value: l.header.seq,
        },
        Ok(l) => DecodeError::InvalidField {
            what: "log",
            field: "checkpoint",
            value: l.header.cno,
        },
    };
    Error::Corrupted {
        what: "checkpoint log",
        location: format!(
            "block {at}, where the superblock names checkpoint {}{}",
            sb.last_cno,
            found.map_or(String::new(), |c| format!(
                " (only checkpoint {c} was found)"
            ))
        ),
        reason: source,
    }
}

/// Follows the log chain from `start` (whose sequence must be `seq`). A
/// block that does not hold a valid log ends the chain; a read the device
/// fails is an error, never the end of the chain: taking it for one
/// would mount an older checkpoint and write over the logs after it.
fn scan(dev: &dyn BlockDevice, sb: &Superblock, start: u64, seq: u64) -> Result<Vec<Found>> {
    let mut logs: Vec<Found> = Vec::new();
    let mut pos = start;
    let mut min_seq = seq;
    let mut jumped_for = None;
    let limit = sb.nsegments * u64::from(sb.blocks_per_segment);
    for _ in 0..limit {
        let found = match read_log(dev, sb, pos) {
            Ok(l) => Some(l),
            Err(Rejected::Io(e)) => return Err(e),
            Err(Rejected::Bad(_)) => None,
        };
        let ok = found.filter(|l| {
            if logs.is_empty() {
                l.header.seq == seq
            } else {
                l.header.seq >= min_seq
            }
        });
        match ok {
            Some(l) => {
                min_seq = l.header.seq + 1;
                pos = l.block + u64::from(l.header.nblocks);
                let seg = sb.segment_of(l.block).unwrap_or(0);
                if pos >= sb.segment_start(seg) + u64::from(sb.blocks_per_segment) {
                    pos = sb.segment_start(l.header.next_segment);
                }
                logs.push(l);
            }
            None => {
                // The writer leaves a segment early only when fewer than
                // MIN_LOG_BLOCKS remain; only then continue in the segment
                // it named next. Anywhere else a missing log ends the
                // chain, even if later logs of the same checkpoint landed.
                let Some(last) = logs.last() else { break };
                let seg = sb.segment_of(pos).unwrap_or(0);
                let seg_end = sb.segment_start(seg) + u64::from(sb.blocks_per_segment);
                let np = sb.segment_start(last.header.next_segment);
                if pos + MIN_LOG_BLOCKS <= seg_end
                    || np == pos
                    || jumped_for == Some(pos)
                    || last.header.next_segment >= sb.nsegments
                {
                    break;
                }
                jumped_for = Some(np);
                pos = np;
            }
        }
    }
    Ok(logs)
}

impl State {
    /// Recovers the filesystem on `dev` and returns its state. With
    /// `read_only` false, also marks the superblock dirty (mounted).
    pub fn recover(dev: Arc<dyn BlockDevice>, read_only: bool) -> Result<(State, RecoveryReport)> {
        Self::recover_to(dev, read_only, Target::Latest)
    }

    /// [`State::recover`] of the checkpoint `target` says.
    pub fn recover_to(
        dev: Arc<dyn BlockDevice>,
        read_only: bool,
        target: Target,
    ) -> Result<(State, RecoveryReport)> {
        let pair = read_superblocks(dev.as_ref())?;
        let Some(sb) = pair.current().cloned() else {
            return Err(Error::Unsupported(format!(
                "no valid lfs superblock (primary: {}; secondary: {})",
                reason(&pair.primary),
                reason(&pair.secondary)
            )));
        };
        for (copy, r) in [("primary", &pair.primary), ("secondary", &pair.secondary)] {
            if let Err(e) = r {
                log::warn!("{copy} superblock unusable ({e}): using the other copy");
            }
        }
        if sb.read_only_only() && !read_only {
            return Err(Error::ReadOnly(format!(
                ": unknown ro-compat features {:#x}; mount read-only",
                sb.feature_ro_compat & !crate::format::FEATURE_RO_COMPAT_KNOWN
            )));
        }
        let mut logs = scan(dev.as_ref(), &sb, sb.last_log_block, sb.last_seq)?;
        if logs.first().is_none_or(|l| l.super_root.is_none()) {
            // The cursor's log is gone: try the other copy's cursor.
            let other = [&pair.primary, &pair.secondary]
                .into_iter()
                .filter_map(|r| r.as_ref().ok())
                .find(|o| o.last_log_block != sb.last_log_block);
            if let Some(o) = other {
                logs = scan(dev.as_ref(), &sb, o.last_log_block, o.last_seq)?;
            }
        }
        // Never silently older than the checkpoint the superblock names:
        // only when asked for the intact one.
        let last_sr = match logs.iter().rposition(|l| l.super_root.is_some()) {
            Some(i) if logs[i].header.cno >= sb.last_cno || target == Target::Intact => i,
            found => {
                let found = found.map(|i| logs[i].header.cno);
                return Err(missing_checkpoint(dev.as_ref(), &sb, found));
            }
        };
        let max_seq = logs
            .iter()
            .map(|l| l.header.seq)
            .max()
            .unwrap_or(sb.last_seq);
        let l = &logs[last_sr];
        let sr = l.super_root.clone().expect("found above");
        // Complete data-sync writes after the checkpoint: logs of the next
        // checkpoint's number, each write up to its SYNC_END log. Anything
        // else (the start of a checkpoint that did not finish, a write
        // whose last log is missing) ends them.
        let mut sync_logs = Vec::new();
        let mut write = Vec::new();
        for f in &logs[last_sr + 1..] {
            match &f.sync {
                Some(s) if f.header.cno == sr.cno + 1 && !f.header.has_super_root() => {
                    write.push(s.clone());
                    if f.header.flags & LOG_FLAG_SYNC_END != 0 {
                        sync_logs.append(&mut write);
                    }
                }
                _ => break,
            }
        }
        let named = sb.last_cno;
        let mut st = load(dev, sb, &sr)?;
        st.seq = next_seq(max_seq, st.sb.seq_floor, st.sb.total_blocks);
        st.sb.seq_floor = st.seq;
        let seg = st.sb.segment_of(l.block).unwrap_or(0);
        st.head = Head {
            seg,
            block: l.block + u64::from(l.header.nblocks),
            next_seg: l.header.next_segment,
        };
        let now = now_secs();
        let rolled_forward = st.roll_forward(&sync_logs, now)?;
        let report = RecoveryReport {
            cno: sr.cno,
            logs_scanned: logs.len(),
            logs_discarded: logs.len() - last_sr - 1 - rolled_forward.logs,
            rolled_forward,
            was_clean: st.sb.state == crate::format::FsState::Clean,
            damaged: (sr.cno < named).then_some(named),
        };
        if st.segs.get(st.head.next_seg).is_clean() {
            st.segs.take(st.head.next_seg, now);
        }
        // The cold log head of the last mount is not resumed: its
        // segments stop being heads (and become cleanable).
        for s in 0..st.segs.len() {
            let active = st.segs.get(s).flags & crate::format::SU_FLAG_ACTIVE != 0;
            if active && s != st.head.seg && s != st.head.next_seg {
                st.segs.deactivate(s);
            }
        }
        st.sb.last_log_block = l.block;
        st.sb.last_seq = l.header.seq;
        st.sb.last_cno = sr.cno;
        st.sb_gens = [
            pair.primary.as_ref().map_or(0, |s| s.generation),
            pair.secondary.as_ref().map_or(0, |s| s.generation),
        ];
        if !read_only {
            st.sb.state = crate::format::FsState::Dirty;
            st.sb.mount_count += 1;
            // A 1.0 or 1.1 filesystem becomes 1.2 here: from now on it may
            // hold data-sync logs and a DAT journal, which older builds
            // must not mount.
            let want = FEATURE_INCOMPAT_DATA_SYNC | FEATURE_INCOMPAT_DAT_JOURNAL;
            if st.sb.feature_incompat & want != want {
                log::info!(
                    "filesystem upgraded to format 1.{} (data-sync logs, DAT journal)",
                    crate::format::FORMAT_VERSION_MINOR
                );
                st.sb.feature_incompat |= want;
                st.sb.version_minor = st.sb.version_minor.max(crate::format::FORMAT_VERSION_MINOR);
            }
            st.write_superblock(now)?;
        }
        Ok((st, report))
    }

    /// Writes the superblock (cursor, state) to the older copy and flushes.
    pub fn write_superblock(&mut self, now: u64) -> Result<()> {
        let w = self.prepare_superblock(now);
        w.write(self.dev.as_ref())?;
        self.superblock_written(&w);
        Ok(())
    }

    /// The superblock write [`Self::write_superblock`] does, prepared so
    /// that the caller can do the I/O without the state lock (under the
    /// checkpoint lock, which every superblock write holds): a flush can
    /// take long, and every writer would wait behind it.
    pub(crate) fn prepare_superblock(&mut self, now: u64) -> SuperblockWrite {
        let gen = self.sb_gens[0].max(self.sb_gens[1]) + 1;
        self.sb.generation = gen;
        self.sb.wtime = now;
        let bs = u64::from(self.sb.block_size);
        let (idx, block) = match self.next_sb_copy() {
            crate::inspect::SbCopy::Primary => (0, 0),
            crate::inspect::SbCopy::Secondary => (1, self.sb.secondary_block()),
        };
        SuperblockWrite {
            bytes: self.sb.encode(),
            offset: block * bs,
            block,
            copy: idx,
            generation: gen,
            cno: self.sb.last_cno,
        }
    }

    /// Records a superblock write that succeeded.
    pub(crate) fn superblock_written(&mut self, w: &SuperblockWrite) {
        self.sb_gens[w.copy] = w.generation;
        self.sb_written_cno = w.cno;
    }
}

/// One superblock copy to write, and what it records.
#[derive(Debug)]
pub(crate) struct SuperblockWrite {
    bytes: Vec<u8>,
    offset: u64,
    block: u64,
    copy: usize,
    generation: u64,
    cno: u64,
}

impl SuperblockWrite {
    /// Writes the copy and flushes.
    pub(crate) fn write(&self, dev: &dyn BlockDevice) -> Result<()> {
        let at = self.block;
        dev.write_all_at(&self.bytes, self.offset)
            .map_err(|e| Error::io(format!("writing the superblock at block {at}"), e))?;
        dev.flush()
            .map_err(|e| Error::io(format!("flushing the superblock at block {at}"), e))
    }
}

fn reason(r: &std::result::Result<Superblock, crate::format::DecodeError>) -> String {
    match r {
        Ok(_) => "valid".into(),
        Err(e) => e.to_string(),
    }
}

/// The first sequence number a mount gives its logs, above every log a
/// crash may have left beyond the chain, so that the scan (which needs
/// increasing sequence numbers) never continues into one: `max_seen` is the
/// highest the scan found, `floor` the first one the last read-write mount
/// used (the superblock records it before that mount writes a log), and
/// `total_blocks` bounds how many logs can lie on the device unfinished.
///
/// A leftover was written after the last checkpoint that became durable:
/// if that mount made one durable, the leftover lies within `total_blocks`
/// of it, so of `max_seen`; if it made none, it lies within `total_blocks`
/// of that mount's `floor`. Counting from `max_seen` alone (as before the
/// floor) gave a mount that crashed before its first checkpoint the same
/// numbers as the next mount: the model test found the next mount's chain
/// continuing into the crashed one's super root.
pub(crate) fn next_seq(max_seen: u64, floor: u64, total_blocks: u64) -> u64 {
    max_seen
        .max(floor)
        .saturating_add(total_blocks)
        .saturating_add(1)
}

/// Seconds since the epoch.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Loads the state of checkpoint `sr`.
fn load(dev: Arc<dyn BlockDevice>, sb: Superblock, sr: &SuperRoot) -> Result<State> {
    let bs = sb.block_size as usize;
    let seed = sb.crc_seed;
    let read_meta = |p: u64, kind: MetaKind| -> Result<Vec<u8>> {
        let b = read_block(dev.as_ref(), p, bs)?;
        crate::format::MetaBlockHeader::verify(&b, kind, seed).map_err(|source| {
            Error::Corrupted {
                what: "metadata block",
                location: format!("block {p}"),
                reason: source,
            }
        })?;
        Ok(b)
    };
    let load_map = |inode: &crate::format::Inode| {
        BlockMap::load(bs, &inode.bmap, &mut |p| read_meta(p, MetaKind::Node))
    };
    let file_blocks = |map: &BlockMap, n: u64, kind| -> Result<Vec<Option<Vec<u8>>>> {
        (0..n)
            .map(|b| match map.get(b) {
                0 => Ok(None),
                p => read_meta(p, kind).map(Some),
            })
            .collect()
    };
    let dat_map = load_map(&sr.dat)?;
    let dat_slots = sr.dat.size / MetaKind::Dat.record_size() as u64;
    let per_dat = MetaKind::Dat.per_block(bs) as u64;
    let dat_blocks = file_blocks(&dat_map, dat_slots.div_ceil(per_dat), MetaKind::Dat)?;
    // The journal's records override the DAT's blocks (format 1.2; an
    // older super root has none). It has no holes.
    let datj_map = BlockMap::load(bs, &sr.dat_journal.bmap, &mut |p| {
        read_meta(p, MetaKind::Node)
    })?;
    let nrecords = sr.dat_journal.records;
    let per_rec = MetaKind::DatJournal.per_block(bs) as u64;
    let journal = (0..nrecords.div_ceil(per_rec))
        .map(|b| match datj_map.get(b) {
            0 => Err(Error::Corrupted {
                what: "DAT journal",
                location: format!("checkpoint {}", sr.cno),
                reason: DecodeError::InvalidField {
                    what: "DAT journal",
                    field: "missing block",
                    value: b,
                },
            }),
            p => read_meta(p, MetaKind::DatJournal),
        })
        .collect::<Result<Vec<_>>>()?;
    let dat = Dat::load(&dat_blocks, dat_slots, &journal, nrecords, bs, seed)?;
    let su_map = load_map(&sr.sufile)?;
    let per_su = MetaKind::Sufile.per_block(bs) as u64;
    let su_blocks = file_blocks(
        &su_map,
        (sb.nsegments + 1).div_ceil(per_su),
        MetaKind::Sufile,
    )?;
    let segs = Segments::load(&su_blocks, sb.nsegments, bs, seed)?;
    let cp_map = load_map(&sr.cpfile)?;
    let cp_rec = |slot: u64| -> Result<Vec<u8>> {
        let (b, off) = MetaKind::Cpfile.locate(slot, bs);
        let blk = read_meta(cp_map.get(b), MetaKind::Cpfile)?;
        Ok(blk[off..off + MetaKind::Cpfile.record_size()].to_vec())
    };
    let corrupt = |what: &'static str| {
        move |source| Error::Corrupted {
            what,
            location: format!("checkpoint {}", sr.cno),
            reason: source,
        }
    };
    let cp_header = CpFileHeader::decode(&cp_rec(0)?).map_err(corrupt("checkpoint file header"))?;
    let entry = CheckpointEntry::decode(&cp_rec(sr.cno)?).map_err(corrupt("checkpoint entry"))?;
    let history = load_history(&cp_map, sr.cno, bs, &read_meta)?;
    let (last_b, _) = MetaKind::Cpfile.locate(sr.cno, bs);
    let cp_last_block = Some((last_b, read_meta(cp_map.get(last_b), MetaKind::Cpfile)?));
    let ifile = entry.ifile.clone();
    let mut st = State::from_loaded(Loaded {
        dev,
        sb,
        cno: sr.cno,
        dat,
        dat_map,
        datj_map,
        segs,
        su_map,
        cp_header,
        cp_map,
        cp_last_block,
        ifile: ifile.clone(),
        history,
        inodes_count: entry.inodes_count,
        nongc_ctime_ns: sr.nongc_ctime_ns,
        last_ctime_ns: sr.ctime_ns,
    });
    st.ifile_map = st.load_bmap(&ifile)?;
    Ok(st)
}

/// The valid checkpoints up to `last`, from every block of the checkpoint
/// file (holes hold none).
fn load_history(
    cp_map: &BlockMap,
    last: u64,
    bs: usize,
    read_meta: &dyn Fn(u64, MetaKind) -> Result<Vec<u8>>,
) -> Result<History> {
    let per = MetaKind::Cpfile.per_block(bs) as u64;
    let rs = MetaKind::Cpfile.record_size();
    let mut entries = Vec::new();
    for b in 0..=last / per {
        let a = cp_map.get(b);
        if a == 0 {
            continue;
        }
        let blk = read_meta(a, MetaKind::Cpfile)?;
        for slot in (b * per).max(1)..((b + 1) * per).min(last + 1) {
            let (_, off) = MetaKind::Cpfile.locate(slot, bs);
            if blk[off..off + 8] != slot.to_le_bytes() {
                continue;
            }
            let e = CheckpointEntry::decode(&blk[off..off + rs]).map_err(|source| {
                Error::Corrupted {
                    what: "checkpoint entry",
                    location: format!("checkpoint {slot} (checkpoint file block {b})"),
                    reason: source,
                }
            })?;
            if e.cno == slot {
                entries.push(e);
            }
        }
    }
    Ok(History::from_entries(entries))
}
