//! A file's block map in memory: offset → block address, with the
//! indirect blocks that store it on disk.
//!
//! The on-disk shape (lfs(5)) is the inode's 15 slots: 12 direct pointers,
//! then the roots of a single, double and triple indirect tree. Indirect
//! blocks hold `P = (block_size - 16) / 8` pointers after a metadata block
//! header. In memory the map keeps every data pointer in a `BTreeMap` and
//! every indirect block's address keyed by [`NodeId`]; writing the map back
//! re-encodes only the indirect blocks on the path of a changed pointer.
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

/// The block map of one file.
#[derive(Debug, Clone)]
pub struct BlockMap {
    p: u64,
    data: BTreeMap<u64, u64>,
    nodes: BTreeMap<NodeId, u64>,
    dirty: BTreeSet<u64>,
}

impl BlockMap {
    /// An empty map for `block_size` blocks.
    pub fn new(block_size: usize) -> Self {
        BlockMap {
            p: ptrs_per_node(block_size),
            data: BTreeMap::new(),
            nodes: BTreeMap::new(),
            dirty: BTreeSet::new(),
        }
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
                m.data.insert(i as u64, a);
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
        for (j, a) in ptrs.into_iter().enumerate() {
            if a == 0 {
                continue;
            }
            let child = id.index * self.p + j as u64;
            if id.level == 1 {
                self.data.insert(self.base(id.tree) + child, a);
            } else {
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
        self.data.get(&off).copied().unwrap_or(0)
    }

    /// Sets the address of data block `off` (0 removes it); returns the old
    /// address (0 if none).
    pub fn set(&mut self, off: u64, addr: u64) -> u64 {
        self.dirty.insert(off);
        if addr == 0 {
            self.data.remove(&off).unwrap_or(0)
        } else {
            self.data.insert(off, addr).unwrap_or(0)
        }
    }

    /// Data offsets at or after `from` that are mapped.
    pub fn offsets_from(&self, from: u64) -> Vec<u64> {
        self.data.range(from..).map(|(&o, _)| o).collect()
    }

    /// All (offset, address) pairs.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.data.iter().map(|(&o, &a)| (o, a))
    }

    /// All indirect block addresses.
    pub fn node_addrs(&self) -> impl Iterator<Item = (NodeId, u64)> + '_ {
        self.nodes.iter().map(|(&n, &a)| (n, a))
    }

    /// Mapped data blocks.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True if nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
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
            let base = self.base(id.tree) + first;
            Box::new(
                self.data
                    .range(base..base + self.p)
                    .map(move |(&o, &a)| (o - base, a)),
            )
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
        for (j, a) in self.mapped_children(id) {
            let o = META_HEADER_SIZE + j as usize * NODE_PTR_SIZE;
            b[o..o + NODE_PTR_SIZE].copy_from_slice(&a.to_le_bytes());
        }
        MetaBlockHeader::seal(&mut b, MetaKind::Node, seed);
        b
    }

    /// The inode's 15 slots for the current map.
    pub fn root(&self) -> [u64; BMAP_SLOTS] {
        let mut r = [0u64; BMAP_SLOTS];
        for (i, slot) in r.iter_mut().take(BMAP_DIRECT).enumerate() {
            *slot = self.get(i as u64);
        }
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
