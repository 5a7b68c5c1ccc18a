//! A device backed by an image file or a real block device.
//!
//! Job: turn the [`BlockDevice`] calls into `pread`/`pwritev`/`fdatasync`
//! and discard syscalls on one file descriptor, with errors that name the
//! path.
//!
//! Invariants and why:
//! * The length is fixed at open (file size from `fstat`, block device size
//!   from `BLKGETSIZE64`); the device never grows a file, because a write
//!   past the end means the engine computed a wrong address.
//! * A read-write open with [`OpenOptions::exclusive`] holds
//!   `flock(LOCK_EX)` for the device's lifetime, so two lfs processes never
//!   write one device at once. On a block device it is also opened with
//!   `O_EXCL`, which Linux refuses (`EBUSY`) while the device is mounted
//!   or claimed by another exclusive opener, so mkfs cannot format a
//!   kernel-mounted filesystem. A read-only exclusive open holds
//!   `flock(LOCK_SH)`: readers that need the device to stay still (fsd
//!   `-o ro`, fsck) coexist with each other but not with a writer, so
//!   neither fsck nor a read-only mount ever reads a device that fsd or
//!   mkfs is writing, and mkfs never formats a device mounted read-only.
//!   A read-only open that is not exclusive takes no lock (fsctl's
//!   inspection of a device in use).
//! * With [`OpenOptions::direct`] the file is opened `O_DIRECT`; offsets
//!   and lengths must then be multiples of [`DIRECT_IO_ALIGN`], and memory
//!   that is not aligned is bounced through an [`AlignedBuf`].
//! * Discard is a hint: if the file or device cannot discard, it succeeds
//!   and does nothing (logged at debug level).

use std::fmt;
use std::fs::File;
use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{FallocateFlags, Flock, FlockArg, OFlag};

use super::aligned::{is_aligned_ptr, AlignedBuf};
use super::{check_range, total_len, BlockDevice, DIRECT_IO_ALIGN};

/// Linux's limit on the number of buffers one `pwritev` takes (UIO_MAXIOV).
const IOV_MAX: usize = 1024;

/// Largest bounce buffer for `O_DIRECT` I/O from unaligned memory; larger
/// transfers go through it in pieces. A multiple of [`DIRECT_IO_ALIGN`].
const DIRECT_BOUNCE_MAX: usize = 256 * DIRECT_IO_ALIGN;

/// The `ioctl` type byte of the block layer's requests (`linux/fs.h`).
const BLK_IOCTL_TYPE: u8 = 0x12;
/// `BLKGETSIZE64 = _IOR(0x12, 114, size_t)`.
const BLKGETSIZE64_NR: u8 = 114;
/// `BLKDISCARD = _IO(0x12, 119)`.
const BLKDISCARD_NR: u8 = 119;

// The kernel encodes BLKGETSIZE64 with size_t's size but always writes a
// u64, hence the "bad" variant with an explicit request code.
nix::ioctl_read_bad!(
    blkgetsize64,
    nix::request_code_read!(
        BLK_IOCTL_TYPE,
        BLKGETSIZE64_NR,
        std::mem::size_of::<usize>()
    ),
    u64
);
// BLKDISCARD takes a pointer to `[offset, length]` in bytes.
nix::ioctl_write_ptr_bad!(
    blkdiscard,
    nix::request_code_none!(BLK_IOCTL_TYPE, BLKDISCARD_NR),
    [u64; 2]
);

/// How to open a [`FileDevice`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    /// Open read-only: writes, discards fail and no lock is taken.
    pub read_only: bool,
    /// Open with `O_DIRECT`, bypassing the page cache.
    pub direct: bool,
    /// Refuse to open a device another process has open in a conflicting
    /// way: read-write, one that anybody holds (`flock(LOCK_EX)`) or, for a
    /// block device, that is mounted (`O_EXCL`); read-only, one that a
    /// writer holds (`flock(LOCK_SH)`).
    pub exclusive: bool,
}

impl Default for OpenOptions {
    /// Read-write, buffered, exclusive.
    fn default() -> Self {
        OpenOptions {
            read_only: false,
            direct: false,
            exclusive: true,
        }
    }
}

