//! Segment messages: GET_SUSTAT, GET_SUINFO, GET_VINFO (GET_SEG_SUMMARY,
//! which reads the device, is in [`super::device`]).
//!
//! Byte layouts (offsets in bytes, little-endian, records packed):
//!
//! ```text
//! GetSustat        (request, 0 bytes)    empty
//! Sustat           (reply, 88 bytes)
//!    0 u64 nsegs            8 u64 nclean          16 u64 ndirty
//!   24 u64 npending        32 u64 nreserved       40 u32 blocks_per_segment
//!   44 u32 block_size      48 u64 last_cno        56 u64 ctime_ns
//!   64 u64 nongc_ctime_ns  72 u64 prot_seq        80 u64 space_waiters
//!
//! GetSuinfo        (request, 12 bytes)
//!    0 u64 start            8 u32 count (at most 65536)
//! SuinfoList       (reply, 4 + 28 n bytes)
//!    0 u32 n (at most 32768), then n Suinfo:
//!      0 u64 segnum   8 u64 last_mod   16 u32 nblocks   20 u32 nlive   24 u32 flags
//!
//! GetVinfo         (request, 4 + 8 n bytes)
//!    0 u32 n (at most 16384), then n u64 virtual block numbers
//! VinfoList        (reply, 4 + 32 n bytes)
//!    0 u32 n (at most 16384), then n Vinfo:
//!      0 u64 vblock   8 u64 phys   16 u64 start_cno   24 u64 end_cno
//! ```

use super::{empty_record, message, request, DecodeError, Reader, Record, Writer};
use crate::codes;

/// Segment statistics [nilfs GET_SUSTAT]. Empty request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetSustat;

/// Reply to [`GetSustat`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sustat {
    /// Segments in the filesystem.
    pub nsegs: u64,
    /// Clean segments, available for writing.
    pub nclean: u64,
    /// Segments holding written blocks.
    pub ndirty: u64,
    /// Segments freed by cleaning but not yet reusable (until the next
    /// superblock that no longer needs them is durable).
    pub npending: u64,
    /// Segments reserved for the cleaner.
    pub nreserved: u64,
    /// Blocks per segment.
    pub blocks_per_segment: u32,
    /// Block size in bytes.
    pub block_size: u32,
    /// Number of the last checkpoint.
    pub last_cno: u64,
    /// Creation time of the last checkpoint, ns since the Unix epoch.
    pub ctime_ns: u64,
    /// Creation time of the last checkpoint not made by the cleaner, ns.
    pub nongc_ctime_ns: u64,
    /// Protected sequence: logs with a sequence number at or above it may
    /// not be cleaned yet.
    pub prot_seq: u64,
    /// Changes waiting for space right now: a cleaner should clean at
    /// once, whatever a pass nets (not in nilfs).
    pub space_waiters: u64,
}

/// Segment usage of `count` segments from `start` [nilfs GET_SUINFO].
///
/// The reply has one [`Suinfo`] per segment from `start` on, in order, and
/// ends early at the last segment or after [`SuinfoList::MAX_ITEMS`]
/// entries (so that it fits in a frame): a client that wants more asks
/// again from the last `segnum + 1`. Past the last segment it is empty.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetSuinfo {
    /// First segment.
    pub start: u64,
    /// Segments wanted, at most [`GetSuinfo::MAX_COUNT`].
    pub count: u32,
}

impl GetSuinfo {
    /// Most segments one request may ask for (larger → EINVAL).
    pub const MAX_COUNT: u32 = 1 << 16;
}

/// The segment is the one being written (a log head).
pub const SUINFO_ACTIVE: u32 = 1 << 0;
/// The segment holds written blocks (it is not clean).
pub const SUINFO_DIRTY: u32 = 1 << 1;
/// The segment had an I/O error and is never reused.
pub const SUINFO_ERROR: u32 = 1 << 2;
/// Freed by cleaning, not yet reusable (counted in [`Sustat::npending`]).
pub const SUINFO_PENDING: u32 = 1 << 3;

