//! Writes the committed seed corpus, `fuzz/corpus/<target>/`, from the lfs
//! API: real structures taken from freshly formatted in-memory devices, a
//! few built by hand, and corrupt copies of them.
//!
//! ```text
//! cd fuzz && cargo run --example gen_corpus
//! ```
//!
//! Also the seeds of the configuration parsers' targets (`cleanerd_conf`,
//! `fsd_toml`: the shipped files and hand-written variants) and of the
//! operation-sequence crash target (`ops_crash`: plans built with
//! `lfs/tests/common/plan.rs` and run by `ops.rs`, both compiled in here
//! with `#[path]`).
//! The control protocol's corpus has its own generator
//! (`cargo run -p lfs-proto --example gen_corpus`).
//!
//! Deterministic: the same lfs writes the same bytes. Files are named
//! `good-*` (the target must accept them) or `bad-<kind>-*` (it must reject
//! them with an error of that kind, see `lfs::format::targets::error_kind`
//! and the `error_kind` of `cleanerd::targets` and `fsd::targets`), or, for
//! `ops_crash`, `seq-*` (a plan, which must run without a violation);
//! the tests that run each corpus check the names, and so does this
//! program before writing. It overwrites the files it writes and leaves
//! every other file alone (inputs added by hand or found by fuzzing stay).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use lfs::blockdev::{BlockDevice, CrashMode, MemDevice};
use lfs::format::targets::{
    self, log_summary_input, meta_block_input, seeded_input, META_KINDS, PARAMS_LEN, SEED_LEN,
};
use lfs::format::{
    BlockEntry, BlockKind, CheckpointEntry, DatEntry, DirEntry, FileType, Inode, LogHeader,
    LogSummary, MetaBlockHeader, MetaKind, SegUsage, SuperRoot, Superblock, Writer,
    CHECKPOINT_ENTRY_SIZE, CP_FLAG_MINOR, CP_FLAG_SNAPSHOT, INODE_SIZE, LOG_FLAG_DATA_SYNC,
    LOG_FLAG_GC, LOG_HEADER_SIZE, MAX_NAME_LEN, SB_SIZE, SR_SIZE, SU_FLAG_ERROR,
};
use lfs::mkfs::{self, MkfsOptions};

// The model and the target of `ops_crash`, shared with lfs's tests.
#[allow(dead_code)]
#[path = "../../lfs/tests/common/durable.rs"]
mod durable;
#[allow(dead_code)]
#[path = "../../lfs/tests/common/ops.rs"]
mod ops;
#[allow(dead_code)]
#[path = "../../lfs/tests/common/plan.rs"]
mod plan;

/// Checksum seed of the generated filesystems.
const SEED: u32 = 0x5eed_f00d;
/// Their creation time.
const NOW_SECS: u64 = 1_700_000_000;
/// Its nanosecond part.
const NOW_NSEC: u32 = 123_456_789;
/// Blocks per segment: the minimum keeps the devices small.
const BLOCKS_PER_SEGMENT: u32 = lfs::format::MIN_BLOCKS_PER_SEGMENT;
/// Segments of the generated filesystems.
const SEGMENTS: u64 = 12;
/// Blocks of the initial log mkfs writes: summary, 4 metadata blocks, super
/// root (see lfs::mkfs).
const INITIAL_LOG_BLOCKS: usize = 6;

// Byte offsets of fields that the corrupt inputs damage, from the layout
// tables of lfs(5) (and the module docs of lfs::format).
/// Superblock: the state field.
const SB_STATE: usize = 200;
/// Log header: the version, the flags and the block count.
const LOG_VERSION: usize = 4;
const LOG_FLAGS: usize = 6;
const LOG_NBLOCKS: usize = 20;
/// Super root: the version and the covered size.
const SR_VERSION: usize = 4;
const SR_SIZE_FIELD: usize = 8;
/// Metadata block header: the version and the record size.
const META_VERSION: usize = 4;
const META_RECORD_SIZE: usize = 6;
/// Block entry: the kind.
const ENTRY_KIND: usize = 24;
/// Checkpoint entry: the flags.
const CP_FLAGS: usize = 8;
/// Checkpoint file header: the snapshot count.
const CP_HEADER_SNAPSHOTS: usize = 8;
/// Segment usage: the live block count and the flags.
const SU_LIVE: usize = 12;
const SU_FLAGS: usize = 16;
/// Directory entry: the name hash, the file type, the record length and
/// the name.
const DIRENT_HASH: usize = 8;
const DIRENT_TYPE: usize = 13;
const DIRENT_REC_LEN: usize = 14;
const DIRENT_NAME: usize = 16;

/// A formatted in-memory filesystem.
struct Image {
    bytes: Vec<u8>,
    sb: Superblock,
    bs: usize,
}

