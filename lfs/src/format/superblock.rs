//! The superblock: geometry, identity, features and the log cursor.
//!
//! Two copies exist: at byte 0 of the device and in the last block. They
//! are written alternately (the one with the lower `generation` is
//! overwritten), so a torn superblock write always leaves the other copy
//! intact; the valid copy with the higher generation is current.
//!
//! Layout (`SB_SIZE` = 512 bytes, little-endian):
//!
//! | off | size | field |
//! |----:|----:|---|
//! | 0 | 4 | magic `SB_MAGIC` |
//! | 4 | 2 | format version major |
//! | 6 | 2 | format version minor |
//! | 8 | 4 | bytes covered by the checksum (512) |
//! | 12 | 4 | crc32c, seed 0, of those bytes with this field zero |
//! | 16 | 8 | compat features |
//! | 24 | 8 | ro-compat features |
//! | 32 | 8 | incompat features |
//! | 40 | 4 | block size |
//! | 44 | 4 | blocks per segment |
//! | 48 | 8 | device blocks |
//! | 56 | 8 | segments |
//! | 64 | 8 | first block of segment 0 |
//! | 72 | 4 | reserved segments percent |
//! | 76 | 4 | crc seed |
//! | 80 | 16 | uuid |
//! | 96 | 64 | label, NUL padded |
//! | 160 | 8 | creation time (s) |
//! | 168 | 8 | last write time (s) |
//! | 176 | 8 | cursor: block of the last log with a super root |
//! | 184 | 8 | cursor: that log's sequence number |
//! | 192 | 8 | cursor: its checkpoint number |
//! | 200 | 2 | state |
//! | 202 | 2 | reserved |
//! | 204 | 4 | mount count |
//! | 208 | 8 | generation |
//! | 216 | 4 | inode size |
//! | 220 | 292 | reserved, zero |

use super::codec::{crc_seeded, DecodeError, Reader, Writer};
use super::{FORMAT_VERSION_MAJOR, MAX_BLOCK_SIZE, MIN_BLOCKS_PER_SEGMENT, MIN_BLOCK_SIZE};

/// "LFS1" read as a little-endian u32.
pub const SB_MAGIC: u32 = u32::from_le_bytes(*b"LFS1");
/// Encoded size of a superblock.
pub const SB_SIZE: usize = 512;
/// Bytes of the label field.
pub const LABEL_LEN: usize = 64;
const CRC_OFF: usize = 12;
const USED: usize = 232;

/// Compat features this build knows (none yet).
pub const FEATURE_COMPAT_KNOWN: u64 = 0;
/// Ro-compat features this build knows (none yet). An unknown bit makes the
/// filesystem mountable read-only only.
pub const FEATURE_RO_COMPAT_KNOWN: u64 = 0;
/// Incompat feature: the log may hold data-sync logs (`LOG_FLAG_DATA_SYNC`)
/// after the last checkpoint, which recovery must roll forward. A build
/// that cannot would mount the checkpoint and lose what fdatasync made
/// durable, so it must refuse. Set by mkfs since format 1.1, and by the
/// first read-write mount of a 1.0 filesystem.
pub const FEATURE_INCOMPAT_DATA_SYNC: u64 = 1;
/// Incompat feature: super roots name a DAT journal (`DATJ_INO`) whose
/// records override the DAT's blocks. A build without it would read stale
/// DAT blocks. Set by mkfs since format 1.2, and by the first read-write
/// mount of an older filesystem.
pub const FEATURE_INCOMPAT_DAT_JOURNAL: u64 = 2;
/// Incompat features this build knows. An unknown bit refuses the
/// filesystem.
pub const FEATURE_INCOMPAT_KNOWN: u64 = FEATURE_INCOMPAT_DATA_SYNC | FEATURE_INCOMPAT_DAT_JOURNAL;

/// Whether the filesystem was cleanly unmounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsState {
    /// Unmounted cleanly: the cursor names the last log.
    Clean,
    /// Mounted, or not unmounted cleanly: recovery rolls forward.
    Dirty,
    /// An error was detected; fsck should run.
    Error,
}

