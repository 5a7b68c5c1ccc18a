//! A heap buffer whose first byte is aligned to [`DIRECT_IO_ALIGN`].
//!
//! `O_DIRECT` I/O needs the memory, not just the offset and length, to be
//! aligned. Instead of an aligned allocation (which needs `unsafe`), the
//! buffer over-allocates a `Vec<u8>` by `DIRECT_IO_ALIGN - 1` bytes and
//! exposes the aligned window inside it.
//!
//! Invariant: `storage` is never resized after construction, so its heap
//! pointer, and therefore the alignment of `storage[start..]`, never changes.

use std::fmt;
use std::ops::{Deref, DerefMut};

use super::DIRECT_IO_ALIGN;

/// A zero-initialised byte buffer aligned to [`DIRECT_IO_ALIGN`].
pub struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// Allocates `len` zero bytes starting at a [`DIRECT_IO_ALIGN`]-aligned
    /// address.
    ///
    /// # Panics
    /// If `len + DIRECT_IO_ALIGN` overflows `usize` (as `vec!` would).
    pub fn zeroed(len: usize) -> AlignedBuf {
        let capacity = match len.checked_add(DIRECT_IO_ALIGN - 1) {
            Some(c) => c,
            None => panic!("AlignedBuf of {len} bytes overflows usize"),
        };
        let storage = vec![0u8; capacity];
        let start = padding_to_align(storage.as_ptr() as usize);
        AlignedBuf {
            storage,
            start,
            len,
        }
    }

    /// The buffer's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Bytes to add to `addr` to reach the next multiple of `DIRECT_IO_ALIGN`.
fn padding_to_align(addr: usize) -> usize {
    (DIRECT_IO_ALIGN - addr % DIRECT_IO_ALIGN) % DIRECT_IO_ALIGN
}

/// True if `ptr` is aligned for `O_DIRECT`.
pub(crate) fn is_aligned_ptr(ptr: *const u8) -> bool {
    (ptr as usize) % DIRECT_IO_ALIGN == 0
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_zeroed_and_sized() {
        for len in [0, 1, 511, 4096, 4097, 3 * 4096 + 17] {
            let mut b = AlignedBuf::zeroed(len);
            assert_eq!(b.len(), len);
            assert_eq!(b.is_empty(), len == 0);
            assert!(is_aligned_ptr(b.as_ptr()), "len {len}");
            assert!(b.iter().all(|&x| x == 0));
            b.fill(0xAB);
            assert!(b.iter().all(|&x| x == 0xAB));
        }
    }

    #[test]
    fn padding_reaches_next_multiple() {
        assert_eq!(padding_to_align(0), 0);
        assert_eq!(padding_to_align(1), DIRECT_IO_ALIGN - 1);
        assert_eq!(padding_to_align(DIRECT_IO_ALIGN), 0);
        assert_eq!(padding_to_align(DIRECT_IO_ALIGN + 5), DIRECT_IO_ALIGN - 5);
    }

    #[test]
    fn debug_does_not_dump_contents() {
        let b = AlignedBuf::zeroed(8);
        assert_eq!(format!("{b:?}"), "AlignedBuf { len: 8, .. }");
    }
}
