//! Files unlinked while open (POSIX: the data stays readable and writable
//! through open descriptors until the last close).
//!
//! Job: keep such an inode alive after its last name goes, and free it
//! at its last close, or at the next mount after a crash.
//!
//! Invariants:
//! * An inode whose last name was removed while [`State::open_files`]
//!   counted it open is entered in the orphan directory ([`ORPHAN_INO`],
//!   not reachable from the root) under its inode number in decimal; that
//!   entry is its one link (`nlink` 1 on disk, so fsck's link counts need
//!   no exception), reported as 0 to callers.
//! * `orphans` holds exactly the inodes the orphan directory names.
//! * A writable mount frees every orphan left by a crash before it serves
//!   anything; a clean unmount leaves none (every file was closed).

use crate::format::FileType;
use crate::format::{Inode, ORPHAN_INO};
use crate::fs::state::{Node, State};
use crate::Result;

const S_IFDIR: u32 = 0o040000;

impl State {
    /// Counts one more open of `ino`.
    pub(crate) fn open_file(&mut self, ino: u64) {
        *self.open_files.entry(ino).or_default() += 1;
    }

    /// Counts one close of `ino`; the last close of an orphan frees it.
    pub(crate) fn close_file(&mut self, ino: u64) -> Result<()> {
        let Some(n) = self.open_files.get_mut(&ino) else {
            return Ok(());
        };
        *n -= 1;
        if *n > 0 {
            return Ok(());
        }
        self.open_files.remove(&ino);
        if self.orphans.contains(&ino) && self.read_only.is_none() {
            self.free_orphan(ino)?;
        }
        Ok(())
    }

    /// Whether the last link of `ino` must wait for its last close.
    pub(crate) fn keeps_unlinked(&self, ino: u64) -> bool {
        self.open_files.contains_key(&ino)
    }

    /// Moves `i`, whose last name was just removed, to the orphan
    /// directory (see the module doc).
    pub(crate) fn orphan(&mut self, mut i: Inode, kind: FileType) -> Result<()> {
        self.ensure_orphan_dir()?;
        let name = i.ino.to_string();
        self.dir_edit(ORPHAN_INO, |d| d.insert(name.as_bytes(), i.ino, kind))??;
        i.nlink = 1;
        self.orphans.insert(i.ino);
        self.put_inode(i)
    }

    /// Frees every orphan (at mount, after a crash left some).
    pub(crate) fn free_orphans(&mut self) -> Result<u64> {
        if self.raw_inode(ORPHAN_INO)?.is_free() {
            return Ok(0);
        }
        let entries = self
            .dir(ORPHAN_INO)?
            .list_after(0, usize::MAX)
            .into_iter()
            .map(|(_, _, ino, _)| ino)
            .collect::<Vec<_>>();
        for &ino in &entries {
            self.orphans.insert(ino);
            self.free_orphan(ino)?;
        }
        Ok(entries.len() as u64)
    }

    fn free_orphan(&mut self, ino: u64) -> Result<()> {
        let name = ino.to_string();
        self.dir_edit(ORPHAN_INO, |d| d.remove(name.as_bytes()))?;
        self.orphans.remove(&ino);
        self.free_inode(ino)
    }

    fn ensure_orphan_dir(&mut self) -> Result<()> {
        let old = self.raw_inode(ORPHAN_INO)?;
        if !old.is_free() {
            return Ok(());
        }
        let t = crate::fs::ops::now();
        self.put_inode(Inode {
            ino: ORPHAN_INO,
            mode: S_IFDIR,
            nlink: 2,
            parent: ORPHAN_INO,
            ..crate::fs::ops::born(t, old.generation)
        })?;
        self.nodes
            .insert(ORPHAN_INO, Node::new_empty(self.bs, true));
        Ok(())
    }
}
