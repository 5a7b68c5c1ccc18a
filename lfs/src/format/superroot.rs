//! The super root: the last block of a checkpoint's log, and the root of
//! everything else. It holds the inodes of the physically addressed
//! metadata files (DAT, checkpoint file, segment usage file); the current
//! checkpoint entry in the checkpoint file holds the inode file's inode.
//!
//! Layout (`SR_SIZE` = 944 bytes since format 1.2, zero padded to the
//! block; format 1.0 and 1.1 super roots end at byte 816, without the DAT
//! journal, and decode with an empty one):
//!
//! | off | size | field |
//! |----:|----:|---|
//! | 0 | 4 | magic `SR_MAGIC` |
//! | 4 | 2 | version |
//! | 6 | 2 | reserved |
//! | 8 | 4 | size covered by the crc (816) |
//! | 12 | 4 | crc32c from `log_crc_start(seed, seq)`, this field zero |
//! | 16 | 8 | checkpoint number |
//! | 24 | 8 | sequence number of the log it ends |
//! | 32 | 8 | creation time (ns) |
//! | 40 | 8 | creation time of the last non-GC checkpoint (ns) |
//! | 48 | 256 | DAT inode |
//! | 304 | 256 | checkpoint file inode |
//! | 560 | 256 | segment usage file inode |
//! | 816 | 8 | DAT journal: records (1.2) |
//! | 824 | 120 | DAT journal: block map slots, as an inode's (1.2) |

use super::codec::{crc_seeded, log_crc_start, DecodeError, Reader, Writer};
use super::inode::{Inode, BMAP_SLOTS, INODE_SIZE};
use super::STRUCT_VERSION;

/// "LFSR" as a little-endian u32.
pub const SR_MAGIC: u32 = u32::from_le_bytes(*b"LFSR");
/// Encoded size of a super root.
pub const SR_SIZE: usize = SR_SIZE_1_1 + JOURNAL_ROOT_SIZE;
/// Encoded size of a format 1.0 or 1.1 super root (no DAT journal).
pub const SR_SIZE_1_1: usize = 48 + 3 * INODE_SIZE;
/// Encoded size of the DAT journal's root.
const JOURNAL_ROOT_SIZE: usize = 8 + 8 * BMAP_SLOTS;

/// Where the DAT journal is: its record count and block map (physical
/// addresses, an inode's 15 slots). No inode of its own: a super root
/// must fit the smallest block, 1 KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JournalRoot {
    /// Records in the journal.
    pub records: u64,
    /// Block map slots (12 direct, single, double, triple indirect).
    pub bmap: [u64; BMAP_SLOTS],
}
const CRC_OFF: usize = 12;

/// A decoded super root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuperRoot {
    /// Checkpoint number.
    pub cno: u64,
    /// Sequence number of the log this super root ends.
    pub seq: u64,
    /// Creation time, ns since the epoch.
    pub ctime_ns: u64,
    /// Creation time of the last checkpoint not made by the cleaner.
    pub nongc_ctime_ns: u64,
    /// The DAT's inode.
    pub dat: Inode,
    /// The checkpoint file's inode.
    pub cpfile: Inode,
    /// The segment usage file's inode.
    pub sufile: Inode,
    /// The DAT journal (empty before format 1.2).
    pub dat_journal: JournalRoot,
}

impl SuperRoot {
    /// Encodes into one block of `block_size` bytes.
    pub fn encode(&self, block_size: usize, crc_seed: u32) -> Vec<u8> {
        let mut w = Writer::with_capacity(block_size);
        w.u32(SR_MAGIC);
        w.u16(STRUCT_VERSION);
        w.u16(0);
        w.u32(SR_SIZE as u32);
        w.u32(0);
        w.u64(self.cno);
        w.u64(self.seq);
        w.u64(self.ctime_ns);
        w.u64(self.nongc_ctime_ns);
        self.dat.encode_into(&mut w);
        self.cpfile.encode_into(&mut w);
        self.sufile.encode_into(&mut w);
        w.u64(self.dat_journal.records);
        for &s in &self.dat_journal.bmap {
            w.u64(s);
        }
        let crc = crc_seeded(log_crc_start(crc_seed, self.seq), w.as_slice(), CRC_OFF);
        w.patch_u32(CRC_OFF, crc);
        w.zeros(block_size.saturating_sub(SR_SIZE));
        w.into_vec()
    }

