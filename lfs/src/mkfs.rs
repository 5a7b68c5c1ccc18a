//! Building a fresh filesystem: geometry planning and the initial
//! checkpoint.
//!
//! `format` writes, in this order (the commit protocol of lfs(5) applied
//! to an empty filesystem):
//!
//! 1. zeros over the first and last `WIPE_BYTES` of the device, so that
//!    no other filesystem's signature survives;
//! 2. the initial log at the start of segment 0: one summary block, the
//!    first block of the inode file (holding the root directory), of the
//!    DAT, of the checkpoint file and of the segment usage file, and a
//!    super root (checkpoint 1);
//! 3. a flush;
//! 4. the primary and the secondary superblock, both pointing at that log;
//! 5. a flush.
//!
//! A crash before step 5 completes leaves a device without a valid
//! superblock pair, which nothing mounts: mkfs is simply re-run.

use std::io::IoSlice;

use crate::blockdev::BlockDevice;
use crate::format::{
    self, reserved_segments, BlockEntry, BlockKind, CheckpointEntry, CpFileHeader, DatEntry,
    FsState, Inode, JournalRoot, LogHeader, LogSummary, MetaBlockHeader, MetaKind, SegUsage,
    SuFileHeader, SuperRoot, Superblock, Writer, CNO_LIVE, CPFILE_INO, DAT_INO, FIRST_USER_INO,
    IFILE_INO, LABEL_LEN, LOG_FLAG_SUPER_ROOT, ROOT_INO, SUFILE_INO, SU_FLAG_ACTIVE, SU_FLAG_DIRTY,
};
use crate::{Error, Result};

/// Bytes zeroed at each end of the device before formatting: covers the
/// signatures of ext2/3/4, xfs, btrfs (64 KiB), nilfs2 and f2fs.
pub const WIPE_BYTES: u64 = 1 << 20;

/// What the user chose.
#[derive(Debug, Clone)]
pub struct MkfsOptions {
    /// Block size in bytes (power of two, 1 KiB to 64 KiB).
    pub block_size: u32,
    /// Blocks per segment.
    pub blocks_per_segment: u32,
    /// Percentage of segments reserved for the cleaner.
    pub reserved_percent: u32,
    /// Label (up to 64 bytes).
    pub label: String,
    /// Filesystem uuid.
    pub uuid: [u8; 16],
    /// Seed of the filesystem's checksums.
    pub crc_seed: u32,
    /// Creation time, seconds since the epoch.
    pub now_secs: u64,
    /// Nanosecond part of the creation time.
    pub now_nsec: u32,
    /// Discard the whole device first.
    pub discard: bool,
    /// Owner of the root directory, who owns the filesystem (fsd takes
    /// changing control requests from root and from this user).
    pub root_uid: u32,
    /// Group of the root directory.
    pub root_gid: u32,
}

/// The checksum seed for a filesystem whose uuid was chosen rather than
/// drawn (`mkfs.lfs --uuid`): the crc32c of the uuid, so that the same
/// options give the same image. Any seed is as good for checking.
pub fn seed_for_uuid(uuid: &[u8; 16]) -> u32 {
    crc32c::crc32c(uuid)
}

impl MkfsOptions {
    /// Defaults for everything but identity and time.
    pub fn new(uuid: [u8; 16], crc_seed: u32, now_secs: u64, now_nsec: u32) -> Self {
        MkfsOptions {
            block_size: format::DEFAULT_BLOCK_SIZE,
            blocks_per_segment: format::DEFAULT_BLOCKS_PER_SEGMENT,
            reserved_percent: format::DEFAULT_RESERVED_PERCENT,
            label: String::new(),
            uuid,
            crc_seed,
            now_secs,
            now_nsec,
            discard: true,
            root_uid: 0,
            root_gid: 0,
        }
    }
}

/// The layout that a device of a given size gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Geometry {
    /// Block size in bytes.
    pub block_size: u32,
    /// Blocks per segment.
    pub blocks_per_segment: u32,
    /// Blocks on the device.
    pub total_blocks: u64,
    /// Segments.
    pub nsegments: u64,
    /// First block of segment 0.
    pub first_data_block: u64,
    /// Segments reserved for cleaning.
    pub reserved_segments: u64,
    /// Reserved percentage asked for.
    pub reserved_percent: u32,
}

