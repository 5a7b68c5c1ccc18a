//! Data-sync logs: what fdatasync writes instead of a checkpoint, and how
//! recovery rolls them forward (lfs(5), COMMIT PROTOCOL and RECOVERY).
//!
//! fdatasync of a file whose only changes since the last checkpoint are
//! its data, size and times writes the file's dirty blocks and then its
//! inode record as one or more logs at the log head, flagged DATA_SYNC,
//! the last one also SYNC_END, and flushes: the data plus a summary and
//! an inode block, where a checkpoint would also write DAT, inode file,
//! indirect, checkpoint file and usage blocks and a super root. In memory
//! the blocks are placed as a checkpoint would place them (new virtual
//! blocks whose DAT entries are live from the next checkpoint, block map
//! entries, live counts), so the next checkpoint writes only their
//! metadata. Concurrent fdatasyncs share one write (group commit).
//!
//! Recovery replays, on the loaded checkpoint, every complete write found
//! after its super root (logs up to one flagged SYNC_END, all carrying the
//! next checkpoint's number), exactly as it was done in memory.
//!
//! Invariants that make the replay land on the same state:
//! * a file is eligible only if it existed at the last checkpoint and
//!   nothing but data, size and times changed since (`State::meta_dirty`):
//!   the logged inode record carries everything else there is to apply;
//! * the virtual numbers a data-sync log uses were free at the last
//!   checkpoint and none is reused before the next one (freed numbers wait
//!   in the DAT's pending list), so each log finds its numbers free;
//! * a block placed by a data-sync log and overwritten before the next
//!   checkpoint is dead at once (`Dat::retire`): no checkpoint sees it;
//! * the segments data-sync logs fill are never reused before the next
//!   checkpoint is durable, like any segment written after the last one.

use std::sync::Arc;

use crate::checkpoint::build::{build_runs, Payload, Run};
use crate::format::{
    BlockEntry, BlockKind, Inode, LogHeader, Writer, LOG_FLAG_DATA_SYNC, LOG_FLAG_SYNC_END,
};
use crate::fs::state::{State, S_IFREG};
use crate::log::layout;
use crate::{Error, Result};

/// Whether a data-sync log can carry the change from `old` to `new` of one
/// inode record: only size, times and the block count differ.
pub(crate) fn carries(old: &Inode, new: &Inode) -> bool {
    if old.is_free() {
        return false;
    }
    let mut o = old.clone();
    o.size = new.size;
    o.blocks = new.blocks;
    o.atime = new.atime;
    o.mtime = new.mtime;
    o.ctime = new.ctime;
    o.nsec[..3].copy_from_slice(&new.nsec[..3]);
    o == *new
}

/// What an fdatasync of one file needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileSync {
    /// Nothing of the file is waiting to be made durable.
    Nothing,
    /// Its changes fit a data-sync log.
    DataSync,
    /// Only a checkpoint makes its changes durable.
    Checkpoint,
}

/// A built data-sync write.
#[derive(Debug)]
pub(crate) struct SyncPlan {
    /// Writes, in order.
    pub runs: Vec<Run>,
    /// Its blocks, by what they are.
    pub written: crate::stats::Written,
    /// The files it covers.
    pub inos: Vec<u64>,
    /// The addresses readers find in `State::inflight` until written.
    pub inflight: Vec<u64>,
    /// First block written, for messages.
    pub first_block: u64,
}

/// One log of a data-sync write, as recovery read it.
#[derive(Debug, Clone)]
pub(crate) struct SyncLog {
    /// Its first block.
    pub block: u64,
    /// Its header.
    pub header: LogHeader,
    /// Its payload entries.
    pub entries: Vec<BlockEntry>,
    /// The inode records of its `BlockKind::Inode` entries, in order.
    pub inodes: Vec<Inode>,
}

/// What roll-forward applied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RolledForward {
    /// Data-sync logs replayed.
    pub logs: usize,
    /// File data blocks they placed.
    pub blocks: u64,
    /// Inode records they applied.
    pub files: u64,
}

/// Encodes `i` as the payload block of an `Inode` entry.
fn inode_block(i: &Inode, bs: usize) -> Vec<u8> {
    let mut w = Writer::with_capacity(bs);
    i.encode_into(&mut w);
    w.zeros(bs - w.len());
    w.into_vec()
}

/// Decodes the inode record at the start of a payload block.
pub(crate) fn decode_inode_block(
    b: &[u8],
) -> std::result::Result<Inode, crate::format::DecodeError> {
    Inode::decode(b.get(..crate::format::INODE_SIZE).unwrap_or(b))
}

