//! Namespace and file operations on the in-memory state.
//!
//! Each function checks its arguments, changes inodes, directories and
//! dirty blocks, and bumps `mods`; nothing here writes to the device (a
//! read-modify-write of a partial block may read it). Durability is the
//! checkpoint's job.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::format::{DirEntry, FileType, Inode, MAX_NAME_LEN};
use crate::fs::dir::Directory;
use crate::fs::state::{Node, State, S_IFDIR, S_IFLNK, S_IFREG};
use crate::fs::types::{
    Attr, DirItem, RenameFlags, SetAttr, StatFs, TimeSet, FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE, XATTR_CREATE, XATTR_REPLACE,
};
use crate::fs::xattr;
use crate::{Error, Result};

const S_IFMT: u32 = 0o170000;
/// Metadata blocks a new inode may add before the next checkpoint: its
/// inode file block, a directory block, a symlink target or xattr block.
const NEW_INODE_BLOCKS: u64 = 3;
/// Metadata blocks a change that frees space may add first (inode block,
/// directory block, indirect blocks on the cut path).
const FREEING_CHANGE_BLOCKS: u64 = 4;
/// Metadata blocks a new name or attribute may add.
const DIR_CHANGE_BLOCKS: u64 = 2;
/// Free blocks always kept for the next checkpoint's own metadata
/// (checkpoint file, segment usage and inode file blocks, super root),
/// whatever is dirty: statfs(2)'s free blocks are `fsctl df`'s free less
/// this when nothing is waiting to be written (fsctl(8), df).
pub const CHECKPOINT_MARGIN_BLOCKS: u64 = 64;
const S_ISUID: u32 = 0o4000;
/// The extended attribute holding a file's capabilities (capabilities(7)).
const SECURITY_CAPABILITY: &[u8] = b"security.capability";
const S_ISGID: u32 = 0o2000;
const S_IXGRP: u32 = 0o0010;

/// The current time as (seconds, nanoseconds).
/// A new inode record's times (all `t`) and next generation after `gen`;
/// the caller sets the rest.
pub(crate) fn born(t: (i64, u32), gen: u32) -> Inode {
    Inode {
        atime: t.0,
        mtime: t.0,
        ctime: t.0,
        crtime: t.0,
        nsec: [t.1; 4],
        generation: gen.wrapping_add(1),
        ..Inode::default()
    }
}

pub(crate) fn now() -> (i64, u32) {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs() as i64, d.subsec_nanos())
}

fn to_time(s: i64, ns: u32) -> SystemTime {
    if s >= 0 {
        UNIX_EPOCH + Duration::new(s as u64, ns)
    } else {
        UNIX_EPOCH - Duration::from_secs(s.unsigned_abs()) + Duration::from_nanos(u64::from(ns))
    }
}

fn from_time(t: SystemTime) -> (i64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let ns = d.subsec_nanos();
            if ns == 0 {
                (-(d.as_secs() as i64), 0)
            } else {
                (-(d.as_secs() as i64) - 1, 1_000_000_000 - ns)
            }
        }
    }
}

fn set_m(i: &mut Inode, t: (i64, u32)) {
    i.mtime = t.0;
    i.nsec[1] = t.1;
}
fn set_c(i: &mut Inode, t: (i64, u32)) {
    i.ctime = t.0;
    i.nsec[2] = t.1;
}
fn set_a(i: &mut Inode, t: (i64, u32)) {
    i.atime = t.0;
    i.nsec[0] = t.1;
}

/// The blocks a write of `data` at `off` covers whole, copied into block
/// buffers in order: done before the state lock is taken, for
/// [`State::write_with`].
pub(crate) fn whole_blocks(off: u64, data: &[u8], bs: u64) -> Vec<Vec<u8>> {
    // (An offset near the end of the u64 range has no whole block; the
    // write itself is refused.)
    let Some(first) = off.checked_next_multiple_of(bs) else {
        return Vec::new();
    };
    let skip = usize::try_from(first - off).unwrap_or(usize::MAX);
    data.get(skip..)
        .unwrap_or_default()
        .chunks_exact(bs as usize)
        .map(<[u8]>::to_vec)
        .collect()
}

/// The directory-entry type of a mode.
pub(crate) fn file_type(mode: u32) -> Result<FileType> {
    Ok(match mode & S_IFMT {
        0o100000 => FileType::Regular,
        0o040000 => FileType::Directory,
        0o120000 => FileType::Symlink,
        0o010000 => FileType::Fifo,
        0o140000 => FileType::Socket,
        0o020000 => FileType::CharDevice,
        0o060000 => FileType::BlockDevice,
        _ => {
            return Err(Error::InvalidArgument(format!(
                "file type in mode {mode:o}"
            )))
        }
    })
}

/// True for "." and "..", which every directory has without an entry.
fn is_dot(name: &[u8]) -> bool {
    name == b"." || name == b".."
}

/// Checks a new name, answering as Linux does before a filesystem sees
/// the call: longer than 255 bytes is NameTooLong; "." and ".." always
/// exist, so creating or linking either is Exists; a name holding `/` or
/// NUL, which no path can carry, is InvalidArgument.
fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > MAX_NAME_LEN {
        return Err(Error::NameTooLong);
    }
    if is_dot(name) {
        return Err(Error::Exists);
    }
    if !DirEntry::valid_name(name) {
        return Err(Error::InvalidArgument(format!(
            "name {:?}",
            String::from_utf8_lossy(name)
        )));
    }
    Ok(())
}

fn is_dir(i: &Inode) -> bool {
    i.mode & S_IFMT == S_IFDIR
}

