//! Read-only views of older checkpoints.
//!
//! * [`Fs::open_checkpoint`]: while the filesystem is mounted, a view of
//!   checkpoint `cno` served from the same device. The view reads the
//!   checkpoint's inode file and everything below it through the live
//!   filesystem's DAT (which cleaning keeps up to date), and the checkpoint
//!   is pinned: it cannot be deleted, nor stop being a snapshot, until the
//!   view is dropped.
//! * [`Fs::mount_checkpoint`]: an unmounted device's checkpoint `cno`,
//!   read-only, with nothing else running.
//!
//! Every change through a view fails with ReadOnly.

use std::sync::Arc;

use crate::blockdev::BlockDevice;
use crate::checkpoint::recover::{RecoveryReport, Target};
use crate::format::{CheckpointEntry, MetaKind};
use crate::fs::bmap::BlockMap;
use crate::fs::state::{Loaded, State};
use crate::fs::Fs;
use crate::log::dat::Dat;
use crate::{Error, Result};

impl State {
    /// The entry of valid checkpoint `cno`.
    pub(crate) fn checkpoint_entry(&self, cno: u64) -> Result<CheckpointEntry> {
        if self.history.get(cno).is_none() {
            return Err(Error::NotFound);
        }
        let (b, off) = MetaKind::Cpfile.locate(cno, self.bs);
        let blk = self.cp_block(b)?;
        CheckpointEntry::decode(&blk[off..off + MetaKind::Cpfile.record_size()]).map_err(|source| {
            Error::Corrupted {
                what: "checkpoint entry",
                location: format!("checkpoint {cno}"),
                reason: source,
            }
        })
    }

    /// Points this (read-only) state at checkpoint `entry`'s tree.
    fn switch_to(&mut self, entry: &CheckpointEntry) -> Result<()> {
        self.cno = entry.cno;
        self.ifile = entry.ifile.clone();
        self.next_ino = crate::fs::state::next_ino_of(&self.ifile);
        self.inodes_count = entry.inodes_count;
        self.ifile_blocks.clear();
        self.nodes.clear();
        self.read_only = Some(format!(": checkpoint {} is mounted read-only", entry.cno));
        self.ifile_map = self.load_bmap(&entry.ifile.clone())?;
        Ok(())
    }
}

impl Fs {
    /// Where virtual block `v` of the live filesystem can be read now, for
    /// a view.
    pub(crate) fn source_for_view(&self, v: u64) -> crate::Result<crate::fs::Source> {
        self.st().source_of(v)
    }

    /// Reads virtual block `v` of the live filesystem for a view (its
    /// metadata blocks, read once and cached by the view): translated under
    /// the state lock, read without it, and read again if freed segments
    /// were released meanwhile.
    pub(crate) fn read_virtual_for_view(&self, v: u64) -> Result<Vec<u8>> {
        loop {
            let (p, epoch, dev, bs) = {
                let st = self.st();
                let p = st.dat.phys(v);
                if p == 0 || p == u64::MAX || st.inflight.contains_key(&p) {
                    // Not a block (the same error a live read gives), or
                    // in memory until its write lands.
                    return st.read_virtual(v);
                }
                (p, st.reuse_epoch, st.dev.clone(), st.bs)
            };
            let b = crate::fs::state::read_block(dev.as_ref(), p, bs)?;
            if self.reuse_epoch() == epoch {
                return Ok(b);
            }
        }
    }

    /// Changes each time freed segments become reusable: a view's read is
    /// trusted only if this did not change across it.
    pub(crate) fn reuse_epoch(&self) -> u64 {
        self.st().reuse_epoch
    }

    /// A read-only view of valid checkpoint `cno`, pinned until dropped.
    /// NotFound if there is no such checkpoint.
    pub fn open_checkpoint(self: &Arc<Self>, cno: u64) -> Result<Arc<Fs>> {
        let view = {
            let mut st = self.st();
            let entry = st.checkpoint_entry(cno)?;
            st.history.mount(cno)?;
            let mut v = State::from_loaded(Loaded {
                dev: st.dev.clone(),
                sb: st.sb.clone(),
                cno,
                // Translation goes to the live filesystem: no DAT or
                // physically addressed files of its own.
                dat: Dat::new(Vec::new(), st.bs),
                dat_map: BlockMap::new(st.bs),
                datj_map: BlockMap::new(st.bs),
                segs: st.segs.clone(),
                su_map: BlockMap::new(st.bs),
                cp_header: st.cp_header,
                cp_map: BlockMap::new(st.bs),
                cp_last_block: None,
                ifile: entry.ifile.clone(),
                history: st.history.clone(),
                inodes_count: entry.inodes_count,
                nongc_ctime_ns: st.nongc_ctime_ns,
                last_ctime_ns: entry.ctime_ns,
            });
            // statfs of the view shows the live filesystem's space.
            v.head = st.head;
            drop(st);
            v.source = Some(self.clone());
            // Loading the tree reads through the live filesystem (it takes
            // its lock), so not with that lock held.
            match v.switch_to(&entry) {
                Ok(()) => v,
                Err(e) => {
                    self.st().history.unmount(cno);
                    return Err(e);
                }
            }
        };
        let report = RecoveryReport {
            cno,
            logs_scanned: 0,
            logs_discarded: 0,
            rolled_forward: Default::default(),
            was_clean: true,
            damaged: None,
        };
        log::info!("checkpoint {cno} opened read-only");
        let fs = Fs::from_state(view, report, read_only_opts(), Some(cno))?;
        Ok(fs)
    }

    /// Mounts checkpoint `cno` of the unmounted device `dev` read-only.
    /// NotFound if it is not a valid checkpoint.
    pub fn mount_checkpoint(dev: Arc<dyn BlockDevice>, cno: u64) -> Result<Arc<Fs>> {
        // A damaged last checkpoint does not hide the older ones: read
        // only, the newest intact checkpoint's history is enough.
        let (mut st, report) = State::recover_to(dev, true, Target::Intact)?;
        let entry = st.checkpoint_entry(cno)?;
        st.switch_to(&entry)?;
        match report.damaged {
            Some(damaged) => log::warn!(
                "mounted checkpoint {cno} read-only; checkpoint {damaged}, the last one, is \
                 damaged and {} is the newest intact one",
                report.cno
            ),
            None => log::info!(
                "mounted checkpoint {cno} read-only (the latest is {})",
                report.cno
            ),
        }
        Fs::from_state(st, report, read_only_opts(), None)
    }

    /// The checkpoint this filesystem is a view of, if it is one.
    pub fn viewed_checkpoint(&self) -> Option<u64> {
        self.pinned
    }
}

fn read_only_opts() -> crate::fs::MountOptions {
    crate::fs::MountOptions {
        read_only: true,
        ..crate::fs::MountOptions::default()
    }
}
