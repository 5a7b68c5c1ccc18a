//! Commands that change checkpoints of a mounted filesystem: `mkcp`,
//! `chcp` and `rmcp` (nilfs-utils' names and argument order).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use lfs_proto::msg::*;
use lfs_proto::Client;

use crate::fail::Fault;
use crate::target::connect;
use crate::Exit;

const EBUSY: i32 = nix::libc::EBUSY;
const ENOENT: i32 = nix::libc::ENOENT;

/// A checkpoint number or an inclusive range `A..B` (`A..` to the last,
/// `..B` from the first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CnoRange {
    first: u64,
    last: Option<u64>,
}

impl CnoRange {
    /// Parses `N`, `A..B`, `A..` or `..B`.
    pub fn parse(s: &str) -> Option<CnoRange> {
        let num = |t: &str| t.parse::<u64>().ok().filter(|&n| n > 0);
        match s.split_once("..") {
            None => num(s).map(|n| CnoRange {
                first: n,
                last: Some(n),
            }),
            Some((a, "")) => num(a).map(|first| CnoRange { first, last: None }),
            Some(("", b)) => num(b).map(|last| CnoRange {
                first: 1,
                last: Some(last),
            }),
            Some((a, b)) => match (num(a), num(b)) {
                (Some(first), Some(last)) if first <= last => Some(CnoRange {
                    first,
                    last: Some(last),
                }),
                _ => None,
            },
        }
    }

    fn is_single(&self) -> bool {
        self.last == Some(self.first)
    }
}

