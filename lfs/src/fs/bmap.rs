//! A file's block map in memory: offset → block address, with the
//! indirect blocks that store it on disk.
//!
//! The on-disk shape (lfs(5)) is the inode's 15 slots: 12 direct pointers,
//! then the roots of a single, double and triple indirect tree. Indirect
//! blocks hold `P = (block_size - 16) / 8` pointers after a metadata block
//! header. In memory the map keeps the direct pointers in an array, the
//! data pointers of each level-1 indirect block (a *leaf*) together
//! (`Leaf`: a sorted list while few are mapped, the block's whole pointer
//! array once many are, 8 bytes a pointer), and every indirect block's
//! address keyed by [`NodeId`]; writing the map back re-encodes only the
//! indirect blocks on the path of a changed pointer, a leaf by copying its
//! array. (One `BTreeMap` entry per data pointer cost about 30 bytes of
//! RAM a block, and encoding a leaf walked 500 tree entries under the
//! state lock: most of a random-write checkpoint's build.)
//!
//! Addresses are opaque here: virtual block numbers for user files and the
//! inode file, physical ones for the DAT, checkpoint and segment usage
//! files. 0 is a hole.

use std::collections::{BTreeMap, BTreeSet};

use crate::format::{
    DecodeError, MetaBlockHeader, MetaKind, Reader, BMAP_DIRECT, BMAP_SLOTS, META_HEADER_SIZE,
    NODE_PTR_SIZE,
};

/// An indirect block: tree (1 single, 2 double, 3 triple), its level
/// (1 = points at data) and its index among the nodes of that level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId {
    /// Level first, so that sorting yields bottom-up order.
    pub level: u8,
    /// Which tree.
    pub tree: u8,
    /// Index among this tree's nodes of this level.
    pub index: u64,
}

/// Pointers per indirect block.
pub fn ptrs_per_node(block_size: usize) -> u64 {
    ((block_size - META_HEADER_SIZE) / NODE_PTR_SIZE) as u64
}

/// The data pointers of one leaf (level-1 indirect block), by slot.
/// Never holds a zero address; an empty leaf is dropped from the map.
#[derive(Debug, Clone)]
enum Leaf {
    /// (slot, address), sorted by slot: while at most [`dense_at`] are
    /// mapped (16 bytes each).
    Sparse(Vec<(u32, u64)>),
    /// Every slot of the block (0 a hole), `n` of them mapped.
    Dense { ptrs: Box<[u64]>, n: usize },
}

/// Mapped slots beyond which a sparse leaf becomes dense: where the array
/// (8 bytes a slot) costs no more than the list's 16 bytes an entry.
fn dense_at(p: u64) -> usize {
    (p / 2) as usize
}

/// Mapped slots below which a dense leaf becomes sparse again (half of
/// [`dense_at`], so that one block going and coming does not convert it
/// back and forth).
fn sparse_below(p: u64) -> usize {
    (p / 4) as usize
}

impl Leaf {
    fn len(&self) -> usize {
        match self {
            Leaf::Sparse(v) => v.len(),
            Leaf::Dense { n, .. } => *n,
        }
    }

    fn get(&self, slot: u64) -> u64 {
        match self {
            Leaf::Sparse(v) => v
                .binary_search_by_key(&(slot as u32), |&(s, _)| s)
                .map_or(0, |i| v[i].1),
            Leaf::Dense { ptrs, .. } => ptrs[slot as usize],
        }
    }

    /// Sets `slot` to `addr` (0 unmaps it); returns the old address.
    fn set(&mut self, slot: u64, addr: u64, p: u64) -> u64 {
        let old = match self {
            Leaf::Sparse(v) => match v.binary_search_by_key(&(slot as u32), |&(s, _)| s) {
                Ok(i) if addr == 0 => v.remove(i).1,
                Ok(i) => std::mem::replace(&mut v[i].1, addr),
                Err(_) if addr == 0 => 0,
                Err(i) => {
                    v.insert(i, (slot as u32, addr));
                    0
                }
            },
            Leaf::Dense { ptrs, n } => {
                let old = std::mem::replace(&mut ptrs[slot as usize], addr);
                match (old, addr) {
                    (0, a) if a != 0 => *n += 1,
                    (o, 0) if o != 0 => *n -= 1,
                    _ => {}
                }
                old
            }
        };
        self.reshape(p);
        old
    }

