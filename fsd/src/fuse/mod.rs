//! The FUSE adapter: kernel requests in, engine calls, replies out.
//!
//! Every method converts fuser's types to the engine's, calls one engine
//! method (two for `readdirplus` and `access`, which also need
//! attributes), and converts the result back, mapping errors through
//! [`crate::errno`]. No filesystem logic lives here: names, permissions
//! data, link counts and times are the engine's business.
//!
//! Invariants and why:
//! * Stateless: file handles are 0 and `forget` is a no-op, because the
//!   engine keeps no per-open or per-lookup state. An inode stays valid as
//!   long as the engine says so.
//! * FUSE's root node id is the engine's root inode (checked below), so
//!   inode numbers pass through unchanged.
//! * No lock is held while replying: the adapter has no locks.
//! * No request thread waits for a thaw: while the filesystem is frozen,
//!   a request that changes it goes to the workers of [`deferred`] with
//!   its reply, and the request threads go on serving reads.
//! * Attribute and entry replies are cached by the kernel for [`TTL`].
//!   Only this mount changes the filesystem, so a short TTL costs little
//!   and bounds how stale `stat` can be after a hard link or rename
//!   changes another name's view of an inode.

mod convert;
pub mod deferred;

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, BsdFileFlags, FileAttr, FileHandle, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, IoctlFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use lfs::fs::{Attr, Fs, SetAttr};
use log::{debug, info};

use lfs_proto::codes;
use lfs_proto::server::Peer;

use crate::errno::{engine_error, Errno};
use convert::{
    file_attr, fopen_flags, kind_of_entry, mode_permits, name_list, time_set, xattr_answer,
    XattrAnswer, PERM_MASK,
};
use deferred::Deferred;

/// How long the kernel may cache attributes and directory entries.
pub const TTL: Duration = Duration::from_secs(1);

/// Largest write (and readahead) the kernel sends in one request. One MiB
/// amortises the FUSE round trip (DESIGN.md §5); it needs the kernel's
/// `max_pages`, which fuser requests whenever the kernel offers it.
pub const MAX_WRITE: u32 = 1 << 20;

/// Capabilities asked for when the kernel offers them: readdirplus saves
/// a lookup per entry of `ls -l`; parallel dirops lets lookups and
/// readdirs in one directory run on several threads (the engine is
/// `Sync`); async DIO lets one O_DIRECT request become several concurrent
/// ones; symlinks are immutable, so the kernel may cache their targets;
/// with killpriv v2 the engine clears set-ID bits and file capabilities on
/// write and truncate itself (it always did), and the kernel stops asking
/// for `security.capability` before every write (a GETXATTR round trip per
/// write, measured: 1,025 for 1,024 writes).
const WANTED: &[(InitFlags, &str)] = &[
    (InitFlags::FUSE_DO_READDIRPLUS, "readdirplus"),
    (InitFlags::FUSE_READDIRPLUS_AUTO, "readdirplus_auto"),
    (InitFlags::FUSE_PARALLEL_DIROPS, "parallel_dirops"),
    (InitFlags::FUSE_ASYNC_DIO, "async_dio"),
    (InitFlags::FUSE_CACHE_SYMLINKS, "cache_symlinks"),
    (InitFlags::FUSE_HANDLE_KILLPRIV_V2, "handle_killpriv_v2"),
];

/// Inode numbers pass through unchanged only because these agree.
const _: () = assert!(lfs::format::ROOT_INO == INodeNo::ROOT.0);

/// A kernel reply's error.
type Reply<T> = Result<T, fuser::Errno>;

/// The [`Filesystem`] fuser drives: one per mount, shared by all request
/// threads.
pub struct Adapter {
    inner: Arc<Inner>,
    /// Where changes go while the filesystem is frozen (none for a
    /// read-only view, which is never frozen).
    deferred: Option<Arc<Deferred>>,
    /// The control requests, for those that come as ioctl(2) (none for a
    /// view).
    control: Option<crate::control::Requests>,
}

impl std::fmt::Debug for Adapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adapter")
            .field("inner", &self.inner)
            .field("deferred", &self.deferred)
            .finish_non_exhaustive()
    }
}

/// What a request needs, shared with the deferred workers.
#[derive(Debug)]
struct Inner {
    fs: Arc<Fs>,
    /// `st_blksize` for every inode: the filesystem block size.
    block_size: u32,
}

impl Adapter {
    /// An adapter serving `fs`, which is never frozen (a read-only view).
    pub fn new(fs: Arc<Fs>) -> Adapter {
        let block_size = fs.block_size();
        Adapter {
            inner: Arc::new(Inner { fs, block_size }),
            deferred: None,
            control: None,
        }
    }

