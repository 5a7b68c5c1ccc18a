//! The DAT in memory: one entry per virtual block number, and the DAT
//! journal that carries its changes to disk.
//!
//! Invariants: entry 0 is never used (virtual block 0 is a hole); an entry
//! with `phys == 0` is free. An entry with `end_cno == CNO_LIVE` is used
//! by the current state; one with a smaller `end_cno` was retired and is
//! kept for the checkpoints in `[start_cno, end_cno)` until none of them
//! is valid any more (`checkpoint::history`), then freed. A freed number
//! is free for reuse only after the checkpoint that freed it is durable
//! (`pending`), so a crash never finds a reused number in the previous
//! checkpoint's maps.
//!
//! **The journal** (format 1.2, lfs(5)). Overwrites, deletions of old
//! checkpoints and cleaning change entries scattered over the whole table;
//! writing each changed DAT block at every checkpoint made the DAT most of
//! the device bytes of small random overwrites under a busy cleaner. A
//! checkpoint instead appends each entry it changed as a 32-byte record to
//! the journal, a physically addressed file; the DAT's blocks on disk are
//! stale where a later record says otherwise. Recovery reads the blocks,
//! then applies the records in order. When the journal would take more
//! than `1/JOURNAL_SHARE` of the blocks it saves (the stale blocks), a
//! checkpoint *merges*: it writes every stale block and empties the
//! journal, if the space for that is free (else it journals, which
//! always costs less).
//!
//! Any DAT block may be written with its current contents at any
//! checkpoint (cleaning moves them): every change since the last merge
//! is in the journal, in order, so replaying it over a newer block gives
//! the same entries.

use std::collections::{BTreeMap, BTreeSet};

use crate::format::{
    DatEntry, DatRecord, MetaBlockHeader, MetaKind, Reader, Writer, CNO_LIVE, META_HEADER_SIZE,
};
use crate::{Error, Result};

/// A merge is due once the journal, after the checkpoint, would take at
/// least `1/JOURNAL_SHARE` of the blocks a merge writes: each merge then
/// costs at most `JOURNAL_SHARE` times the journal it saved, and the
/// journal holds at most half the space of the DAT blocks it stands for.
pub const JOURNAL_SHARE: u64 = 2;

/// Most blocks the journal grows to before a merge is due whatever it
/// costs (16 MiB at 4 KiB): bounds the records held in memory and read
/// at mount on large filesystems.
pub const MAX_JOURNAL_BLOCKS: u64 = 4096;

/// The translation table.
#[derive(Debug, Clone)]
pub struct Dat {
    entries: Vec<DatEntry>,
    /// Reusable numbers, lowest first: consecutive allocations land in
    /// few DAT blocks.
    free: BTreeSet<u64>,
    pending: Vec<u64>,
    per_block: u64,
    /// Numbers changed since the last checkpoint: its journal records.
    changed: BTreeSet<u64>,
    /// DAT blocks whose copy on disk is older than the journal: a merge
    /// writes them.
    stale: BTreeSet<u64>,
    /// DAT blocks the next checkpoint writes whatever it decides
    /// (cleaning moves them out of their segment).
    force: BTreeSet<u64>,
    /// The journal on disk, in order.
    journal: Vec<DatRecord>,
    /// Journal blocks the next checkpoint rewrites (cleaning).
    journal_force: BTreeSet<u64>,
    /// Entries [`is_current`]: kept as they change, not counted at each
    /// checkpoint (a scan of the whole table under the state lock).
    current: u64,
    /// Bit `v` set if entry `v` [`is_retired`]: a cleaner's expiry of old
    /// checkpoints looks only at these, twice a pass. Scanning the whole
    /// table for them under the state lock (half a million entries on a
    /// 2 GiB filesystem) stalled writes for milliseconds every pass.
    retired: Vec<u64>,
    /// Retired numbers grouped by the checkpoint that retired them
    /// (`end_cno`): deleting the oldest checkpoints looks only at the
    /// groups those checkpoints ended ([`Self::retired_ending_in`]), not
    /// at every retired entry. A number is added when it is retired (or
    /// its end changes); one since freed, reused or moved to another end
    /// stays in its old group until that group is read, which drops it.
    by_end: BTreeMap<u64, Vec<u64>>,
}

