//! The operation-sequence crash target, `ops_crash` (docs/FUZZING.md):
//! the input is a [`Plan`], a filesystem geometry, a crash mode, a crash
//! countdown and a sequence of engine operations. [`ops_crash`] formats
//! a small image (8 MiB, 16 to 64 blocks a segment), mounts it over a
//! [`FaultDevice`] armed to crash at the countdown's device write, runs
//! the operations until the crash (or crashes after the last one),
//! then checks the crash image the crash mode left (unflushed writes
//! dropped, kept, kept up to a prefix, the last one torn, or a random
//! subset torn and reordered):
//!
//! 1. `lfs::fsck::fsck` reports nothing;
//! 2. it mounts, and its tree is the last state a sync, fsync, fdatasync,
//!    checkpoint, snapshot change, freeze or unmount acknowledged (or a
//!    cleaning pass or deletion of checkpoints that wrote a checkpoint:
//!    those write one only when they free something), or the one such an
//!    operation in flight (or failed) was making durable: the rule of the
//!    crash matrix, [`Journal::allows`];
//! 3. the recovered filesystem takes a change, unmounts, passes fsck
//!    again and mounts with exactly that change.
//!
//! Along the way every operation's error must be one a caller may get
//! (no I/O error, corruption or read-only filesystem before the crash),
//! and a snapshot opened read-only must show exactly the tree it was made
//! from. Any other outcome is a bug, and the `panic!`s here are the only
//! way the target fails on purpose.
//!
//! redb's `fuzz_redb.rs` is the model (a countdown to a simulated crash,
//! then a comparison with what was durable). Unlike it, the input is
//! decoded by hand ([`Plan::decode`]): every byte string is a plan (a
//! byte missing from a short input reads as zero), and
//! [`Plan::encode`] lets `fuzz/examples/gen_corpus.rs` write seeds that
//! mean something.
//!
//! The engine must make checkpoints only when asked, or an unjournaled
//! state could become durable: no timer (an hour's interval), a dirty
//! limit no run reaches, and budgets ([`WRITE_BUDGET`],
//! [`APPARENT_BUDGET`]) that keep the filesystem far from full (a write
//! out of space soon after a cleaning pass waits for checkpoints), which
//! `lfs/tests/ops_crash.rs` checks with the costliest plan.
//!
//! The plan's format is [`super::plan`]. This file depends only on
//! `lfs`, std, [`super::plan`] and [`super::durable`], so that the fuzz
//! crate compiles all three unchanged (`#[path]` in
//! `fuzz/fuzz_targets/ops_crash.rs`).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, UNIX_EPOCH};

use lfs::blockdev::{BlockDevice, FaultDevice, MemDevice};
use lfs::format::{FileType, ROOT_INO, SU_FLAG_ACTIVE};
use lfs::fs::{
    file_type_of_mode, Attr, Fs, MountOptions, RenameFlags, SetAttr, TimeSet, FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE, XATTR_CREATE, XATTR_REPLACE,
};
use lfs::mkfs::{format, MkfsOptions};
use lfs::Error;

use super::durable::{first_difference, tree, Journal, Tree};
use super::plan::{At, Op, Plan, GEOMETRIES, MAX_FILE};

/// Bytes of every image.
pub const DEV_LEN: u64 = 8 << 20;
/// Most bytes written in one run (writes beyond it are skipped).
pub const WRITE_BUDGET: u64 = 1 << 20;
/// Most bytes of file sizes in one run, counting each inode at the
/// largest size it had (so that reading the tree at every sync stays
/// cheap; sizes grow without writes through truncate).
pub const APPARENT_BUDGET: u64 = 4 << 20;
/// Most files held open at once.
pub const MAX_HANDLES: usize = 8;

