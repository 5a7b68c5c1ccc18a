//! Counters and latency histograms of a mounted filesystem (DESIGN §8).
//!
//! Everything is an atomic, updated without any lock on the paths it
//! measures; `snapshot` reads a consistent-enough copy for `fsctl stat`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Histogram buckets: bucket `i` counts durations below 2^i microseconds
/// (bucket 0: below 1 µs); the last one counts everything longer.
pub const BUCKETS: usize = 32;

/// A log2 latency histogram.
#[derive(Debug)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS],
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Histogram {
    /// Records one duration.
    pub fn record(&self, d: Duration) {
        let us = d.as_micros() as u64;
        let i = if us == 0 {
            0
        } else {
            (64 - us.leading_zeros() as usize).min(BUCKETS - 1)
        };
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }

    /// (upper bound in ns, count) per bucket; the last bound is u64::MAX.
    pub fn snapshot(&self) -> Vec<(u64, u64)> {
        (0..BUCKETS)
            .map(|i| {
                let upper = if i + 1 == BUCKETS {
                    u64::MAX
                } else {
                    (1u64 << i) * 1000
                };
                (upper, self.counts[i].load(Ordering::Relaxed))
            })
            .collect()
    }
}

/// The value at quantile `q` (0 to 1) of a histogram snapshot, as the
/// upper bound of the bucket it falls in (ns); None if empty.
pub fn quantile(h: &[(u64, u64)], q: f64) -> Option<u64> {
    let total: u64 = h.iter().map(|&(_, c)| c).sum();
    if total == 0 {
        return None;
    }
    let want = ((total as f64) * q).ceil().max(1.0) as u64;
    let mut seen = 0;
    for &(upper, c) in h {
        seen += c;
        if seen >= want {
            return Some(upper);
        }
    }
    h.last().map(|&(u, _)| u)
}

/// The engine's counters.
#[derive(Debug, Default)]
pub struct Stats {
    /// Bytes applications wrote.
    pub user_bytes: AtomicU64,
    /// Device bytes written for user data blocks.
    pub dev_data_bytes: AtomicU64,
    /// Device bytes written for everything else (indirect, directory and
    /// metadata blocks, summaries, super roots, superblocks).
    pub dev_meta_bytes: AtomicU64,
    /// Device bytes written to the cold log by cleaning (moved blocks and
    /// their summaries).
    pub gc_bytes: AtomicU64,
    /// Cleaning passes that moved blocks or freed segments.
    pub gc_passes: AtomicU64,
    /// Blocks cleaning moved.
    pub gc_blocks_moved: AtomicU64,
    /// Checkpoints written.
    pub checkpoints: AtomicU64,
    /// fsync and fdatasync calls.
    pub fsyncs: AtomicU64,
    /// Data-sync writes (fdatasync without a checkpoint; one may cover
    /// several files).
    pub data_sync_writes: AtomicU64,
    /// Writers that waited for a checkpoint at the dirty limit.
    pub throttle_waits: AtomicU64,
    /// Writers slowed down in the proportional band.
    pub throttle_sleeps: AtomicU64,
    /// Changes that found no space and waited for the engine's steps
    /// toward space (`fs/space.rs`).
    pub space_waits: AtomicU64,
    /// Plain checkpoints the engine deleted because space ran short.
    pub checkpoints_expired_for_space: AtomicU64,
    /// Cleaning passes the engine ran itself because space ran short.
    pub space_passes: AtomicU64,
    /// Segments freed (all blocks dead).
    pub segments_freed: AtomicU64,
    /// Of `dev_meta_bytes`: DAT blocks and their indirect blocks.
    pub dev_dat_bytes: AtomicU64,
    /// Of `dev_meta_bytes`: indirect blocks of user files and of the
    /// inode file.
    pub dev_indirect_bytes: AtomicU64,
    /// Of `dev_meta_bytes`: inode file blocks (and the inode records of
    /// data-sync logs).
    pub dev_ifile_bytes: AtomicU64,
    /// Of `dev_meta_bytes`: checkpoint file and segment usage file blocks
    /// with their indirect blocks.
    pub dev_cpfile_sufile_bytes: AtomicU64,
    /// Of `dev_meta_bytes`: log summary blocks and super roots (the cold
    /// log's summaries are in `gc_bytes`).
    pub dev_summary_bytes: AtomicU64,
    /// Checkpoints written by cleaning passes (a pass ends with one).
    pub gc_checkpoints: AtomicU64,
    /// fsync latency.
    pub fsync_latency: Histogram,
    /// write() latency.
    pub write_latency: Histogram,
    /// Checkpoint latency (build, write, flush).
    pub checkpoint_latency: Histogram,
    /// Waits for the engine's state lock, recorded only when it was held
    /// by another thread: how long a request stood behind a checkpoint
    /// build, a history step or a cleaning pass's commit.
    pub state_lock_wait: Histogram,
}