    /// Converts between the two forms at their thresholds.
    fn reshape(&mut self, p: u64) {
        match self {
            Leaf::Sparse(v) if v.len() > dense_at(p) => {
                let mut ptrs = vec![0u64; p as usize].into_boxed_slice();
                for &(s, a) in v.iter() {
                    ptrs[s as usize] = a;
                }
                *self = Leaf::Dense { ptrs, n: v.len() };
            }
            Leaf::Dense { ptrs, n } if *n < sparse_below(p) => {
                let v = (0u32..)
                    .zip(ptrs.iter())
                    .filter(|&(_, &a)| a != 0)
                    .map(|(s, &a)| (s, a))
                    .collect();
                *self = Leaf::Sparse(v);
            }
            _ => {}
        }
    }

    /// The mapped slots, in order, as (slot, address).
    fn iter(&self) -> Box<dyn Iterator<Item = (u64, u64)> + '_> {
        match self {
            Leaf::Sparse(v) => Box::new(v.iter().map(|&(s, a)| (u64::from(s), a))),
            Leaf::Dense { ptrs, .. } => Box::new(
                (0u64..)
                    .zip(ptrs.iter())
                    .filter(|&(_, &a)| a != 0)
                    .map(|(s, &a)| (s, a)),
            ),
        }
    }
}

/// The block map of one file.
#[derive(Debug, Clone)]
pub struct BlockMap {
    p: u64,
    /// The inode's direct pointers.
    direct: [u64; BMAP_DIRECT],
    /// The leaves with a mapped slot, by the data offset of their slot 0.
    leaves: BTreeMap<u64, Leaf>,
    /// Mapped data blocks.
    len: usize,
    nodes: BTreeMap<NodeId, u64>,
    /// Changed since [`Self::take_dirty_nodes`]: direct offsets as such,
    /// others as the first offset of their leaf (the same path).
    dirty: BTreeSet<u64>,
}

impl BlockMap {
    /// An empty map for `block_size` blocks.
    pub fn new(block_size: usize) -> Self {
        BlockMap {
            p: ptrs_per_node(block_size),
            direct: [0; BMAP_DIRECT],
            leaves: BTreeMap::new(),
            len: 0,
            nodes: BTreeMap::new(),
            dirty: BTreeSet::new(),
        }
    }

    /// The leaf key (first data offset of its leaf) and slot of data
    /// offset `off`, or None for direct offsets.
    fn leaf_of(&self, off: u64) -> Option<(u64, u64)> {
        let (tree, rel) = self.locate(off)?;
        Some((self.base(tree) + rel / self.p * self.p, rel % self.p))
    }

    /// One past the largest file block offset a map can hold.
    pub fn max_offset(&self) -> u64 {
        let p = self.p;
        BMAP_DIRECT as u64 + p + p * p + p * p * p
    }

    /// First data offset of tree `t` (1 to 3).
    fn base(&self, t: u8) -> u64 {
        let p = self.p;
        match t {
            1 => BMAP_DIRECT as u64,
            2 => BMAP_DIRECT as u64 + p,
            _ => BMAP_DIRECT as u64 + p + p * p,
        }
    }

    /// The tree and position within it of data offset `off`, or None for
    /// direct offsets.
    fn locate(&self, off: u64) -> Option<(u8, u64)> {
        if off < BMAP_DIRECT as u64 {
            return None;
        }
        let t = (1..=3u8).rev().find(|&t| off >= self.base(t)).unwrap_or(1);
        Some((t, off - self.base(t)))
    }