impl Geometry {
    /// Bytes in one segment.
    pub fn segment_bytes(&self) -> u64 {
        u64::from(self.block_size) * u64::from(self.blocks_per_segment)
    }
    /// Bytes users can fill: segments not reserved for cleaning.
    pub fn usable_bytes(&self) -> u64 {
        (self.nsegments - self.reserved_segments) * self.segment_bytes()
    }
}

/// Smallest device, in bytes, that holds a filesystem of this geometry.
pub fn min_device_bytes(block_size: u32, blocks_per_segment: u32) -> u64 {
    // Two superblock blocks plus the minimum number of segments.
    (2 + format::MIN_SEGMENTS * u64::from(blocks_per_segment)) * u64::from(block_size)
}

/// Checks the options alone, before any device is touched.
pub fn validate(opts: &MkfsOptions) -> Result<()> {
    let bs = opts.block_size;
    if !bs.is_power_of_two() || !(format::MIN_BLOCK_SIZE..=format::MAX_BLOCK_SIZE).contains(&bs) {
        return Err(Error::InvalidArgument(format!(
            "block size {bs} is not a power of two between {} and {}",
            format::MIN_BLOCK_SIZE,
            format::MAX_BLOCK_SIZE
        )));
    }
    let bps = opts.blocks_per_segment;
    if !(format::MIN_BLOCKS_PER_SEGMENT..=format::MAX_BLOCKS_PER_SEGMENT).contains(&bps) {
        return Err(Error::InvalidArgument(format!(
            "blocks per segment {bps} is not between {} and {}",
            format::MIN_BLOCKS_PER_SEGMENT,
            format::MAX_BLOCKS_PER_SEGMENT
        )));
    }
    if opts.reserved_percent > format::MAX_RESERVED_PERCENT {
        return Err(Error::InvalidArgument(format!(
            "reserved percentage {} is above {}",
            opts.reserved_percent,
            format::MAX_RESERVED_PERCENT
        )));
    }
    if opts.label.len() > LABEL_LEN || opts.label.as_bytes().contains(&0) {
        return Err(Error::InvalidArgument(format!(
            "label is longer than {LABEL_LEN} bytes or contains NUL"
        )));
    }
    Ok(())
}

/// Checks the options and computes the layout for a device of `dev_len`
/// bytes, or says precisely what is wrong.
pub fn plan(dev_len: u64, opts: &MkfsOptions) -> Result<Geometry> {
    validate(opts)?;
    let (bs, bps) = (opts.block_size, opts.blocks_per_segment);
    let min = min_device_bytes(bs, bps);
    if dev_len < min {
        return Err(Error::DeviceTooSmall {
            size: dev_len,
            min,
            block_size: bs,
            blocks_per_segment: bps,
        });
    }
    let total_blocks = dev_len / u64::from(bs);
    let first_data_block = 1;
    let nsegments = (total_blocks - 2) / u64::from(bps);
    let reserved = reserved_segments(nsegments, opts.reserved_percent);
    if reserved + format::MIN_SEGMENTS / 2 > nsegments {
        return Err(Error::InvalidArgument(format!(
            "reserving {}% leaves too few segments ({nsegments} in all, {reserved} reserved)",
            opts.reserved_percent
        )));
    }
    Ok(Geometry {
        block_size: bs,
        blocks_per_segment: bps,
        total_blocks,
        nsegments,
        first_data_block,
        reserved_segments: reserved,
        reserved_percent: opts.reserved_percent,
    })
}

/// Formats `dev`: plans the geometry, wipes old signatures, writes the
/// initial checkpoint and both superblocks. Returns the geometry.
pub fn format(dev: &dyn BlockDevice, opts: &MkfsOptions) -> Result<Geometry> {
    let geo = plan(dev.len(), opts)?;
    if opts.discard {
        dev.discard(0, dev.len())
            .map_err(|e| Error::io("discarding the device", e))?;
    }
    wipe(dev)?;
    let sb = initial_superblock(&geo, opts);
    let blocks = initial_log(&sb, opts);
    let slices: Vec<IoSlice<'_>> = blocks.iter().map(|b| IoSlice::new(b)).collect();
    let start = sb.segment_start(0) * u64::from(geo.block_size);
    dev.write_at(&slices, start)
        .map_err(|e| Error::io("writing the initial checkpoint", e))?;
    dev.flush()
        .map_err(|e| Error::io("flushing the initial checkpoint", e))?;
    let bs = u64::from(geo.block_size);
    let enc = sb.encode();
    dev.write_all_at(&enc, 0)
        .map_err(|e| Error::io("writing the primary superblock", e))?;
    dev.write_all_at(&enc, sb.secondary_block() * bs)
        .map_err(|e| Error::io("writing the secondary superblock", e))?;
    dev.flush()
        .map_err(|e| Error::io("flushing the superblocks", e))?;
    log::info!(
        "formatted {} segments of {} blocks, checkpoint 1 at block {}",
        geo.nsegments,
        geo.blocks_per_segment,
        sb.last_log_block
    );
    Ok(geo)
}

