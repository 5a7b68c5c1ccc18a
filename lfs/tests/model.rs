//! Model-based test of the engine: random operation sequences applied to
//! the engine (on a `FaultDevice` over a `MemDevice`) and to a simple
//! in-memory reference model, compared after every step.
//!
//! The model is an inode table (so hard links are modelled exactly): each
//! node is a regular file (bytes, and the set of allocated blocks), a
//! directory (name → node) or a symlink (target), with permission bits,
//! owner, group, link count and extended attributes. Its rules are those of
//! Linux (rename(2), link(2), unlink(2), rmdir(2), fallocate(2), setxattr(2)).
//! Where POSIX lets several errors apply to one call and the Linux VFS
//! settles the order before a FUSE filesystem is ever asked (see
//! `do_renameat2` and `do_linkat`), the model accepts any of them; every
//! such case is marked "POSIX allows either" below. Everything else must
//! match exactly.
//!
//! Paths are resolved the way the kernel does before it calls a FUSE
//! filesystem: component by component with `lookup` (symlinks are not
//! followed; a symlink in the middle of a path is "not a directory"), and
//! the parent of the last component must be a directory. The model
//! resolves them the same way, so resolution errors are compared too.
//!
//! After every step the whole tree is compared: names, kinds, inode
//! identity of hard links, modes, owners, link counts, sizes, every byte of
//! every file, symlink targets, extended attributes and `st_blocks` (which
//! must cover the allocated data blocks, and no more than those plus the
//! indirect blocks they need, and must not change when nothing changed).
//! Remounts compare the tree after mount; crashes (on `FaultDevice` with
//! `CrashMode::Random`) compare the recovered tree with the model as of the
//! last acknowledged sync.
//!
//! Drivers: a proptest over short sequences on 16 to 24 MiB devices, where
//! NoSpace is rare, and one long fixed sequence (splitmix64, periodic
//! remounts); then the same on a 3 MiB device that the mix fills, where
//! NoSpace is common and must leave no trace and never come from a sync.
//! All decode the same raw words into operations (`decode`), so they
//! share one distribution. For a soak, `PROPTEST_CASES=n` sets the cases
//! and `LFS_MODEL_SEEDS=n` runs n fixed sequences each.
//!
//! After the drivers: minimal reproductions of what the model found.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use lfs::blockdev::{BlockDevice, CrashMode, FaultDevice, MemDevice};
use lfs::format::{FileType, BMAP_DIRECT, META_HEADER_SIZE, NODE_PTR_SIZE, ROOT_INO};
use lfs::fs::{
    Fs, MountOptions, RenameFlags, SetAttr, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE,
    XATTR_CREATE, XATTR_REPLACE,
};
use lfs::mkfs::{format, MkfsOptions};
use lfs::Error;
use proptest::prelude::*;

/// Block size the tests format with (the default).
const BS: u64 = 4096;
/// No file grows beyond this. Far enough for the double indirect tree
/// (from block 12 + 510 = 2088 KiB on), while the far blocks stay sparse
/// so that live data stays small (there is no cleaner yet: only wholly
/// dead segments are reused).
const MAX_FILE: u64 = 3 << 20;
/// The large write of the operation mix.
const BIG_WRITE: u32 = 200 << 10;
/// Depth below which new names are made (renames may go deeper).
const MAX_DEPTH: usize = 4;
/// Entries the walk takes from each readdir before resuming at the last
/// one's cookie.
const READDIR_TAKE: usize = 5;
/// Deepest tree the engine walk accepts before suspecting a cycle.
const WALK_LIMIT: usize = 64;
/// Names paths are made of; few, so that operations collide.
const NAMES: [&[u8]; 4] = [b"a", b"b", b"c", b"d"];
/// Long names, so that directories grow past one block.
const LONG_NAMES: u8 = 96;
/// Extended attribute names.
const XNAMES: [&[u8]; 4] = [
    b"user.a",
    b"user.b",
    b"user.a-much-longer-name",
    b"trusted.t",
];
/// Permission bits operations choose from (set-ID bits included).
const PERMS: [u32; 6] = [0o644, 0o755, 0o600, 0o2755, 0o4755, 0o2775];
/// Owners operations choose from.
const IDS: [u32; 3] = [0, 1000, 4242];

const S_IFMT: u32 = 0o170000;
const S_IFREG: u32 = 0o100000;
const S_IFDIR: u32 = 0o040000;
const S_IFLNK: u32 = 0o120000;
const S_ISUID: u32 = 0o4000;
const S_ISGID: u32 = 0o2000;
const S_IXGRP: u32 = 0o0010;

/// Only syncs and unmounts make checkpoints (no timer, and a dirty limit
/// no run comes near, so no background checkpoint either), so what a crash
/// keeps is exactly the state of the last acknowledged sync.
/// The test chooses where checkpoints fall: no timer, no dirty limit and
/// no space thread. A change that finds no space still makes room itself,
/// with a checkpoint of the state before it ([`Harness::step`] notices).
fn mount_opts() -> MountOptions {
    MountOptions {
        checkpoint_interval: Duration::from_secs(3600),
        dirty_limit_bytes: 1 << 40,
        background_space: false,
        ..MountOptions::default()
    }
}

// ---------------------------------------------------------------------------
// Errors

/// An engine error, reduced to what the model predicts.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ek {
    NotFound,
    Exists,
    NotDir,
    IsDir,
    NotEmpty,
    Inval,
    NoSpace,
    NoData,
    NotPermitted,
    TooBig,
    NameTooLong,
    /// Anything else (I/O, corruption, read-only...): never expected.
    Other(String),
}

fn ek(e: Error) -> Ek {
    match e {
        Error::NotFound => Ek::NotFound,
        Error::Exists => Ek::Exists,
        Error::NotDir => Ek::NotDir,
        Error::IsDir => Ek::IsDir,
        Error::NotEmpty => Ek::NotEmpty,
        Error::InvalidArgument(_) => Ek::Inval,
        Error::NoSpace => Ek::NoSpace,
        Error::NoData => Ek::NoData,
        Error::NotPermitted => Ek::NotPermitted,
        Error::TooBig => Ek::TooBig,
        Error::NameTooLong => Ek::NameTooLong,
        other => Ek::Other(other.to_string()),
    }
}

/// What the model predicts on failure: the acceptable errors, Linux's
/// first.
type MErr = Vec<Ek>;

fn one(e: Ek) -> MErr {
    vec![e]
}

/// The value an operation returns.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Out {
    Unit,
    Count(u32),
    Data(Vec<u8>),
    Names(Vec<Vec<u8>>),
    /// The model decided not to run this operation (a data operation on a
    /// symlink, which the kernel would follow).
    Skipped,
}

// ---------------------------------------------------------------------------
// Operations

/// How an operation picks its path; indices are taken modulo the number of
/// candidates in the model when the operation runs.
#[derive(Debug, Clone)]
enum Sel {
    /// A regular file.
    File(u32),
    /// A directory other than the root.
    Dir(u32),
    /// Any entry other than the root.
    Any(u32),
    /// An entry with extended attributes.
    Xattr(u32),
    /// An empty directory.
    EmptyDir(u32),
    /// A name (`name`) in a directory (the root included); it may exist.
    InDir(u32, u8),
    /// A path of names from `NAMES`.
    Raw(Vec<u8>),
}

/// A file offset: absolute, or relative to the file's size in the model.
#[derive(Debug, Clone, Copy)]
enum Off {
    Abs(u64),
    Eof(i64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RenameMode {
    Plain,
    NoReplace,
    Exchange,
}

#[derive(Debug, Clone)]
enum Op {
    /// Nothing; what shrinking turns irrelevant operations into.
    Nop,
    Create {
        at: Sel,
        perm: u32,
        uid: u32,
        gid: u32,
    },
    Mkdir {
        at: Sel,
        perm: u32,
        uid: u32,
        gid: u32,
    },
    Symlink {
        at: Sel,
        target_len: u16,
        seed: u8,
    },
    Write {
        at: Sel,
        off: Off,
        len: u32,
        seed: u8,
    },
    Read {
        at: Sel,
        off: Off,
        len: u32,
    },
    Truncate {
        at: Sel,
        size: Off,
    },
    Punch {
        at: Sel,
        off: Off,
        len: u32,
    },
    Unlink {
        at: Sel,
    },
    Rmdir {
        at: Sel,
    },
    Rename {
        from: Sel,
        to: Sel,
        mode: RenameMode,
    },
    Link {
        from: Sel,
        to: Sel,
    },
    SetXattr {
        at: Sel,
        name: u8,
        len: u16,
        seed: u8,
        flags: i32,
    },
    /// `name` from `XNAMES.len()` on: one the entry has.
    GetXattr {
        at: Sel,
        name: u8,
    },
    /// `name` from `XNAMES.len()` on: one the entry has.
    RemoveXattr {
        at: Sel,
        name: u8,
    },
    ListXattr {
        at: Sel,
    },
    Chmod {
        at: Sel,
        perm: u32,
    },
    Chown {
        at: Sel,
        uid: u32,
        gid: u32,
    },
    Sync,
    /// fdatasync(2) of a file: a data-sync log (only that file's data,
    /// size and times become durable) or a checkpoint (everything does);
    /// the engine's counters say which, and the durable model follows.
    FDataSync {
        at: Sel,
        /// A write to the file first, as (offset, length, seed), so that
        /// it usually has something to make durable.
        write: Option<(Off, u32, u8)>,
    },
    /// Sync, then delete every plain checkpoint but the latest (what
    /// cleaning does with no protection period), freeing the blocks only
    /// they kept.
    Reclaim,
    Remount,
    /// Crash right after an acknowledged sync (or, without `sync_first`,
    /// with changes since the last one, which must all be lost).
    Crash {
        sync_first: bool,
        seed: u64,
    },
    /// Crash at the `nth` device write from now, during a sync.
    CrashInSync {
        nth: u8,
        seed: u64,
    },
}

/// Raw words an operation is decoded from.
type Raw = [u32; 6];

fn raw_path(w: u32) -> Sel {
    let depth = match w % 20 {
        0..=9 => 1,
        10..=16 => 2,
        _ => 3,
    };
    let comps = (0..depth).map(|i| ((w >> (5 + 2 * i)) % 4) as u8).collect();
    Sel::Raw(comps)
}

/// A short name (which collide) or a long one (which fill directories).
fn name_of(w: u32) -> u8 {
    if w % 2 == 0 {
        (NAMES.len() as u32 + (w >> 1) % u32::from(LONG_NAMES)) as u8
    } else {
        (w % NAMES.len() as u32) as u8
    }
}

/// Name `i`: one of `NAMES`, or a long name of 60 to 255 bytes.
fn name(i: u8) -> Vec<u8> {
    match NAMES.get(usize::from(i)) {
        Some(n) => n.to_vec(),
        None => {
            let k = usize::from(i) - NAMES.len();
            let mut n = format!("long-{k:02}-").into_bytes();
            let len = 60 + k * 195 / usize::from(LONG_NAMES - 1);
            n.resize(len, b'a' + (k % 26) as u8);
            n
        }
    }
}

/// A path that usually has extended attributes.
fn sel_xattr(a: u32, b: u32) -> Sel {
    match a % 10 {
        0..=6 => Sel::Xattr(b),
        _ => sel_any(a / 10, b),
    }
}

/// A path that usually exists.
fn sel_any(a: u32, b: u32) -> Sel {
    match a % 10 {
        0..=5 => Sel::Any(b),
        6..=7 => Sel::InDir(b, name_of(a >> 8)),
        _ => raw_path(b),
    }
}

/// A path that usually does not exist yet.
fn sel_new(a: u32, b: u32) -> Sel {
    match a % 10 {
        0..=6 => Sel::InDir(b, name_of(a >> 8)),
        7..=8 => Sel::Any(b),
        _ => raw_path(b),
    }
}

/// A path that is usually a regular file.
fn sel_file(a: u32, b: u32) -> Sel {
    match a % 10 {
        0..=7 => Sel::File(b),
        8 => Sel::Any(b),
        _ => raw_path(b),
    }
}

/// A path that is usually a directory, often an empty one.
fn sel_dir(a: u32, b: u32) -> Sel {
    match a % 10 {
        0..=3 => Sel::EmptyDir(b),
        4..=6 => Sel::Dir(b),
        7..=8 => Sel::Any(b),
        _ => raw_path(b),
    }
}

fn off_of(w: u32) -> Off {
    let v = w >> 3;
    match w % 8 {
        0..=1 => Off::Abs(u64::from(v % 8192)),
        2 => Off::Abs(u64::from(v % 64) * BS),
        3 => Off::Abs((u64::from(v % 64) * BS + u64::from(v >> 6) % 7).saturating_sub(3)),
        4..=5 => Off::Eof(i64::from(v % 8192) - 4096),
        6 => Off::Eof(i64::from(v % 65536)),
        _ if v % 4 == 0 => Off::Abs(MAX_FILE / 2 + u64::from(v) % (MAX_FILE / 2)),
        _ => Off::Abs(u64::from(v) % (1 << 20)),
    }
}

fn len_of(w: u32) -> u32 {
    let v = w >> 4;
    match w % 16 {
        0..=5 => v % 100,
        6..=9 => 1 + v % 9000,
        10 => 4096,
        11 => 4095 + v % 3,
        12 => 8192,
        13 => v % 65536,
        14 => BIG_WRITE,
        _ => 1 + v % 32768,
    }
}

/// Decodes one operation. Weights are per mille.
fn decode(r: Raw) -> Op {
    let [k, a, b, c, d, e] = r;
    if k == 0 {
        return Op::Nop;
    }
    let perm = PERMS[(c % PERMS.len() as u32) as usize];
    let uid = IDS[((c >> 8) % IDS.len() as u32) as usize];
    let gid = IDS[((c >> 16) % IDS.len() as u32) as usize];
    match k % 1000 {
        0..=249 => Op::Write {
            at: sel_file(a, b),
            off: off_of(c),
            len: len_of(d),
            seed: (e % 251) as u8 + 1,
        },
        290..=329 => Op::FDataSync {
            at: sel_file(a, b),
            write: (d % 4 != 0).then(|| (off_of(c), len_of(d), (e % 251) as u8 + 1)),
        },
        250..=289 => Op::Read {
            at: sel_file(a, b),
            off: off_of(c),
            len: len_of(d).max(1),
        },
        330..=439 => Op::Create {
            at: sel_new(a, b),
            perm,
            uid,
            gid,
        },
        440..=469 => Op::Mkdir {
            at: sel_new(a, b),
            perm,
            uid,
            gid,
        },
        470..=494 => Op::Symlink {
            at: sel_new(a, b),
            target_len: if d % 16 == 0 {
                4095
            } else {
                1 + (d % 300) as u16
            },
            seed: e as u8,
        },
        495..=544 => Op::Truncate {
            at: sel_file(a, b),
            size: off_of(c),
        },
        545..=584 => Op::Punch {
            at: sel_file(a, b),
            off: off_of(c),
            len: len_of(d).max(1),
        },
        585..=644 => Op::Unlink { at: sel_file(a, b) },
        645..=679 => Op::Rmdir { at: sel_dir(a, b) },
        680..=769 => Op::Rename {
            from: sel_any(a, b),
            to: if c % 3 == 0 {
                sel_any(d, e)
            } else {
                sel_new(d, e)
            },
            mode: match c % 20 {
                0..=11 => RenameMode::Plain,
                12..=14 => RenameMode::NoReplace,
                _ => RenameMode::Exchange,
            },
        },
        770..=799 => Op::Link {
            from: sel_file(a, b),
            to: sel_new(d, e),
        },
        800..=844 => Op::SetXattr {
            at: sel_any(a, b),
            name: (c % XNAMES.len() as u32) as u8,
            len: if d % 32 == 0 { 5000 } else { (d % 200) as u16 },
            seed: e as u8,
            flags: match (c >> 8) % 4 {
                0 => XATTR_CREATE,
                1 => XATTR_REPLACE,
                _ => 0,
            },
        },
        845..=864 => Op::GetXattr {
            at: sel_xattr(a, b),
            name: (c % (2 * XNAMES.len() as u32)) as u8,
        },
        865..=884 => Op::RemoveXattr {
            at: sel_xattr(a, b),
            name: (c % (2 * XNAMES.len() as u32)) as u8,
        },
        885..=894 => Op::ListXattr {
            at: sel_xattr(a, b),
        },
        895..=909 => Op::Chmod {
            at: sel_any(a, b),
            perm,
        },
        910..=924 => Op::Chown {
            at: sel_any(a, b),
            uid,
            gid,
        },
        925..=934 => Op::Sync,
        935..=964 => Op::Reclaim,
        965..=984 => Op::Remount,
        985..=994 => Op::Crash {
            sync_first: a % 4 != 0,
            seed: u64::from(b) << 32 | u64::from(c),
        },
        _ => Op::CrashInSync {
            nth: (a % 4) as u8,
            seed: u64::from(b) << 32 | u64::from(c),
        },
    }
}

/// Bytes of the write with `seed` at file offset `off`: a function of the
/// absolute offset, so misplaced data shows.
fn pattern(seed: u8, off: u64, len: usize) -> Vec<u8> {
    (off..off + len as u64)
        .map(|o| {
            let x = o.wrapping_mul(0x9e37_79b9).rotate_right(7) ^ (o >> 12);
            (x as u8) ^ seed
        })
        .collect()
}

fn symlink_target(len: u16, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| b'!' + ((i as u8).wrapping_mul(7).wrapping_add(seed)) % 90)
        .collect()
}

fn xattr_value(len: u16, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_add(seed)).collect()
}

