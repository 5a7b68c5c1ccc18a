//! Building a checkpoint.
//!
//! Order of the payload in the logs: user file blocks (data, directory,
//! extended attribute and indirect blocks, grouped by inode), inode file
//! blocks, then the physically addressed files (DAT, DAT journal,
//! checkpoint file, segment usage file, each with its indirect blocks),
//! then the super root. The DAT's changes go to its journal, or every
//! stale DAT block is written (a merge; `log::dat`). Virtual blocks are numbered first; the physical layout is then
//! planned, with the set of segment usage blocks grown until it covers
//! every segment the checkpoint touches (it converges in a few rounds).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::format::{
    BlockEntry, BlockKind, CheckpointEntry, CpFileHeader, Inode, JournalRoot, LogHeader,
    LogSummary, MetaBlockHeader, MetaKind, SuperRoot, Writer, CPFILE_INO, CP_FLAG_MINOR,
    CP_FLAG_SNAPSHOT, DATJ_INO, DAT_INO, IFILE_INO, INODE_SIZE, LOG_FLAG_GC, LOG_FLAG_SUPER_ROOT,
    SUFILE_INO,
};
use crate::fs::bmap::{BlockMap, NodeId};
use crate::fs::clean::{GcBlock, COLD_HEAD, LONG_HEAD, WARM_HEAD};
use crate::fs::state::State;
use crate::log::layout::{self, Head, Layout};
use crate::stats::Written;
use crate::{Error, Result};

/// One contiguous write: one log.
#[derive(Debug)]
pub struct Run {
    /// First block address.
    pub block: u64,
    /// The blocks: the payload (and super root) until [`Run::seal`] puts
    /// the summary blocks in front.
    pub blocks: Vec<Arc<Vec<u8>>>,
    /// The log's summary, until sealed.
    summary: Option<LogSummary>,
}

impl Run {
    /// Blocks the log writes, its summary included, sealed or not.
    pub fn nblocks(&self, bs: usize) -> u64 {
        let summary = self
            .summary
            .as_ref()
            .map_or(0, |s| LogHeader::summary_blocks_for(s.entries.len(), bs));
        (self.blocks.len() + summary) as u64
    }

    /// Every block the log writes but its summary, with its address.
    pub fn addressed_blocks(&self, bs: usize) -> impl Iterator<Item = (u64, &Arc<Vec<u8>>)> {
        // Sealed, `blocks` starts with the summary.
        let first = match &self.summary {
            Some(s) => self.block + LogHeader::summary_blocks_for(s.entries.len(), bs) as u64,
            None => self.block,
        };
        self.blocks
            .iter()
            .enumerate()
            .map(move |(i, b)| (first + i as u64, b))
    }

    /// Encodes the summary (checksumming the whole body) in front of the
    /// payload. Done after the state lock is released: the body checksum
    /// reads every byte the log writes.
    pub fn seal(&mut self, bs: usize, seed: u32) {
        let Some(mut summary) = self.summary.take() else {
            return;
        };
        let refs: Vec<&[u8]> = self.blocks.iter().map(|b| b.as_slice()).collect();
        let sum = summary.encode(bs, seed, &refs);
        let mut blocks: Vec<Arc<Vec<u8>>> = sum.chunks(bs).map(|c| Arc::new(c.to_vec())).collect();
        blocks.append(&mut self.blocks);
        self.blocks = blocks;
    }
}

impl Plan {
    /// Seals every run ([`Run::seal`]).
    pub fn seal(&mut self, bs: usize, seed: u32) {
        for r in &mut self.runs {
            r.seal(bs, seed);
        }
    }
}

/// What a built checkpoint needs written, and what to do after.
#[derive(Debug)]
pub struct Plan {
    /// Writes, in order.
    pub runs: Vec<Run>,
    /// How many of `runs`, from the first, are the cold log. Recovery does
    /// not follow the cold log (the DAT points into it), so nothing checks
    /// that it landed: it must be durable before the super root is written
    /// (`Fs::checkpoint_locked` flushes in between).
    pub cold_runs: usize,
    /// The checkpoint number.
    pub cno: u64,
    /// The log holding the super root.
    pub sr_block: u64,
    /// Its sequence number.
    pub sr_seq: u64,
    /// `mods` this checkpoint covers.
    pub mods: u64,
    /// Segments freed by this checkpoint (reusable after the superblock
    /// points at it).
    pub freed: Vec<u64>,
    /// Every block it writes, by what it is.
    pub written: Written,
}

pub(super) struct Payload {
    pub(super) entry: BlockEntry,
    pub(super) data: Arc<Vec<u8>>,
}

fn node_first_offset(map: &BlockMap, id: NodeId, p: u64) -> u64 {
    // The first data offset the node maps, for the summary entry.
    let direct = crate::format::BMAP_DIRECT as u64;
    let base = match id.tree {
        1 => direct,
        2 => direct + p,
        _ => direct + p + p * p,
    };
    let _ = map;
    base + id.index * p.pow(u32::from(id.level))
}

