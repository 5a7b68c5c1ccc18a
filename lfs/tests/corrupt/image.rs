//! The image the corrupted-image tests damage, and where its metadata
//! lives: shared by `corrupt.rs` (random corruptions) and
//! `corrupt_fixtures.rs` (the committed fixtures).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, IoSlice};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lfs::blockdev::{BlockDevice, MemDevice};
use lfs::format::{FileType, ROOT_INO, SB_SIZE};
use lfs::fs::{Fs, MountOptions};
use lfs::mkfs::{format, MkfsOptions};

pub const DEV_LEN: u64 = 8 << 20;
pub const BS: usize = 4096;

/// The metadata structures corrupted, in the order of the summary line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Structure {
    Superblock,
    Summary,
    SuperRoot,
    Dat,
    DatJournal,
    InodeFile,
    Directory,
    SegmentUsage,
    CheckpointFile,
    Indirect,
    Xattr,
}

impl Structure {
    pub const ALL: [Structure; 11] = [
        Structure::Superblock,
        Structure::Summary,
        Structure::SuperRoot,
        Structure::Dat,
        Structure::DatJournal,
        Structure::InodeFile,
        Structure::Directory,
        Structure::SegmentUsage,
        Structure::CheckpointFile,
        Structure::Indirect,
        Structure::Xattr,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Structure::Superblock => "superblock",
            Structure::Summary => "summary",
            Structure::SuperRoot => "super root",
            Structure::Dat => "DAT",
            Structure::DatJournal => "DAT journal",
            Structure::InodeFile => "inode file",
            Structure::Directory => "directory",
            Structure::SegmentUsage => "segment usage",
            Structure::CheckpointFile => "checkpoint file",
            Structure::Indirect => "indirect",
            Structure::Xattr => "xattr",
        }
    }

    /// The structure of a metadata block, from its magic.
    pub fn of_magic(block: &[u8]) -> Option<Structure> {
        Some(match block.get(..4)? {
            b"LFSI" => Structure::InodeFile,
            b"LFSD" => Structure::Dat,
            b"LFSJ" => Structure::DatJournal,
            b"LFSC" => Structure::CheckpointFile,
            b"LFSU" => Structure::SegmentUsage,
            b"LFSN" => Structure::Indirect,
            b"LFSE" => Structure::Directory,
            b"LFSX" => Structure::Xattr,
            _ => return None,
        })
    }

    /// Bytes of a block of this structure that a checksum covers: the
    /// superblock's crc covers its first `SB_SIZE` bytes; summaries, super
    /// roots (through the log body crc) and metadata blocks are covered
    /// whole.
    pub fn covered(self) -> usize {
        match self {
            Structure::Superblock => SB_SIZE,
            _ => BS,
        }
    }
}

/// A device that records which blocks were read.
#[derive(Debug)]
pub struct Recording {
    pub inner: MemDevice,
    pub read: Mutex<BTreeSet<u64>>,
}

impl BlockDevice for Recording {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if !buf.is_empty() {
            let first = offset / BS as u64;
            let last = (offset + buf.len() as u64 - 1) / BS as u64;
            self.read
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(first..=last);
        }
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<()> {
        self.inner.write_at(bufs, offset)
    }
    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.discard(offset, len)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

pub fn opts() -> MountOptions {
    MountOptions {
        checkpoint_interval: Duration::from_secs(3600),
        ..MountOptions::default()
    }
}

pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_mul(37).wrapping_add((i % 251) as u8))
        .collect()
}

/// The populated image and its snapshot's checkpoint number: files small
/// and large (with indirect blocks), a directory of 400 entries (several
/// directory blocks), nested directories, a symlink, extended attributes
/// (inline and in their own block), several checkpoints and a snapshot,
/// then a clean unmount.
pub fn populated() -> (Vec<u8>, u64) {
    let dev = MemDevice::new(DEV_LEN);
    let mut o = MkfsOptions::new([7; 16], 0xc0ffee, 1_700_000_000, 0);
    o.blocks_per_segment = 32;
    o.discard = false;
    format(&dev, &o).unwrap();
    let dev: Arc<dyn BlockDevice> = Arc::new(dev);
    let fs = Fs::mount(Arc::clone(&dev), opts()).unwrap();
    let r = ROOT_INO;
    let big = fs.mkdir(r, b"big", 0o755, 0, 0).unwrap();
    for i in 0..400u32 {
        let name = format!("entry-with-a-longish-name-{i:05}");
        let f = fs.create(big.ino, name.as_bytes(), 0o644, 0, 0, 0).unwrap();
        if i % 50 == 0 {
            fs.write(f.ino, 0, &pattern(i as u8, 100)).unwrap();
        }
    }
    fs.sync().unwrap();
    let large = fs.create(r, b"large", 0o644, 0, 0, 0).unwrap();
    fs.write(large.ino, 0, &pattern(1, 200_000)).unwrap();
    let d = fs.mkdir(r, b"d", 0o750, 1000, 100).unwrap();
    let e = fs.mkdir(d.ino, b"e", 0o700, 1000, 100).unwrap();
    let small = fs.create(e.ino, b"small", 0o600, 1000, 100, 0).unwrap();
    fs.write(small.ino, 0, b"small file").unwrap();
    fs.symlink(r, b"link", b"d/e/small", 0, 0).unwrap();
    fs.setxattr(small.ino, b"user.short", b"v", 0).unwrap();
    fs.setxattr(large.ino, b"user.long", &pattern(9, 2000), 0)
        .unwrap();
    fs.sync().unwrap();
    let snap = fs.make_checkpoint(true).unwrap();
    fs.write(large.ino, 50_000, &pattern(2, 30_000)).unwrap();
    fs.unlink(big.ino, b"entry-with-a-longish-name-00007")
        .unwrap();
    let late = fs.create(d.ino, b"late", 0o644, 0, 0, 0).unwrap();
    fs.write(late.ino, 0, &pattern(3, 9000)).unwrap();
    fs.sync().unwrap();
    fs.make_checkpoint(false).unwrap();
    (unmounted_image(fs, &dev), snap)
}