// ---------------------------------------------------------------------------
// The model

#[derive(Debug, Clone)]
enum Kind {
    File {
        data: Vec<u8>,
        /// Allocated data blocks (written, not truncated or punched away).
        alloc: BTreeSet<u64>,
    },
    Dir {
        entries: BTreeMap<Vec<u8>, u64>,
        parent: u64,
    },
    Symlink(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    /// st_mode, type bits included.
    mode: u32,
    uid: u32,
    gid: u32,
    nlink: u32,
    xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

#[derive(Debug, Clone)]
struct Model {
    nodes: BTreeMap<u64, Node>,
    next: u64,
}

const MROOT: u64 = 0;

type Path = Vec<Vec<u8>>;

fn show(p: &[Vec<u8>]) -> String {
    let mut s = String::new();
    for c in p {
        s.push('/');
        s.push_str(&String::from_utf8_lossy(c));
    }
    if s.is_empty() {
        s.push('/');
    }
    s
}

/// A path for people: long names shortened.
fn abbrev(path: &str) -> String {
    path.split('/')
        .map(|c| {
            if c.len() > 24 {
                format!("{}…({} bytes)", &c[..8], c.len())
            } else {
                c.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn show_short(p: &[Vec<u8>]) -> String {
    abbrev(&show(p))
}

/// Bytes a set of extended attributes takes in its block (lfs(5)): a
/// metadata header, then per attribute 4 bytes, name and value, padded
/// to 8.
fn xattr_bytes(x: &BTreeMap<Vec<u8>, Vec<u8>>) -> usize {
    META_HEADER_SIZE
        + x.iter()
            .map(|(n, v)| (4 + n.len() + v.len()).div_ceil(8) * 8)
            .sum::<usize>()
}

/// Indirect blocks a file with data blocks `alloc` needs (12 direct
/// pointers, then a single and a double indirect tree).
fn index_blocks(alloc: &BTreeSet<u64>) -> u64 {
    let p = (BS - META_HEADER_SIZE as u64) / NODE_PTR_SIZE as u64;
    let direct = BMAP_DIRECT as u64;
    let single = alloc.range(direct..direct + p).next().is_some();
    let double: BTreeSet<u64> = alloc
        .range(direct + p..direct + p + p * p)
        .map(|b| (b - direct - p) / p)
        .collect();
    u64::from(single) + double.len() as u64 + u64::from(!double.is_empty())
}

impl Model {
    fn new(root_mode: u32, uid: u32, gid: u32) -> Model {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            MROOT,
            Node {
                kind: Kind::Dir {
                    entries: BTreeMap::new(),
                    parent: MROOT,
                },
                mode: root_mode,
                uid,
                gid,
                nlink: 2,
                xattrs: BTreeMap::new(),
            },
        );
        Model { nodes, next: 1 }
    }

    fn node(&self, id: u64) -> &Node {
        &self.nodes[&id]
    }

    fn node_mut(&mut self, id: u64) -> &mut Node {
        self.nodes.get_mut(&id).expect("model node")
    }

    fn entries(&self, id: u64) -> Option<&BTreeMap<Vec<u8>, u64>> {
        match &self.node(id).kind {
            Kind::Dir { entries, .. } => Some(entries),
            _ => None,
        }
    }

    fn entries_mut(&mut self, id: u64) -> &mut BTreeMap<Vec<u8>, u64> {
        match &mut self.node_mut(id).kind {
            Kind::Dir { entries, .. } => entries,
            _ => panic!("model: node {id} is not a directory"),
        }
    }

    fn is_dir(&self, id: u64) -> bool {
        matches!(self.node(id).kind, Kind::Dir { .. })
    }

    fn child(&self, dir: u64, name: &[u8]) -> Option<u64> {
        self.entries(dir).and_then(|e| e.get(name).copied())
    }

    /// Every path but the root's, depth first in name order.
    fn paths(&self) -> Vec<(Path, u64)> {
        let mut out = Vec::new();
        let mut stack = vec![(Vec::new(), MROOT)];
        while let Some((p, id)) = stack.pop() {
            if let Some(es) = self.entries(id) {
                for (n, &c) in es.iter().rev() {
                    let mut q: Path = p.clone();
                    q.push(n.clone());
                    stack.push((q, c));
                }
            }
            if id != MROOT {
                out.push((p, id));
            }
        }
        out
    }

    /// Turns a selector into a path, as of now.
    fn pick(&self, sel: &Sel) -> Path {
        let all = self.paths();
        let nth = |pred: &dyn Fn(u64) -> bool, i: u32| -> Option<Path> {
            let c: Vec<&Path> = all
                .iter()
                .filter(|(_, id)| pred(*id))
                .map(|(p, _)| p)
                .collect();
            (!c.is_empty()).then(|| c[i as usize % c.len()].clone())
        };
        let fallback = || vec![name(0)];
        match sel {
            Sel::File(i) => nth(&|id| matches!(self.node(id).kind, Kind::File { .. }), *i)
                .unwrap_or_else(fallback),
            Sel::Dir(i) => nth(&|id| self.is_dir(id), *i).unwrap_or_else(fallback),
            Sel::Any(i) => nth(&|_| true, *i).unwrap_or_else(fallback),
            Sel::Xattr(i) => nth(&|id| !self.node(id).xattrs.is_empty(), *i)
                .unwrap_or_else(|| self.pick(&Sel::Any(*i))),
            Sel::EmptyDir(i) => nth(&|id| self.entries(id).is_some_and(|e| e.is_empty()), *i)
                .unwrap_or_else(|| self.pick(&Sel::Dir(*i))),
            Sel::InDir(i, n) => {
                // The root a third of the time, else a directory less than
                // MAX_DEPTH deep, so that the tree stays bushy rather than
                // deep.
                let mut dirs: Vec<Path> = vec![Vec::new()];
                dirs.extend(
                    all.iter()
                        .filter(|(p, id)| self.is_dir(*id) && p.len() < MAX_DEPTH)
                        .map(|(p, _)| p.clone()),
                );
                let k = if i % 3 == 0 {
                    0
                } else {
                    (i / 3) as usize % dirs.len()
                };
                let mut p = dirs[k].clone();
                p.push(name(*n));
                p
            }
            Sel::Raw(c) => c.iter().map(|&n| name(n)).collect(),
        }
    }

    /// The directory a path's last name is in, as the kernel resolves it.
    fn parent_of<'p>(&self, path: &'p [Vec<u8>]) -> Result<(u64, &'p [u8]), MErr> {
        let (last, dirs) = path.split_last().expect("path with a name");
        let mut cur = MROOT;
        for c in dirs {
            let es = self.entries(cur).ok_or_else(|| one(Ek::NotDir))?;
            cur = *es.get(c).ok_or_else(|| one(Ek::NotFound))?;
        }
        if !self.is_dir(cur) {
            return Err(one(Ek::NotDir));
        }
        Ok((cur, last))
    }

    fn resolve(&self, path: &[Vec<u8>]) -> Result<u64, MErr> {
        if path.is_empty() {
            return Ok(MROOT);
        }
        let (dir, name) = self.parent_of(path)?;
        self.child(dir, name).ok_or_else(|| one(Ek::NotFound))
    }

    /// True if `anc` is `id` or one of its ancestors (directories only).
    fn is_ancestor(&self, anc: u64, mut id: u64) -> bool {
        loop {
            if id == anc {
                return true;
            }
            if id == MROOT {
                return false;
            }
            id = match self.node(id).kind {
                Kind::Dir { parent, .. } => parent,
                _ => return false,
            };
        }
    }

    /// Attribute name `i`: one of `XNAMES`, or (from `XNAMES.len()` on)
    /// one the entry at `path` has, if any.
    fn xattr_name(&self, path: &[Vec<u8>], i: u8) -> Vec<u8> {
        let i = usize::from(i);
        if let (Some(rest), Ok(id)) = (i.checked_sub(XNAMES.len()), self.resolve(path)) {
            let x = &self.node(id).xattrs;
            if let Some(n) = x.keys().nth(rest % x.len().max(1)) {
                return n.clone();
            }
        }
        XNAMES[i % XNAMES.len()].to_vec()
    }

    fn size_of(&self, path: &[Vec<u8>]) -> u64 {
        match self.resolve(path).map(|id| &self.node(id).kind) {
            Ok(Kind::File { data, .. }) => data.len() as u64,
            _ => 0,
        }
    }

    fn new_node(&mut self, path: &[Vec<u8>], kind: Kind, mode: u32, uid: u32, gid: u32) -> MRes {
        let (dir, name) = self.parent_of(path)?;
        if self.child(dir, name).is_some() {
            return Err(one(Ek::Exists));
        }
        let p = self.node(dir);
        let (mut mode, mut gid) = (mode, gid);
        let is_dir = matches!(kind, Kind::Dir { .. });
        if p.mode & S_ISGID != 0 {
            // BSD group semantics for set-group-ID directories.
            gid = p.gid;
            if is_dir {
                mode |= S_ISGID;
            }
        }
        let kind = match kind {
            Kind::Dir { entries, .. } => Kind::Dir {
                entries,
                parent: dir,
            },
            k => k,
        };
        let id = self.next;
        self.next += 1;
        self.nodes.insert(
            id,
            Node {
                kind,
                mode,
                uid,
                gid,
                nlink: if is_dir { 2 } else { 1 },
                xattrs: BTreeMap::new(),
            },
        );
        self.entries_mut(dir).insert(name.to_vec(), id);
        if is_dir {
            self.node_mut(dir).nlink += 1;
        }
        Ok(Out::Unit)
    }

    /// Drops one link to `id`, freeing it at zero.
    fn drop_link(&mut self, id: u64) {
        let n = self.node_mut(id);
        n.nlink = if matches!(n.kind, Kind::Dir { .. }) {
            0
        } else {
            n.nlink - 1
        };
        if n.nlink == 0 {
            self.nodes.remove(&id);
        }
    }

    /// The regular file at `path` for a data operation.
    fn data_target(&self, path: &[Vec<u8>]) -> Result<Option<u64>, MErr> {
        let id = self.resolve(path)?;
        match self.node(id).kind {
            Kind::File { .. } => Ok(Some(id)),
            Kind::Dir { .. } => Err(one(Ek::IsDir)),
            // The kernel would follow the link; the engine is never asked.
            Kind::Symlink(_) => Ok(None),
        }
    }

    fn write(&mut self, path: &[Vec<u8>], off: u64, buf: &[u8]) -> MRes {
        let Some(id) = self.data_target(path)? else {
            return Ok(Out::Skipped);
        };
        if buf.is_empty() {
            return Ok(Out::Count(0));
        }
        let n = self.node_mut(id);
        let Kind::File { data, alloc } = &mut n.kind else {
            unreachable!()
        };
        let end = off as usize + buf.len();
        if data.len() < end {
            data.resize(end, 0);
        }
        data[off as usize..end].copy_from_slice(buf);
        alloc.extend(off / BS..(end as u64).div_ceil(BS));
        // A write clears set-user-ID, and set-group-ID when it means
        // "set group ID on execution".
        n.mode &= !S_ISUID;
        if n.mode & S_IXGRP != 0 {
            n.mode &= !S_ISGID;
        }
        Ok(Out::Count(buf.len() as u32))
    }

    fn read(&self, path: &[Vec<u8>], off: u64, len: u32) -> MRes {
        let Some(id) = self.data_target(path)? else {
            return Ok(Out::Skipped);
        };
        let Kind::File { data, .. } = &self.node(id).kind else {
            unreachable!()
        };
        let from = (off as usize).min(data.len());
        let to = (off as usize + len as usize).min(data.len());
        Ok(Out::Data(data[from..to].to_vec()))
    }

    fn truncate(&mut self, path: &[Vec<u8>], size: u64) -> MRes {
        let Some(id) = self.data_target(path)? else {
            return Ok(Out::Skipped);
        };
        let Kind::File { data, alloc } = &mut self.node_mut(id).kind else {
            unreachable!()
        };
        data.resize(size as usize, 0);
        alloc.retain(|&b| b < size.div_ceil(BS));
        // A truncation clears set-ID bits as a write does.
        let n = self.node_mut(id);
        n.mode &= !S_ISUID;
        if n.mode & S_IXGRP != 0 {
            n.mode &= !S_ISGID;
        }
        Ok(Out::Unit)
    }

    /// FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: "Partial filesystem
    /// blocks are zeroed, and whole filesystem blocks are removed from the
    /// file" (fallocate(2)); the size does not change. Nothing lies past
    /// EOF, so a range that reaches EOF covers the rest of the last block
    /// (ext4 does the same for a range that goes past EOF).
    fn punch(&mut self, path: &[Vec<u8>], off: u64, len: u64) -> MRes {
        let Some(id) = self.data_target(path)? else {
            return Ok(Out::Skipped);
        };
        let Kind::File { data, alloc } = &mut self.node_mut(id).kind else {
            unreachable!()
        };
        let end = (off + len).min(data.len() as u64);
        if off < end {
            data[off as usize..end as usize].fill(0);
        }
        let size = data.len() as u64;
        let reach = if off + len >= size {
            size.div_ceil(BS) * BS
        } else {
            off + len
        };
        let (first, last) = (off.div_ceil(BS), reach / BS);
        alloc.retain(|&b| !(first..last).contains(&b));
        Ok(Out::Unit)
    }

    fn unlink(&mut self, path: &[Vec<u8>]) -> MRes {
        let (dir, name) = self.parent_of(path)?;
        let id = self.child(dir, name).ok_or_else(|| one(Ek::NotFound))?;
        if self.is_dir(id) {
            return Err(one(Ek::IsDir));
        }
        self.entries_mut(dir).remove(name);
        self.drop_link(id);
        Ok(Out::Unit)
    }

    fn rmdir(&mut self, path: &[Vec<u8>]) -> MRes {
        let (dir, name) = self.parent_of(path)?;
        let id = self.child(dir, name).ok_or_else(|| one(Ek::NotFound))?;
        match self.entries(id) {
            None => return Err(one(Ek::NotDir)),
            Some(es) if !es.is_empty() => return Err(one(Ek::NotEmpty)),
            Some(_) => {}
        }
        self.entries_mut(dir).remove(name);
        self.node_mut(dir).nlink -= 1;
        self.drop_link(id);
        Ok(Out::Unit)
    }

    fn set_parent(&mut self, id: u64, to: u64) {
        if let Kind::Dir { parent, .. } = &mut self.node_mut(id).kind {
            *parent = to;
        }
    }

    /// rename(2) in the order of Linux's do_renameat2 and vfs_rename.
    fn rename(&mut self, from: &[Vec<u8>], to: &[Vec<u8>], mode: RenameMode) -> MRes {
        let (p, name) = self.parent_of(from)?;
        let (np, nname) = self.parent_of(to)?;
        let s = self.child(p, name).ok_or_else(|| one(Ek::NotFound))?;
        let d = self.child(np, nname);
        let s_dir = self.is_dir(s);
        // The source is the target's parent or one of its ancestors.
        let src_trap = s_dir && p != np && self.is_ancestor(s, np);
        // The target is the source's parent or one of its ancestors.
        let dst_trap = d.is_some_and(|d| self.is_dir(d) && p != np && self.is_ancestor(d, p));
        let either = |first: Ek, second: Ek, both: bool| {
            if both {
                // POSIX allows either.
                vec![first, second]
            } else {
                vec![first]
            }
        };
        if mode == RenameMode::NoReplace && d.is_some() {
            return Err(either(Ek::Exists, Ek::Inval, src_trap));
        }
        if mode == RenameMode::Exchange && d.is_none() {
            return Err(either(Ek::NotFound, Ek::Inval, src_trap));
        }
        if src_trap {
            return Err(one(Ek::Inval));
        }
        if dst_trap {
            return Err(if mode == RenameMode::Exchange {
                one(Ek::Inval)
            } else {
                // The target is a non-empty directory, and if the source
                // is not a directory, also a directory: POSIX allows either.
                either(Ek::NotEmpty, Ek::IsDir, !s_dir)
            });
        }
        let Some(d) = d else {
            self.entries_mut(p).remove(name);
            self.entries_mut(np).insert(nname.to_vec(), s);
            if s_dir && p != np {
                self.node_mut(p).nlink -= 1;
                self.node_mut(np).nlink += 1;
                self.set_parent(s, np);
            }
            return Ok(Out::Unit);
        };
        if s == d {
            // Two links to one file: nothing happens.
            return Ok(Out::Unit);
        }
        let d_dir = self.is_dir(d);
        if mode == RenameMode::Exchange {
            self.entries_mut(p).insert(name.to_vec(), d);
            self.entries_mut(np).insert(nname.to_vec(), s);
            if p != np {
                self.set_parent(s, np);
                self.set_parent(d, p);
                let delta = i64::from(d_dir) - i64::from(s_dir);
                let pn = &mut self.node_mut(p).nlink;
                *pn = (i64::from(*pn) + delta) as u32;
                let npn = &mut self.node_mut(np).nlink;
                *npn = (i64::from(*npn) - delta) as u32;
            }
            return Ok(Out::Unit);
        }
        match (s_dir, d_dir) {
            (true, false) => return Err(one(Ek::NotDir)),
            (false, true) => return Err(one(Ek::IsDir)),
            (true, true) if !self.entries(d).expect("dir").is_empty() => {
                return Err(one(Ek::NotEmpty))
            }
            _ => {}
        }
        self.entries_mut(np).remove(nname);
        if d_dir {
            self.node_mut(np).nlink -= 1;
        }
        self.drop_link(d);
        self.entries_mut(p).remove(name);
        self.entries_mut(np).insert(nname.to_vec(), s);
        if s_dir && p != np {
            self.node_mut(p).nlink -= 1;
            self.node_mut(np).nlink += 1;
            self.set_parent(s, np);
        }
        Ok(Out::Unit)
    }

    /// link(2) in the order of Linux's do_linkat.
    fn link(&mut self, from: &[Vec<u8>], to: &[Vec<u8>]) -> MRes {
        let s = self.resolve(from)?;
        let (np, nname) = self.parent_of(to)?;
        let exists = self.child(np, nname).is_some();
        let dir = self.is_dir(s);
        match (exists, dir) {
            // The VFS says EEXIST first; POSIX allows either.
            (true, true) => return Err(vec![Ek::Exists, Ek::NotPermitted]),
            (true, false) => return Err(one(Ek::Exists)),
            (false, true) => return Err(one(Ek::NotPermitted)),
            (false, false) => {}
        }
        self.entries_mut(np).insert(nname.to_vec(), s);
        self.node_mut(s).nlink += 1;
        Ok(Out::Unit)
    }

    fn setxattr(&mut self, path: &[Vec<u8>], name: &[u8], value: &[u8], flags: i32) -> MRes {
        let id = self.resolve(path)?;
        let x = &mut self.node_mut(id).xattrs;
        let exists = x.contains_key(name);
        if flags & XATTR_CREATE != 0 && exists {
            return Err(one(Ek::Exists));
        }
        if flags & XATTR_REPLACE != 0 && !exists {
            return Err(one(Ek::NoData));
        }
        let mut after = x.clone();
        after.insert(name.to_vec(), value.to_vec());
        if xattr_bytes(&after) > BS as usize {
            return Err(one(Ek::TooBig));
        }
        *x = after;
        Ok(Out::Unit)
    }

    fn getxattr(&self, path: &[Vec<u8>], name: &[u8]) -> MRes {
        let id = self.resolve(path)?;
        let v = self.node(id).xattrs.get(name);
        v.map(|v| Out::Data(v.clone()))
            .ok_or_else(|| one(Ek::NoData))
    }

    fn removexattr(&mut self, path: &[Vec<u8>], name: &[u8]) -> MRes {
        let id = self.resolve(path)?;
        let x = &mut self.node_mut(id).xattrs;
        x.remove(name).ok_or_else(|| one(Ek::NoData))?;
        Ok(Out::Unit)
    }

    fn listxattr(&self, path: &[Vec<u8>]) -> MRes {
        let id = self.resolve(path)?;
        Ok(Out::Names(self.node(id).xattrs.keys().cloned().collect()))
    }

    fn chmod(&mut self, path: &[Vec<u8>], perm: u32) -> MRes {
        let id = self.resolve(path)?;
        let n = self.node_mut(id);
        if matches!(n.kind, Kind::Symlink(_)) {
            // chmod follows symlinks; the engine is never asked.
            return Ok(Out::Skipped);
        }
        n.mode = (n.mode & S_IFMT) | (perm & 0o7777);
        Ok(Out::Unit)
    }

    fn chown(&mut self, path: &[Vec<u8>], uid: u32, gid: u32) -> MRes {
        let id = self.resolve(path)?;
        let n = self.node_mut(id);
        let changes = uid != n.uid || gid != n.gid;
        n.uid = uid;
        n.gid = gid;
        if changes && !matches!(n.kind, Kind::Dir { .. }) {
            // chown clears set-user-ID, and set-group-ID when it means
            // "set group ID on execution".
            n.mode &= !S_ISUID;
            if n.mode & S_IXGRP != 0 {
                n.mode &= !S_ISGID;
            }
        }
        Ok(Out::Unit)
    }
}

type MRes = Result<Out, MErr>;

// ---------------------------------------------------------------------------
// Trees, for comparison

/// One entry of a tree, as both sides see it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ent {
    kind: FileType,
    mode: u32,
    uid: u32,
    gid: u32,
    nlink: u32,
    /// File size or symlink length; 0 for directories (their size is the
    /// engine's business).
    size: u64,
    /// File contents or symlink target.
    data: Vec<u8>,
    xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The first path (in name order) of the same inode: hard links.
    same_as: String,
}

/// `st_blocks` in blocks: the engine's value, or the model's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Blocks {
    Engine(u64),
    Between(u64, u64),
    Ignored,
}

type Tree = BTreeMap<String, (Ent, Blocks)>;

fn set_same_as(tree: &mut Tree, ident: &BTreeMap<String, u64>) {
    let mut first: BTreeMap<u64, String> = BTreeMap::new();
    for (p, id) in ident {
        first.entry(*id).or_insert_with(|| p.clone());
    }
    for (p, (e, _)) in tree.iter_mut() {
        e.same_as = first[&ident[p]].clone();
    }
}

fn model_tree(m: &Model) -> Tree {
    let mut t = Tree::new();
    let mut ident = BTreeMap::new();
    for (path, id) in m.paths() {
        let n = m.node(id);
        let (kind, size, data, blocks) = match &n.kind {
            Kind::File { data, alloc } => {
                let d = alloc.len() as u64;
                (
                    FileType::Regular,
                    data.len() as u64,
                    data.clone(),
                    Blocks::Between(d, d + index_blocks(alloc)),
                )
            }
            Kind::Dir { .. } => (FileType::Directory, 0, Vec::new(), Blocks::Ignored),
            Kind::Symlink(target) => (
                FileType::Symlink,
                target.len() as u64,
                target.clone(),
                Blocks::Between(1, 1),
            ),
        };
        let p = show(&path);
        ident.insert(p.clone(), id);
        t.insert(
            p,
            (
                Ent {
                    kind,
                    mode: n.mode,
                    uid: n.uid,
                    gid: n.gid,
                    nlink: n.nlink,
                    size,
                    data,
                    xattrs: n.xattrs.clone(),
                    same_as: String::new(),
                },
                blocks,
            ),
        );
    }
    set_same_as(&mut t, &ident);
    t
}

fn kind_of_mode(mode: u32) -> Option<FileType> {
    match mode & S_IFMT {
        S_IFREG => Some(FileType::Regular),
        S_IFDIR => Some(FileType::Directory),
        S_IFLNK => Some(FileType::Symlink),
        _ => None,
    }
}

/// Reads the whole tree from the engine, checking on the way what the
/// engine must agree with itself about: readdir against lookup, "." and
/// "..", the directory's link count against its subdirectories, and that
/// `st_blocks` does not change when a file is read.
fn engine_tree(fs: &Fs) -> Result<Tree, String> {
    let mut t = Tree::new();
    let mut ident = BTreeMap::new();
    walk(fs, ROOT_INO, ROOT_INO, &[], &mut t, &mut ident)?;
    let root = fs
        .getattr(ROOT_INO)
        .map_err(|e| format!("getattr of /: {e}"))?;
    let subdirs = t
        .iter()
        .filter(|(p, (e, _))| e.kind == FileType::Directory && p[1..].find('/').is_none())
        .count() as u32;
    if root.nlink != 2 + subdirs {
        return Err(format!(
            "/ has nlink {} with {subdirs} subdirectories",
            root.nlink
        ));
    }
    set_same_as(&mut t, &ident);
    Ok(t)
}

fn walk(
    fs: &Fs,
    dir: u64,
    parent: u64,
    path: &[Vec<u8>],
    t: &mut Tree,
    ident: &mut BTreeMap<String, u64>,
) -> Result<(), String> {
    if path.len() > WALK_LIMIT {
        return Err(format!("{} is nested too deep: a cycle?", show(path)));
    }
    let here = show_short(path);
    let mut cookie = 0;
    let mut items = Vec::new();
    loop {
        let batch = fs
            .readdir(dir, cookie)
            .map_err(|e| format!("readdir of {here}: {e}"))?;
        if batch.is_empty() {
            break;
        }
        // Resume after a few entries, so that every cookie gets used.
        let take = batch.len().min(READDIR_TAKE);
        cookie = batch[take - 1].cookie;
        items.extend(batch.into_iter().take(take));
    }
    let mut seen = BTreeSet::new();
    for it in items {
        match it.name.as_slice() {
            b"." | b".." => {
                let want = if it.name == b"." { dir } else { parent };
                if it.ino != want || it.kind != FileType::Directory {
                    return Err(format!(
                        "readdir of {here}: {:?} is inode {} ({:?}), expected {want}",
                        String::from_utf8_lossy(&it.name),
                        it.ino,
                        it.kind
                    ));
                }
                continue;
            }
            _ => {}
        }
        if !seen.insert(it.name.clone()) {
            return Err(format!(
                "readdir of {here} lists {:?} twice",
                String::from_utf8_lossy(&it.name)
            ));
        }
        let mut p = path.to_vec();
        p.push(it.name.clone());
        let key = show(&p);
        let ps = abbrev(&key);
        let a = fs
            .lookup(dir, &it.name)
            .map_err(|e| format!("lookup of {ps}, listed by readdir: {e}"))?;
        if a.ino != it.ino || kind_of_mode(a.mode) != Some(it.kind) {
            return Err(format!(
                "{ps}: readdir says inode {} {:?}, lookup says inode {} mode {:o}",
                it.ino, it.kind, a.ino, a.mode
            ));
        }
        let dot = |name: &[u8]| {
            fs.lookup(a.ino, name)
                .map(|x| x.ino)
                .map_err(|e| format!("lookup of {ps}/{}: {e}", String::from_utf8_lossy(name)))
        };
        let mut xattrs = BTreeMap::new();
        for n in fs
            .listxattr(a.ino)
            .map_err(|e| format!("listxattr of {ps}: {e}"))?
        {
            let v = fs
                .getxattr(a.ino, &n)
                .map_err(|e| format!("getxattr {:?} of {ps}, listed: {e}", n))?;
            if xattrs.insert(n.clone(), v).is_some() {
                return Err(format!("listxattr of {ps} lists {n:?} twice"));
            }
        }
        let (size, data, blocks) = match it.kind {
            FileType::Directory => {
                if dot(b".")? != a.ino || dot(b"..")? != dir {
                    return Err(format!("{ps}: \".\" or \"..\" is wrong"));
                }
                walk(fs, a.ino, dir, &p, t, ident)?;
                let sub = t
                    .range(format!("{key}/")..format!("{key}0"))
                    .filter(|(q, (e, _))| {
                        e.kind == FileType::Directory && q[key.len() + 1..].find('/').is_none()
                    })
                    .count() as u32;
                if a.nlink != 2 + sub {
                    return Err(format!("{ps}: nlink {} with {sub} subdirectories", a.nlink));
                }
                (0, Vec::new(), Blocks::Ignored)
            }
            FileType::Symlink => {
                let target = fs
                    .readlink(a.ino)
                    .map_err(|e| format!("readlink of {ps}: {e}"))?;
                (a.size, target, Blocks::Engine(a.blocks / (BS / 512)))
            }
            _ => {
                let data = fs
                    .read(a.ino, 0, a.size as u32 + 1)
                    .map_err(|e| format!("read of {ps}: {e}"))?;
                let again = fs
                    .getattr(a.ino)
                    .map_err(|e| format!("getattr of {ps}: {e}"))?;
                if again.blocks != a.blocks {
                    return Err(format!(
                        "{ps}: st_blocks was {} before reading the file and {} after",
                        a.blocks, again.blocks
                    ));
                }
                (a.size, data, Blocks::Engine(a.blocks / (BS / 512)))
            }
        };
        ident.insert(key.clone(), a.ino);
        t.insert(
            key,
            (
                Ent {
                    kind: it.kind,
                    mode: a.mode,
                    uid: a.uid,
                    gid: a.gid,
                    nlink: a.nlink,
                    size,
                    data,
                    xattrs,
                    same_as: String::new(),
                },
                blocks,
            ),
        );
    }
    Ok(())
}

fn summary(e: &Ent) -> String {
    let h = e.data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!(
        "{:?} mode {:o} uid {} gid {} nlink {} size {} data {} bytes (hash {h:016x}) xattrs {:?} same_as {}",
        e.kind,
        e.mode,
        e.uid,
        e.gid,
        e.nlink,
        e.size,
        e.data.len(),
        e.xattrs.keys().map(|k| String::from_utf8_lossy(k).into_owned()).collect::<Vec<_>>(),
        e.same_as
    )
}

/// Differences between the model's tree and the engine's, or None.
fn diff(model: &Tree, engine: &Tree) -> Option<String> {
    let mut out = String::new();
    let mut n = 0;
    let keys: BTreeSet<&String> = model.keys().chain(engine.keys()).collect();
    for key in keys {
        let k = abbrev(key);
        let line = match (model.get(key), engine.get(key)) {
            (Some(m), None) => Some(format!("{k}: missing from the engine ({})", summary(&m.0))),
            (None, Some(e)) => Some(format!("{k}: only in the engine ({})", summary(&e.0))),
            (Some((me, mb)), Some((ee, eb))) => {
                if me != ee {
                    let mut s = format!(
                        "{k}:\n    model:  {}\n    engine: {}",
                        summary(me),
                        summary(ee)
                    );
                    if me.data != ee.data {
                        let at = me
                            .data
                            .iter()
                            .zip(&ee.data)
                            .position(|(a, b)| a != b)
                            .unwrap_or(me.data.len().min(ee.data.len()));
                        let _ = write!(s, "\n    contents first differ at byte {at}");
                    }
                    if me.xattrs != ee.xattrs {
                        let _ = write!(
                            s,
                            "\n    xattrs model {:?}\n    xattrs engine {:?}",
                            me.xattrs, ee.xattrs
                        );
                    }
                    Some(s)
                } else {
                    match (mb, eb) {
                        (Blocks::Between(lo, hi), Blocks::Engine(b)) if b < lo || b > hi => {
                            Some(format!(
                                "{k}: st_blocks is {b} blocks, the model says {lo} data blocks \
                                 plus at most {} indirect",
                                hi - lo
                            ))
                        }
                        _ => None,
                    }
                }
            }
            (None, None) => None,
        };
        if let Some(l) = line {
            n += 1;
            if n <= 12 {
                out.push_str(&l);
                out.push('\n');
            }
        }
    }
    if n > 12 {
        let _ = writeln!(out, "... and {} more", n - 12);
    }
    (n > 0).then_some(out)
}

// ---------------------------------------------------------------------------
// The engine side

type Dev = FaultDevice<MemDevice>;

fn fresh_image(len: u64, bps: u32) -> Vec<u8> {
    let dev = MemDevice::new(len);
    let mut o = MkfsOptions::new([7; 16], 0x6d6f_6465, 1_700_000_000, 0);
    o.blocks_per_segment = bps;
    o.discard = false;
    format(&dev, &o).expect("mkfs");
    dev.into_vec()
}

fn device(image: Vec<u8>, seed: u64) -> Arc<Dev> {
    let d = Arc::new(FaultDevice::new(MemDevice::from_vec(image)));
    d.set_crash_mode(CrashMode::Random { seed });
    d
}

fn mount(dev: &Arc<Dev>) -> Result<Arc<Fs>, String> {
    let d: Arc<dyn BlockDevice> = dev.clone();
    Fs::mount(d, mount_opts()).map_err(|e| format!("mount failed: {e}"))
}

/// The directory holding a path's last name, resolved as the kernel does.
fn e_parent(fs: &Fs, path: &[Vec<u8>]) -> Result<u64, Ek> {
    let (_, dirs) = path.split_last().expect("path with a name");
    let mut cur = ROOT_INO;
    for c in dirs {
        cur = fs.lookup(cur, c).map_err(ek)?.ino;
    }
    // The kernel only asks a filesystem to work in a directory.
    fs.lookup(cur, b".").map_err(ek)?;
    Ok(cur)
}

fn e_resolve(fs: &Fs, path: &[Vec<u8>]) -> Result<u64, Ek> {
    if path.is_empty() {
        return Ok(ROOT_INO);
    }
    let dir = e_parent(fs, path)?;
    Ok(fs
        .lookup(dir, path.last().expect("a name"))
        .map_err(ek)?
        .ino)
}

fn last(path: &[Vec<u8>]) -> &[u8] {
    path.last().expect("a name")
}

/// One operation with every choice made: paths, offsets, bytes.
#[derive(Debug, Clone)]
enum Step {
    Create(Path, u32, u32, u32),
    Mkdir(Path, u32, u32, u32),
    Symlink(Path, Vec<u8>),
    Write(Path, u64, Vec<u8>),
    Read(Path, u64, u32),
    Truncate(Path, u64),
    Punch(Path, u64, u64),
    Unlink(Path),
    Rmdir(Path),
    Rename(Path, Path, RenameMode),
    Link(Path, Path),
    SetXattr(Path, Vec<u8>, Vec<u8>, i32),
    GetXattr(Path, Vec<u8>),
    RemoveXattr(Path, Vec<u8>),
    ListXattr(Path),
    Chmod(Path, u32),
    Chown(Path, u32, u32),
}

impl Step {
    /// True for the calls that change nothing.
    fn reads_only(&self) -> bool {
        matches!(
            self,
            Step::Read(..) | Step::GetXattr(..) | Step::ListXattr(..)
        )
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Create(p, m, u, g) => {
                write!(f, "create {} mode {m:o} uid {u} gid {g}", show_short(p))
            }
            Step::Mkdir(p, m, u, g) => {
                write!(f, "mkdir {} mode {m:o} uid {u} gid {g}", show_short(p))
            }
            Step::Symlink(p, t) => write!(f, "symlink {} -> {} bytes", show_short(p), t.len()),
            Step::Write(p, o, d) => write!(
                f,
                "write {} at {o} len {} (ends at {})",
                show_short(p),
                d.len(),
                o + d.len() as u64
            ),
            Step::Read(p, o, l) => write!(f, "read {} at {o} len {l}", show_short(p)),
            Step::Truncate(p, s) => write!(f, "truncate {} to {s}", show_short(p)),
            Step::Punch(p, o, l) => write!(f, "punch {} at {o} len {l}", show_short(p)),
            Step::Unlink(p) => write!(f, "unlink {}", show_short(p)),
            Step::Rmdir(p) => write!(f, "rmdir {}", show_short(p)),
            Step::Rename(a, b, m) => write!(f, "rename {} {} {m:?}", show_short(a), show_short(b)),
            Step::Link(a, b) => write!(f, "link {} {}", show_short(a), show_short(b)),
            Step::SetXattr(p, n, v, fl) => write!(
                f,
                "setxattr {} {} len {} flags {fl}",
                show_short(p),
                String::from_utf8_lossy(n),
                v.len()
            ),
            Step::GetXattr(p, n) => write!(
                f,
                "getxattr {} {}",
                show_short(p),
                String::from_utf8_lossy(n)
            ),
            Step::RemoveXattr(p, n) => {
                write!(
                    f,
                    "removexattr {} {}",
                    show_short(p),
                    String::from_utf8_lossy(n)
                )
            }
            Step::ListXattr(p) => write!(f, "listxattr {}", show_short(p)),
            Step::Chmod(p, m) => write!(f, "chmod {} {m:o}", show_short(p)),
            Step::Chown(p, u, g) => write!(f, "chown {} {u}:{g}", show_short(p)),
        }
    }
}

fn resolve_off(m: &Model, path: &[Vec<u8>], off: Off) -> u64 {
    match off {
        Off::Abs(o) => o,
        Off::Eof(d) => m.size_of(path).saturating_add_signed(d),
    }
}

/// Makes the choices of `op` against the model. None for the operations
/// that are not single engine calls.
fn concretize(m: &Model, op: &Op) -> Option<Step> {
    Some(match op {
        Op::Create { at, perm, uid, gid } => Step::Create(m.pick(at), *perm, *uid, *gid),
        Op::Mkdir { at, perm, uid, gid } => Step::Mkdir(m.pick(at), *perm, *uid, *gid),
        Op::Symlink {
            at,
            target_len,
            seed,
        } => Step::Symlink(m.pick(at), symlink_target(*target_len, *seed)),
        Op::Write { at, off, len, seed } => {
            let p = m.pick(at);
            let off = resolve_off(m, &p, *off).min(MAX_FILE - u64::from(*len));
            let data = pattern(*seed, off, *len as usize);
            Step::Write(p, off, data)
        }
        Op::Read { at, off, len } => {
            let p = m.pick(at);
            let off = resolve_off(m, &p, *off);
            Step::Read(p, off, *len)
        }
        Op::Truncate { at, size } => {
            let p = m.pick(at);
            let s = resolve_off(m, &p, *size).min(MAX_FILE);
            Step::Truncate(p, s)
        }
        Op::Punch { at, off, len } => {
            let p = m.pick(at);
            let o = resolve_off(m, &p, *off);
            Step::Punch(p, o, u64::from(*len))
        }
        Op::Unlink { at } => Step::Unlink(m.pick(at)),
        Op::Rmdir { at } => Step::Rmdir(m.pick(at)),
        Op::Rename { from, to, mode } => Step::Rename(m.pick(from), m.pick(to), *mode),
        Op::Link { from, to } => Step::Link(m.pick(from), m.pick(to)),
        Op::SetXattr {
            at,
            name,
            len,
            seed,
            flags,
        } => Step::SetXattr(
            m.pick(at),
            XNAMES[usize::from(*name)].to_vec(),
            xattr_value(*len, *seed),
            *flags,
        ),
        Op::GetXattr { at, name } => {
            let p = m.pick(at);
            let n = m.xattr_name(&p, *name);
            Step::GetXattr(p, n)
        }
        Op::RemoveXattr { at, name } => {
            let p = m.pick(at);
            let n = m.xattr_name(&p, *name);
            Step::RemoveXattr(p, n)
        }
        Op::ListXattr { at } => Step::ListXattr(m.pick(at)),
        Op::Chmod { at, perm } => Step::Chmod(m.pick(at), *perm),
        Op::Chown { at, uid, gid } => Step::Chown(m.pick(at), *uid, *gid),
        Op::Nop
        | Op::Sync
        | Op::FDataSync { .. }
        | Op::Reclaim
        | Op::Remount
        | Op::Crash { .. }
        | Op::CrashInSync { .. } => return None,
    })
}

fn on_model(m: &mut Model, s: &Step) -> MRes {
    match s {
        Step::Create(p, perm, uid, gid) => m.new_node(
            p,
            Kind::File {
                data: Vec::new(),
                alloc: BTreeSet::new(),
            },
            S_IFREG | perm,
            *uid,
            *gid,
        ),
        Step::Mkdir(p, perm, uid, gid) => m.new_node(
            p,
            Kind::Dir {
                entries: BTreeMap::new(),
                parent: MROOT,
            },
            S_IFDIR | (perm & 0o7777),
            *uid,
            *gid,
        ),
        Step::Symlink(p, t) => m.new_node(p, Kind::Symlink(t.clone()), S_IFLNK | 0o777, 0, 0),
        Step::Write(p, o, d) => m.write(p, *o, d),
        Step::Read(p, o, l) => m.read(p, *o, *l),
        Step::Truncate(p, s) => m.truncate(p, *s),
        Step::Punch(p, o, l) => m.punch(p, *o, *l),
        Step::Unlink(p) => m.unlink(p),
        Step::Rmdir(p) => m.rmdir(p),
        Step::Rename(a, b, mode) => m.rename(a, b, *mode),
        Step::Link(a, b) => m.link(a, b),
        Step::SetXattr(p, n, v, f) => m.setxattr(p, n, v, *f),
        Step::GetXattr(p, n) => m.getxattr(p, n),
        Step::RemoveXattr(p, n) => m.removexattr(p, n),
        Step::ListXattr(p) => m.listxattr(p),
        Step::Chmod(p, perm) => m.chmod(p, *perm),
        Step::Chown(p, u, g) => m.chown(p, *u, *g),
    }
}

fn unit<T>(r: lfs::Result<T>) -> Result<Out, Ek> {
    r.map(|_| Out::Unit).map_err(ek)
}

fn on_engine(fs: &Fs, s: &Step) -> Result<Out, Ek> {
    match s {
        Step::Create(p, perm, uid, gid) => {
            let d = e_parent(fs, p)?;
            unit(fs.create(d, last(p), S_IFREG | perm, 0, *uid, *gid))
        }
        Step::Mkdir(p, perm, uid, gid) => {
            let d = e_parent(fs, p)?;
            unit(fs.mkdir(d, last(p), *perm, *uid, *gid))
        }
        Step::Symlink(p, t) => {
            let d = e_parent(fs, p)?;
            unit(fs.symlink(d, last(p), t, 0, 0))
        }
        Step::Write(p, o, data) => {
            let ino = e_resolve(fs, p)?;
            fs.write(ino, *o, data).map(Out::Count).map_err(ek)
        }
        Step::Read(p, o, l) => {
            let ino = e_resolve(fs, p)?;
            fs.read(ino, *o, *l).map(Out::Data).map_err(ek)
        }
        Step::Truncate(p, size) => {
            let ino = e_resolve(fs, p)?;
            let set = SetAttr {
                size: Some(*size),
                ..SetAttr::default()
            };
            unit(fs.setattr(ino, &set))
        }
        Step::Punch(p, o, l) => {
            let ino = e_resolve(fs, p)?;
            unit(fs.fallocate(ino, *o, *l, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))
        }
        Step::Unlink(p) => {
            let d = e_parent(fs, p)?;
            unit(fs.unlink(d, last(p)))
        }
        Step::Rmdir(p) => {
            let d = e_parent(fs, p)?;
            unit(fs.rmdir(d, last(p)))
        }
        Step::Rename(a, b, mode) => {
            let da = e_parent(fs, a)?;
            let db = e_parent(fs, b)?;
            let flags = RenameFlags {
                noreplace: *mode == RenameMode::NoReplace,
                exchange: *mode == RenameMode::Exchange,
            };
            unit(fs.rename(da, last(a), db, last(b), flags))
        }
        Step::Link(a, b) => {
            let ino = e_resolve(fs, a)?;
            let d = e_parent(fs, b)?;
            unit(fs.link(ino, d, last(b)))
        }
        Step::SetXattr(p, n, v, f) => {
            let ino = e_resolve(fs, p)?;
            unit(fs.setxattr(ino, n, v, *f))
        }
        Step::GetXattr(p, n) => {
            let ino = e_resolve(fs, p)?;
            fs.getxattr(ino, n).map(Out::Data).map_err(ek)
        }
        Step::RemoveXattr(p, n) => {
            let ino = e_resolve(fs, p)?;
            unit(fs.removexattr(ino, n))
        }
        Step::ListXattr(p) => {
            let ino = e_resolve(fs, p)?;
            fs.listxattr(ino)
                .map(|mut v| {
                    // listxattr(2) promises no order.
                    v.sort();
                    Out::Names(v)
                })
                .map_err(ek)
        }
        Step::Chmod(p, perm) => {
            let ino = e_resolve(fs, p)?;
            let set = SetAttr {
                mode: Some(*perm),
                ..SetAttr::default()
            };
            unit(fs.setattr(ino, &set))
        }
        Step::Chown(p, u, g) => {
            let ino = e_resolve(fs, p)?;
            let set = SetAttr {
                uid: Some(*u),
                gid: Some(*g),
                ..SetAttr::default()
            };
            unit(fs.setattr(ino, &set))
        }
    }
}

fn brief(o: &Result<Out, Ek>) -> String {
    match o {
        Ok(Out::Data(d)) => format!("Ok({} bytes)", d.len()),
        other => format!("{other:?}"),
    }
}

/// Counts of what happened, to show the run was not vacuous.
#[derive(Debug, Default)]
struct Stats {
    ok: u64,
    errors: BTreeMap<String, u64>,
    nospace: u64,
    writes_ok: u64,
    bytes_written: u64,
    remounts: u64,
    reclaims: u64,
    crashes: u64,
    /// Crashes during a sync: the sync failed and the old state was
    /// found, it failed and the new state was found, it completed.
    crash_in_sync: [u64; 3],
    /// fdatasyncs that wrote a data-sync log, a checkpoint, nothing.
    fdatasyncs: [u64; 3],
    /// Per kind of operation: successes, errors.
    by_op: BTreeMap<String, [u64; 2]>,
}

struct Harness {
    dev: Arc<Dev>,
    fs: Option<Arc<Fs>>,
    model: Model,
    /// The model as of the last acknowledged sync.
    durable: Model,
    /// `statfs` files - ffree, minus the model's inode count: constant.
    inode_offset: Option<i64>,
    stats: Stats,
}

impl Harness {
    fn new(dev_len: u64, bps: u32, seed: u64) -> Result<Harness, String> {
        let dev = device(fresh_image(dev_len, bps), seed);
        let fs = mount(&dev)?;
        let root = fs
            .getattr(ROOT_INO)
            .map_err(|e| format!("getattr /: {e}"))?;
        let model = Model::new(root.mode, root.uid, root.gid);
        let mut h = Harness {
            dev,
            fs: Some(fs),
            durable: model.clone(),
            model,
            inode_offset: None,
            stats: Stats::default(),
        };
        h.compare("after mkfs and mount")?;
        Ok(h)
    }

