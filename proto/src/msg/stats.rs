//! Statistics messages: GET_STATS, GET_DF.
//!
//! Byte layouts (offsets in bytes, little-endian, records packed; a string
//! is a u32 byte length then UTF-8):
//!
//! ```text
//! GetStats   (request, 0 bytes)   empty
//! Stats      (reply)
//!    u32 n (at most 4096), then n counters: string name (at most 256
//!    bytes), u64 value;
//!    u32 h (at most 256), then h histograms: string name (at most 256
//!    bytes), u32 b (at most 256), b u64 bucket_upper_ns, u32 b again, b
//!    u64 counts (the two counts must be equal).
//!
//! GetDf      (request, 0 bytes)   empty
//! Df         (reply, 76 bytes)
//!    0 u32 block_size   4 u64 total_blocks   12 u64 free_blocks
//!   20 u64 reserved_blocks   28 u64 live_blocks   36 u64 snapshot_blocks
//!   44 u64 protected_blocks   52 u64 reclaimable_blocks   60 u64 booked_blocks
//!   68 u64 checkpoints_expired_for_space
//! ```

use super::{empty_record, message, request, DecodeError, Reader, Record, Writer};
use crate::codes;

/// The engine's counters and latency histograms. Empty request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetStats;

/// Reply to [`GetStats`]. Self-describing, so that the engine can add a
/// counter or a histogram without a protocol change; clients look values
/// up by name and ignore names they do not know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// (name, value) pairs, at most [`Stats::MAX_COUNTERS`].
    pub counters: Vec<(String, u64)>,
    /// At most [`Stats::MAX_HISTOGRAMS`].
    pub histograms: Vec<Histogram>,
}

impl Stats {
    /// Most counters in a reply.
    pub const MAX_COUNTERS: usize = 4096;
    /// Most histograms in a reply.
    pub const MAX_HISTOGRAMS: usize = 256;
    /// Longest counter or histogram name, in bytes.
    pub const MAX_NAME_LEN: usize = 256;

    /// The value of counter `name`, if the reply has it.
    pub fn counter(&self, name: &str) -> Option<u64> {
        self.counters
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, v)| v)
    }

    /// Histogram `name`, if the reply has it.
    pub fn histogram(&self, name: &str) -> Option<&Histogram> {
        self.histograms.iter().find(|h| h.name == name)
    }
}

/// A latency histogram: `counts[i]` events took at most
/// `bucket_upper_ns[i]` (and more than the previous bound). The bounds
/// ascend; the last may be `u64::MAX`. Both vectors have the same length.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Histogram {
    /// Its name.
    pub name: String,
    /// Upper bound of each bucket, ns.
    pub bucket_upper_ns: Vec<u64>,
    /// Events per bucket.
    pub counts: Vec<u64>,
}

impl Histogram {
    /// Most buckets.
    pub const MAX_BUCKETS: usize = 256;
}

/// Where the space went (`fsctl df`). Empty request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetDf;

/// Reply to [`GetDf`], in blocks of `block_size` bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Df {
    /// Block size in bytes.
    pub block_size: u32,
    /// Blocks in all segments.
    pub total_blocks: u64,
    /// Blocks available for writing (clean segments, the rest of the
    /// segment being written).
    pub free_blocks: u64,
    /// Blocks of the segments reserved for the cleaner.
    pub reserved_blocks: u64,
    /// Blocks the current checkpoint references.
    pub live_blocks: u64,
    /// Blocks a snapshot holds (plain checkpoints may hold them too).
    pub snapshot_blocks: u64,
    /// Blocks only older plain checkpoints hold.
    pub protected_blocks: u64,
    /// Dead blocks in dirty segments: what cleaning would give back.
    pub reclaimable_blocks: u64,
    /// Free blocks kept back for a due DAT merge (counted in
    /// `free_blocks`; statfs counts them as used).
    pub booked_blocks: u64,
    /// Plain checkpoints fsd deleted since mount because space ran short
    /// (history yields to space).
    pub checkpoints_expired_for_space: u64,
}