/// The open descriptor; the lock, if any, lives exactly as long as it.
#[derive(Debug)]
enum Handle {
    Locked(Flock<File>),
    Unlocked(File),
}

impl Handle {
    fn file(&self) -> &File {
        match self {
            Handle::Locked(f) => f,
            Handle::Unlocked(f) => f,
        }
    }
}

/// A [`BlockDevice`] on an image file or a block device node.
pub struct FileDevice {
    path: PathBuf,
    handle: Handle,
    len: u64,
    block_device: bool,
    opts: OpenOptions,
}

impl fmt::Debug for FileDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileDevice")
            .field("path", &self.path)
            .field("len", &self.len)
            .field("block_device", &self.block_device)
            .field("opts", &self.opts)
            .finish()
    }
}

/// `err` with `context` in front of its message, keeping its kind.
fn with_context(err: io::Error, context: impl fmt::Display) -> io::Error {
    io::Error::new(err.kind(), format!("{context}: {err}"))
}

fn errno_context(errno: Errno, context: impl fmt::Display) -> io::Error {
    with_context(io::Error::from(errno), context)
}

impl FileDevice {
    /// Opens `path`, which must be a regular file or a block device.
    pub fn open(path: &Path, opts: OpenOptions) -> io::Result<FileDevice> {
        let shown = path.display();
        let meta =
            std::fs::metadata(path).map_err(|e| with_context(e, format!("cannot open {shown}")))?;
        let block_device = meta.file_type().is_block_device();
        if !block_device && !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{shown} is neither a regular file nor a block device"),
            ));
        }
        let lock = opts.exclusive;

        let mut flags = OFlag::empty();
        if opts.direct {
            flags |= OFlag::O_DIRECT;
        }
        if block_device && lock && !opts.read_only {
            // Without O_CREAT, O_EXCL on a block device means "claim it
            // exclusively": EBUSY if mounted or claimed by another opener.
            flags |= OFlag::O_EXCL;
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(!opts.read_only)
            .custom_flags(flags.bits())
            .open(path)
            .map_err(|e| match e.raw_os_error().map(Errno::from_raw) {
                Some(Errno::EBUSY) if block_device && lock && !opts.read_only => io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    format!(
                        "{shown} is mounted or in use by another process \
                         (exclusive open refused: {e})"
                    ),
                ),
                Some(Errno::EINVAL) if opts.direct => io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("O_DIRECT is not supported on {shown} (open refused it: {e})"),
                ),
                _ => with_context(e, format!("cannot open {shown}")),
            })?;

        // The type seen through the descriptor is authoritative; if the
        // path was swapped between stat and open, the O_EXCL decision
        // above may be wrong, so refuse.
        let meta = file
            .metadata()
            .map_err(|e| with_context(e, format!("cannot stat {shown}")))?;
        if meta.file_type().is_block_device() != block_device {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{shown} changed type while being opened"),
            ));
        }
        let len = if block_device {
            block_device_size(&file)
                .map_err(|e| errno_context(e, format!("cannot get the size of {shown}")))?
        } else {
            meta.len()
        };

        let handle = if lock {
            let (arg, holder) = if opts.read_only {
                (FlockArg::LockSharedNonblock, "open read-write by")
            } else {
                (FlockArg::LockExclusiveNonblock, "in use by")
            };
            match Flock::lock(file, arg) {
                Ok(locked) => Handle::Locked(locked),
                Err((_, Errno::EWOULDBLOCK)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::ResourceBusy,
                        format!("{shown} is {holder} another process (locked)"),
                    ))
                }
                Err((_, e)) => return Err(errno_context(e, format!("cannot lock {shown}"))),
            }
        } else {
            Handle::Unlocked(file)
        };

        Ok(FileDevice {
            path: path.to_path_buf(),
            handle,
            len,
            block_device,
            opts,
        })
    }

    /// Sets the length of an image file opened read-write (mkfs's
    /// `--size`): the one way the device's length changes, called before
    /// anything is written, never by the engine.
    pub fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.check_writable("resize")?;
        if self.block_device {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cannot resize {}: a block device", self.path.display()),
            ));
        }
        self.file().set_len(len).map_err(|e| {
            with_context(
                e,
                format!("resizing {} to {len} bytes", self.path.display()),
            )
        })?;
        self.len = len;
        Ok(())
    }

    /// The path the device was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True if the path is a block device node, false for an image file.
    pub fn is_block_device(&self) -> bool {
        self.block_device
    }

    /// The options the device was opened with.
    pub fn options(&self) -> OpenOptions {
        self.opts
    }

    fn file(&self) -> &File {
        self.handle.file()
    }

    fn check_writable(&self, op: &str) -> io::Result<()> {
        if self.opts.read_only {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("cannot {op} {}: opened read-only", self.path.display()),
            ));
        }
        Ok(())
    }

    /// Under `O_DIRECT`, the kernel rejects unaligned offsets and lengths
    /// with a bare EINVAL; say what is wrong instead.
    fn check_direct_alignment(&self, op: &str, offset: u64, len: u64) -> io::Result<()> {
        let align = DIRECT_IO_ALIGN as u64;
        if self.opts.direct && (offset % align != 0 || len % align != 0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{op} {}: O_DIRECT needs offset and length aligned to {DIRECT_IO_ALIGN} \
                     bytes, got {len} bytes at offset {offset}",
                    self.path.display()
                ),
            ));
        }
        Ok(())
    }

    fn io_context(&self, op: &str, offset: u64) -> String {
        format!("{op} {} at offset {offset}", self.path.display())
    }

    /// `pread` until `buf` is full.
    fn pread_exact(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.file().read_at(buf, offset) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "{}: device ended early ({} bytes missing)",
                            self.io_context("read", offset),
                            buf.len()
                        ),
                    ))
                }
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(with_context(e, self.io_context("read", offset))),
            }
        }
        Ok(())
    }

    /// `pwritev` until everything is written, in batches of `IOV_MAX`.
    fn pwritev_all(&self, bufs: &[IoSlice<'_>], mut offset: u64) -> io::Result<()> {
        let mut iovs: Vec<IoSlice<'_>> = bufs.iter().filter(|b| !b.is_empty()).copied().collect();
        let mut rest: &mut [IoSlice<'_>] = &mut iovs;
        while !rest.is_empty() {
            let batch = &rest[..rest.len().min(IOV_MAX)];
            let off = i64::try_from(offset).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{}: offset exceeds off_t", self.io_context("write", offset)),
                )
            })?;
            match nix::sys::uio::pwritev(self.file(), batch, off) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        format!("{}: wrote nothing", self.io_context("write", offset)),
                    ))
                }
                Ok(n) => {
                    IoSlice::advance_slices(&mut rest, n);
                    offset += n as u64;
                }
                Err(Errno::EINTR) => {}
                Err(e) => return Err(errno_context(e, self.io_context("write", offset))),
            }
        }
        Ok(())
    }

    /// `O_DIRECT` read into memory that may be unaligned.
    fn read_direct(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if is_aligned_ptr(buf.as_ptr()) {
            return self.pread_exact(buf, offset);
        }
        let mut bounce = AlignedBuf::zeroed(buf.len().min(DIRECT_BOUNCE_MAX));
        let mut pos = offset;
        for chunk in buf.chunks_mut(bounce.len()) {
            // Lengths are multiples of the alignment, so every chunk is too.
            let staged = &mut bounce[..chunk.len()];
            self.pread_exact(staged, pos)?;
            chunk.copy_from_slice(staged);
            pos += chunk.len() as u64;
        }
        Ok(())
    }

    /// `O_DIRECT` write from memory that may be unaligned.
    fn write_direct(&self, bufs: &[IoSlice<'_>], offset: u64, total: u64) -> io::Result<()> {
        let all_aligned = bufs
            .iter()
            .all(|b| is_aligned_ptr(b.as_ptr()) && b.len() % DIRECT_IO_ALIGN == 0);
        if all_aligned {
            return self.pwritev_all(bufs, offset);
        }
        // `total` fits in memory: it is the length of slices we were given.
        let total = total as usize;
        let mut bounce = AlignedBuf::zeroed(total.min(DIRECT_BOUNCE_MAX));
        let mut source = Gather::new(bufs);
        let mut done = 0usize;
        while done < total {
            let n = (total - done).min(bounce.len());
            let staged = &mut bounce[..n];
            source.fill(staged);
            self.pwritev_all(&[IoSlice::new(staged)], offset + done as u64)?;
            done += n;
        }
        Ok(())
    }

    fn discard_unsupported(&self, offset: u64, len: u64, errno: Errno) -> io::Result<()> {
        log::debug!(
            "discard of {len} bytes at offset {offset} on {} not supported ({errno}); ignored",
            self.path.display()
        );
        Ok(())
    }
}