/// Blocks one checkpoint or data-sync write puts on the device, by what
/// they are: where write amplification goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// User file data (regular files and symbolic links).
    pub data: u64,
    /// DAT blocks and their indirect blocks.
    pub dat: u64,
    /// Indirect blocks of user files and of the inode file.
    pub indirect: u64,
    /// Inode file blocks, and inode records of data-sync logs.
    pub ifile: u64,
    /// Checkpoint file and segment usage file blocks, with their indirect
    /// blocks.
    pub cpfile_sufile: u64,
    /// Log summary blocks and super roots outside the cold log.
    pub summary: u64,
    /// Everything else outside the cold log: directory and extended
    /// attribute blocks.
    pub other: u64,
    /// The cold log: blocks cleaning moved, with their summaries.
    pub cold: u64,
}

impl Written {
    /// Every block counted.
    pub fn total(&self) -> u64 {
        self.data
            + self.dat
            + self.indirect
            + self.ifile
            + self.cpfile_sufile
            + self.summary
            + self.other
            + self.cold
    }

    /// Blocks that are neither user data nor the cold log.
    pub fn meta(&self) -> u64 {
        self.total() - self.data - self.cold
    }
}

/// A copy of the counters for reporting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// (name, value), in a fixed order.
    pub counters: Vec<(&'static str, u64)>,
    /// (name, buckets as (upper bound ns, count)).
    pub histograms: Vec<(&'static str, Vec<(u64, u64)>)>,
}

impl StatsSnapshot {
    /// The counter `name` (see [`Stats::snapshot`] for the names), or
    /// `None` if there is no such counter.
    pub fn counter(&self, name: &str) -> Option<u64> {
        self.counters
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, v)| v)
    }
}

impl Stats {
    /// Adds `n` to a counter.
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts the blocks of one checkpoint or data-sync write, of `bs`
    /// bytes each.
    pub fn add_written(&self, w: &Written, bs: u64) {
        Stats::add(&self.dev_data_bytes, w.data * bs);
        Stats::add(&self.gc_bytes, w.cold * bs);
        Stats::add(&self.dev_meta_bytes, w.meta() * bs);
        Stats::add(&self.dev_dat_bytes, w.dat * bs);
        Stats::add(&self.dev_indirect_bytes, w.indirect * bs);
        Stats::add(&self.dev_ifile_bytes, w.ifile * bs);
        Stats::add(&self.dev_cpfile_sufile_bytes, w.cpfile_sufile * bs);
        Stats::add(&self.dev_summary_bytes, w.summary * bs);
    }

    /// A copy of every counter and histogram.
    pub fn snapshot(&self) -> StatsSnapshot {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StatsSnapshot {
            counters: vec![
                ("user_bytes_written", g(&self.user_bytes)),
                ("device_data_bytes_written", g(&self.dev_data_bytes)),
                ("device_meta_bytes_written", g(&self.dev_meta_bytes)),
                ("device_gc_bytes_written", g(&self.gc_bytes)),
                ("gc_passes", g(&self.gc_passes)),
                ("gc_blocks_moved", g(&self.gc_blocks_moved)),
                ("checkpoints", g(&self.checkpoints)),
                ("fsyncs", g(&self.fsyncs)),
                ("data_sync_writes", g(&self.data_sync_writes)),
                ("throttle_waits", g(&self.throttle_waits)),
                ("throttle_sleeps", g(&self.throttle_sleeps)),
                ("space_waits", g(&self.space_waits)),
                ("segments_freed", g(&self.segments_freed)),
                ("device_dat_bytes_written", g(&self.dev_dat_bytes)),
                ("device_indirect_bytes_written", g(&self.dev_indirect_bytes)),
                ("device_ifile_bytes_written", g(&self.dev_ifile_bytes)),
                (
                    "device_cpfile_sufile_bytes_written",
                    g(&self.dev_cpfile_sufile_bytes),
                ),
                ("device_summary_bytes_written", g(&self.dev_summary_bytes)),
                ("gc_checkpoints", g(&self.gc_checkpoints)),
                (
                    "checkpoints_expired_for_space",
                    g(&self.checkpoints_expired_for_space),
                ),
                ("space_passes", g(&self.space_passes)),
            ],
            histograms: vec![
                ("fsync_latency", self.fsync_latency.snapshot()),
                ("write_latency", self.write_latency.snapshot()),
                ("checkpoint_latency", self.checkpoint_latency.snapshot()),
                ("state_lock_wait", self.state_lock_wait.snapshot()),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_and_quantiles() {
        let h = Histogram::default();
        for us in [0u64, 1, 3, 900, 1500] {
            h.record(Duration::from_micros(us));
        }
        let s = h.snapshot();
        assert_eq!(s[0], (1000, 1));
        assert_eq!(s[1].1, 1);
        assert_eq!(s[2].1, 1);
        assert_eq!(quantile(&s, 0.5), Some(4000));
        assert_eq!(quantile(&s, 1.0), Some(2048 * 1000));
        assert_eq!(quantile(&Histogram::default().snapshot(), 0.5), None);
    }
}