impl State {
    /// ReadOnly (with the reason) if the filesystem may not change.
    pub(crate) fn writable(&self) -> Result<()> {
        match &self.read_only {
            Some(why) => Err(Error::ReadOnly(why.clone())),
            None => Ok(()),
        }
    }

    /// Refuses (NoSpace) an operation that adds `blocks` of metadata when
    /// the space outside the cleaning reserve cannot hold them: a change
    /// accepted now must always fit in the next checkpoint.
    fn need_space(&self, blocks: u64) -> Result<()> {
        if blocks > self.avail_blocks() {
            return Err(Error::NoSpace);
        }
        Ok(())
    }

    /// Checks the space of a name change (after every other check, so
    /// that an invalid call reports its own error). The blocks it dirties
    /// are counted by [`Self::dir_edit`].
    fn reserve_dir_change(&mut self) -> Result<()> {
        self.need_space(DIR_CHANGE_BLOCKS)
    }

    /// Applies `f` to directory `ino` and counts the directory blocks it
    /// newly dirtied as space the next checkpoint needs.
    pub(crate) fn dir_edit<T>(
        &mut self,
        ino: u64,
        f: impl FnOnce(&mut Directory) -> T,
    ) -> Result<T> {
        let d = self.dir(ino)?;
        let before = d.dirty_count();
        let r = f(d);
        let after = d.dirty_count();
        self.dirty_blocks += after.saturating_sub(before) as u64;
        Ok(r)
    }

    /// [`Self::need_space`] for a change that frees space (unlink, rmdir,
    /// truncate, punch): it may use half of the cleaning reserve, so that
    /// a full filesystem can still be emptied, while the other half stays
    /// for the checkpoints themselves. Without a cleaner, segments holding
    /// a few live metadata blocks are never reclaimed, so even these are
    /// refused once that half is used: NoSpace, never a failed checkpoint.
    fn need_space_freeing(&self, blocks: u64) -> Result<()> {
        let keep = self.sb.reserved_segments().div_ceil(2);
        if blocks > self.avail_blocks_keeping(keep) {
            return Err(Error::NoSpace);
        }
        Ok(())
    }

    /// Attributes of `ino`.
    pub fn attr(&mut self, ino: u64) -> Result<Attr> {
        let i = self.inode(ino)?;
        let bs512 = self.bs as u64 / 512;
        let mut size = i.size;
        let blocks = match self.nodes.get(&ino) {
            Some(n) => {
                // A directory's size follows its blocks, which the record
                // only learns at the next checkpoint.
                if let Some(d) = &n.dir {
                    size = d.nblocks() * self.bs as u64;
                }
                let extra = n.dirty.keys().filter(|&&o| n.bmap.get(o) == 0).count();
                (n.bmap.len() + extra) as u64 * bs512
            }
            None => i.blocks * bs512,
        };
        Ok(Attr {
            ino,
            size,
            blocks,
            atime: to_time(i.atime, i.nsec[0]),
            mtime: to_time(i.mtime, i.nsec[1]),
            ctime: to_time(i.ctime, i.nsec[2]),
            crtime: to_time(i.crtime, i.nsec[3]),
            mode: i.mode,
            // An orphan's one link is the orphan directory's.
            nlink: if self.orphans.contains(&ino) {
                0
            } else {
                i.nlink
            },
            uid: i.uid,
            gid: i.gid,
            rdev: i.rdev,
            generation: i.generation,
        })
    }

    pub(crate) fn dir(&mut self, ino: u64) -> Result<&mut Directory> {
        let n = self.node(ino)?;
        n.dir.as_mut().ok_or(Error::NotDir)
    }

    /// Looks `name` up in directory `parent`.
    pub fn lookup(&mut self, parent: u64, name: &[u8]) -> Result<Attr> {
        if name.len() > MAX_NAME_LEN {
            return Err(Error::NameTooLong);
        }
        let ino = match name {
            b"." => {
                self.dir(parent)?;
                parent
            }
            b".." => {
                self.dir(parent)?;
                self.inode(parent)?.parent
            }
            _ => self.dir(parent)?.lookup(name).ok_or(Error::NotFound)?.0,
        };
        self.attr(ino)
    }