/// Extended attribute names.
const XNAMES: [&[u8]; 4] = [
    b"user.a",
    b"user.b",
    b"user.a-much-longer-attribute-name",
    b"trusted.t",
];
/// Permission bits, set-ID bits included.
const PERMS: [u32; 7] = [0o644, 0o755, 0o600, 0o2755, 0o4755, 0o1777, 0o000];
/// Owners.
const IDS: [u32; 3] = [0, 1000, 4242];
const S_IFREG: u32 = 0o100000;
const S_IFIFO: u32 = 0o010000;

/// Mount options under which only the plan's operations make
/// checkpoints (see the module doc).
pub fn mount_options() -> MountOptions {
    MountOptions {
        checkpoint_interval: Duration::from_secs(3600),
        dirty_limit_bytes: 1 << 40,
        ..MountOptions::default()
    }
}

/// The freshly formatted image of geometry `g` (an index into
/// [`GEOMETRIES`]), made once per process.
pub fn image(g: usize) -> &'static [u8] {
    static IMAGES: [OnceLock<Vec<u8>>; GEOMETRIES.len()] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    IMAGES[g].get_or_init(|| {
        let (block_size, blocks_per_segment) = GEOMETRIES[g];
        let dev = MemDevice::new(DEV_LEN);
        let mut o = MkfsOptions::new([7; 16], 0x0f5e_ed00 + g as u32, 1_700_000_000, 0);
        o.block_size = block_size;
        o.blocks_per_segment = blocks_per_segment;
        o.discard = false;
        format(&dev, &o).unwrap_or_else(|e| panic!("formatting geometry {g}: {e}"));
        dev.into_vec()
    })
}

/// The tree of the fresh image of geometry `g`, the state acknowledged
/// before the first operation; read once per process.
fn fresh_tree(g: usize) -> &'static Tree {
    static TREES: [OnceLock<Tree>; GEOMETRIES.len()] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    TREES[g].get_or_init(|| {
        let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::from_vec(image(g).to_vec()));
        let fs = Fs::mount(dev, mount_options()).expect("the fresh image mounts");
        let t = tree(&fs).expect("reading the fresh tree");
        fs.unmount().expect("unmounting the fresh image");
        t
    })
}

/// `len` bytes that depend on `seed` and on each byte's file offset, so
/// that overlapping writes stay distinguishable.
pub fn pattern(seed: u8, offset: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| seed.wrapping_mul(31) ^ ((offset + i) % 251) as u8)
        .collect()
}

/// Errors that mean a bug when the device has not crashed: the engine
/// never returns them for a well-formed call on a healthy device.
fn is_failure(e: &Error) -> bool {
    matches!(
        e,
        Error::Io { .. } | Error::Corrupted { .. } | Error::ReadOnly(_) | Error::Unsupported(_)
    )
}

/// One run's state.
struct Run {
    fault: Arc<FaultDevice<MemDevice>>,
    fs: Arc<Fs>,
    j: Journal,
    /// Inodes of open files.
    handles: Vec<u64>,
    /// Snapshots still held, with the tree each was made from.
    snapshots: Vec<(u64, Tree)>,
    /// Bytes written so far.
    written: u64,
    /// The largest size each inode had.
    sizes: BTreeMap<u64, u64>,
    /// The last error an operation was refused with, for the trace.
    refused: Cell<Option<String>>,
}

/// Why a run stopped early.
enum Stop {
    /// The simulated crash happened.
    Crashed,
}

impl Run {
    /// `Err(Stop)` if the device crashed; panics on an error no caller
    /// may get from a healthy device; otherwise the result.
    fn check<T>(&self, what: &str, r: lfs::Result<T>) -> Result<Option<T>, Stop> {
        match r {
            Ok(v) => Ok(Some(v)),
            Err(_) if self.fault.is_crashed() => Err(Stop::Crashed),
            Err(e) if is_failure(&e) => panic!("{what}: {e} on a healthy device"),
            Err(e) => {
                self.refused.set(Some(format!("{what}: {e}")));
                Ok(None)
            }
        }
    }