/// A counter inside [`Stats`].
impl Record for (String, u64) {
    const WHAT: &'static str = "Stats counter";
    const MIN_SIZE: usize = 12;
    fn put(&self, w: &mut Writer) {
        w.string(&self.0);
        w.u64(self.1);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok((
            r.string("counter name", Stats::MAX_NAME_LEN)?,
            r.u64("counter value")?,
        ))
    }
}

impl Record for Histogram {
    const WHAT: &'static str = "Histogram";
    const MIN_SIZE: usize = 12;
    fn put(&self, w: &mut Writer) {
        w.string(&self.name);
        w.list(&self.bucket_upper_ns);
        w.list(&self.counts);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let name = r.string("histogram name", Stats::MAX_NAME_LEN)?;
        let bucket_upper_ns: Vec<u64> = r.list("bucket_upper_ns", Histogram::MAX_BUCKETS)?;
        let counts: Vec<u64> = r.list("counts", Histogram::MAX_BUCKETS)?;
        if counts.len() != bucket_upper_ns.len() {
            return Err(r.invalid("histogram counts length", counts.len() as u64));
        }
        Ok(Histogram {
            name,
            bucket_upper_ns,
            counts,
        })
    }
}

impl Record for Stats {
    const WHAT: &'static str = "Stats";
    const MIN_SIZE: usize = 8;
    fn put(&self, w: &mut Writer) {
        w.list(&self.counters);
        w.list(&self.histograms);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Stats {
            counters: r.list("counters", Stats::MAX_COUNTERS)?,
            histograms: r.list("histograms", Stats::MAX_HISTOGRAMS)?,
        })
    }
}

impl Record for Df {
    const WHAT: &'static str = "Df";
    const MIN_SIZE: usize = 76;
    fn put(&self, w: &mut Writer) {
        w.u32(self.block_size);
        w.u64(self.total_blocks);
        w.u64(self.free_blocks);
        w.u64(self.reserved_blocks);
        w.u64(self.live_blocks);
        w.u64(self.snapshot_blocks);
        w.u64(self.protected_blocks);
        w.u64(self.reclaimable_blocks);
        w.u64(self.booked_blocks);
        w.u64(self.checkpoints_expired_for_space);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Df {
            block_size: r.u32("block_size")?,
            total_blocks: r.u64("total_blocks")?,
            free_blocks: r.u64("free_blocks")?,
            reserved_blocks: r.u64("reserved_blocks")?,
            live_blocks: r.u64("live_blocks")?,
            snapshot_blocks: r.u64("snapshot_blocks")?,
            protected_blocks: r.u64("protected_blocks")?,
            reclaimable_blocks: r.u64("reclaimable_blocks")?,
            booked_blocks: r.u64("booked_blocks")?,
            checkpoints_expired_for_space: r.u64("checkpoints_expired_for_space")?,
        })
    }
}

empty_record!(GetStats, GetDf);

message!(GetStats, Stats, GetDf, Df);

