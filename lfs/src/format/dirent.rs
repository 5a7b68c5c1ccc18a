//! Directory entries.
//!
//! Layout (`rec_len` bytes, a multiple of 8, at least 16 + name length):
//!
//! | off | size | field |
//! |----:|----:|---|
//! | 0 | 8 | inode number (never 0) |
//! | 8 | 4 | name hash: crc32c of the name seeded with the filesystem seed |
//! | 12 | 1 | name length (1 to 255) |
//! | 13 | 1 | file type |
//! | 14 | 2 | record length |
//! | 16 | n | name, no NUL and no `/` |
//!
//! The hash is what directory indexes are keyed on; it is stored so that an
//! entry whose name was damaged is detected.

use super::codec::{DecodeError, Reader, Writer};

/// Longest name, in bytes.
pub const MAX_NAME_LEN: usize = 255;
const FIXED: usize = 16;
const ALIGN: usize = 8;

/// The type of the inode an entry names (as in `d_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    /// Regular file.
    Regular,
    /// Directory.
    Directory,
    /// Symbolic link.
    Symlink,
    /// Named pipe.
    Fifo,
    /// Unix socket.
    Socket,
    /// Character device.
    CharDevice,
    /// Block device.
    BlockDevice,
}

impl FileType {
    /// The on-disk code (same values as Linux `DT_*`).
    pub fn to_raw(self) -> u8 {
        match self {
            FileType::Fifo => 1,
            FileType::CharDevice => 2,
            FileType::Directory => 4,
            FileType::BlockDevice => 6,
            FileType::Regular => 8,
            FileType::Symlink => 10,
            FileType::Socket => 12,
        }
    }
    /// Decodes an on-disk code.
    pub fn from_raw(v: u8) -> Option<Self> {
        Some(match v {
            1 => FileType::Fifo,
            2 => FileType::CharDevice,
            4 => FileType::Directory,
            6 => FileType::BlockDevice,
            8 => FileType::Regular,
            10 => FileType::Symlink,
            12 => FileType::Socket,
            _ => return None,
        })
    }
}

/// A directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Inode the name refers to.
    pub ino: u64,
    /// Type of that inode.
    pub file_type: FileType,
    /// The name (1 to 255 bytes, no NUL or `/`).
    pub name: Vec<u8>,
}

/// The hash of a name under a filesystem's seed.
pub fn name_hash(seed: u32, name: &[u8]) -> u32 {
    crc32c::crc32c_append(seed, name)
}

impl DirEntry {
    /// Bytes this entry takes when encoded.
    pub fn rec_len(&self) -> usize {
        (FIXED + self.name.len()).div_ceil(ALIGN) * ALIGN
    }

    /// True if `name` may be stored.
    pub fn valid_name(name: &[u8]) -> bool {
        !name.is_empty()
            && name.len() <= MAX_NAME_LEN
            && !name.contains(&0)
            && !name.contains(&b'/')
            && name != b"."
            && name != b".."
    }

    /// Appends the encoded entry. The caller guarantees a valid name.
    pub fn encode_into(&self, w: &mut Writer, seed: u32) {
        let start = w.len();
        w.u64(self.ino);
        w.u32(name_hash(seed, &self.name));
        w.u8(self.name.len() as u8);
        w.u8(self.file_type.to_raw());
        w.u16(self.rec_len() as u16);
        w.bytes(&self.name);
        w.zeros(self.rec_len() - (w.len() - start));
    }

    /// Decodes the entry at the start of `buf`; returns it and its length.
    pub fn decode(buf: &[u8], seed: u32) -> Result<(Self, usize), DecodeError> {
        const WHAT: &str = "directory entry";
        let invalid = |field, value: u64| DecodeError::InvalidField {
            what: WHAT,
            field,
            value,
        };
        let mut r = Reader::new(buf, WHAT, FIXED)?;
        let ino = r.u64()?;
        if ino == 0 {
            return Err(invalid("inode number", 0));
        }
        let hash = r.u32()?;
        let name_len = usize::from(r.u8()?);
        let raw_type = r.u8()?;
        let file_type =
            FileType::from_raw(raw_type).ok_or(invalid("file type", raw_type.into()))?;
        let rec_len = usize::from(r.u16()?);
        if rec_len % ALIGN != 0 || rec_len < FIXED + name_len {
            return Err(invalid("record length", rec_len as u64));
        }
        let name = r.bytes(name_len)?.to_vec();
        if !Self::valid_name(&name) {
            return Err(invalid("name length", name_len as u64));
        }
        if buf.len() < rec_len {
            return Err(DecodeError::Truncated {
                what: WHAT,
                needed: rec_len,
                got: buf.len(),
            });
        }
        let computed = name_hash(seed, &name);
        if computed != hash {
            return Err(DecodeError::BadChecksum {
                what: WHAT,
                stored: hash,
                computed,
            });
        }
        Ok((
            DirEntry {
                ino,
                file_type,
                name,
            },
            rec_len,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_bytes() {
        let e = DirEntry {
            ino: 0x20,
            file_type: FileType::Regular,
            name: b"hello".to_vec(),
        };
        let mut w = Writer::default();
        e.encode_into(&mut w, 0);
        let b = w.into_vec();
        assert_eq!(b.len(), 24);
        assert_eq!(&b[0..8], &[0x20, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[8..12], &name_hash(0, b"hello").to_le_bytes());
        assert_eq!(&b[12..16], &[5, 8, 24, 0]);
        assert_eq!(&b[16..24], b"hello\0\0\0");
        assert_eq!(DirEntry::decode(&b, 0).unwrap(), (e, 24));
        assert!(matches!(
            DirEntry::decode(&b, 1),
            Err(DecodeError::BadChecksum { .. })
        ));
    }

    #[test]
    fn bad_entries_refused() {
        let e = DirEntry {
            ino: 1,
            file_type: FileType::Directory,
            name: b"d".to_vec(),
        };
        let mut w = Writer::default();
        e.encode_into(&mut w, 0);
        let good = w.into_vec();
        let mut b = good.clone();
        b[0] = 0;
        assert!(DirEntry::decode(&b, 0).is_err());
        let mut b = good.clone();
        b[16] = b'/';
        assert!(DirEntry::decode(&b, 0).is_err());
        let mut b = good.clone();
        b[13] = 3;
        assert!(DirEntry::decode(&b, 0).is_err());
        let mut b = good.clone();
        b[14] = 9;
        assert!(DirEntry::decode(&b, 0).is_err());
        assert!(DirEntry::decode(&good[..20], 0).is_err());
        assert!(!DirEntry::valid_name(b".."));
        assert!(!DirEntry::valid_name(&[b'a'; 256]));
        assert!(DirEntry::valid_name(&[b'a'; 255]));
    }

    proptest! {
        #[test]
        fn round_trip(
            ino in 1u64.., t in prop::sample::select(vec![1u8, 2, 4, 6, 8, 10, 12]),
            name in proptest::collection::vec(1u8..=255, 1..=255), seed in any::<u32>(),
        ) {
            let name: Vec<u8> = name.into_iter().map(|c| if c == b'/' { b'x' } else { c }).collect();
            prop_assume!(DirEntry::valid_name(&name));
            let e = DirEntry { ino, file_type: FileType::from_raw(t).unwrap(), name };
            let mut w = Writer::default();
            e.encode_into(&mut w, seed);
            let b = w.into_vec();
            prop_assert_eq!(b.len(), e.rec_len());
            prop_assert_eq!(DirEntry::decode(&b, seed).unwrap(), (e, b.len()));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = DirEntry::decode(&bytes, 0);
        }
    }
}
