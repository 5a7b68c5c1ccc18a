//! Offline consistency check: every invariant that ties the namespace,
//! the block maps, the DAT and segment usage together.
//!
//! The check recovers the filesystem read-only (nothing is written; data-
//! sync logs are rolled forward in memory, as a mount would), walks
//! the tree from the root, and compares what it finds with the metadata:
//! * every directory entry names an inode in use, of the entry's type;
//! * link counts equal the entries naming the inode (+ subdirectories for
//!   directories); a directory's parent field names the directory holding
//!   it;
//! * every virtual block in a block map is allocated in the DAT, points
//!   into the data area, and is referenced once; every allocated virtual
//!   block is referenced (no leaks);
//! * every retired DAT entry (a block only older checkpoints see) is seen
//!   by a valid checkpoint;
//! * each segment's live count equals the blocks found pointing into it
//!   (from the current tree and from retired entries);
//!   segments in the clean pool hold no live block;
//! * no inode in use is unreachable; no block lies beyond its file's size;
//! * every log holding a live block verifies (its body checksum): a
//!   damaged one is reported with the files and offsets it holds.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use crate::blockdev::BlockDevice;
use crate::checkpoint::recover::Target;
use crate::format::{FileType, FIRST_USER_INO, IFILE_INO, ORPHAN_INO, ROOT_INO};
use crate::fs::bmap::BlockMap;
use crate::fs::state::State;
use crate::Result;

/// What the check found.
#[derive(Debug, Clone, Default)]
pub struct FsckReport {
    /// Checkpoint checked.
    pub cno: u64,
    /// Each violation, one line.
    pub errors: Vec<String>,
    /// Inodes in use that were reached.
    pub inodes: u64,
    /// Directories among them.
    pub directories: u64,
    /// Data, indirect and metadata blocks referenced.
    pub blocks: u64,
    /// When the last checkpoint is damaged: the newest intact one, which
    /// was checked instead (`cno`), and which a rollback can make the
    /// current one (`checkpoint::rollback`).
    pub rollback_to: Option<u64>,
}

impl FsckReport {
    /// True if no violation was found.
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty()
    }
}

const S_IFMT: u32 = 0o170000;