impl Image {
    fn format(block_size: u32, label: &str) -> Image {
        let mut opts = MkfsOptions::new([0x42; 16], SEED, NOW_SECS, NOW_NSEC);
        opts.block_size = block_size;
        opts.blocks_per_segment = BLOCKS_PER_SEGMENT;
        opts.label = label.to_string();
        let len = (2 + SEGMENTS * u64::from(BLOCKS_PER_SEGMENT)) * u64::from(block_size);
        let dev = MemDevice::new(len);
        mkfs::format(&dev, &opts).expect("formatting an in-memory device");
        assert_eq!(dev.len(), len);
        let bytes = dev.into_vec();
        let sb = Superblock::decode(&bytes).expect("mkfs wrote a valid superblock");
        Image {
            bytes,
            sb,
            bs: block_size as usize,
        }
    }

    /// Block `n` of the initial log.
    fn log_block(&self, n: usize) -> &[u8] {
        &self.initial_log()[n * self.bs..(n + 1) * self.bs]
    }

    fn initial_log(&self) -> &[u8] {
        let start = self.sb.last_log_block as usize * self.bs;
        &self.bytes[start..start + INITIAL_LOG_BLOCKS * self.bs]
    }

    /// Record `slot` of the metadata block of `kind` in the initial log.
    fn record(&self, kind: MetaKind, slot: u64) -> &[u8] {
        let block = self.log_block(1 + meta_index(kind));
        let (_, off) = kind.locate(slot, self.bs);
        &block[off..off + kind.record_size()]
    }
}

/// Position of `kind`'s block among the payload of mkfs's initial log.
fn meta_index(kind: MetaKind) -> usize {
    match kind {
        MetaKind::Ifile => 0,
        MetaKind::Dat => 1,
        MetaKind::Cpfile => 2,
        MetaKind::Sufile => 3,
        other => panic!("mkfs writes no {other:?} block"),
    }
}

