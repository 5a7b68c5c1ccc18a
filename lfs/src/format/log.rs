//! Logs (partial segments): the unit the segment writer appends.
//!
//! A log is `nblocks` consecutive blocks inside one segment:
//! `nsummary_blocks` summary blocks, then one payload block per
//! [`BlockEntry`], then, if `LOG_FLAG_SUPER_ROOT` is set, one super root
//! block. The summary is the header followed by the entries, packed, and
//! zero padded to whole blocks.
//!
//! Header layout (`LOG_HEADER_SIZE` = 64 bytes):
//!
//! | off | size | field |
//! |----:|----:|---|
//! | 0 | 4 | magic `LOG_MAGIC` |
//! | 4 | 2 | version |
//! | 6 | 2 | flags (super root 1, data sync 2, GC 4, data-sync end 8) |
//! | 8 | 4 | header size (64) |
//! | 12 | 4 | summary crc: all summary blocks, this field zero |
//! | 16 | 4 | body crc: all payload and super root blocks |
//! | 20 | 4 | blocks in the log, summary included |
//! | 24 | 4 | summary blocks |
//! | 28 | 4 | block entries |
//! | 32 | 8 | sequence number |
//! | 40 | 8 | creation time (ns since the epoch) |
//! | 48 | 8 | next segment |
//! | 56 | 8 | checkpoint number |
//!
//! Entry layout (`BLOCK_ENTRY_SIZE` = 32 bytes): inode number (8), file
//! block offset (8; for indirect blocks the index of the first data block
//! they map), virtual block number (8; 0 for the physically addressed
//! metadata files), kind (1), reserved (7).
//!
//! Both crcs start from [`log_crc_start`]`(crc_seed, seq)`: the sequence
//! number is mixed in, so a stale log in a reused segment never verifies.

use super::codec::{crc_seeded, log_crc_start, DecodeError, Reader, Writer};
use super::STRUCT_VERSION;

/// "LFSL" as a little-endian u32.
pub const LOG_MAGIC: u32 = u32::from_le_bytes(*b"LFSL");
/// Encoded size of a log header.
pub const LOG_HEADER_SIZE: usize = 64;
/// Encoded size of a block entry.
pub const BLOCK_ENTRY_SIZE: usize = 32;
/// The log ends with a super root: it completes a checkpoint.
pub const LOG_FLAG_SUPER_ROOT: u16 = 1;
/// The log was written by fdatasync: file data and the inode records of
/// its files, rolled forward on recovery (no super root).
pub const LOG_FLAG_DATA_SYNC: u16 = 2;
/// The log holds blocks moved by the cleaner.
pub const LOG_FLAG_GC: u16 = 4;
/// The last log of one data-sync write: recovery rolls a write's logs
/// forward only once this one is found, so a write is all or nothing.
pub const LOG_FLAG_SYNC_END: u16 = 8;
/// Every flag this build knows.
pub const LOG_FLAGS_KNOWN: u16 =
    LOG_FLAG_SUPER_ROOT | LOG_FLAG_DATA_SYNC | LOG_FLAG_GC | LOG_FLAG_SYNC_END;
const SUM_CRC_OFF: usize = 12;

/// What a payload block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// File data (for the metadata files: their blocks).
    Data,
    /// An indirect block of the given level (1 to 3).
    Indirect(u8),
    /// An extended-attribute block.
    Xattr,
    /// In a data-sync log: the inode record (lfs(5), INODES) of the file
    /// `ino` as of the fdatasync, at the start of the block; recovery
    /// takes its size and times. Never live after recovery.
    Inode,
}

impl BlockKind {
    /// Its code on disk (lfs(5)): 1 data, 2 to 4 indirect levels 1 to 3,
    /// 5 xattr, 6 inode record.
    pub fn to_raw(self) -> u8 {
        match self {
            BlockKind::Data => 1,
            BlockKind::Indirect(l) => 1 + l,
            BlockKind::Xattr => 5,
            BlockKind::Inode => 6,
        }
    }
    /// The kind of an on-disk code, if it is one.
    pub fn from_raw(v: u8) -> Option<Self> {
        match v {
            1 => Some(BlockKind::Data),
            2..=4 => Some(BlockKind::Indirect(v - 1)),
            5 => Some(BlockKind::Xattr),
            6 => Some(BlockKind::Inode),
            _ => None,
        }
    }
    /// Short name for listings.
    pub fn name(self) -> &'static str {
        match self {
            BlockKind::Data => "data",
            BlockKind::Indirect(1) => "ind1",
            BlockKind::Indirect(2) => "ind2",
            BlockKind::Indirect(_) => "ind3",
            BlockKind::Xattr => "xattr",
            BlockKind::Inode => "inode",
        }
    }
}

