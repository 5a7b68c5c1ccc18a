//! Blocks of the metadata files and the records inside them.
//!
//! Every block of the inode file, the DAT, the checkpoint file and the
//! segment usage file starts with a [`MetaBlockHeader`] (16 bytes: magic
//! of the file kind, version, record size, crc32c of the whole block with
//! the crc field zero and the filesystem seed, 4 reserved bytes) followed by
//! fixed-size records. Record `i` of a file lives in block
//! `i / per_block`, at byte `16 + (i % per_block) * size`.
//!
//! Record slots: the DAT's slot `v` is virtual block `v` (slot 0 unused:
//! virtual block 0 is a hole); the checkpoint file's slot 0 is its
//! [`CpFileHeader`] and slot `c` is checkpoint `c`; the segment usage
//! file's slot 0 is its [`SuFileHeader`] and slot `s + 1` is segment `s`;
//! the inode file's slot `n` is inode `n`.
//!
//! Record layouts (all little-endian):
//!
//! * DAT entry (32): physical block (8), first live checkpoint (8), first
//!   dead checkpoint or `CNO_LIVE` (8), reserved (8).
//! * DAT journal record (32): a DAT entry whose reserved field holds its
//!   virtual block number (never 0). The journal's record `i` is the
//!   `i`-th change appended since the DAT's blocks were last all written.
//! * Checkpoint entry (320): number (8), flags (4), reserved (4), creation
//!   time ns (8), blocks written since the previous checkpoint (8), inodes
//!   (8), blocks (8), next snapshot (8), previous snapshot (8), inode file
//!   inode (256).
//! * Checkpoint file header (320): checkpoints (8), snapshots (8), first
//!   snapshot (8), last snapshot (8), reserved.
//! * Segment usage (32): last modified s (8), blocks written (4), live
//!   blocks (4), flags (4), reserved (4), sequence number of its last log (8).
//! * Segment usage header (32): clean segments (8), dirty segments (8),
//!   last allocated segment (8), reserved (8).

use super::codec::{crc_seeded, DecodeError, Reader, Writer};
use super::inode::{Inode, INODE_SIZE};
use super::{CNO_LIVE, STRUCT_VERSION};

/// Size of the header at the start of every metadata block.
pub const META_HEADER_SIZE: usize = 16;
/// Size of a block pointer in an indirect block; also the alignment unit
/// of directory and extended attribute blocks.
pub const NODE_PTR_SIZE: usize = 8;
/// Size of a DAT entry.
pub const DAT_ENTRY_SIZE: usize = 32;
/// Size of a checkpoint entry (and of the checkpoint file header).
pub const CHECKPOINT_ENTRY_SIZE: usize = 64 + INODE_SIZE;
/// Size of a segment usage entry (and of the segment usage header).
pub const SEGUSAGE_SIZE: usize = 32;
const CRC_OFF: usize = 8;

/// The checkpoint is a snapshot: never deleted by the cleaner.
pub const CP_FLAG_SNAPSHOT: u32 = 1;
/// The checkpoint was deleted; its slot is unused.
pub const CP_FLAG_INVALID: u32 = 2;
/// The checkpoint was made by the cleaner or a timer, not by a user.
pub const CP_FLAG_MINOR: u32 = 4;
const CP_FLAGS_KNOWN: u32 = CP_FLAG_SNAPSHOT | CP_FLAG_INVALID | CP_FLAG_MINOR;

/// The segment is the one being written (a log head).
pub const SU_FLAG_ACTIVE: u32 = 1;
/// The segment holds written blocks (not clean).
pub const SU_FLAG_DIRTY: u32 = 2;
/// The segment had an I/O error and must not be reused.
pub const SU_FLAG_ERROR: u32 = 4;
const SU_FLAGS_KNOWN: u32 = SU_FLAG_ACTIVE | SU_FLAG_DIRTY | SU_FLAG_ERROR;

/// Which metadata file a block belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaKind {
    /// The inode file.
    Ifile,
    /// The DAT.
    Dat,
    /// The checkpoint file.
    Cpfile,
    /// The segment usage file.
    Sufile,
    /// An indirect block of any file: 8-byte block pointers.
    Node,
    /// A directory block: packed directory entries (8-byte aligned), the
    /// first entry with inode number 0 or the block end terminating them.
    Dir,
    /// An inode's extended attribute block (see lfs(5)).
    Xattr,
    /// The DAT journal (format 1.2).
    DatJournal,
}

