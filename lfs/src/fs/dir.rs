//! Directories in memory: a hash index over the entries of the
//! directory's blocks.
//!
//! On disk a directory is a file of directory blocks (lfs(5)): a metadata
//! block header, then packed directory entries; a zero inode number or the
//! end of the block ends them. In memory every name is in a `HashMap`, so
//! lookup, insert and remove cost O(1) whatever the size of the directory,
//! and each entry remembers its block so that a change re-encodes one
//! block. `readdir` cookies are per-mount entry ids in insertion order,
//! stable while the directory changes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::format::{DirEntry, FileType, MetaBlockHeader, MetaKind, Writer, META_HEADER_SIZE};
use crate::{Error, Result};

#[derive(Debug, Clone)]
struct Slot {
    ino: u64,
    kind: FileType,
    block: u64,
    id: u64,
}

/// One directory's entries.
#[derive(Debug, Clone)]
pub struct Directory {
    block_size: usize,
    names: HashMap<Vec<u8>, Slot>,
    order: BTreeMap<u64, Vec<u8>>,
    used: Vec<usize>,
    members: Vec<BTreeSet<u64>>,
    with_space: BTreeSet<u64>,
    dirty: BTreeSet<u64>,
    next_id: u64,
}

/// Below this many free bytes a block is not offered for new entries.
const MIN_FREE: usize = 64;

impl Directory {
    /// An empty directory.
    pub fn new(block_size: usize) -> Self {
        Directory {
            block_size,
            names: HashMap::new(),
            order: BTreeMap::new(),
            used: Vec::new(),
            members: Vec::new(),
            with_space: BTreeSet::new(),
            dirty: BTreeSet::new(),
            next_id: 1,
        }
    }

    /// Loads a directory from its blocks, in file order; `None` is a hole.
    pub fn load(block_size: usize, seed: u32, blocks: &[Option<Vec<u8>>]) -> Result<Self> {
        let mut d = Directory::new(block_size);
        for (bi, b) in blocks.iter().enumerate() {
            let bi = bi as u64;
            d.add_block();
            let Some(b) = b else { continue };
            let corrupt = |source| Error::Corrupted {
                what: "directory block",
                location: format!("directory block {bi}"),
                reason: source,
            };
            MetaBlockHeader::verify(b, MetaKind::Dir, seed).map_err(corrupt)?;
            let mut off = META_HEADER_SIZE;
            while off + 8 <= b.len() && b[off..off + 8] != [0u8; 8] {
                let (e, len) = DirEntry::decode(&b[off..], seed).map_err(corrupt)?;
                off += len;
                d.place(e.name, e.ino, e.file_type, bi);
            }
        }
        d.dirty.clear();
        Ok(d)
    }

    fn add_block(&mut self) -> u64 {
        self.used.push(META_HEADER_SIZE);
        self.members.push(BTreeSet::new());
        let b = (self.used.len() - 1) as u64;
        self.with_space.insert(b);
        self.dirty.insert(b);
        b
    }

    fn rec_len(name: &[u8]) -> usize {
        (16 + name.len()).div_ceil(8) * 8
    }

    fn place(&mut self, name: Vec<u8>, ino: u64, kind: FileType, block: u64) {
        let id = self.next_id;
        self.next_id += 1;
        let b = block as usize;
        self.used[b] += Self::rec_len(&name);
        if self.block_size - self.used[b] < MIN_FREE {
            self.with_space.remove(&block);
        }
        self.members[b].insert(id);
        self.dirty.insert(block);
        self.order.insert(id, name.clone());
        self.names.insert(
            name,
            Slot {
                ino,
                kind,
                block,
                id,
            },
        );
    }

    /// The inode and type named `name`.
    pub fn lookup(&self, name: &[u8]) -> Option<(u64, FileType)> {
        self.names.get(name).map(|s| (s.ino, s.kind))
    }

    /// Adds an entry; `Exists` if the name is taken.
    pub fn insert(&mut self, name: &[u8], ino: u64, kind: FileType) -> Result<()> {
        if self.names.contains_key(name) {
            return Err(Error::Exists);
        }
        let need = Self::rec_len(name);
        let fits = |d: &Self, b: u64| d.block_size - d.used[b as usize] >= need;
        let block = match self.with_space.iter().copied().find(|&b| fits(self, b)) {
            Some(b) => b,
            None => self.add_block(),
        };
        self.place(name.to_vec(), ino, kind, block);
        Ok(())
    }

