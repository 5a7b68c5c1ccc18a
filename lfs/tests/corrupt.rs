//! Corrupted images: random byte flips, bit flips and 512-byte or whole
//! block zeroings in every metadata structure of a populated image (both
//! superblocks, log summaries, the super root, DAT and its journal, inode
//! file, directory,
//! segment usage, checkpoint file, indirect and extended attribute
//! blocks). For each corrupted image, fsck and a mount with a walk of the
//! whole tree (and of a snapshot) run in a watchdog thread under
//! `catch_unwind`; the test fails on any panic or hang, and checks that:
//!
//! * a mount that fails says which structure (a `Corrupted` error, or an
//!   `Unsupported` one naming the superblocks);
//! * reads of a mounted corrupted image either work or fail with
//!   `Corrupted` or `ReadOnly` (EIO or EROFS through fsd);
//! * when the corruption lies in a block that fsck reads on the intact
//!   image, in bytes a checksum covers, it is noticed: fsck reports at
//!   least one error. Bytes outside any checksum (the superblock block past
//!   its 512 bytes, never read) and blocks no current structure uses (older
//!   versions kept for older checkpoints, which fsck does not read) may be
//!   changed without a finding; they are counted apart.
//!
//! `LFS_LONG=1 LFS_CORRUPT_CASES=N` tries N corruptions instead of the
//! bounded 350; the test prints `corrupt images: ...` with its figures.

#[path = "corrupt/image.rs"]
mod image;

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use image::{
    blocks_of, opts, populated, populated_with_journal, walk, Recording, Structure, BS, DEV_LEN,
};
use lfs::blockdev::{BlockDevice, MemDevice};
use lfs::format::ROOT_INO;
use lfs::fs::Fs;
use lfs_e2e::rng::SplitMix64;

/// Corruptions tried by the bounded run.
const BOUNDED_CASES: usize = 350;
/// How long one corrupted image may take (fsck, mount, walk, unmount)
/// before it counts as a hang. Generous: a debug build does it in well
/// under a second.
const WATCHDOG: Duration = Duration::from_secs(20);

/// What was read of the intact image by fsck, and by a mount, a walk of
/// the tree and of the snapshot.
fn blocks_read(img: &[u8], snap: u64) -> (BTreeSet<u64>, BTreeSet<u64>) {
    let rec = Arc::new(Recording {
        inner: MemDevice::from_vec(img.to_vec()),
        read: Mutex::new(BTreeSet::new()),
    });
    let dev: Arc<dyn BlockDevice> = rec.clone();
    let rep = lfs::fsck::fsck(Arc::clone(&dev)).unwrap();
    assert!(rep.is_clean(), "the intact image: {:?}", rep.errors);
    let by_fsck = std::mem::take(&mut *rec.read.lock().unwrap());
    let walked = use_image(dev, snap);
    assert!(walked.is_ok(), "the intact image: {walked:?}");
    let by_mount = std::mem::take(&mut *rec.read.lock().unwrap());
    (by_fsck, by_mount)
}

/// How a mounted corrupted image was used.
#[derive(Debug)]
enum Used {
    /// The mount was refused with this error.
    Refused(lfs::Error),
    /// Mounted; the walk (of the tree, then the snapshot) and a change
    /// with its sync and the unmount: the first error, if any.
    Mounted(Result<(), lfs::Error>),
}

impl Used {
    fn is_ok(&self) -> bool {
        matches!(self, Used::Mounted(Ok(())))
    }
}

/// Mounts, walks the tree and the snapshot, makes one change, syncs and
/// unmounts.
fn use_image(dev: Arc<dyn BlockDevice>, snap: u64) -> Used {
    let fs = match Fs::mount(dev, opts()) {
        Ok(fs) => fs,
        Err(e) => return Used::Refused(e),
    };
    let r = (|| {
        walk(&fs, ROOT_INO)?;
        let view = fs.open_checkpoint(snap)?;
        let w = walk(&view, ROOT_INO);
        drop(view);
        w?;
        let f = fs.create(ROOT_INO, b"after", 0o644, 0, 0, 0)?;
        fs.write(f.ino, 0, b"written after the corruption")?;
        fs.sync()
    })();
    let u = fs.unmount();
    Used::Mounted(r.and(u))
}