impl FsState {
    fn to_raw(self) -> u16 {
        match self {
            FsState::Clean => 1,
            FsState::Dirty => 2,
            FsState::Error => 3,
        }
    }
    fn from_raw(v: u16) -> Option<Self> {
        match v {
            1 => Some(FsState::Clean),
            2 => Some(FsState::Dirty),
            3 => Some(FsState::Error),
            _ => None,
        }
    }
    /// Lower-case name, as `fsctl super` prints it.
    pub fn name(self) -> &'static str {
        match self {
            FsState::Clean => "clean",
            FsState::Dirty => "dirty",
            FsState::Error => "error",
        }
    }
}

/// A decoded superblock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    /// Format major version.
    pub version_major: u16,
    /// Format minor version.
    pub version_minor: u16,
    /// Compat feature bits.
    pub feature_compat: u64,
    /// Ro-compat feature bits.
    pub feature_ro_compat: u64,
    /// Incompat feature bits.
    pub feature_incompat: u64,
    /// Block size in bytes.
    pub block_size: u32,
    /// Blocks per segment.
    pub blocks_per_segment: u32,
    /// Blocks on the device.
    pub total_blocks: u64,
    /// Number of segments.
    pub nsegments: u64,
    /// First block of segment 0.
    pub first_data_block: u64,
    /// Percentage of segments reserved for cleaning.
    pub reserved_percent: u32,
    /// Seed of every checksum other than the superblock's.
    pub crc_seed: u32,
    /// Filesystem identity.
    pub uuid: [u8; 16],
    /// Label, NUL padded.
    pub label: [u8; LABEL_LEN],
    /// Creation time, seconds since the epoch.
    pub ctime: u64,
    /// Last write time of this superblock.
    pub wtime: u64,
    /// Block address of the last log that ends with a super root.
    pub last_log_block: u64,
    /// Sequence number of that log.
    pub last_seq: u64,
    /// Checkpoint number of that super root.
    pub last_cno: u64,
    /// Clean or dirty.
    pub state: FsState,
    /// Number of mounts.
    pub mount_count: u32,
    /// Incremented at every superblock write; the higher valid copy wins.
    pub generation: u64,
    /// Size of an inode record.
    pub inode_size: u32,
    /// The first log sequence number the last read-write mount used (0
    /// before any such mount, and in a 1.0 superblock): recovery starts
    /// new logs far enough above it that no log that mount left behind
    /// unfinished can ever continue the chain (lfs(5), RECOVERY).
    pub seq_floor: u64,
}