    /// The node of `level` on the path to data offset `off`.
    fn node_for(&self, off: u64, level: u8) -> Option<NodeId> {
        let (tree, rel) = self.locate(off)?;
        (level <= tree).then(|| NodeId {
            level,
            tree,
            index: rel / self.p.pow(u32::from(level)),
        })
    }

    /// Loads the map of an inode whose slots are `root`, reading indirect
    /// blocks with `read(address)`, which returns the verified block.
    pub fn load(
        block_size: usize,
        root: &[u64; BMAP_SLOTS],
        read: &mut dyn FnMut(u64) -> crate::Result<Vec<u8>>,
    ) -> crate::Result<Self> {
        let mut m = BlockMap::new(block_size);
        for (i, &a) in root.iter().take(BMAP_DIRECT).enumerate() {
            if a != 0 {
                m.direct[i] = a;
                m.len += 1;
            }
        }
        for t in 1..=3u8 {
            let a = root[BMAP_DIRECT + usize::from(t) - 1];
            if a != 0 {
                let id = NodeId {
                    level: t,
                    tree: t,
                    index: 0,
                };
                m.load_node(id, a, read)?;
            }
        }
        Ok(m)
    }

    fn load_node(
        &mut self,
        id: NodeId,
        addr: u64,
        read: &mut dyn FnMut(u64) -> crate::Result<Vec<u8>>,
    ) -> crate::Result<()> {
        self.nodes.insert(id, addr);
        let block = read(addr)?;
        let ptrs = decode_node(&block).map_err(|source| crate::Error::Corrupted {
            what: "indirect block",
            location: format!("block address {addr}"),
            reason: source,
        })?;
        if id.level == 1 {
            let start = self.base(id.tree) + id.index * self.p;
            let n = ptrs.iter().filter(|&&a| a != 0).count();
            if n > 0 {
                let mut leaf = Leaf::Dense {
                    ptrs: ptrs.into_boxed_slice(),
                    n,
                };
                leaf.reshape(self.p);
                self.leaves.insert(start, leaf);
                self.len += n;
            }
            return Ok(());
        }
        for (j, a) in ptrs.into_iter().enumerate() {
            if a == 0 {
                continue;
            }
            let child = id.index * self.p + j as u64;
            {
                let cid = NodeId {
                    level: id.level - 1,
                    tree: id.tree,
                    index: child,
                };
                self.load_node(cid, a, read)?;
            }
        }
        Ok(())
    }

    /// Address of data block `off`, 0 for a hole.
    pub fn get(&self, off: u64) -> u64 {
        match self.leaf_of(off) {
            None => self.direct[off as usize],
            Some((start, slot)) => self.leaves.get(&start).map_or(0, |l| l.get(slot)),
        }
    }

    /// Sets the address of data block `off` (0 removes it); returns the old
    /// address (0 if none).
    pub fn set(&mut self, off: u64, addr: u64) -> u64 {
        let old = match self.leaf_of(off) {
            None => {
                self.dirty.insert(off);
                std::mem::replace(&mut self.direct[off as usize], addr)
            }
            Some((start, slot)) => {
                self.dirty.insert(start);
                match self.leaves.entry(start) {
                    std::collections::btree_map::Entry::Occupied(mut e) => {
                        let old = e.get_mut().set(slot, addr, self.p);
                        if e.get().len() == 0 {
                            e.remove();
                        }
                        old
                    }
                    std::collections::btree_map::Entry::Vacant(e) => {
                        if addr != 0 {
                            e.insert(Leaf::Sparse(vec![(slot as u32, addr)]));
                        }
                        0
                    }
                }
            }
        };
        match (old, addr) {
            (0, a) if a != 0 => self.len += 1,
            (o, 0) if o != 0 => self.len -= 1,
            _ => {}
        }
        old
    }