impl State {
    /// True if anything changed since the last checkpoint.
    pub fn needs_checkpoint(&self) -> bool {
        self.mods != self.durable_mods
    }

    /// Builds checkpoint `cno + 1` from every change so far.
    pub fn build_checkpoint(&mut self, now_ns: u64, minor: bool) -> Result<Plan> {
        let new_cno = self.cno + 1;
        let now_s = now_ns / 1_000_000_000;
        let bs = self.bs;
        let seed = self.seed;
        let p = crate::fs::bmap::ptrs_per_node(bs);
        // Free space beyond what this checkpoint is booked for, and what
        // is booked for a due DAT merge: a merge may use that, never the
        // cleaning reserve.
        let room = self.avail_blocks() + self.dat.merge_booking();
        let freed = self.segs.collect_free();
        let mut gc = std::mem::take(&mut self.gc_queue);
        let mut virt: Vec<Payload> = Vec::new();
        // File data whose previous version lived long, when the cleaner
        // asked for writes to be separated (`State::separate_writes`).
        let mut long: Vec<Payload> = Vec::new();
        let mut allocated: Vec<u64> = Vec::new();
        // File data blocks (of regular files and symlinks), for the
        // counters.
        let mut ndata = 0u64;
        self.inflight.clear();
        // Separated writes need the long head: open, or room to open it
        // well clear of the cleaning reserve (two segments), so that a
        // near-full filesystem never fails a checkpoint for it.
        let separate = self.separate_writes
            && (self.gc_heads[LONG_HEAD].is_some()
                || self.segs.nclean() > self.sb.reserved_segments() + LONG_HEAD_SLACK);
        // Every dirty block goes into this checkpoint's logs, with the
        // metadata of those data-sync logs placed.
        self.dirty_blocks = 0;
        self.dsync_placed = 0;

        // 1. User files.
        let mut inos: Vec<u64> = self
            .nodes
            .iter()
            .filter(|(_, n)| {
                !n.dirty.is_empty()
                    || n.bmap.is_dirty()
                    || n.xattr_dirty
                    || n.dir.as_ref().is_some_and(|d| d.is_dirty())
            })
            .map(|(&i, _)| i)
            .collect();
        inos.sort_unstable();
        for ino in inos {
            let mut inode = self.raw_inode(ino)?;
            let mut node = self.nodes.remove(&ino).expect("listed above");
            if let Some(d) = node.dir.as_mut() {
                for (b, blk) in d.take_dirty(seed) {
                    node.dirty.insert(b, blk);
                }
                inode.size = d.nblocks() * bs as u64;
            }
            let is_reg = inode.mode & 0o170000 == crate::fs::state::S_IFREG;
            for (off, blk) in std::mem::take(&mut node.dirty) {
                let v = self.dat.alloc();
                allocated.push(v);
                let old = node.bmap.set(off, v);
                let lived = self.lived(old, new_cno);
                self.retire(old);
                let data = Arc::new(blk);
                if is_reg || inode.mode & 0o170000 == crate::fs::state::S_IFLNK {
                    ndata += 1;
                }
                let to = if is_reg && separate && lived.is_some_and(|l| l as f64 > self.lifespan) {
                    &mut long
                } else {
                    &mut virt
                };
                to.push(Payload {
                    entry: BlockEntry {
                        ino,
                        offset: off,
                        vblock: v,
                        kind: BlockKind::Data,
                    },
                    data,
                });
            }
            if node.xattr_dirty {
                node.xattr_dirty = false;
                let old = inode.xattr_block;
                self.retire(old);
                inode.xattr_block = 0;
                if let Some(x) = node.xattrs.as_ref().filter(|x| !x.is_empty()) {
                    let v = self.dat.alloc();
                    allocated.push(v);
                    inode.xattr_block = v;
                    virt.push(Payload {
                        entry: BlockEntry {
                            ino,
                            offset: 0,
                            vblock: v,
                            kind: BlockKind::Xattr,
                        },
                        data: Arc::new(crate::fs::xattr::encode(x, bs, seed)),
                    });
                }
            }
            self.write_nodes(ino, &mut node.bmap, p, &mut virt, &mut allocated);
            inode.bmap = node.bmap.root();
            // st_blocks counts data blocks only, loaded or not (ops::attr).
            inode.blocks = node.bmap.len() as u64;
            self.nodes.insert(ino, node);
            self.put_inode(inode)?;
        }

        // 2. The inode file.
        let dirty_ifile: Vec<u64> = std::mem::take(&mut self.ifile_dirty).into_iter().collect();
        for b in dirty_ifile {
            let blk = self.encode_ifile_block(b)?;
            let v = self.dat.alloc();
            allocated.push(v);
            let old = self.ifile_map.set(b, v);
            self.retire(old);
            virt.push(Payload {
                entry: BlockEntry {
                    ino: IFILE_INO,
                    offset: b,
                    vblock: v,
                    kind: BlockKind::Data,
                },
                data: Arc::new(blk),
            });
        }
        let mut ifile_map = std::mem::replace(&mut self.ifile_map, BlockMap::new(bs));
        self.write_nodes(IFILE_INO, &mut ifile_map, p, &mut virt, &mut allocated);
        self.ifile_map = ifile_map;
        self.ifile.bmap = self.ifile_map.root();
        self.ifile.size = self.next_ino * INODE_SIZE as u64;
        self.ifile.blocks =
            self.ifile_map.len() as u64 + self.ifile_map.node_addrs().count() as u64;
        self.ifile.mtime = (now_s) as i64;

        // A block freed since cleaning read it (its checkpoints deleted,
        // or, placed by a data-sync log, overwritten: by steps 1 and 2
        // too) is not moved.
        gc.retain(|g| self.dat.phys(g.vblock) == g.from);

        // 3. Which blocks of the physical files change. The DAT entries
        // of new blocks and of those cleaning moves change below, once
        // addresses exist.
        let also: Vec<u64> = allocated
            .iter()
            .copied()
            .chain(gc.iter().map(|g| g.vblock))
            .collect();
        let datw = self.dat.plan_write(&also, room);
        let dat_blocks = datw.blocks.clone();
        let datj_blocks = datw.journal_blocks.clone();
        let per_cp = MetaKind::Cpfile.per_block(bs) as u64;
        let mut cp_blocks: BTreeSet<u64> = [0, new_cno / per_cp].into_iter().collect();
        cp_blocks.extend(self.history.changed().iter().map(|c| c / per_cp));
        cp_blocks.extend(std::mem::take(&mut self.cp_force));
        // A block of the checkpoint file whose checkpoints are all deleted
        // becomes a hole (which reads as no checkpoints), not a rewrite:
        // otherwise the file grew by a block per few dozen checkpoints
        // ever made. Block 0 (the header) and the new entry's stay.
        let cp_dead: Vec<(u64, u64)> = cp_blocks
            .iter()
            .filter(|&&b| b != 0 && b != new_cno / per_cp)
            .filter(|&&b| !self.history.any_valid_in(b * per_cp..(b + 1) * per_cp))
            .map(|&b| (b, self.cp_map.get(b)))
            .filter(|&(_, a)| a != 0)
            .collect();
        for (b, _) in &cp_dead {
            cp_blocks.remove(b);
        }
        // Read their current contents before they get new addresses.
        let mut cp_old = std::collections::HashMap::new();
        for &b in &cp_blocks {
            cp_old.insert(b, self.cp_block(b)?);
        }
        let dat_nodes = dirty_nodes_for(&self.dat_map, &dat_blocks);
        let datj_nodes = dirty_nodes_for(&self.datj_map, &datj_blocks);
        // The holes change their indirect blocks too.
        let cp_nodes = dirty_nodes_for(
            &self.cp_map,
            &cp_blocks
                .iter()
                .copied()
                .chain(cp_dead.iter().map(|&(b, _)| b))
                .collect(),
        );
        let mut old_segs: BTreeSet<u64> = BTreeSet::new();
        for (b, a) in cp_dead {
            self.cp_map.set(b, 0);
            if let Some(s) = self.seg_of(a) {
                self.segs.add_live(s, -1);
                old_segs.insert(s);
            }
        }
        if datw.merge {
            // The whole journal dies.
            old_segs.extend(
                self.datj_map
                    .iter()
                    .map(|(_, a)| a)
                    .chain(self.datj_map.node_addrs().map(|(_, a)| a))
                    .filter_map(|a| self.sb.segment_of(a)),
            );
        }
        for (map, blocks, nodes) in [
            (&self.dat_map, &dat_blocks, &dat_nodes),
            (&self.datj_map, &datj_blocks, &datj_nodes),
            (&self.cp_map, &cp_blocks, &cp_nodes),
        ] {
            old_segs.extend(
                blocks
                    .iter()
                    .filter_map(|&b| self.sb.segment_of(map.get(b))),
            );
            old_segs.extend(
                nodes
                    .iter()
                    .filter_map(|&n| self.sb.segment_of(map.node_addr(n))),
            );
        }
        old_segs.extend(freed.iter().copied());
        old_segs.extend(gc.iter().filter_map(|g| self.seg_of(g.from)));
        old_segs.insert(self.head.seg);
        let mut su_blocks: BTreeSet<u64> = self.segs.take_dirty();
        su_blocks.insert(0);
        let bps = u64::from(self.sb.blocks_per_segment);
        let sb = self.sb.clone();
        // Blocks moved by cleaning go to the cleaner's heads, in segments
        // of their own (hot/cold separation), planned first: the cold
        // head, and the warm one for survivors of victims the cleaner
        // found hot (`GcBlock::warm`); then file data predicted to live
        // long goes to the long head.
        if !long.is_empty() {
            log::debug!(
                "checkpoint {new_cno}: {} of {} file blocks to the long head (mean lifespan {:.1} checkpoints)",
                long.len(),
                long.len() + virt.len(),
                self.lifespan
            );
        }
        let mut cleaner_logs = Vec::new();
        let mut cold_segs: BTreeSet<u64> = BTreeSet::new();
        let (warm, cold): (Vec<GcBlock>, Vec<GcBlock>) = gc.into_iter().partition(|g| g.warm);
        for (which, blocks) in [
            (COLD_HEAD, Side::Moved(cold)),
            (WARM_HEAD, Side::Moved(warm)),
            (LONG_HEAD, Side::Written(std::mem::take(&mut long))),
        ] {
            if blocks.is_empty() {
                continue;
            }
            let (lay, fresh) = self.plan_cleaner_log(which, blocks.len(), &cold_segs)?;
            cold_segs.extend(
                lay.taken
                    .iter()
                    .chain(&fresh)
                    .chain(&lay.left)
                    .copied()
                    .chain(lay.spans.iter().map(|s| s.seg)),
            );
            cleaner_logs.push((which, lay, fresh, blocks));
        }
        let (layout, su_nodes) = loop {
            let su_nodes = dirty_nodes_for(&self.su_map, &su_blocks);
            let n = (virt.len()
                + dat_blocks.len()
                + dat_nodes.len()
                + datj_blocks.len()
                + datj_nodes.len()
                + cp_blocks.len()
                + cp_nodes.len()
                + su_blocks.len()
                + su_nodes.len()) as u64;
            let clean: Vec<u64> = self
                .segs
                .peek_clean(layout::segments_needed(n, bs, bps) as usize + cold_segs.len())
                .into_iter()
                .filter(|s| !cold_segs.contains(s))
                .collect();
            let lay = layout::plan(self.head, n, bs, |s| sb.segment_start(s), bps, &clean)
                .ok_or_else(|| {
                    log::warn!(
                        "checkpoint: {n} blocks ({} data, {} DAT, {} DAT nodes, {} journal, {} cpfile, \
                         {} usage) do not fit: {} clean segments besides the cold log's {}",
                        virt.len(),
                        dat_blocks.len(),
                        dat_nodes.len(),
                        datj_blocks.len() + datj_nodes.len(),
                        cp_blocks.len() + cp_nodes.len(),
                        su_blocks.len() + su_nodes.len(),
                        clean.len(),
                        cold_segs.len()
                    );
                    Error::NoSpace
                })?;
            let mut touched = old_segs.clone();
            touched.extend(cold_segs.iter().copied());
            touched.extend(lay.spans.iter().map(|s| s.seg));
            touched.extend(lay.taken.iter().copied());
            touched.extend(lay.left.iter().copied());
            touched.extend(
                su_nodes
                    .iter()
                    .filter_map(|&n| sb.segment_of(self.su_map.node_addr(n))),
            );
            touched.extend(
                su_blocks
                    .iter()
                    .filter_map(|&b| sb.segment_of(self.su_map.get(b))),
            );
            let need: BTreeSet<u64> = touched.iter().map(|&s| self.segs.block_of(s)).collect();
            if need.is_subset(&su_blocks) {
                break (lay, su_nodes);
            }
            su_blocks.extend(need);
        };

        // 4. Segment bookkeeping for the layouts, then addresses.
        // Taken first: a segment entered and left within this checkpoint
        // must end inactive.
        let mut seq = self.seq;
        let mut cold_runs = Vec::new();
        let mut long_blocks = 0;
        let mut long_logs = 0;
        for (which, cl, fresh, side) in cleaner_logs {
            self.book_layout(&cl, &fresh, seq, now_s);
            let mut addrs = cl
                .spans
                .iter()
                .flat_map(|s| (0..s.nentries).map(move |i| s.payload_addr(i)));
            let mut next = || addrs.next().expect("the layout holds every block");
            let gc_payload = match side {
                Side::Moved(gc) => gc
                    .into_iter()
                    .map(|g| {
                        let a = next();
                        self.dat.relocate(g.vblock, a);
                        if let Some(s) = self.seg_of(a) {
                            self.segs.add_live(s, 1);
                        }
                        if let Some(s) = self.seg_of(g.from) {
                            self.segs.add_live(s, -1);
                        }
                        Payload {
                            entry: BlockEntry {
                                ino: g.ino,
                                offset: g.offset,
                                vblock: g.vblock,
                                kind: g.kind,
                            },
                            data: Arc::new(g.data),
                        }
                    })
                    .collect::<Vec<_>>(),
                Side::Written(pls) => {
                    for pl in &pls {
                        let a = next();
                        self.dat.assign(pl.entry.vblock, a, new_cno);
                        if let Some(s) = self.seg_of(a) {
                            self.segs.add_live(s, 1);
                        }
                    }
                    long_blocks = pls.len() as u64;
                    pls
                }
            };
            let (runs, _) = build_runs(
                &cl,
                &gc_payload,
                Arc::new(Vec::new()),
                seq,
                now_ns,
                new_cno,
                bs,
                LOG_FLAG_GC,
                0,
            );
            if which == LONG_HEAD {
                long_logs = runs.iter().map(|r| r.nblocks(bs)).sum();
            }
            cold_runs.extend(runs);
            seq += cl.spans.len() as u64;
            self.gc_heads[which] = Some(cl.head);
        }
        let first_seq = seq;
        self.book_layout(&layout, &[], first_seq, now_s);
        let mut addrs = layout
            .spans
            .iter()
            .flat_map(|s| (0..s.nentries).map(move |i| s.payload_addr(i)));
        let mut next_addr = || addrs.next().expect("layout holds every payload block");
        for pl in &virt {
            let a = next_addr();
            self.dat.assign(pl.entry.vblock, a, new_cno);
            if let Some(s) = self.seg_of(a) {
                self.segs.add_live(s, 1);
            }
        }
        // Every entry of this checkpoint is final: journal them (or merge).
        self.dat.apply_write(&datw);
        if datw.merge {
            self.drop_journal();
        }
        let dat_addrs = self.place_phys(PhysFile::Dat, &dat_blocks, &dat_nodes, &mut next_addr);
        let datj_addrs = self.place_phys(PhysFile::DatJ, &datj_blocks, &datj_nodes, &mut next_addr);
        let cp_addrs = self.place_phys(PhysFile::Cp, &cp_blocks, &cp_nodes, &mut next_addr);
        let su_addrs = self.place_phys(PhysFile::Su, &su_blocks, &su_nodes, &mut next_addr);
        // Segments this checkpoint emptied are freed by it too, if their
        // usage blocks are already being written (the rest at the next one).
        let mut freed = freed;
        let segs_per_block = MetaKind::Sufile.per_block(bs) as u64;
        freed.extend(
            self.segs
                .collect_free_where(|s| su_blocks.contains(&((s + 1) / segs_per_block))),
        );
        self.forget_freed_damage();

        // 5. Encode the physical files now that every address is known.
        let mut phys_payload: Vec<Payload> = Vec::new();
        for &b in &dat_blocks {
            phys_payload.push(phys(
                DAT_INO,
                b,
                BlockKind::Data,
                self.dat.encode_block(b, bs, seed),
            ));
        }
        for &n in &dat_nodes {
            let off = node_first_offset(&self.dat_map, n, p);
            let blk = self.dat_map.encode_node(n, bs, seed);
            phys_payload.push(phys(DAT_INO, off, BlockKind::Indirect(n.level), blk));
        }
        for &b in &datj_blocks {
            phys_payload.push(phys(
                DATJ_INO,
                b,
                BlockKind::Data,
                self.dat.encode_journal_block(b, bs, seed),
            ));
        }
        for &n in &datj_nodes {
            let off = node_first_offset(&self.datj_map, n, p);
            let blk = self.datj_map.encode_node(n, bs, seed);
            phys_payload.push(phys(DATJ_INO, off, BlockKind::Indirect(n.level), blk));
        }
        let mut flags = if minor { CP_FLAG_MINOR } else { 0 };
        if std::mem::take(&mut self.next_is_snapshot) {
            flags |= CP_FLAG_SNAPSHOT;
            self.last_snapshot_built = new_cno;
        }
        let entry = CheckpointEntry {
            cno: new_cno,
            flags,
            ctime_ns: now_ns,
            nblk_inc: layout.spans.iter().map(|s| s.nblocks()).sum(),
            inodes_count: self.inodes_count,
            blocks_count: self.dat.count_current(),
            next_snapshot: 0,
            prev_snapshot: 0,
            ifile: self.ifile.clone(),
        };
        self.history.add(new_cno, flags, now_ns);
        let snapshots: Vec<u64> = self.history.snapshots().collect();
        self.cp_header = CpFileHeader {
            ncheckpoints: self.history.len(),
            nsnapshots: snapshots.len() as u64,
            first_snapshot: snapshots.first().copied().unwrap_or(0),
            last_snapshot: snapshots.last().copied().unwrap_or(0),
        };
        for &b in &cp_blocks {
            let blk = self.encode_cp_block(b, cp_old.remove(&b).unwrap_or_default(), &entry);
            if b == new_cno / per_cp {
                self.cp_last_block = Some((b, blk.clone()));
            }
            phys_payload.push(phys(CPFILE_INO, b, BlockKind::Data, blk));
        }
        let _ = self.history.take_changed();
        for &n in &cp_nodes {
            let off = node_first_offset(&self.cp_map, n, p);
            let blk = self.cp_map.encode_node(n, bs, seed);
            phys_payload.push(phys(CPFILE_INO, off, BlockKind::Indirect(n.level), blk));
        }
        let stray = self.segs.take_dirty();
        debug_assert!(
            stray.is_subset(&su_blocks),
            "usage blocks {stray:?} not planned"
        );
        for &b in &su_blocks {
            phys_payload.push(phys(
                SUFILE_INO,
                b,
                BlockKind::Data,
                self.segs.encode_block(b, bs, seed),
            ));
        }
        for &n in &su_nodes {
            let off = node_first_offset(&self.su_map, n, p);
            let blk = self.su_map.encode_node(n, bs, seed);
            phys_payload.push(phys(SUFILE_INO, off, BlockKind::Indirect(n.level), blk));
        }
        let _ = (dat_addrs, datj_addrs, cp_addrs, su_addrs);

        // 6. The super root and the logs.
        if !minor {
            self.nongc_ctime_ns = now_ns;
        }
        let last_seq = first_seq + layout.spans.len() as u64 - 1;
        let sr = SuperRoot {
            cno: new_cno,
            seq: last_seq,
            ctime_ns: now_ns,
            nongc_ctime_ns: self.nongc_ctime_ns,
            dat: meta_inode(
                DAT_INO,
                &self.dat_map,
                self.dat.nslots(),
                MetaKind::Dat,
                now_s,
            ),
            cpfile: meta_inode(
                CPFILE_INO,
                &self.cp_map,
                new_cno + 1,
                MetaKind::Cpfile,
                now_s,
            ),
            sufile: meta_inode(
                SUFILE_INO,
                &self.su_map,
                self.segs.len() + 1,
                MetaKind::Sufile,
                now_s,
            ),
            dat_journal: JournalRoot {
                records: self.dat.journal_len(),
                bmap: self.datj_map.root(),
            },
        };
        let sr_block = Arc::new(sr.encode(bs, seed));
        let data = ndata;
        let ifile = virt
            .iter()
            .filter(|p| p.entry.ino == IFILE_INO && p.entry.kind == BlockKind::Data)
            .count() as u64;
        let indirect = virt
            .iter()
            .filter(|p| matches!(p.entry.kind, BlockKind::Indirect(_)))
            .count() as u64;
        let dat =
            (dat_blocks.len() + dat_nodes.len() + datj_blocks.len() + datj_nodes.len()) as u64;
        let mut written = Written {
            data,
            dat,
            indirect,
            ifile,
            cpfile_sufile: phys_payload.len() as u64 - dat,
            other: virt.len() as u64 + long_blocks - data - ifile - indirect,
            ..Written::default()
        };
        let all: Vec<Payload> = virt.into_iter().chain(phys_payload).collect();
        let (runs, sr_at) = build_runs(
            &layout, &all, sr_block, first_seq, now_ns, new_cno, bs, 0, 0,
        );
        // The long head's logs are file data and summaries, not the
        // cleaner's.
        let side: u64 = cold_runs.iter().map(|r| r.nblocks(bs)).sum();
        written.cold = side - long_logs;
        written.summary = runs.iter().map(|r| r.nblocks(bs)).sum::<u64>() - all.len() as u64
            + long_logs
            - long_blocks;
        let ncold = cold_runs.len();
        let runs: Vec<Run> = cold_runs.into_iter().chain(runs).collect();
        self.hold_in_flight(&runs);

        // Every inode's changes are in this checkpoint (the inode records
        // it wrote changed too: block map roots, block counts).
        self.meta_dirty.clear();
        self.dsync_dirty.clear();
        self.seq = last_seq + 1;
        self.cno = new_cno;
        self.last_ctime_ns = now_ns;
        self.head = layout.head;
        Ok(Plan {
            runs,
            cold_runs: ncold,
            cno: new_cno,
            sr_block: sr_at,
            sr_seq: last_seq,
            mods: self.mods,
            freed,
            written,
        })
    }