/// Checks the filesystem on `dev` without writing to it.
pub fn fsck(dev: Arc<dyn BlockDevice>) -> Result<FsckReport> {
    // Both copies must be valid: a damaged one leaves the filesystem a
    // single superblock from being unmountable.
    let pair = crate::inspect::read_superblocks(dev.as_ref())?;
    let mut sb_errors = Vec::new();
    for (copy, r) in [("primary", &pair.primary), ("secondary", &pair.secondary)] {
        if let Err(e) = r {
            sb_errors.push(format!("{copy} superblock: {e}"));
        }
    }
    let (mut st, rep) = match State::recover(Arc::clone(&dev), true) {
        Ok(x) => x,
        // Both copies unusable, at least one an lfs superblock that fails
        // its checksum or holds an impossible field: a damaged lfs
        // filesystem, not a foreign one or a newer format.
        Err(crate::Error::Unsupported(_))
            if [&pair.primary, &pair.secondary].iter().any(|r| {
                matches!(
                    r,
                    Err(crate::format::DecodeError::BadChecksum { .. }
                        | crate::format::DecodeError::InvalidField { .. })
                )
            }) =>
        {
            return Ok(FsckReport {
                errors: sb_errors,
                ..FsckReport::default()
            });
        }
        // A damaged last checkpoint is itself a finding; the newest
        // intact one, if there is one, is checked instead.
        Err(e @ crate::Error::Corrupted { .. }) => {
            match State::recover_to(dev, true, Target::Intact) {
                Ok((st, rep)) if rep.damaged.is_some() => {
                    sb_errors.push(format!(
                        "the last checkpoint is damaged ({e}); checkpoint {} is the newest \
                         intact one, checked below",
                        rep.cno
                    ));
                    (st, rep)
                }
                _ => {
                    sb_errors.push(format!("no valid checkpoint: {e}"));
                    return Ok(FsckReport {
                        errors: sb_errors,
                        ..FsckReport::default()
                    });
                }
            }
        }
        Err(e) => return Err(e),
    };
    let mut r = FsckReport {
        cno: rep.cno,
        errors: sb_errors,
        rollback_to: rep.damaged.map(|_| rep.cno),
        ..FsckReport::default()
    };
    let mut live: BTreeMap<u64, u32> = BTreeMap::new();
    let mut vrefs: HashSet<u64> = HashSet::new();
    let bs = st.bs as u64;

    // Physically addressed files.
    for (name, map) in [
        ("DAT", &st.dat_map),
        ("DAT journal", &st.datj_map),
        ("segment usage file", &st.su_map),
        ("checkpoint file", &st.cp_map),
    ] {
        for (off, p) in map.iter() {
            count_phys(&st, &mut live, &mut r, p, &format!("{name} block {off}"));
        }
        for (n, p) in map.node_addrs() {
            count_phys(
                &st,
                &mut live,
                &mut r,
                p,
                &format!("{name} indirect block {n:?}"),
            );
        }
    }
    // The inode file.
    let ifile_map = st.ifile_map.clone();
    check_map(
        &st,
        &mut live,
        &mut vrefs,
        &mut r,
        IFILE_INO,
        &ifile_map,
        u64::MAX,
    );

    // The tree.
    let mut links: HashMap<u64, u32> = HashMap::new();
    let mut subdirs: HashMap<u64, u32> = HashMap::new();
    let mut seen_dirs: HashSet<u64> = HashSet::new();
    let mut queue = VecDeque::from([(ROOT_INO, ROOT_INO)]);
    let mut reached: HashSet<u64> = HashSet::from([ROOT_INO]);
    // Files unlinked while open wait in the orphan directory, a second
    // root (fs/orphans.rs); its entries are their links.
    if st.raw_inode(ORPHAN_INO).is_ok_and(|i| !i.is_free()) {
        queue.push_back((ORPHAN_INO, ORPHAN_INO));
        reached.insert(ORPHAN_INO);
    }
    while let Some((dir, parent)) = queue.pop_front() {
        if !seen_dirs.insert(dir) {
            r.errors.push(format!(
                "directory {dir} is reachable twice (a directory cycle or hard link)"
            ));
            continue;
        }
        let inode = match st.inode(dir) {
            Ok(i) => i,
            Err(e) => {
                r.errors.push(format!("directory {dir}: {e}"));
                continue;
            }
        };
        if inode.parent != parent {
            r.errors.push(format!(
                "directory {dir}: parent field {} but it is in directory {parent}",
                inode.parent
            ));
        }
        let entries = match st
            .node(dir)
            .map(|n| n.dir.as_ref().map(|d| d.list_after(0, usize::MAX)))
        {
            Ok(Some(e)) => e,
            Ok(None) => {
                r.errors.push(format!(
                    "inode {dir} is entered as a directory but is not one"
                ));
                continue;
            }
            Err(e) => {
                r.errors.push(format!("directory {dir}: {e}"));
                continue;
            }
        };
        for (_, name, ino, kind) in entries {
            let shown = String::from_utf8_lossy(&name).into_owned();
            let child = match st.inode(ino) {
                Ok(i) => i,
                Err(e) => {
                    r.errors.push(format!(
                        "entry {shown:?} in directory {dir} names inode {ino}: {e}"
                    ));
                    continue;
                }
            };
            match crate::fs::file_type_of_mode(child.mode) {
                Some(t) if t == kind => {}
                t => r.errors.push(format!(
                    "entry {shown:?} in directory {dir}: type {kind:?} but inode {ino} is {t:?}"
                )),
            }
            *links.entry(ino).or_default() += 1;
            if kind == FileType::Directory {
                *subdirs.entry(dir).or_default() += 1;
                queue.push_back((ino, dir));
            }
            reached.insert(ino);
        }
    }

    // Every reached inode: link count, block map.
    let mut reached: Vec<u64> = reached.into_iter().collect();
    reached.sort_unstable();
    for ino in reached {
        let Ok(inode) = st.inode(ino) else { continue };
        r.inodes += 1;
        let is_dir = inode.mode & S_IFMT == 0o040000;
        let expect = if is_dir {
            r.directories += 1;
            2 + subdirs.get(&ino).copied().unwrap_or(0)
        } else {
            links.get(&ino).copied().unwrap_or(0)
        };
        if inode.nlink != expect {
            r.errors.push(format!(
                "inode {ino}: link count {} but {expect} found",
                inode.nlink
            ));
        }
        // A file data-sync logs were rolled forward into has its block
        // map in memory; every other is read from its inode.
        let map = match st.nodes.get(&ino) {
            Some(n) => Ok(n.bmap.clone()),
            None => st.load_bmap(&inode),
        };
        let map = match map {
            Ok(m) => m,
            Err(e) => {
                r.errors.push(format!("inode {ino}: block map: {e}"));
                continue;
            }
        };
        let limit = if is_dir {
            u64::MAX
        } else {
            inode.size.div_ceil(bs)
        };
        check_map(&st, &mut live, &mut vrefs, &mut r, ino, &map, limit);
        if inode.xattr_block != 0 {
            check_virtual(
                &st,
                &mut live,
                &mut vrefs,
                &mut r,
                inode.xattr_block,
                &format!("inode {ino} xattr block"),
            );
            let decoded = st
                .read_virtual(inode.xattr_block)
                .and_then(|b| crate::fs::xattr::decode(&b, st.seed));
            if let Err(e) = decoded {
                r.errors.push(format!("inode {ino}: {e}"));
            }
        }
    }

    // Unreachable inodes.
    for ino in FIRST_USER_INO..st.next_ino {
        match st.raw_inode(ino) {
            Ok(i) if !i.is_free() && !seen(&links, ino) => {
                r.errors
                    .push(format!("inode {ino} is in use but no directory names it"));
            }
            Ok(_) => {}
            Err(e) => r.errors.push(format!("inode {ino}: {e}")),
        }
    }

    // Blocks only older checkpoints see: each is seen by a valid one, and
    // is live in its segment.
    let retired: Vec<(u64, crate::format::DatEntry)> = st.dat.iter_retired().collect();
    let mut unkept = 0;
    for &(v, e) in &retired {
        if !st.history.keeps(e.start_cno, e.end_cno) {
            unkept += 1;
            if unkept == 1 {
                // (An end before the start is damage fsck reports, not
                // a reason to stop.)
                r.errors.push(format!(
                    "virtual block {v} (checkpoints {} to {}) is kept by no valid checkpoint",
                    e.start_cno,
                    e.end_cno.saturating_sub(1)
                ));
            }
        }
        count_phys(
            &st,
            &mut live,
            &mut r,
            e.phys,
            &format!("virtual block {v}"),
        );
    }
    if unkept > 1 {
        r.errors.push(format!(
            "{unkept} retired blocks in all are kept by no valid checkpoint"
        ));
    }

    // Leaked virtual blocks.
    let leaked: Vec<u64> = st
        .dat
        .iter_used()
        .filter(|(_, e)| e.end_cno == crate::format::CNO_LIVE)
        .map(|(v, _)| v)
        .filter(|v| !vrefs.contains(v))
        .collect();
    if !leaked.is_empty() {
        r.errors.push(format!(
            "{} virtual block(s) allocated in the DAT but referenced by no file (first: {})",
            leaked.len(),
            leaked[0]
        ));
    }

    // Segment live counts.
    for s in 0..st.segs.len() {
        let u = st.segs.get(s);
        let found = live.get(&s).copied().unwrap_or(0);
        if u.nlive != found {
            r.errors.push(format!(
                "segment {s}: live count {} but {found} live blocks found",
                u.nlive
            ));
        }
        if u.is_clean() && found > 0 {
            r.errors.push(format!(
                "segment {s} is clean but holds {found} live blocks"
            ));
        }
    }
    r.blocks = live.values().map(|&n| u64::from(n)).sum();
    check_log_bodies(&st, &live, &mut r)?;
    Ok(r)
}