impl Superblock {
    /// Encodes into exactly [`SB_SIZE`] bytes with a valid checksum.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(SB_SIZE);
        w.u32(SB_MAGIC);
        w.u16(self.version_major);
        w.u16(self.version_minor);
        w.u32(SB_SIZE as u32);
        w.u32(0);
        w.u64(self.feature_compat);
        w.u64(self.feature_ro_compat);
        w.u64(self.feature_incompat);
        w.u32(self.block_size);
        w.u32(self.blocks_per_segment);
        w.u64(self.total_blocks);
        w.u64(self.nsegments);
        w.u64(self.first_data_block);
        w.u32(self.reserved_percent);
        w.u32(self.crc_seed);
        w.bytes(&self.uuid);
        w.bytes(&self.label);
        w.u64(self.ctime);
        w.u64(self.wtime);
        w.u64(self.last_log_block);
        w.u64(self.last_seq);
        w.u64(self.last_cno);
        w.u16(self.state.to_raw());
        w.u16(0);
        w.u32(self.mount_count);
        w.u64(self.generation);
        w.u32(self.inode_size);
        w.u32(0);
        w.u64(self.seq_floor);
        debug_assert_eq!(w.len(), USED);
        w.zeros(SB_SIZE - USED);
        let crc = crc_seeded(0, w.as_slice(), CRC_OFF);
        w.patch_u32(CRC_OFF, crc);
        w.into_vec()
    }

    /// Decodes and verifies a superblock. Unknown incompat features are an
    /// error; unknown ro-compat features are not (see [`Self::read_only_only`]).
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        const WHAT: &str = "superblock";
        let mut r = Reader::new(buf, WHAT, SB_SIZE)?;
        let magic = r.u32()?;
        if magic != SB_MAGIC {
            return Err(DecodeError::BadMagic {
                what: WHAT,
                expected: SB_MAGIC,
                found: magic,
            });
        }
        let version_major = r.u16()?;
        let version_minor = r.u16()?;
        let covered = r.u32()?;
        if covered as usize != SB_SIZE {
            return Err(DecodeError::InvalidField {
                what: WHAT,
                field: "checksummed size",
                value: covered.into(),
            });
        }
        let stored = r.u32()?;
        let computed = crc_seeded(0, buf.get(..SB_SIZE).unwrap_or(&[]), CRC_OFF);
        if stored != computed {
            return Err(DecodeError::BadChecksum {
                what: WHAT,
                stored,
                computed,
            });
        }
        if version_major != FORMAT_VERSION_MAJOR {
            return Err(DecodeError::UnsupportedVersion {
                what: WHAT,
                found: version_major.into(),
            });
        }
        let feature_compat = r.u64()?;
        let feature_ro_compat = r.u64()?;
        let feature_incompat = r.u64()?;
        if feature_incompat & !super::FEATURE_INCOMPAT_KNOWN != 0 {
            return Err(DecodeError::UnknownIncompatFeatures(
                feature_incompat & !super::FEATURE_INCOMPAT_KNOWN,
            ));
        }
        let block_size = r.u32()?;
        if !block_size.is_power_of_two() || !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&block_size)
        {
            return Err(invalid("block size", block_size.into()));
        }
        let blocks_per_segment = r.u32()?;
        if blocks_per_segment < MIN_BLOCKS_PER_SEGMENT {
            return Err(invalid("blocks per segment", blocks_per_segment.into()));
        }
        let total_blocks = r.u64()?;
        let nsegments = r.u64()?;
        let first_data_block = r.u64()?;
        let data_end = nsegments
            .checked_mul(blocks_per_segment.into())
            .and_then(|b| b.checked_add(first_data_block));
        match data_end {
            // The last block holds the secondary superblock.
            Some(end) if nsegments > 0 && first_data_block > 0 && end < total_blocks => {}
            _ => return Err(invalid("segment count", nsegments)),
        }
        let reserved_percent = r.u32()?;
        if reserved_percent > 100 {
            return Err(invalid("reserved percent", reserved_percent.into()));
        }
        let crc_seed = r.u32()?;
        let uuid = r.fixed::<16>()?;
        let label = r.fixed::<LABEL_LEN>()?;
        let ctime = r.u64()?;
        let wtime = r.u64()?;
        let last_log_block = r.u64()?;
        let last_seq = r.u64()?;
        let last_cno = r.u64()?;
        let raw_state = r.u16()?;
        let state = FsState::from_raw(raw_state).ok_or(invalid("state", raw_state.into()))?;
        r.skip(2)?;
        let mount_count = r.u32()?;
        let generation = r.u64()?;
        let inode_size = r.u32()?;
        if inode_size as usize != super::INODE_SIZE {
            return Err(invalid("inode size", inode_size.into()));
        }
        r.skip(4)?;
        let seq_floor = r.u64()?;
        Ok(Superblock {
            version_major,
            version_minor,
            feature_compat,
            feature_ro_compat,
            feature_incompat,
            block_size,
            blocks_per_segment,
            total_blocks,
            nsegments,
            first_data_block,
            reserved_percent,
            crc_seed,
            uuid,
            label,
            ctime,
            wtime,
            last_log_block,
            last_seq,
            last_cno,
            state,
            mount_count,
            generation,
            inode_size,
            seq_floor,
        })
    }

    /// True if ro-compat features unknown to this build are set: the
    /// filesystem may be read but must not be written.
    pub fn read_only_only(&self) -> bool {
        self.feature_ro_compat & !FEATURE_RO_COMPAT_KNOWN != 0
    }

    /// The label as text (up to the first NUL; invalid UTF-8 replaced).
    pub fn label_str(&self) -> String {
        let end = self.label.iter().position(|&b| b == 0).unwrap_or(LABEL_LEN);
        String::from_utf8_lossy(self.label.get(..end).unwrap_or(&[])).into_owned()
    }

    /// The uuid in the usual 8-4-4-4-12 hex form.
    pub fn uuid_str(&self) -> String {
        uuid_string(&self.uuid)
    }

    /// Block address of the first block of segment `seg`.
    pub fn segment_start(&self, seg: u64) -> u64 {
        self.first_data_block + seg * u64::from(self.blocks_per_segment)
    }

    /// Segment holding block `block`, if it is in the data area.
    pub fn segment_of(&self, block: u64) -> Option<u64> {
        let rel = block.checked_sub(self.first_data_block)?;
        let seg = rel / u64::from(self.blocks_per_segment);
        (seg < self.nsegments).then_some(seg)
    }

    /// Block address of the secondary superblock (the device's last block).
    pub fn secondary_block(&self) -> u64 {
        self.total_blocks - 1
    }

    /// Segments reserved for the cleaner.
    pub fn reserved_segments(&self) -> u64 {
        reserved_segments(self.nsegments, self.reserved_percent)
    }
}