/// Usage of one segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Suinfo {
    /// Segment number.
    pub segnum: u64,
    /// Last modification, seconds since the Unix epoch (0: never written).
    pub last_mod: u64,
    /// Blocks written into the segment.
    pub nblocks: u32,
    /// Of those, blocks still live in the current checkpoint.
    pub nlive: u32,
    /// `SUINFO_*` bits; unknown bits are kept.
    pub flags: u32,
}

impl Suinfo {
    /// Encoded size.
    pub const SIZE: usize = 28;
}

/// Reply to [`GetSuinfo`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SuinfoList {
    /// One entry per segment, in segment order.
    pub items: Vec<Suinfo>,
}

impl SuinfoList {
    /// Most entries in one reply (so that it fits in `MAX_PAYLOAD`).
    pub const MAX_ITEMS: usize = 1 << 15;
}

/// Lifetimes of virtual blocks [nilfs GET_VINFO].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GetVinfo {
    /// Virtual block numbers, at most [`GetVinfo::MAX_BLOCKS`].
    pub vblocks: Vec<u64>,
}

impl GetVinfo {
    /// Most blocks per request (and entries per reply: one each).
    pub const MAX_BLOCKS: usize = 1 << 14;
}

/// Where a virtual block lives and which checkpoints see it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Vinfo {
    /// The virtual block number asked about.
    pub vblock: u64,
    /// Its physical block, 0 if unallocated.
    pub phys: u64,
    /// First checkpoint that sees the block.
    pub start_cno: u64,
    /// First checkpoint that no longer sees it; `u64::MAX` while live.
    pub end_cno: u64,
}

impl Vinfo {
    /// Encoded size.
    pub const SIZE: usize = 32;
}

/// Reply to [`GetVinfo`]: one entry per requested block, in request order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VinfoList {
    /// The entries.
    pub items: Vec<Vinfo>,
}

impl Record for Sustat {
    const WHAT: &'static str = "Sustat";
    const MIN_SIZE: usize = 88;
    fn put(&self, w: &mut Writer) {
        w.u64(self.nsegs);
        w.u64(self.nclean);
        w.u64(self.ndirty);
        w.u64(self.npending);
        w.u64(self.nreserved);
        w.u32(self.blocks_per_segment);
        w.u32(self.block_size);
        w.u64(self.last_cno);
        w.u64(self.ctime_ns);
        w.u64(self.nongc_ctime_ns);
        w.u64(self.prot_seq);
        w.u64(self.space_waiters);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Sustat {
            nsegs: r.u64("nsegs")?,
            nclean: r.u64("nclean")?,
            ndirty: r.u64("ndirty")?,
            npending: r.u64("npending")?,
            nreserved: r.u64("nreserved")?,
            blocks_per_segment: r.u32("blocks_per_segment")?,
            block_size: r.u32("block_size")?,
            last_cno: r.u64("last_cno")?,
            ctime_ns: r.u64("ctime_ns")?,
            nongc_ctime_ns: r.u64("nongc_ctime_ns")?,
            prot_seq: r.u64("prot_seq")?,
            space_waiters: r.u64("space_waiters")?,
        })
    }
}

impl Record for GetSuinfo {
    const WHAT: &'static str = "GetSuinfo";
    const MIN_SIZE: usize = 12;
    fn put(&self, w: &mut Writer) {
        w.u64(self.start);
        w.u32(self.count);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let start = r.u64("start")?;
        let count = r.u32("count")?;
        if count > GetSuinfo::MAX_COUNT {
            return Err(DecodeError::BadCount {
                what: Self::WHAT,
                field: "count",
                count: u64::from(count),
                max: u64::from(GetSuinfo::MAX_COUNT),
            });
        }
        Ok(GetSuinfo { start, count })
    }
}

impl Record for Suinfo {
    const WHAT: &'static str = "Suinfo";
    const MIN_SIZE: usize = Suinfo::SIZE;
    fn put(&self, w: &mut Writer) {
        w.u64(self.segnum);
        w.u64(self.last_mod);
        w.u32(self.nblocks);
        w.u32(self.nlive);
        w.u32(self.flags);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Suinfo {
            segnum: r.u64("segnum")?,
            last_mod: r.u64("last_mod")?,
            nblocks: r.u32("nblocks")?,
            nlive: r.u32("nlive")?,
            flags: r.u32("flags")?,
        })
    }
}