    /// The inode of directory `at.dir`, if every component exists and is
    /// a directory.
    fn dir(&self, at: At) -> Option<u64> {
        let mut ino = ROOT_INO;
        for c in at.dir_path() {
            let a = self.fs.lookup(ino, c).ok()?;
            if file_type_of_mode(a.mode) != Some(FileType::Directory) {
                return None;
            }
            ino = a.ino;
        }
        Some(ino)
    }

    fn lookup(&self, at: At) -> Option<Attr> {
        self.fs.lookup(self.dir(at)?, &at.name()).ok()
    }

    fn regular(&self, at: At) -> Option<Attr> {
        self.lookup(at)
            .filter(|a| file_type_of_mode(a.mode) == Some(FileType::Regular))
    }

    /// Whether a change that makes `ino` `size` bytes long fits the
    /// budgets, counting it if it does.
    fn grow(&mut self, ino: u64, size: u64) -> bool {
        let old = self.sizes.get(&ino).copied().unwrap_or(0);
        let total: u64 = self.sizes.values().sum();
        if size <= old {
            return true;
        }
        if total - old + size > APPARENT_BUDGET {
            return false;
        }
        self.sizes.insert(ino, size);
        true
    }

    fn write(&mut self, ino: u64, offset: u32, len: u16, seed: u8) -> Result<(), Stop> {
        let offset = u64::from(offset) % MAX_FILE;
        let len = u64::from(len).min(MAX_FILE - offset);
        if self.written + len > WRITE_BUDGET || !self.grow(ino, offset + len) {
            return Ok(());
        }
        self.written += len;
        let data = pattern(seed, offset, len as usize);
        self.check("write", self.fs.write(ino, offset, &data))?;
        Ok(())
    }

    /// Runs `op`, which makes the tree durable, through the journal.
    fn durable<T>(
        &mut self,
        what: &str,
        op: impl FnOnce(&Fs) -> lfs::Result<T>,
    ) -> Result<Option<T>, Stop> {
        self.journaled(what, op, false)
    }

    /// Runs `op`, which makes the tree durable if it writes a checkpoint
    /// (the last checkpoint's number moves), through the journal.
    fn maybe_durable<T>(
        &mut self,
        what: &str,
        op: impl FnOnce(&Fs) -> lfs::Result<T>,
    ) -> Result<Option<T>, Stop> {
        self.journaled(what, op, true)
    }

    fn journaled<T>(
        &mut self,
        what: &str,
        op: impl FnOnce(&Fs) -> lfs::Result<T>,
        conditional: bool,
    ) -> Result<Option<T>, Stop> {
        let fs = self.fs.clone();
        let (before, _, _) = fs.cpstat();
        let wrote = || !conditional || fs.cpstat().0 != before;
        let r = self.j.maybe_durable(&fs, || op(&fs), wrote);
        // Only the last acknowledged state can be recovered.
        let keep = self.j.acked.len().saturating_sub(1);
        self.j.acked.drain(..keep);
        self.check(what, r)
    }