/// Describes one payload block of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockEntry {
    /// Owning inode.
    pub ino: u64,
    /// Block offset within the file.
    pub offset: u64,
    /// Virtual block number, or 0 for a physically addressed block.
    pub vblock: u64,
    /// What the block is.
    pub kind: BlockKind,
}

impl BlockEntry {
    /// Appends the encoded entry ([`BLOCK_ENTRY_SIZE`] bytes).
    pub fn encode_into(&self, w: &mut Writer) {
        w.u64(self.ino);
        w.u64(self.offset);
        w.u64(self.vblock);
        w.u8(self.kind.to_raw());
        w.zeros(7);
    }

    /// Decodes one entry.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        const WHAT: &str = "block entry";
        let mut r = Reader::new(buf, WHAT, BLOCK_ENTRY_SIZE)?;
        let ino = r.u64()?;
        let offset = r.u64()?;
        let vblock = r.u64()?;
        let raw = r.u8()?;
        let kind = BlockKind::from_raw(raw).ok_or(DecodeError::InvalidField {
            what: WHAT,
            field: "kind",
            value: raw.into(),
        })?;
        Ok(BlockEntry {
            ino,
            offset,
            vblock,
            kind,
        })
    }
}

/// A log header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogHeader {
    /// Flags (`LOG_FLAG_*`).
    pub flags: u16,
    /// Stored summary crc.
    pub summary_crc: u32,
    /// Stored body crc.
    pub body_crc: u32,
    /// Blocks in the log including summary blocks and super root.
    pub nblocks: u32,
    /// Summary blocks.
    pub nsummary_blocks: u32,
    /// Payload block entries.
    pub nentries: u32,
    /// Write sequence number.
    pub seq: u64,
    /// Creation time, ns since the epoch.
    pub ctime_ns: u64,
    /// Segment the log continues in when this one is full.
    pub next_segment: u64,
    /// Checkpoint number the log belongs to.
    pub cno: u64,
}

impl LogHeader {
    /// A header whose counts and checksums [`LogSummary::encode`] fills in.
    pub fn new(flags: u16, seq: u64, ctime_ns: u64, next_segment: u64, cno: u64) -> Self {
        LogHeader {
            flags,
            summary_crc: 0,
            body_crc: 0,
            nblocks: 0,
            nsummary_blocks: 0,
            nentries: 0,
            seq,
            ctime_ns,
            next_segment,
            cno,
        }
    }

    /// True if the log ends with a super root.
    pub fn has_super_root(&self) -> bool {
        self.flags & LOG_FLAG_SUPER_ROOT != 0
    }

    /// Number of summary blocks needed for `nentries` at `block_size`.
    pub fn summary_blocks_for(nentries: usize, block_size: usize) -> usize {
        (LOG_HEADER_SIZE + nentries * BLOCK_ENTRY_SIZE).div_ceil(block_size)
    }

    fn encode_into(&self, w: &mut Writer) {
        w.u32(LOG_MAGIC);
        w.u16(STRUCT_VERSION);
        w.u16(self.flags);
        w.u32(LOG_HEADER_SIZE as u32);
        w.u32(self.summary_crc);
        w.u32(self.body_crc);
        w.u32(self.nblocks);
        w.u32(self.nsummary_blocks);
        w.u32(self.nentries);
        w.u64(self.seq);
        w.u64(self.ctime_ns);
        w.u64(self.next_segment);
        w.u64(self.cno);
    }