impl Record for SuinfoList {
    const WHAT: &'static str = "SuinfoList";
    const MIN_SIZE: usize = 4;
    fn put(&self, w: &mut Writer) {
        w.list(&self.items);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(SuinfoList {
            items: r.list("items", SuinfoList::MAX_ITEMS)?,
        })
    }
}

/// A bare virtual block number inside [`GetVinfo`].
impl Record for u64 {
    const WHAT: &'static str = "u64";
    const MIN_SIZE: usize = 8;
    fn put(&self, w: &mut Writer) {
        w.u64(*self);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.u64("vblock")
    }
}

impl Record for GetVinfo {
    const WHAT: &'static str = "GetVinfo";
    const MIN_SIZE: usize = 4;
    fn put(&self, w: &mut Writer) {
        w.list(&self.vblocks);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(GetVinfo {
            vblocks: r.list("vblocks", GetVinfo::MAX_BLOCKS)?,
        })
    }
}

impl Record for Vinfo {
    const WHAT: &'static str = "Vinfo";
    const MIN_SIZE: usize = Vinfo::SIZE;
    fn put(&self, w: &mut Writer) {
        w.u64(self.vblock);
        w.u64(self.phys);
        w.u64(self.start_cno);
        w.u64(self.end_cno);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Vinfo {
            vblock: r.u64("vblock")?,
            phys: r.u64("phys")?,
            start_cno: r.u64("start_cno")?,
            end_cno: r.u64("end_cno")?,
        })
    }
}

impl Record for VinfoList {
    const WHAT: &'static str = "VinfoList";
    const MIN_SIZE: usize = 4;
    fn put(&self, w: &mut Writer) {
        w.list(&self.items);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(VinfoList {
            items: r.list("items", GetVinfo::MAX_BLOCKS)?,
        })
    }
}

empty_record!(GetSustat);

message!(GetSustat, Sustat, GetSuinfo, SuinfoList, GetVinfo, VinfoList,);

