//! An in-memory device of fixed length.
//!
//! Used by unit tests and as the durable medium under a
//! [`FaultDevice`](super::FaultDevice). Every write is immediately
//! "durable" (there is nothing to lose), so `flush` does nothing, and
//! `discard` zeroes the range so tests see the "reads back as zeros" case.
//!
//! Invariant: the byte vector's length never changes after construction.

use std::io::{self, IoSlice};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::{check_range, total_len, BlockDevice};

/// A fixed-size device held in memory.
#[derive(Debug)]
pub struct MemDevice {
    data: RwLock<Vec<u8>>,
    len: u64,
}

impl MemDevice {
    /// A zero-filled device of `len` bytes.
    ///
    /// # Panics
    /// If `len` does not fit in the address space.
    pub fn new(len: u64) -> MemDevice {
        let n = match usize::try_from(len) {
            Ok(n) => n,
            Err(_) => panic!("MemDevice of {len} bytes does not fit in memory"),
        };
        MemDevice::from_vec(vec![0u8; n])
    }

    /// A device whose contents (and length) are `data`.
    pub fn from_vec(data: Vec<u8>) -> MemDevice {
        let len = data.len() as u64;
        MemDevice {
            data: RwLock::new(data),
            len,
        }
    }

    /// A copy of the whole device.
    pub fn snapshot(&self) -> Vec<u8> {
        self.read_lock().clone()
    }

    /// The contents, consuming the device.
    pub fn into_vec(self) -> Vec<u8> {
        self.data
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }

    // A panic while the lock is held cannot leave the bytes in a state the
    // contract forbids (a torn write is allowed), so poisoning is ignored.
    fn read_lock(&self) -> RwLockReadGuard<'_, Vec<u8>> {
        self.data.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_lock(&self) -> RwLockWriteGuard<'_, Vec<u8>> {
        self.data.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Byte range `[offset, offset + len)` as `usize` indices. Only called
/// after `check_range` against a length that came from a `Vec`, so both
/// ends fit in `usize`.
fn index_range(offset: u64, len: u64) -> std::ops::Range<usize> {
    let start = offset as usize;
    start..start + len as usize
}

impl BlockDevice for MemDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        check_range("MemDevice read", self.len, offset, buf.len() as u64)?;
        buf.copy_from_slice(&self.read_lock()[index_range(offset, buf.len() as u64)]);
        Ok(())
    }

    fn write_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<()> {
        let total = total_len(bufs)?;
        check_range("MemDevice write", self.len, offset, total)?;
        let mut data = self.write_lock();
        let mut pos = offset as usize;
        for b in bufs {
            data[pos..pos + b.len()].copy_from_slice(b);
            pos += b.len();
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range("MemDevice discard", self.len, offset, len)?;
        self.write_lock()[index_range(offset, len)].fill(0);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_is_zeroed_with_fixed_len() {
        let d = MemDevice::new(4096);
        assert_eq!(d.len(), 4096);
        assert!(!d.is_empty());
        assert_eq!(d.snapshot(), vec![0u8; 4096]);
        assert!(MemDevice::new(0).is_empty());
    }

    #[test]
    fn write_then_read_back() {
        let d = MemDevice::new(1024);
        d.write_all_at(b"abcdef", 100).unwrap();
        let mut buf = [0u8; 8];
        d.read_at(&mut buf, 99).unwrap();
        assert_eq!(&buf, b"\0abcdef\0");
    }

    #[test]
    fn vectored_write_concatenates() {
        let d = MemDevice::new(64);
        let bufs = [
            IoSlice::new(b"ab"),
            IoSlice::new(b""),
            IoSlice::new(b"cde"),
            IoSlice::new(b"f"),
        ];
        d.write_at(&bufs, 10).unwrap();
        let snap = d.snapshot();
        assert_eq!(&snap[10..16], b"abcdef");
        assert_eq!(snap[9], 0);
        assert_eq!(snap[16], 0);
    }

    #[test]
    fn from_vec_snapshot_and_into_vec() {
        let d = MemDevice::from_vec(b"0123456789".to_vec());
        assert_eq!(d.len(), 10);
        d.write_all_at(b"xy", 8).unwrap();
        assert_eq!(d.snapshot(), b"01234567xy");
        assert_eq!(d.into_vec(), b"01234567xy");
    }

    #[test]
    fn out_of_bounds_fails_without_effect() {
        let d = MemDevice::new(16);
        let mut buf = [0u8; 4];
        let err = d.read_at(&mut buf, 13).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let err = d.write_all_at(b"abcd", 13).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let err = d.write_all_at(b"a", u64::MAX).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let err = d.discard(10, 7).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(d.snapshot(), vec![0u8; 16]);
        // Exactly up to the end is fine, as is an empty access at the end.
        d.write_all_at(b"abcd", 12).unwrap();
        d.read_at(&mut [], 16).unwrap();
    }

    #[test]
    fn discard_zeroes_and_flush_is_noop() {
        let d = MemDevice::from_vec(vec![0xFF; 32]);
        d.discard(8, 8).unwrap();
        d.flush().unwrap();
        let snap = d.snapshot();
        assert!(snap[..8].iter().all(|&b| b == 0xFF));
        assert!(snap[8..16].iter().all(|&b| b == 0));
        assert!(snap[16..].iter().all(|&b| b == 0xFF));
    }

    #[test]
    fn shared_between_threads() {
        let d = std::sync::Arc::new(MemDevice::new(8 * 256));
        let handles: Vec<_> = (0..8u8)
            .map(|i| {
                let d = std::sync::Arc::clone(&d);
                std::thread::spawn(move || d.write_all_at(&[i; 256], u64::from(i) * 256))
            })
            .collect();
        for h in handles {
            h.join().unwrap().unwrap();
        }
        let snap = d.snapshot();
        for i in 0..8u8 {
            assert!(snap[usize::from(i) * 256..][..256].iter().all(|&b| b == i));
        }
    }
}