impl MetaKind {
    /// The magic at the start of this file's blocks.
    pub fn magic(self) -> u32 {
        u32::from_le_bytes(match self {
            MetaKind::Ifile => *b"LFSI",
            MetaKind::Dat => *b"LFSD",
            MetaKind::Cpfile => *b"LFSC",
            MetaKind::Sufile => *b"LFSU",
            MetaKind::Node => *b"LFSN",
            MetaKind::Dir => *b"LFSE",
            MetaKind::Xattr => *b"LFSX",
            MetaKind::DatJournal => *b"LFSJ",
        })
    }
    /// Size of one record.
    pub fn record_size(self) -> usize {
        match self {
            MetaKind::Ifile => INODE_SIZE,
            MetaKind::Dat | MetaKind::DatJournal => DAT_ENTRY_SIZE,
            MetaKind::Cpfile => CHECKPOINT_ENTRY_SIZE,
            MetaKind::Sufile => SEGUSAGE_SIZE,
            MetaKind::Node | MetaKind::Dir | MetaKind::Xattr => NODE_PTR_SIZE,
        }
    }
    /// Records in one block of `block_size` bytes.
    pub fn per_block(self, block_size: usize) -> usize {
        (block_size - META_HEADER_SIZE) / self.record_size()
    }
    /// File block and byte offset within it of record `slot`.
    pub fn locate(self, slot: u64, block_size: usize) -> (u64, usize) {
        let per = self.per_block(block_size) as u64;
        let off = META_HEADER_SIZE + (slot % per) as usize * self.record_size();
        (slot / per, off)
    }
    fn name(self) -> &'static str {
        match self {
            MetaKind::Ifile => "inode file block",
            MetaKind::Dat => "DAT block",
            MetaKind::Cpfile => "checkpoint file block",
            MetaKind::Sufile => "segment usage block",
            MetaKind::Node => "indirect block",
            MetaKind::Dir => "directory block",
            MetaKind::Xattr => "extended attribute block",
            MetaKind::DatJournal => "DAT journal block",
        }
    }
}

/// The header of a metadata block; it only exists encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaBlockHeader;

impl MetaBlockHeader {
    /// Writes the header of a `kind` block into `block` and seals it with
    /// its crc. Call after every change to the block's records.
    pub fn seal(block: &mut [u8], kind: MetaKind, crc_seed: u32) {
        let mut w = Writer::with_capacity(META_HEADER_SIZE);
        w.u32(kind.magic());
        w.u16(STRUCT_VERSION);
        w.u16(kind.record_size() as u16);
        w.u32(0);
        w.u32(0);
        if let Some(h) = block.get_mut(..META_HEADER_SIZE) {
            h.copy_from_slice(w.as_slice());
        }
        let crc = crc_seeded(crc_seed, block, CRC_OFF);
        if let Some(c) = block.get_mut(CRC_OFF..CRC_OFF + 4) {
            c.copy_from_slice(&crc.to_le_bytes());
        }
    }

    /// Verifies that `block` is a sealed block of `kind`.
    pub fn verify(block: &[u8], kind: MetaKind, crc_seed: u32) -> Result<(), DecodeError> {
        let what = kind.name();
        let mut r = Reader::new(block, what, META_HEADER_SIZE)?;
        let magic = r.u32()?;
        if magic != kind.magic() {
            return Err(DecodeError::BadMagic {
                what,
                expected: kind.magic(),
                found: magic,
            });
        }
        let version = r.u16()?;
        if version != STRUCT_VERSION {
            return Err(DecodeError::UnsupportedVersion {
                what,
                found: version.into(),
            });
        }
        let rsize = r.u16()?;
        if usize::from(rsize) != kind.record_size() {
            return Err(DecodeError::InvalidField {
                what,
                field: "record size",
                value: rsize.into(),
            });
        }
        let stored = r.u32()?;
        let computed = crc_seeded(crc_seed, block, CRC_OFF);
        if stored != computed {
            return Err(DecodeError::BadChecksum {
                what,
                stored,
                computed,
            });
        }
        Ok(())
    }
}

