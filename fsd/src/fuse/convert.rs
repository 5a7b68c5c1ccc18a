//! Pure conversions between fuser's types and the engine's, and the few
//! decisions the adapter makes without the engine (open flags, the
//! `access` rule, xattr buffer sizing). Kept apart so they are tested
//! without a mount.

use fuser::{FileAttr, FileType, FopenFlags, INodeNo, TimeOrNow};
use lfs::fs::{Attr, TimeSet};
use nix::libc;

use crate::errno::Errno;

/// The permission bits of `st_mode`, including setuid, setgid and sticky.
pub const PERM_MASK: u32 = 0o7777;

/// The engine's attributes as the kernel wants them; `None` if the mode
/// has no file type. `block_size` is reported as `st_blksize`.
pub fn file_attr(a: &Attr, block_size: u32) -> Option<FileAttr> {
    Some(FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: a.atime,
        mtime: a.mtime,
        ctime: a.ctime,
        crtime: a.crtime,
        kind: kind_of_mode(a.mode)?,
        perm: (a.mode & PERM_MASK) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: block_size,
        flags: 0,
    })
}

/// The file type encoded in `mode`'s `S_IFMT` bits.
pub fn kind_of_mode(mode: u32) -> Option<FileType> {
    Some(match mode & libc::S_IFMT {
        libc::S_IFREG => FileType::RegularFile,
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        _ => return None,
    })
}

/// A directory entry's type as fuser names it.
pub fn kind_of_entry(kind: lfs::format::FileType) -> FileType {
    use lfs::format::FileType as T;
    match kind {
        T::Regular => FileType::RegularFile,
        T::Directory => FileType::Directory,
        T::Symlink => FileType::Symlink,
        T::Fifo => FileType::NamedPipe,
        T::Socket => FileType::Socket,
        T::CharDevice => FileType::CharDevice,
        T::BlockDevice => FileType::BlockDevice,
    }
}

pub fn time_set(t: TimeOrNow) -> TimeSet {
    match t {
        TimeOrNow::Now => TimeSet::Now,
        TimeOrNow::SpecificTime(t) => TimeSet::At(t),
    }
}

/// Open flags for the kernel: O_DIRECT opens bypass the page cache, and
/// their writes may run in parallel (the engine locks per inode).
pub fn fopen_flags(flags: i32) -> FopenFlags {
    if flags & libc::O_DIRECT != 0 {
        FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
    } else {
        FopenFlags::empty()
    }
}

/// Whether a caller with `uid`/`gid` may access a file of `mode` owned by
/// `owner`/`group` for `mask` (R_OK, W_OK, X_OK bits), by the POSIX
/// owner/group/other rule. Root may read and write anything and execute
/// what has any execute bit (or is a directory). Only the primary group
/// is known: FUSE does not pass supplementary groups.
pub fn mode_permits(mode: u32, owner: u32, group: u32, uid: u32, gid: u32, mask: i32) -> bool {
    let want = (mask & (libc::R_OK | libc::W_OK | libc::X_OK)) as u32;
    if uid == 0 {
        let exec_ok = mode & 0o111 != 0 || mode & libc::S_IFMT == libc::S_IFDIR;
        return want & libc::X_OK as u32 == 0 || exec_ok;
    }
    let bits = if uid == owner {
        mode >> 6
    } else if gid == group {
        mode >> 3
    } else {
        mode
    } & 0o7;
    bits & want == want
}

/// What [`xattr_reply`] sends.
#[derive(Debug, PartialEq, Eq)]
pub enum XattrAnswer {
    Size(u32),
    Data,
    Error(Errno),
}

pub fn xattr_answer(size: u32, len: usize) -> XattrAnswer {
    match u32::try_from(len) {
        // A value over 4 GiB cannot be described to the kernel at all.
        Err(_) => XattrAnswer::Error(Errno::ERANGE),
        Ok(n) if size == 0 => XattrAnswer::Size(n),
        Ok(n) if n <= size => XattrAnswer::Data,
        Ok(_) => XattrAnswer::Error(Errno::ERANGE),
    }
}

