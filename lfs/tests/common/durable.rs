//! The model of what a crash must keep, shared by the crash matrix
//! (crash.rs), the I/O error tests (ioerrors.rs) and the operation-
//! sequence fuzz target (`ops.rs`, which `fuzz/fuzz_targets/ops_crash.rs`
//! includes with `#[path]`): the tree a user can observe ([`tree`]), the
//! journal of the states made durable ([`Journal`]) and the rule a
//! recovered tree is held to ([`Journal::allows`]).
//!
//! It depends on nothing but `lfs` and std, so that the fuzz crate can
//! compile it as it is.

use std::collections::BTreeMap;
use std::time::UNIX_EPOCH;

use lfs::format::{FileType, ROOT_INO};
use lfs::fs::Fs;

/// Everything a user can observe of one name, as it must survive a crash.
/// The inode number is in it so hard links must still share an inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub ino: u64,
    pub kind: FileType,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub mtime_ns: u128,
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    /// A regular file's bytes, a symlink's target, empty otherwise.
    pub data: Vec<u8>,
}

/// path → what is there.
pub type Tree = BTreeMap<String, Entry>;

pub fn entry(fs: &Fs, ino: u64, kind: FileType) -> lfs::Result<Entry> {
    let data = match kind {
        FileType::Regular => {
            let size = fs.getattr(ino)?.size;
            fs.read(ino, 0, size as u32 + 1)?
        }
        FileType::Symlink => fs.readlink(ino)?,
        _ => Vec::new(),
    };
    entry_with(fs, ino, kind, data)
}

/// [`entry`] with the bytes the caller knows the file holds, not read.
pub fn entry_with(fs: &Fs, ino: u64, kind: FileType, data: Vec<u8>) -> lfs::Result<Entry> {
    let a = fs.getattr(ino)?;
    let mut xattrs = BTreeMap::new();
    for name in fs.listxattr(ino)? {
        let v = fs.getxattr(ino, &name)?;
        xattrs.insert(name, v);
    }
    Ok(Entry {
        ino,
        kind,
        mode: a.mode,
        uid: a.uid,
        gid: a.gid,
        nlink: a.nlink,
        mtime_ns: a
            .mtime
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
        xattrs,
        data,
    })
}

pub fn walk(fs: &Fs, ino: u64, prefix: &str, out: &mut Tree) -> lfs::Result<()> {
    for e in fs.list_dir(ino)? {
        let path = format!("{prefix}/{}", String::from_utf8_lossy(&e.name));
        out.insert(path.clone(), entry(fs, e.ino, e.kind)?);
        if e.kind == FileType::Directory {
            walk(fs, e.ino, &path, out)?;
        }
    }
    Ok(())
}

pub fn tree(fs: &Fs) -> lfs::Result<Tree> {
    let mut t = Tree::new();
    t.insert("/".into(), entry(fs, ROOT_INO, FileType::Directory)?);
    walk(fs, ROOT_INO, "", &mut t)?;
    Ok(t)
}

/// The states a crash may recover: every acknowledged one, and the one an
/// fsync, sync, checkpoint or cleaning pass was making durable when the
/// crash hit it (an fdatasync makes one of two: its file alone, with a
/// data-sync log, or everything, with a checkpoint).
pub struct Journal {
    pub acked: Vec<Tree>,
    pub in_flight: Option<Tree>,
    pub in_flight_alt: Option<Tree>,
}

impl Journal {
    /// Runs `op`, which must not change the tree but makes it durable.
    pub fn durable<T>(&mut self, fs: &Fs, op: impl FnOnce() -> lfs::Result<T>) -> lfs::Result<T> {
        self.maybe_durable(fs, op, || true)
    }

    /// Runs `op`, which must not change the tree and makes it durable
    /// only if it writes a checkpoint (a cleaning pass, a deletion of
    /// checkpoints); `wrote`, asked after it succeeded, says whether it
    /// did. Until it returns, the tree may be recovered either way.
    pub fn maybe_durable<T>(
        &mut self,
        fs: &Fs,
        op: impl FnOnce() -> lfs::Result<T>,
        wrote: impl FnOnce() -> bool,
    ) -> lfs::Result<T> {
        self.in_flight = Some(tree(fs)?);
        let r = op()?;
        if wrote() {
            self.acked.extend(self.in_flight.take());
        } else {
            self.in_flight = None;
        }
        Ok(r)
    }

