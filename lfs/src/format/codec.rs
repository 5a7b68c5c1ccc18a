//! Little-endian reading and writing, checksums and the decode error type.

use std::fmt;

/// Why a structure failed to decode. Every decoder returns one of these for
/// any input it cannot accept; none panics.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The buffer is shorter than the structure.
    Truncated {
        /// Structure being decoded.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        got: usize,
    },
    /// The magic number is wrong: this is not the expected structure.
    BadMagic {
        /// Structure being decoded.
        what: &'static str,
        /// The magic expected.
        expected: u32,
        /// The magic found.
        found: u32,
    },
    /// A version this build does not understand.
    UnsupportedVersion {
        /// Structure being decoded.
        what: &'static str,
        /// The version found.
        found: u32,
    },
    /// The stored checksum does not match the contents.
    BadChecksum {
        /// Structure being decoded.
        what: &'static str,
        /// Checksum stored on disk.
        stored: u32,
        /// Checksum computed over the bytes read.
        computed: u32,
    },
    /// The filesystem uses incompatible features this build lacks.
    UnknownIncompatFeatures(u64),
    /// A field holds an impossible value.
    InvalidField {
        /// Structure being decoded.
        what: &'static str,
        /// Field name.
        field: &'static str,
        /// The value found.
        value: u64,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { what, needed, got } => {
                write!(f, "{what}: truncated ({got} bytes, need {needed})")
            }
            DecodeError::BadMagic {
                what,
                expected,
                found,
            } => write!(
                f,
                "{what}: bad magic {found:#010x} (expected {expected:#010x})"
            ),
            DecodeError::UnsupportedVersion { what, found } => {
                write!(f, "{what}: unsupported version {found}")
            }
            DecodeError::BadChecksum {
                what,
                stored,
                computed,
            } => write!(
                f,
                "{what}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            DecodeError::UnknownIncompatFeatures(bits) => {
                write!(f, "unknown incompatible features {bits:#x}")
            }
            DecodeError::InvalidField { what, field, value } => {
                write!(f, "{what}: invalid {field} {value}")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// A bounds-checked little-endian cursor over a byte slice.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// Starts reading `buf`, which must hold at least `len` bytes of the
    /// structure named `what`.
    pub fn new(buf: &'a [u8], what: &'static str, len: usize) -> Result<Self, DecodeError> {
        if buf.len() < len {
            return Err(DecodeError::Truncated {
                what,
                needed: len,
                got: buf.len(),
            });
        }
        Ok(Reader { buf, pos: 0, what })
    }

    /// Takes the next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.saturating_add(n);
        let s = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated {
            what: self.what,
            needed: end,
            got: self.buf.len(),
        })?;
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    /// Reads a u8.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(u8::from_le_bytes(self.array()?))
    }
    /// Reads a little-endian u16.
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    /// Reads a little-endian u64.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    /// Reads a little-endian i64.
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    /// Reads a fixed byte array.
    pub fn fixed<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        self.array()
    }
    /// Skips `n` reserved bytes.
    pub fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.bytes(n).map(|_| ())
    }
    /// Current offset.
    pub fn pos(&self) -> usize {
        self.pos
    }
}

/// A little-endian writer appending to a byte vector.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer with room for `cap` bytes.
    pub fn with_capacity(cap: usize) -> Self {
        Writer {
            buf: Vec::with_capacity(cap),
        }
    }
    /// Appends a u8.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// Appends a little-endian u16.
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends a little-endian u32.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends a little-endian u64.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends a little-endian i64.
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    /// Appends `n` zero bytes (reserved space).
    pub fn zeros(&mut self, n: usize) {
        self.buf.resize(self.buf.len() + n, 0);
    }
    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    /// True if nothing was written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    /// Overwrites a u32 at `off` (for checksums filled in last).
    pub fn patch_u32(&mut self, off: usize, v: u32) {
        if let Some(s) = self.buf.get_mut(off..off + 4) {
            s.copy_from_slice(&v.to_le_bytes());
        }
    }
    /// The encoded bytes.
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }
    /// The encoded bytes so far.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }
}

/// crc32c of `data` with the checksum field at `crc_off..crc_off+4` taken
/// as zero, seeded with `seed`.
pub fn crc_seeded(seed: u32, data: &[u8], crc_off: usize) -> u32 {
    let (head, rest) = data.split_at(crc_off.min(data.len()));
    let tail = rest.get(4..).unwrap_or(&[]);
    let c = crc32c::crc32c_append(seed, head);
    let zeros = [0u8; 4];
    let c = crc32c::crc32c_append(c, zeros.get(..rest.len().min(4)).unwrap_or(&[]));
    crc32c::crc32c_append(c, tail)
}

/// The starting crc for a log of sequence number `seq`: the filesystem seed
/// with the sequence mixed in, so stale logs fail verification.
pub fn log_crc_start(fs_seed: u32, seq: u64) -> u32 {
    crc32c::crc32c_append(fs_seed, &seq.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_never_reads_past_end() {
        let b = [1u8, 2, 3];
        let mut r = Reader::new(&b, "t", 0).unwrap();
        assert_eq!(r.u16().unwrap(), 0x0201);
        assert!(matches!(r.u16(), Err(DecodeError::Truncated { .. })));
        assert!(matches!(
            r.bytes(usize::MAX),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn crc_ignores_its_own_field() {
        let mut a = vec![7u8; 32];
        let c1 = crc_seeded(5, &a, 8);
        a[8..12].copy_from_slice(&[9, 9, 9, 9]);
        assert_eq!(crc_seeded(5, &a, 8), c1);
        a[0] = 0;
        assert_ne!(crc_seeded(5, &a, 8), c1);
        assert_ne!(crc_seeded(6, &a, 8), crc_seeded(5, &a, 8));
    }

    #[test]
    fn log_seed_depends_on_sequence() {
        assert_ne!(log_crc_start(1, 1), log_crc_start(1, 2));
    }
}
