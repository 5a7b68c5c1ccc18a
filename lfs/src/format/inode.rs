//! The inode record, as stored in the inode file, in checkpoint entries
//! (the inode file's own inode) and in the super root (the metadata files).
//!
//! Inode records live inside checksummed metadata blocks, so they carry no
//! checksum of their own; `ino` is stored so that a misplaced record is
//! detected.
//!
//! Layout (`INODE_SIZE` = 256 bytes):
//!
//! | off | size | field |
//! |----:|----:|---|
//! | 0 | 4 | mode (type and permission bits, as st_mode) |
//! | 4 | 4 | uid |
//! | 8 | 4 | gid |
//! | 12 | 4 | link count |
//! | 16 | 8 | size in bytes |
//! | 24 | 8 | blocks allocated |
//! | 32 | 8 | atime seconds (signed) |
//! | 40 | 8 | mtime seconds |
//! | 48 | 8 | ctime seconds |
//! | 56 | 8 | creation time seconds |
//! | 64 | 4×4 | atime, mtime, ctime, crtime nanoseconds |
//! | 80 | 4 | generation |
//! | 84 | 4 | flags |
//! | 88 | 8 | xattr block (virtual), 0 if none |
//! | 96 | 4 | rdev |
//! | 100 | 4 | reserved |
//! | 104 | 15×8 | block map: 12 direct, single, double, triple indirect |
//! | 224 | 8 | inode number |
//! | 232 | 8 | parent directory (directories only; 0 otherwise) |
//! | 240 | 16 | reserved, zero |
//!
//! Block map entries of user files and the inode file are virtual block
//! numbers (translated by the DAT); those of the DAT, checkpoint file and
//! segment usage file are physical block addresses. 0 is a hole.

use super::codec::{DecodeError, Reader, Writer};

/// Encoded size of an inode record.
pub const INODE_SIZE: usize = 256;
/// Direct block pointers in an inode.
pub const BMAP_DIRECT: usize = 12;
/// All block map slots: direct, then single, double and triple indirect.
pub const BMAP_SLOTS: usize = BMAP_DIRECT + 3;
const USED: usize = 240;

/// A decoded inode record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inode {
    /// st_mode: file type and permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Hard links.
    pub nlink: u32,
    /// Size in bytes.
    pub size: u64,
    /// Blocks allocated (data and indirect).
    pub blocks: u64,
    /// Access time, seconds.
    pub atime: i64,
    /// Modification time, seconds.
    pub mtime: i64,
    /// Change time, seconds.
    pub ctime: i64,
    /// Creation time, seconds.
    pub crtime: i64,
    /// Nanosecond parts of atime, mtime, ctime, crtime.
    pub nsec: [u32; 4],
    /// Generation, bumped when the inode number is reused.
    pub generation: u32,
    /// Inode flags.
    pub flags: u32,
    /// Virtual block holding extended attributes, or 0.
    pub xattr_block: u64,
    /// Device number for device nodes.
    pub rdev: u32,
    /// Block map.
    pub bmap: [u64; BMAP_SLOTS],
    /// This inode's number.
    pub ino: u64,
    /// For a directory, its parent directory (the root is its own parent).
    pub parent: u64,
}

impl Inode {
    /// Appends the encoded record ([`INODE_SIZE`] bytes) to `w`.
    pub fn encode_into(&self, w: &mut Writer) {
        let start = w.len();
        w.u32(self.mode);
        w.u32(self.uid);
        w.u32(self.gid);
        w.u32(self.nlink);
        w.u64(self.size);
        w.u64(self.blocks);
        w.i64(self.atime);
        w.i64(self.mtime);
        w.i64(self.ctime);
        w.i64(self.crtime);
        for n in self.nsec {
            w.u32(n);
        }
        w.u32(self.generation);
        w.u32(self.flags);
        w.u64(self.xattr_block);
        w.u32(self.rdev);
        w.u32(0);
        for b in self.bmap {
            w.u64(b);
        }
        w.u64(self.ino);
        w.u64(self.parent);
        debug_assert_eq!(w.len() - start, USED);
        w.zeros(INODE_SIZE - USED);
    }

