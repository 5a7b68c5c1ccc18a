//! Every on-disk structure of lfs, and nothing else.
//!
//! Each structure has an explicit little-endian `encode` and a `decode`
//! that returns a typed [`DecodeError`] on any input and never panics
//! (indexing, `unwrap` and `panic!` are denied in this module). The byte
//! offsets are documented on each type and in `man/lfs.5`; a golden-vector
//! test in each file pins them.
//!
//! Checksums are crc32c. Superblocks use a fixed seed (the per-filesystem
//! seed is inside them); everything else is seeded with the filesystem's
//! `crc_seed`, and log checksums additionally mix in the log's sequence
//! number, so that a stale log left in a reused segment, or a log of a
//! previous filesystem on the same device, fails verification.

// Decoders must not panic on any input; tests may index freely.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic
    )
)]

mod codec;
mod dirent;
mod inode;
mod log;
mod meta;
mod superblock;
mod superroot;
pub mod targets;

pub use codec::{crc_seeded, log_crc_start, DecodeError, Reader, Writer};
pub use dirent::{name_hash, DirEntry, FileType, MAX_NAME_LEN};
pub use inode::{Inode, BMAP_DIRECT, BMAP_SLOTS, INODE_SIZE};
pub use log::{
    BlockEntry, BlockKind, LogHeader, LogSummary, BLOCK_ENTRY_SIZE, LOG_FLAGS_KNOWN,
    LOG_FLAG_DATA_SYNC, LOG_FLAG_GC, LOG_FLAG_SUPER_ROOT, LOG_FLAG_SYNC_END, LOG_HEADER_SIZE,
    LOG_MAGIC,
};
pub use meta::{
    CheckpointEntry, CpFileHeader, DatEntry, DatRecord, MetaBlockHeader, MetaKind, SegUsage,
    SuFileHeader, CHECKPOINT_ENTRY_SIZE, CP_FLAG_INVALID, CP_FLAG_MINOR, CP_FLAG_SNAPSHOT,
    DAT_ENTRY_SIZE, META_HEADER_SIZE, NODE_PTR_SIZE, SEGUSAGE_SIZE, SU_FLAG_ACTIVE, SU_FLAG_DIRTY,
    SU_FLAG_ERROR,
};
pub use superblock::{
    describe_reserve, parse_uuid, reserved_segments, uuid_string, FsState, Superblock,
    FEATURE_COMPAT_KNOWN, FEATURE_INCOMPAT_DATA_SYNC, FEATURE_INCOMPAT_DAT_JOURNAL,
    FEATURE_INCOMPAT_KNOWN, FEATURE_RO_COMPAT_KNOWN, LABEL_LEN, SB_MAGIC, SB_SIZE,
};
pub use superroot::{JournalRoot, SuperRoot, SR_MAGIC, SR_SIZE, SR_SIZE_1_1};

/// Major format version written by this build. A different major version is
/// refused; minor versions only add fields in reserved space.
pub const FORMAT_VERSION_MAJOR: u16 = 1;
/// Minor format version written by this build (1.1: data-sync logs;
/// 1.2: the DAT journal).
pub const FORMAT_VERSION_MINOR: u16 = 2;
/// Version of every structure other than the superblock (logs, super roots,
/// metadata blocks). Decoders refuse any other value.
pub const STRUCT_VERSION: u16 = 1;

/// Default block size in bytes.
pub const DEFAULT_BLOCK_SIZE: u32 = 4096;
/// Smallest supported block size.
pub const MIN_BLOCK_SIZE: u32 = 1024;
/// Largest supported block size.
pub const MAX_BLOCK_SIZE: u32 = 65536;
/// Default blocks per segment: 2048 × 4 KiB = 8 MiB, as nilfs2. Large
/// enough that a segment write is a long sequential I/O and per-segment
/// metadata (one usage entry) is negligible; small enough that cleaning one
/// segment is a short job.
pub const DEFAULT_BLOCKS_PER_SEGMENT: u32 = 2048;
/// Fewest segments a filesystem formatted without a segment size gets
/// when its size allows ([`auto_blocks_per_segment`]): with 8 MiB
/// segments a 128 MiB image had 16, a quarter of them the cleaning
/// reserve, and sustained overwrites at 60 % live ran out of space.
pub const AUTO_MIN_SEGMENTS: u64 = 128;
/// Smallest segment the default picks, in bytes (1 MiB, as f2fs's 2 MiB
/// order of magnitude: still a long sequential write).
pub const AUTO_MIN_SEGMENT_BYTES: u64 = 1 << 20;