    fn apply(&mut self, op: Op) -> Result<(), Stop> {
        let fs = self.fs.clone();
        match op {
            Op::Create { at, perm } => {
                if let Some(dir) = self.dir(at) {
                    let mode = match PERMS.get(usize::from(perm % 8)) {
                        Some(p) => S_IFREG | p,
                        None => S_IFIFO | 0o640,
                    };
                    self.check("create", fs.create(dir, &at.name(), mode, 0, 0, 0))?;
                }
            }
            Op::Mkdir { at } => {
                if let Some(dir) = self.dir(at) {
                    self.check("mkdir", fs.mkdir(dir, &at.name(), 0o755, 0, 0))?;
                }
            }
            Op::Symlink { at, target } => {
                if let Some(dir) = self.dir(at) {
                    let target = match target % 4 {
                        0 => b"a".to_vec(),
                        1 => b"../b/c".to_vec(),
                        2 => vec![b't'; 200],
                        _ => vec![b'u'; 1000],
                    };
                    self.check("symlink", fs.symlink(dir, &at.name(), &target, 0, 0))?;
                }
            }
            Op::Write {
                at,
                offset,
                len,
                seed,
            } => {
                if let Some(a) = self.regular(at) {
                    self.write(a.ino, offset, len, seed)?;
                }
            }
            Op::Truncate { at, size } => {
                if let Some(a) = self.regular(at) {
                    let size = u64::from(size) % (MAX_FILE + 1);
                    if self.grow(a.ino, size) {
                        let set = SetAttr {
                            size: Some(size),
                            ..SetAttr::default()
                        };
                        self.check("truncate", fs.setattr(a.ino, &set))?;
                    }
                }
            }
            Op::Punch { at, offset, len } => {
                if let Some(a) = self.regular(at) {
                    let offset = u64::from(offset) % MAX_FILE;
                    let len = u64::from(len) % (MAX_FILE - offset) + 1;
                    let mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
                    self.check("punch", fs.fallocate(a.ino, offset, len, mode))?;
                }
            }
            Op::Rename { from, to, flags } => {
                if let (Some(d1), Some(d2)) = (self.dir(from), self.dir(to)) {
                    let flags = RenameFlags {
                        noreplace: flags % 3 == 1,
                        exchange: flags % 3 == 2,
                    };
                    let r = fs.rename(d1, &from.name(), d2, &to.name(), flags);
                    self.check("rename", r)?;
                }
            }
            Op::Unlink { at } => {
                if let Some(dir) = self.dir(at) {
                    self.check("unlink", fs.unlink(dir, &at.name()))?;
                }
            }
            Op::Rmdir { at } => {
                if let Some(dir) = self.dir(at) {
                    self.check("rmdir", fs.rmdir(dir, &at.name()))?;
                }
            }
            Op::Link { from, to } => {
                // The kernel refuses hard links to directories itself.
                let src = self
                    .lookup(from)
                    .filter(|a| file_type_of_mode(a.mode) != Some(FileType::Directory));
                if let (Some(a), Some(dir)) = (src, self.dir(to)) {
                    self.check("link", fs.link(a.ino, dir, &to.name()))?;
                }
            }
            Op::SetXattr {
                at,
                name,
                len,
                flags,
            } => {
                if let Some(a) = self.lookup(at) {
                    let value = pattern(name, u64::from(len), usize::from(len) * 8);
                    let flags = [0, XATTR_CREATE, XATTR_REPLACE][usize::from(flags % 3)];
                    let xname = XNAMES[usize::from(name) % XNAMES.len()];
                    self.check("setxattr", fs.setxattr(a.ino, xname, &value, flags))?;
                }
            }
            Op::RemoveXattr { at, name } => {
                if let Some(a) = self.lookup(at) {
                    let xname = XNAMES[usize::from(name) % XNAMES.len()];
                    self.check("removexattr", fs.removexattr(a.ino, xname))?;
                }
            }
            Op::SetAttr { at, what, value } => {
                if let Some(a) = self.lookup(at) {
                    let v = usize::from(value);
                    let set = match what % 4 {
                        0 => SetAttr {
                            mode: Some(PERMS[v % PERMS.len()]),
                            ..SetAttr::default()
                        },
                        1 => SetAttr {
                            uid: Some(IDS[v % IDS.len()]),
                            gid: Some(IDS[(v / IDS.len()) % IDS.len()]),
                            ..SetAttr::default()
                        },
                        2 => SetAttr {
                            mtime: Some(TimeSet::At(
                                UNIX_EPOCH + Duration::new(v as u64 * 1_000_003, v as u32 * 7),
                            )),
                            ..SetAttr::default()
                        },
                        _ => SetAttr {
                            mtime: Some(TimeSet::Now),
                            ..SetAttr::default()
                        },
                    };
                    self.check("setattr", fs.setattr(a.ino, &set))?;
                }
            }
            Op::Open { at } => {
                if let Some(a) = self.regular(at) {
                    if self.handles.len() < MAX_HANDLES
                        && self.check("open", fs.open(a.ino))?.is_some()
                    {
                        self.handles.push(a.ino);
                    }
                }
            }
            Op::WriteOpen {
                handle,
                offset,
                len,
                seed,
            } => {
                if !self.handles.is_empty() {
                    let ino = self.handles[usize::from(handle) % self.handles.len()];
                    self.write(ino, offset, len, seed)?;
                }
            }
            Op::Close { handle } => {
                if !self.handles.is_empty() {
                    let ino = self
                        .handles
                        .remove(usize::from(handle) % self.handles.len());
                    self.check("release", fs.release(ino))?;
                }
            }
            Op::Fsync {
                at,
                datasync: false,
            } => {
                let ino = self.lookup(at).map_or(ROOT_INO, |a| a.ino);
                self.durable("fsync", |fs| fs.fsync(ino, false))?;
            }
            Op::Fsync { at, datasync: true } => {
                // A data-sync log makes this file durable alone, a
                // checkpoint everything; the counters say which.
                let ino = self.lookup(at).map_or(ROOT_INO, |a| a.ino);
                let before = (super::durable::data_sync_writes(&fs), fs.cpstat().0);
                let r = self.j.datasync(
                    &fs,
                    ino,
                    || fs.fsync(ino, true),
                    || super::durable::data_sync_writes(&fs) != before.0,
                    || fs.cpstat().0 != before.1,
                );
                let keep = self.j.acked.len().saturating_sub(1);
                self.j.acked.drain(..keep);
                self.check("fdatasync", r)?;
            }
            Op::Sync => {
                self.durable("sync", Fs::sync)?;
            }
            Op::MakeCheckpoint { snapshot } => {
                let cno = self.durable("mkcp", |fs| fs.make_checkpoint(snapshot))?;
                if let (Some(cno), true) = (cno, snapshot) {
                    let made_from = self.j.acked.last().expect("acknowledged").clone();
                    self.snapshots.push((cno, made_from));
                }
            }
            Op::Unsnapshot => {
                if let Some(&(cno, _)) = self.snapshots.last() {
                    if self
                        .durable("chcp", |fs| fs.change_cpmode(cno, false))?
                        .is_some()
                    {
                        self.snapshots.pop();
                    }
                }
            }
            Op::DeleteCheckpoints => {
                let rmcp = |fs: &Fs| fs.delete_checkpoints_older_than(Duration::ZERO);
                self.maybe_durable("rmcp", rmcp)?;
            }
            Op::Clean { segments } => {
                let (usage, _) = fs.segment_usage();
                let mut victims: Vec<(u32, u64)> = usage
                    .iter()
                    .enumerate()
                    .filter(|(_, u)| !u.is_clean() && u.flags & SU_FLAG_ACTIVE == 0)
                    .map(|(s, u)| (u.nlive, s as u64))
                    .collect();
                victims.sort_unstable();
                let victims: Vec<u64> = victims
                    .into_iter()
                    .take(1 + usize::from(segments % 3))
                    .map(|(_, s)| s)
                    .collect();
                let place = lfs::fs::clean::Placement {
                    warm: victims
                        .iter()
                        .copied()
                        .take(usize::from(segments / 3 % 2))
                        .collect(),
                    separate_writes: segments / 6 % 2 == 1,
                    warm_young: segments / 12 % 2 == 1,
                    strict_protection: false,
                };
                let clean = |fs: &Fs| fs.clean_segments_placed(&victims, &place, Duration::ZERO);
                self.maybe_durable("clean", clean)?;
            }
            Op::Freeze => {
                if self.durable("freeze", Fs::freeze)?.is_some() {
                    self.check("thaw", fs.thaw())?;
                }
            }
            Op::Remount => {
                // The kernel closes every file before the unmount.
                for ino in std::mem::take(&mut self.handles) {
                    self.check("release", fs.release(ino))?;
                }
                if self.durable("unmount", Fs::unmount)?.is_none() {
                    panic!("unmount failed on a healthy device");
                }
                let dev: Arc<dyn BlockDevice> = self.fault.clone();
                match Fs::mount(dev, mount_options()) {
                    Ok(fs) => self.fs = fs,
                    Err(_) if self.fault.is_crashed() => return Err(Stop::Crashed),
                    Err(e) => panic!("mounting after a clean unmount: {e}"),
                }
            }
            Op::CheckSnapshot { which } => {
                if !self.snapshots.is_empty() {
                    let (cno, made_from) =
                        &self.snapshots[usize::from(which) % self.snapshots.len()];
                    let view = self.check("opening a snapshot", fs.open_checkpoint(*cno))?;
                    let view = view.unwrap_or_else(|| panic!("snapshot {cno} does not open"));
                    let seen = self.check("reading a snapshot", tree(&view))?;
                    let seen = seen.expect("reading a tree fails only on failures");
                    assert!(
                        &seen == made_from,
                        "snapshot {cno} differs from the tree it was made from: {}",
                        first_difference(&seen, made_from)
                    );
                }
            }
        }
        Ok(())
    }
}