    /// Creates an inode of `mode` named `name` in `parent`.
    #[allow(clippy::too_many_arguments)]
    fn new_inode(
        &mut self,
        parent: u64,
        name: &[u8],
        mode: u32,
        rdev: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Inode> {
        self.writable()?;
        check_name(name)?;
        let kind = file_type(mode)?;
        let p = self.inode(parent)?;
        if !is_dir(&p) {
            return Err(Error::NotDir);
        }
        if self.dir(parent)?.lookup(name).is_some() {
            return Err(Error::Exists);
        }
        // The inode's block, the directory block, and a symlink's target.
        self.need_space(NEW_INODE_BLOCKS)?;
        let t = now();
        let mut mode = mode;
        let mut gid = gid;
        if p.mode & S_ISGID != 0 {
            gid = p.gid;
            if kind == FileType::Directory {
                mode |= S_ISGID;
            }
        }
        let ino = self.alloc_ino();
        let old = self.raw_inode(ino)?;
        let i = Inode {
            mode,
            uid,
            gid,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            rdev,
            ino,
            parent: if kind == FileType::Directory {
                parent
            } else {
                0
            },
            ..born(t, old.generation)
        };
        self.put_inode(i.clone())?;
        self.inodes_count += 1;
        self.nodes
            .insert(ino, Node::new_empty(self.bs, kind == FileType::Directory));
        self.dir_edit(parent, |d| d.insert(name, ino, kind))??;
        let mut p = self.inode(parent)?;
        if kind == FileType::Directory {
            p.nlink += 1;
        }
        set_m(&mut p, t);
        set_c(&mut p, t);
        self.put_inode(p)?;
        Ok(i)
    }

    /// Creates a non-directory (regular, FIFO, socket, device).
    pub fn create(
        &mut self,
        parent: u64,
        name: &[u8],
        mode: u32,
        rdev: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        if mode & S_IFMT == S_IFDIR || mode & S_IFMT == S_IFLNK {
            return Err(Error::InvalidArgument(
                "create of a directory or symlink".into(),
            ));
        }
        let mode = if mode & S_IFMT == 0 {
            mode | S_IFREG
        } else {
            mode
        };
        let i = self.new_inode(parent, name, mode, rdev, uid, gid)?;
        self.attr(i.ino)
    }

    /// Creates a directory.
    pub fn mkdir(
        &mut self,
        parent: u64,
        name: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        let i = self.new_inode(parent, name, S_IFDIR | (mode & 0o7777), 0, uid, gid)?;
        self.attr(i.ino)
    }

    /// Creates a symbolic link.
    pub fn symlink(
        &mut self,
        parent: u64,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        if target.is_empty() || target.len() > self.bs || target.len() > 4095 {
            return Err(Error::NameTooLong);
        }
        let i = self.new_inode(parent, name, S_IFLNK | 0o777, 0, uid, gid)?;
        if let Err(e) = self.write(i.ino, 0, target) {
            // The inode and its entry fitted but the target's block did
            // not: a failed symlink leaves nothing behind.
            self.unlink(parent, name)?;
            return Err(e);
        }
        self.attr(i.ino)
    }

    /// The target of a symbolic link.
    pub fn readlink(&mut self, ino: u64) -> Result<Vec<u8>> {
        let i = self.inode(ino)?;
        if i.mode & S_IFMT != S_IFLNK {
            return Err(Error::InvalidArgument("not a symbolic link".into()));
        }
        let b = self.block_for_read(ino, 0)?;
        Ok(b[..i.size as usize].to_vec())
    }

    /// Frees an inode with no links left, and all its blocks.
    pub(crate) fn free_inode(&mut self, ino: u64) -> Result<()> {
        let i = self.inode(ino)?;
        self.node(ino)?;
        let node = self.nodes.remove(&ino).expect("loaded above");
        self.dirty_blocks = self.dirty_blocks.saturating_sub(node.dirty.len() as u64);
        for (_, v) in node.bmap.iter() {
            self.retire(v);
        }
        for (_, v) in node.bmap.node_addrs() {
            self.retire(v);
        }
        self.retire(i.xattr_block);
        self.put_inode(Inode {
            ino,
            generation: i.generation,
            ..Inode::default()
        })?;
        self.pending_inos.push(ino);
        self.inodes_count = self.inodes_count.saturating_sub(1);
        Ok(())
    }

    /// Drops one link of `ino`, freeing it at zero, unless it is open:
    /// then it waits in the orphan directory for its last close.
    fn drop_link(&mut self, ino: u64, t: (i64, u32)) -> Result<()> {
        let mut i = self.inode(ino)?;
        let dir = is_dir(&i);
        i.nlink = if dir { 0 } else { i.nlink.saturating_sub(1) };
        set_c(&mut i, t);
        if i.nlink == 0 && !dir && self.keeps_unlinked(ino) {
            let kind = file_type(i.mode)?;
            self.orphan(i, kind)
        } else if i.nlink == 0 {
            self.free_inode(ino)
        } else {
            self.put_inode(i)
        }
    }

    fn touch_dir(&mut self, ino: u64, nlink_delta: i32, t: (i64, u32)) -> Result<()> {
        let mut p = self.inode(ino)?;
        p.nlink = p.nlink.saturating_add_signed(nlink_delta);
        set_m(&mut p, t);
        set_c(&mut p, t);
        self.put_inode(p)
    }

    /// Removes a non-directory.
    pub fn unlink(&mut self, parent: u64, name: &[u8]) -> Result<()> {
        self.writable()?;
        // Both name directories (Linux: EISDIR).
        if is_dot(name) {
            return Err(Error::IsDir);
        }
        let (ino, kind) = self.dir(parent)?.lookup(name).ok_or(Error::NotFound)?;
        if kind == FileType::Directory {
            return Err(Error::IsDir);
        }
        self.need_space_freeing(FREEING_CHANGE_BLOCKS)?;
        self.dir_edit(parent, |d| d.remove(name))?;
        let t = now();
        self.touch_dir(parent, 0, t)?;
        self.drop_link(ino, t)
    }

    /// Removes an empty directory.
    pub fn rmdir(&mut self, parent: u64, name: &[u8]) -> Result<()> {
        self.writable()?;
        if name == b"." {
            return Err(Error::InvalidArgument("rmdir of \".\"".into()));
        }
        if name == b".." {
            return Err(Error::NotEmpty);
        }
        let (ino, kind) = self.dir(parent)?.lookup(name).ok_or(Error::NotFound)?;
        if kind != FileType::Directory {
            return Err(Error::NotDir);
        }
        if !self.dir(ino)?.is_empty() {
            return Err(Error::NotEmpty);
        }
        self.need_space_freeing(FREEING_CHANGE_BLOCKS)?;
        self.dir_edit(parent, |d| d.remove(name))?;
        let t = now();
        self.touch_dir(parent, -1, t)?;
        self.free_inode(ino)
    }

    /// Adds a hard link.
    pub fn link(&mut self, ino: u64, newparent: u64, newname: &[u8]) -> Result<Attr> {
        self.writable()?;
        check_name(newname)?;
        let mut i = self.inode(ino)?;
        if is_dir(&i) {
            return Err(Error::NotPermitted);
        }
        // No name comes back to a file unlinked while open (as Linux).
        if self.orphans.contains(&ino) {
            return Err(Error::NotFound);
        }
        let kind = file_type(i.mode)?;
        if self.dir(newparent)?.lookup(newname).is_some() {
            return Err(Error::Exists);
        }
        self.reserve_dir_change()?;
        self.dir_edit(newparent, |d| d.insert(newname, ino, kind))??;
        let t = now();
        i.nlink += 1;
        set_c(&mut i, t);
        self.put_inode(i)?;
        self.touch_dir(newparent, 0, t)?;
        self.attr(ino)
    }

    /// True if `anc` is directory `ino` or one of its ancestors. The
    /// chain of parents is followed to the root however long it is (it
    /// was cut at 4096 levels, so a directory deeper than that could be
    /// moved into its own subtree, leaving both in a cycle no path
    /// reaches); a chain longer than the inodes in use is a cycle already.
    fn is_ancestor(&mut self, anc: u64, mut ino: u64) -> Result<bool> {
        for _ in 0..=self.inodes_count {
            if ino == anc {
                return Ok(true);
            }
            if ino == crate::format::ROOT_INO {
                return Ok(false);
            }
            ino = self.inode(ino)?.parent;
        }
        Err(Error::InvalidArgument(format!(
            "the parents of directory {ino} do not lead to the root"
        )))
    }

    /// rename(2), with RENAME_NOREPLACE and RENAME_EXCHANGE.
    pub fn rename(
        &mut self,
        p: u64,
        name: &[u8],
        np: u64,
        nname: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        self.writable()?;
        if flags.noreplace && flags.exchange {
            return Err(Error::InvalidArgument(
                "RENAME_NOREPLACE with RENAME_EXCHANGE".into(),
            ));
        }
        // "." and ".." can be neither moved nor replaced (Linux: EBUSY,
        // and EEXIST for a target with RENAME_NOREPLACE).
        if is_dot(name) || (is_dot(nname) && !flags.noreplace) {
            return Err(Error::Busy("rename of \".\" or \"..\"".into()));
        }
        check_name(nname)?;
        let (sino, skind) = self.dir(p)?.lookup(name).ok_or(Error::NotFound)?;
        let dst = self.dir(np)?.lookup(nname);
        let t = now();
        if skind == FileType::Directory && p != np && self.is_ancestor(sino, np)? {
            return Err(Error::InvalidArgument(
                "moving a directory into itself".into(),
            ));
        }
        if flags.exchange {
            let (dino, dkind) = dst.ok_or(Error::NotFound)?;
            if dkind == FileType::Directory && p != np && self.is_ancestor(dino, p)? {
                return Err(Error::InvalidArgument(
                    "moving a directory into itself".into(),
                ));
            }
            self.reserve_dir_change()?;
            self.dir_edit(p, |d| d.replace(name, dino, dkind))?;
            self.dir_edit(np, |d| d.replace(nname, sino, skind))?;
            let sdir = i32::from(skind == FileType::Directory);
            let ddir = i32::from(dkind == FileType::Directory);
            if p != np {
                self.reparent(sino, np, t)?;
                self.reparent(dino, p, t)?;
            }
            if p != np {
                self.touch_dir(p, ddir - sdir, t)?;
                self.touch_dir(np, sdir - ddir, t)?;
            } else {
                self.touch_dir(p, 0, t)?;
            }
            return Ok(());
        }
        if let Some((dino, dkind)) = dst {
            if flags.noreplace {
                return Err(Error::Exists);
            }
            if dino == sino {
                return Ok(());
            }
            match (skind == FileType::Directory, dkind == FileType::Directory) {
                (true, false) => return Err(Error::NotDir),
                (false, true) => return Err(Error::IsDir),
                (true, true) if !self.dir(dino)?.is_empty() => return Err(Error::NotEmpty),
                _ => {}
            }
            self.reserve_dir_change()?;
            self.dir_edit(np, |d| d.remove(nname))?;
            if dkind == FileType::Directory {
                self.touch_dir(np, -1, t)?;
            }
            self.drop_link(dino, t)?;
        } else {
            self.reserve_dir_change()?;
        }
        self.dir_edit(p, |d| d.remove(name))?;
        self.dir_edit(np, |d| d.insert(nname, sino, skind))??;
        let sdir = i32::from(skind == FileType::Directory);
        if p != np {
            self.reparent(sino, np, t)?;
            self.touch_dir(p, -sdir, t)?;
            self.touch_dir(np, sdir, t)?;
        } else {
            self.touch_dir(p, 0, t)?;
        }
        let mut s = self.inode(sino)?;
        set_c(&mut s, t);
        self.put_inode(s)
    }

    fn reparent(&mut self, ino: u64, parent: u64, t: (i64, u32)) -> Result<()> {
        let mut i = self.inode(ino)?;
        if is_dir(&i) {
            i.parent = parent;
        }
        set_c(&mut i, t);
        self.put_inode(i)
    }

    /// Up to `max` entries of directory `ino` after `cookie`.
    pub fn readdir(&mut self, ino: u64, cookie: u64, max: usize) -> Result<Vec<DirItem>> {
        let parent = self.inode(ino)?.parent;
        let mut out = Vec::new();
        if cookie == 0 {
            out.push(DirItem {
                ino,
                cookie: 1,
                kind: FileType::Directory,
                name: b".".to_vec(),
            });
        }
        if cookie <= 1 {
            out.push(DirItem {
                ino: parent,
                cookie: 2,
                kind: FileType::Directory,
                name: b"..".to_vec(),
            });
        }
        let after = cookie.saturating_sub(2);
        for (id, name, e_ino, kind) in self.dir(ino)?.list_after(after, max) {
            out.push(DirItem {
                ino: e_ino,
                cookie: id + 2,
                kind,
                name,
            });
        }
        Ok(out)
    }

    /// Changes attributes.
    pub fn setattr(&mut self, ino: u64, set: &SetAttr) -> Result<Attr> {
        self.writable()?;
        let t = now();
        self.inode(ino)?;
        if let Some(size) = set.size {
            self.truncate(ino, size)?;
        } else {
            // The inode's block is rewritten at the next checkpoint.
            self.need_space(1)?;
        }
        let mut i = self.inode(ino)?;
        if let Some(m) = set.mode {
            i.mode = (i.mode & S_IFMT) | (m & 0o7777);
        }
        let owner_changes =
            set.uid.is_some_and(|u| u != i.uid) || set.gid.is_some_and(|g| g != i.gid);
        if let Some(u) = set.uid {
            i.uid = u;
        }
        if let Some(g) = set.gid {
            i.gid = g;
        }
        if owner_changes && !is_dir(&i) {
            // chown clears set-user-ID, and set-group-ID when it means
            // "set group ID on execution" (group execute set).
            i.mode &= !S_ISUID;
            if i.mode & S_IXGRP != 0 {
                i.mode &= !S_ISGID;
            }
        }
        let resolve = |ts: TimeSet| match ts {
            TimeSet::Now => t,
            TimeSet::At(x) => from_time(x),
        };
        if let Some(a) = set.atime {
            set_a(&mut i, resolve(a));
        }
        if let Some(m) = set.mtime {
            set_m(&mut i, resolve(m));
        }
        set_c(&mut i, set.ctime.map_or(t, from_time));
        self.put_inode(i)?;
        self.attr(ino)
    }

    /// The current contents of block `off` of `ino`, for reading.
    fn block_for_read(&mut self, ino: u64, off: u64) -> Result<Vec<u8>> {
        let bs = self.bs;
        let n = self.node(ino)?;
        if let Some(b) = n.dirty.get(&off) {
            return Ok(b.clone());
        }
        let v = n.bmap.get(off);
        if v == 0 {
            return Ok(vec![0u8; bs]);
        }
        match self.source_of(v)? {
            Source::Mem(b) => Ok(b),
            _ => self.read_virtual(v),
        }
    }

    /// The physical block holding block `b` of `ino`, if its current
    /// contents are exactly that device block (neither dirty nor in flight).
    fn block_is_on_device(&mut self, ino: u64, b: u64) -> Option<u64> {
        let n = self.nodes.get(&ino)?;
        if n.dirty.contains_key(&b) {
            return None;
        }
        match n.bmap.get(b) {
            0 => None,
            v => match self.source_of(v) {
                Ok(Source::Dev(p)) => Some(p),
                _ => None,
            },
        }
    }

    /// Where the blocks of a read come from, without reading the device:
    /// (file offset, source) for each block of `[off, off + len)`.
    pub fn read_sources(&mut self, ino: u64, off: u64, size: u32) -> Result<(Vec<Source>, u64)> {
        let i = self.inode(ino)?;
        if is_dir(&i) {
            return Err(Error::IsDir);
        }
        let end = (off + u64::from(size)).min(i.size);
        if off >= end {
            return Ok((Vec::new(), 0));
        }
        let bs = self.bs as u64;
        let mut out = Vec::new();
        for b in off / bs..end.div_ceil(bs) {
            let n = self.node(ino)?;
            let src = if let Some(d) = n.dirty.get(&b) {
                Source::Mem(d.clone())
            } else {
                match n.bmap.get(b) {
                    0 => Source::Zero,
                    v => self.source_of(v)?,
                }
            };
            out.push(src);
        }
        Ok((out, end - off))
    }

    fn max_bytes(&self) -> u64 {
        crate::fs::bmap::BlockMap::new(self.bs).max_offset() * self.bs as u64
    }

    /// Free blocks for ordinary writes, net of dirty data not yet placed.
    pub fn avail_blocks(&self) -> u64 {
        self.avail_blocks_keeping(self.sb.reserved_segments())
    }

    /// Free blocks that deleting checkpoints and cleaning passes may book:
    /// all but one segment of the cleaning reserve. What they book counts
    /// their checkpoint's own metadata, and writers stop at the whole
    /// reserve, so one segment is margin enough; keeping more (a quarter
    /// of the reserve, once) deadlocked small filesystems: a pass that
    /// left fewer clean segments than that could never be followed by
    /// another, and writers waited for space that never came.
    pub(crate) fn avail_for_cleaning(&self) -> u64 {
        self.avail_blocks_keeping(1)
    }

    /// Free blocks net of dirty data, keeping `reserved` segments untouched.
    pub(crate) fn avail_blocks_keeping(&self, reserved: u64) -> u64 {
        let bps = u64::from(self.sb.blocks_per_segment);
        let clean = self.segs.nclean() + self.segs.npending();
        let head_room = self.sb.segment_start(self.head.seg) + bps - self.head.block;
        // The room left in the head's segment counts only net of the
        // reserve: filling it moves the log on and takes another clean
        // segment as the next one. (Counting it whatever the clean count,
        // writers could take one segment of the reserve after another.)
        let free = (clean * bps + head_room).saturating_sub(reserved * bps);
        // Blocks a cleaning pass queued for the cold log count as dirty.
        let dirty = self.dirty_blocks + self.gc_queue.len() as u64;
        // Blocks data-sync logs placed still need their metadata written.
        let meta_for = dirty + self.dsync_placed;
        // Metadata the next checkpoint writes with them. Random small
        // overwrites can dirty, per data block, an indirect block (never
        // more than the indirect blocks of every mapped block, one per
        // 256 at most), and change up to 4 DAT entries (its new and its
        // retired one, its indirect block's), which go to the DAT
        // journal; plus a fixed margin for the checkpoint file, usage and
        // inode blocks. (A DAT merge writes more, but only into room
        // booked for it once it is due, `Dat::merge_booking`, or that no
        // booking counts on: `Dat::plan_write`.) An estimate of one in 32
        // for all of it let repeated small checkpoints at the edge of a
        // full filesystem eat the cleaning reserve until one could not be
        // built.
        let indirect = meta_for.min(self.dat.nslots() / 256 + 1);
        let overhead = indirect
            + self.dat.cost_of_changes(4 * meta_for)
            + self.dat.merge_booking()
            + CHECKPOINT_MARGIN_BLOCKS;
        free.saturating_sub(dirty + overhead)
    }

    /// Writes `data` at `off` into `ino`.
    pub fn write(&mut self, ino: u64, off: u64, data: &[u8]) -> Result<u32> {
        self.write_with(ino, off, data, &mut HashMap::new(), Vec::new())
    }

    /// The device blocks a write of `len` bytes at `off` must read first:
    /// partially covered blocks that exist only on the device. The caller
    /// reads them without the state lock and passes them to
    /// [`Self::write_with`] (seed 001: a sub-block write must not hold
    /// everything up while it reads).
    pub fn write_reads(&mut self, ino: u64, off: u64, len: usize) -> Result<Vec<(u64, u64)>> {
        let i = self.inode(ino)?;
        let bs = self.bs as u64;
        let end = off.saturating_add(len as u64);
        let mut out = Vec::new();
        if len == 0 {
            return Ok(out);
        }
        for b in [off / bs, (end - 1) / bs] {
            let partial =
                (b == off / bs && off % bs != 0) || (b == (end - 1) / bs && end % bs != 0);
            if !partial || b * bs >= i.size || out.iter().any(|&(x, _)| x == b) {
                continue;
            }
            let n = self.node(ino)?;
            if n.dirty.contains_key(&b) {
                continue;
            }
            let v = n.bmap.get(b);
            if v == 0 {
                continue;
            }
            if let Source::Dev(p) = self.source_of(v)? {
                out.push((b, p));
            }
        }
        Ok(out)
    }

    /// [`Self::write`], taking partially overwritten blocks from `read`
    /// (block offset → (physical block it was read from, contents)) when
    /// they are still exactly that block on the device, and the blocks the
    /// write covers whole from `whole` ([`whole_blocks`], in order) if
    /// given.
    pub fn write_with(
        &mut self,
        ino: u64,
        off: u64,
        data: &[u8],
        read: &mut HashMap<u64, (u64, Vec<u8>)>,
        whole: Vec<Vec<u8>>,
    ) -> Result<u32> {
        self.writable()?;
        let mut i = self.inode(ino)?;
        if is_dir(&i) {
            return Err(Error::IsDir);
        }
        if data.is_empty() {
            return Ok(0);
        }
        // Past the largest file size nothing is written; a write that
        // crosses it writes what fits, as POSIX asks of a write that
        // meets the file size limit (the kernel's own limit for a FUSE
        // file is 2^63 - 1, so the engine is the one to enforce this).
        let max = self.max_bytes();
        if off >= max {
            return Err(Error::FileTooLarge);
        }
        let data = &data[..data.len().min((max - off) as usize)];
        let end = off + data.len() as u64;
        let bs = self.bs as u64;
        let nblocks = end.div_ceil(bs) - off / bs;
        if nblocks > self.avail_blocks() {
            return Err(Error::NoSpace);
        }
        let mut whole = whole.into_iter();
        let mut pos = off;
        while pos < end {
            let b = pos / bs;
            let in_block = (pos % bs) as usize;
            let n = ((bs as usize) - in_block).min((end - pos) as usize);
            let src = &data[(pos - off) as usize..(pos - off) as usize + n];
            if n == bs as usize {
                let blk = whole.next().unwrap_or_else(|| src.to_vec());
                if self.node(ino)?.dirty.insert(b, blk).is_none() {
                    self.dirty_blocks += 1;
                }
                pos += n as u64;
                continue;
            }
            let exists = self.node(ino)?.dirty.contains_key(&b);
            if !exists {
                let base = if b * bs >= i.size {
                    vec![0u8; bs as usize]
                } else if let Some(pre) = read
                    .remove(&b)
                    .filter(|(p, _)| self.block_is_on_device(ino, b) == Some(*p))
                {
                    pre.1
                } else {
                    self.block_for_read(ino, b)?
                };
                self.node(ino)?.dirty.insert(b, base);
                self.dirty_blocks += 1;
            }
            let blk = self.node(ino)?.dirty.get_mut(&b).expect("inserted above");
            blk[in_block..in_block + n].copy_from_slice(src);
            pos += n as u64;
        }
        let t = now();
        i.size = i.size.max(end);
        set_m(&mut i, t);
        set_c(&mut i, t);
        self.kill_privs(ino, &mut i)?;
        self.put_inode(i)?;
        Ok(data.len() as u32)
    }

    /// What a write or a truncation does to the privileges a regular file
    /// carries: set-user-ID goes, set-group-ID when it means "set group
    /// ID on execution" (group execute set), and file capabilities
    /// (`security.capability`). The kernel leaves this to the filesystem
    /// (fsd asks for FUSE_HANDLE_KILLPRIV_V2, which spares a GETXATTR
    /// round trip per write); the engine does it for every caller, where
    /// Linux spares one holding CAP_FSETID.
    fn kill_privs(&mut self, ino: u64, i: &mut Inode) -> Result<()> {
        if i.mode & S_IFMT != S_IFREG {
            return Ok(());
        }
        i.mode &= !S_ISUID;
        if i.mode & S_IXGRP != 0 {
            i.mode &= !S_ISGID;
        }
        let loaded = self.nodes.get(&ino).and_then(|n| n.xattrs.as_ref());
        let may_have = match loaded {
            Some(x) => x.contains_key(SECURITY_CAPABILITY),
            None => i.xattr_block != 0,
        };
        if may_have && self.xattrs(ino)?.remove(SECURITY_CAPABILITY).is_some() {
            let n = self.node(ino)?;
            if !n.xattr_dirty {
                n.xattr_dirty = true;
                self.dirty_blocks += 1;
            }
        }
        Ok(())
    }

    /// Zeroes bytes `[from, to)` of block `b` of `ino` (a partial block).
    fn zero_in_block(&mut self, ino: u64, b: u64, from: usize, to: usize) -> Result<()> {
        let has = self.node(ino)?.dirty.contains_key(&b) || self.node(ino)?.bmap.get(b) != 0;
        if !has {
            return Ok(());
        }
        let mut blk = self.block_for_read(ino, b)?;
        blk[from..to].fill(0);
        if self.node(ino)?.dirty.insert(b, blk).is_none() {
            self.dirty_blocks += 1;
        }
        Ok(())
    }

    /// Drops whole blocks `[first, last)` of `ino`.
    fn drop_blocks(&mut self, ino: u64, first: u64, last: u64) -> Result<()> {
        // Holes a data-sync log cannot describe.
        self.meta_dirty.insert(ino);
        let n = self.node(ino)?;
        let dropped = n.dirty.range(first..last).count() as u64;
        let keys: Vec<u64> = n.dirty.range(first..last).map(|(&k, _)| k).collect();
        for k in keys {
            n.dirty.remove(&k);
        }
        let mapped: Vec<u64> = n
            .bmap
            .offsets_from(first)
            .into_iter()
            .take_while(|&o| o < last)
            .collect();
        let mut olds = Vec::new();
        for o in mapped {
            olds.push(n.bmap.set(o, 0));
        }
        self.dirty_blocks = self.dirty_blocks.saturating_sub(dropped);
        for v in olds {
            self.retire(v);
        }
        self.mods += 1;
        Ok(())
    }

    /// Sets the size of `ino`, freeing or zeroing what lies beyond.
    pub fn truncate(&mut self, ino: u64, size: u64) -> Result<()> {
        self.writable()?;
        let mut i = self.inode(ino)?;
        if is_dir(&i) {
            return Err(Error::IsDir);
        }
        if size > self.max_bytes() {
            return Err(Error::FileTooLarge);
        }
        self.need_space_freeing(FREEING_CHANGE_BLOCKS)?;
        let bs = self.bs as u64;
        if size < i.size {
            self.drop_blocks(ino, size.div_ceil(bs), u64::MAX)?;
            if size % bs != 0 {
                self.zero_in_block(ino, size / bs, (size % bs) as usize, bs as usize)?;
            }
        }
        let t = now();
        i = self.inode(ino)?;
        i.size = size;
        set_m(&mut i, t);
        set_c(&mut i, t);
        self.kill_privs(ino, &mut i)?;
        self.put_inode(i)
    }

    /// fallocate(2): allocate (extend the size unless KEEP_SIZE) or punch
    /// a hole.
    pub fn fallocate(&mut self, ino: u64, off: u64, len: u64, mode: i32) -> Result<()> {
        self.writable()?;
        let i = self.inode(ino)?;
        if is_dir(&i) {
            return Err(Error::IsDir);
        }
        if mode & !(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE) != 0 {
            return Err(Error::NotSupported);
        }
        // As Linux's vfs_fallocate, for every mode: a range past the
        // largest file size is refused (an allocation set the size past
        // it).
        let end = off.checked_add(len).ok_or(Error::FileTooLarge)?;
        if end > self.max_bytes() {
            return Err(Error::FileTooLarge);
        }
        if mode & FALLOC_FL_PUNCH_HOLE != 0 {
            if mode & FALLOC_FL_KEEP_SIZE == 0 {
                return Err(Error::NotSupported);
            }
            self.need_space_freeing(FREEING_CHANGE_BLOCKS)?;
            let bs = self.bs as u64;
            // Past the end of file there is nothing to keep: a range that
            // reaches EOF covers the rest of the last block too.
            let end = if end >= i.size {
                i.size.div_ceil(bs) * bs
            } else {
                end
            };
            if off >= end {
                return Ok(());
            }
            let first_whole = off.div_ceil(bs);
            let last_whole = end / bs;
            if first_whole < last_whole {
                self.drop_blocks(ino, first_whole, last_whole)?;
            }
            if off % bs != 0 {
                let stop = if off / bs == (end - 1) / bs {
                    ((end - 1) % bs + 1) as usize
                } else {
                    bs as usize
                };
                self.zero_in_block(ino, off / bs, (off % bs) as usize, stop)?;
            }
            if end % bs != 0 && (off % bs == 0 || off / bs != end / bs) {
                self.zero_in_block(ino, end / bs, 0, (end % bs) as usize)?;
            }
            let mut i = self.inode(ino)?;
            let t = now();
            set_m(&mut i, t);
            set_c(&mut i, t);
            return self.put_inode(i);
        }
        // lfs cannot reserve blocks in place; allocation checks that the
        // space exists now and sets the size.
        let bs = self.bs as u64;
        if len.div_ceil(bs) > self.avail_blocks() {
            return Err(Error::NoSpace);
        }
        if mode & FALLOC_FL_KEEP_SIZE == 0 && end > i.size {
            let mut i = i;
            i.size = end;
            set_c(&mut i, now());
            self.put_inode(i)?;
        }
        Ok(())
    }

    fn xattrs(&mut self, ino: u64) -> Result<&mut BTreeMap<Vec<u8>, Vec<u8>>> {
        let i = self.inode(ino)?;
        let loaded = self.node(ino)?.xattrs.is_some();
        if !loaded {
            let x = if i.xattr_block == 0 {
                BTreeMap::new()
            } else {
                let b = self.read_virtual(i.xattr_block)?;
                xattr::decode(&b, self.seed)?
            };
            self.node(ino)?.xattrs = Some(x);
        }
        Ok(self.node(ino)?.xattrs.as_mut().expect("loaded above"))
    }

    /// getxattr(2).
    pub fn getxattr(&mut self, ino: u64, name: &[u8]) -> Result<Vec<u8>> {
        self.xattrs(ino)?.get(name).cloned().ok_or(Error::NoData)
    }

    /// listxattr(2).
    pub fn listxattr(&mut self, ino: u64) -> Result<Vec<Vec<u8>>> {
        Ok(self.xattrs(ino)?.keys().cloned().collect())
    }

    /// setxattr(2).
    pub fn setxattr(&mut self, ino: u64, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        self.writable()?;
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            return Err(Error::NameTooLong);
        }
        let bs = self.bs;
        let x = self.xattrs(ino)?;
        let exists = x.contains_key(name);
        if flags & XATTR_CREATE != 0 && exists {
            return Err(Error::Exists);
        }
        if flags & XATTR_REPLACE != 0 && !exists {
            return Err(Error::NoData);
        }
        let mut candidate = x.clone();
        candidate.insert(name.to_vec(), value.to_vec());
        if !xattr::fits(&candidate, bs) {
            return Err(Error::TooBig);
        }
        self.need_space(DIR_CHANGE_BLOCKS)?;
        *self.xattrs(ino)? = candidate;
        let n = self.node(ino)?;
        if !n.xattr_dirty {
            n.xattr_dirty = true;
            self.dirty_blocks += 1;
        }
        self.touch_ctime(ino)
    }