/// listxattr's format: each name followed by a NUL.
pub fn name_list(names: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(names.iter().map(|n| n.len() + 1).sum());
    for name in names {
        out.extend_from_slice(name);
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;

    #[test]
    fn attributes_keep_type_and_permission_bits_apart() {
        let t = SystemTime::UNIX_EPOCH;
        let a = Attr {
            ino: 42,
            size: 5,
            blocks: 8,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            mode: libc::S_IFREG | 0o4755,
            nlink: 2,
            uid: 7,
            gid: 8,
            rdev: 0,
            generation: 3,
        };
        let f = file_attr(&a, 4096).unwrap();
        assert_eq!(f.ino, INodeNo(42));
        assert_eq!(f.kind, FileType::RegularFile);
        assert_eq!(f.perm, 0o4755);
        assert_eq!((f.size, f.blocks, f.nlink, f.uid, f.gid), (5, 8, 2, 7, 8));
        assert_eq!(f.blksize, 4096);
        assert!(file_attr(&Attr { mode: 0o644, ..a }, 4096).is_none());
    }

    #[test]
    fn kinds_of_mode() {
        assert_eq!(
            kind_of_mode(libc::S_IFREG | 0o644),
            Some(FileType::RegularFile)
        );
        assert_eq!(
            kind_of_mode(libc::S_IFDIR | 0o755),
            Some(FileType::Directory)
        );
        assert_eq!(kind_of_mode(libc::S_IFLNK | 0o777), Some(FileType::Symlink));
        assert_eq!(kind_of_mode(libc::S_IFIFO), Some(FileType::NamedPipe));
        assert_eq!(kind_of_mode(libc::S_IFSOCK), Some(FileType::Socket));
        assert_eq!(kind_of_mode(libc::S_IFCHR), Some(FileType::CharDevice));
        assert_eq!(kind_of_mode(libc::S_IFBLK), Some(FileType::BlockDevice));
        assert_eq!(kind_of_mode(0o644), None);
    }

    #[test]
    fn direct_opens_bypass_the_cache() {
        let direct = fopen_flags(libc::O_RDWR | libc::O_DIRECT);
        assert!(direct.contains(FopenFlags::FOPEN_DIRECT_IO));
        assert!(direct.contains(FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES));
        assert_eq!(
            fopen_flags(libc::O_RDWR | libc::O_APPEND),
            FopenFlags::empty()
        );
    }

    #[test]
    fn access_follows_owner_group_other() {
        let file = libc::S_IFREG | 0o640;
        let (owner, group) = (1000, 100);
        assert!(mode_permits(
            file,
            owner,
            group,
            1000,
            5,
            libc::R_OK | libc::W_OK
        ));
        assert!(!mode_permits(file, owner, group, 1000, 5, libc::X_OK));
        assert!(mode_permits(file, owner, group, 2000, 100, libc::R_OK));
        assert!(!mode_permits(file, owner, group, 2000, 100, libc::W_OK));
        assert!(!mode_permits(file, owner, group, 2000, 200, libc::R_OK));
        assert!(mode_permits(file, owner, group, 2000, 200, libc::F_OK));
        // The owner class applies even if "other" would allow more.
        assert!(!mode_permits(
            libc::S_IFREG | 0o077,
            1000,
            100,
            1000,
            100,
            libc::R_OK
        ));
        // Root: read and write always, execute only with some x bit.
        assert!(mode_permits(
            libc::S_IFREG,
            1,
            1,
            0,
            0,
            libc::R_OK | libc::W_OK
        ));
        assert!(!mode_permits(libc::S_IFREG | 0o600, 1, 1, 0, 0, libc::X_OK));
        assert!(mode_permits(libc::S_IFREG | 0o001, 1, 1, 0, 0, libc::X_OK));
        assert!(mode_permits(libc::S_IFDIR, 1, 1, 0, 0, libc::X_OK));
    }

    #[test]
    fn xattr_probing() {
        assert_eq!(xattr_answer(0, 5), XattrAnswer::Size(5));
        assert_eq!(xattr_answer(0, 0), XattrAnswer::Size(0));
        assert_eq!(xattr_answer(5, 5), XattrAnswer::Data);
        assert_eq!(xattr_answer(64, 5), XattrAnswer::Data);
        assert_eq!(xattr_answer(4, 5), XattrAnswer::Error(Errno::ERANGE));
    }

    #[test]
    fn xattr_names_are_nul_terminated() {
        assert_eq!(
            name_list(&[b"user.a".to_vec(), b"user.bc".to_vec()]),
            b"user.a\0user.bc\0"
        );
        assert!(name_list(&[]).is_empty());
    }

    #[test]
    fn entry_kinds_map_one_to_one() {
        use lfs::format::FileType as T;
        for (t, f) in [
            (T::Regular, FileType::RegularFile),
            (T::Directory, FileType::Directory),
            (T::Symlink, FileType::Symlink),
            (T::Fifo, FileType::NamedPipe),
            (T::Socket, FileType::Socket),
            (T::CharDevice, FileType::CharDevice),
            (T::BlockDevice, FileType::BlockDevice),
        ] {
            assert_eq!(kind_of_entry(t), f);
        }
    }
}