    fn fs(&self) -> &Fs {
        self.fs.as_ref().expect("mounted")
    }

    /// Compares the whole tree with the model, and the inode count.
    fn compare(&mut self, when: &str) -> Result<(), String> {
        let et = engine_tree(self.fs()).map_err(|e| format!("{when}: {e}"))?;
        let mt = model_tree(&self.model);
        if let Some(d) = diff(&mt, &et) {
            return Err(format!(
                "{when}: the engine's tree differs from the model:\n{d}"
            ));
        }
        let st = self
            .fs()
            .statfs()
            .map_err(|e| format!("{when}: statfs: {e}"))?;
        let used = st.files as i64 - st.ffree as i64;
        let offset = used - self.model.nodes.len() as i64;
        match self.inode_offset {
            None => self.inode_offset = Some(offset),
            Some(o) if o != offset => {
                return Err(format!(
                    "{when}: statfs says {used} inodes in use, the model has {} (was {o} apart, now {offset})",
                    self.model.nodes.len()
                ))
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// statfs and segment usage, for a failure message.
    fn space(&self) -> String {
        let (usage, clean) = self.fs().segment_usage();
        let segs: Vec<String> = usage
            .iter()
            .map(|u| format!("{}/{}/{:x}", u.nlive, u.nblocks, u.flags))
            .collect();
        format!(
            "statfs {:?}\n{clean} clean segments; live/written/flags of each: {}",
            self.fs().statfs(),
            segs.join(" ")
        )
    }

    fn sync(&mut self) -> Result<(), String> {
        self.fs()
            .sync()
            .map_err(|e| format!("sync failed: {e}\n{}", self.space()))?;
        self.durable = self.model.clone();
        Ok(())
    }

    /// fdatasync of the file `at` picks. A data-sync log makes that file's
    /// bytes (and blocks) durable over the last durable state; it must be
    /// a file that state has. A checkpoint makes the whole model durable.
    /// Writing nothing is right only if the file is already as durable.
    fn fdatasync(&mut self, at: &Sel) -> Result<String, String> {
        let p = self.model.pick(at);
        let Ok(Some(id)) = self.model.data_target(&p) else {
            return Ok(format!("fdatasync {}: not a file", show_short(&p)));
        };
        let ino = e_resolve(self.fs(), &p)
            .map_err(|e| format!("fdatasync {}: the engine cannot find it: {e:?}", show(&p)))?;
        let count = |fs: &Fs, name: &str| fs.stats().counter(name).unwrap_or(0);
        let before = (
            count(self.fs(), "data_sync_writes"),
            count(self.fs(), "checkpoints"),
        );
        self.fs()
            .fsync(ino, true)
            .map_err(|e| format!("fdatasync {} failed: {e}\n{}", show(&p), self.space()))?;
        let after = (
            count(self.fs(), "data_sync_writes"),
            count(self.fs(), "checkpoints"),
        );
        let now = self.model.node(id).kind.clone();
        let what = if after.1 > before.1 {
            self.durable = self.model.clone();
            self.stats.fdatasyncs[1] += 1;
            "a checkpoint"
        } else if after.0 > before.0 {
            let d = self.durable.nodes.get_mut(&id).ok_or_else(|| {
                format!(
                    "fdatasync {} wrote a data-sync log for a file the last durable state lacks",
                    show(&p)
                )
            })?;
            d.kind = now;
            self.stats.fdatasyncs[0] += 1;
            "a data-sync log"
        } else {
            let same = match (self.durable.nodes.get(&id).map(|n| &n.kind), &now) {
                (Some(Kind::File { data: a, alloc: x }), Kind::File { data: b, alloc: y }) => {
                    a == b && x == y
                }
                _ => false,
            };
            if !same {
                return Err(format!(
                    "fdatasync {} wrote nothing, but the file differs from its last durable state",
                    show(&p)
                ));
            }
            self.stats.fdatasyncs[2] += 1;
            "nothing"
        };
        Ok(format!("fdatasync {}: {what}", show_short(&p)))
    }

    fn remount(&mut self) -> Result<(), String> {
        if let Err(e) = self.fs().unmount() {
            return Err(format!("unmount failed: {e}\n{}", self.space()));
        }
        let fs = self.fs.take().expect("mounted");
        drop(fs);
        self.durable = self.model.clone();
        self.fs = Some(mount(&self.dev)?);
        let r = self.fs().recovery_report();
        if !r.was_clean {
            return Err(format!(
                "mount after a clean unmount says it recovered: {r:?}"
            ));
        }
        self.stats.remounts += 1;
        self.compare("after remount")
    }

    /// Crashes the device, mounts the crash image on a new device, and
    /// checks that it holds one of `states` (as a model). The model
    /// continues from the state found.
    fn crash_and_recover(&mut self, seed: u64, states: &[Model]) -> Result<(), String> {
        self.dev
            .crash_now()
            .map_err(|e| format!("taking the crash image: {e}"))?;
        let image = self.dev.durable().snapshot();
        self.fs = None;
        self.dev = device(image, seed.wrapping_add(1));
        self.fs = Some(mount(&self.dev).map_err(|e| format!("after a crash: {e}"))?);
        self.stats.crashes += 1;
        let et = engine_tree(self.fs()).map_err(|e| format!("after a crash: {e}"))?;
        let mut why = String::new();
        for (i, m) in states.iter().enumerate() {
            match diff(&model_tree(m), &et) {
                None => {
                    if states.len() > 1 {
                        self.stats.crash_in_sync[i] += 1;
                    }
                    self.model = m.clone();
                    self.durable = m.clone();
                    return self.compare("after crash recovery");
                }
                Some(d) => {
                    let _ = write!(why, "\ncompared with acceptable state {i}:\n{d}");
                }
            }
        }
        Err(format!(
            "after a crash the recovered tree is none of the {} acceptable states:{why}",
            states.len()
        ))
    }

    fn step(&mut self, op: &Op) -> Result<String, String> {
        match op {
            Op::Nop => return Ok(String::new()),
            Op::Sync => {
                self.sync()?;
                return Ok("sync".into());
            }
            Op::Reclaim => {
                self.sync()?;
                let r = self.fs().delete_checkpoints_older_than(Duration::ZERO);
                return match r {
                    Ok((n, freed)) => {
                        self.stats.reclaims += 1;
                        Ok(format!("reclaim: {n} checkpoints, {freed} blocks"))
                    }
                    Err(Error::NoSpace) => {
                        self.stats.nospace += 1;
                        Ok("reclaim: NoSpace".into())
                    }
                    Err(e) => Err(format!("reclaim failed: {e}\n{}", self.space())),
                };
            }
            Op::Remount => {
                self.remount()?;
                return Ok("remount".into());
            }
            Op::FDataSync { at, write } => {
                if let Some((off, len, seed)) = *write {
                    let w = Op::Write {
                        at: at.clone(),
                        off,
                        len,
                        seed,
                    };
                    self.step(&w)?;
                }
                return self.fdatasync(at);
            }
            Op::Crash { sync_first, seed } => {
                if *sync_first {
                    self.sync()?;
                }
                self.dev.set_crash_mode(CrashMode::Random { seed: *seed });
                let states = [self.durable.clone()];
                self.crash_and_recover(*seed, &states)?;
                return Ok(format!("crash (sync first: {sync_first})"));
            }
            Op::CrashInSync { nth, seed } => {
                self.dev.set_crash_mode(CrashMode::Random { seed: *seed });
                self.dev
                    .crash_at_write(self.dev.writes() + 1 + u64::from(*nth));
                let states = match self.fs().sync() {
                    // The crash point lay beyond the checkpoint's writes.
                    Ok(()) => {
                        self.stats.crash_in_sync[2] += 1;
                        vec![self.model.clone()]
                    }
                    Err(_) => vec![self.durable.clone(), self.model.clone()],
                };
                self.crash_and_recover(*seed, &states)?;
                return Ok(format!("crash at write {nth} of a sync"));
            }
            _ => {}
        }
        let step = concretize(&self.model, op).expect("a single call");
        // Every change needs space at the next checkpoint (an inode, a
        // directory or attribute block, a zeroed partial block), so any of
        // them may fail with NoSpace, and must then change nothing.
        let before = (!step.reads_only()).then(|| self.model.clone());
        let want = on_model(&mut self.model, &step);
        if want == Ok(Out::Skipped) {
            return Ok(format!("{step}: skipped (a symlink)"));
        }
        let checkpoints = self.fs().stats().counter("checkpoints");
        let got = on_engine(self.fs(), &step);
        // A change that found no space made room itself (fs/space.rs),
        // writing a checkpoint of everything before it.
        if self.fs().stats().counter("checkpoints") > checkpoints {
            if let Some(b) = &before {
                self.durable = b.clone();
            }
        }
        let agree = match (&want, &got) {
            (Ok(a), Ok(b)) => a == b,
            (Err(alts), Err(e)) => alts.contains(e),
            (Ok(_), Err(Ek::NoSpace)) => {
                // The engine may run out of space; then nothing changed.
                self.model = before.ok_or_else(|| {
                    format!("{step}: NoSpace from an operation that changes nothing")
                })?;
                self.stats.nospace += 1;
                true
            }
            _ => false,
        };
        if !agree {
            let w = match &want {
                Ok(o) => brief(&Ok(o.clone())),
                Err(alts) => format!("Err(one of {alts:?})"),
            };
            return Err(format!(
                "{step}: model says {w}, engine says {}",
                brief(&got)
            ));
        }
        let kind = step.to_string();
        let kind = kind.split(' ').next().unwrap_or_default();
        let counts = self.stats.by_op.entry(kind.to_string()).or_default();
        counts[usize::from(got.is_err())] += 1;
        match &got {
            Ok(_) => {
                self.stats.ok += 1;
                if let Step::Write(_, _, d) = &step {
                    self.stats.writes_ok += 1;
                    self.stats.bytes_written += d.len() as u64;
                }
            }
            Err(e) => *self.stats.errors.entry(format!("{e:?}")).or_default() += 1,
        }
        Ok(format!("{step} -> {}", brief(&got)))
    }

    fn finish(&mut self) -> Result<(), String> {
        self.remount()?;
        let fs = self.fs.take().expect("mounted");
        fs.unmount()
            .map_err(|e| format!("final unmount failed: {e}"))
    }
}

/// Runs `ops`; on failure, the error names the operation and shows the
/// steps before it.
fn run(dev_len: u64, bps: u32, seed: u64, ops: &[Op]) -> Result<Stats, String> {
    let mut h = Harness::new(dev_len, bps, seed)?;
    let mut trail: Vec<String> = Vec::new();
    let fail = |i: usize, op: &Op, trail: &[String], e: String| {
        let from = trail.len().saturating_sub(60);
        let mut s = format!(
            "op #{i} of {} ({op:?}) failed (device {dev_len} bytes, {bps} blocks per segment):\n{e}\n\
             the steps before it:\n",
            ops.len()
        );
        for (j, t) in trail.iter().enumerate().skip(from) {
            if !t.is_empty() {
                let _ = writeln!(s, "  #{j}: {t}");
            }
        }
        s
    };
    for (i, op) in ops.iter().enumerate() {
        match h.step(op) {
            Ok(t) => trail.push(t),
            Err(e) => return Err(fail(i, op, &trail, e)),
        }
        if let Err(e) = h.compare("after the step") {
            return Err(fail(i, op, &trail, e));
        }
    }
    h.finish()
        .map_err(|e| fail(ops.len(), &Op::Remount, &trail, e))?;
    Ok(h.stats)
}

/// Geometries the proptest draws from: 16 to 24 MiB, 32 to 64 blocks per
/// segment.
const GEOMETRIES: [(u64, u32); 6] = [
    (16 << 20, 32),
    (20 << 20, 48),
    (24 << 20, 64),
    (16 << 20, 64),
    (20 << 20, 32),
    (24 << 20, 48),
];

/// Cases per run; `PROPTEST_CASES` overrides it for a longer soak.
const CASES: u32 = 48;

/// Extra seeds of the long sequence for a soak (`LFS_MODEL_SEEDS=n`).
fn soak_seeds() -> u64 {
    std::env::var("LFS_MODEL_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES),
        max_shrink_iters: 2000,
        ..ProptestConfig::default()
    })]

    #[test]
    fn engine_matches_model(
        g in 0..GEOMETRIES.len(),
        seed in any::<u64>(),
        raw in prop::collection::vec(any::<Raw>(), 50..200),
    ) {
        let ops: Vec<Op> = raw.into_iter().map(decode).collect();
        let (len, bps) = GEOMETRIES[g];
        if let Err(e) = run(len, bps, seed, &ops) {
            return Err(TestCaseError::fail(e));
        }
    }
}

/// A device small enough that the operation mix fills it with live data
/// (history yields to space, so only live data fills it): NoSpace is
/// common, must leave no trace, and must never come from a sync.
const NEAR_FULL: (u64, u32) = (2 << 20, 32);

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES / 3),
        max_shrink_iters: 2000,
        ..ProptestConfig::default()
    })]

    #[test]
    fn engine_matches_model_near_full(
        seed in any::<u64>(),
        raw in prop::collection::vec(any::<Raw>(), 50..200),
    ) {
        let ops: Vec<Op> = raw.into_iter().map(decode).collect();
        if let Err(e) = run(NEAR_FULL.0, NEAR_FULL.1, seed, &ops) {
            return Err(TestCaseError::fail(e));
        }
    }
}