impl State {
    /// What an fdatasync of `ino` needs now (with no checkpoint or
    /// data-sync write in flight: the caller holds the checkpoint lock).
    pub(crate) fn file_sync(&mut self, ino: u64) -> Result<FileSync> {
        let i = self.inode(ino)?;
        let node = self.nodes.get(&ino);
        // Directories, symlinks and special files, and files with more
        // than data changed: only a checkpoint (which returns at once if
        // nothing changed at all).
        if i.mode & 0o170000 != S_IFREG
            || self.meta_dirty.contains(&ino)
            || node.is_some_and(|n| n.xattr_dirty)
        {
            return Ok(FileSync::Checkpoint);
        }
        let data = node.is_some_and(|n| !n.dirty.is_empty());
        Ok(if data || self.dsync_dirty.contains(&ino) {
            FileSync::DataSync
        } else {
            FileSync::Nothing
        })
    }

    /// Builds one data-sync write covering `inos` (each `FileSync::DataSync`)
    /// and places its blocks, as `build_checkpoint` does; `None` (and
    /// nothing changed) if the log head cannot take it, for the caller to
    /// write a checkpoint instead.
    pub(crate) fn build_data_sync(
        &mut self,
        inos: &[u64],
        now_ns: u64,
    ) -> Result<Option<SyncPlan>> {
        let bs = self.bs;
        let bps = u64::from(self.sb.blocks_per_segment);
        // Every inode record is read before anything changes, so that an
        // error leaves the state as it was.
        for &ino in inos {
            self.inode(ino)?;
        }
        let ndata: u64 = inos
            .iter()
            .map(|i| self.nodes.get(i).map_or(0, |n| n.dirty.len() as u64))
            .sum();
        let n = ndata + inos.len() as u64;
        let clean = self
            .segs
            .peek_clean(layout::segments_needed(n, bs, bps) as usize);
        let sb = self.sb.clone();
        let Some(lay) = layout::plan_logs(
            self.head,
            n,
            false,
            bs,
            |s| sb.segment_start(s),
            bps,
            &clean,
        ) else {
            return Ok(None);
        };
        // The data was booked when written; the summaries and inode blocks
        // were not, and must not come out of the cleaning reserve.
        let extra: u64 = lay.spans.iter().map(|s| s.nsummary).sum::<u64>() + inos.len() as u64;
        if extra > self.avail_blocks() {
            return Ok(None);
        }

        let cno = self.cno + 1;
        let mut payload = Vec::with_capacity(n as usize);
        let mut records = Vec::with_capacity(inos.len());
        for &ino in inos {
            // A file with only its size or times changed has no node.
            let Some(mut node) = self.nodes.remove(&ino) else {
                records.push(self.inode_record(ino)?);
                continue;
            };
            for (off, blk) in std::mem::take(&mut node.dirty) {
                let v = self.dat.alloc();
                let old = node.bmap.set(off, v);
                self.retire(old);
                payload.push(Payload {
                    entry: BlockEntry {
                        ino,
                        offset: off,
                        vblock: v,
                        kind: BlockKind::Data,
                    },
                    data: Arc::new(blk),
                });
            }
            self.nodes.insert(ino, node);
            records.push(self.inode_record(ino)?);
        }
        // Inode records last: they end in the SYNC_END log.
        payload.extend(records);

        let now_s = now_ns / 1_000_000_000;
        self.book_layout(&lay, &[], self.seq, now_s);
        let addrs = lay
            .spans
            .iter()
            .flat_map(|s| (0..s.nentries).map(move |i| s.payload_addr(i)));
        for (pl, a) in payload.iter().zip(addrs) {
            if pl.entry.kind != BlockKind::Data {
                continue;
            }
            self.dat.assign(pl.entry.vblock, a, cno);
            if let Some(s) = self.seg_of(a) {
                self.segs.add_live(s, 1);
            }
        }
        let (runs, _) = build_runs(
            &lay,
            &payload,
            Arc::new(Vec::new()),
            self.seq,
            now_ns,
            cno,
            bs,
            LOG_FLAG_DATA_SYNC,
            LOG_FLAG_SYNC_END,
        );
        let inflight = self.hold_in_flight(&runs);
        self.seq += lay.spans.len() as u64;
        self.head = lay.head;
        self.dirty_blocks = self.dirty_blocks.saturating_sub(ndata);
        self.dsync_placed += ndata;
        let first_block = runs.first().map_or(0, |r| r.block);
        Ok(Some(SyncPlan {
            runs,
            written: crate::stats::Written {
                data: ndata,
                ifile: inos.len() as u64,
                summary: lay.spans.iter().map(|s| s.nsummary).sum(),
                ..Default::default()
            },
            inos: inos.to_vec(),
            inflight,
            first_block,
        }))
    }