    /// Runs `op`, an fdatasync of `ino` that makes only that file's data,
    /// size and times durable (a data-sync log): the state it makes
    /// durable is the last acknowledged one with that file's bytes and
    /// mtime as they are now.
    pub fn file_durable(
        &mut self,
        fs: &Fs,
        ino: u64,
        op: impl FnOnce() -> lfs::Result<()>,
    ) -> lfs::Result<()> {
        self.in_flight = Some(self.with_file_as_now(fs, ino)?);
        op()?;
        self.acked.extend(self.in_flight.take());
        Ok(())
    }

    /// The last acknowledged state with file `ino`'s bytes and mtime as
    /// they are now.
    pub fn with_file_as_now(&self, fs: &Fs, ino: u64) -> lfs::Result<Tree> {
        let now = tree(fs)?;
        let mut next = self.acked.last().expect("a state is acknowledged").clone();
        // A file no name reaches (unlinked while open) shows in no tree.
        let Some(cur) = now.values().find(|e| e.ino == ino).cloned() else {
            return Ok(next);
        };
        for e in next.values_mut().filter(|e| e.ino == ino) {
            e.data = cur.data.clone();
            e.mtime_ns = cur.mtime_ns;
        }
        Ok(next)
    }

    /// Runs `op`, an fdatasync of `ino`, which writes a data-sync log
    /// (`logged` says so afterwards: that file alone becomes durable), a
    /// checkpoint (`checkpointed`: everything does) or nothing (the file
    /// was durable already, and must be as the last acknowledged state has
    /// it). Until it returns, a crash may recover either state.
    pub fn datasync(
        &mut self,
        fs: &Fs,
        ino: u64,
        op: impl FnOnce() -> lfs::Result<()>,
        logged: impl FnOnce() -> bool,
        checkpointed: impl FnOnce() -> bool,
    ) -> lfs::Result<()> {
        let whole = tree(fs)?;
        let file = self.with_file_as_now(fs, ino)?;
        self.in_flight = Some(whole);
        self.in_flight_alt = Some(file);
        // On an error (the crash) both stay in flight for `allows`.
        op()?;
        let (whole, file) = (self.in_flight.take(), self.in_flight_alt.take());
        if checkpointed() {
            self.acked.extend(whole);
        } else if logged() {
            self.acked.extend(file);
        } else {
            assert!(
                file.as_ref() == self.acked.last(),
                "fdatasync wrote nothing for a file that was not durable"
            );
        }
        Ok(())
    }

    /// Whether `rec` is a state this crash may recover.
    pub fn allows(&self, rec: &Tree) -> bool {
        self.acked.last() == Some(rec)
            || self.in_flight.as_ref() == Some(rec)
            || self.in_flight_alt.as_ref() == Some(rec)
    }
}

/// The engine's count of data-sync writes.
pub fn data_sync_writes(fs: &Fs) -> u64 {
    fs.stats()
        .counters
        .iter()
        .find(|(n, _)| *n == "data_sync_writes")
        .map(|&(_, v)| v)
        .expect("the engine counts data-sync writes")
}

/// The first path where two trees differ, for a failure message.
pub fn first_difference(a: &Tree, b: &Tree) -> String {
    let paths: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for p in paths {
        if a.get(p) != b.get(p) {
            let show = |e: Option<&Entry>| match e {
                None => "absent".to_string(),
                Some(e) => format!(
                    "{:?} ino {} mode {:o} {}:{} nlink {} mtime {} xattrs {:?} {} bytes",
                    e.kind,
                    e.ino,
                    e.mode,
                    e.uid,
                    e.gid,
                    e.nlink,
                    e.mtime_ns,
                    e.xattrs
                        .keys()
                        .map(|k| String::from_utf8_lossy(k))
                        .collect::<Vec<_>>(),
                    e.data.len()
                ),
            };
            return format!(
                "{p}: recovered {} / expected {}",
                show(a.get(p)),
                show(b.get(p))
            );
        }
    }
    "no difference".into()
}