// ---------------------------------------------------------------------------
// Long fixed sequences

struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[test]
fn long_fixed_sequence_with_remounts() {
    for seed in 0..soak_seeds() {
        long_sequence(0x6c66_732d_6d6f_6465 + seed);
    }
}

/// `n` operations from the splitmix64 stream of `seed`, with a remount
/// every 250.
fn fixed_ops(seed: u64, n: usize) -> Vec<Op> {
    let mut rng = SplitMix64(seed);
    (0..n)
        .map(|i| {
            if i % 250 == 249 {
                return Op::Remount;
            }
            let mut r = [0u32; 6];
            for w in &mut r {
                *w = rng.next() as u32;
            }
            decode(r)
        })
        .collect()
}

fn long_sequence(seed: u64) {
    let ops = fixed_ops(seed, 2000);
    let stats = run(20 << 20, 64, seed, &ops)
        .unwrap_or_else(|e| panic!("long sequence of seed {seed:#x}: {e}"));
    eprintln!("long sequence of seed {seed:#x}: {stats:?}");
    // The run must have done real work, or it proves nothing.
    assert!(
        stats.writes_ok > 200,
        "only {} writes succeeded",
        stats.writes_ok
    );
    assert!(stats.remounts >= 8, "only {} remounts", stats.remounts);
    assert!(stats.crashes >= 5, "only {} crashes", stats.crashes);
    assert!(
        stats.fdatasyncs[0] >= 5,
        "only {} fdatasyncs wrote a data-sync log",
        stats.fdatasyncs[0]
    );
    assert!(
        stats.nospace * 50 < stats.writes_ok,
        "{} NoSpace errors for {} writes: make the device larger",
        stats.nospace,
        stats.writes_ok
    );
}