/// Splits `[TARGET] CNO...`: the first word is the target unless it reads
/// as a checkpoint number or range.
pub fn split_target(words: &[String]) -> Result<(Option<PathBuf>, Vec<CnoRange>)> {
    let (target, rest) = match words.first() {
        Some(w) if CnoRange::parse(w).is_none() => (Some(PathBuf::from(w)), &words[1..]),
        _ => (None, words),
    };
    if rest.is_empty() {
        bail!("no checkpoint number given");
    }
    let ranges = rest
        .iter()
        .map(|w| {
            CnoRange::parse(w).ok_or_else(|| {
                anyhow!("{w:?} is not a checkpoint number (1 or more) or a range like 3..9")
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((target, ranges))
}

/// The valid checkpoints from `start` on (snapshots only if asked), in
/// order, asked for a batch at a time.
pub fn checkpoints_from(c: &mut Client, start: u64, snapshots: bool) -> Result<Vec<Cpinfo>> {
    let mut out = Vec::new();
    let mut start = start.max(1);
    loop {
        let batch = c
            .call(&GetCpinfo {
                start_cno: start,
                count: 4096,
                flags: if snapshots {
                    GET_CPINFO_SNAPSHOTS_ONLY
                } else {
                    0
                },
            })
            .context("listing checkpoints (GET_CPINFO)")?
            .items;
        let Some(last) = batch.last() else { break };
        start = last.cno + 1;
        out.extend(batch);
    }
    Ok(out)
}

/// `fsctl mkcp [-s] [-p]`: a checkpoint (or snapshot) now.
pub fn mkcp(target: Option<&Path>, snapshot: bool, print: bool) -> Result<Exit> {
    let mut c = connect(target)?;
    let r = c
        .call(&Sync {
            flags: SYNC_FORCE_CHECKPOINT,
        })
        .context("making a checkpoint (SYNC)")?;
    if snapshot {
        c.call(&ChangeCpmode {
            cno: r.cno,
            mode: CPMODE_SNAPSHOT,
            flags: 0,
        })
        .with_context(|| format!("making checkpoint {} a snapshot (CHANGE_CPMODE)", r.cno))?;
    }
    if print {
        println!("{}", r.cno);
    }
    Ok(Exit::Ok)
}

/// `fsctl chcp cp|ss [TARGET] CNO...`.
pub fn chcp(mode: &str, words: &[String]) -> Result<Exit> {
    let snapshot = match mode {
        "ss" | "snapshot" => true,
        "cp" | "checkpoint" => false,
        other => bail!("mode {other:?} is neither cp (checkpoint) nor ss (snapshot)"),
    };
    let (target, ranges) = split_target(words)?;
    let mut c = connect(target.as_deref())?;
    if ranges.iter().any(|r| !r.is_single()) {
        bail!("chcp takes checkpoint numbers, not ranges");
    }
    let mut failed = None;
    for r in ranges {
        let req = ChangeCpmode {
            cno: r.first,
            mode: if snapshot {
                CPMODE_SNAPSHOT
            } else {
                CPMODE_CHECKPOINT
            },
            flags: 0,
        };
        match c.call(&req) {
            Ok(Done) => {}
            Err(e) if e.errno() == Some(ENOENT) => {
                eprintln!("fsctl: chcp: checkpoint {} does not exist", r.first);
                failed = failed.or(Some(Exit::NoCheckpoint));
            }
            Err(e) if e.errno() == Some(EBUSY) => {
                eprintln!(
                    "fsctl: chcp: snapshot {} is mounted; unmount it (fsctl umount) first",
                    r.first
                );
                failed = failed.or(Some(Exit::Error));
            }
            Err(e) => return Err(e).with_context(|| format!("chcp of checkpoint {}", r.first)),
        }
    }
    Ok(failed.unwrap_or(Exit::Ok))
}

/// `fsctl rmcp [-f] [TARGET] CNO|A..B...`: deletes checkpoints. A single
/// number that cannot be deleted is an error (unless `force`, as rm -f);
/// in a range, snapshots, mounted checkpoints and the latest one are
/// skipped and counted.
pub fn rmcp(words: &[String], force: bool) -> Result<Exit> {
    let (target, ranges) = split_target(words)?;
    let mut c = connect(target.as_deref())?;
    let cps = checkpoints_from(&mut c, 1, false)?;
    let latest = cps.last().map_or(0, |e| e.cno);
    let mut failed = None;
    let (mut deleted, mut skipped) = (0u64, 0u64);
    for r in ranges {
        let single = r.is_single() && !force;
        let last = r.last.unwrap_or(latest);
        let chosen: Vec<&Cpinfo> = cps
            .iter()
            .filter(|e| e.cno >= r.first && e.cno <= last)
            .collect();
        if r.is_single() && force && chosen.is_empty() {
            skipped += 1;
            continue;
        }
        if single && chosen.is_empty() {
            eprintln!("fsctl: rmcp: checkpoint {} does not exist", r.first);
            failed = failed.or(Some(Exit::NoCheckpoint));
            continue;
        }
        for e in chosen {
            let why = if e.flags & CPINFO_SNAPSHOT != 0 {
                Some(format!(
                    "checkpoint {} is a snapshot; make it a plain checkpoint first (fsctl chcp cp {})",
                    e.cno, e.cno
                ))
            } else if e.cno == latest {
                Some(format!(
                    "checkpoint {} is the latest one, which cannot be deleted",
                    e.cno
                ))
            } else {
                None
            };
            let result = match why {
                Some(w) => Err(w),
                None => match c.call(&DeleteCheckpoint { cno: e.cno }) {
                    Ok(Done) => Ok(()),
                    Err(err) if err.errno() == Some(EBUSY) => Err(format!(
                        "checkpoint {} is in use (mounted read-only, or became a snapshot)",
                        e.cno
                    )),
                    Err(err) if err.errno() == Some(ENOENT) => Ok(()),
                    Err(err) => {
                        return Err(err).with_context(|| format!("deleting checkpoint {}", e.cno))
                    }
                },
            };
            match result {
                Ok(()) => deleted += 1,
                Err(w) if single => {
                    eprintln!("fsctl: rmcp: {w}");
                    failed = failed.or(Some(Exit::Error));
                }
                Err(_) => skipped += 1,
            }
        }
    }
    if skipped > 0 {
        eprintln!(
            "fsctl: rmcp: deleted {deleted}, kept {skipped} (snapshots, mounted checkpoints, \
             the latest one{})",
            if force {
                " or ones that do not exist"
            } else {
                ""
            }
        );
    }
    Ok(failed.unwrap_or(Exit::Ok))
}

/// The canonical mount point, and as the protocol's UTF-8 string: fsd
/// knows a mount by the path it was given.
fn mount_path(mountpoint: &Path) -> Result<(PathBuf, String)> {
    let mp = std::fs::canonicalize(mountpoint)
        .with_context(|| format!("mount point {}", mountpoint.display()))?;
    let path = mp
        .to_str()
        .ok_or_else(|| anyhow!("mount point {} is not valid UTF-8", mp.display()))?
        .to_string();
    Ok((mp, path))
}

/// `fsctl mount CNO MOUNTPOINT [TARGET]`: the running fsd mounts
/// checkpoint `cno` read-only at `mountpoint`.
pub fn mount(cno: u64, mountpoint: &Path, target: Option<&Path>) -> Result<Exit> {
    let (mp, path) = mount_path(mountpoint)?;
    if !mp.is_dir() {
        bail!("mount point {} is not a directory", mp.display());
    }
    let mut c = connect(target)?;
    match c.call(&MountCheckpoint { cno, path }) {
        Ok(Done) => Ok(Exit::Ok),
        Err(e) if e.errno() == Some(ENOENT) => Err(Fault::NoCheckpoint(format!(
            "checkpoint {cno} does not exist or was deleted (fsctl lscp lists them)"
        ))
        .into()),
        Err(e) if e.errno() == Some(EBUSY) => {
            bail!("a checkpoint is already mounted on {}", mp.display())
        }
        Err(e) => Err(e).with_context(|| {
            format!(
                "mounting checkpoint {cno} on {} (MOUNT_CHECKPOINT)",
                mp.display()
            )
        }),
    }
}

/// `fsctl umount MOUNTPOINT [TARGET]`: unmounts a checkpoint mounted by
/// `fsctl mount` (the target defaults to the mount point itself, which
/// leads to the live filesystem's fsd).
pub fn umount(mountpoint: &Path, target: Option<&Path>) -> Result<Exit> {
    let (mp, path) = mount_path(mountpoint)?;
    let mut c = connect(Some(target.unwrap_or(&mp)))?;
    match c.call(&UmountCheckpoint { path }) {
        Ok(Done) => Ok(Exit::Ok),
        Err(e) if e.errno() == Some(ENOENT) => bail!(
            "no checkpoint of this filesystem is mounted on {} (fsctl mount mounts one)",
            mp.display()
        ),
        Err(e) => Err(e).with_context(|| format!("unmounting {}", mp.display())),
    }
}

/// `fsctl diff OLD NEW [PATH] [--target T]`: paths created (A), deleted
/// (D) and modified (M) from checkpoint OLD to NEW (0: the current
/// state).
pub fn diff(old: u64, new: u64, path: &str, target: Option<&Path>, as_json: bool) -> Result<Exit> {
    if !path.starts_with('/') {
        bail!("{path:?}: the path must be absolute inside the filesystem (/ for everything)");
    }
    let mut c = connect(target)?;
    for cno in [old, new].into_iter().filter(|&c| c != 0) {
        let found = c
            .call(&GetCpinfo {
                start_cno: cno,
                count: 1,
                flags: 0,
            })
            .context("listing checkpoints (GET_CPINFO)")?;
        if found.items.first().is_none_or(|e| e.cno != cno) {
            return Err(Fault::NoCheckpoint(format!(
                "checkpoint {cno} does not exist (fsctl lscp lists them)"
            ))
            .into());
        }
    }
    let mut items = Vec::new();
    let mut after = String::new();
    loop {
        let r = c
            .call(&GetDiff {
                old_cno: old,
                new_cno: new,
                path: path.to_string(),
                after: after.clone(),
            })
            .map_err(|e| match e.errno() {
                Some(ENOENT) => anyhow!("{path} is in neither checkpoint {old} nor {new}"),
                _ => anyhow!(e).context("comparing checkpoints (GET_DIFF)"),
            })?;
        let more = r.more;
        if let Some(last) = r.items.last() {
            after = last.path.clone();
        }
        items.extend(r.items);
        if !more {
            break;
        }
    }
    let letter = |c: u8| match c {
        DIFF_CREATED => "A",
        DIFF_DELETED => "D",
        _ => "M",
    };
    if as_json {
        let v: Vec<_> = items
            .iter()
            .map(|i| {
                serde_json::json!({"change": match i.change {
                    DIFF_CREATED => "created", DIFF_DELETED => "deleted", _ => "modified"
                }, "path": i.path})
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"old": old, "new": new, "changes": v})
            )?
        );
    } else {
        for i in &items {
            println!("{} {}", letter(i.change), i.path);
        }
    }
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_targets() {
        assert_eq!(
            CnoRange::parse("7"),
            Some(CnoRange {
                first: 7,
                last: Some(7)
            })
        );
        assert_eq!(
            CnoRange::parse("3..9"),
            Some(CnoRange {
                first: 3,
                last: Some(9)
            })
        );
        assert_eq!(
            CnoRange::parse("3.."),
            Some(CnoRange {
                first: 3,
                last: None
            })
        );
        assert_eq!(
            CnoRange::parse("..4"),
            Some(CnoRange {
                first: 1,
                last: Some(4)
            })
        );
        for bad in ["0", "9..3", "x", "..0", "..", "-1", ""] {
            assert_eq!(CnoRange::parse(bad), None, "{bad}");
        }
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (t, r) = split_target(&w(&["/mnt/x", "4", "5..6"])).unwrap();
        assert_eq!(t, Some(PathBuf::from("/mnt/x")));
        assert_eq!(r.len(), 2);
        let (t, r) = split_target(&w(&["4"])).unwrap();
        assert_eq!((t, r.len()), (None, 1));
        assert!(split_target(&w(&["/mnt/x"])).is_err());
        assert!(split_target(&w(&["/mnt/x", "zero"])).is_err());
    }
}