request! {
    GetStats => codes::GET_STATS, Stats;
    GetDf => codes::GET_DF, Df;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::testing::{canonical, golden, round_trip, text};
    use crate::msg::{DecodeError, Message};
    use proptest::prelude::*;

    #[test]
    fn stats_golden() {
        golden(&GetStats, "");
        let s = Stats {
            counters: vec![("fsyncs".to_string(), 3), ("é".to_string(), 0x100)],
            histograms: vec![Histogram {
                name: "fsync".to_string(),
                bucket_upper_ns: vec![1000, u64::MAX],
                counts: vec![2, 1],
            }],
        };
        golden(
            &s,
            "02000000
               06000000 6673796e6373 0300000000000000
               02000000 c3a9 0001000000000000
             01000000
               05000000 6673796e63
               02000000 e803000000000000 ffffffffffffffff
               02000000 0200000000000000 0100000000000000",
        );
    }

    #[test]
    fn stats_lookups() {
        let s = Stats {
            counters: vec![("a".to_string(), 1), ("b".to_string(), 2)],
            histograms: vec![Histogram {
                name: "h".to_string(),
                ..Histogram::default()
            }],
        };
        assert_eq!(s.counter("b"), Some(2));
        assert_eq!(s.counter("c"), None);
        assert!(s.histogram("h").is_some());
        assert!(s.histogram("x").is_none());
    }

    #[test]
    fn histogram_lengths_must_agree() {
        let h = Stats {
            counters: vec![],
            histograms: vec![Histogram {
                name: String::new(),
                bucket_upper_ns: vec![1, 2],
                counts: vec![1],
            }],
        };
        assert!(matches!(
            Stats::decode(&h.encode()),
            Err(DecodeError::InvalidField {
                field: "histogram counts length",
                value: 1,
                ..
            })
        ));
    }

    #[test]
    fn names_are_bounded() {
        let s = Stats {
            counters: vec![("n".repeat(Stats::MAX_NAME_LEN + 1), 0)],
            histograms: vec![],
        };
        assert!(matches!(
            Stats::decode(&s.encode()),
            Err(DecodeError::BadCount {
                field: "counter name",
                ..
            })
        ));
    }

    #[test]
    fn df_golden() {
        golden(&GetDf, "");
        let d = Df {
            block_size: 4096,
            total_blocks: 1,
            free_blocks: 2,
            reserved_blocks: 3,
            live_blocks: 4,
            snapshot_blocks: 5,
            protected_blocks: 6,
            reclaimable_blocks: 7,
            booked_blocks: 8,
            checkpoints_expired_for_space: 9,
        };
        golden(
            &d,
            "00100000 0100000000000000 0200000000000000 0300000000000000
             0400000000000000 0500000000000000 0600000000000000 0700000000000000
             0800000000000000 0900000000000000",
        );
        assert_eq!(d.encode().len(), <Df as Record>::MIN_SIZE);
    }

    fn histogram() -> impl Strategy<Value = Histogram> {
        (
            text(16),
            proptest::collection::vec(any::<(u64, u64)>(), 0..40),
        )
            .prop_map(|(name, buckets)| Histogram {
                name,
                bucket_upper_ns: buckets.iter().map(|b| b.0).collect(),
                counts: buckets.iter().map(|b| b.1).collect(),
            })
    }

    proptest! {
        #[test]
        fn stats_round_trip(
            counters in proptest::collection::vec((text(24), any::<u64>()), 0..20),
            histograms in proptest::collection::vec(histogram(), 0..4),
        ) {
            round_trip(&Stats { counters, histograms })?;
        }

        #[test]
        fn df_round_trips(bs in any::<u32>(), v in any::<[u64; 9]>()) {
            round_trip(&Df {
                block_size: bs,
                total_blocks: v[0],
                free_blocks: v[1],
                reserved_blocks: v[2],
                live_blocks: v[3],
                snapshot_blocks: v[4],
                protected_blocks: v[5],
                reclaimable_blocks: v[6],
                booked_blocks: v[7],
                checkpoints_expired_for_space: v[8],
            })?;
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            canonical::<GetStats>(&bytes)?;
            canonical::<Stats>(&bytes)?;
            canonical::<GetDf>(&bytes)?;
            canonical::<Df>(&bytes)?;
        }

        #[test]
        fn small_counts_then_random_bytes_never_panic(
            n in 0u32..3,
            len in 0u32..8,
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut p = n.to_le_bytes().to_vec();
            p.extend_from_slice(&len.to_le_bytes());
            p.extend_from_slice(&bytes);
            canonical::<Stats>(&p)?;
            let mut h = 0u32.to_le_bytes().to_vec();
            h.extend_from_slice(&p);
            canonical::<Stats>(&h)?;
        }
    }
}
