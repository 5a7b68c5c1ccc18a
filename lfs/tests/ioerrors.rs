//! I/O errors: the crash matrix's workload (tests/common) on a
//! FaultDevice that fails one chosen read, write or flush with EIO, for
//! every read, write and flush the workload makes (mount and unmount
//! included).
//!
//! A failed write or flush:
//! - the request it belongs to gets an I/O error (fsd replies EIO);
//! - the engine writes nothing more: later changes get ReadOnly (EROFS),
//!   a sync gets an I/O error (EIO) for what it could not make durable,
//!   and sync and unmount write nothing;
//! - it logs exactly one error line, naming the device and the block;
//! - what was durable is intact: on a healthy device (the unflushed
//!   writes lost, or all landed) fsck is clean and the tree is the last
//!   acknowledged state or the one being made durable.
//!
//! A failed read gets an I/O error and changes nothing: the filesystem
//! stays writable and consistent, and after unmount the image holds
//! exactly the tree the mount showed.
//!
//! `LFS_LONG=1` fails every read, not one in `READ_STRIDE`; each test prints
//! its figures (`--nocapture`).

mod common;

use std::sync::{Arc, Mutex, OnceLock};

use common::{first_difference, fresh_tree, image, long, opts, tree, workload, Journal, Tree};
use lfs::blockdev::{BlockDevice, FaultDevice, MemDevice};
use lfs::format::ROOT_INO;
use lfs::fs::Fs;

/// Of the workload's reads, bounded mode fails one in this many.
const READ_STRIDE: u64 = 7;

/// Error log lines of every case, each naming its case's device.
fn log_lines() -> &'static Mutex<Vec<String>> {
    static LINES: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    LINES.get_or_init(|| Mutex::new(Vec::new()))
}

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            let line = format!("{} {}", r.level(), r.args());
            log_lines().lock().unwrap().push(line);
        }
    }
    fn flush(&self) {}
}

fn capture_logs() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        log::set_logger(&Capture).unwrap();
        log::set_max_level(log::LevelFilter::Warn);
    });
}

/// The log lines that name `device`.
fn lines_of(device: &str) -> Vec<String> {
    let tag = format!("{device}:");
    let lines = log_lines().lock().unwrap();
    lines.iter().filter(|l| l.contains(&tag)).cloned().collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Read,
    Write,
    Flush,
}

/// How many reads, writes and flushes the whole run makes without a fault.
fn counts() -> (u64, u64, u64) {
    let fault = Arc::new(FaultDevice::new(MemDevice::from_vec(image())));
    let dev: Arc<dyn BlockDevice> = fault.clone();
    let fs = Fs::mount(dev, opts()).unwrap();
    let mut j = Journal {
        acked: vec![fresh_tree()],
        in_flight: None,
        in_flight_alt: None,
    };
    workload(&fs, &mut j).unwrap();
    fs.unmount().unwrap();
    (fault.reads(), fault.writes(), fault.flushes())
}

/// The two images a healthy device may show after the fault: the
/// unflushed writes lost, and all of them landed in order.
fn images_after(fault: &FaultDevice<MemDevice>) -> [(&'static str, Vec<u8>); 2] {
    let dropped = fault.durable().snapshot();
    let landed = MemDevice::from_vec(dropped.clone());
    for w in fault.pending() {
        landed.write_all_at(&w.data, w.offset).unwrap();
    }
    [
        ("unflushed writes lost", dropped),
        ("unflushed writes landed", landed.into_vec()),
    ]
}

/// fsck and mount of `image`, and its tree.
fn recover(image: Vec<u8>) -> Result<Tree, String> {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::from_vec(image));
    match lfs::fsck::fsck(dev.clone()) {
        Ok(r) if r.is_clean() => {}
        Ok(r) => return Err(format!("fsck: {:?}", r.errors)),
        Err(e) => return Err(format!("fsck: {e}")),
    }
    let fs = Fs::mount(dev, opts()).map_err(|e| format!("mount: {e}"))?;
    tree(&fs).map_err(|e| format!("reading the tree: {e}"))
}

fn is_io(e: &lfs::Error) -> bool {
    matches!(e, lfs::Error::Io { .. })
}

/// How one fault ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    /// The mount failed (with an I/O error).
    MountFailed,
    /// The engine went read-only.
    ReadOnly,
    /// A read failed and the filesystem stayed writable.
    StayedWritable,
}