/// The operation mix on a device it fills: many operations fail with
/// NoSpace, each must change nothing, and every sync, remount and crash
/// recovery must still succeed.
#[test]
fn fixed_sequence_on_a_nearly_full_device() {
    // The second seed once made a sync fail for space at its op 773, with
    // no clean segment left.
    let seeds = [0x6675_6c6c, 0x6675_6c74];
    for seed in seeds
        .into_iter()
        .chain((1..soak_seeds()).map(|s| 0x6675_6d00 + s))
    {
        let ops = fixed_ops(seed, 1000);
        let stats = run(NEAR_FULL.0, NEAR_FULL.1, seed, &ops)
            .unwrap_or_else(|e| panic!("near-full sequence of seed {seed:#x}: {e}"));
        eprintln!("near-full sequence of seed {seed:#x}: {stats:?}");
        // Or the run never came near full and proves nothing about it.
        assert!(
            stats.nospace >= 10,
            "only {} NoSpace errors: the device never filled",
            stats.nospace
        );
        // (Admission near full books up to 3 metadata blocks per dirty
        // block, bounded by the metadata there is, so a nearly full
        // device takes fewer writes than it would with a looser guess.)
        assert!(
            stats.writes_ok > 50,
            "only {} writes succeeded",
            stats.writes_ok
        );
    }
}