    /// Removes an entry and returns what it named.
    pub fn remove(&mut self, name: &[u8]) -> Option<(u64, FileType)> {
        let s = self.names.remove(name)?;
        let b = s.block as usize;
        self.used[b] -= Self::rec_len(name);
        self.members[b].remove(&s.id);
        self.order.remove(&s.id);
        self.with_space.insert(s.block);
        self.dirty.insert(s.block);
        Some((s.ino, s.kind))
    }

    /// Points an existing entry at another inode (rename over a target).
    pub fn replace(&mut self, name: &[u8], ino: u64, kind: FileType) -> Option<(u64, FileType)> {
        let s = self.names.get_mut(name)?;
        let old = (s.ino, s.kind);
        s.ino = ino;
        s.kind = kind;
        let b = s.block;
        self.dirty.insert(b);
        Some(old)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True if there are no entries.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Up to `max` entries after `cookie` (0 = from the start): (cookie of
    /// the entry, name, inode, type).
    pub fn list_after(&self, cookie: u64, max: usize) -> Vec<(u64, Vec<u8>, u64, FileType)> {
        self.order
            .range(cookie + 1..)
            .take(max)
            .filter_map(|(&id, name)| {
                self.names
                    .get(name)
                    .map(|s| (id, name.clone(), s.ino, s.kind))
            })
            .collect()
    }

    /// Blocks in the directory file.
    pub fn nblocks(&self) -> u64 {
        self.used.len() as u64
    }

    /// Blocks changed since the last [`Self::take_dirty`].
    pub fn dirty_count(&self) -> usize {
        self.dirty.len()
    }

    /// True if a block changed since the last [`Self::take_dirty`].
    pub fn is_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Encodes every changed block: (file block index, block).
    pub fn take_dirty(&mut self, seed: u32) -> Vec<(u64, Vec<u8>)> {
        let dirty = std::mem::take(&mut self.dirty);
        dirty
            .into_iter()
            .map(|b| (b, self.encode_block(b, seed)))
            .collect()
    }

    fn encode_block(&self, b: u64, seed: u32) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.block_size);
        w.zeros(META_HEADER_SIZE);
        for id in &self.members[b as usize] {
            if let Some(name) = self.order.get(id) {
                if let Some(s) = self.names.get(name) {
                    DirEntry {
                        ino: s.ino,
                        file_type: s.kind,
                        name: name.clone(),
                    }
                    .encode_into(&mut w, seed);
                }
            }
        }
        w.zeros(self.block_size - w.len());
        let mut block = w.into_vec();
        MetaBlockHeader::seal(&mut block, MetaKind::Dir, seed);
        block
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_entries_round_trip_and_stay_fast() {
        let mut d = Directory::new(4096);
        for i in 0..20_000u32 {
            d.insert(
                format!("file-{i}").as_bytes(),
                u64::from(i) + 16,
                FileType::Regular,
            )
            .unwrap();
        }
        assert!(matches!(
            d.insert(b"file-7", 1, FileType::Regular),
            Err(Error::Exists)
        ));
        for i in (0..20_000u32).step_by(3) {
            assert!(d.remove(format!("file-{i}").as_bytes()).is_some());
        }
        d.insert(b"new", 5, FileType::Directory).unwrap();
        let n = d.nblocks();
        let blocks: Vec<Option<Vec<u8>>> = {
            let mut all = vec![None; n as usize];
            for (b, data) in d.take_dirty(9) {
                all[b as usize] = Some(data);
            }
            all
        };
        let l = Directory::load(4096, 9, &blocks).unwrap();
        assert_eq!(l.len(), d.len());
        assert_eq!(l.lookup(b"file-1"), Some((17, FileType::Regular)));
        assert_eq!(l.lookup(b"file-0"), None);
        assert_eq!(l.lookup(b"new"), Some((5, FileType::Directory)));
        assert!(Directory::load(4096, 8, &blocks).is_err());
    }

    #[test]
    fn cookies_continue_after_changes() {
        let mut d = Directory::new(1024);
        for n in [&b"a"[..], b"b", b"c"] {
            d.insert(n, 20, FileType::Regular).unwrap();
        }
        let first = d.list_after(0, 1);
        assert_eq!(first[0].1, b"a");
        d.remove(b"b");
        d.insert(b"d", 21, FileType::Regular).unwrap();
        let rest: Vec<Vec<u8>> = d
            .list_after(first[0].0, 10)
            .into_iter()
            .map(|e| e.1)
            .collect();
        assert_eq!(rest, vec![b"c".to_vec(), b"d".to_vec()]);
        assert_eq!(
            d.replace(b"c", 30, FileType::Symlink),
            Some((20, FileType::Regular))
        );
        assert_eq!(d.lookup(b"c"), Some((30, FileType::Symlink)));
    }
}