/// Virtual → physical translation of one block, with the checkpoint
/// interval `[start_cno, end_cno)` in which the block is live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatEntry {
    /// Physical block, or 0 if the virtual block is unallocated.
    pub phys: u64,
    /// First checkpoint that sees the block.
    pub start_cno: u64,
    /// First checkpoint that no longer sees it; `CNO_LIVE` while live.
    pub end_cno: u64,
}

impl DatEntry {
    /// Appends the encoded entry.
    pub fn encode_into(&self, w: &mut Writer) {
        w.u64(self.phys);
        w.u64(self.start_cno);
        w.u64(self.end_cno);
        w.u64(0);
    }
    /// Decodes an entry; an interval that ends before it starts is refused.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf, "DAT entry", DAT_ENTRY_SIZE)?;
        let e = DatEntry {
            phys: r.u64()?,
            start_cno: r.u64()?,
            end_cno: r.u64()?,
        };
        if e.end_cno < e.start_cno {
            return Err(DecodeError::InvalidField {
                what: "DAT entry",
                field: "end checkpoint",
                value: e.end_cno,
            });
        }
        Ok(e)
    }
    /// True while no checkpoint has ended the block's life.
    pub fn is_live(&self) -> bool {
        self.phys != 0 && self.end_cno == CNO_LIVE
    }
}

/// One record of the DAT journal: virtual block `vblock` has entry `entry`
/// (a later record of the same block overrides it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatRecord {
    /// The virtual block number (never 0).
    pub vblock: u64,
    /// Its entry as of the checkpoint that appended the record.
    pub entry: DatEntry,
}

impl DatRecord {
    /// Appends the encoded record.
    pub fn encode_into(&self, w: &mut Writer) {
        w.u64(self.entry.phys);
        w.u64(self.entry.start_cno);
        w.u64(self.entry.end_cno);
        w.u64(self.vblock);
    }
    /// Decodes a record; virtual block 0 and a bad entry are refused.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let entry = DatEntry::decode(buf)?;
        let mut r = Reader::new(buf, "DAT journal record", DAT_ENTRY_SIZE)?;
        r.skip(24)?;
        let vblock = r.u64()?;
        if vblock == 0 {
            return Err(DecodeError::InvalidField {
                what: "DAT journal record",
                field: "virtual block",
                value: 0,
            });
        }
        Ok(DatRecord { vblock, entry })
    }
}

/// One checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointEntry {
    /// Checkpoint number.
    pub cno: u64,
    /// `CP_FLAG_*`.
    pub flags: u32,
    /// Creation time, ns since the epoch.
    pub ctime_ns: u64,
    /// Blocks written since the previous checkpoint.
    pub nblk_inc: u64,
    /// Inodes in use.
    pub inodes_count: u64,
    /// Blocks in use.
    pub blocks_count: u64,
    /// Next snapshot in the snapshot list, or 0.
    pub next_snapshot: u64,
    /// Previous snapshot, or 0.
    pub prev_snapshot: u64,
    /// The inode file's inode as of this checkpoint.
    pub ifile: Inode,
}

impl CheckpointEntry {
    /// Appends the encoded entry.
    pub fn encode_into(&self, w: &mut Writer) {
        w.u64(self.cno);
        w.u32(self.flags);
        w.u32(0);
        w.u64(self.ctime_ns);
        w.u64(self.nblk_inc);
        w.u64(self.inodes_count);
        w.u64(self.blocks_count);
        w.u64(self.next_snapshot);
        w.u64(self.prev_snapshot);
        self.ifile.encode_into(w);
    }
    /// Decodes an entry; unknown flags are refused.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        const WHAT: &str = "checkpoint entry";
        let mut r = Reader::new(buf, WHAT, CHECKPOINT_ENTRY_SIZE)?;
        let cno = r.u64()?;
        let flags = r.u32()?;
        if flags & !CP_FLAGS_KNOWN != 0 {
            return Err(DecodeError::InvalidField {
                what: WHAT,
                field: "flags",
                value: flags.into(),
            });
        }
        r.skip(4)?;
        Ok(CheckpointEntry {
            cno,
            flags,
            ctime_ns: r.u64()?,
            nblk_inc: r.u64()?,
            inodes_count: r.u64()?,
            blocks_count: r.u64()?,
            next_snapshot: r.u64()?,
            prev_snapshot: r.u64()?,
            ifile: Inode::decode(r.bytes(INODE_SIZE)?)?,
        })
    }
}