/// A uuid in the usual 8-4-4-4-12 hex form.
pub fn uuid_string(uuid: &[u8; 16]) -> String {
    let h: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        h.get(0..8).unwrap_or(""),
        h.get(8..12).unwrap_or(""),
        h.get(12..16).unwrap_or(""),
        h.get(16..20).unwrap_or(""),
        h.get(20..32).unwrap_or("")
    )
}

/// The uuid written as [`uuid_string`] writes it (hex digits in groups of
/// 8, 4, 4, 4 and 12, either case), or `None`.
pub fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let groups: Vec<&str> = s.split('-').collect();
    let lengths: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    if lengths != [8, 4, 4, 4, 12]
        || !groups
            .iter()
            .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return None;
    }
    let hex: String = groups.concat();
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Segments reserved for cleaning out of `nsegments` at `percent`.
pub fn reserved_segments(nsegments: u64, percent: u32) -> u64 {
    // u128: a decoded superblock may hold any segment count.
    let r = (u128::from(nsegments) * u128::from(percent)).div_ceil(100);
    (r as u64).max(super::MIN_RESERVED_SEGMENTS)
}

/// How mkfs.lfs and fsctl describe the reserve: its segments and the
/// share of the filesystem they really are, which is more than the
/// percentage asked for when the minimum of [`super::MIN_RESERVED_SEGMENTS`]
/// applies: `4 reserved for cleaning, 33% (5% asked, at least 4 segments)`.
pub fn describe_reserve(nsegments: u64, percent: u32) -> String {
    let reserved = reserved_segments(nsegments, percent);
    let share = (u128::from(reserved) * 100)
        .checked_div(u128::from(nsegments))
        .unwrap_or(0);
    if reserved > (u128::from(nsegments) * u128::from(percent)).div_ceil(100) as u64 {
        format!(
            "{reserved} reserved for cleaning, {share}% ({percent}% asked, at least {} segments)",
            super::MIN_RESERVED_SEGMENTS
        )
    } else {
        format!("{reserved} reserved for cleaning, {share}%")
    }
}