/// Unmounts `fs` and returns the bytes of its device.
fn unmounted_image(fs: Arc<Fs>, dev: &Arc<dyn BlockDevice>) -> Vec<u8> {
    fs.unmount().unwrap();
    drop(fs);
    let mut img = vec![0u8; DEV_LEN as usize];
    dev.read_at(&mut img, 0).unwrap();
    img
}

/// [`populated`], then overwrites of blocks placed far apart: they change
/// entries in several DAT blocks but fill less than a journal block, so
/// the image ends with a DAT journal (a merge is due only once the
/// journal reaches half the stale blocks it stands for). Apart from
/// `populated` so that the fixtures' block numbers stay put.
pub fn populated_with_journal() -> (Vec<u8>, u64) {
    let (img, snap) = populated();
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::from_vec(img));
    let fs = Fs::mount(Arc::clone(&dev), opts()).unwrap();
    let r = ROOT_INO;
    let big = fs.lookup(r, b"big").unwrap();
    let wide = fs.create(r, b"wide", 0o644, 0, 0, 0).unwrap();
    fs.write(wide.ino, 0, &pattern(6, 300 * BS)).unwrap();
    fs.sync().unwrap();
    let first = fs
        .lookup(big.ino, b"entry-with-a-longish-name-00000")
        .unwrap();
    fs.write(first.ino, 0, &pattern(4, 100)).unwrap();
    for b in [0, 150, 299] {
        fs.write(wide.ino, (b * BS) as u64, &pattern(5, 100))
            .unwrap();
    }
    fs.make_checkpoint(false).unwrap();
    (unmounted_image(fs, &dev), snap)
}

/// Every metadata block of the image, by structure: the superblock pair,
/// the summaries and super roots of every log a segment walk finds, and
/// metadata blocks by their magic.
pub fn blocks_of(img: &[u8]) -> BTreeMap<Structure, Vec<u64>> {
    let dev = MemDevice::from_vec(img.to_vec());
    let pair = lfs::inspect::read_superblocks(&dev).unwrap();
    let sb = pair.current().unwrap().clone();
    let mut out: BTreeMap<Structure, Vec<u64>> = BTreeMap::new();
    out.insert(Structure::Superblock, vec![0, sb.secondary_block()]);
    for seg in 0..sb.nsegments {
        let dump = lfs::inspect::dump_segment(&dev, &sb, seg).unwrap();
        for log in &dump.logs {
            let h = &log.summary.header;
            let sums = out.entry(Structure::Summary).or_default();
            sums.extend(log.block..log.block + u64::from(h.nsummary_blocks));
            if h.has_super_root() {
                let sr = log.block + u64::from(h.nblocks) - 1;
                out.entry(Structure::SuperRoot).or_default().push(sr);
            }
            let body = log.block + u64::from(h.nsummary_blocks);
            for b in body..body + u64::from(h.nentries) {
                let at = b as usize * BS;
                if let Some(s) = Structure::of_magic(&img[at..at + BS]) {
                    out.entry(s).or_default().push(b);
                }
            }
        }
    }
    out
}

/// Reads every name, attribute, extended attribute, file and link target
/// under `ino`; the count of names read.
pub fn walk(fs: &Fs, ino: u64) -> lfs::Result<u64> {
    let mut n = 0;
    for e in fs.list_dir(ino)? {
        n += 1;
        let a = fs.getattr(e.ino)?;
        for name in fs.listxattr(e.ino)? {
            fs.getxattr(e.ino, &name)?;
        }
        match e.kind {
            FileType::Regular => {
                fs.read(e.ino, 0, a.size.min(1 << 20) as u32 + 1)?;
            }
            FileType::Symlink => {
                fs.readlink(e.ino)?;
            }
            FileType::Directory => n += walk(fs, e.ino)?,
            _ => {}
        }
    }
    Ok(n)
}