    /// How many checkpoints the block virtual block `old` names lived, if
    /// it is one an earlier checkpoint placed; each answer moves the
    /// running mean `State::lifespan` a little.
    fn lived(&mut self, old: u64, new_cno: u64) -> Option<u64> {
        if old == 0 {
            return None;
        }
        let e = self.dat.entry(old);
        if e.phys == 0 || e.start_cno == 0 || e.start_cno >= new_cno {
            return None;
        }
        let l = new_cno - e.start_cno;
        if self.lifespan == 0.0 {
            self.lifespan = l as f64;
        } else {
            self.lifespan += (l as f64 - self.lifespan) * LIFESPAN_WEIGHT;
        }
        Some(l)
    }

    /// Plans `n` moved blocks at the side head `which` (opened in a clean
    /// segment not in `taken` if there is none yet; a side head sets no
    /// segment aside, `layout::NO_NEXT`): the layout and the segment
    /// opened for it.
    fn plan_cleaner_log(
        &self,
        which: usize,
        n: u64,
        taken: &BTreeSet<u64>,
    ) -> Result<(Layout, Vec<u64>)> {
        let bs = self.bs;
        let bps = u64::from(self.sb.blocks_per_segment);
        let sb = &self.sb;
        let need = layout::segments_needed(n, bs, bps) as usize;
        let pool: Vec<u64> = self
            .segs
            .peek_clean(need + taken.len() + 2)
            .into_iter()
            .filter(|s| !taken.contains(s))
            .collect();
        let (head, fresh) = match self.gc_heads[which] {
            Some(h) => (h, Vec::new()),
            None => {
                let Some(&first) = pool.first() else {
                    log::warn!("checkpoint: no clean segment to open a side log for {n} blocks");
                    return Err(Error::NoSpace);
                };
                let h = Head {
                    seg: first,
                    block: sb.segment_start(first),
                    next_seg: layout::NO_NEXT,
                };
                (h, vec![first])
            }
        };
        let clean: Vec<u64> = pool.into_iter().filter(|s| !fresh.contains(s)).collect();
        let lay = layout::plan_logs(head, n, false, bs, |s| sb.segment_start(s), bps, &clean)
            .ok_or_else(|| {
                log::warn!(
                    "checkpoint: {n} moved blocks need {need} segments, {} clean",
                    clean.len()
                );
                Error::NoSpace
            })?;
        Ok((lay, fresh))
    }