/// Copies the concatenation of a vectored buffer out piece by piece.
struct Gather<'a, 'b> {
    bufs: &'a [IoSlice<'b>],
    index: usize,
    pos: usize,
}

impl<'a, 'b> Gather<'a, 'b> {
    fn new(bufs: &'a [IoSlice<'b>]) -> Self {
        Gather {
            bufs,
            index: 0,
            pos: 0,
        }
    }

    /// Fills `dst` with the next `dst.len()` bytes (callers never ask for
    /// more than remain).
    fn fill(&mut self, mut dst: &mut [u8]) {
        while !dst.is_empty() && self.index < self.bufs.len() {
            let src = &self.bufs[self.index][self.pos..];
            let n = src.len().min(dst.len());
            dst[..n].copy_from_slice(&src[..n]);
            dst = &mut dst[n..];
            self.pos += n;
            if self.pos == self.bufs[self.index].len() {
                self.index += 1;
                self.pos = 0;
            }
        }
    }
}

#[allow(unsafe_code)]
fn block_device_size(file: &File) -> nix::Result<u64> {
    let mut size: u64 = 0;
    // SAFETY: the descriptor is open for the whole call (borrowed from
    // `file`), and BLKGETSIZE64 writes exactly one u64 through the pointer,
    // which points to a live, writable, aligned u64 on our stack.
    unsafe { blkgetsize64(file.as_raw_fd(), &mut size) }?;
    Ok(size)
}