/// One corruption: where, what, and the bytes it leaves.
#[derive(Debug, Clone)]
struct Case {
    structure: Structure,
    block: u64,
    /// Byte offset in the block and the bytes written there.
    offset: usize,
    bytes: Vec<u8>,
    how: &'static str,
}

impl std::fmt::Display for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} block {}, {} at byte {}",
            self.structure.name(),
            self.block,
            self.how,
            self.offset
        )
    }
}

impl Case {
    /// A random corruption of a block of `s`: three times in four one the
    /// intact image's fsck reads (`live`), if there are any.
    fn random(
        rng: &mut SplitMix64,
        s: Structure,
        blocks: &[u64],
        live: &BTreeSet<u64>,
        img: &[u8],
    ) -> Option<Case> {
        let read: Vec<u64> = blocks
            .iter()
            .copied()
            .filter(|b| live.contains(b))
            .collect();
        let from = if !read.is_empty() && rng.below(4) != 0 {
            &read
        } else {
            blocks
        };
        let block = from[rng.below(from.len())];
        let at = block as usize * BS;
        let old = &img[at..at + BS];
        // Mostly inside the checksummed bytes; a superblock also past them.
        let span = if s == Structure::Superblock && rng.below(8) == 0 {
            BS
        } else {
            s.covered()
        };
        let (how, offset, bytes) = match rng.below(5) {
            0 | 1 => {
                let off = rng.below(span);
                let x = 1 + rng.below(255) as u8;
                ("byte flip", off, vec![old[off] ^ x])
            }
            2 => {
                let off = rng.below(span);
                ("bit flip", off, vec![old[off] ^ (1 << rng.below(8))])
            }
            3 => {
                let off = rng.below(span / 512) * 512;
                ("512-byte zeroing", off, vec![0; 512])
            }
            _ => ("block zeroing", 0, vec![0; BS]),
        };
        let changed = old[offset..offset + bytes.len()] != bytes[..];
        changed.then_some(Case {
            structure: s,
            block,
            offset,
            bytes,
            how,
        })
    }

    fn apply(&self, img: &[u8]) -> Vec<u8> {
        let mut out = img.to_vec();
        let at = self.block as usize * BS + self.offset;
        out[at..at + self.bytes.len()].copy_from_slice(&self.bytes);
        out
    }

    /// Whether a checksum covers a changed byte.
    fn in_coverage(&self) -> bool {
        self.offset < self.structure.covered()
    }
}

/// What fsck and the mount made of one corrupted image.
#[derive(Debug)]
struct Outcome {
    fsck: Result<lfs::fsck::FsckReport, lfs::Error>,
    used: Used,
}

/// Why a corrupted image failed the test outright.
#[derive(Debug)]
enum Failure {
    Panic(String),
    Hang,
}

/// Runs fsck and [`use_image`] on `img` in a thread under `catch_unwind`,
/// waiting at most [`WATCHDOG`].
fn examine(img: Vec<u8>, snap: u64) -> Result<Outcome, Failure> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = catch_unwind(AssertUnwindSafe(|| {
            let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::from_vec(img));
            let fsck = lfs::fsck::fsck(Arc::clone(&dev));
            let used = use_image(dev, snap);
            Outcome { fsck, used }
        }));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(WATCHDOG) {
        Ok(Ok(o)) => Ok(o),
        Ok(Err(p)) => Err(Failure::Panic(
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        )),
        Err(_) => Err(Failure::Hang),
    }
}

/// Whether an error from a corrupted image is one it may give: one naming
/// the damaged structure, or read-only.
fn acceptable(e: &lfs::Error) -> bool {
    match e {
        lfs::Error::Corrupted { .. } | lfs::Error::ReadOnly(_) => true,
        lfs::Error::Unsupported(m) => m.contains("superblock"),
        _ => false,
    }
}