request! {
    GetSustat => codes::GET_SUSTAT, Sustat;
    GetSuinfo => codes::GET_SUINFO, SuinfoList;
    GetVinfo => codes::GET_VINFO, VinfoList;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::testing::{canonical, golden, round_trip};
    use crate::msg::{DecodeError, Message};
    use proptest::prelude::*;

    #[test]
    fn get_sustat_golden() {
        golden(&GetSustat, "");
    }

    #[test]
    fn sustat_golden() {
        let s = Sustat {
            nsegs: 0x0102,
            nclean: 3,
            ndirty: 4,
            npending: 5,
            nreserved: 6,
            blocks_per_segment: 2048,
            block_size: 4096,
            last_cno: 0x1122_3344_5566_7788,
            ctime_ns: 9,
            nongc_ctime_ns: 10,
            prot_seq: 11,
            space_waiters: 12,
        };
        golden(
            &s,
            "0201000000000000 0300000000000000 0400000000000000
             0500000000000000 0600000000000000 00080000 00100000
             8877665544332211 0900000000000000 0a00000000000000
             0b00000000000000 0c00000000000000",
        );
        assert_eq!(s.encode().len(), <Sustat as Record>::MIN_SIZE);
    }

    #[test]
    fn get_suinfo_golden_and_count_limit() {
        golden(
            &GetSuinfo {
                start: 7,
                count: 0x10000,
            },
            "0700000000000000 00000100",
        );
        let over = GetSuinfo {
            start: 0,
            count: GetSuinfo::MAX_COUNT + 1,
        };
        assert!(matches!(
            GetSuinfo::decode(&over.encode()),
            Err(DecodeError::BadCount {
                field: "count",
                count: 0x10001,
                ..
            })
        ));
    }

    #[test]
    fn suinfo_list_golden() {
        let l = SuinfoList {
            items: vec![
                Suinfo {
                    segnum: 1,
                    last_mod: 0x6000_0000,
                    nblocks: 2048,
                    nlive: 100,
                    flags: SUINFO_DIRTY,
                },
                Suinfo {
                    segnum: 2,
                    last_mod: 0,
                    nblocks: 0,
                    nlive: 0,
                    flags: SUINFO_ACTIVE | 0x8000_0000,
                },
            ],
        };
        golden(
            &l,
            "02000000
             0100000000000000 0000006000000000 00080000 64000000 02000000
             0200000000000000 0000000000000000 00000000 00000000 01000080",
        );
        golden(&SuinfoList::default(), "00000000");
        assert_eq!(l.encode().len(), 4 + 2 * Suinfo::SIZE);
    }

    #[test]
    fn vinfo_golden() {
        golden(
            &GetVinfo {
                vblocks: vec![5, u64::MAX],
            },
            "02000000 0500000000000000 ffffffffffffffff",
        );
        golden(
            &VinfoList {
                items: vec![Vinfo {
                    vblock: 5,
                    phys: 0x1234,
                    start_cno: 2,
                    end_cno: u64::MAX,
                }],
            },
            "01000000 0500000000000000 3412000000000000 0200000000000000 ffffffffffffffff",
        );
    }

    #[test]
    fn vinfo_counts_are_capped() {
        let n = GetVinfo::MAX_BLOCKS + 1;
        let req = GetVinfo {
            vblocks: vec![0; n],
        };
        assert!(matches!(
            GetVinfo::decode(&req.encode()),
            Err(DecodeError::BadCount { count, max, .. })
                if count == n as u64 && max == GetVinfo::MAX_BLOCKS as u64
        ));
    }

    fn suinfo() -> impl Strategy<Value = Suinfo> {
        (
            any::<u64>(),
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
        )
            .prop_map(|(segnum, last_mod, nblocks, nlive, flags)| Suinfo {
                segnum,
                last_mod,
                nblocks,
                nlive,
                flags,
            })
    }

    fn vinfo() -> impl Strategy<Value = Vinfo> {
        any::<[u64; 4]>().prop_map(|[vblock, phys, start_cno, end_cno]| Vinfo {
            vblock,
            phys,
            start_cno,
            end_cno,
        })
    }

    fn sustat() -> impl Strategy<Value = Sustat> {
        (any::<[u64; 10]>(), any::<[u32; 2]>()).prop_map(|(v, [bps, bs])| Sustat {
            nsegs: v[0],
            nclean: v[1],
            ndirty: v[2],
            npending: v[3],
            nreserved: v[4],
            blocks_per_segment: bps,
            block_size: bs,
            last_cno: v[5],
            ctime_ns: v[6],
            nongc_ctime_ns: v[7],
            prot_seq: v[8],
            space_waiters: v[9],
        })
    }

    proptest! {
        #[test]
        fn sustat_round_trips(s in sustat()) {
            round_trip(&s)?;
        }

        #[test]
        fn get_suinfo_round_trips(start in any::<u64>(), count in 0..=GetSuinfo::MAX_COUNT) {
            round_trip(&GetSuinfo { start, count })?;
        }

        #[test]
        fn suinfo_list_round_trips(items in proptest::collection::vec(suinfo(), 0..32)) {
            round_trip(&SuinfoList { items })?;
        }

        #[test]
        fn vinfo_round_trips(
            vblocks in proptest::collection::vec(any::<u64>(), 0..32),
            items in proptest::collection::vec(vinfo(), 0..32),
        ) {
            round_trip(&GetVinfo { vblocks })?;
            round_trip(&VinfoList { items })?;
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            canonical::<GetSustat>(&bytes)?;
            canonical::<Sustat>(&bytes)?;
            canonical::<GetSuinfo>(&bytes)?;
            canonical::<SuinfoList>(&bytes)?;
            canonical::<GetVinfo>(&bytes)?;
            canonical::<VinfoList>(&bytes)?;
        }

        #[test]
        fn small_counts_then_random_bytes_never_panic(
            n in 0u32..4,
            bytes in proptest::collection::vec(any::<u8>(), 0..256),
        ) {
            // Random bytes rarely start with a count that fits: force one.
            let mut p = n.to_le_bytes().to_vec();
            p.extend_from_slice(&bytes);
            canonical::<SuinfoList>(&p)?;
            canonical::<GetVinfo>(&p)?;
            canonical::<VinfoList>(&p)?;
        }
    }
}