fn invalid(field: &'static str, value: u64) -> DecodeError {
    DecodeError::InvalidField {
        what: "superblock",
        field,
        value,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #[test]
    fn reserve_descriptions_give_the_real_share() {
        assert_eq!(
            super::describe_reserve(12, 5),
            "4 reserved for cleaning, 33% (5% asked, at least 4 segments)"
        );
        assert_eq!(
            super::describe_reserve(1000, 5),
            "50 reserved for cleaning, 5%"
        );
    }

    use super::*;
    use proptest::prelude::*;

    pub(crate) fn sample() -> Superblock {
        let mut label = [0u8; LABEL_LEN];
        label[..4].copy_from_slice(b"data");
        Superblock {
            version_major: 1,
            version_minor: 0,
            feature_compat: 0,
            feature_ro_compat: 0,
            feature_incompat: 0,
            block_size: 4096,
            blocks_per_segment: 2048,
            total_blocks: 262144,
            nsegments: 127,
            first_data_block: 1,
            reserved_percent: 5,
            crc_seed: 0xdeadbeef,
            uuid: [0x11; 16],
            label,
            ctime: 1_700_000_000,
            wtime: 1_700_000_001,
            last_log_block: 1,
            last_seq: 1,
            last_cno: 1,
            state: FsState::Clean,
            mount_count: 0,
            generation: 2,
            inode_size: crate::format::INODE_SIZE as u32,
            seq_floor: 0,
        }
    }

    #[test]
    fn uuids_parse_as_they_are_written() {
        let u = [
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 0xff,
        ];
        assert_eq!(uuid_string(&u), "12345678-9abc-def0-0102-0304050607ff");
        assert_eq!(parse_uuid(&uuid_string(&u)), Some(u));
        assert_eq!(parse_uuid("12345678-9ABC-DEF0-0102-0304050607FF"), Some(u));
        for bad in [
            "",
            "12345678-9abc-def0-0102-0304050607f",
            "12345678-9abc-def0-0102-0304050607fff",
            "123456789abcdef001020304050607ff",
            "1234567g-9abc-def0-0102-0304050607ff",
            "12345678-9abc-def0-0102-03040506é7f",
            "+2345678-9abc-def0-0102-0304050607ff",
        ] {
            assert_eq!(parse_uuid(bad), None, "{bad}");
        }
    }

    #[test]
    fn golden_bytes() {
        let b = sample().encode();
        assert_eq!(b.len(), SB_SIZE);
        let head: [u8; 16] = [
            b'L', b'F', b'S', b'1', 1, 0, 0, 0, 0x00, 0x02, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(&b[..12], &head[..12]);
        assert_eq!(&b[40..48], &[0, 0x10, 0, 0, 0, 0x08, 0, 0]);
        assert_eq!(&b[76..80], &0xdeadbeefu32.to_le_bytes());
        assert_eq!(&b[96..100], b"data");
        assert_eq!(&b[200..202], &[1, 0]);
        assert_eq!(&b[208..216], &2u64.to_le_bytes());
        assert!(b[USED..].iter().all(|&x| x == 0));
        // The checksum of the sample is pinned: a layout change must be a
        // deliberate format change.
        let crc = u32::from_le_bytes(b[12..16].try_into().unwrap());
        assert_eq!(crc, crc_seeded(0, &b, CRC_OFF));
        assert_eq!(crc, GOLDEN_CRC, "superblock golden crc moved: {crc:#010x}");
    }

    const GOLDEN_CRC: u32 = 0x1aae_d7a5;

    #[test]
    fn round_trip_sample_and_labels() {
        let sb = sample();
        assert_eq!(Superblock::decode(&sb.encode()).unwrap(), sb);
        assert_eq!(sb.label_str(), "data");
        assert_eq!(sb.uuid_str(), "11111111-1111-1111-1111-111111111111");
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let b = sample().encode();
        for i in 0..SB_SIZE {
            let mut c = b.clone();
            c[i] ^= 0x40;
            assert!(Superblock::decode(&c).is_err(), "flip at {i} accepted");
        }
    }

    #[test]
    fn unknown_features() {
        let mut sb = sample();
        sb.feature_incompat = 1 << 40;
        assert_eq!(
            Superblock::decode(&sb.encode()),
            Err(DecodeError::UnknownIncompatFeatures(1 << 40))
        );
        let mut sb = sample();
        sb.feature_ro_compat = 1 << 3;
        let d = Superblock::decode(&sb.encode()).unwrap();
        assert!(d.read_only_only());
        assert!(!sample().read_only_only());
        let mut sb = sample();
        sb.feature_compat = 1 << 5;
        assert!(!Superblock::decode(&sb.encode()).unwrap().read_only_only());
    }

    #[test]
    fn other_major_version_refused() {
        let mut sb = sample();
        sb.version_major = 2;
        assert!(matches!(
            Superblock::decode(&sb.encode()),
            Err(DecodeError::UnsupportedVersion { found: 2, .. })
        ));
    }

    #[test]
    fn truncated_is_an_error() {
        let b = sample().encode();
        for n in [0, 1, 100, SB_SIZE - 1] {
            assert!(matches!(
                Superblock::decode(&b[..n]),
                Err(DecodeError::Truncated { .. })
            ));
        }
    }

    #[test]
    fn geometry_helpers() {
        let sb = sample();
        assert_eq!(sb.segment_start(0), 1);
        assert_eq!(sb.segment_start(2), 4097);
        assert_eq!(sb.segment_of(4097), Some(2));
        assert_eq!(sb.segment_of(0), None);
        assert_eq!(sb.segment_of(1 + 127 * 2048), None);
        assert_eq!(sb.reserved_segments(), 7);
        assert_eq!(
            reserved_segments(10, 0),
            crate::format::MIN_RESERVED_SEGMENTS
        );
        // Found by fuzzing: must not overflow for any decodable value.
        assert_eq!(reserved_segments(1 << 59, 100), 1 << 59);
    }

    pub(crate) fn arb() -> impl Strategy<Value = Superblock> {
        (
            (0u16..4, any::<u64>(), any::<u64>(), 10u32..=16, 16u32..4096),
            (
                1u64..1000,
                1u64..64,
                0u32..=100,
                any::<u32>(),
                any::<[u8; 16]>(),
            ),
            (
                any::<u64>(),
                any::<u64>(),
                any::<u64>(),
                any::<u64>(),
                any::<u64>(),
            ),
            (
                0u8..3,
                any::<u32>(),
                any::<u64>(),
                any::<u64>(),
                0usize..LABEL_LEN,
            ),
        )
            .prop_map(|(a, b, c, d)| {
                let (minor, compat, ro, bs_log, bps) = a;
                let (nseg, first, pct, seed, uuid) = b;
                let (ctime, wtime, llb, lseq, lcno) = c;
                let (st, mc, gen, slack, lablen) = d;
                let mut label = [0u8; LABEL_LEN];
                for (i, x) in label.iter_mut().take(lablen).enumerate() {
                    *x = b'a' + (i % 26) as u8;
                }
                Superblock {
                    version_major: 1,
                    version_minor: minor,
                    feature_compat: compat,
                    feature_ro_compat: ro,
                    feature_incompat: 0,
                    block_size: 1 << bs_log,
                    blocks_per_segment: bps,
                    total_blocks: first + nseg * u64::from(bps) + 1 + slack % 1000,
                    nsegments: nseg,
                    first_data_block: first,
                    reserved_percent: pct,
                    crc_seed: seed,
                    uuid,
                    label,
                    ctime,
                    wtime,
                    last_log_block: llb,
                    last_seq: lseq,
                    last_cno: lcno,
                    state: [FsState::Clean, FsState::Dirty, FsState::Error][st as usize],
                    mount_count: mc,
                    generation: gen,
                    inode_size: crate::format::INODE_SIZE as u32,
                    seq_floor: lseq.rotate_left(7) ^ gen,
                }
            })
    }

    proptest! {
        #[test]
        fn round_trip(sb in arb()) {
            prop_assert_eq!(Superblock::decode(&sb.encode()).unwrap(), sb);
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = Superblock::decode(&bytes);
        }
    }
}