#[allow(unsafe_code)]
fn block_device_discard(file: &File, offset: u64, len: u64) -> nix::Result<()> {
    let range: [u64; 2] = [offset, len];
    // SAFETY: the descriptor is open for the whole call (borrowed from
    // `file`), and BLKDISCARD only reads two u64s through the pointer,
    // which points to a live, aligned `[u64; 2]` on our stack.
    unsafe { blkdiscard(file.as_raw_fd(), &range) }?;
    Ok(())
}

impl BlockDevice for FileDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let op = format!("read {}", self.path.display());
        check_range(&op, self.len, offset, buf.len() as u64)?;
        if buf.is_empty() {
            return Ok(());
        }
        if self.opts.direct {
            self.check_direct_alignment("read", offset, buf.len() as u64)?;
            self.read_direct(buf, offset)
        } else {
            self.pread_exact(buf, offset)
        }
    }

    fn write_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<()> {
        self.check_writable("write")?;
        let total = total_len(bufs)?;
        let op = format!("write {}", self.path.display());
        check_range(&op, self.len, offset, total)?;
        if total == 0 {
            return Ok(());
        }
        if self.opts.direct {
            self.check_direct_alignment("write", offset, total)?;
            self.write_direct(bufs, offset, total)
        } else {
            self.pwritev_all(bufs, offset)
        }
    }

    fn flush(&self) -> io::Result<()> {
        if self.opts.read_only {
            // Nothing can be dirty through a read-only descriptor.
            return Ok(());
        }
        self.file()
            .sync_data()
            .map_err(|e| with_context(e, format!("flush {}", self.path.display())))
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_writable("discard")?;
        let op = format!("discard {}", self.path.display());
        check_range(&op, self.len, offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let result = if self.block_device {
            block_device_discard(self.file(), offset, len)
        } else {
            // In range of a device whose length came from an i64 st_size.
            let (off, n) = (offset as i64, len as i64);
            nix::fcntl::fallocate(
                self.file().as_raw_fd(),
                FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE,
                off,
                n,
            )
        };
        match result {
            Ok(()) => Ok(()),
            Err(e @ (Errno::EOPNOTSUPP | Errno::ENOTTY | Errno::EINVAL)) => {
                self.discard_unsupported(offset, len, e)
            }
            Err(e) => Err(errno_context(e, self.io_context("discard", offset))),
        }
    }

    fn len(&self) -> u64 {
        self.len
    }
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