    /// An adapter serving the live `fs`, whose changes go to `deferred`
    /// while it is frozen, and which takes `control`'s requests that fit
    /// ioctl(2) ([`codes::IOCTL`]) on its files too.
    pub fn live(
        fs: Arc<Fs>,
        deferred: Arc<Deferred>,
        control: crate::control::Requests,
    ) -> Adapter {
        Adapter {
            deferred: Some(deferred),
            control: Some(control),
            ..Adapter::new(fs)
        }
    }

    /// Runs a change now or, while the filesystem is frozen, on a
    /// deferred worker (which waits for the thaw).
    fn change(&self, job: impl FnOnce(&Inner) + Send + 'static) {
        match &self.deferred {
            Some(d) if self.inner.fs.is_frozen() => {
                let inner = self.inner.clone();
                d.push(Box::new(move || job(&inner)));
            }
            _ => job(&self.inner),
        }
    }
}

impl Inner {
    /// The engine's attributes as the kernel wants them.
    fn attr(&self, a: &Attr) -> Reply<FileAttr> {
        file_attr(a, self.block_size).ok_or_else(|| {
            log::error!(
                "inode {} has mode {:#o}, which has no file type",
                a.ino,
                a.mode
            );
            fuser::Errno::EIO
        })
    }

    /// Replies to a request that creates or finds a name.
    fn entry(&self, reply: ReplyEntry, op: &str, ino: u64, res: lfs::Result<Attr>) {
        match res
            .map_err(|e| fail(op, ino, &e))
            .and_then(|a| Ok((self.attr(&a)?, a.generation)))
        {
            Ok((attr, generation)) => reply.entry(&TTL, &attr, Generation(generation.into())),
            Err(e) => reply.error(e),
        }
    }

    fn getattr_of(&self, op: &str, ino: u64) -> Reply<(FileAttr, u32)> {
        let a = self.fs.getattr(ino).map_err(|e| fail(op, ino, &e))?;
        Ok((self.attr(&a)?, a.generation))
    }
}

/// Maps an engine error and logs it.
fn fail(op: &str, ino: u64, err: &lfs::Error) -> fuser::Errno {
    engine_error(op, ino, err).to_fuse()
}

/// Replies with the bytes written or the engine's error.
fn written(reply: ReplyWrite, ino: u64, res: lfs::Result<u32>) {
    match res {
        Ok(n) => reply.written(n),
        Err(e) => reply.error(fail("write", ino, &e)),
    }
}

/// Replies `Ok(())` or the engine's error.
fn empty(reply: ReplyEmpty, op: &str, ino: u64, res: lfs::Result<()>) {
    match res {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(fail(op, ino, &e)),
    }
}