/// Whether `e` is kept only for checkpoints: placed, then retired.
fn is_retired(e: &DatEntry) -> bool {
    e.phys != 0 && e.phys != u64::MAX && e.end_cno != CNO_LIVE
}

/// Whether `e` is used by the current state (placed or being placed).
fn is_current(e: &DatEntry) -> bool {
    e.phys != 0 && e.end_cno == CNO_LIVE
}

/// What the next checkpoint writes of the DAT ([`Dat::plan_write`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatWrite {
    /// It writes every stale DAT block and empties the journal.
    pub merge: bool,
    /// The DAT blocks it writes.
    pub blocks: BTreeSet<u64>,
    /// The journal blocks it writes (none when merging).
    pub journal_blocks: BTreeSet<u64>,
    /// Records in the journal after it.
    pub journal_len: u64,
}

impl Dat {
    /// A table holding `entries` (slot = virtual block number), with an
    /// empty journal.
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
        let current = entries.iter().filter(|e| is_current(e)).count() as u64;
        let mut retired = vec![0u64; entries.len().div_ceil(64)];
        let mut by_end: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for (v, e) in entries.iter().enumerate().filter(|(_, e)| is_retired(e)) {
            retired[v / 64] |= 1 << (v % 64);
            by_end.entry(e.end_cno).or_default().push(v as u64);
        }
        Dat {
            entries,
            free,
            pending: Vec::new(),
            per_block: MetaKind::Dat.per_block(block_size) as u64,
            changed: BTreeSet::new(),
            stale: BTreeSet::new(),
            force: BTreeSet::new(),
            journal: Vec::new(),
            journal_force: BTreeSet::new(),
            current,
            retired,
            by_end,
        }
    }

    /// Sets `v`'s entry (`v` within the table), keeping the count of
    /// current entries and the set of retired ones.
    fn set(&mut self, v: u64, e: DatEntry) {
        let old = std::mem::replace(&mut self.entries[v as usize], e);
        match (is_current(&old), is_current(&e)) {
            (false, true) => self.current += 1,
            (true, false) => self.current -= 1,
            _ => {}
        }
        if is_retired(&old) != is_retired(&e) {
            let (w, bit) = (v as usize / 64, 1u64 << (v % 64));
            if w >= self.retired.len() {
                self.retired.resize(w + 1, 0);
            }
            self.retired[w] ^= bit;
        }
        if is_retired(&e) && (!is_retired(&old) || old.end_cno != e.end_cno) {
            self.by_end.entry(e.end_cno).or_default().push(v);
        }
    }

    /// Decodes the DAT from its blocks (in file order; `None` = hole) and
    /// applies the first `nrecords` records of the journal's blocks.
    pub fn load(
        blocks: &[Option<Vec<u8>>],
        nslots: u64,
        journal: &[Vec<u8>],
        nrecords: u64,
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
                        let corrupt = |source| Error::Corrupted {
                            what: "DAT block",
                            location: format!("DAT block {bi}"),
                            reason: source,
                        };
                        if j == 0 {
                            MetaBlockHeader::verify(b, MetaKind::Dat, seed).map_err(corrupt)?;
                        }
                        DatEntry::decode(record(b, j).map_err(corrupt)?).map_err(corrupt)?
                    }
                };
                entries.push(e);
            }
        }
        entries.resize(nslots as usize, DatEntry::default());
        let records = decode_journal(journal, nrecords, block_size, seed)?;
        for r in &records {
            let i = r.vblock as usize;
            if i >= entries.len() {
                return Err(Error::Corrupted {
                    what: "DAT journal record",
                    location: format!("virtual block {}", r.vblock),
                    reason: crate::format::DecodeError::InvalidField {
                        what: "DAT journal record",
                        field: "virtual block beyond the DAT",
                        value: r.vblock,
                    },
                });
            }
            entries[i] = r.entry;
        }
        let mut d = Dat::new(entries, block_size);
        d.stale = records.iter().map(|r| r.vblock / d.per_block).collect();
        d.journal = records;
        Ok(d)
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

    fn touch(&mut self, v: u64) {
        self.changed.insert(v);
        self.stale.insert(v / self.per_block);
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
        self.set(
            v,
            DatEntry {
                phys: u64::MAX,
                start_cno: 0,
                end_cno: CNO_LIVE,
            },
        );
        v
    }

    /// Points `v` at `phys`, live from checkpoint `cno`.
    pub fn assign(&mut self, v: u64, phys: u64, cno: u64) {
        self.set(
            v,
            DatEntry {
                phys,
                start_cno: cno,
                end_cno: CNO_LIVE,
            },
        );
        self.touch(v);
    }

    /// Retires `v` from the current state: checkpoints before `end_cno`
    /// still see it, so it keeps its block (and its segment's live count)
    /// until [`Self::free`]. A number allocated but never assigned is freed
    /// at once, and so is one no checkpoint can see (placed by a data-sync
    /// log since the last checkpoint: live from `end_cno` itself); for
    /// that one the block it held is returned, for the caller to drop from
    /// its segment's live count.
    pub fn retire(&mut self, v: u64, end_cno: u64) -> Option<u64> {
        let e = *self.entries.get(v as usize)?;
        if e.phys == 0 {
            return None;
        }
        let mut freed = None;
        if e.phys == u64::MAX {
            self.set(v, DatEntry::default());
            self.pending.push(v);
        } else if e.start_cno >= end_cno {
            freed = Some(e.phys);
            self.set(v, DatEntry::default());
            self.pending.push(v);
        } else {
            self.set(v, DatEntry { end_cno, ..e });
        }
        self.touch(v);
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
        self.set(
            v,
            DatEntry {
                phys: u64::MAX,
                start_cno: 0,
                end_cno: CNO_LIVE,
            },
        );
        true
    }

    /// Frees `v` (retired, and kept by no valid checkpoint): returns its
    /// physical address, for the caller to drop from its segment's live
    /// count. The number is reusable once the current checkpoint is
    /// durable.
    pub fn free(&mut self, v: u64) -> u64 {
        let Some(&e) = self.entries.get(v as usize) else {
            return 0;
        };
        let phys = e.phys;
        if phys == 0 {
            return 0;
        }
        self.set(v, DatEntry::default());
        self.touch(v);
        self.pending.push(v);
        if phys == u64::MAX {
            0
        } else {
            phys
        }
    }

    /// Moves `v` to physical block `phys` (cleaning), keeping its lifetime.
    pub fn relocate(&mut self, v: u64, phys: u64) {
        if let Some(&e) = self.entries.get(v as usize) {
            self.set(v, DatEntry { phys, ..e });
            self.touch(v);
        }
    }

    /// Retired entries still holding a block: (virtual, entry).
    pub fn iter_retired(&self) -> impl Iterator<Item = (u64, DatEntry)> + '_ {
        debug_assert_eq!(
            self.retired
                .iter()
                .map(|w| u64::from(w.count_ones()))
                .sum::<u64>(),
            self.entries.iter().filter(|e| is_retired(e)).count() as u64
        );
        self.retired
            .iter()
            .enumerate()
            .filter(|(_, &w)| w != 0)
            .flat_map(|(i, &w)| {
                (0..64)
                    .filter(move |b| w & (1 << b) != 0)
                    .map(move |b| (i * 64 + b) as u64)
            })
            .map(|v| (v, self.entries[v as usize]))
    }

    /// Retired entries still holding a block whose `end_cno` is in
    /// `ends`: (virtual, entry), by end then number. Costs the groups it
    /// reads (and forgets their stale members), not the whole table.
    pub fn retired_ending_in(
        &mut self,
        ends: std::ops::RangeInclusive<u64>,
    ) -> Vec<(u64, DatEntry)> {
        let entries = &self.entries;
        let mut out = Vec::new();
        if ends.is_empty() {
            return out;
        }
        let mut emptied = Vec::new();
        for (&end, group) in self.by_end.range_mut(ends) {
            group.retain(|&v| {
                let e = &entries[v as usize];
                is_retired(e) && e.end_cno == end
            });
            group.sort_unstable();
            group.dedup();
            if group.is_empty() {
                emptied.push(end);
            }
            out.extend(group.iter().map(|&v| (v, entries[v as usize])));
        }
        for end in emptied {
            self.by_end.remove(&end);
        }
        out
    }

    /// Entries used by the current state.
    pub fn count_current(&self) -> u64 {
        debug_assert_eq!(
            self.current,
            self.entries.iter().filter(|e| is_current(e)).count() as u64
        );
        self.current
    }

    /// Called when the checkpoint that retired the pending numbers is
    /// durable: they become reusable.
    pub fn release_pending(&mut self) {
        self.free.extend(self.pending.drain(..));
    }

    /// Makes the next checkpoint write DAT file block `b` (cleaning moves
    /// it out of its segment).
    pub fn force_block(&mut self, b: u64) {
        self.force.insert(b);
    }

    /// Makes the next checkpoint rewrite journal block `b` (cleaning moves
    /// it out of its segment); nothing if a merge empties the journal.
    pub fn force_journal_block(&mut self, b: u64) {
        self.journal_force.insert(b);
    }

    /// Records in the journal.
    pub fn journal_len(&self) -> u64 {
        self.journal.len() as u64
    }

    /// Blocks the journal grows by when `n` more entries change before the
    /// next checkpoint (its last block rewritten included): what booking
    /// a change of `n` entries costs the next checkpoint, merge or not
    /// (a merge is only made in free room).
    pub fn cost_of_changes(&self, n: u64) -> u64 {
        if n == 0 && self.changed.is_empty() {
            // The next checkpoint writes no journal block.
            return 0;
        }
        let len = self.journal.len() as u64;
        let before = (len + self.changed.len() as u64).div_ceil(self.per_block);
        let after = (len + self.changed.len() as u64 + n).div_ceil(self.per_block);
        after - before + 1
    }

    /// Whether a merge is due with a journal of `jblocks` blocks standing
    /// for `stale` DAT blocks.
    fn merge_due(jblocks: u64, stale: u64) -> bool {
        jblocks * JOURNAL_SHARE >= stale || jblocks > MAX_JOURNAL_BLOCKS
    }

    /// Blocks a due merge would write: what free space must keep for it.
    /// Without this booking, a nearly full filesystem never had the room
    /// (writers took every block the cleaner freed) and the journal grew
    /// past the DAT itself (measured: 3,700 blocks for a 477-block DAT
    /// at 90 %); once due, the merge waits for the cleaner, as writers do.
    pub fn merge_booking(&self) -> u64 {
        let jblocks = self.journal_len().div_ceil(self.per_block);
        let stale = self.stale.len() as u64;
        if jblocks > 0 && Self::merge_due(jblocks, stale) {
            // With the DAT's indirect blocks on their paths.
            stale + stale / 256 + 2
        } else {
            0
        }
    }

    /// What the next checkpoint writes of the DAT, if it also changes the
    /// entries of `also` (new and moved blocks): a merge if one is due
    /// and costs at most `room` blocks more than journaling.
    pub fn plan_write(&self, also: &[u64], room: u64) -> DatWrite {
        let per = self.per_block;
        let mut records: BTreeSet<u64> = self.changed.clone();
        records.extend(also.iter().copied());
        let len = self.journal.len() as u64;
        let new_len = len + records.len() as u64;
        let jblocks = new_len.div_ceil(per);
        let mut stale = self.stale.clone();
        stale.extend(records.iter().map(|v| v / per));
        stale.extend(self.force.iter().copied());
        // Journaling: the records from the last, partly filled, block on,
        // the force-written DAT blocks, and the journal blocks cleaning
        // moves.
        let journal_blocks: BTreeSet<u64> = (len / per..jblocks)
            .chain(self.journal_force.iter().copied().filter(|&b| b < jblocks))
            .collect();
        let journal_cost = journal_blocks.len() as u64 + self.force.len() as u64;
        let due = Self::merge_due(jblocks, stale.len() as u64);
        if due && stale.len() as u64 <= journal_cost.saturating_add(room) {
            return DatWrite {
                merge: true,
                blocks: stale,
                journal_blocks: BTreeSet::new(),
                journal_len: 0,
            };
        }
        DatWrite {
            merge: false,
            blocks: self.force.clone(),
            journal_blocks,
            journal_len: new_len,
        }
    }

    /// Applies `w` once every entry of the checkpoint is final: appends
    /// the changed entries to the journal, or empties it for a merge.
    /// The blocks `w` names are then encoded with [`Self::encode_block`]
    /// and [`Self::encode_journal_block`].
    pub fn apply_write(&mut self, w: &DatWrite) {
        let changed = std::mem::take(&mut self.changed);
        if w.merge {
            self.journal.clear();
            self.stale.clear();
        } else {
            let entries = &self.entries;
            self.journal.extend(changed.iter().map(|&v| DatRecord {
                vblock: v,
                entry: entries[v as usize],
            }));
            debug_assert_eq!(self.journal.len() as u64, w.journal_len);
            for b in &w.blocks {
                // Written as they are now: no longer older than the
                // journal.
                self.stale.remove(b);
            }
        }
        self.force.clear();
        self.journal_force.clear();
    }

    /// DAT file blocks needed for the current slots.
    pub fn nblocks(&self) -> u64 {
        self.nslots().div_ceil(self.per_block)
    }

    /// Encodes DAT file block `b`.
    pub fn encode_block(&self, b: u64, block_size: usize, seed: u32) -> Vec<u8> {
        let mut w = Writer::with_capacity(block_size);
        w.zeros(META_HEADER_SIZE);
        for v in b * self.per_block..(b + 1) * self.per_block {
            let e = self.entries.get(v as usize).copied().unwrap_or_default();
            e.encode_into(&mut w);
        }
        w.zeros(block_size - w.len());
        let mut blk = w.into_vec();
        MetaBlockHeader::seal(&mut blk, MetaKind::Dat, seed);
        blk
    }

    /// Encodes journal block `b` (zero records past the journal's end).
    pub fn encode_journal_block(&self, b: u64, block_size: usize, seed: u32) -> Vec<u8> {
        let mut w = Writer::with_capacity(block_size);
        w.zeros(META_HEADER_SIZE);
        let from = (b * self.per_block) as usize;
        let to = ((b + 1) * self.per_block) as usize;
        for r in self
            .journal
            .get(from..to.min(self.journal.len()))
            .unwrap_or(&[])
        {
            r.encode_into(&mut w);
        }
        w.zeros(block_size - w.len());
        let mut blk = w.into_vec();
        MetaBlockHeader::seal(&mut blk, MetaKind::DatJournal, seed);
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

/// Record `j` of a DAT or journal block.
fn record(b: &[u8], j: usize) -> std::result::Result<&[u8], crate::format::DecodeError> {
    let mut r = Reader::new(b, "DAT record", 0)?;
    r.skip(META_HEADER_SIZE + j * MetaKind::Dat.record_size())?;
    r.bytes(MetaKind::Dat.record_size())
}

/// The first `nrecords` records of the journal's blocks, in order.
fn decode_journal(
    blocks: &[Vec<u8>],
    nrecords: u64,
    block_size: usize,
    seed: u32,
) -> Result<Vec<DatRecord>> {
    let per = MetaKind::DatJournal.per_block(block_size);
    let mut out = Vec::with_capacity(nrecords as usize);
    for (bi, b) in blocks.iter().enumerate() {
        let corrupt = |source| Error::Corrupted {
            what: "DAT journal block",
            location: format!("DAT journal block {bi}"),
            reason: source,
        };
        MetaBlockHeader::verify(b, MetaKind::DatJournal, seed).map_err(corrupt)?;
        for j in 0..per {
            if out.len() as u64 >= nrecords {
                return Ok(out);
            }
            out.push(DatRecord::decode(record(b, j).map_err(corrupt)?).map_err(corrupt)?);
        }
    }
    if (out.len() as u64) < nrecords {
        return Err(Error::Corrupted {
            what: "DAT journal",
            location: format!("{} records in {} blocks", nrecords, blocks.len()),
            reason: crate::format::DecodeError::InvalidField {
                what: "DAT journal",
                field: "record count",
                value: nrecords,
            },
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes what `w` says as a checkpoint would, returning the DAT
    /// blocks and the journal's blocks (file order) as the disk then
    /// holds them.
    fn write(
        d: &mut Dat,
        w: &DatWrite,
        disk: &mut Vec<Option<Vec<u8>>>,
        journal: &mut Vec<Vec<u8>>,
    ) {
        d.apply_write(w);
        disk.resize(d.nblocks() as usize, None);
        for &b in &w.blocks {
            disk[b as usize] = Some(d.encode_block(b, 1024, 5));
        }
        if w.merge {
            journal.clear();
        }
        for &b in &w.journal_blocks {
            let blk = d.encode_journal_block(b, 1024, 5);
            if (b as usize) < journal.len() {
                journal[b as usize] = blk;
            } else {
                journal.push(blk);
            }
        }
    }

    /// The retired set follows every change: random allocations,
    /// placements, retirements (some at once freed), frees, claims and
    /// reloads, against a scan of the whole table.
    #[test]
    fn retired_entries_are_tracked_through_every_change() {
        let scan = |d: &Dat| -> Vec<(u64, DatEntry)> {
            d.entries
                .iter()
                .enumerate()
                .filter(|(_, e)| is_retired(e))
                .map(|(v, e)| (v as u64, *e))
                .collect()
        };
        let mut d = Dat::new(vec![DatEntry::default()], 1024);
        let mut rng = 0x9e37_79b9_u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut cno = 2;
        for i in 0..2000 {
            let r = next();
            let v = 1 + r % d.nslots().max(1);
            match (r >> 32) % 6 {
                0 | 1 => {
                    let v = d.alloc();
                    d.assign(v, 1000 + v, cno);
                }
                2 => {
                    d.retire(v, cno);
                }
                3 => {
                    if d.entry(v).end_cno != CNO_LIVE {
                        d.free(v);
                    }
                }
                4 => {
                    d.claim(d.nslots() + r % 70);
                    cno += 1;
                    d.release_pending();
                }
                _ => cno += 1,
            }
            if i % 300 == 0 {
                d = Dat::new(d.entries.clone(), 1024);
            }
            assert_eq!(
                d.iter_retired().collect::<Vec<_>>(),
                scan(&d),
                "after step {i}"
            );
            if i % 7 == 0 {
                // The groups by end hold the same entries, whatever was
                // read of them before.
                let lo = r % (cno + 1);
                let mut by_end = d.retired_ending_in(lo..=cno);
                by_end.sort_by_key(|&(v, _)| v);
                let mut want = scan(&d);
                want.retain(|(_, e)| e.end_cno >= lo);
                assert_eq!(by_end, want, "after step {i}, ends from {lo}");
            }
        }
        assert!(!scan(&d).is_empty());
    }

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
        d.assign(1, 200, 4);
        d.assign(3, 201, 4);
        let blk = d.encode_block(0, 1024, 5);
        let l = Dat::load(&[Some(blk)], d.nslots(), &[], 0, 1024, 5).unwrap();
        assert_eq!(l.phys(1), 200);
        assert_eq!(l.phys(2), 101);
        assert_eq!(l.phys(3), 201);
        assert_eq!(l.nslots(), 4);
    }

    #[test]
    fn changes_go_to_the_journal_until_a_merge_is_due() {
        // 1 KiB blocks: 31 entries or records a block.
        let per = MetaKind::Dat.per_block(1024) as u64;
        let mut d = Dat::new(vec![DatEntry::default()], 1024);
        let (mut disk, mut journal) = (Vec::new(), Vec::new());
        // 200 blocks' worth of entries, written once (a merge: nothing
        // in the journal yet is cheaper than the blocks).
        let vs: Vec<u64> = (0..200 * per).map(|_| d.alloc()).collect();
        let w = d.plan_write(&vs, u64::MAX);
        for &v in &vs {
            d.assign(v, 1000 + v, 2);
        }
        assert!(w.merge);
        assert_eq!(w.blocks.len() as u64, d.nblocks());
        write(&mut d, &w, &mut disk, &mut journal);
        // Scattered changes: one entry in each of 40 blocks, a checkpoint
        // after another. They are journaled, a block or two each time,
        // not 40 DAT blocks.
        let mut rounds = 0;
        loop {
            for k in 0..40 {
                let v = vs[((rounds * 41 + k * 97) % vs.len() as u64) as usize];
                d.relocate(v, 5000 + rounds);
            }
            let w = d.plan_write(&[], u64::MAX);
            rounds += 1;
            if w.merge {
                // Due once the journal is half the size of the stale
                // blocks; the merge writes every one of them.
                assert!(journal.len() as u64 * JOURNAL_SHARE + 2 >= w.blocks.len() as u64);
                write(&mut d, &w, &mut disk, &mut journal);
                assert_eq!(d.journal_len(), 0);
                break;
            }
            assert!(w.blocks.is_empty());
            assert!(w.journal_blocks.len() <= 3, "{w:?}");
            write(&mut d, &w, &mut disk, &mut journal);
            assert_eq!(d.journal_len(), rounds * 40);
            // Blocks plus journal give the current table at every step.
            let l = Dat::load(&disk, d.nslots(), &journal, d.journal_len(), 1024, 5).unwrap();
            assert!(vs.iter().all(|&v| l.entry(v) == d.entry(v)));
            assert!(rounds < 100, "no merge came");
        }
        assert!(rounds > 5, "merged after {rounds} rounds");
        let l = Dat::load(&disk, d.nslots(), &journal, 0, 1024, 5).unwrap();
        assert!(vs.iter().all(|&v| l.entry(v) == d.entry(v)));
    }

    #[test]
    fn a_merge_waits_for_room_and_forced_blocks_are_written_current() {
        let per = MetaKind::Dat.per_block(1024) as u64;
        let mut d = Dat::new(vec![DatEntry::default()], 1024);
        let (mut disk, mut journal) = (Vec::new(), Vec::new());
        let vs: Vec<u64> = (0..50 * per).map(|_| d.alloc()).collect();
        for &v in &vs {
            d.assign(v, 10 + v, 1);
        }
        let w = d.plan_write(&[], u64::MAX);
        write(&mut d, &w, &mut disk, &mut journal);
        // Without room a merge that is due is put off (journaled instead)
        // unless it writes no more than journaling: two changes a round
        // take at most 2 journal blocks.
        let mut merges = 0;
        for r in 0..500 {
            d.relocate(vs[(r * 31 % vs.len() as u64) as usize], 7000 + r);
            d.retire(vs[(r * 17 % vs.len() as u64) as usize], 9);
            let w = d.plan_write(&[], 0);
            assert!(!w.merge || w.blocks.len() <= 2, "{w:?}");
            merges += u64::from(w.merge);
            if r == 150 {
                // Cleaning moves DAT block 3 and journal block 0: both are
                // rewritten, the DAT block with its current entries.
                d.force_block(3);
                d.force_journal_block(0);
                let w = d.plan_write(&[], 0);
                assert!(w.blocks.contains(&3) && w.journal_blocks.contains(&0));
                write(&mut d, &w, &mut disk, &mut journal);
                continue;
            }
            write(&mut d, &w, &mut disk, &mut journal);
        }
        assert!(merges < 10, "{merges} merges");
        assert!(d.journal_len() > 2 * per);
        // Put off for want of room, a due merge is booked: free space
        // keeps what it writes, so it happens once a cleaner made room.
        let booked = d.merge_booking();
        assert!(booked >= d.stale.len() as u64 && booked > 0, "{booked}");
        let w = d.plan_write(&[], booked);
        assert!(w.merge, "{w:?}");
        let (old_disk, old_journal, old_len) = (disk.clone(), journal.clone(), d.journal_len());
        write(&mut d, &w, &mut disk, &mut journal);
        assert_eq!((d.journal_len(), d.merge_booking()), (0, 0));
        let l = Dat::load(&disk, d.nslots(), &journal, 0, 1024, 5).unwrap();
        assert!(vs.iter().all(|&v| l.entry(v) == d.entry(v)));
        let (disk, journal) = (old_disk, old_journal);
        let l = Dat::load(&disk, d.nslots(), &journal, old_len, 1024, 5).unwrap();
        assert!(vs.iter().all(|&v| l.entry(v) == d.entry(v)));
        // A journal cut short, or naming a block beyond the table, is
        // refused.
        assert!(matches!(
            Dat::load(&disk, d.nslots(), &journal[..1], old_len, 1024, 5),
            Err(Error::Corrupted { .. })
        ));
        assert!(matches!(
            Dat::load(&disk, 5, &journal, old_len, 1024, 5),
            Err(Error::Corrupted { .. })
        ));
    }
}
