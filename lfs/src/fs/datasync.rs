//! fdatasync(2) through data-sync logs: the locking and I/O around
//! `checkpoint/dsync.rs`, which builds them.
//!
//! A data-sync write is serialised with checkpoints by the checkpoint lock
//! (both append at the log head), built under the state lock and written
//! without it, like a checkpoint. Callers that queue on the checkpoint
//! lock enter their inode in `State::dsync_waiting` first; whoever gets
//! the lock writes one log for every waiting file that fits one, and the
//! others find their file durable when their turn comes (group commit).

use std::time::Instant;

use super::{now_ns, Fs};
use crate::checkpoint::build::Run;
use crate::checkpoint::dsync::FileSync;
use crate::stats::Stats;
use crate::{Error, Result};

impl Fs {
    /// Makes `ino`'s data, size and times durable: a data-sync log if
    /// nothing else of the file changed since the last checkpoint, else a
    /// checkpoint.
    pub(super) fn data_sync(&self, ino: u64) -> Result<()> {
        self.st().dsync_waiting.insert(ino);
        let ckpt = self.lock_ckpt();
        let mut st = self.st();
        st.dsync_waiting.remove(&ino);
        if let Some(r) = self.durable_refusal(&st) {
            return r;
        }
        // Frozen, nothing changed since the freeze's checkpoint.
        if self.frozen_solid() {
            return Ok(());
        }
        match st.file_sync(ino)? {
            FileSync::Nothing => return Ok(()),
            FileSync::Checkpoint => {
                drop(st);
                drop(ckpt);
                return self.sync();
            }
            FileSync::DataSync => {}
        }
        let mut inos = vec![ino];
        for w in std::mem::take(&mut st.dsync_waiting) {
            if st.file_sync(w).ok() == Some(FileSync::DataSync) {
                inos.push(w);
            }
        }
        inos.sort_unstable();
        let t0 = Instant::now();
        let mut plan = match st.build_data_sync(&inos, now_ns()) {
            Ok(Some(p)) => p,
            Ok(None) => {
                // The log head cannot take it: a checkpoint can.
                drop(st);
                drop(ckpt);
                return self.sync();
            }
            Err(e) => {
                self.stop_writing(&mut st, "a data-sync log could not be built", &e);
                return Err(e);
            }
        };
        self.note_dirty(&st);
        let (dev, seed) = (st.dev.clone(), st.seed);
        let bs = st.bs as u64;
        drop(st);
        for r in &mut plan.runs {
            r.seal(bs as usize, seed);
        }
        let io = plan
            .runs
            .iter()
            .try_for_each(|r| write_run(dev.as_ref(), r, bs))
            .and_then(|()| {
                dev.flush().map_err(|e| {
                    Error::io(
                        format!("flushing the data-sync log at block {}", plan.first_block),
                        e,
                    )
                })
            });
        let mut st = self.st();
        if let Err(e) = io {
            let what = format!("the data-sync write of inode(s) {:?} failed", plan.inos);
            self.stop_writing(&mut st, &what, &e);
            return Err(e);
        }
        st.landed(&plan.inflight);
        let blocks: u64 = plan.runs.iter().map(|r| r.blocks.len() as u64).sum();
        Stats::add(&self.stats.data_sync_writes, 1);
        debug_assert_eq!(plan.written.total(), blocks);
        self.stats.add_written(&plan.written, bs);
        log::debug!(
            "data-sync write of inode(s) {:?}: {blocks} blocks ({} data) in {} log(s) at block {}, {:?}",
            plan.inos,
            plan.written.data,
            plan.runs.len(),
            plan.first_block,
            t0.elapsed()
        );
        Ok(())
    }
}

/// Writes one log with one vectored write.
pub(super) fn write_run(dev: &dyn crate::blockdev::BlockDevice, run: &Run, bs: u64) -> Result<()> {
    let slices: Vec<std::io::IoSlice<'_>> = run
        .blocks
        .iter()
        .map(|b| std::io::IoSlice::new(b))
        .collect();
    dev.write_at(&slices, run.block * bs)
        .map_err(|e| Error::io(format!("writing the log at block {}", run.block), e))
}