/// Live blocks a report names per damaged log before it sums up the rest.
const DAMAGED_SHOWN: usize = 8;

/// Every log of the segments holding live blocks, read and verified. Two
/// findings:
/// * a log whose body fails its checksum: corruption on the medium. If
///   live file blocks lie in it, they are named (inode and offset): file
///   data has no checksum of its own (metadata blocks are checked alone),
///   so the filesystem cannot vouch for them, reads of them get EIO once
///   fsd has seen the damage, and the cleaner will not move them
///   (`fs/damage.rs`);
/// * logs that end before the blocks written into the segment do (a
///   summary destroyed): the blocks past it cannot be found by cleaning.
///
/// Reads every log of those segments, one segment at a time.
fn check_log_bodies(st: &State, live: &BTreeMap<u64, u32>, r: &mut FsckReport) -> Result<()> {
    let index = crate::fs::clean::LiveIndex::new(st);
    let bs = st.bs;
    for &s in live.keys() {
        let (d, bodies) = crate::inspect::read_segment(st.dev.as_ref(), &st.sb, s, true)?;
        // Logs past the last one segment usage records are a tail that
        // recovery discarded (a write torn by a crash): not checked.
        let last_seq = st.segs.get(s).seq;
        let walked: u64 = d
            .logs
            .iter()
            .filter(|l| l.summary.header.seq <= last_seq)
            .map(|l| u64::from(l.summary.header.nblocks))
            .sum();
        let written = u64::from(st.segs.get(s).nblocks);
        if walked < written {
            r.errors.push(format!(
                "segment {s}: its logs end after {walked} of the {written} blocks written into \
                 it ({}): the blocks past that cannot be found by cleaning",
                d.end
            ));
        }
        for (log, body) in d.logs.iter().zip(&bodies) {
            if log.summary.header.seq > last_seq {
                break;
            }
            let Some(why) = &log.body_error else { continue };
            let first = log.block + u64::from(log.summary.header.nsummary_blocks);
            let hit: Vec<String> = log
                .summary
                .entries
                .iter()
                .enumerate()
                .filter(|(i, e)| {
                    matches!(
                        index.live(st, first + *i as u64, e),
                        Some(crate::fs::clean::Live::Virtual)
                    ) && !body
                        .get(i * bs..(i + 1) * bs)
                        .is_some_and(|b| crate::fs::clean::verifies_alone(e, b, st.seed))
                })
                .map(|(i, e)| {
                    format!(
                        "block {} (inode {} offset {})",
                        first + i as u64,
                        e.ino,
                        e.offset
                    )
                })
                .collect();
            let holds = if hit.is_empty() {
                "no live file block lies in it".to_string()
            } else {
                let more = hit.len().saturating_sub(DAMAGED_SHOWN);
                format!(
                    "it holds {} live file block(s) that cannot be trusted: {}{}",
                    hit.len(),
                    hit[..hit.len().min(DAMAGED_SHOWN)].join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                )
            };
            r.errors.push(format!(
                "segment {s}: the log at block {} fails its body checksum ({why}); {holds}",
                log.block
            ));
        }
    }
    Ok(())
}