impl Filesystem for Adapter {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        let max_write = match config.set_max_write(MAX_WRITE) {
            Ok(_) => MAX_WRITE,
            Err(nearest) => {
                let _ = config.set_max_write(nearest);
                nearest
            }
        };
        if let Err(nearest) = config.set_max_readahead(MAX_WRITE) {
            let _ = config.set_max_readahead(nearest);
        }
        let mut enabled = Vec::new();
        for (flag, name) in WANTED {
            match config.add_capabilities(*flag) {
                Ok(()) => enabled.push(*name),
                Err(_) => debug!("the kernel does not offer FUSE capability {name}"),
            }
        }
        info!(
            "FUSE session: kernel ABI {:?}, max_write {max_write}, capabilities {}",
            config.kernel_abi(),
            enabled.join(",")
        );
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.inner.entry(
            reply,
            "lookup",
            parent.0,
            self.inner.fs.lookup(parent.0, name.as_bytes()),
        );
    }

    /// The engine keeps no per-lookup state, so there is nothing to drop.
    /// (fuser's default `batch_forget` calls this for each inode.)
    fn forget(&self, _req: &Request, _ino: INodeNo, _nlookup: u64) {}

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.inner.getattr_of("getattr", ino.0) {
            Ok((attr, _)) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = SetAttr {
            // The kernel sends the whole st_mode; the engine takes the
            // permission bits and keeps the type.
            mode: mode.map(|m| m & PERM_MASK),
            uid,
            gid,
            size,
            atime: atime.map(time_set),
            mtime: mtime.map(time_set),
            ctime,
        };
        self.change(move |s| {
            match s
                .fs
                .setattr(ino.0, &set)
                .map_err(|e| fail("setattr", ino.0, &e))
                .and_then(|a| s.attr(&a))
            {
                Ok(attr) => reply.attr(&TTL, &attr),
                Err(e) => reply.error(e),
            }
        });
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.inner.fs.readlink(ino.0) {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(fail("readlink", ino.0, &e)),
        }
    }

    /// `mode` arrives with the caller's umask already applied (fsd does
    /// not ask for FUSE_DONT_MASK).
    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let (name, uid, gid) = (name.to_owned(), req.uid(), req.gid());
        self.change(move |s| {
            let res = s.fs.create(parent.0, name.as_bytes(), mode, rdev, uid, gid);
            s.entry(reply, "mknod", parent.0, res);
        });
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let (name, uid, gid) = (name.to_owned(), req.uid(), req.gid());
        self.change(move |s| {
            let res =
                s.fs.mkdir(parent.0, name.as_bytes(), mode & PERM_MASK, uid, gid);
            s.entry(reply, "mkdir", parent.0, res);
        });
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_owned();
        self.change(move |s| {
            let res = s.fs.unlink(parent.0, name.as_bytes());
            empty(reply, "unlink", parent.0, res);
        });
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_owned();
        self.change(move |s| {
            let res = s.fs.rmdir(parent.0, name.as_bytes());
            empty(reply, "rmdir", parent.0, res);
        });
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let (name, target) = (link_name.to_owned(), target.to_owned());
        let (uid, gid) = (req.uid(), req.gid());
        self.change(move |s| {
            let target = target.as_os_str().as_bytes();
            let res = s.fs.symlink(parent.0, name.as_bytes(), target, uid, gid);
            s.entry(reply, "symlink", parent.0, res);
        });
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let known = RenameFlags::RENAME_NOREPLACE | RenameFlags::RENAME_EXCHANGE;
        if !known.contains(flags) {
            // RENAME_WHITEOUT (overlayfs) or a flag newer than fuser.
            debug!("rename in inode {}: unsupported flags {flags}", parent.0);
            return reply.error(Errno::EINVAL.to_fuse());
        }
        let flags = lfs::fs::RenameFlags {
            noreplace: flags.contains(RenameFlags::RENAME_NOREPLACE),
            exchange: flags.contains(RenameFlags::RENAME_EXCHANGE),
        };
        let (name, newname) = (name.to_owned(), newname.to_owned());
        self.change(move |s| {
            let res = s.fs.rename(
                parent.0,
                name.as_bytes(),
                newparent.0,
                newname.as_bytes(),
                flags,
            );
            empty(reply, "rename", parent.0, res);
        });
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let newname = newname.to_owned();
        self.change(move |s| {
            let res = s.fs.link(ino.0, newparent.0, newname.as_bytes());
            s.entry(reply, "link", ino.0, res);
        });
    }

    /// Counted, so that a file unlinked while open lives until release.
    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.inner.fs.open(ino.0) {
            Ok(()) => reply.opened(FileHandle(0), fopen_flags(flags.0)),
            Err(e) => reply.error(fail("open", ino.0, &e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.inner.fs.read(ino.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(fail("read", ino.0, &e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // The data is copied only for a deferred write (DESIGN §5: no
        // copy of write payloads beyond the one into the log buffer).
        if !self.inner.fs.is_frozen() {
            return written(reply, ino.0, self.inner.fs.write(ino.0, offset, data));
        }
        let data = data.to_vec();
        self.change(move |s| written(reply, ino.0, s.fs.write(ino.0, offset, &data)));
    }

    /// Writes reach the engine synchronously (no writeback cache), so a
    /// close has nothing to flush.
    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    /// The last release of a file unlinked while open frees it.
    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.change(move |s| empty(reply, "release", ino.0, s.fs.release(ino.0)));
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        empty(reply, "fsync", ino.0, self.inner.fs.fsync(ino.0, datasync));
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    /// Fills the kernel's buffer from as many engine batches as fit; the
    /// offset of each entry is the engine's cookie for continuing after it.
    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let mut cookie = offset;
        loop {
            let items = match self.inner.fs.readdir(ino.0, cookie) {
                Ok(items) if items.is_empty() => break,
                Ok(items) => items,
                Err(e) => return reply.error(fail("readdir", ino.0, &e)),
            };
            for item in items {
                let name = OsStr::from_bytes(&item.name);
                if reply.add(
                    INodeNo(item.ino),
                    item.cookie,
                    kind_of_entry(item.kind),
                    name,
                ) {
                    return reply.ok();
                }
                cookie = item.cookie;
            }
        }
        reply.ok();
    }

    /// As [`Self::readdir`], with each entry's attributes. An entry removed
    /// between the listing and its getattr is left out, as if listed after
    /// the removal.
    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let mut cookie = offset;
        loop {
            let items = match self.inner.fs.readdir(ino.0, cookie) {
                Ok(items) if items.is_empty() => break,
                Ok(items) => items,
                Err(e) => return reply.error(fail("readdirplus", ino.0, &e)),
            };
            for item in items {
                let (attr, generation) = match self.inner.fs.getattr(item.ino) {
                    Ok(a) => match self.inner.attr(&a) {
                        Ok(attr) => (attr, a.generation),
                        Err(e) => return reply.error(e),
                    },
                    Err(lfs::Error::NotFound) => {
                        cookie = item.cookie;
                        continue;
                    }
                    Err(e) => return reply.error(fail("readdirplus", item.ino, &e)),
                };
                let name = OsStr::from_bytes(&item.name);
                let generation = Generation(generation.into());
                if reply.add(
                    INodeNo(item.ino),
                    item.cookie,
                    name,
                    &TTL,
                    &attr,
                    generation,
                ) {
                    return reply.ok();
                }
                cookie = item.cookie;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        empty(
            reply,
            "fsyncdir",
            ino.0,
            self.inner.fs.fsync(ino.0, datasync),
        );
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.inner.fs.statfs() {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.bsize,
            ),
            Err(e) => reply.error(fail("statfs", INodeNo::ROOT.0, &e)),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        // POSIX ACLs are not kept: refusing them (as a filesystem mounted
        // without ACL support does) makes cp -a, tar and rsync set the
        // mode bits instead, which stored as plain attributes they would
        // not.
        if name.as_bytes().starts_with(b"system.posix_acl_") {
            debug!(
                "setxattr {name:?} on inode {}: POSIX ACLs are not supported",
                ino.0
            );
            reply.error(Errno::EOPNOTSUPP.to_fuse());
            return;
        }
        let (name, value) = (name.to_owned(), value.to_vec());
        self.change(move |s| {
            let res = s.fs.setxattr(ino.0, name.as_bytes(), &value, flags);
            empty(reply, "setxattr", ino.0, res);
        });
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        match self.inner.fs.getxattr(ino.0, name.as_bytes()) {
            Ok(value) => xattr_reply(reply, size, &value),
            Err(e) => reply.error(fail("getxattr", ino.0, &e)),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.inner.fs.listxattr(ino.0) {
            Ok(names) => xattr_reply(reply, size, &name_list(&names)),
            Err(e) => reply.error(fail("listxattr", ino.0, &e)),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_owned();
        self.change(move |s| {
            let res = s.fs.removexattr(ino.0, name.as_bytes());
            empty(reply, "removexattr", ino.0, res);
        });
    }

    /// Called only without `default_permissions` (with it the kernel
    /// checks). See [`mode_permits`].
    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let a = match self.inner.fs.getattr(ino.0) {
            Ok(a) => a,
            Err(e) => return reply.error(fail("access", ino.0, &e)),
        };
        if mode_permits(a.mode, a.uid, a.gid, req.uid(), req.gid(), mask.bits()) {
            reply.ok();
        } else {
            reply.error(Errno::EACCES.to_fuse());
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let (name, uid, gid) = (name.to_owned(), req.uid(), req.gid());
        self.change(move |s| {
            let res =
                s.fs.create_open(parent.0, name.as_bytes(), mode, uid, gid)
                    .map_err(|e| fail("create", parent.0, &e))
                    .and_then(|a| Ok((s.attr(&a)?, a.generation)));
            match res {
                Ok((attr, generation)) => reply.created(
                    &TTL,
                    &attr,
                    Generation(generation.into()),
                    FileHandle(0),
                    fopen_flags(flags),
                ),
                Err(e) => reply.error(e),
            }
        });
    }

    /// The control requests that fit an ioctl ([`codes::IOCTL`]), on any
    /// file or directory of the mount, with the caller's credentials as
    /// the peer: the same permission rule and answers as on the socket.
    /// FREEZE and THAW run here (neither waits for a thaw); the others
    /// change the filesystem and are deferred while it is frozen.
    fn ioctl(
        &self,
        req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        let Some(control) = self.control.clone().filter(|_| codes::IOCTL.contains(&cmd)) else {
            return reply.error(fuser::Errno::ENOTTY);
        };
        let peer = Peer {
            uid: req.uid(),
            gid: req.gid(),
            pid: i32::try_from(req.pid()).unwrap_or(0),
        };
        let data = in_data.to_vec();
        let run = move |_: &Inner| match control.handle(cmd, &data, &peer) {
            Ok(payload) => reply.ioctl(0, &payload),
            Err(errno) => reply.error(fuser::Errno::from_i32(errno)),
        };
        if cmd == codes::FREEZE || cmd == codes::THAW {
            run(&self.inner);
        } else {
            self.change(run);
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.change(move |s| {
            let res = s.fs.fallocate(ino.0, offset, length, mode);
            empty(reply, "fallocate", ino.0, res);
        });
    }
}

/// Replies to getxattr/listxattr: the size when probed with `size` 0, the
/// data if it fits in `size`, else ERANGE.
fn xattr_reply(reply: ReplyXattr, size: u32, data: &[u8]) {
    match xattr_answer(size, data.len()) {
        XattrAnswer::Size(n) => reply.size(n),
        XattrAnswer::Data => reply.data(data),
        XattrAnswer::Error(e) => reply.error(e.to_fuse()),
    }
}