#[derive(Debug, Default)]
struct Tally {
    per: BTreeMap<Structure, u64>,
    /// In checksummed bytes of blocks the intact image's fsck reads.
    live: u64,
    /// Elsewhere, and neither fsck nor the mount noticed.
    unnoticed: u64,
    refused: u64,
    panics: u64,
    hangs: u64,
    failures: Vec<String>,
}

fn cases() -> usize {
    if std::env::var_os("LFS_LONG").is_some() {
        std::env::var("LFS_CORRUPT_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20_000)
    } else {
        BOUNDED_CASES
    }
}

/// The address space this test process may use: ample for the 8 MiB
/// images and their copies, far below what trusting a damaged length or
/// count would ask for. An allocation past it aborts the test binary
/// ("memory allocation of N bytes failed"), which fails the run.
const ADDRESS_SPACE: u64 = 4 << 30;

#[test]
fn corrupted_metadata_is_refused_or_reported_never_a_panic_or_hang() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_AS).unwrap();
    setrlimit(Resource::RLIMIT_AS, ADDRESS_SPACE.min(hard), hard).unwrap();
    let (img, snap) = populated_with_journal();
    let map = blocks_of(&img);
    for s in Structure::ALL {
        assert!(
            map.get(&s).is_some_and(|b| !b.is_empty()),
            "the image has no {} block: {map:?}",
            s.name()
        );
    }
    let (by_fsck, by_mount) = blocks_read(&img, snap);
    let last_cno = lfs::fsck::fsck(Arc::new(MemDevice::from_vec(img.clone())))
        .unwrap()
        .cno;
    let mut rng = SplitMix64(0xc0a7);
    let mut t = Tally::default();
    let n = cases();
    let mut i = 0;
    while t.per.values().sum::<u64>() < n as u64 {
        let s = Structure::ALL[i % Structure::ALL.len()];
        i += 1;
        let Some(c) = Case::random(&mut rng, s, &map[&s], &by_fsck, &img) else {
            continue;
        };
        *t.per.entry(s).or_default() += 1;
        let o = match examine(c.apply(&img), snap) {
            Ok(o) => o,
            Err(e) => {
                let what = match e {
                    Failure::Panic(m) => {
                        t.panics += 1;
                        format!("panic: {m}")
                    }
                    Failure::Hang => {
                        t.hangs += 1;
                        format!("hang: no answer in {WATCHDOG:?}")
                    }
                };
                t.failures.push(format!("{c}: {what}"));
                continue;
            }
        };
        let fsck_found = match &o.fsck {
            Ok(r) => !r.is_clean(),
            Err(e) => {
                if !acceptable(e) {
                    t.failures
                        .push(format!("{c}: fsck failed with an unexpected error: {e}"));
                }
                true
            }
        };
        match &o.used {
            Used::Refused(e) => {
                t.refused += 1;
                if !acceptable(e) {
                    t.failures
                        .push(format!("{c}: mount refused with an unexpected error: {e}"));
                }
            }
            Used::Mounted(Err(e)) if !acceptable(e) => t
                .failures
                .push(format!("{c}: mounted, then an unexpected error: {e}")),
            Used::Mounted(_) => {}
        }
        let live = by_fsck.contains(&c.block) && c.in_coverage();
        if live {
            t.live += 1;
        } else if !fsck_found && o.used.is_ok() {
            t.unnoticed += 1;
        }
        if live && !fsck_found {
            t.failures.push(format!(
                "{c}: a block fsck reads (mount reads it: {}) was corrupted in checksummed \
                 bytes but fsck found nothing (it checked checkpoint {:?} of {last_cno}); \
                 mount: {:?}",
                by_mount.contains(&c.block),
                o.fsck.as_ref().map(|r| r.cno).ok(),
                o.used
            ));
        }
    }
    let per: Vec<String> = t
        .per
        .iter()
        .map(|(s, n)| format!("{} {n}", s.name()))
        .collect();
    println!(
        "corrupt images: {n} corruptions ({}), {} in live checksummed bytes all reported by \
         fsck, {} mounts refused, {} unnoticed in stale blocks or unchecksummed bytes, \
         {} panics, {} hangs",
        per.join(", "),
        t.live,
        t.refused,
        t.unnoticed,
        t.panics,
        t.hangs
    );
    assert!(
        t.failures.is_empty(),
        "{} of {n} corrupted images failed; the first ones:\n{}",
        t.failures.len(),
        t.failures
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The image with `len` bytes at byte `at` XORed with 0xff.
fn flipped(img: &[u8], at: usize, len: usize) -> Vec<u8> {
    let mut out = img.to_vec();
    for b in &mut out[at..at + len] {
        *b ^= 0xff;
    }
    out
}

/// Found by this test: with the last log damaged, recovery fell back to
/// the checkpoint before it (the older superblock copy's cursor) and
/// mounted it as if nothing were wrong, fsck clean.
#[test]
fn a_damaged_last_checkpoint_is_refused_not_silently_rolled_back() {
    let (img, _) = populated();
    let dev = MemDevice::from_vec(img.clone());
    let sb = lfs::inspect::read_superblocks(&dev)
        .unwrap()
        .current()
        .unwrap()
        .clone();
    let at = sb.last_log_block as usize * BS;
    // The log header's sequence number (byte 32): the summary fails its
    // checksum.
    let bad = flipped(&img, at + 32, 1);
    let e = Fs::mount(Arc::new(MemDevice::from_vec(bad.clone())), opts()).unwrap_err();
    let shown = e.to_string();
    assert!(
        matches!(e, lfs::Error::Corrupted { .. })
            && shown.contains(&format!(
                "checkpoint log at block {}, where the superblock names checkpoint {}",
                sb.last_log_block, sb.last_cno
            ))
            && shown.contains("log summary: checksum mismatch"),
        "{shown}"
    );
    // fsck says so, and checks the newest intact checkpoint instead, which
    // a rollback (explicit: tests/rollback.rs) could make current.
    let rep = lfs::fsck::fsck(Arc::new(MemDevice::from_vec(bad))).unwrap();
    assert!(
        rep.errors
            .iter()
            .any(|e| e.contains("the last checkpoint is damaged")),
        "{:?}",
        rep.errors
    );
    assert!(!rep.is_clean());
    assert!(
        rep.rollback_to
            .is_some_and(|k| k < sb.last_cno && k == rep.cno),
        "{rep:?}"
    );
}

#[test]
fn fsck_reports_a_damaged_superblock_copy_the_mount_does_without() {
    let (img, _) = populated();
    let secondary = DEV_LEN as usize - BS;
    for (at, copy) in [(0, "primary"), (secondary, "secondary")] {
        // The label (byte 104 on): inside the checksummed 512 bytes.
        let bad = flipped(&img, at + 104, 4);
        let rep = lfs::fsck::fsck(Arc::new(MemDevice::from_vec(bad.clone()))).unwrap();
        let want = format!("{copy} superblock: superblock: checksum mismatch");
        assert!(
            rep.errors.len() == 1 && rep.errors[0].starts_with(&want),
            "{copy}: {:?}",
            rep.errors
        );
        let fs = Fs::mount(Arc::new(MemDevice::from_vec(bad)), opts()).unwrap();
        assert!(walk(&fs, ROOT_INO).unwrap() > 400);
        fs.unmount().unwrap();
    }
    // Both copies: a damaged lfs filesystem for fsck (not a foreign one),
    // refused by the mount, which names the superblocks.
    let bad = flipped(&flipped(&img, 104, 4), secondary + 104, 4);
    let rep = lfs::fsck::fsck(Arc::new(MemDevice::from_vec(bad.clone()))).unwrap();
    assert_eq!(rep.errors.len(), 2, "{:?}", rep.errors);
    let e = Fs::mount(Arc::new(MemDevice::from_vec(bad)), opts()).unwrap_err();
    assert!(e.to_string().contains("no valid lfs superblock"), "{e}");
    // Zeros are not lfs: an error, not a report.
    assert!(lfs::fsck::fsck(Arc::new(MemDevice::new(DEV_LEN))).is_err());
}