fn wipe(dev: &dyn BlockDevice) -> Result<()> {
    let len = dev.len();
    let n = WIPE_BYTES.min(len);
    let zeros = vec![0u8; n as usize];
    dev.write_all_at(&zeros, 0)
        .map_err(|e| Error::io("wiping the start of the device", e))?;
    dev.write_all_at(&zeros, len - n)
        .map_err(|e| Error::io("wiping the end of the device", e))?;
    Ok(())
}

fn initial_superblock(geo: &Geometry, opts: &MkfsOptions) -> Superblock {
    let mut label = [0u8; LABEL_LEN];
    for (d, s) in label.iter_mut().zip(opts.label.as_bytes()) {
        *d = *s;
    }
    Superblock {
        version_major: format::FORMAT_VERSION_MAJOR,
        version_minor: format::FORMAT_VERSION_MINOR,
        feature_compat: 0,
        feature_ro_compat: 0,
        feature_incompat: format::FEATURE_INCOMPAT_DATA_SYNC | format::FEATURE_INCOMPAT_DAT_JOURNAL,
        block_size: geo.block_size,
        blocks_per_segment: geo.blocks_per_segment,
        total_blocks: geo.total_blocks,
        nsegments: geo.nsegments,
        first_data_block: geo.first_data_block,
        reserved_percent: geo.reserved_percent,
        crc_seed: opts.crc_seed,
        uuid: opts.uuid,
        label,
        ctime: opts.now_secs,
        wtime: opts.now_secs,
        last_log_block: geo.first_data_block,
        last_seq: INITIAL_SEQ,
        last_cno: INITIAL_CNO,
        state: FsState::Clean,
        mount_count: 0,
        generation: 1,
        inode_size: format::INODE_SIZE as u32,
        seq_floor: 0,
    }
}

/// Sequence number of the first log.
pub const INITIAL_SEQ: u64 = 1;
/// Number of the first checkpoint.
pub const INITIAL_CNO: u64 = 1;
/// The first virtual block number handed out (0 is a hole).
const FIRST_VBLOCK: u64 = 1;