    /// Data offsets at or after `from` that are mapped.
    pub fn offsets_from(&self, from: u64) -> Vec<u64> {
        self.iter_from(from).map(|(o, _)| o).collect()
    }

    /// All (offset, address) pairs, by offset.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.iter_from(0)
    }

    /// The (offset, address) pairs at or after `from`, by offset.
    fn iter_from(&self, from: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let first_leaf = self.leaf_of(from).map_or(0, |(start, _)| start);
        (0u64..)
            .zip(self.direct.iter())
            .filter(|&(_, &a)| a != 0)
            .map(|(o, &a)| (o, a))
            .chain(
                self.leaves
                    .range(first_leaf..)
                    .flat_map(|(&start, leaf)| leaf.iter().map(move |(s, a)| (start + s, a))),
            )
            .filter(move |&(o, _)| o >= from)
    }

    /// All indirect block addresses.
    pub fn node_addrs(&self) -> impl Iterator<Item = (NodeId, u64)> + '_ {
        self.nodes.iter().map(|(&n, &a)| (n, a))
    }

    /// Mapped data blocks.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True if a pointer changed since the last [`Self::take_dirty_nodes`].
    pub fn is_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// The indirect blocks that must be rewritten (or removed), bottom-up,
    /// and clears the dirty set. Each must then get an address with
    /// [`Self::set_node`] (or be dropped with [`Self::remove_node`] when
    /// [`Self::node_is_empty`]) before its parent is encoded.
    pub fn take_dirty_nodes(&mut self) -> Vec<NodeId> {
        let nodes = self.nodes_on_paths(&self.dirty);
        self.dirty.clear();
        nodes
    }

    /// The indirect blocks on the paths to data offsets `offs`, bottom-up:
    /// those a change of those offsets rewrites (whatever is mapped).
    pub fn nodes_on_paths(&self, offs: &BTreeSet<u64>) -> Vec<NodeId> {
        // The offsets are sorted, so each level's nodes come in order and
        // a repeat is always the last one seen: no set needed (a set
        // insert per offset and level was most of a large sequential
        // checkpoint's build).
        let mut levels: [Vec<NodeId>; 3] = Default::default();
        for &off in offs {
            for (level, nodes) in (1..=3u8).zip(levels.iter_mut()) {
                if let Some(n) = self.node_for(off, level) {
                    if nodes.last() != Some(&n) {
                        nodes.push(n);
                    }
                }
            }
        }
        // NodeId orders by level first: bottom-up.
        levels.concat()
    }

    /// The address currently recorded for `id`, 0 if none.
    pub fn node_addr(&self, id: NodeId) -> u64 {
        self.nodes.get(&id).copied().unwrap_or(0)
    }

    /// Records the new address of `id`; returns the old one (0 if none).
    pub fn set_node(&mut self, id: NodeId, addr: u64) -> u64 {
        self.nodes.insert(id, addr).unwrap_or(0)
    }

    /// Forgets `id`; returns its old address.
    pub fn remove_node(&mut self, id: NodeId) -> u64 {
        self.nodes.remove(&id).unwrap_or(0)
    }

    /// The children of `id` that are mapped, as (slot, address): a range
    /// of the data or node map, so only what exists is visited (an
    /// indirect block has hundreds of slots, mostly empty near a file's
    /// end, and the checkpoint writer visits every dirty one under the
    /// state lock).
    fn mapped_children(&self, id: NodeId) -> Box<dyn Iterator<Item = (u64, u64)> + '_> {
        let first = id.index * self.p;
        if id.level == 1 {
            match self.leaves.get(&(self.base(id.tree) + first)) {
                Some(leaf) => leaf.iter(),
                None => Box::new(std::iter::empty()),
            }
        } else {
            let at = |index| NodeId {
                level: id.level - 1,
                tree: id.tree,
                index,
            };
            Box::new(
                self.nodes
                    .range(at(first)..at(first + self.p))
                    .map(move |(n, &a)| (n.index - first, a)),
            )
        }
    }

    /// True if no child of `id` is mapped.
    pub fn node_is_empty(&self, id: NodeId) -> bool {
        self.mapped_children(id).all(|(_, a)| a == 0)
    }

    /// Encodes indirect block `id` from its children's current addresses.
    pub fn encode_node(&self, id: NodeId, block_size: usize, seed: u32) -> Vec<u8> {
        let mut b = vec![0u8; block_size];
        let leaf = (id.level == 1)
            .then(|| self.leaves.get(&(self.base(id.tree) + id.index * self.p)))
            .flatten();
        if let Some(Leaf::Dense { ptrs, .. }) = leaf {
            let body = &mut b[META_HEADER_SIZE..META_HEADER_SIZE + ptrs.len() * NODE_PTR_SIZE];
            for (dst, a) in body.chunks_exact_mut(NODE_PTR_SIZE).zip(ptrs.iter()) {
                dst.copy_from_slice(&a.to_le_bytes());
            }
        } else {
            for (j, a) in self.mapped_children(id) {
                let o = META_HEADER_SIZE + j as usize * NODE_PTR_SIZE;
                b[o..o + NODE_PTR_SIZE].copy_from_slice(&a.to_le_bytes());
            }
        }
        MetaBlockHeader::seal(&mut b, MetaKind::Node, seed);
        b
    }

    /// The inode's 15 slots for the current map.
    pub fn root(&self) -> [u64; BMAP_SLOTS] {
        let mut r = [0u64; BMAP_SLOTS];
        r[..BMAP_DIRECT].copy_from_slice(&self.direct);
        for t in 1..=3u8 {
            r[BMAP_DIRECT + usize::from(t) - 1] = self.node_addr(NodeId {
                level: t,
                tree: t,
                index: 0,
            });
        }
        r
    }
}

