//! Segment usage in memory and the pool of clean segments.
//!
//! Invariants:
//! * `live` of a segment counts the payload blocks in it that the current
//!   (in-memory) state references; summary blocks and super roots are
//!   never live.
//! * A segment is in the clean pool only if its usage entry is clean in
//!   the last durable checkpoint *and* the superblock cursor points at or
//!   after that checkpoint: segments freed by checkpoint k wait in
//!   `pending` until the superblock naming k (or later) is on disk, so the
//!   recovery scan from the cursor never crosses a reused segment.

use std::collections::BTreeSet;

use crate::format::{
    MetaBlockHeader, MetaKind, Reader, SegUsage, SuFileHeader, Writer, META_HEADER_SIZE,
    SU_FLAG_ACTIVE, SU_FLAG_DIRTY,
};
use crate::{Error, Result};

/// The segment usage table.
#[derive(Debug, Clone)]
pub struct Segments {
    usage: Vec<SegUsage>,
    clean: BTreeSet<u64>,
    pending: Vec<u64>,
    dirty: BTreeSet<u64>,
    last_alloc: u64,
    per_block: u64,
}

impl Segments {
    /// Builds the table from usage entries.
    pub fn new(usage: Vec<SegUsage>, last_alloc: u64, block_size: usize) -> Self {
        let clean = usage
            .iter()
            .enumerate()
            .filter(|(_, u)| u.is_clean())
            .map(|(i, _)| i as u64)
            .collect();
        Segments {
            usage,
            clean,
            pending: Vec::new(),
            dirty: BTreeSet::new(),
            last_alloc,
            per_block: MetaKind::Sufile.per_block(block_size) as u64,
        }
    }

    /// Decodes the segment usage file (blocks in file order; `None` = hole,
    /// all clean).
    pub fn load(
        blocks: &[Option<Vec<u8>>],
        nsegments: u64,
        block_size: usize,
        seed: u32,
    ) -> Result<Self> {
        let per = MetaKind::Sufile.per_block(block_size) as u64;
        let rs = MetaKind::Sufile.record_size();
        let mut usage = Vec::with_capacity(nsegments as usize);
        let mut last_alloc = 0;
        for slot in 0..=nsegments {
            let b = blocks.get((slot / per) as usize).and_then(|b| b.as_ref());
            let Some(b) = b else {
                if slot > 0 {
                    usage.push(SegUsage::default());
                }
                continue;
            };
            let corrupt = |source| Error::Corrupted {
                what: "segment usage block",
                location: format!("segment usage block {}", slot / per),
                reason: source,
            };
            if slot % per == 0 {
                MetaBlockHeader::verify(b, MetaKind::Sufile, seed).map_err(corrupt)?;
            }
            let off = META_HEADER_SIZE + (slot % per) as usize * rs;
            let mut r = Reader::new(b, "segment usage", 0).map_err(corrupt)?;
            r.skip(off).map_err(corrupt)?;
            let rec = r.bytes(rs).map_err(corrupt)?;
            if slot == 0 {
                last_alloc = SuFileHeader::decode(rec).map_err(corrupt)?.last_alloc;
            } else {
                usage.push(SegUsage::decode(rec).map_err(corrupt)?);
            }
        }
        Ok(Segments::new(usage, last_alloc, block_size))
    }

    /// Number of segments.
    pub fn len(&self) -> u64 {
        self.usage.len() as u64
    }

    /// True if there are no segments (never, for a valid filesystem).
    pub fn is_empty(&self) -> bool {
        self.usage.is_empty()
    }

    /// Usage of segment `s`.
    pub fn get(&self, s: u64) -> SegUsage {
        self.usage.get(s as usize).copied().unwrap_or_default()
    }

    /// Segments in the clean pool.
    pub fn nclean(&self) -> u64 {
        self.clean.len() as u64
    }

    /// Segments freed but not yet reusable.
    pub fn npending(&self) -> u64 {
        self.pending.len() as u64
    }

    /// The first `k` clean segments after the last allocated one (wrapping),
    /// without taking them. Fewer if the pool is smaller.
    pub fn peek_clean(&self, k: usize) -> Vec<u64> {
        self.clean
            .range(self.last_alloc + 1..)
            .chain(self.clean.range(..=self.last_alloc))
            .take(k)
            .copied()
            .collect()
    }

    /// Takes segment `s` out of the pool as a log head.
    pub fn take(&mut self, s: u64, now: u64) {
        self.clean.remove(&s);
        self.last_alloc = s;
        let u = &mut self.usage[s as usize];
        *u = SegUsage {
            last_mod: now,
            nblocks: 0,
            nlive: 0,
            flags: SU_FLAG_ACTIVE | SU_FLAG_DIRTY,
            seq: 0,
        };
        self.mark(s);
    }

    /// Records `n` blocks written into `s` by a log of sequence `seq`.
    pub fn written(&mut self, s: u64, n: u32, seq: u64, now: u64) {
        let u = &mut self.usage[s as usize];
        u.nblocks += n;
        u.seq = seq;
        u.last_mod = now;
        u.flags |= SU_FLAG_DIRTY;
        self.mark(s);
    }

