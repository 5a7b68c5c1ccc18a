//! The DAT in memory: one entry per virtual block number.
//!
//! Invariants: entry 0 is never used (virtual block 0 is a hole); an entry
//! with `phys == 0` is free. An entry with `end_cno == CNO_LIVE` is used
//! by the current state; one with a smaller `end_cno` was retired and is
//! kept for the checkpoints in `[start_cno, end_cno)` until none of them
//! is valid any more (`checkpoint::history`), then freed. A freed number
//! is free for reuse only after the checkpoint that freed it is durable
//! (`pending`), so a crash never finds a reused number in the previous
//! checkpoint's maps.

use std::collections::BTreeSet;

use crate::format::{DatEntry, MetaBlockHeader, MetaKind, Reader, Writer, CNO_LIVE};
use crate::{Error, Result};

/// The translation table.
#[derive(Debug, Clone)]
pub struct Dat {
    entries: Vec<DatEntry>,
    /// Reusable numbers, lowest first: consecutive allocations land in
    /// few DAT blocks, so a checkpoint rewrites few of them.
    free: BTreeSet<u64>,
    pending: Vec<u64>,
    dirty: BTreeSet<u64>,
    /// The block last marked dirty: consecutive numbers share a block, and
    /// a checkpoint marks one per block it places, so the set is spared
    /// most inserts.
    last_dirty: Option<u64>,
    per_block: u64,
}