    /// Segment usage for a planned layout whose logs get sequence numbers
    /// from `first_seq`: `fresh` and the layout's new segments taken first
    /// (a segment entered and left within one checkpoint must end
    /// inactive), the ones left behind deactivated, every log counted.
    pub(super) fn book_layout(&mut self, lay: &Layout, fresh: &[u64], first_seq: u64, now_s: u64) {
        for &s in fresh.iter().chain(&lay.taken) {
            self.segs.take(s, now_s);
        }
        for &s in &lay.left {
            self.segs.deactivate(s);
        }
        for (i, span) in lay.spans.iter().enumerate() {
            self.segs
                .written(span.seg, span.nblocks() as u32, first_seq + i as u64, now_s);
        }
    }

    /// Rewrites the indirect blocks of a virtually addressed file whose
    /// pointers changed, bottom-up.
    fn write_nodes(
        &mut self,
        ino: u64,
        map: &mut BlockMap,
        p: u64,
        virt: &mut Vec<Payload>,
        allocated: &mut Vec<u64>,
    ) {
        for id in map.take_dirty_nodes() {
            if map.node_is_empty(id) {
                let old = map.remove_node(id);
                self.retire(old);
                continue;
            }
            let v = self.dat.alloc();
            allocated.push(v);
            let old = map.set_node(id, v);
            self.retire(old);
            let blk = map.encode_node(id, self.bs, self.seed);
            virt.push(Payload {
                entry: BlockEntry {
                    ino,
                    offset: node_first_offset(map, id, p),
                    vblock: v,
                    kind: BlockKind::Indirect(id.level),
                },
                data: Arc::new(blk),
            });
        }
    }