/// Builds the blocks of the initial log: summary, ifile block 0, DAT block
/// 0, checkpoint file block 0, segment usage block 0, super root.
fn initial_log(sb: &Superblock, opts: &MkfsOptions) -> Vec<Vec<u8>> {
    let bs = sb.block_size as usize;
    let seed = sb.crc_seed;
    let log_start = sb.segment_start(0);
    // Payload blocks follow the single summary block in this order.
    let ifile_addr = log_start + 1;
    let dat_addr = log_start + 2;
    let cp_addr = log_start + 3;
    let su_addr = log_start + 4;
    const NPAYLOAD: u32 = 4;
    let nblocks = 1 + NPAYLOAD + 1;
    let now = opts.now_secs as i64;
    let now_ns = opts.now_secs * 1_000_000_000 + u64::from(opts.now_nsec);

    let root = Inode {
        mode: 0o040755,
        nlink: 2,
        uid: opts.root_uid,
        gid: opts.root_gid,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        nsec: [opts.now_nsec; 4],
        ino: ROOT_INO,
        parent: ROOT_INO,
        ..Inode::default()
    };
    let meta_inode = |ino: u64, phys: u64, slots: u64, kind: MetaKind| {
        let mut i = Inode {
            mode: 0o100600,
            nlink: 1,
            size: slots * kind.record_size() as u64,
            blocks: 1,
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            nsec: [opts.now_nsec; 4],
            ino,
            ..Inode::default()
        };
        i.bmap[0] = phys;
        i
    };

    let mut ifile_blk = vec![0u8; bs];
    put_record(&mut ifile_blk, MetaKind::Ifile, ROOT_INO, bs, |w| {
        root.encode_into(w)
    });
    MetaBlockHeader::seal(&mut ifile_blk, MetaKind::Ifile, seed);

    let mut dat_blk = vec![0u8; bs];
    let dat = DatEntry {
        phys: ifile_addr,
        start_cno: INITIAL_CNO,
        end_cno: CNO_LIVE,
    };
    put_record(&mut dat_blk, MetaKind::Dat, FIRST_VBLOCK, bs, |w| {
        dat.encode_into(w)
    });
    MetaBlockHeader::seal(&mut dat_blk, MetaKind::Dat, seed);

    // The inode file is virtually addressed: its block 0 is vblock 1.
    let ifile = meta_inode(IFILE_INO, FIRST_VBLOCK, FIRST_USER_INO, MetaKind::Ifile);
    let mut cp_blk = vec![0u8; bs];
    let cph = CpFileHeader {
        ncheckpoints: 1,
        ..CpFileHeader::default()
    };
    put_record(&mut cp_blk, MetaKind::Cpfile, 0, bs, |w| cph.encode_into(w));
    let cp = CheckpointEntry {
        cno: INITIAL_CNO,
        flags: 0,
        ctime_ns: now_ns,
        nblk_inc: u64::from(nblocks),
        inodes_count: 1,
        blocks_count: u64::from(NPAYLOAD),
        next_snapshot: 0,
        prev_snapshot: 0,
        ifile: ifile.clone(),
    };
    put_record(&mut cp_blk, MetaKind::Cpfile, INITIAL_CNO, bs, |w| {
        cp.encode_into(w)
    });
    MetaBlockHeader::seal(&mut cp_blk, MetaKind::Cpfile, seed);

    // Segment usage: slot 0 is the header, slot s + 1 is segment s. Blocks
    // of the file that were never written are holes and read as clean.
    let mut su_blk = vec![0u8; bs];
    let suh = SuFileHeader {
        ncleansegs: sb.nsegments - 1,
        ndirtysegs: 1,
        last_alloc: 0,
    };
    put_record(&mut su_blk, MetaKind::Sufile, 0, bs, |w| suh.encode_into(w));
    let su0 = SegUsage {
        last_mod: opts.now_secs,
        nblocks,
        nlive: NPAYLOAD,
        flags: SU_FLAG_ACTIVE | SU_FLAG_DIRTY,
        seq: INITIAL_SEQ,
    };
    put_record(&mut su_blk, MetaKind::Sufile, 1, bs, |w| su0.encode_into(w));
    MetaBlockHeader::seal(&mut su_blk, MetaKind::Sufile, seed);

    let sr = SuperRoot {
        cno: INITIAL_CNO,
        seq: INITIAL_SEQ,
        ctime_ns: now_ns,
        nongc_ctime_ns: now_ns,
        dat: meta_inode(DAT_INO, dat_addr, FIRST_VBLOCK + 1, MetaKind::Dat),
        cpfile: meta_inode(CPFILE_INO, cp_addr, INITIAL_CNO + 1, MetaKind::Cpfile),
        sufile: meta_inode(SUFILE_INO, su_addr, sb.nsegments + 1, MetaKind::Sufile),
        // Empty: the DAT's one block is current.
        dat_journal: JournalRoot::default(),
    };
    let sr_blk = sr.encode(bs, seed);

    let entry = |ino, vblock| BlockEntry {
        ino,
        offset: 0,
        vblock,
        kind: BlockKind::Data,
    };
    let mut summary = LogSummary {
        header: LogHeader::new(LOG_FLAG_SUPER_ROOT, INITIAL_SEQ, now_ns, 1, INITIAL_CNO),
        entries: vec![
            entry(IFILE_INO, FIRST_VBLOCK),
            entry(DAT_INO, 0),
            entry(CPFILE_INO, 0),
            entry(SUFILE_INO, 0),
        ],
    };
    let body = [
        ifile_blk.as_slice(),
        dat_blk.as_slice(),
        cp_blk.as_slice(),
        su_blk.as_slice(),
        sr_blk.as_slice(),
    ];
    let sum_blk = summary.encode(bs, seed, &body);
    debug_assert_eq!(summary.header.nblocks, nblocks);
    vec![sum_blk, ifile_blk, dat_blk, cp_blk, su_blk, sr_blk]
}