/// Slot 0 of the checkpoint file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpFileHeader {
    /// Valid checkpoints.
    pub ncheckpoints: u64,
    /// Snapshots among them.
    pub nsnapshots: u64,
    /// Oldest snapshot, or 0.
    pub first_snapshot: u64,
    /// Newest snapshot, or 0.
    pub last_snapshot: u64,
}

impl CpFileHeader {
    /// Appends the encoded header (a full checkpoint slot).
    pub fn encode_into(&self, w: &mut Writer) {
        w.u64(self.ncheckpoints);
        w.u64(self.nsnapshots);
        w.u64(self.first_snapshot);
        w.u64(self.last_snapshot);
        w.zeros(CHECKPOINT_ENTRY_SIZE - 32);
    }
    /// Decodes the header.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf, "checkpoint file header", CHECKPOINT_ENTRY_SIZE)?;
        let h = CpFileHeader {
            ncheckpoints: r.u64()?,
            nsnapshots: r.u64()?,
            first_snapshot: r.u64()?,
            last_snapshot: r.u64()?,
        };
        if h.nsnapshots > h.ncheckpoints {
            return Err(DecodeError::InvalidField {
                what: "checkpoint file header",
                field: "snapshots",
                value: h.nsnapshots,
            });
        }
        Ok(h)
    }
}

/// Usage of one segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegUsage {
    /// Last modification, seconds since the epoch.
    pub last_mod: u64,
    /// Blocks written into the segment.
    pub nblocks: u32,
    /// Of those, blocks still live (referenced by the current checkpoint).
    pub nlive: u32,
    /// `SU_FLAG_*`.
    pub flags: u32,
    /// Sequence number of the last log written into it.
    pub seq: u64,
}

impl SegUsage {
    /// Appends the encoded entry.
    pub fn encode_into(&self, w: &mut Writer) {
        w.u64(self.last_mod);
        w.u32(self.nblocks);
        w.u32(self.nlive);
        w.u32(self.flags);
        w.u32(0);
        w.u64(self.seq);
    }
    /// Decodes an entry; more live than written blocks, or unknown flags,
    /// are refused.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        const WHAT: &str = "segment usage";
        let mut r = Reader::new(buf, WHAT, SEGUSAGE_SIZE)?;
        let last_mod = r.u64()?;
        let nblocks = r.u32()?;
        let nlive = r.u32()?;
        let flags = r.u32()?;
        r.skip(4)?;
        let seq = r.u64()?;
        if nlive > nblocks {
            return Err(DecodeError::InvalidField {
                what: WHAT,
                field: "live blocks",
                value: nlive.into(),
            });
        }
        if flags & !SU_FLAGS_KNOWN != 0 {
            return Err(DecodeError::InvalidField {
                what: WHAT,
                field: "flags",
                value: flags.into(),
            });
        }
        Ok(SegUsage {
            last_mod,
            nblocks,
            nlive,
            flags,
            seq,
        })
    }
    /// True if nothing was written since the segment was last cleaned.
    pub fn is_clean(&self) -> bool {
        self.flags & (SU_FLAG_DIRTY | SU_FLAG_ACTIVE | SU_FLAG_ERROR) == 0
    }
}

/// Slot 0 of the segment usage file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SuFileHeader {
    /// Clean segments.
    pub ncleansegs: u64,
    /// Dirty segments.
    pub ndirtysegs: u64,
    /// Segment most recently allocated for writing.
    pub last_alloc: u64,
}