    /// Gives the changed blocks and indirect blocks of a physically
    /// addressed file their new addresses, moving live counts.
    fn place_phys(
        &mut self,
        f: PhysFile,
        blocks: &BTreeSet<u64>,
        nodes: &[NodeId],
        next: &mut dyn FnMut() -> u64,
    ) -> Vec<u64> {
        let mut out = Vec::new();
        let mut moves = Vec::new();
        {
            let map = match f {
                PhysFile::Dat => &mut self.dat_map,
                PhysFile::DatJ => &mut self.datj_map,
                PhysFile::Cp => &mut self.cp_map,
                PhysFile::Su => &mut self.su_map,
            };
            for &b in blocks {
                let a = next();
                moves.push((map.set(b, a), a));
                out.push(a);
            }
            let dirty = map.take_dirty_nodes();
            debug_assert_eq!(dirty, nodes);
            for &n in nodes {
                let a = next();
                moves.push((map.set_node(n, a), a));
                out.push(a);
            }
        }
        for (old, new) in moves {
            if let Some(s) = self.seg_of(old) {
                self.segs.add_live(s, -1);
            }
            if let Some(s) = self.seg_of(new) {
                self.segs.add_live(s, 1);
            }
        }
        out
    }

    /// Empties the DAT journal's file (a merge wrote every DAT block it
    /// stood for): its blocks leave their segments' live counts.
    fn drop_journal(&mut self) {
        let map = std::mem::replace(&mut self.datj_map, BlockMap::new(self.bs));
        let old: Vec<u64> = map
            .iter()
            .map(|(_, a)| a)
            .chain(map.node_addrs().map(|(_, a)| a))
            .collect();
        for a in old {
            if let Some(s) = self.seg_of(a) {
                self.segs.add_live(s, -1);
            }
        }
    }