// ---------------------------------------------------------------------------
// Minimal reproductions of what the model found, and directed cases

fn small_fs() -> (Arc<Dev>, Arc<Fs>) {
    let dev = device(fresh_image(16 << 20, 32), 1);
    let fs = mount(&dev).unwrap_or_else(|e| panic!("{e}"));
    (dev, fs)
}

fn remount_clean(dev: &Arc<Dev>, fs: Arc<Fs>) -> Arc<Fs> {
    fs.unmount().unwrap();
    drop(fs);
    mount(dev).unwrap_or_else(|e| panic!("{e}"))
}

/// st_blocks must not depend on whether the block map is cached: a file
/// with a block past the 12 direct ones reports its indirect block from
/// the on-disk inode after a remount, and stops counting it once a read
/// has loaded the block map.
#[test]
fn st_blocks_does_not_change_when_a_file_is_read() {
    let (dev, fs) = small_fs();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    fs.write(f.ino, 13 * BS, b"x").unwrap();
    let fs = remount_clean(&dev, fs);
    let before = fs.getattr(f.ino).unwrap().blocks;
    assert_eq!(fs.read(f.ino, 13 * BS, 1).unwrap(), b"x");
    let after = fs.getattr(f.ino).unwrap().blocks;
    assert_eq!(
        before, after,
        "st_blocks of a 1-block file with an indirect block: {before} before a read, {after} after"
    );
    fs.unmount().unwrap();
}