/// Inputs by target, then file name.
#[derive(Default)]
struct Corpus(BTreeMap<&'static str, BTreeMap<String, Vec<u8>>>);

impl Corpus {
    fn add(&mut self, target: &'static str, name: &str, data: Vec<u8>) {
        let old = self
            .0
            .entry(target)
            .or_default()
            .insert(name.to_string(), data);
        assert!(old.is_none(), "{target}/{name} generated twice");
    }
}

fn flipped(data: &[u8], at: usize) -> Vec<u8> {
    let mut v = data.to_vec();
    v[at] ^= 0x10;
    v
}

fn patched(data: &[u8], at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut v = data.to_vec();
    v[at..at + bytes.len()].copy_from_slice(bytes);
    v
}

fn encoded(f: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::default();
    f(&mut w);
    w.into_vec()
}

fn superblocks(c: &mut Corpus, k1: &Image, k4: &Image) {
    const T: &str = "superblock";
    let good = k1.bytes[..SB_SIZE].to_vec();
    c.add(T, "good-mkfs-1k", good.clone());
    c.add(T, "good-mkfs-4k-label", k4.bytes[..SB_SIZE].to_vec());
    let mut sb = k1.sb.clone();
    sb.state = lfs::format::FsState::Dirty;
    sb.feature_ro_compat = 1 << 7;
    sb.feature_compat = 1 << 3;
    sb.mount_count = 17;
    sb.generation = u64::MAX;
    c.add(T, "good-dirty-rocompat", sb.encode());

    c.add(T, "bad-checksum-flip", flipped(&good, 100));
    c.add(T, "bad-truncated-511", good[..SB_SIZE - 1].to_vec());
    c.add(T, "bad-magic", flipped(&good, 0));
    // The state is checked after the checksum: patching it alone is caught
    // by the checksum.
    c.add(T, "bad-checksum-state", patched(&good, SB_STATE, &[9, 0]));
    let variant = |f: &dyn Fn(&mut Superblock)| {
        let mut sb = k1.sb.clone();
        f(&mut sb);
        sb.encode()
    };
    c.add(
        T,
        "bad-features-incompat",
        variant(&|sb| sb.feature_incompat = 1 << 40),
    );
    c.add(T, "bad-version-major", variant(&|sb| sb.version_major = 2));
    c.add(
        T,
        "bad-field-block-size",
        variant(&|sb| sb.block_size = 3000),
    );
    c.add(
        T,
        "bad-field-segment-count",
        variant(&|sb| sb.nsegments = sb.total_blocks),
    );
    c.add(
        T,
        "bad-field-reserved",
        variant(&|sb| sb.reserved_percent = 101),
    );
}

fn logs(c: &mut Corpus, k1: &Image) {
    const T: &str = "log_summary";
    let input = |bs: usize, seed: u32, log: &[u8]| log_summary_input(bs, seed, log).unwrap();
    let log = k1.initial_log();
    let good = input(k1.bs, SEED, log);
    c.add(T, "good-mkfs-1k", good.clone());

    let entry = |i: u64, kind| BlockEntry {
        ino: 16 + i,
        offset: i,
        vblock: 100 + i,
        kind,
    };
    let kinds = [
        BlockKind::Data,
        BlockKind::Indirect(1),
        BlockKind::Indirect(2),
        BlockKind::Indirect(3),
        BlockKind::Xattr,
    ];
    let mut many = LogSummary {
        header: LogHeader::new(LOG_FLAG_DATA_SYNC, 77, 5, 3, 9),
        entries: (0..100).map(|i| entry(i, kinds[i as usize % 5])).collect(),
    };
    c.add(
        T,
        "good-data-sync-4k",
        input(4096, 1, &many.encode(4096, 1, &[])),
    );
    let mut gc = LogSummary {
        header: LogHeader::new(LOG_FLAG_GC, u64::MAX, 0, 0, 1),
        entries: vec![entry(0, BlockKind::Data)],
    };
    c.add(T, "good-gc-8k", input(8192, 0, &gc.encode(8192, 0, &[])));
    let body = [vec![0xa5u8; 2048], vec![0x5au8; 2048]];
    let refs: Vec<&[u8]> = body.iter().map(|b| b.as_slice()).collect();
    let mut two = LogSummary {
        header: LogHeader::new(0, 2, 3, 4, 5),
        entries: vec![entry(1, BlockKind::Data), entry(2, BlockKind::Xattr)],
    };
    let mut bytes = two.encode(2048, 7, &refs);
    bytes.extend(body.concat());
    c.add(T, "good-body-2k", input(2048, 7, &bytes));

    let body_at = PARAMS_LEN + k1.bs; // prefix, then one summary block
    c.add(T, "bad-checksum-body", flipped(&good, body_at + 300));
    c.add(
        T,
        "bad-checksum-entry",
        flipped(&good, PARAMS_LEN + LOG_HEADER_SIZE + 8),
    );
    c.add(T, "bad-checksum-seed", input(k1.bs, SEED + 1, log));
    c.add(
        T,
        "bad-truncated-summary",
        good[..PARAMS_LEN + k1.bs - 1].to_vec(),
    );
    c.add(T, "bad-magic", flipped(&good, PARAMS_LEN));
    c.add(
        T,
        "bad-version",
        patched(&good, PARAMS_LEN + LOG_VERSION, &[2, 0]),
    );
    c.add(
        T,
        "bad-field-flags",
        patched(&good, PARAMS_LEN + LOG_FLAGS, &[0x80, 0]),
    );
    c.add(
        T,
        "bad-field-block-count",
        patched(&good, PARAMS_LEN + LOG_NBLOCKS, &[9, 0, 0, 0]),
    );
}

fn block_entries(c: &mut Corpus, k1: &Image) {
    const T: &str = "block_entry";
    let summary = k1.log_block(0);
    let mkfs_entry = summary[LOG_HEADER_SIZE..LOG_HEADER_SIZE + 32].to_vec();
    c.add(T, "good-mkfs", mkfs_entry.clone());
    let enc = |kind| {
        encoded(|w| {
            BlockEntry {
                ino: u64::MAX,
                offset: 1 << 40,
                vblock: 3,
                kind,
            }
            .encode_into(w)
        })
    };
    c.add(T, "good-indirect3", enc(BlockKind::Indirect(3)));
    c.add(T, "good-xattr", enc(BlockKind::Xattr));
    c.add(T, "good-inode", enc(BlockKind::Inode));
    c.add(
        T,
        "bad-field-kind-0",
        patched(&mkfs_entry, ENTRY_KIND, &[0]),
    );
    c.add(
        T,
        "bad-field-kind-7",
        patched(&mkfs_entry, ENTRY_KIND, &[7]),
    );
    c.add(T, "bad-truncated-31", mkfs_entry[..31].to_vec());
}

fn super_roots(c: &mut Corpus, k1: &Image, k4: &Image) {
    const T: &str = "super_root";
    let sr1 = k1.log_block(INITIAL_LOG_BLOCKS - 1);
    let good = seeded_input(SEED, sr1);
    c.add(T, "good-mkfs-1k", good.clone());
    c.add(
        T,
        "good-mkfs-4k",
        seeded_input(SEED, k4.log_block(INITIAL_LOG_BLOCKS - 1)),
    );
    c.add(T, "bad-checksum-seed", seeded_input(SEED ^ 1, sr1));
    c.add(T, "bad-checksum-flip", flipped(&good, SEED_LEN + 48 + 8));
    c.add(T, "bad-magic", flipped(&good, SEED_LEN));
    c.add(
        T,
        "bad-version",
        patched(&good, SEED_LEN + SR_VERSION, &[0, 1]),
    );
    c.add(
        T,
        "bad-field-size",
        patched(&good, SEED_LEN + SR_SIZE_FIELD, &[0, 4]),
    );
    c.add(T, "bad-truncated", good[..SEED_LEN + SR_SIZE - 1].to_vec());
    let mut sr = SuperRoot::decode(sr1, SEED).unwrap();
    sr.sufile.nsec[2] = 1_000_000_000;
    c.add(
        T,
        "bad-field-nanoseconds",
        seeded_input(SEED, &sr.encode(1024, SEED)),
    );
}

fn extreme_inode() -> Inode {
    Inode {
        mode: u32::MAX,
        uid: u32::MAX,
        gid: 0,
        nlink: u32::MAX,
        size: u64::MAX,
        blocks: u64::MAX,
        atime: i64::MIN,
        mtime: i64::MAX,
        ctime: -1,
        crtime: 0,
        nsec: [999_999_999, 0, 1, 500_000_000],
        generation: u32::MAX,
        flags: u32::MAX,
        xattr_block: u64::MAX,
        rdev: u32::MAX,
        bmap: [u64::MAX; lfs::format::BMAP_SLOTS],
        ino: u64::MAX,
        // Fields added later keep their defaults until listed here.
        ..Inode::default()
    }
}

fn inodes(c: &mut Corpus, k1: &Image) {
    const T: &str = "inode";
    let root = k1.record(MetaKind::Ifile, lfs::format::ROOT_INO).to_vec();
    c.add(T, "good-mkfs-root", root.clone());
    c.add(T, "good-zero", vec![0; INODE_SIZE]);
    c.add(T, "good-extremes", extreme_inode().encode());
    let mut bad = extreme_inode();
    bad.nsec[3] = u32::MAX;
    c.add(T, "bad-field-nanoseconds", bad.encode());
    c.add(T, "bad-truncated-255", root[..INODE_SIZE - 1].to_vec());
}

fn dat_entries(c: &mut Corpus, k1: &Image) {
    const T: &str = "dat_entry";
    let live = k1.record(MetaKind::Dat, 1).to_vec();
    c.add(T, "good-mkfs-live", live.clone());
    let enc = |e: DatEntry| encoded(|w| e.encode_into(w));
    c.add(
        T,
        "good-dead",
        enc(DatEntry {
            phys: 1234,
            start_cno: 3,
            end_cno: 7,
        }),
    );
    c.add(T, "good-zero", enc(DatEntry::default()));
    c.add(
        T,
        "bad-field-interval",
        enc(DatEntry {
            phys: 1,
            start_cno: 8,
            end_cno: 7,
        }),
    );
    c.add(T, "bad-truncated", live[..20].to_vec());
}

fn checkpoints(c: &mut Corpus, k1: &Image) {
    const T: &str = "checkpoint_entry";
    let cp = k1.record(MetaKind::Cpfile, 1).to_vec();
    c.add(T, "good-mkfs", cp.clone());
    let mut snap = CheckpointEntry::decode(&cp).unwrap();
    snap.flags = CP_FLAG_SNAPSHOT | CP_FLAG_MINOR;
    snap.next_snapshot = 9;
    snap.prev_snapshot = 4;
    snap.ifile = extreme_inode();
    c.add(T, "good-snapshot", encoded(|w| snap.encode_into(w)));
    c.add(T, "bad-field-flags", patched(&cp, CP_FLAGS, &[0x80]));
    let mut bad = CheckpointEntry::decode(&cp).unwrap();
    bad.ifile.nsec[0] = 1_000_000_000;
    c.add(T, "bad-field-nanoseconds", encoded(|w| bad.encode_into(w)));
    c.add(T, "bad-truncated", cp[..CHECKPOINT_ENTRY_SIZE - 1].to_vec());

    const H: &str = "cp_file_header";
    let hdr = k1.record(MetaKind::Cpfile, 0).to_vec();
    c.add(H, "good-mkfs", hdr.clone());
    c.add(
        H,
        "bad-field-snapshots",
        patched(&hdr, CP_HEADER_SNAPSHOTS, &[2]),
    );
    c.add(H, "bad-truncated", hdr[..100].to_vec());
}

fn seg_usages(c: &mut Corpus, k1: &Image) {
    const T: &str = "seg_usage";
    let su = k1.record(MetaKind::Sufile, 1).to_vec();
    c.add(T, "good-mkfs-active", su.clone());
    c.add(T, "good-clean", vec![0; 32]);
    let enc = |s: SegUsage| encoded(|w| s.encode_into(w));
    c.add(
        T,
        "good-error-full",
        enc(SegUsage {
            last_mod: u64::MAX,
            nblocks: u32::MAX,
            nlive: u32::MAX,
            flags: SU_FLAG_ERROR,
            seq: u64::MAX,
        }),
    );
    c.add(T, "bad-field-live", patched(&su, SU_LIVE, &[0xff, 0xff]));
    c.add(T, "bad-field-flags", patched(&su, SU_FLAGS, &[8]));
    c.add(T, "bad-truncated", su[..31].to_vec());

    const H: &str = "su_file_header";
    let hdr = k1.record(MetaKind::Sufile, 0).to_vec();
    c.add(H, "good-mkfs", hdr.clone());
    c.add(H, "good-ones", vec![0xff; 32]);
    c.add(H, "bad-truncated", hdr[..31].to_vec());
}

fn dir_entries(c: &mut Corpus) {
    const T: &str = "dir_entry";
    let enc = |ino, file_type, name: &[u8]| {
        encoded(|w| {
            DirEntry {
                ino,
                file_type,
                name: name.to_vec(),
            }
            .encode_into(w, SEED)
        })
    };
    let hello = enc(20, FileType::Regular, b"hello");
    c.add(T, "good-hello", seeded_input(SEED, &hello));
    let long = enc(u64::MAX, FileType::Directory, &[b'n'; MAX_NAME_LEN]);
    c.add(T, "good-long-name", seeded_input(SEED, &long));
    // The last entry of a block owns the slack after it.
    let mut slack = enc(21, FileType::Symlink, b"link");
    slack.resize(64, 0);
    slack[DIRENT_REC_LEN..DIRENT_REC_LEN + 2].copy_from_slice(&64u16.to_le_bytes());
    c.add(T, "good-slack", seeded_input(SEED, &slack));

    let good = seeded_input(SEED, &hello);
    c.add(T, "bad-checksum-seed", seeded_input(SEED ^ 1, &hello));
    c.add(
        T,
        "bad-checksum-name",
        patched(&good, SEED_LEN + DIRENT_NAME, b"j"),
    );
    c.add(T, "bad-field-inode-zero", patched(&good, SEED_LEN, &[0]));
    c.add(
        T,
        "bad-field-type",
        patched(&good, SEED_LEN + DIRENT_TYPE, &[3]),
    );
    c.add(
        T,
        "bad-field-record-length",
        patched(&good, SEED_LEN + DIRENT_REC_LEN, &[9, 0]),
    );
    c.add(
        T,
        "bad-field-name-slash",
        patched(&good, SEED_LEN + DIRENT_NAME + 1, b"/"),
    );
    c.add(T, "bad-field-name-dotdot", seeded_input(SEED, &dotdot()));
    c.add(
        T,
        "bad-truncated",
        good[..SEED_LEN + DIRENT_NAME + 4].to_vec(),
    );
}

/// An entry named `..`, with a correct hash: names are checked first.
fn dotdot() -> Vec<u8> {
    let mut e = encoded(|w| {
        DirEntry {
            ino: 5,
            file_type: FileType::Directory,
            name: b"xx".to_vec(),
        }
        .encode_into(w, SEED)
    });
    e[DIRENT_NAME..DIRENT_NAME + 2].copy_from_slice(b"..");
    e[DIRENT_HASH..DIRENT_HASH + 4]
        .copy_from_slice(&lfs::format::name_hash(SEED, b"..").to_le_bytes());
    e
}

fn meta_blocks(c: &mut Corpus, k1: &Image) {
    const T: &str = "meta_block";
    for kind in [
        MetaKind::Ifile,
        MetaKind::Dat,
        MetaKind::Cpfile,
        MetaKind::Sufile,
    ] {
        let block = k1.log_block(1 + meta_index(kind));
        let name = format!("good-mkfs-{kind:?}-1k").to_lowercase();
        c.add(T, &name, meta_block_input(kind, SEED, block));
    }
    for kind in META_KINDS {
        let mut block = vec![0u8; 1024];
        for (i, b) in block
            .iter_mut()
            .enumerate()
            .skip(lfs::format::META_HEADER_SIZE)
        {
            *b = (i % 251) as u8;
        }
        MetaBlockHeader::seal(&mut block, kind, 3);
        let name = format!("good-sealed-{kind:?}-1k").to_lowercase();
        c.add(T, &name, meta_block_input(kind, 3, &block));
    }
    let dat = k1.log_block(1 + meta_index(MetaKind::Dat));
    let good = meta_block_input(MetaKind::Dat, SEED, dat);
    c.add(
        T,
        "bad-magic-kind",
        meta_block_input(MetaKind::Sufile, SEED, dat),
    );
    c.add(T, "bad-checksum-flip", flipped(&good, PARAMS_LEN + 600));
    c.add(
        T,
        "bad-checksum-seed",
        meta_block_input(MetaKind::Dat, 0, dat),
    );
    c.add(
        T,
        "bad-version",
        patched(&good, PARAMS_LEN + META_VERSION, &[9]),
    );
    c.add(
        T,
        "bad-field-record-size",
        patched(&good, PARAMS_LEN + META_RECORD_SIZE, &[33]),
    );
    c.add(
        T,
        "bad-truncated",
        good[..PARAMS_LEN + lfs::format::META_HEADER_SIZE - 1].to_vec(),
    );
}

// The targets beyond the decoders: the configuration parsers and the
// operation-sequence crash target.

/// cleanerd.conf(5): the shipped file, with its defaults uncommented,
/// every kind of value, and every kind of error.
fn cleanerd_confs(c: &mut Corpus) {
    const T: &str = "cleanerd_conf";
    let shipped = include_str!("../../conf/cleanerd.conf");
    c.add(T, "good-shipped", shipped.into());
    c.add(T, "good-shipped-uncommented", uncommented(shipped).into());
    c.add(T, "good-empty", Vec::new());
    c.add(
        T,
        "good-units",
        b"protection_period = \"1.5h\"\nmin_clean_segments = \"64M\"\nmax_clean_segments = \"12.5%\"\n\
          clean_check_interval = 0.25\nselection_policy = \"declining-cost\"\n\
          nsegments_per_clean = \"2%\"\nmc_nsegments_per_clean = \"1GiB\"\n\
          cleaning_interval = \"500ms\"\nmc_cleaning_interval = \"0.1s\"\nretry_interval = \"1d\"\n\
          min_reclaimable_blocks = \"4K\"\nmc_min_reclaimable_blocks = 0\n\
          use_set_suinfo = false\nlog_priority = \"NOTICE\"\n"
            .to_vec(),
    );
    for policy in ["timestamp", "greedy", "cost-benefit"] {
        c.add(
            T,
            &format!("good-policy-{policy}"),
            format!("selection_policy = '{policy}' # quoted literally\n").into(),
        );
    }
    // Parses, but 1% of the largest geometry is more than a pass cleans.
    c.add(
        T,
        "good-resolves-on-some",
        b"nsegments_per_clean = \"1%\"\n".to_vec(),
    );
    c.add(
        T,
        "bad-toml-unterminated",
        b"protection_period = \"1h\n".to_vec(),
    );
    c.add(
        T,
        "bad-toml-duplicate",
        b"retry_interval = 5\nretry_interval = 6\n".to_vec(),
    );
    c.add(
        T,
        "bad-key-misspelt",
        b"# a typo\nmin_clean_segment = 10\n".to_vec(),
    );
    c.add(
        T,
        "bad-key-table",
        b"[cleaner]\nretry_interval = 5\n".to_vec(),
    );
    c.add(
        T,
        "bad-value-negative",
        b"min_clean_segments = -1\n".to_vec(),
    );
    c.add(
        T,
        "bad-value-unit",
        b"cleaning_interval = \"5 fortnights\"\n".to_vec(),
    );
    c.add(
        T,
        "bad-value-min-max",
        b"max_clean_segments = 10\nmin_clean_segments = 20\n".to_vec(),
    );
    c.add(T, "bad-value-type", b"use_set_suinfo = \"yes\"\n".to_vec());
    c.add(
        T,
        "bad-value-policy",
        b"selection_policy = \"random\"\n".to_vec(),
    );
    c.add(
        T,
        "bad-value-percent",
        b"max_clean_segments = \"101%\"\n".to_vec(),
    );
    c.add(T, "bad-utf8", b"log_priority = \"\xff\"\n".to_vec());
}

/// fsd.toml: the shipped file, with its defaults uncommented, every key
/// in each of its forms, and every kind of error.
fn fsd_tomls(c: &mut Corpus) {
    const T: &str = "fsd_toml";
    let shipped = include_str!("../../conf/fsd.toml");
    c.add(T, "good-shipped", shipped.into());
    // The socket's default names the device (/run/lfs/NAME.sock): a
    // pattern shown in the comment, not a path to set.
    let uncommented = uncommented(shipped).replace("socket = \"/run/lfs/NAME.sock\"", "");
    c.add(T, "good-shipped-uncommented", uncommented.into());
    c.add(T, "good-empty", Vec::new());
    c.add(
        T,
        "good-every-key",
        b"checkpoint_interval = 0.5\ndirty_limit = \"256M\"\nthreads = 64\n\
          socket = \"/run/lfs/x.sock\"\nlog_level = \"TRACE\"\n"
            .to_vec(),
    );
    c.add(
        T,
        "good-integers",
        b"\"checkpoint_interval\" = 86400\ndirty_limit = 1048576 # 1M\n".to_vec(),
    );
    c.add(T, "bad-toml-missing-value", b"threads = \n".to_vec());
    c.add(T, "bad-toml-array", b"threads = [4\n".to_vec());
    c.add(T, "bad-key-misspelt", b"thread = 4\n".to_vec());
    c.add(T, "bad-key-table", b"[fsd]\nthreads = 4\n".to_vec());
    c.add(T, "bad-value-threads", b"threads = 65\n".to_vec());
    c.add(
        T,
        "bad-value-interval",
        b"checkpoint_interval = 0.05\n".to_vec(),
    );
    c.add(T, "bad-value-nan", b"checkpoint_interval = nan\n".to_vec());
    c.add(T, "bad-value-dirty", b"dirty_limit = \"1K\"\n".to_vec());
    c.add(
        T,
        "bad-value-socket",
        b"socket = \"relative.sock\"\n".to_vec(),
    );
    c.add(T, "bad-value-level", b"log_level = \"loud\"\n".to_vec());
    c.add(T, "bad-utf8", b"socket = \"/run/\xc3\x28.sock\"\n".to_vec());
}

/// `text` with every commented-out setting (`#key = value`) set.
fn uncommented(text: &str) -> String {
    text.lines()
        .map(|l| match l.strip_prefix('#') {
            Some(rest) if rest.contains(" = ") && !rest.starts_with(' ') => rest,
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Plans for `ops_crash`: a workload like the crash matrix's that runs
/// every operation, crashed at several points of it under every crash
/// mode and geometry, and shorter plans aimed at one feature each.
fn ops_plans(c: &mut Corpus) {
    const T: &str = "ops_crash";
    use plan::{At, Op, Plan};
    let f = At::root;
    let d = |name| At { dir: 1, name }; // in /a
    let long = |name| At {
        dir: 0,
        name: 4 + name,
    };
    let w = |at, offset, len, seed| Op::Write {
        at,
        offset,
        len,
        seed,
    };
    let workload = vec![
        Op::Create { at: f(1), perm: 0 },
        w(f(1), 0, 3000, 1),
        Op::Fsync {
            at: f(1),
            datasync: false,
        },
        Op::Mkdir { at: f(0) },
        Op::Create { at: d(2), perm: 3 },
        w(d(2), 5000, 20_000, 2),
        w(d(2), 4095, 2, 3),
        Op::Fsync {
            at: d(2),
            datasync: true,
        },
        Op::Rename {
            from: f(1),
            to: d(3),
            flags: 0,
        },
        Op::Truncate {
            at: d(2),
            size: 100,
        },
        Op::Sync,
        Op::Link {
            from: d(3),
            to: f(2),
        },
        Op::Symlink {
            at: f(3),
            target: 1,
        },
        Op::Create { at: d(0), perm: 7 },
        Op::SetXattr {
            at: f(2),
            name: 0,
            len: 4,
            flags: 1,
        },
        Op::SetXattr {
            at: d(0),
            name: 2,
            len: 60,
            flags: 0,
        },
        Op::SetAttr {
            at: f(2),
            what: 0,
            value: 4,
        },
        Op::SetAttr {
            at: d(3),
            what: 1,
            value: 5,
        },
        Op::SetAttr {
            at: f(3),
            what: 2,
            value: 9,
        },
        Op::MakeCheckpoint { snapshot: true },
        w(d(3), 0, 60_000, 4),
        Op::Punch {
            at: d(3),
            offset: 4096,
            len: 8192,
        },
        Op::Rename {
            from: f(3),
            to: d(2),
            flags: 2,
        },
        Op::Rename {
            from: d(0),
            to: f(3),
            flags: 1,
        },
        Op::RemoveXattr { at: f(2), name: 0 },
        Op::Unlink { at: f(3) },
        Op::Mkdir { at: long(0) },
        Op::Rmdir { at: long(0) },
        Op::CheckSnapshot { which: 0 },
        Op::Sync,
        Op::Open { at: f(2) },
        Op::Unlink { at: f(2) },
        Op::WriteOpen {
            handle: 0,
            offset: 100,
            len: 7000,
            seed: 5,
        },
        Op::MakeCheckpoint { snapshot: false },
        Op::Close { handle: 0 },
        Op::Unsnapshot,
        Op::DeleteCheckpoints,
        Op::Clean { segments: 2 },
        Op::Freeze,
        w(d(2), 1 << 19, 12_345, 6),
        Op::Remount,
        Op::SetAttr {
            at: d(2),
            what: 3,
            value: 0,
        },
        Op::Fsync {
            at: d(2),
            datasync: false,
        },
    ];
    let modes = [
        ("drop", CrashMode::DropAll),
        ("keep", CrashMode::KeepAll),
        ("prefix", CrashMode::KeepPrefix(2)),
        ("tear", CrashMode::TearLast { sectors: 9 }),
        ("random", CrashMode::Random { seed: 7 }),
    ];
    let plan = |geometry: u8, mode, crash_at, ops: &[Op]| Plan {
        geometry,
        mode,
        crash_at,
        ops: ops.to_vec(),
    };
    let writes = ops::device_writes(&plan(0, modes[0].1, 0, &workload));
    for (i, (name, mode)) in modes.iter().enumerate() {
        // Spread over the run, past the mount's own write.
        let at = (writes * (i as u64 + 1) / 6).max(2);
        let at = u8::try_from(at).expect("the workload makes under 256 writes");
        c.add(
            T,
            &format!("seq-workload-{name}-w{at}"),
            plan(i as u8 % 4, *mode, at, &workload).encode(),
        );
    }
    c.add(
        T,
        "seq-workload-end",
        plan(1, modes[4].1, 0, &workload).encode(),
    );
    // Sparse files on 1 KiB blocks: the double indirect tree starts 138
    // KiB in; sub-block writes straddle block edges.
    let sparse = vec![
        Op::Create { at: f(0), perm: 0 },
        w(f(0), 600_000, 3000, 1),
        w(f(0), 1023, 2, 2),
        Op::Sync,
        Op::Punch {
            at: f(0),
            offset: 599_000,
            len: 2500,
        },
        Op::Truncate {
            at: f(0),
            size: 300_000,
        },
        Op::Fsync {
            at: f(0),
            datasync: true,
        },
        w(f(0), 140_000, 5000, 3),
        Op::Sync,
    ];
    c.add(T, "seq-sparse-1k", plan(1, modes[3].1, 6, &sparse).encode());
    // A directory grows past a block with long names.
    let mut names = Vec::new();
    for n in 0..24 {
        names.push(Op::Create {
            at: long(n),
            perm: n,
        });
        if n % 6 == 5 {
            names.push(Op::Sync);
        }
    }
    names.push(Op::Unlink { at: long(3) });
    names.push(Op::Sync);
    c.add(T, "seq-long-names", plan(2, modes[1].1, 5, &names).encode());
    // A plan of the most operations there can be, so that libFuzzer's
    // length limit (the longest seed, for a target this slow) lets plans
    // grow that long.
    let mixed: Vec<Op> = workload
        .iter()
        .chain(&sparse)
        .chain(&names)
        .copied()
        .take(plan::MAX_OPS)
        .collect();
    assert_eq!(mixed.len(), plan::MAX_OPS);
    let half = ops::device_writes(&plan(3, modes[4].1, 0, &mixed)) / 2;
    let half = u8::try_from(half).expect("under 512 writes");
    c.add(
        T,
        &format!("seq-longest-random-w{half}"),
        plan(3, CrashMode::Random { seed: 11 }, half, &mixed).encode(),
    );
}

/// The verdict of `target` on `data`: accepted, or the kind of its
/// error. `ops_crash` has none: it passes unless it panics.
fn verdict(target: &str, data: &[u8]) -> Result<(), String> {
    match target {
        "cleanerd_conf" => cleanerd::targets::cleanerd_conf(data)
            .map_err(|e| cleanerd::targets::error_kind(&e).to_string()),
        "fsd_toml" => {
            fsd::targets::fsd_toml(data).map_err(|e| fsd::targets::error_kind(&e).to_string())
        }
        "ops_crash" => {
            ops::ops_crash(data);
            Ok(())
        }
        _ => {
            let (_, run) = targets::ALL
                .iter()
                .find(|(name, _)| *name == target)
                .unwrap_or_else(|| panic!("no target {target}"));
            run(data).map_err(|e| targets::error_kind(&e).to_string())
        }
    }
}

/// Checks every input against its name, then writes it.
fn write(corpus: &Corpus, root: &Path) -> io::Result<usize> {
    let mut n = 0;
    for (target, files) in &corpus.0 {
        let dir = root.join(target);
        fs::create_dir_all(&dir)?;
        for (name, data) in files {
            match (name.split('-').next(), verdict(target, data)) {
                (Some("good" | "seq"), Ok(())) => {}
                (Some("bad"), Err(kind)) => {
                    let want = name.split('-').nth(1).unwrap_or("");
                    assert_eq!(kind, want, "{target}/{name}");
                }
                (_, r) => panic!("{target}/{name} decodes to {r:?}"),
            }
            fs::write(dir.join(name), data)?;
            n += 1;
        }
    }
    Ok(n)
}

fn main() -> io::Result<()> {
    let k1 = Image::format(1024, "");
    let k4 = Image::format(4096, "fuzz corpus");
    let mut c = Corpus::default();
    superblocks(&mut c, &k1, &k4);
    logs(&mut c, &k1);
    block_entries(&mut c, &k1);
    super_roots(&mut c, &k1, &k4);
    inodes(&mut c, &k1);
    dat_entries(&mut c, &k1);
    checkpoints(&mut c, &k1);
    seg_usages(&mut c, &k1);
    dir_entries(&mut c);
    meta_blocks(&mut c, &k1);
    cleanerd_confs(&mut c);
    fsd_tomls(&mut c);
    ops_plans(&mut c);
    let names = targets::ALL.iter().map(|(name, _)| *name);
    for name in names.chain(["cleanerd_conf", "fsd_toml", "ops_crash"]) {
        assert!(c.0.contains_key(name), "no corpus generated for {name}");
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let n = write(&c, &root)?;
    println!("wrote {n} files under {}", root.display());
    Ok(())
}