/// Encodes one record into its slot of a metadata block.
fn put_record(block: &mut [u8], kind: MetaKind, slot: u64, bs: usize, f: impl FnOnce(&mut Writer)) {
    let (_, off) = kind.locate(slot, bs);
    let mut w = Writer::with_capacity(kind.record_size());
    f(&mut w);
    let rec = w.into_vec();
    if let Some(dst) = block.get_mut(off..off + rec.len()) {
        dst.copy_from_slice(&rec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blockdev::MemDevice;
    use crate::inspect;

    fn opts() -> MkfsOptions {
        let mut o = MkfsOptions::new([7; 16], 0x1234_5678, 1_700_000_000, 5);
        o.blocks_per_segment = 64;
        o.label = "test".into();
        o
    }

    #[test]
    fn plan_rejects_bad_options_and_small_devices() {
        let o = opts();
        let min = min_device_bytes(4096, 64);
        assert!(plan(min, &o).is_ok());
        let e = plan(min - 1, &o).unwrap_err();
        assert!(matches!(e, Error::DeviceTooSmall { min: m, .. } if m == min));
        assert!(e.to_string().contains(&min.to_string()), "{e}");
        for (bs, bps, pct) in [(3000, 64, 5), (512, 64, 5), (4096, 8, 5), (4096, 64, 51)] {
            let mut o = opts();
            o.block_size = bs;
            o.blocks_per_segment = bps;
            o.reserved_percent = pct;
            assert!(matches!(plan(1 << 30, &o), Err(Error::InvalidArgument(_))));
        }
        let mut o = opts();
        o.label = "x".repeat(65);
        assert!(plan(1 << 30, &o).is_err());
    }

    #[test]
    fn default_segment_size_scales_down_for_small_devices() {
        use format::auto_blocks_per_segment as auto;
        assert_eq!(auto(4 << 30, 4096), 2048);
        assert_eq!(auto(1 << 30, 4096), 2048);
        assert_eq!(auto(1023 << 20, 4096), 1024);
        assert_eq!(auto(512 << 20, 4096), 1024);
        assert_eq!(auto(128 << 20, 4096), 256);
        assert_eq!(auto(1 << 20, 4096), 256);
        assert_eq!(auto(1 << 20, 65536), 16);
        assert_eq!(auto(1 << 40, 1024), 2048);
        assert_eq!(auto(16 << 20, 1024), 1024);
        // At least 128 segments where the size allows (1 MiB segments).
        for mib in [129u64, 200, 300, 700, 1500] {
            let bps = auto(mib << 20, 4096);
            let g = plan(
                mib << 20,
                &MkfsOptions {
                    blocks_per_segment: bps,
                    ..opts()
                },
            )
            .unwrap();
            assert!(g.nsegments >= 127, "{mib} MiB: {g:?}");
        }
    }

    #[test]
    fn geometry_of_one_gib() {
        let mut o = opts();
        o.blocks_per_segment = format::DEFAULT_BLOCKS_PER_SEGMENT;
        let g = plan(1 << 30, &o).unwrap();
        assert_eq!(g.total_blocks, 262144);
        assert_eq!(g.nsegments, 127);
        assert_eq!(g.reserved_segments, 7);
        assert_eq!(g.usable_bytes(), 120 * (8 << 20));
    }

    #[test]
    fn formatted_device_verifies() {
        let dev = MemDevice::new(8 << 20);
        let g = format(&dev, &opts()).unwrap();
        let pair = inspect::read_superblocks(&dev).unwrap();
        let sb = pair.current().unwrap().clone();
        assert_eq!(sb.nsegments, g.nsegments);
        assert_eq!(sb.label_str(), "test");
        assert!(pair.primary.is_ok() && pair.secondary.is_ok());
        let seg = inspect::dump_segment(&dev, &sb, 0).unwrap();
        assert_eq!(seg.logs.len(), 1);
        let log = &seg.logs[0];
        assert!(log.body_ok);
        assert_eq!(log.summary.header.nblocks, 6);
        let sr = log.super_root.as_ref().unwrap().as_ref().unwrap();
        assert_eq!(sr.cno, 1);
        assert_eq!(sr.dat.bmap[0], sb.last_log_block + 2);
        // Other segments hold nothing that verifies.
        assert!(inspect::dump_segment(&dev, &sb, 1).unwrap().logs.is_empty());
    }
}