/// Runs the plan the input decodes to and checks what a crash left (see
/// the module doc). Panics on a violation, and only then.
pub fn ops_crash(data: &[u8]) {
    run_plan(&Plan::decode(data));
}

/// [`ops_crash`] on a decoded plan.
pub fn run_plan(plan: &Plan) {
    let (image, j) = crash(plan);
    check_recovery(plan, image, &j);
}

/// Runs `plan` to its crash (or crashes it after its last operation) and
/// returns the crash image and the journal of what was durable.
pub fn crash(plan: &Plan) -> (Vec<u8>, Journal) {
    let (fault, j, fs) = execute(plan);
    if !fault.is_crashed() {
        fault.crash_now().expect("crashing the device");
    }
    if let Some(fs) = fs {
        // Only an unmount joins the checkpoint thread; a dropped
        // filesystem's thread exits on its own, and one still exiting
        // when the run ends looks like a leak to LeakSanitizer. On the
        // crashed device the unmount writes nothing and fails.
        let _ = fs.unmount();
    }
    // Nothing else holds the device now (the filesystem is dropped), so
    // the crash image is taken, not copied: 8 MiB a run.
    let image = match Arc::try_unwrap(fault) {
        Ok(fault) => fault.into_inner().into_vec(),
        Err(fault) => fault.durable().snapshot(),
    };
    (image, j)
}