    /// The current contents of checkpoint file block `b`.
    pub(crate) fn cp_block(&self, b: u64) -> Result<Vec<u8>> {
        Ok(match &self.cp_last_block {
            Some((lb, data)) if *lb == b => data.clone(),
            _ => match self.cp_map.get(b) {
                0 => vec![0u8; self.bs],
                a => self.read_meta(a, MetaKind::Cpfile)?,
            },
        })
    }

    /// Checkpoint file block `b` (current contents `blk`) with the header
    /// and `entry` in place.
    fn encode_cp_block(&self, b: u64, mut blk: Vec<u8>, entry: &CheckpointEntry) -> Vec<u8> {
        let bs = self.bs;
        blk.resize(bs, 0);
        let mut put = |slot: u64, rec: Vec<u8>| {
            let (blk_idx, off) = MetaKind::Cpfile.locate(slot, bs);
            if blk_idx == b {
                blk[off..off + rec.len()].copy_from_slice(&rec);
            }
        };
        let mut w = Writer::default();
        self.cp_header.encode_into(&mut w);
        put(0, w.into_vec());
        let mut w = Writer::default();
        entry.encode_into(&mut w);
        put(entry.cno, w.into_vec());
        // Entries deleted or made (or unmade) snapshots since the last
        // checkpoint.
        let per = MetaKind::Cpfile.per_block(bs) as u64;
        let rs = MetaKind::Cpfile.record_size();
        for &c in self.history.changed().range(b * per..(b + 1) * per) {
            let (_, off) = MetaKind::Cpfile.locate(c, bs);
            if let Ok(mut e) = CheckpointEntry::decode(&blk[off..off + rs]) {
                if e.cno == c {
                    e.flags = self.history.disk_flags(c, e.flags);
                    let mut w = Writer::default();
                    e.encode_into(&mut w);
                    blk[off..off + rs].copy_from_slice(&w.into_vec());
                }
            }
        }
        MetaBlockHeader::seal(&mut blk, MetaKind::Cpfile, self.seed);
        blk
    }
}