    /// Adds `delta` live blocks to segment `s`.
    pub fn add_live(&mut self, s: u64, delta: i64) {
        if let Some(u) = self.usage.get_mut(s as usize) {
            u.nlive = (i64::from(u.nlive) + delta).max(0) as u32;
            self.mark(s);
        }
    }

    /// Sets the last-modified time of `s` (a cleaner deferring it).
    pub fn set_last_mod(&mut self, s: u64, t: u64) {
        if let Some(u) = self.usage.get_mut(s as usize) {
            u.last_mod = t;
            self.mark(s);
        }
    }

    /// Sets `flags` (`SU_FLAG_*`) on segment `s`, as on error.
    pub fn set_flags(&mut self, s: u64, flags: u32) {
        if let Some(u) = self.usage.get_mut(s as usize) {
            u.flags |= flags;
            self.mark(s);
        }
    }

    /// Marks `s` as no longer a log head.
    pub fn deactivate(&mut self, s: u64) {
        if let Some(u) = self.usage.get_mut(s as usize) {
            u.flags &= !SU_FLAG_ACTIVE;
            self.mark(s);
        }
    }

    /// Makes the next checkpoint rewrite usage file block `b` (cleaning
    /// moves it out of its segment).
    pub fn mark_block_dirty(&mut self, b: u64) {
        self.dirty.insert(b);
        self.dirty.insert(0);
    }

    fn mark(&mut self, s: u64) {
        self.dirty.insert((s + 1) / self.per_block);
        self.dirty.insert(0);
    }

    /// Frees every dirty, inactive segment without live blocks: marks it
    /// clean in the table and queues it for release. Returns them.
    pub fn collect_free(&mut self) -> Vec<u64> {
        self.collect_free_where(|_| true)
    }

    /// [`Self::collect_free`] limited to segments for which `allow` holds.
    pub fn collect_free_where(&mut self, allow: impl Fn(u64) -> bool) -> Vec<u64> {
        let free: Vec<u64> = self
            .usage
            .iter()
            .enumerate()
            .filter(|(_, u)| u.flags & SU_FLAG_DIRTY != 0 && u.flags & SU_FLAG_ACTIVE == 0)
            .filter(|(_, u)| u.nlive == 0)
            .map(|(i, _)| i as u64)
            .filter(|&s| allow(s))
            .collect();
        for &s in &free {
            self.usage[s as usize] = SegUsage::default();
            self.mark(s);
            self.pending.push(s);
        }
        free
    }

    /// The superblock now points past the checkpoint that freed the
    /// pending segments: they join the clean pool.
    pub fn release_pending(&mut self) {
        self.clean.extend(self.pending.drain(..));
    }

    /// Segment usage file blocks changed since the last call.
    pub fn take_dirty(&mut self) -> BTreeSet<u64> {
        std::mem::take(&mut self.dirty)
    }

    /// Blocks the usage file takes.
    pub fn nblocks(&self) -> u64 {
        (self.len() + 1).div_ceil(self.per_block)
    }

    /// The file block holding segment `s`'s entry.
    pub fn block_of(&self, s: u64) -> u64 {
        (s + 1) / self.per_block
    }

    /// Encodes usage file block `b`.
    pub fn encode_block(&self, b: u64, block_size: usize, seed: u32) -> Vec<u8> {
        let mut w = Writer::with_capacity(block_size);
        w.zeros(META_HEADER_SIZE);
        for slot in b * self.per_block..(b + 1) * self.per_block {
            if slot == 0 {
                let ncleansegs = self.usage.iter().filter(|u| u.is_clean()).count() as u64;
                SuFileHeader {
                    ncleansegs,
                    ndirtysegs: self.len() - ncleansegs,
                    last_alloc: self.last_alloc,
                }
                .encode_into(&mut w);
            } else {
                self.get(slot - 1).encode_into(&mut w);
            }
        }
        w.zeros(block_size - w.len());
        let mut blk = w.into_vec();
        MetaBlockHeader::seal(&mut blk, MetaKind::Sufile, seed);
        blk
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_segments_wait_for_release() {
        let mut s = Segments::new(vec![SegUsage::default(); 6], 0, 1024);
        assert_eq!(s.peek_clean(2), vec![1, 2]);
        s.take(1, 5);
        s.written(1, 10, 3, 5);
        s.add_live(1, 4);
        s.deactivate(1);
        assert!(s.collect_free().is_empty());
        s.add_live(1, -4);
        assert_eq!(s.collect_free(), vec![1]);
        assert!(!s.peek_clean(10).contains(&1));
        s.release_pending();
        assert!(s.peek_clean(10).contains(&1));
        let blk = s.encode_block(0, 1024, 2);
        let l = Segments::load(&[Some(blk)], 6, 1024, 2).unwrap();
        assert_eq!(l.nclean(), 6);
    }
}