/// Runs `plan` without crashing it (whatever its countdown says) and
/// returns the blocks available to ordinary writes and all blocks, for
/// checking the budgets.
pub fn free_after(plan: &Plan) -> (u64, u64) {
    let plan = Plan {
        crash_at: 0,
        ..plan.clone()
    };
    let (_, _, fs) = execute(&plan);
    let st = fs.expect("mounted").statfs().expect("statfs");
    (st.bavail, st.blocks)
}

/// The device writes `plan` makes when it does not crash (the mount's
/// included): the range of useful crash countdowns.
pub fn device_writes(plan: &Plan) -> u64 {
    let plan = Plan {
        crash_at: 0,
        ..plan.clone()
    };
    let (fault, _, _) = execute(&plan);
    fault.writes()
}

/// Mounts the image over a fault device armed as `plan` says and runs
/// the operations until the crash or the last one. Returns the device,
/// the journal of durable states and the filesystem unless the crash
/// hit its mount.
fn execute(plan: &Plan) -> (Arc<FaultDevice<MemDevice>>, Journal, Option<Arc<Fs>>) {
    let g = usize::from(plan.geometry) % GEOMETRIES.len();
    let image = image(g);
    let fault = Arc::new(FaultDevice::new(MemDevice::from_vec(image.to_vec())));
    fault.set_crash_mode(plan.mode);
    if plan.crash_at > 0 {
        fault.crash_at_write(u64::from(plan.crash_at));
    }
    let j = Journal {
        acked: vec![fresh_tree(g).clone()],
        in_flight: None,
        in_flight_alt: None,
    };
    let dev: Arc<dyn BlockDevice> = fault.clone();
    let fs = match Fs::mount(dev, mount_options()) {
        Ok(fs) => fs,
        Err(e) => {
            assert!(fault.is_crashed(), "mounting the fresh image: {e}");
            return (fault, j, None);
        }
    };
    let mut run = Run {
        fault: fault.clone(),
        fs,
        j,
        handles: Vec::new(),
        snapshots: Vec::new(),
        written: 0,
        sizes: BTreeMap::new(),
        refused: Cell::new(None),
    };
    // LFS_OPS_TRACE=1 prints each operation and the device's write
    // count after it, to see what a reproduced input did.
    let trace = std::env::var_os("LFS_OPS_TRACE").is_some_and(|v| v != "0");
    if trace {
        eprintln!("ops_crash: {plan:?}");
    }
    for (i, op) in plan.ops.iter().enumerate() {
        let r = run.apply(*op);
        if trace {
            let outcome = match (&r, run.refused.take()) {
                (Err(Stop::Crashed), _) => "crashed".to_string(),
                (Ok(()), Some(e)) => format!("refused ({e})"),
                (Ok(()), None) => "done".to_string(),
            };
            eprintln!("op {i}: {op:?}: {outcome}, {} writes", fault.writes());
        }
        if r.is_err() {
            break;
        }
        assert!(
            !fault.is_crashed(),
            "op {i} ({op:?}) returned no error though the device crashed"
        );
    }
    (fault, run.j, Some(run.fs))
}

