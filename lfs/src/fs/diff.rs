//! What changed between two checkpoints (`fsctl diff`): both trees walked
//! side by side from a directory, through read-only views of the
//! checkpoints.
//!
//! A path is *created* if only the newer tree has it, *deleted* if only the
//! older one does, and *modified* if both have it as the same inode whose
//! attributes (type, mode, owner, size, link count, times) differ. A name
//! that now names another inode (replaced by a rename or a new file) is
//! deleted and created. Everything below a created or deleted directory is
//! listed too. Directories are compared by their attributes like files, so
//! a directory whose entries changed is modified (its mtime changed).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::format::{FileType, ROOT_INO};
use crate::fs::{Attr, Fs};
use crate::{Error, Result};

/// How a path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    /// Only in the newer checkpoint.
    Created,
    /// Only in the older checkpoint.
    Deleted,
    /// In both, changed.
    Modified,
}

/// Entries of directory `ino` (without `.` and `..`): name → (inode, type).
fn entries(fs: &Fs, ino: u64) -> Result<BTreeMap<Vec<u8>, (u64, FileType)>> {
    Ok(fs
        .list_dir(ino)?
        .into_iter()
        .map(|e| (e.name, (e.ino, e.kind)))
        .collect())
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = dir.to_vec();
    if p.last() != Some(&b'/') {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

fn same(a: &Attr, b: &Attr) -> bool {
    (a.mode, a.uid, a.gid, a.size, a.nlink, a.mtime, a.ctime)
        == (b.mode, b.uid, b.gid, b.size, b.nlink, b.mtime, b.ctime)
}

/// Resolves `path` (absolute inside the filesystem) to an inode of `fs`.
fn resolve(fs: &Fs, path: &[u8]) -> Result<Option<u64>> {
    let mut ino = ROOT_INO;
    for part in path.split(|&b| b == b'/').filter(|p| !p.is_empty()) {
        match fs.lookup(ino, part) {
            Ok(a) => ino = a.ino,
            Err(Error::NotFound) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Ok(Some(ino))
}

struct Walk<'a> {
    old: &'a Fs,
    new: &'a Fs,
    out: Vec<(Change, Vec<u8>)>,
}

/// Work the walk has left. The walk keeps it on a stack of its own, not
/// the thread's: recursing once per directory level overflowed the stack
/// of fsd's control thread on a tree a few thousand directories deep,
/// and the daemon aborted.
enum Task {
    /// A whole subtree, listed as one change.
    All(Subtree),
    /// Directory `a` of the old tree against directory `b` of the new one.
    Dirs { a: u64, b: u64, path: Vec<u8> },
}

/// An inode of the old (`in_old`) or the new tree and everything below
/// it, all listed as `change`.
struct Subtree {
    in_old: bool,
    ino: u64,
    kind: FileType,
    path: Vec<u8>,
    change: Change,
}

impl Subtree {
    fn task(in_old: bool, ino: u64, kind: FileType, path: Vec<u8>, change: Change) -> Task {
        Task::All(Subtree {
            in_old,
            ino,
            kind,
            path,
            change,
        })
    }
}

impl Walk<'_> {
    /// Does `task` and all the work it leads to.
    fn run(&mut self, task: Task) -> Result<()> {
        let mut todo = vec![task];
        while let Some(task) = todo.pop() {
            match task {
                Task::All(t) => {
                    if t.kind == FileType::Directory {
                        let fs = if t.in_old { self.old } else { self.new };
                        for (name, (ino, kind)) in entries(fs, t.ino)? {
                            let path = join(&t.path, &name);
                            todo.push(Subtree::task(t.in_old, ino, kind, path, t.change));
                        }
                    }
                    self.out.push((t.change, t.path));
                }
                Task::Dirs { a, b, path } => self.dirs(a, b, &path, &mut todo)?,
            }
        }
        Ok(())
    }

    /// Compares directory `a` of the old tree with `b` of the new one,
    /// leaving the subtrees to `todo`.
    fn dirs(&mut self, a: u64, b: u64, path: &[u8], todo: &mut Vec<Task>) -> Result<()> {
        let ea = entries(self.old, a)?;
        let eb = entries(self.new, b)?;
        for (name, &(ia, ka)) in &ea {
            let p = join(path, name);
            match eb.get(name) {
                None => todo.push(Subtree::task(true, ia, ka, p, Change::Deleted)),
                Some(&(ib, kb)) if ib != ia || kb != ka => {
                    todo.push(Subtree::task(true, ia, ka, p.clone(), Change::Deleted));
                    todo.push(Subtree::task(false, ib, kb, p, Change::Created));
                }
                Some(&(ib, _)) => {
                    if !same(&self.old.getattr(ia)?, &self.new.getattr(ib)?) {
                        self.out.push((Change::Modified, p.clone()));
                    }
                    if ka == FileType::Directory {
                        todo.push(Task::Dirs {
                            a: ia,
                            b: ib,
                            path: p,
                        });
                    }
                }
            }
        }
        for (name, &(ib, kb)) in &eb {
            if !ea.contains_key(name) {
                todo.push(Subtree::task(
                    false,
                    ib,
                    kb,
                    join(path, name),
                    Change::Created,
                ));
            }
        }
        Ok(())
    }
}

/// The changes from `old` to `new` below `path` (absolute, `/` for the
/// whole tree), sorted by path. NotFound if `path` is in neither.
pub fn diff(old: &Fs, new: &Fs, path: &[u8]) -> Result<Vec<(Change, Vec<u8>)>> {
    let path: Vec<u8> = if path.is_empty() {
        b"/".to_vec()
    } else {
        path.to_vec()
    };
    let mut w = Walk {
        old,
        new,
        out: Vec::new(),
    };
    match (resolve(old, &path)?, resolve(new, &path)?) {
        (None, None) => return Err(Error::NotFound),
        (Some(a), None) => {
            let k = kind_of(&old.getattr(a)?);
            w.run(Subtree::task(true, a, k, path, Change::Deleted))?;
        }
        (None, Some(b)) => {
            let k = kind_of(&new.getattr(b)?);
            w.run(Subtree::task(false, b, k, path, Change::Created))?;
        }
        (Some(a), Some(b)) => {
            let (aa, ab) = (old.getattr(a)?, new.getattr(b)?);
            let (ka, kb) = (kind_of(&aa), kind_of(&ab));
            if a != b || ka != kb {
                w.run(Subtree::task(true, a, ka, path.clone(), Change::Deleted))?;
                w.run(Subtree::task(false, b, kb, path, Change::Created))?;
            } else {
                if !same(&aa, &ab) {
                    w.out.push((Change::Modified, path.clone()));
                }
                if ka == FileType::Directory {
                    w.run(Task::Dirs { a, b, path })?;
                }
            }
        }
    }
    w.out.sort_by(|x, y| x.1.cmp(&y.1).then(x.0.cmp(&y.0)));
    Ok(w.out)
}

fn kind_of(a: &Attr) -> FileType {
    crate::fs::file_type_of_mode(a.mode).unwrap_or(FileType::Regular)
}

impl Fs {
    /// [`diff`] between checkpoints `old` and `new` of this (mounted)
    /// filesystem; `new` may be 0 for the current state.
    pub fn diff_checkpoints(
        self: &Arc<Self>,
        old: u64,
        new: u64,
        path: &[u8],
    ) -> Result<Vec<(Change, Vec<u8>)>> {
        let a = self.open_checkpoint(old)?;
        if new == 0 {
            return diff(&a, self, path);
        }
        let b = self.open_checkpoint(new)?;
        diff(&a, &b, path)
    }
}