    /// The `Inode` payload of `ino` for a data-sync log; its size and times
    /// are then covered.
    fn inode_record(&mut self, ino: u64) -> Result<Payload> {
        let i = self.inode(ino)?;
        self.dsync_dirty.remove(&ino);
        Ok(Payload {
            entry: BlockEntry {
                ino,
                offset: 0,
                vblock: 0,
                kind: BlockKind::Inode,
            },
            data: Arc::new(inode_block(&i, self.bs)),
        })
    }

    /// Replays complete data-sync writes found after the loaded
    /// checkpoint (`logs` in chain order, each write ending in a SYNC_END
    /// log), moving the log head past them.
    pub(crate) fn roll_forward(&mut self, logs: &[SyncLog], now_s: u64) -> Result<RolledForward> {
        let mut done = RolledForward::default();
        let cno = self.cno + 1;
        for log in logs {
            let seg = self
                .seg_of(log.block)
                .ok_or_else(|| bad(log, 0, "block", log.block, "outside the segments"))?;
            if self.segs.get(seg).is_clean() {
                self.segs.take(seg, now_s);
            }
            self.segs
                .written(seg, log.header.nblocks, log.header.seq, now_s);
            let first = log.block + u64::from(log.header.nsummary_blocks);
            let mut records = log.inodes.iter();
            for (k, e) in log.entries.iter().enumerate() {
                let addr = first + k as u64;
                match e.kind {
                    BlockKind::Data => {
                        let i = self
                            .inode(e.ino)
                            .map_err(|_| bad(log, k, "inode", e.ino, "a free inode"))?;
                        if i.mode & 0o170000 != S_IFREG {
                            return Err(bad(log, k, "inode", e.ino, "not a regular file"));
                        }
                        if !self.dat.claim(e.vblock) {
                            return Err(bad(log, k, "virtual block", e.vblock, "already in use"));
                        }
                        self.dat.assign(e.vblock, addr, cno);
                        self.segs.add_live(seg, 1);
                        let old = self.node(e.ino)?.bmap.set(e.offset, e.vblock);
                        self.retire(old);
                        self.dsync_placed += 1;
                        done.blocks += 1;
                    }
                    BlockKind::Inode => {
                        let rec = records
                            .next()
                            .ok_or_else(|| bad(log, k, "inode", e.ino, "no inode record"))?;
                        let mut i = self
                            .inode(e.ino)
                            .map_err(|_| bad(log, k, "inode", e.ino, "a free inode"))?;
                        let logged = Inode {
                            blocks: i.blocks,
                            bmap: i.bmap,
                            xattr_block: i.xattr_block,
                            ..rec.clone()
                        };
                        if rec.ino != e.ino || !carries(&i, &logged) {
                            return Err(bad(
                                log,
                                k,
                                "inode",
                                e.ino,
                                "record does not match the inode",
                            ));
                        }
                        i.size = rec.size;
                        i.atime = rec.atime;
                        i.mtime = rec.mtime;
                        i.ctime = rec.ctime;
                        i.nsec[..3].copy_from_slice(&rec.nsec[..3]);
                        self.put_inode(i)?;
                        done.files += 1;
                    }
                    other => {
                        return Err(bad(
                            log,
                            k,
                            "kind",
                            other.to_raw().into(),
                            "not file data or an inode record",
                        ))
                    }
                }
            }
            self.head = crate::log::layout::Head {
                seg,
                block: log.block + u64::from(log.header.nblocks),
                next_seg: log.header.next_segment,
            };
            done.logs += 1;
        }
        Ok(done)
    }
}

/// The error for entry `k` of a data-sync log that recovery cannot
/// apply: `why`, with the field and value at fault.
fn bad(log: &SyncLog, k: usize, field: &'static str, value: u64, why: &str) -> Error {
    Error::Corrupted {
        what: "data-sync log",
        location: format!(
            "block {}, sequence {}, entry {k} ({why})",
            log.block, log.header.seq
        ),
        reason: crate::format::DecodeError::InvalidField {
            what: "data-sync log entry",
            field,
            value,
        },
    }
}