/// Fails the `n`-th call of kind `kind` and checks everything the module
/// comment promises.
fn case(kind: Fault, n: u64) -> Outcome {
    let name = format!("fault-{kind:?}-{n}").to_lowercase();
    let fault = Arc::new(FaultDevice::new(MemDevice::from_vec(image())));
    match kind {
        Fault::Read => fault.fail_read_at(n),
        Fault::Write => fault.fail_write_at(n),
        Fault::Flush => fault.fail_flush_at(n),
    }
    let dev: Arc<dyn BlockDevice> = fault.clone();
    let mut j = Journal {
        acked: vec![fresh_tree()],
        in_flight: None,
        in_flight_alt: None,
    };
    let mut o = opts();
    o.device = name.clone();
    // What the image must hold after an unmount that succeeds.
    let mut expect_exact: Option<Tree> = None;
    let mut outcome = Outcome::MountFailed;
    let err = match Fs::mount(dev, o) {
        Err(e) => e,
        Ok(fs) => {
            let err = match workload(&fs, &mut j).and_then(|()| fs.unmount()) {
                Ok(()) => panic!("{name}: the fault fired but no request failed"),
                Err(e) => e,
            };
            let (writes, flushes) = (fault.writes(), fault.flushes());
            let after = fs.create(ROOT_INO, b"after-the-error", 0o644, 0, 0, 0);
            if kind == Fault::Read && after.is_ok() {
                // A read that failed outside a checkpoint: the filesystem
                // is still writable and whole, and everything it shows is
                // what an unmount keeps.
                expect_exact = Some(tree(&fs).unwrap());
                fs.unmount()
                    .unwrap_or_else(|e| panic!("{name}: unmount after a read error: {e}"));
                outcome = Outcome::StayedWritable;
            } else {
                assert!(
                    matches!(after, Err(lfs::Error::ReadOnly(_))),
                    "{name}: a change after the failed {kind:?} got {after:?}, not read-only"
                );
                outcome = Outcome::ReadOnly;
                // A sync after the failure never claims success for what
                // was not made durable: EIO, or nothing was pending.
                let synced = fs.sync();
                assert!(
                    synced.as_ref().map_or_else(is_io, |()| true),
                    "{name}: sync after the failed {kind:?} got {synced:?}"
                );
                let _ = fs.unmount();
                assert_eq!(
                    (fault.writes(), fault.flushes()),
                    (writes, flushes),
                    "{name}: the engine wrote after the failed {kind:?}"
                );
                let lines = lines_of(&name);
                assert_eq!(
                    lines.len(),
                    1,
                    "{name}: want one log line naming the device, got {lines:?}"
                );
                assert!(
                    lines[0].starts_with("ERROR")
                        && lines[0].contains(" block ")
                        && lines[0].contains("injected I/O error")
                        && lines[0].contains("going read-only")
                        && lines[0].contains("is the last one known durable"),
                    "{name}: the log line does not name the block or say read-only: {}",
                    lines[0]
                );
            }
            err
        }
    };
    assert!(
        is_io(&err),
        "{name}: the failing request got {err:?}, not an I/O error"
    );
    fault.clear_faults();
    for (how, img) in images_after(&fault) {
        let rec = recover(img).unwrap_or_else(|e| panic!("{name}, {how}: {e}"));
        match &expect_exact {
            Some(want) => assert!(
                &rec == want,
                "{name}, {how}: the image does not hold what the mount showed: {}",
                first_difference(&rec, want)
            ),
            None => assert!(
                j.allows(&rec),
                "{name}, {how}: the recovered state is neither the last acknowledged one nor the one being made durable: {}",
                first_difference(&rec, j.acked.last().unwrap())
            ),
        }
    }
    outcome
}

/// Runs `case` for each of `points` and prints the figures.
fn faults(kind: Fault, points: impl Iterator<Item = u64>, of: u64) {
    capture_logs();
    let mut seen = std::collections::BTreeMap::new();
    for p in points {
        *seen.entry(case(kind, p)).or_insert(0u64) += 1;
    }
    let n: u64 = seen.values().sum();
    let how: Vec<String> = seen
        .iter()
        .map(|(o, k)| {
            let o = match o {
                Outcome::MountFailed => "mount failed",
                Outcome::ReadOnly => "went read-only",
                Outcome::StayedWritable => "stayed writable",
            };
            format!("{o} {k}")
        })
        .collect();
    // Two healthy images checked per fault.
    println!(
        "io errors, {kind:?}: {n} faults injected of {of} calls ({}), {} images recovered, 0 lost",
        how.join(", "),
        2 * n
    );
}

#[test]
fn a_failed_write_stops_writing_and_loses_nothing_durable() {
    let (_, writes, _) = counts();
    assert!(writes > 20, "only {writes} writes");
    faults(Fault::Write, 1..=writes, writes);
}

#[test]
fn a_failed_flush_stops_writing_and_loses_nothing_durable() {
    let (_, _, flushes) = counts();
    assert!(flushes > 10, "only {flushes} flushes");
    faults(Fault::Flush, 1..=flushes, flushes);
}

#[test]
fn a_failed_read_fails_its_request_and_changes_nothing() {
    let (reads, _, _) = counts();
    assert!(reads > 20, "only {reads} reads");
    let stride = if long() { 1 } else { READ_STRIDE };
    faults(Fault::Read, (1..=reads).step_by(stride as usize), reads);
}

#[test]
fn a_failed_background_checkpoint_fails_the_next_fsync_with_eio() {
    capture_logs();
    let name = "fault-background";
    let fault = Arc::new(FaultDevice::new(MemDevice::from_vec(image())));
    let dev: Arc<dyn BlockDevice> = fault.clone();
    let mut o = opts();
    o.device = name.into();
    o.checkpoint_interval = std::time::Duration::from_millis(20);
    let fs = Fs::mount(dev, o).unwrap();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    fs.write(f.ino, 0, b"durable").unwrap();
    fs.fsync(f.ino, false).unwrap();
    let durable = tree(&fs).unwrap();
    // The timer's next checkpoint is the one that fails.
    fault.fail_write_at(fault.writes() + 1);
    fs.write(f.ino, 0, b"never durable").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while lines_of(name).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the background checkpoint did not fail"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let r = fs.fsync(f.ino, false);
    assert!(
        r.as_ref().is_err_and(is_io),
        "fsync after a failed background checkpoint: {r:?}"
    );
    assert!(matches!(
        fs.write(f.ino, 0, b"x"),
        Err(lfs::Error::ReadOnly(_))
    ));
    let _ = fs.unmount();
    fault.clear_faults();
    for (how, img) in images_after(&fault) {
        let rec = recover(img).unwrap_or_else(|e| panic!("{how}: {e}"));
        assert!(
            rec == durable,
            "{how}: {}",
            first_difference(&rec, &durable)
        );
    }
}