    /// Decodes and verifies a super root.
    pub fn decode(buf: &[u8], crc_seed: u32) -> Result<Self, DecodeError> {
        const WHAT: &str = "super root";
        let mut r = Reader::new(buf, WHAT, SR_SIZE_1_1)?;
        let magic = r.u32()?;
        if magic != SR_MAGIC {
            return Err(DecodeError::BadMagic {
                what: WHAT,
                expected: SR_MAGIC,
                found: magic,
            });
        }
        let version = r.u16()?;
        if version != STRUCT_VERSION {
            return Err(DecodeError::UnsupportedVersion {
                what: WHAT,
                found: version.into(),
            });
        }
        r.skip(2)?;
        let size = r.u32()?;
        if size as usize != SR_SIZE && size as usize != SR_SIZE_1_1 {
            return Err(DecodeError::InvalidField {
                what: WHAT,
                field: "size",
                value: size.into(),
            });
        }
        let stored = r.u32()?;
        let cno = r.u64()?;
        let seq = r.u64()?;
        let computed = crc_seeded(
            log_crc_start(crc_seed, seq),
            buf.get(..size as usize).ok_or(DecodeError::Truncated {
                what: WHAT,
                needed: size as usize,
                got: buf.len(),
            })?,
            CRC_OFF,
        );
        if stored != computed {
            return Err(DecodeError::BadChecksum {
                what: WHAT,
                stored,
                computed,
            });
        }
        let ctime_ns = r.u64()?;
        let nongc_ctime_ns = r.u64()?;
        let dat = Inode::decode(r.bytes(INODE_SIZE)?)?;
        let cpfile = Inode::decode(r.bytes(INODE_SIZE)?)?;
        let sufile = Inode::decode(r.bytes(INODE_SIZE)?)?;
        let mut dat_journal = JournalRoot::default();
        if size as usize == SR_SIZE {
            dat_journal.records = r.u64()?;
            for s in dat_journal.bmap.iter_mut() {
                *s = r.u64()?;
            }
        }
        Ok(SuperRoot {
            cno,
            seq,
            ctime_ns,
            nongc_ctime_ns,
            dat,
            cpfile,
            sufile,
            dat_journal,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> SuperRoot {
        SuperRoot {
            cno: 5,
            seq: 9,
            ctime_ns: 10,
            nongc_ctime_ns: 11,
            dat: Inode {
                ino: super::super::DAT_INO,
                ..Inode::default()
            },
            cpfile: Inode {
                ino: super::super::CPFILE_INO,
                ..Inode::default()
            },
            sufile: Inode {
                ino: super::super::SUFILE_INO,
                ..Inode::default()
            },
            dat_journal: JournalRoot {
                records: 7,
                bmap: [8; BMAP_SLOTS],
            },
        }
    }

    #[test]
    fn golden_bytes() {
        let b = sample().encode(4096, 3);
        assert_eq!(b.len(), 4096);
        assert_eq!(
            &b[0..12],
            &[b'L', b'F', b'S', b'R', 1, 0, 0, 0, 0xb0, 0x03, 0, 0]
        );
        assert_eq!(&b[16..24], &5u64.to_le_bytes());
        assert_eq!(&b[24..32], &9u64.to_le_bytes());
        assert_eq!(&b[48 + 224..48 + 232], &3u64.to_le_bytes());
        assert_eq!(&b[304 + 224..304 + 232], &4u64.to_le_bytes());
        assert_eq!(&b[560 + 224..560 + 232], &5u64.to_le_bytes());
        assert_eq!(&b[816..824], &7u64.to_le_bytes());
        assert_eq!(&b[936..944], &8u64.to_le_bytes());
        assert_eq!(SR_SIZE, 944);
        assert!(b[SR_SIZE..].iter().all(|&x| x == 0));
        assert_eq!(SuperRoot::decode(&b, 3).unwrap(), sample());
    }

    #[test]
    fn a_format_1_1_super_root_has_an_empty_journal() {
        // The 1.1 layout: the first 816 bytes, the size field saying so,
        // the crc over them.
        let mut b = sample().encode(1024, 3);
        b[8..12].copy_from_slice(&(SR_SIZE_1_1 as u32).to_le_bytes());
        b[SR_SIZE_1_1..].fill(0);
        b[12..16].fill(0);
        let crc = crc_seeded(log_crc_start(3, 9), &b[..SR_SIZE_1_1], CRC_OFF);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
        let sr = SuperRoot::decode(&b, 3).unwrap();
        assert_eq!(sr.dat_journal, JournalRoot::default());
        assert_eq!(sr.sufile, sample().sufile);
        // Cut short of its own size, a 1.2 super root is refused.
        let full = sample().encode(1024, 3);
        assert!(matches!(
            SuperRoot::decode(&full[..SR_SIZE - 1], 3),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn wrong_seed_or_flipped_byte_fails() {
        let b = sample().encode(1024, 3);
        assert!(matches!(
            SuperRoot::decode(&b, 4),
            Err(DecodeError::BadChecksum { .. })
        ));
        for i in 0..SR_SIZE {
            let mut c = b.clone();
            c[i] ^= 1;
            assert!(SuperRoot::decode(&c, 3).is_err(), "flip at {i} accepted");
        }
    }

    proptest! {
        #[test]
        fn round_trip(
            cno in any::<u64>(), seq in any::<u64>(), t in any::<u64>(), g in any::<u64>(),
            dat in super::super::inode::tests::arb(), cp in super::super::inode::tests::arb(),
            su in super::super::inode::tests::arb(), seed in any::<u32>(),
            records in any::<u64>(), bmap in any::<[u64; BMAP_SLOTS]>(),
        ) {
            let sr = SuperRoot {
                cno, seq, ctime_ns: t, nongc_ctime_ns: g, dat, cpfile: cp, sufile: su,
                dat_journal: JournalRoot { records, bmap },
            };
            prop_assert_eq!(SuperRoot::decode(&sr.encode(1024, seed), seed).unwrap(), sr);
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..1100)) {
            let _ = SuperRoot::decode(&bytes, 0);
        }
    }
}