/// Blocks per segment for a device of `len` bytes when none is asked
/// for: [`DEFAULT_BLOCKS_PER_SEGMENT`], halved while the device would
/// hold fewer than [`AUTO_MIN_SEGMENTS`] segments, down to segments of
/// [`AUTO_MIN_SEGMENT_BYTES`] (and never below
/// [`MIN_BLOCKS_PER_SEGMENT`]). So 1 GiB and more get 8 MiB segments (at
/// 4 KiB blocks), 512 MiB 4 MiB ones, 128 MiB and less 1 MiB ones.
pub fn auto_blocks_per_segment(len: u64, block_size: u32) -> u32 {
    let bs = u64::from(block_size.max(1));
    let min = (AUTO_MIN_SEGMENT_BYTES / bs).max(u64::from(MIN_BLOCKS_PER_SEGMENT));
    let mut bps = u64::from(DEFAULT_BLOCKS_PER_SEGMENT);
    while bps / 2 >= min && len / (bps * bs) < AUTO_MIN_SEGMENTS {
        bps /= 2;
    }
    bps as u32
}

/// Fewest blocks per segment: a log needs a summary block, payload and a
/// super root, and cleaning must move something useful.
pub const MIN_BLOCKS_PER_SEGMENT: u32 = 16;
/// Most blocks per segment (segment usage counters are 32-bit).
pub const MAX_BLOCKS_PER_SEGMENT: u32 = 1 << 20;
/// Fewest segments a filesystem can have: the initial log's segment, the
/// segment being written, cleaning reserve and room to clean into.
pub const MIN_SEGMENTS: u64 = 8;
/// Default percentage of segments reserved for the cleaner.
pub const DEFAULT_RESERVED_PERCENT: u32 = 5;
/// Most a user can reserve.
pub const MAX_RESERVED_PERCENT: u32 = 50;
/// Fewest reserved segments regardless of the percentage: half of the
/// reserve is the room changes that free space may use for their
/// checkpoints, and the other half must hold what cleaning takes, the
/// cold log's segment and the one after it. With 2 (or 3) a cleaning
/// pass's cold log took the reserve below the half, and a full
/// filesystem could no longer delete anything (docs/RELIABILITY.md §5).
pub const MIN_RESERVED_SEGMENTS: u64 = 4;

/// Block address 0 holds the primary superblock, so 0 never names a data
/// block: in block maps and DAT entries it means "none" (a hole).
pub const NULL_BLOCK: u64 = 0;
/// Checkpoint number meaning "still live" in a DAT entry's end.
pub const CNO_LIVE: u64 = u64::MAX;

/// The root directory's inode number (FUSE's root is 1 as well).
pub const ROOT_INO: u64 = 1;
/// The inode file: one inode record per inode number.
pub const IFILE_INO: u64 = 2;
/// The DAT: virtual → physical block translation.
pub const DAT_INO: u64 = 3;
/// The checkpoint file.
pub const CPFILE_INO: u64 = 4;
/// The segment usage file.
pub const SUFILE_INO: u64 = 5;
/// The orphan directory: files unlinked while open, named by their inode
/// number, until their last close (or the next mount) frees them. Not
/// reachable from the root; created at the first such unlink.
pub const ORPHAN_INO: u64 = 6;
/// The DAT journal (format 1.2): DAT entries changed since the DAT's
/// blocks were last written, appended by each checkpoint (lfs(5)).
pub const DATJ_INO: u64 = 7;
/// First inode number handed to user files.
pub const FIRST_USER_INO: u64 = 16;