impl Dat {
    /// A table holding `entries` (slot = virtual block number).
    pub fn new(entries: Vec<DatEntry>, block_size: usize) -> Self {
        let free = entries
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, e)| e.phys == 0)
            .map(|(i, _)| i as u64)
            .collect();
        let mut entries = entries;
        if entries.is_empty() {
            entries.push(DatEntry::default());
        }
        Dat {
            entries,
            free,
            pending: Vec::new(),
            dirty: BTreeSet::new(),
            last_dirty: None,
            per_block: MetaKind::Dat.per_block(block_size) as u64,
        }
    }

    /// Decodes the DAT from its blocks (in file order; `None` = hole).
    pub fn load(
        blocks: &[Option<Vec<u8>>],
        nslots: u64,
        block_size: usize,
        seed: u32,
    ) -> Result<Self> {
        let per = MetaKind::Dat.per_block(block_size);
        let mut entries = Vec::with_capacity(nslots as usize);
        for (bi, b) in blocks.iter().enumerate() {
            for j in 0..per {
                if entries.len() as u64 >= nslots {
                    break;
                }
                let e = match b {
                    None => DatEntry::default(),
                    Some(b) => {
                        let off = crate::format::META_HEADER_SIZE + j * MetaKind::Dat.record_size();
                        let corrupt = |source| Error::Corrupted {
                            what: "DAT block",
                            location: format!("DAT block {bi}"),
                            reason: source,
                        };
                        if j == 0 {
                            MetaBlockHeader::verify(b, MetaKind::Dat, seed).map_err(corrupt)?;
                        }
                        let mut r = Reader::new(b, "DAT entry", 0).map_err(corrupt)?;
                        r.skip(off).map_err(corrupt)?;
                        DatEntry::decode(r.bytes(MetaKind::Dat.record_size()).map_err(corrupt)?)
                            .map_err(corrupt)?
                    }
                };
                entries.push(e);
            }
        }
        entries.resize(nslots as usize, DatEntry::default());
        Ok(Dat::new(entries, block_size))
    }

    /// Slots in use (the high-water mark).
    pub fn nslots(&self) -> u64 {
        self.entries.len() as u64
    }

    /// Physical address of virtual block `v`, 0 if unallocated.
    pub fn phys(&self, v: u64) -> u64 {
        self.entries.get(v as usize).map_or(0, |e| e.phys)
    }

    /// The entry of `v` (zero if unallocated or beyond the table).
    pub fn entry(&self, v: u64) -> DatEntry {
        match self.entries.get(v as usize) {
            Some(e) if e.phys != u64::MAX => *e,
            _ => DatEntry::default(),
        }
    }

    /// Allocates a virtual block; its address is set with [`Self::assign`].
    pub fn alloc(&mut self) -> u64 {
        let v = match self.free.pop_first() {
            Some(v) => v,
            None => {
                self.entries.push(DatEntry::default());
                self.entries.len() as u64 - 1
            }
        };
        // Mark it taken until assigned, so that it is not handed out twice.
        self.entries[v as usize] = DatEntry {
            phys: u64::MAX,
            start_cno: 0,
            end_cno: CNO_LIVE,
        };
        v
    }

    /// Points `v` at `phys`, live from checkpoint `cno`.
    pub fn assign(&mut self, v: u64, phys: u64, cno: u64) {
        self.entries[v as usize] = DatEntry {
            phys,
            start_cno: cno,
            end_cno: CNO_LIVE,
        };
        self.mark_dirty(v);
    }

    /// Retires `v` from the current state: checkpoints before `end_cno`
    /// still see it, so it keeps its block (and its segment's live count)
    /// until [`Self::free`]. A number allocated but never assigned is freed
    /// at once, and so is one no checkpoint can see (placed by a data-sync
    /// log since the last checkpoint: live from `end_cno` itself); for
    /// that one the block it held is returned, for the caller to drop from
    /// its segment's live count.
    pub fn retire(&mut self, v: u64, end_cno: u64) -> Option<u64> {
        let e = self.entries.get_mut(v as usize)?;
        if e.phys == 0 {
            return None;
        }
        let mut freed = None;
        if e.phys == u64::MAX {
            *e = DatEntry::default();
            self.pending.push(v);
        } else if e.start_cno >= end_cno {
            freed = Some(e.phys);
            *e = DatEntry::default();
            self.pending.push(v);
        } else {
            e.end_cno = end_cno;
        }
        self.mark_dirty(v);
        freed
    }

    /// Takes the free number `v` out of the free list (recovery: a
    /// data-sync log names the numbers it used), growing the table if
    /// needed; its address is set with [`Self::assign`]. False if `v` is
    /// 0 or already in use.
    pub fn claim(&mut self, v: u64) -> bool {
        if v == 0 {
            return false;
        }
        let i = v as usize;
        if i >= self.entries.len() {
            let was = self.entries.len() as u64;
            self.entries.resize(i + 1, DatEntry::default());
            self.free.extend(was..v);
        } else if self.entries[i].phys != 0 || !self.free.remove(&v) {
            return false;
        }
        self.entries[i] = DatEntry {
            phys: u64::MAX,
            start_cno: 0,
            end_cno: CNO_LIVE,
        };
        true
    }

    /// Frees `v` (retired, and kept by no valid checkpoint): returns its
    /// physical address, for the caller to drop from its segment's live
    /// count. The number is reusable once the current checkpoint is
    /// durable.
    pub fn free(&mut self, v: u64) -> u64 {
        let Some(e) = self.entries.get_mut(v as usize) else {
            return 0;
        };
        let phys = e.phys;
        if phys == 0 {
            return 0;
        }
        *e = DatEntry::default();
        self.mark_dirty(v);
        self.pending.push(v);
        if phys == u64::MAX {
            0
        } else {
            phys
        }
    }

    /// Moves `v` to physical block `phys` (cleaning), keeping its lifetime.
    pub fn relocate(&mut self, v: u64, phys: u64) {
        if let Some(e) = self.entries.get_mut(v as usize) {
            e.phys = phys;
            self.mark_dirty(v);
        }
    }

    /// Retired entries still holding a block: (virtual, entry).
    pub fn iter_retired(&self) -> impl Iterator<Item = (u64, DatEntry)> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.phys != 0 && e.phys != u64::MAX && e.end_cno != CNO_LIVE)
            .map(|(i, e)| (i as u64, *e))
    }

    /// Entries used by the current state.
    pub fn count_current(&self) -> u64 {
        self.entries
            .iter()
            .filter(|e| e.phys != 0 && e.end_cno == CNO_LIVE)
            .count() as u64
    }

    /// Called when the checkpoint that retired the pending numbers is
    /// durable: they become reusable.
    pub fn release_pending(&mut self) {
        self.free.extend(self.pending.drain(..));
    }

    /// Marks the block holding `v`'s entry dirty.
    fn mark_dirty(&mut self, v: u64) {
        let b = v / self.per_block;
        if self.last_dirty != Some(b) {
            self.dirty.insert(b);
            self.last_dirty = Some(b);
        }
    }

    /// Whether the next checkpoint already rewrites DAT file block `b`.
    pub fn is_block_dirty(&self, b: u64) -> bool {
        self.dirty.contains(&b)
    }

    /// Makes the next checkpoint rewrite DAT file block `b` (cleaning moves
    /// it out of its segment).
    pub fn mark_block_dirty(&mut self, b: u64) {
        self.dirty.insert(b);
    }

    /// File blocks of the DAT that changed since the last call.
    pub fn take_dirty(&mut self) -> BTreeSet<u64> {
        self.last_dirty = None;
        std::mem::take(&mut self.dirty)
    }

    /// DAT file blocks needed for the current slots.
    pub fn nblocks(&self) -> u64 {
        self.nslots().div_ceil(self.per_block)
    }

    /// Encodes DAT file block `b`.
    pub fn encode_block(&self, b: u64, block_size: usize, seed: u32) -> Vec<u8> {
        let mut w = Writer::with_capacity(block_size);
        w.zeros(crate::format::META_HEADER_SIZE);
        for v in b * self.per_block..(b + 1) * self.per_block {
            let e = self.entries.get(v as usize).copied().unwrap_or_default();
            e.encode_into(&mut w);
        }
        w.zeros(block_size - w.len());
        let mut blk = w.into_vec();
        MetaBlockHeader::seal(&mut blk, MetaKind::Dat, seed);
        blk
    }

    /// Every (virtual, entry) in use, for fsck.
    pub fn iter_used(&self) -> impl Iterator<Item = (u64, DatEntry)> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.phys != 0)
            .map(|(i, e)| (i as u64, *e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_assign_retire_and_reload() {
        let mut d = Dat::new(vec![DatEntry::default()], 1024);
        let a = d.alloc();
        let b = d.alloc();
        assert_eq!((a, b), (1, 2));
        d.assign(a, 100, 3);
        d.assign(b, 101, 3);
        d.retire(a, 5);
        // Retired but kept: still mapped, with its lifetime.
        assert_eq!(d.phys(a), 100);
        assert_eq!(d.entry(a).end_cno, 5);
        assert_eq!(d.iter_retired().map(|(v, _)| v).collect::<Vec<_>>(), [a]);
        assert_eq!(d.count_current(), 1);
        assert_eq!(d.free(a), 100);
        assert_eq!(d.phys(a), 0);
        // Not reusable before the checkpoint is durable.
        assert_eq!(d.alloc(), 3);
        d.release_pending();
        assert_eq!(d.alloc(), 1);
        let dirty = d.take_dirty();
        assert_eq!(dirty.into_iter().collect::<Vec<_>>(), vec![0]);
        d.assign(1, 200, 4);
        d.assign(3, 201, 4);
        let blk = d.encode_block(0, 1024, 5);
        let l = Dat::load(&[Some(blk)], d.nslots(), 1024, 5).unwrap();
        assert_eq!(l.phys(1), 200);
        assert_eq!(l.phys(2), 101);
        assert_eq!(l.phys(3), 201);
        assert_eq!(l.nslots(), 4);
    }
}
