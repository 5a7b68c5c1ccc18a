//! The user-space block layer.
//!
//! Every byte lfs reads or writes goes through a [`BlockDevice`]. The trait
//! is deliberately small so that a fault-injecting wrapper can stand in for
//! any device in tests.
//!
//! Contract (what the engine assumes, also written in lfs(5)):
//! * `write_at` of a vectored buffer writes the concatenation at `offset`;
//!   it is not durable until a later `flush` returns `Ok`.
//! * After a crash, any subset of the writes since the last completed
//!   `flush` may have reached the device, each possibly torn at 512-byte
//!   sector granularity, in any order. Writes before it are durable.
//! * `discard` is a hint: the range reads back as either old data or zeros.
//!
//! Further rules every implementation follows:
//! * A device has a fixed length ([`BlockDevice::len`]) for its lifetime.
//!   Any read, write or discard that reaches past it fails with
//!   [`io::ErrorKind::InvalidInput`] and has no effect; nothing panics on a
//!   bad offset or length.
//! * `read_at` fills the whole buffer or fails; a device that turns out to
//!   be shorter than it claimed fails with [`io::ErrorKind::UnexpectedEof`].
//! * `write_at` writes everything or returns an error. After an error the
//!   range holds unspecified data (old, new, or a sector mix of both).
//! * Devices are `Send + Sync`: the engine shares one device between
//!   threads, and calls on it may run concurrently.
//!
//! The devices:
//! * [`FileDevice`] (`file.rs`): an image file or a real block device,
//!   optionally with `O_DIRECT`, locked against a second read-write opener.
//! * [`MemDevice`] (`mem.rs`): a fixed-size in-memory device.
//! * [`NbdDevice`] (`nbd/`): an export of an NBD server over TCP or a
//!   Unix socket, surviving dropped connections without losing a write.
//! * [`FaultDevice`] (`fault.rs`): wraps another device as the durable
//!   medium and simulates crashes (dropped, reordered and torn unflushed
//!   writes) and injected I/O errors.
//! * [`open_device`] (`open.rs`): the one place a device name as the
//!   commands take it (a path or an NBD name) becomes a device.
//! * [`AlignedBuf`] (`aligned.rs`) is the heap buffer aligned for
//!   `O_DIRECT` that [`FileDevice`] bounces unaligned memory through.

use std::io::{self, IoSlice};
use std::sync::Arc;

mod aligned;
mod fault;
mod file;
mod mem;
pub mod nbd;
mod open;

pub use aligned::AlignedBuf;
pub use fault::{is_simulated_fault, CrashMode, FaultDevice, PendingWrite};
pub use file::{FileDevice, OpenOptions};
pub use mem::MemDevice;
pub use nbd::{NbdDevice, NbdOptions};
pub use open::{open_device, DeviceName};

/// The unit of atomicity the engine assumes: a write may be torn between
/// sectors, never inside one.
pub const SECTOR_SIZE: usize = 512;

/// Offsets, lengths and memory of `O_DIRECT` I/O must be multiples of this.
/// 4096 covers every logical block size in common use (512 and 4096).
pub const DIRECT_IO_ALIGN: usize = 4096;

/// A byte-addressed device of fixed length. See the [module docs](self)
/// for the contract.
pub trait BlockDevice: Send + Sync + std::fmt::Debug {
    /// Reads exactly `buf.len()` bytes starting at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// Writes the concatenation of `bufs` starting at `offset`: all of it,
    /// or an error.
    fn write_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<()>;

    /// Durability barrier: every write that returned before this call is
    /// durable once it returns `Ok`.
    fn flush(&self) -> io::Result<()>;

    /// Hints that `len` bytes at `offset` are no longer needed. The range
    /// afterwards reads back as either its old data or zeros.
    fn discard(&self, offset: u64, len: u64) -> io::Result<()>;

    /// The device's length in bytes.
    fn len(&self) -> u64;

    /// True if the device has no bytes at all.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes one contiguous buffer at `offset`.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write_at(&[IoSlice::new(buf)], offset)
    }
}

/// Forwards every method, so `Arc<dyn BlockDevice>`, `Box<dyn BlockDevice>`
/// and `&dyn BlockDevice` are devices themselves.
macro_rules! forward_block_device {
    ($($ty:ty),*) => {$(
        impl<T: BlockDevice + ?Sized> BlockDevice for $ty {
            fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
                (**self).read_at(buf, offset)
            }
            fn write_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<()> {
                (**self).write_at(bufs, offset)
            }
            fn flush(&self) -> io::Result<()> {
                (**self).flush()
            }
            fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
                (**self).discard(offset, len)
            }
            fn len(&self) -> u64 {
                (**self).len()
            }
            fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
                (**self).write_all_at(buf, offset)
            }
        }
    )*};
}

forward_block_device!(Arc<T>, Box<T>, &T);

/// Total length of a vectored buffer, or `InvalidInput` if it overflows.
pub(crate) fn total_len(bufs: &[IoSlice<'_>]) -> io::Result<u64> {
    bufs.iter()
        .try_fold(0u64, |acc, b| acc.checked_add(b.len() as u64))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "vectored write length overflows u64",
            )
        })
}

/// Checks that `[offset, offset + len)` lies inside a device of `dev_len`
/// bytes. `what` names the operation and device for the error message.
pub(crate) fn check_range(what: &str, dev_len: u64, offset: u64, len: u64) -> io::Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= dev_len => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{what}: range of {len} bytes at offset {offset} is outside the device \
                 ({dev_len} bytes)"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_range_accepts_inside_and_rejects_outside() {
        assert!(check_range("t", 100, 0, 100).is_ok());
        assert!(check_range("t", 100, 100, 0).is_ok());
        let err = check_range("t", 100, 50, 51).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("outside the device"), "{err}");
        let err = check_range("t", 100, u64::MAX, 2).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn total_len_sums_slices() {
        let a = [1u8; 3];
        let b = [2u8; 5];
        assert_eq!(total_len(&[IoSlice::new(&a), IoSlice::new(&b)]).unwrap(), 8);
        assert_eq!(total_len(&[]).unwrap(), 0);
    }

    #[test]
    fn arc_box_and_ref_dyn_devices_forward() {
        let arc: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(1024));
        arc.write_all_at(b"hello", 10).unwrap();
        let boxed: Box<dyn BlockDevice> = Box::new(Arc::clone(&arc));
        let mut buf = [0u8; 5];
        boxed.read_at(&mut buf, 10).unwrap();
        assert_eq!(&buf, b"hello");
        let by_ref: &dyn BlockDevice = &*arc;
        assert_eq!(by_ref.len(), 1024);
        assert!(!by_ref.is_empty());
        boxed.discard(10, 5).unwrap();
        boxed.flush().unwrap();
        fn read_through<D: BlockDevice>(dev: D, buf: &mut [u8]) {
            dev.read_at(buf, 10).unwrap();
        }
        read_through(&boxed, &mut buf);
        assert_eq!(buf, [0u8; 5]);
    }
}