/// Steps 1 to 3 of the module doc on the crash image; panics on a
/// violation.
pub fn check_recovery(plan: &Plan, image: Vec<u8>, j: &Journal) {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::from_vec(image));
    let fsck = |dev: &Arc<dyn BlockDevice>, when: &str| match lfs::fsck::fsck(dev.clone()) {
        Ok(r) if r.is_clean() => {}
        Ok(r) => panic!("fsck {when} ({plan:?}): {:?}", r.errors),
        Err(e) => panic!("fsck {when} ({plan:?}): {e}"),
    };
    fsck(&dev, "after the crash");
    let fs = Fs::mount(dev.clone(), mount_options())
        .unwrap_or_else(|e| panic!("mounting the crash image: {e}"));
    let recovered = tree(&fs).unwrap_or_else(|e| panic!("reading the recovered tree: {e}"));
    let last = j.acked.last().expect("the fresh tree is acknowledged");
    assert!(
        j.allows(&recovered),
        "the recovered tree is neither the last acknowledged state nor the one being made durable: {}",
        first_difference(&recovered, last)
    );
    // The recovered filesystem goes on working: a change, an unmount,
    // and it is all there.
    let f = fs
        .create(ROOT_INO, b"after-recovery", S_IFREG | 0o644, 0, 0, 0)
        .unwrap_or_else(|e| panic!("creating a file after recovery: {e}"));
    fs.write(f.ino, 0, &pattern(0xaf, 0, 5000))
        .unwrap_or_else(|e| panic!("writing after recovery: {e}"));
    let want = tree(&fs).expect("reading the tree after recovery");
    fs.unmount()
        .unwrap_or_else(|e| panic!("unmounting after recovery: {e}"));
    drop(fs);
    fsck(&dev, "after the change that followed recovery");
    let fs =
        Fs::mount(dev, mount_options()).unwrap_or_else(|e| panic!("mounting after recovery: {e}"));
    let got = tree(&fs).expect("reading the tree");
    assert!(
        got == want,
        "the change made after recovery was not kept: {}",
        first_difference(&got, &want)
    );
    fs.unmount()
        .unwrap_or_else(|e| panic!("unmounting the remounted image: {e}"));
}