    /// removexattr(2).
    pub fn removexattr(&mut self, ino: u64, name: &[u8]) -> Result<()> {
        self.writable()?;
        if !self.xattrs(ino)?.contains_key(name) {
            return Err(Error::NoData);
        }
        self.need_space(DIR_CHANGE_BLOCKS)?;
        self.xattrs(ino)?.remove(name);
        let n = self.node(ino)?;
        if !n.xattr_dirty {
            n.xattr_dirty = true;
            self.dirty_blocks += 1;
        }
        self.touch_ctime(ino)
    }

    fn touch_ctime(&mut self, ino: u64) -> Result<()> {
        let mut i = self.inode(ino)?;
        set_c(&mut i, now());
        self.put_inode(i)
    }

    /// statfs(2).
    pub fn statfs(&self) -> StatFs {
        let bps = u64::from(self.sb.blocks_per_segment);
        let total = self.sb.nsegments * bps;
        let files = total;
        StatFs {
            blocks: total,
            // Free space net of what the next checkpoint writes, the
            // reserve included (it was the reserve plus what ordinary
            // writes may use, which near full claimed the reserve's
            // blocks free even when some were in use).
            bfree: self.avail_blocks_keeping(0),
            bavail: self.avail_blocks(),
            files,
            ffree: files.saturating_sub(self.inodes_count),
            bsize: self.bs as u32,
            namelen: MAX_NAME_LEN as u32,
        }
    }
}

/// Where one block of a read comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// From memory (dirty or being written).
    Mem(Vec<u8>),
    /// From the device, at this physical block.
    Dev(u64),
    /// A hole.
    Zero,
}

#[cfg(test)]
mod tests {
    use super::whole_blocks;

    #[test]
    fn whole_blocks_are_the_fully_covered_ones_in_order() {
        let data: Vec<u8> = (0..40u8).collect();
        // Blocks of 8: the write covers bytes 3..43, so blocks 1 to 4
        // (bytes 8..40) whole, 0 and 5 in part.
        let w = whole_blocks(3, &data, 8);
        assert_eq!(w.len(), 4);
        assert_eq!(w[0], (5..13u8).collect::<Vec<_>>());
        assert_eq!(w[3], (29..37u8).collect::<Vec<_>>());
        assert_eq!(whole_blocks(0, &data[..16], 8).len(), 2);
        assert!(whole_blocks(3, &data[..4], 8).is_empty());
        assert!(whole_blocks(5, &data[..3], 8).is_empty());
        assert!(whole_blocks(u64::MAX - 1, &data, 8).is_empty());
    }
}