/// Clean segments beyond the reserve below which the long head is not
/// opened (its file data then goes with the checkpoint).
const LONG_HEAD_SLACK: u64 = 4;

/// Weight of each overwritten block's lifespan in `State::lifespan`'s
/// running mean: about the last thousand overwrites count.
const LIFESPAN_WEIGHT: f64 = 1.0 / 1024.0;

/// What a side head's logs carry.
enum Side {
    /// Blocks a cleaning pass moves.
    Moved(Vec<GcBlock>),
    /// File data (the long head).
    Written(Vec<Payload>),
}

impl Side {
    fn len(&self) -> u64 {
        match self {
            Side::Moved(v) => v.len() as u64,
            Side::Written(v) => v.len() as u64,
        }
    }
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Clone, Copy)]
enum PhysFile {
    Dat,
    DatJ,
    Cp,
    Su,
}

fn phys(ino: u64, offset: u64, kind: BlockKind, data: Vec<u8>) -> Payload {
    Payload {
        entry: BlockEntry {
            ino,
            offset,
            vblock: 0,
            kind,
        },
        data: Arc::new(data),
    }
}

/// The indirect blocks that change if `blocks` of a physical file move.
fn dirty_nodes_for(map: &BlockMap, blocks: &BTreeSet<u64>) -> Vec<NodeId> {
    // (It cloned the map and set each block: a copy of the whole map, the
    // DAT's included, under the state lock at every checkpoint.)
    map.nodes_on_paths(blocks)
}