/// fallocate(2): "Partial filesystem blocks are zeroed, and whole
/// filesystem blocks are removed from the file." A punch that covers the
/// last, partial block of the file entirely (it runs past EOF) must remove
/// it too.
#[test]
fn punch_through_eof_deallocates_the_last_partial_block() {
    let (_dev, fs) = small_fs();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    fs.write(f.ino, 0, &[1u8; 6000]).unwrap();
    fs.fallocate(f.ino, 0, 8192, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)
        .unwrap();
    let a = fs.getattr(f.ino).unwrap();
    assert_eq!(a.size, 6000);
    assert_eq!(fs.read(f.ino, 0, 10_000).unwrap(), vec![0u8; 6000]);
    assert_eq!(
        a.blocks, 0,
        "both blocks lie inside the punched range, yet st_blocks is {}",
        a.blocks
    );
    fs.unmount().unwrap();
}

/// The same for a punch of exactly one aligned block in the middle.
#[test]
fn punch_of_one_whole_block_deallocates_it() {
    let (_dev, fs) = small_fs();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    fs.write(f.ino, 0, &[1u8; 3 * BS as usize]).unwrap();
    fs.fallocate(f.ino, BS, BS, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)
        .unwrap();
    let a = fs.getattr(f.ino).unwrap();
    assert_eq!(
        fs.read(f.ino, BS, BS as u32).unwrap(),
        vec![0u8; BS as usize]
    );
    assert_eq!(
        a.blocks,
        2 * BS / 512,
        "block 1 was punched whole, yet st_blocks is {}",
        a.blocks
    );
    fs.unmount().unwrap();
}

/// RENAME_EXCHANGE of a directory and a file in the same directory moves
/// nothing between directories, so the parent's link count must not
/// change (it did by one; after a second exchange, by two).
#[test]
fn exchange_of_a_directory_and_a_file_in_one_directory_keeps_nlink() {
    let (dev, fs) = small_fs();
    let d = fs.mkdir(ROOT_INO, b"p", 0o755, 0, 0).unwrap();
    fs.mkdir(d.ino, b"dir", 0o755, 0, 0).unwrap();
    fs.create(d.ino, b"file", 0o644, 0, 0, 0).unwrap();
    assert_eq!(fs.getattr(d.ino).unwrap().nlink, 3);
    let ex = RenameFlags {
        noreplace: false,
        exchange: true,
    };
    fs.rename(d.ino, b"dir", d.ino, b"file", ex).unwrap();
    assert_eq!(
        fs.lookup(d.ino, b"file").unwrap().mode & S_IFMT,
        S_IFDIR,
        "the exchange did not happen"
    );
    let n = fs.getattr(d.ino).unwrap().nlink;
    assert_eq!(
        n, 3,
        "/p has one subdirectory but nlink {n} after the exchange"
    );
    let fs = remount_clean(&dev, fs);
    let n = fs.getattr(d.ino).unwrap().nlink;
    assert_eq!(
        n, 3,
        "/p has one subdirectory but nlink {n} after a remount"
    );
    fs.unmount().unwrap();
}

/// A 16 MiB filesystem with 32-block segments whose file `/f` fills it
/// (not one more block fits), synced, mounted with the default dirty
/// limit (so background checkpoints keep each batch small) and no
/// timer.
fn full_fs() -> (Arc<Dev>, Arc<Fs>, u64) {
    let dev = device(fresh_image(16 << 20, 32), 1);
    let d: Arc<dyn BlockDevice> = dev.clone();
    let opts = MountOptions {
        checkpoint_interval: Duration::from_secs(3600),
        ..MountOptions::default()
    };
    let fs = Fs::mount(d, opts).unwrap();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    let filled = fill(&fs, f.ino);
    fs.sync().unwrap();
    (dev, fs, filled)
}

/// Writes to `ino` until not even one more block fits; returns the bytes
/// written.
fn fill(fs: &Fs, ino: u64) -> u64 {
    let mut off = 0u64;
    let mut chunk = 1usize << 20;
    loop {
        match fs.write(ino, off, &vec![5u8; chunk]) {
            Ok(_) => off += chunk as u64,
            Err(Error::NoSpace) if chunk > BS as usize => chunk /= 2,
            Err(Error::NoSpace) => return off,
            Err(e) => panic!("write at {off}: {e}"),
        }
    }
}

/// A symlink that fails with NoSpace must leave nothing behind. It left a
/// symlink with an empty target (the inode and entry are made before the
/// target's block is admitted), which survives a remount.
#[test]
fn symlink_that_fails_for_space_leaves_no_entry() {
    let (dev, fs, _) = full_fs();
    match fs.symlink(ROOT_INO, b"s", b"target", 0, 0) {
        Ok(_) => {
            let s = fs.lookup(ROOT_INO, b"s").unwrap();
            assert_eq!(fs.readlink(s.ino).unwrap(), b"target");
        }
        Err(Error::NoSpace) => {
            let left = fs.lookup(ROOT_INO, b"s");
            assert!(
                matches!(left, Err(Error::NotFound)),
                "symlink said NoSpace but left an entry behind: {left:?}"
            );
        }
        Err(e) => panic!("symlink on a full device: {e}"),
    }
    let fs = remount_clean(&dev, fs);
    let left = fs.lookup(ROOT_INO, b"s");
    assert!(
        !matches!(left, Ok(ref a) if a.size == 0),
        "an empty symlink survived the remount: {left:?}"
    );
    fs.unmount().unwrap();
}

/// "Space freed since the last checkpoint is never reused before the next
/// one" (DESIGN §4): after unlink, a sync and the deletion of the older
/// checkpoints (which kept the file), the space is free. It was
/// not: a segment whose last live block dies in checkpoint k is only
/// collected at the start of checkpoint k + 1, and a sync with nothing
/// new to write makes no checkpoint, so on a full device writes keep
/// failing with NoSpace and statfs shows no free space.
#[test]
fn space_of_a_deleted_file_is_free_after_the_next_sync() {
    let (_dev, fs, filled) = full_fs();
    let full = fs.statfs().unwrap();
    fs.unlink(ROOT_INO, b"f").unwrap();
    fs.sync().unwrap();
    let (deleted, freed) = fs.delete_checkpoints_older_than(Duration::ZERO).unwrap();
    assert!(deleted >= 1 && freed * BS >= filled, "{deleted} {freed}");
    fs.sync().unwrap();
    let after = fs.statfs().unwrap();
    let g = fs.create(ROOT_INO, b"new", 0o644, 0, 0, 0).unwrap();
    let r = fs.write(g.ino, 0, &vec![3u8; (filled / 2) as usize]);
    assert!(
        r.is_ok(),
        "deleted a {filled}-byte file and synced, yet writing half as much fails: {r:?}\n\
         statfs when full: {full:?}\nstatfs after unlink and sync: {after:?}"
    );
    fs.unmount().unwrap();
}

/// Operations that need space only at the checkpoint (create, setxattr:
/// inode file, directory and attribute blocks) were admitted on a full
/// device without a check; the next sync then could not build its
/// checkpoint, the filesystem went read-only for good, and every change
/// since the last sync was lost. Running out of space must be an error of
/// the operation, never of the checkpoint.
#[test]
fn metadata_changes_on_a_full_device_fail_up_front_not_at_the_checkpoint() {
    let (dev, fs, _) = full_fs();
    let mut made = Vec::new();
    'creating: for i in 0..400u32 {
        let mut name = format!("file-{i}-").into_bytes();
        name.resize(200, b'z');
        let a = match fs.create(ROOT_INO, &name, 0o644, 0, 0, 0) {
            Ok(a) => a,
            Err(Error::NoSpace) => break,
            Err(e) => panic!("create {i} on a full device: {e}"),
        };
        made.push(name);
        match fs.setxattr(a.ino, b"user.k", &[1u8; 1000], 0) {
            Ok(()) => {}
            Err(Error::NoSpace) => break 'creating,
            Err(e) => panic!("setxattr {i} on a full device: {e}"),
        }
    }
    let r = fs.sync();
    assert!(
        r.is_ok(),
        "{} creates with a 1000-byte xattr each were accepted on a full device, then sync failed: {r:?}",
        made.len()
    );
    let fs = remount_clean(&dev, fs);
    for n in &made {
        let r = fs.lookup(ROOT_INO, n);
        assert!(
            r.is_ok(),
            "a created file is gone after sync and remount: {r:?}"
        );
    }
    fs.unmount().unwrap();
}

/// `write` admits dirty data against the free space less an estimate of
/// the checkpoint's own blocks (one in 32, plus 64). With 32-block
/// segments and one large batch (a dirty limit above the free space, so
/// no background checkpoint runs), the estimate is short: the sync that
/// follows cannot place its checkpoint, fails with NoSpace, and the
/// filesystem goes read-only with every write since the last sync lost.
/// Whatever `write` accepted, the checkpoint must be able to hold.
#[test]
fn data_accepted_by_write_always_fits_in_the_next_checkpoint() {
    let dev = device(fresh_image(16 << 20, 32), 1);
    let fs = mount(&dev).unwrap_or_else(|e| panic!("{e}"));
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    let filled = fill(&fs, f.ino);
    let r = fs.sync();
    assert!(
        r.is_ok(),
        "write accepted {filled} bytes in one batch, then sync failed: {r:?}"
    );
    let fs = remount_clean(&dev, fs);
    assert_eq!(fs.getattr(f.ino).unwrap().size, filled);
    fs.unmount().unwrap();
}