    /// Decodes the header fields without verifying any checksum (used to
    /// learn how many summary blocks to read). Checks magic, version,
    /// flags and that the counts are consistent.
    pub fn decode_unverified(buf: &[u8]) -> Result<Self, DecodeError> {
        const WHAT: &str = "log header";
        let mut r = Reader::new(buf, WHAT, LOG_HEADER_SIZE)?;
        let magic = r.u32()?;
        if magic != LOG_MAGIC {
            return Err(DecodeError::BadMagic {
                what: WHAT,
                expected: LOG_MAGIC,
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
        let flags = r.u16()?;
        let invalid = |field, value: u64| DecodeError::InvalidField {
            what: WHAT,
            field,
            value,
        };
        if flags & !LOG_FLAGS_KNOWN != 0 {
            return Err(invalid("flags", flags.into()));
        }
        let hsize = r.u32()?;
        if hsize as usize != LOG_HEADER_SIZE {
            return Err(invalid("header size", hsize.into()));
        }
        let h = LogHeader {
            flags,
            summary_crc: r.u32()?,
            body_crc: r.u32()?,
            nblocks: r.u32()?,
            nsummary_blocks: r.u32()?,
            nentries: r.u32()?,
            seq: r.u64()?,
            ctime_ns: r.u64()?,
            next_segment: r.u64()?,
            cno: r.u64()?,
        };
        if h.nsummary_blocks == 0 {
            return Err(invalid("summary blocks", 0));
        }
        let expect =
            u64::from(h.nsummary_blocks) + u64::from(h.nentries) + u64::from(h.has_super_root());
        if u64::from(h.nblocks) != expect {
            return Err(invalid("block count", h.nblocks.into()));
        }
        Ok(h)
    }
}

/// A log's header and its entries: the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSummary {
    /// The header; `nentries`, `nsummary_blocks` and `nblocks` agree with
    /// `entries` after [`LogSummary::encode`].
    pub header: LogHeader,
    /// One entry per payload block, in on-disk order.
    pub entries: Vec<BlockEntry>,
}

impl LogSummary {
    /// Encodes the summary blocks of a log whose payload and super root
    /// blocks (in order) are `body`. Fills in the counts and both crcs;
    /// returns whole blocks.
    pub fn encode(&mut self, block_size: usize, crc_seed: u32, body: &[&[u8]]) -> Vec<u8> {
        let nsum = LogHeader::summary_blocks_for(self.entries.len(), block_size);
        let h = &mut self.header;
        h.nsummary_blocks = nsum as u32;
        h.nentries = self.entries.len() as u32;
        h.nblocks = (nsum + self.entries.len() + usize::from(h.has_super_root())) as u32;
        h.body_crc = body_crc(crc_seed, h.seq, body);
        h.summary_crc = 0;
        let mut w = Writer::with_capacity(nsum * block_size);
        h.encode_into(&mut w);
        for e in &self.entries {
            e.encode_into(&mut w);
        }
        w.zeros(nsum * block_size - w.len());
        let crc = crc_seeded(log_crc_start(crc_seed, h.seq), w.as_slice(), SUM_CRC_OFF);
        w.patch_u32(SUM_CRC_OFF, crc);
        h.summary_crc = crc;
        w.into_vec()
    }

    /// Decodes and verifies the summary in `buf`, which must hold all of
    /// the log's summary blocks. The body crc is checked separately with
    /// [`LogSummary::verify_body`], once the payload is read.
    pub fn decode(buf: &[u8], block_size: usize, crc_seed: u32) -> Result<Self, DecodeError> {
        const WHAT: &str = "log summary";
        if block_size < super::MIN_BLOCK_SIZE as usize {
            return Err(DecodeError::InvalidField {
                what: WHAT,
                field: "block size",
                value: block_size as u64,
            });
        }
        let header = LogHeader::decode_unverified(buf)?;
        let sum_len = (header.nsummary_blocks as usize).saturating_mul(block_size);
        let needed = LogHeader::summary_blocks_for(header.nentries as usize, block_size);
        if needed != header.nsummary_blocks as usize {
            return Err(DecodeError::InvalidField {
                what: WHAT,
                field: "summary blocks",
                value: header.nsummary_blocks.into(),
            });
        }
        let sum = buf.get(..sum_len).ok_or(DecodeError::Truncated {
            what: WHAT,
            needed: sum_len,
            got: buf.len(),
        })?;
        let computed = crc_seeded(log_crc_start(crc_seed, header.seq), sum, SUM_CRC_OFF);
        if computed != header.summary_crc {
            return Err(DecodeError::BadChecksum {
                what: WHAT,
                stored: header.summary_crc,
                computed,
            });
        }
        let mut entries = Vec::with_capacity(header.nentries as usize);
        let mut r = Reader::new(sum, WHAT, 0)?;
        r.skip(LOG_HEADER_SIZE)?;
        for _ in 0..header.nentries {
            entries.push(BlockEntry::decode(r.bytes(BLOCK_ENTRY_SIZE)?)?);
        }
        Ok(LogSummary { header, entries })
    }

    /// Checks the body crc over the payload and super root blocks.
    pub fn verify_body(&self, crc_seed: u32, body: &[&[u8]]) -> Result<(), DecodeError> {
        let computed = body_crc(crc_seed, self.header.seq, body);
        if computed != self.header.body_crc {
            return Err(DecodeError::BadChecksum {
                what: "log body",
                stored: self.header.body_crc,
                computed,
            });
        }
        Ok(())
    }
}

fn body_crc(crc_seed: u32, seq: u64, body: &[&[u8]]) -> u32 {
    body.iter().fold(log_crc_start(crc_seed, seq), |c, b| {
        crc32c::crc32c_append(c, b)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> LogSummary {
        LogSummary {
            header: LogHeader::new(LOG_FLAG_SUPER_ROOT, 7, 1, 1, 3),
            entries: vec![
                BlockEntry {
                    ino: 2,
                    offset: 0,
                    vblock: 9,
                    kind: BlockKind::Data,
                },
                BlockEntry {
                    ino: 3,
                    offset: 1,
                    vblock: 0,
                    kind: BlockKind::Indirect(2),
                },
            ],
        }
    }

    #[test]
    fn golden_bytes() {
        let mut s = sample();
        let body = [vec![1u8; 1024], vec![2u8; 1024], vec![3u8; 1024]];
        let refs: Vec<&[u8]> = body.iter().map(|b| b.as_slice()).collect();
        let b = s.encode(1024, 42, &refs);
        assert_eq!(b.len(), 1024);
        assert_eq!(&b[0..8], &[b'L', b'F', b'S', b'L', 1, 0, 1, 0]);
        assert_eq!(&b[8..12], &[64, 0, 0, 0]);
        assert_eq!(&b[20..32], &[4, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(&b[32..40], &7u64.to_le_bytes());
        assert_eq!(&b[64..72], &2u64.to_le_bytes());
        assert_eq!(&b[80..88], &9u64.to_le_bytes());
        assert_eq!(b[88], 1);
        assert_eq!(b[96 + 24], 3);
        assert!(b[128..].iter().all(|&x| x == 0));
        assert_eq!(s.header.nblocks, 4);
        let d = LogSummary::decode(&b, 1024, 42).unwrap();
        assert_eq!(d, s);
        d.verify_body(42, &refs).unwrap();
        assert!(matches!(
            d.verify_body(42, &refs[..2]),
            Err(DecodeError::BadChecksum { .. })
        ));
    }

    #[test]
    fn stale_sequence_or_seed_fails() {
        let mut s = sample();
        let b = s.encode(1024, 42, &[]);
        assert!(matches!(
            LogSummary::decode(&b, 1024, 43),
            Err(DecodeError::BadChecksum { .. })
        ));
        // The same bytes with another sequence number written in fail too.
        let mut c = b.clone();
        c[32] = 8;
        assert!(matches!(
            LogSummary::decode(&c, 1024, 42),
            Err(DecodeError::BadChecksum { .. })
        ));
    }

    #[test]
    fn summary_spanning_blocks() {
        let mut s = sample();
        s.entries = (0..100)
            .map(|i| BlockEntry {
                ino: i,
                offset: i * 2,
                vblock: i * 3,
                kind: BlockKind::Xattr,
            })
            .collect();
        let b = s.encode(1024, 1, &[]);
        assert_eq!(b.len(), 4 * 1024);
        assert_eq!(LogSummary::decode(&b, 1024, 1).unwrap(), s);
        assert!(matches!(
            LogSummary::decode(&b[..3 * 1024], 1024, 1),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn inconsistent_counts_refused() {
        let mut s = sample();
        let mut b = s.encode(1024, 1, &[]);
        b[20] = 9;
        assert!(matches!(
            LogHeader::decode_unverified(&b),
            Err(DecodeError::InvalidField {
                field: "block count",
                ..
            })
        ));
        let mut b = s.encode(1024, 1, &[]);
        b[6] = 0x80;
        assert!(matches!(
            LogHeader::decode_unverified(&b),
            Err(DecodeError::InvalidField { field: "flags", .. })
        ));
    }

    fn arb_entry() -> impl Strategy<Value = BlockEntry> {
        (any::<u64>(), any::<u64>(), any::<u64>(), 1u8..=6).prop_map(|(ino, offset, vblock, k)| {
            BlockEntry {
                ino,
                offset,
                vblock,
                kind: BlockKind::from_raw(k).unwrap(),
            }
        })
    }

    proptest! {
        #[test]
        fn round_trip(
            flags in 0u16..16, seq in any::<u64>(), t in any::<u64>(), next in any::<u64>(),
            cno in any::<u64>(), seed in any::<u32>(), bs_log in 10u32..=13,
            entries in proptest::collection::vec(arb_entry(), 0..300),
        ) {
            let mut s = LogSummary {
                header: LogHeader::new(flags, seq, t, next, cno),
                entries,
            };
            let bs = 1usize << bs_log;
            let b = s.encode(bs, seed, &[b"x"]);
            prop_assert_eq!(b.len() % bs, 0);
            prop_assert_eq!(LogSummary::decode(&b, bs, seed).unwrap(), s);
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2100)) {
            let _ = LogSummary::decode(&bytes, 1024, 0);
            let _ = BlockEntry::decode(&bytes);
        }
    }
}