impl SuFileHeader {
    /// Appends the encoded header.
    pub fn encode_into(&self, w: &mut Writer) {
        w.u64(self.ncleansegs);
        w.u64(self.ndirtysegs);
        w.u64(self.last_alloc);
        w.u64(0);
    }
    /// Decodes the header.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf, "segment usage header", SEGUSAGE_SIZE)?;
        Ok(SuFileHeader {
            ncleansegs: r.u64()?,
            ndirtysegs: r.u64()?,
            last_alloc: r.u64()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(f: impl FnOnce(&mut Writer)) -> Vec<u8> {
        let mut w = Writer::default();
        f(&mut w);
        w.into_vec()
    }

    #[test]
    fn golden_dat_entry() {
        let e = DatEntry {
            phys: 0x1122,
            start_cno: 3,
            end_cno: CNO_LIVE,
        };
        let b = enc(|w| e.encode_into(w));
        assert_eq!(b.len(), DAT_ENTRY_SIZE);
        assert_eq!(&b[0..8], &[0x22, 0x11, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[8..16], &[3, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[16..24], &[0xff; 8]);
        assert_eq!(&b[24..32], &[0; 8]);
        assert_eq!(DatEntry::decode(&b).unwrap(), e);
        assert!(e.is_live());
        let bad = enc(|w| {
            DatEntry {
                phys: 1,
                start_cno: 5,
                end_cno: 4,
            }
            .encode_into(w)
        });
        assert!(matches!(
            DatEntry::decode(&bad),
            Err(DecodeError::InvalidField { .. })
        ));
    }

    #[test]
    fn golden_dat_record() {
        let r = DatRecord {
            vblock: 0x0405,
            entry: DatEntry {
                phys: 0x1122,
                start_cno: 3,
                end_cno: 9,
            },
        };
        let b = enc(|w| r.encode_into(w));
        assert_eq!(b.len(), DAT_ENTRY_SIZE);
        assert_eq!(&b[0..8], &[0x22, 0x11, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[16..24], &[9, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[24..32], &[5, 4, 0, 0, 0, 0, 0, 0]);
        assert_eq!(DatRecord::decode(&b).unwrap(), r);
        // Virtual block 0 is never a record's.
        let zero = enc(|w| DatRecord { vblock: 0, ..r }.encode_into(w));
        assert!(matches!(
            DatRecord::decode(&zero),
            Err(DecodeError::InvalidField { .. })
        ));
        assert!(matches!(
            DatRecord::decode(&b[..31]),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn golden_checkpoint_entry() {
        let e = CheckpointEntry {
            cno: 1,
            flags: CP_FLAG_SNAPSHOT,
            ctime_ns: 2,
            nblk_inc: 3,
            inodes_count: 4,
            blocks_count: 5,
            next_snapshot: 6,
            prev_snapshot: 7,
            ifile: Inode {
                ino: 2,
                ..Inode::default()
            },
        };
        let b = enc(|w| e.encode_into(w));
        assert_eq!(b.len(), CHECKPOINT_ENTRY_SIZE);
        assert_eq!(&b[0..16], &[1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[56..64], &7u64.to_le_bytes());
        assert_eq!(&b[64 + 224..64 + 232], &2u64.to_le_bytes());
        assert_eq!(CheckpointEntry::decode(&b).unwrap(), e);
        let mut bad = b.clone();
        bad[8] = 0x80;
        assert!(CheckpointEntry::decode(&bad).is_err());
        let h = CpFileHeader {
            ncheckpoints: 2,
            nsnapshots: 1,
            first_snapshot: 1,
            last_snapshot: 1,
        };
        let hb = enc(|w| h.encode_into(w));
        assert_eq!(hb.len(), CHECKPOINT_ENTRY_SIZE);
        assert_eq!(&hb[0..8], &2u64.to_le_bytes());
        assert_eq!(CpFileHeader::decode(&hb).unwrap(), h);
    }

    #[test]
    fn golden_segment_usage() {
        let s = SegUsage {
            last_mod: 9,
            nblocks: 100,
            nlive: 40,
            flags: SU_FLAG_DIRTY,
            seq: 12,
        };
        let b = enc(|w| s.encode_into(w));
        assert_eq!(b.len(), SEGUSAGE_SIZE);
        assert_eq!(&b[8..20], &[100, 0, 0, 0, 40, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(&b[24..32], &12u64.to_le_bytes());
        assert_eq!(SegUsage::decode(&b).unwrap(), s);
        assert!(!s.is_clean());
        let mut bad = b.clone();
        bad[12] = 101;
        assert!(matches!(
            SegUsage::decode(&bad),
            Err(DecodeError::InvalidField {
                field: "live blocks",
                ..
            })
        ));
        let h = SuFileHeader {
            ncleansegs: 5,
            ndirtysegs: 2,
            last_alloc: 1,
        };
        let hb = enc(|w| h.encode_into(w));
        assert_eq!(&hb[0..8], &5u64.to_le_bytes());
        assert_eq!(SuFileHeader::decode(&hb).unwrap(), h);
    }

    #[test]
    fn meta_block_seal_and_verify() {
        let mut blk = vec![0u8; 4096];
        blk[100] = 7;
        MetaBlockHeader::seal(&mut blk, MetaKind::Dat, 11);
        assert_eq!(&blk[0..8], &[b'L', b'F', b'S', b'D', 1, 0, 32, 0]);
        MetaBlockHeader::verify(&blk, MetaKind::Dat, 11).unwrap();
        assert!(matches!(
            MetaBlockHeader::verify(&blk, MetaKind::Sufile, 11),
            Err(DecodeError::BadMagic { .. })
        ));
        assert!(matches!(
            MetaBlockHeader::verify(&blk, MetaKind::Dat, 12),
            Err(DecodeError::BadChecksum { .. })
        ));
        blk[4000] ^= 1;
        assert!(MetaBlockHeader::verify(&blk, MetaKind::Dat, 11).is_err());
    }

    #[test]
    fn record_locations() {
        assert_eq!(MetaKind::Dat.per_block(4096), 127);
        assert_eq!(MetaKind::Ifile.per_block(4096), 15);
        assert_eq!(MetaKind::Cpfile.per_block(4096), 12);
        assert_eq!(MetaKind::Dat.locate(0, 4096), (0, 16));
        assert_eq!(MetaKind::Dat.locate(127, 4096), (1, 16));
        assert_eq!(MetaKind::Sufile.locate(3, 4096), (0, 16 + 96));
    }

    proptest! {
        #[test]
        fn dat_round_trip(phys in any::<u64>(), s in any::<u64>(), len in any::<u64>()) {
            let e = DatEntry { phys, start_cno: s, end_cno: s.saturating_add(len) };
            let b = enc(|w| e.encode_into(w));
            prop_assert_eq!(DatEntry::decode(&b).unwrap(), e);
        }

        #[test]
        fn dat_record_round_trip(v in 1u64.., phys in any::<u64>(), s in any::<u64>(), len in any::<u64>()) {
            let r = DatRecord { vblock: v, entry: DatEntry { phys, start_cno: s, end_cno: s.saturating_add(len) } };
            prop_assert_eq!(DatRecord::decode(&enc(|w| r.encode_into(w))).unwrap(), r);
        }

        #[test]
        fn cp_round_trip(
            v in any::<[u64; 7]>(), flags in 0u32..8, ifile in super::super::inode::tests::arb(),
        ) {
            let e = CheckpointEntry { cno: v[0], flags, ctime_ns: v[1], nblk_inc: v[2],
                inodes_count: v[3], blocks_count: v[4], next_snapshot: v[5], prev_snapshot: v[6], ifile };
            let b = enc(|w| e.encode_into(w));
            prop_assert_eq!(CheckpointEntry::decode(&b).unwrap(), e);
        }

        #[test]
        fn su_round_trip(t in any::<u64>(), n in any::<u32>(), l in any::<u32>(), f in 0u32..8, seq in any::<u64>()) {
            let s = SegUsage { last_mod: t, nblocks: n.max(l), nlive: l.min(n), flags: f, seq };
            let b = enc(|w| s.encode_into(w));
            prop_assert_eq!(SegUsage::decode(&b).unwrap(), s);
        }

        #[test]
        fn headers_round_trip(v in any::<[u64; 4]>()) {
            let h = CpFileHeader { ncheckpoints: v[0].max(v[1]), nsnapshots: v[1].min(v[0]),
                first_snapshot: v[2], last_snapshot: v[3] };
            prop_assert_eq!(CpFileHeader::decode(&enc(|w| h.encode_into(w))).unwrap(), h);
            let s = SuFileHeader { ncleansegs: v[0], ndirtysegs: v[1], last_alloc: v[2] };
            prop_assert_eq!(SuFileHeader::decode(&enc(|w| s.encode_into(w))).unwrap(), s);
        }

        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = DatEntry::decode(&bytes);
            let _ = DatRecord::decode(&bytes);
            let _ = CheckpointEntry::decode(&bytes);
            let _ = CpFileHeader::decode(&bytes);
            let _ = SegUsage::decode(&bytes);
            let _ = SuFileHeader::decode(&bytes);
            let _ = MetaBlockHeader::verify(&bytes, MetaKind::Ifile, 0);
        }
    }
}