/// Names of 255 bytes work and survive a remount; 256 bytes are
/// NameTooLong for every call that takes a new name, and for lookup (which
/// is where the kernel meets a long name first). Symlink targets may be
/// 4095 bytes, not 4096 (PATH_MAX with its NUL).
#[test]
fn name_and_target_length_limits() {
    let (dev, fs) = small_fs();
    let ok = vec![b'n'; 255];
    let long = vec![b'n'; 256];
    let f = fs.create(ROOT_INO, &ok, 0o644, 0, 0, 0).unwrap();
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap();
    let too_long = |what: &str, r: lfs::Result<()>| {
        assert!(
            matches!(r, Err(Error::NameTooLong)),
            "{what} with a 256-byte name: {r:?}"
        );
    };
    too_long("create", fs.create(d.ino, &long, 0o644, 0, 0, 0).map(drop));
    too_long("mkdir", fs.mkdir(d.ino, &long, 0o755, 0, 0).map(drop));
    too_long("symlink", fs.symlink(d.ino, &long, b"t", 0, 0).map(drop));
    too_long("link", fs.link(f.ino, d.ino, &long).map(drop));
    too_long(
        "rename",
        fs.rename(ROOT_INO, &ok, d.ino, &long, RenameFlags::default()),
    );
    too_long("lookup", fs.lookup(d.ino, &long).map(drop));
    let target = vec![b't'; 4095];
    let s = fs.symlink(d.ino, b"s", &target, 0, 0).unwrap();
    too_long(
        "symlink with a 4096-byte target",
        fs.symlink(d.ino, b"s2", &[b't'; 4096], 0, 0).map(drop),
    );
    assert!(matches!(fs.lookup(d.ino, b"s2"), Err(Error::NotFound)));
    let names: Vec<Vec<u8>> = fs
        .readdir(d.ino, 0)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, vec![b".".to_vec(), b"..".to_vec(), b"s".to_vec()]);
    let fs = remount_clean(&dev, fs);
    assert_eq!(fs.lookup(ROOT_INO, &ok).unwrap().ino, f.ino);
    assert_eq!(fs.readlink(s.ino).unwrap(), target);
    fs.unmount().unwrap();
}

/// On a full device, a call that fails for its own reason must say so,
/// not NoSpace: ENOSPC tells the user to free space, which would not help.
/// The space check came before the argument checks in setxattr (flags,
/// size), rename (non-empty target, own subtree, missing target of an
/// exchange) and link (taken name). setxattr's and the non-empty target's
/// reach the engine through FUSE (the kernel checks neither).
#[test]
fn on_a_full_device_invalid_calls_report_their_own_error() {
    let dev = device(fresh_image(16 << 20, 32), 1);
    let d: Arc<dyn BlockDevice> = dev.clone();
    let opts = MountOptions {
        checkpoint_interval: Duration::from_secs(3600),
        ..MountOptions::default()
    };
    let fs = Fs::mount(d, opts).unwrap();
    let a = fs.mkdir(ROOT_INO, b"a", 0o755, 0, 0).unwrap();
    fs.create(a.ino, b"x", 0o644, 0, 0, 0).unwrap();
    fs.mkdir(ROOT_INO, b"b", 0o755, 0, 0).unwrap();
    let g = fs.create(ROOT_INO, b"g", 0o644, 0, 0, 0).unwrap();
    fs.setxattr(g.ino, b"user.k", b"v", 0).unwrap();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    fill(&fs, f.ino);
    fs.sync().unwrap();
    let plain = RenameFlags::default();
    let exchange = RenameFlags {
        noreplace: false,
        exchange: true,
    };
    let got = [
        (
            "setxattr XATTR_REPLACE of a missing attribute",
            "NoData",
            fs.setxattr(g.ino, b"user.missing", b"v", XATTR_REPLACE),
        ),
        (
            "setxattr XATTR_CREATE of an existing attribute",
            "Exists",
            fs.setxattr(g.ino, b"user.k", b"v", XATTR_CREATE),
        ),
        (
            "setxattr of a value larger than a block",
            "TooBig",
            fs.setxattr(g.ino, b"user.big", &[0u8; 5000], 0),
        ),
        (
            "rename of a directory onto a non-empty one",
            "NotEmpty",
            fs.rename(ROOT_INO, b"b", ROOT_INO, b"a", plain),
        ),
        (
            "rename of a directory into itself",
            "InvalidArgument",
            fs.rename(ROOT_INO, b"a", a.ino, b"inside", plain),
        ),
        (
            "RENAME_EXCHANGE with a missing target",
            "NotFound",
            fs.rename(ROOT_INO, b"g", ROOT_INO, b"missing", exchange),
        ),
        (
            "link onto a taken name",
            "Exists",
            fs.link(g.ino, ROOT_INO, b"a").map(drop),
        ),
    ];
    let wrong: Vec<String> = got
        .iter()
        .filter(|(_, want, r)| {
            !matches!(
                (want, r),
                (&"NoData", Err(Error::NoData))
                    | (&"Exists", Err(Error::Exists))
                    | (&"TooBig", Err(Error::TooBig))
                    | (&"NotEmpty", Err(Error::NotEmpty))
                    | (&"InvalidArgument", Err(Error::InvalidArgument(_)))
                    | (&"NotFound", Err(Error::NotFound))
            )
        })
        .map(|(what, want, r)| format!("{what}: expected {want}, got {r:?}"))
        .collect();
    assert!(wrong.is_empty(), "on a full device:\n{}", wrong.join("\n"));
    fs.unmount().unwrap();
}

/// A rename that fails changes nothing, so it must not count dirty
/// blocks: the count, which admission and statfs subtract from the free
/// space, grew by two for every failed rename until the next checkpoint.
#[test]
fn failed_renames_do_not_use_up_space() {
    let (_dev, fs) = small_fs();
    let a = fs.mkdir(ROOT_INO, b"a", 0o755, 0, 0).unwrap();
    fs.sync().unwrap();
    let before = fs.statfs().unwrap().bavail;
    for _ in 0..100 {
        let r = fs.rename(ROOT_INO, b"a", a.ino, b"inside", RenameFlags::default());
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    }
    let after = fs.statfs().unwrap().bavail;
    assert_eq!(
        before,
        after,
        "100 failed renames took {} blocks of free space",
        before.saturating_sub(after)
    );
    fs.unmount().unwrap();
}

/// A change the engine accepts must fit in the next checkpoint, however
/// full the device. chmod, truncate, punch, unlink (and chown, rmdir,
/// removexattr) pass no space check, yet each checkpoint writes inode
/// file, DAT, usage and super root blocks; on a full device the copies
/// they supersede die, but every segment written keeps a few live latest
/// copies, so none is ever wholly dead and reused. About 60 chmod + sync
/// rounds use up the reserve, the checkpoint fails with NoSpace, and the
/// filesystem goes read-only with the change lost.
#[test]
fn changes_on_a_full_device_never_make_the_checkpoint_fail() {
    let dev = device(fresh_image(16 << 20, 32), 1);
    let fs = mount(&dev).unwrap_or_else(|e| panic!("{e}"));
    // Inodes spread over many inode file blocks, then the rest filled.
    let mut inos = Vec::new();
    for i in 0..600u32 {
        let a = fs
            .create(ROOT_INO, format!("f{i}").as_bytes(), 0o644, 0, 0, 0)
            .unwrap();
        fs.write(a.ino, 0, &[7u8; 5000]).unwrap();
        inos.push(a.ino);
        if i % 20 == 19 {
            fs.sync().unwrap();
        }
    }
    let big = fs.create(ROOT_INO, b"big", 0o644, 0, 0, 0).unwrap();
    fill(&fs, big.ino);
    fs.sync().unwrap();
    let mut refused = 0;
    for (k, &ino) in inos.iter().enumerate() {
        let set = SetAttr {
            mode: Some(0o600),
            ..SetAttr::default()
        };
        match fs.setattr(ino, &set) {
            Ok(_) => {}
            Err(Error::NoSpace) => refused += 1,
            Err(e) => panic!("chmod {k}: {e}"),
        }
        let r = fs.sync();
        assert!(
            r.is_ok(),
            "chmod {k} of 600 on a full device ({refused} refused), then sync: {r:?}; \
             {} clean segments",
            fs.segment_usage().1
        );
    }
    fs.unmount().unwrap();
}

/// Found by a soak of `engine_matches_model` (PROPTEST_CASES=2000): a
/// mount (after a clean remount) crashed in its first checkpoint, which
/// spanned two segments; its second log, with a super root, landed and the
/// first did not. Recovery mounted the checkpoint before, and gave the
/// next mount's logs the same sequence numbers the crashed mount had used
/// (both counted from the same last log). That mount's checkpoint ended
/// at the segment's end, the next recovery's scan went on into the next
/// segment, found the crashed mount's super root with a number that fit,
/// and mounted it: its DAT map named blocks since overwritten. The
/// superblock now records the first number each mount uses
/// (`seq_floor`), and the next mount starts above it.
#[test]
fn a_mount_that_crashed_in_its_first_checkpoint_leaves_no_log_in_the_chain() {
    let raw: [Raw; 50] = [
        [1096991330, 0, 0, 0, 0, 0],
        [4027089585, 376570, 0, 0, 0, 0],
        [823586935, 0, 0, 0, 0, 0],
        [2489399330, 4312410, 0, 0, 0, 0],
        [1188579925, 0, 0, 0, 0, 0],
        [320539000, 350, 0, 10618460, 88769119, 0],
        [1941773290, 570, 0, 723732268, 610744125, 0],
        [3865201000, 20836410, 0, 0, 115891695, 0],
        [594603935, 0, 0, 0, 0, 0],
        [
            3162410470, 3057413809, 2310372928, 13, 1481905309, 846411085,
        ],
        [
            2308155982, 1966726640, 2805249522, 3851848370, 2396864907, 2226314499,
        ],
        [
            68225601, 1447286678, 557348456, 3815674485, 332125456, 966869128,
        ],
        [
            2746757974, 832745204, 3077864153, 3518195089, 1390898275, 811080441,
        ],
        [
            2201327330, 2712108649, 762988982, 1208944033, 4063767601, 3254667380,
        ],
        [
            2496726965, 3933977431, 3373093672, 611118383, 2599541537, 921193035,
        ],
        [
            2482798601, 1084572390, 2519827502, 3567993294, 46445168, 134325890,
        ],
        [
            3129262356, 208777565, 4263579518, 676977619, 1425002925, 3363088208,
        ],
        [
            3985517114, 3522494037, 3992621606, 1558462898, 2112800603, 2577031256,
        ],
        [
            1340806214, 241420055, 285394617, 4011010012, 1945192873, 112246117,
        ],
        [
            2196938600, 3280333909, 2604778294, 136794995, 266452784, 2378259616,
        ],
        [
            4134162721, 3050619062, 3800153932, 3631008771, 2329451098, 1978153043,
        ],
        [
            3525318927, 577754080, 4278301276, 3070864902, 2410716695, 446174343,
        ],
        [
            1431236981, 1507976445, 2437778970, 3601262910, 1290350313, 2798035182,
        ],
        [
            481664437, 2428699009, 1978931997, 822126980, 871820025, 184416762,
        ],
        [
            4103444884, 930593159, 2813730330, 3083685395, 4239005787, 3706763158,
        ],
        [
            3432752403, 1397528206, 827022881, 1339848136, 3808667713, 2552620497,
        ],
        [
            3113026912, 1769288200, 3119240058, 801197368, 3329514332, 259728102,
        ],
        [
            549491451, 829253713, 2411690650, 808302912, 1210860958, 3241001163,
        ],
        [
            3625306481, 1501821086, 1468064633, 116099637, 2858729208, 455607742,
        ],
        [
            3590016135, 2312640112, 1931232900, 22584404, 3464341287, 2494529455,
        ],
        [
            18794852, 3454380986, 2791609544, 4222988785, 2922670279, 775090929,
        ],
        [
            1265850097, 3274550060, 707099999, 2893715114, 2743304690, 2036771435,
        ],
        [
            1331914726, 3780177568, 462478503, 2102651474, 3574967680, 3347903913,
        ],
        [
            1802593376, 749786657, 1623145896, 3899088527, 1770179846, 2157458197,
        ],
        [
            371553333, 1512818992, 3916701970, 3830571426, 2315393389, 837816261,
        ],
        [
            1808488260, 2210771461, 3603733511, 2949136878, 298010044, 2063017098,
        ],
        [
            153152604, 3500290386, 2353323882, 1615748265, 1338020980, 775234771,
        ],
        [
            3912457885, 1507229977, 3353688349, 1635393738, 835192740, 745133840,
        ],
        [
            340226481, 4195217269, 3761282448, 3524517894, 1672046538, 1189723396,
        ],
        [
            3804530773, 805195806, 3823892802, 2412119460, 2706330283, 2172224139,
        ],
        [
            2731403353, 3936599145, 928871044, 386705682, 2450815213, 2522378508,
        ],
        [
            3754291605, 1122692171, 396152081, 1558052363, 2076901518, 148869096,
        ],
        [
            3066418743, 1666980793, 2271456519, 288435246, 3814470365, 1176400223,
        ],
        [
            1149622338, 3840140619, 3815166931, 1926229849, 3139880206, 130989783,
        ],
        [
            1286572720, 2772243064, 2270686257, 361655384, 1026141708, 1974303749,
        ],
        [
            2112427471, 1784967367, 966145995, 783543229, 3944170187, 2992081494,
        ],
        [
            3011118546, 2716407843, 3031467, 127395525, 2915931341, 2001146572,
        ],
        [
            2071675787, 3265064856, 2547043861, 1352106224, 933283194, 4040991933,
        ],
        [
            23035998, 2818033265, 3892388981, 3330366291, 927558355, 983339791,
        ],
        [
            2354982184, 2284672974, 3816463613, 4068225349, 1313041844, 2959565127,
        ],
    ];
    let ops: Vec<Op> = raw.into_iter().map(decode).collect();
    let (len, bps) = GEOMETRIES[1];
    if let Err(e) = run(len, bps, 0, &ops) {
        panic!("{e}");
    }
}