/// Verifies an indirect block's header (seed checked by the caller's
/// reader) and returns its pointers.
pub fn decode_node(block: &[u8]) -> Result<Vec<u64>, DecodeError> {
    let mut r = Reader::new(block, "indirect block", META_HEADER_SIZE)?;
    r.skip(META_HEADER_SIZE)?;
    let n = (block.len() - META_HEADER_SIZE) / NODE_PTR_SIZE;
    (0..n).map(|_| r.u64()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const BS: usize = 1024; // 126 pointers per node

    /// Writes the dirty nodes of `m` into `store`, giving each a fresh
    /// address, as the checkpoint writer does.
    fn flush(m: &mut BlockMap, store: &mut HashMap<u64, Vec<u8>>, next: &mut u64) {
        for id in m.take_dirty_nodes() {
            if m.node_is_empty(id) {
                m.remove_node(id);
            } else {
                *next += 1;
                m.set_node(id, *next);
                store.insert(*next, m.encode_node(id, BS, 0));
            }
        }
    }

    #[test]
    fn round_trip_through_all_three_trees() {
        let mut m = BlockMap::new(BS);
        let p = ptrs_per_node(BS);
        assert_eq!(p, 126);
        let offs = [
            0,
            11,
            12,
            12 + p - 1,
            12 + p,
            12 + p + p * p - 1,
            12 + p + p * p,
            m.max_offset() - 1,
        ];
        for (i, &o) in offs.iter().enumerate() {
            m.set(o, 1000 + i as u64);
        }
        let mut store = HashMap::new();
        let mut next = 0;
        flush(&mut m, &mut store, &mut next);
        let root = m.root();
        let mut read = |a: u64| Ok(store.get(&a).cloned().unwrap());
        let l = BlockMap::load(BS, &root, &mut read).unwrap();
        for (i, &o) in offs.iter().enumerate() {
            assert_eq!(l.get(o), 1000 + i as u64, "offset {o}");
        }
        assert_eq!(l.len(), offs.len());
        assert_eq!(l.get(13), 0);
    }

    /// Random sets and unsets against a plain map, through every leaf
    /// form and conversion, with flushes and reloads in between: `get`,
    /// `len`, `iter`, `offsets_from` and the encoded blocks agree with it.
    #[test]
    fn leaves_sparse_and_dense_agree_with_a_plain_map() {
        let p = ptrs_per_node(BS);
        let mut m = BlockMap::new(BS);
        let mut model: std::collections::BTreeMap<u64, u64> = Default::default();
        let mut store = HashMap::new();
        let mut next = 1 << 40;
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        // Offsets in the direct slots, the single tree and two leaves of
        // the double tree, so that leaves fill past dense_at and empty
        // below sparse_below.
        let span = [(0, 12 + p), (12 + p, 2 * p), (12 + p + 7 * p, p)];
        let (mut saw_dense, mut saw_sparse_again) = (false, false);
        for round in 0..40 {
            let fill = round % 4 < 2; // two rounds filling, two emptying
            for _ in 0..600 {
                let (lo, n) = span[rnd(3) as usize];
                let off = lo + rnd(n);
                let addr = if fill || rnd(4) == 0 {
                    1 + rnd(1 << 30)
                } else {
                    0
                };
                let old = m.set(off, addr);
                let want = if addr == 0 {
                    model.remove(&off)
                } else {
                    model.insert(off, addr)
                };
                assert_eq!(
                    old,
                    want.unwrap_or(0),
                    "set({off}, {addr}) in round {round}"
                );
            }
            assert_eq!(m.len(), model.len());
            let dense = m
                .leaves
                .values()
                .filter(|l| matches!(l, Leaf::Dense { .. }))
                .count();
            saw_sparse_again |= saw_dense && dense < m.leaves.len();
            for (&start, leaf) in &m.leaves {
                let n = model.range(start..start + p).count();
                assert!(n > 0, "an empty leaf at {start} was kept");
                assert_eq!(leaf.len(), n, "leaf at {start}");
                assert_eq!(leaf.iter().count(), n, "leaf at {start}");
            }
            saw_dense |= dense > 0;
            let got: Vec<(u64, u64)> = m.iter().collect();
            let want: Vec<(u64, u64)> = model.iter().map(|(&o, &a)| (o, a)).collect();
            assert_eq!(got, want, "round {round}");
            let from = rnd(12 + 9 * p);
            let want_from: Vec<u64> = model.range(from..).map(|(&o, _)| o).collect();
            assert_eq!(m.offsets_from(from), want_from, "from {from}");
            flush(&mut m, &mut store, &mut next);
            let root = m.root();
            let mut read = |a: u64| Ok(store.get(&a).cloned().unwrap());
            let l = BlockMap::load(BS, &root, &mut read).unwrap();
            assert_eq!(
                l.iter().collect::<Vec<_>>(),
                want,
                "reloaded, round {round}"
            );
            assert_eq!(l.len(), model.len());
            for off in 0..12 + 9 * p {
                assert_eq!(l.get(off), model.get(&off).copied().unwrap_or(0), "{off}");
            }
            if round % 5 == 4 {
                m = l;
            }
        }
        assert!(
            saw_dense && saw_sparse_again,
            "the rounds must use both forms"
        );
    }

    #[test]
    fn only_the_changed_path_is_dirty_and_empty_nodes_go() {
        let mut m = BlockMap::new(BS);
        let p = ptrs_per_node(BS);
        m.set(12 + p + 5, 7);
        let d = m.take_dirty_nodes();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].level, 1);
        assert_eq!(d[1].level, 2);
        for id in &d {
            m.set_node(*id, 99);
        }
        m.set(3, 8);
        assert!(m.take_dirty_nodes().is_empty());
        m.set(12 + p + 5, 0);
        // Bottom-up: once the level-1 node is gone its parent is empty too.
        for id in m.take_dirty_nodes() {
            assert!(m.node_is_empty(id), "{id:?}");
            assert_eq!(m.remove_node(id), 99);
        }
        assert_eq!(m.root()[13], 0);
    }
}