fn meta_inode(ino: u64, map: &BlockMap, slots: u64, kind: MetaKind, now: u64) -> Inode {
    Inode {
        mode: 0o100600,
        nlink: 1,
        size: slots * kind.record_size() as u64,
        blocks: map.len() as u64 + map.node_addrs().count() as u64,
        mtime: now as i64,
        ctime: now as i64,
        bmap: map.root(),
        ino,
        ..Inode::default()
    }
}

/// Turns the layout and payload into writes: one run per log, each log
/// flagged `extra_flags`, the last one `last_flags` too.
#[allow(clippy::too_many_arguments)]
pub(super) fn build_runs(
    layout: &Layout,
    payload: &[Payload],
    sr_block: Arc<Vec<u8>>,
    first_seq: u64,
    now_ns: u64,
    cno: u64,
    bs: usize,
    extra_flags: u16,
    last_flags: u16,
) -> (Vec<Run>, u64) {
    let mut runs = Vec::new();
    let mut at = 0usize;
    let mut sr_at = 0;
    for (i, span) in layout.spans.iter().enumerate() {
        let n = span.nentries as usize;
        let part = &payload[at..at + n];
        at += n;
        let last = if i + 1 == layout.spans.len() {
            last_flags
        } else {
            0
        };
        let flags = extra_flags
            | last
            | if span.super_root {
                LOG_FLAG_SUPER_ROOT
            } else {
                0
            };
        let summary = LogSummary {
            header: LogHeader::new(flags, first_seq + i as u64, now_ns, span.next_seg, cno),
            entries: part.iter().map(|p| p.entry).collect(),
        };
        debug_assert_eq!(
            LogHeader::summary_blocks_for(summary.entries.len(), bs) as u64,
            span.nsummary
        );
        let mut body: Vec<Arc<Vec<u8>>> = part.iter().map(|p| p.data.clone()).collect();
        if span.super_root {
            body.push(sr_block.clone());
            sr_at = span.start;
        }
        runs.push(Run {
            block: span.start,
            blocks: body,
            summary: Some(summary),
        });
    }
    (runs, sr_at)
}