    /// Encodes into exactly [`INODE_SIZE`] bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(INODE_SIZE);
        self.encode_into(&mut w);
        w.into_vec()
    }

    /// Decodes a record. Nanosecond fields above 999,999,999 are refused.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        const WHAT: &str = "inode";
        let mut r = Reader::new(buf, WHAT, INODE_SIZE)?;
        let mode = r.u32()?;
        let uid = r.u32()?;
        let gid = r.u32()?;
        let nlink = r.u32()?;
        let size = r.u64()?;
        let blocks = r.u64()?;
        let atime = r.i64()?;
        let mtime = r.i64()?;
        let ctime = r.i64()?;
        let crtime = r.i64()?;
        let mut nsec = [0u32; 4];
        for n in nsec.iter_mut() {
            *n = r.u32()?;
            if *n >= 1_000_000_000 {
                return Err(DecodeError::InvalidField {
                    what: WHAT,
                    field: "nanoseconds",
                    value: (*n).into(),
                });
            }
        }
        let generation = r.u32()?;
        let flags = r.u32()?;
        let xattr_block = r.u64()?;
        let rdev = r.u32()?;
        r.skip(4)?;
        let mut bmap = [0u64; BMAP_SLOTS];
        for b in bmap.iter_mut() {
            *b = r.u64()?;
        }
        let ino = r.u64()?;
        let parent = r.u64()?;
        Ok(Inode {
            mode,
            uid,
            gid,
            nlink,
            size,
            blocks,
            atime,
            mtime,
            ctime,
            crtime,
            nsec,
            generation,
            flags,
            xattr_block,
            rdev,
            bmap,
            ino,
            parent,
        })
    }

    /// True if this slot of the inode file is unused.
    pub fn is_free(&self) -> bool {
        self.nlink == 0 && self.mode == 0
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_bytes() {
        let mut i = Inode {
            mode: 0o40755,
            uid: 1000,
            gid: 100,
            nlink: 2,
            size: 4096,
            blocks: 1,
            atime: -1,
            mtime: 2,
            ctime: 3,
            crtime: 4,
            nsec: [5, 6, 7, 8],
            generation: 9,
            flags: 10,
            xattr_block: 11,
            rdev: 12,
            bmap: [0; BMAP_SLOTS],
            ino: 77,
            parent: 5,
        };
        i.bmap[0] = 0x0102030405060708;
        i.bmap[14] = 0xff;
        let b = i.encode();
        assert_eq!(b.len(), INODE_SIZE);
        assert_eq!(&b[0..4], &0o40755u32.to_le_bytes());
        assert_eq!(&b[12..16], &[2, 0, 0, 0]);
        assert_eq!(&b[32..40], &[0xff; 8]);
        assert_eq!(&b[64..68], &[5, 0, 0, 0]);
        assert_eq!(&b[88..96], &[11, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[104..112], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&b[216..224], &[0xff, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[224..232], &[77, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[232..240], &[5, 0, 0, 0, 0, 0, 0, 0]);
        assert!(b[240..].iter().all(|&x| x == 0));
        assert_eq!(Inode::decode(&b).unwrap(), i);
    }

    #[test]
    fn bad_nanoseconds_refused() {
        let mut b = Inode::default().encode();
        b[68..72].copy_from_slice(&1_000_000_000u32.to_le_bytes());
        assert!(matches!(
            Inode::decode(&b),
            Err(DecodeError::InvalidField {
                field: "nanoseconds",
                ..
            })
        ));
        assert!(matches!(
            Inode::decode(&b[..10]),
            Err(DecodeError::Truncated { .. })
        ));
    }

    pub(crate) fn arb() -> impl Strategy<Value = Inode> {
        (
            (
                any::<u32>(),
                any::<u32>(),
                any::<u32>(),
                any::<u32>(),
                any::<u64>(),
                any::<u64>(),
            ),
            (
                any::<i64>(),
                any::<i64>(),
                any::<i64>(),
                any::<i64>(),
                [
                    0u32..1_000_000_000,
                    0u32..1_000_000_000,
                    0u32..1_000_000_000,
                    0u32..1_000_000_000,
                ],
            ),
            (
                any::<u32>(),
                any::<u32>(),
                any::<u64>(),
                any::<u32>(),
                any::<[u64; BMAP_SLOTS]>(),
                any::<[u64; 2]>(),
            ),
        )
            .prop_map(|(a, t, c)| Inode {
                mode: a.0,
                uid: a.1,
                gid: a.2,
                nlink: a.3,
                size: a.4,
                blocks: a.5,
                atime: t.0,
                mtime: t.1,
                ctime: t.2,
                crtime: t.3,
                nsec: t.4,
                generation: c.0,
                flags: c.1,
                xattr_block: c.2,
                rdev: c.3,
                bmap: c.4,
                ino: c.5[0],
                parent: c.5[1],
            })
    }

    proptest! {
        #[test]
        fn round_trip(i in arb()) {
            prop_assert_eq!(Inode::decode(&i.encode()).unwrap(), i);
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = Inode::decode(&bytes);
        }
    }
}