fn seen(links: &HashMap<u64, u32>, ino: u64) -> bool {
    links.contains_key(&ino)
}

fn count_phys(st: &State, live: &mut BTreeMap<u64, u32>, r: &mut FsckReport, p: u64, what: &str) {
    match st.seg_of(p) {
        Some(s) => *live.entry(s).or_default() += 1,
        None => r
            .errors
            .push(format!("{what}: block {p} is outside the data area")),
    }
}

fn check_virtual(
    st: &State,
    live: &mut BTreeMap<u64, u32>,
    vrefs: &mut HashSet<u64>,
    r: &mut FsckReport,
    v: u64,
    what: &str,
) {
    if !vrefs.insert(v) {
        r.errors
            .push(format!("{what}: virtual block {v} is referenced twice"));
        return;
    }
    let e = st.dat.entry(v);
    let p = e.phys;
    if p == 0 {
        r.errors.push(format!(
            "{what}: virtual block {v} is not allocated in the DAT"
        ));
        return;
    }
    if e.end_cno != crate::format::CNO_LIVE {
        r.errors.push(format!(
            "{what}: virtual block {v} is in use but the DAT retired it at checkpoint {}",
            e.end_cno
        ));
        return;
    }
    count_phys(st, live, r, p, what);
}

fn check_map(
    st: &State,
    live: &mut BTreeMap<u64, u32>,
    vrefs: &mut HashSet<u64>,
    r: &mut FsckReport,
    ino: u64,
    map: &BlockMap,
    limit: u64,
) {
    for (off, v) in map.iter() {
        if off >= limit {
            r.errors.push(format!(
                "inode {ino}: block {off} lies beyond the end of the file"
            ));
        }
        check_virtual(st, live, vrefs, r, v, &format!("inode {ino} block {off}"));
    }
    for (n, v) in map.node_addrs() {
        check_virtual(
            st,
            live,
            vrefs,
            r,
            v,
            &format!("inode {ino} indirect block {n:?}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blockdev::MemDevice;
    use crate::fs::{Fs, MountOptions};

    fn image() -> Arc<dyn BlockDevice> {
        let dev = Arc::new(MemDevice::new(8 << 20));
        let mut o = crate::mkfs::MkfsOptions::new([2; 16], 7, 1_700_000_000, 0);
        o.blocks_per_segment = 32;
        crate::mkfs::format(dev.as_ref(), &o).unwrap();
        let d: Arc<dyn BlockDevice> = dev;
        let fs = Fs::mount(d.clone(), MountOptions::default()).unwrap();
        let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
        fs.write(f.ino, 0, &[1u8; 10_000]).unwrap();
        fs.unmount().unwrap();
        d
    }

    /// Applies `damage` to the recovered state and commits it as a
    /// checkpoint, bypassing the operations that keep invariants.
    fn commit_damaged(dev: &Arc<dyn BlockDevice>, damage: impl FnOnce(&mut State)) {
        let (mut st, _) = State::recover(dev.clone(), false).unwrap();
        damage(&mut st);
        st.mods += 1;
        let mut plan = st.build_checkpoint(1, false).unwrap();
        let bs = st.bs as u64;
        plan.seal(st.bs, st.seed);
        for run in &plan.runs {
            let s: Vec<std::io::IoSlice<'_>> = run
                .blocks
                .iter()
                .map(|b| std::io::IoSlice::new(b))
                .collect();
            dev.write_at(&s, run.block * bs).unwrap();
        }
        st.sb.last_log_block = plan.sr_block;
        st.sb.last_seq = plan.sr_seq;
        st.sb.last_cno = plan.cno;
        st.write_superblock(1).unwrap();
    }

    #[test]
    fn clean_image_is_clean() {
        let r = fsck(image()).unwrap();
        assert!(r.is_clean(), "{:?}", r.errors);
        assert_eq!(r.inodes, 2);
        assert_eq!(r.directories, 1);
    }

    #[test]
    fn wrong_live_count_is_found() {
        let dev = image();
        commit_damaged(&dev, |st| {
            let s = st.head.seg;
            st.segs.add_live(s, 3);
        });
        let r = fsck(dev).unwrap();
        assert!(
            r.errors.iter().any(|e| e.contains("live count")),
            "{:?}",
            r.errors
        );
    }

    #[test]
    fn orphan_and_link_count_are_found() {
        let dev = image();
        commit_damaged(&dev, |st| {
            st.node(ROOT_INO)
                .unwrap()
                .dir
                .as_mut()
                .unwrap()
                .remove(b"f");
        });
        let r = fsck(dev).unwrap();
        assert!(
            r.errors.iter().any(|e| e.contains("no directory names it")),
            "{:?}",
            r.errors
        );
    }

    #[test]
    fn leaked_block_is_found() {
        let dev = image();
        commit_damaged(&dev, |st| {
            let v = st.dat.alloc();
            st.dat.assign(v, st.sb.segment_start(st.head.seg), 1);
        });
        let r = fsck(dev).unwrap();
        assert!(
            r.errors.iter().any(|e| e.contains("referenced by no file")),
            "{:?}",
            r.errors
        );
    }
}
