//! Checkpoint messages: GET_CPSTAT, GET_CPINFO, SYNC.
//!
//! Byte layouts (offsets in bytes, little-endian, records packed):
//!
//! ```text
//! GetCpstat   (request, 0 bytes)   empty
//! Cpstat      (reply, 24 bytes)
//!    0 u64 last_cno   8 u64 ncheckpoints   16 u64 nsnapshots
//!
//! GetCpinfo   (request, 16 bytes)
//!    0 u64 start_cno   8 u32 count (at most 65536)   12 u32 flags (bit 0:
//!    snapshots only; other bits must be 0)
//! CpinfoList  (reply, 4 + 44 n bytes)
//!    0 u32 n (at most 16384), then n Cpinfo:
//!      0 u64 cno   8 u32 flags   12 u64 ctime_ns   20 u64 nblk_inc
//!     28 u64 inodes_count   36 u64 blocks_count
//!
//! Sync        (request, 4 bytes)
//!    0 u32 flags (bit 0: make a checkpoint even if nothing changed; other
//!    bits must be 0)
//! SyncReply   (reply, 8 bytes)
//!    0 u64 cno
//!
//! GetDiff     (request, 24 + n bytes)
//!    0 u64 old_cno   8 u64 new_cno (0: the current state)   16 path (string,
//!    at most 4096)   then after (string, at most 4096)
//! DiffList    (reply)
//!    0 u8 more (0 or 1)   1 u32 n (at most 65536), then n DiffItem:
//!      0 u8 change (1 created, 2 deleted, 3 modified)   1 path (string)
//! ```

use super::{empty_record, message, request, DecodeError, Reader, Record, Writer};
use crate::codes;

/// Checkpoint statistics [nilfs GET_CPSTAT]. Empty request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetCpstat;

/// Reply to [`GetCpstat`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cpstat {
    /// Number of the last checkpoint.
    pub last_cno: u64,
    /// Valid checkpoints (snapshots included).
    pub ncheckpoints: u64,
    /// Of those, snapshots.
    pub nsnapshots: u64,
}

/// [`GetCpinfo::flags`]: list snapshots only.
pub const GET_CPINFO_SNAPSHOTS_ONLY: u32 = 1 << 0;
/// Every flag a [`GetCpinfo`] may carry; others → EINVAL.
pub const GET_CPINFO_FLAGS_KNOWN: u32 = GET_CPINFO_SNAPSHOTS_ONLY;

/// Checkpoints from `start_cno` on [nilfs GET_CPINFO].
///
/// The reply lists valid checkpoints with `cno >= start_cno` in ascending
/// order, at most `count` and at most [`CpinfoList::MAX_ITEMS`]; a client
/// that wants more asks again from the last `cno + 1`. It is empty when
/// there are no more.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetCpinfo {
    /// First checkpoint number.
    pub start_cno: u64,
    /// Checkpoints wanted, at most [`GetCpinfo::MAX_COUNT`].
    pub count: u32,
    /// `GET_CPINFO_*` bits.
    pub flags: u32,
}

impl GetCpinfo {
    /// Most checkpoints one request may ask for (larger → EINVAL).
    pub const MAX_COUNT: u32 = 1 << 16;
}

/// [`Cpinfo::flags`]: the checkpoint is a snapshot.
pub const CPINFO_SNAPSHOT: u32 = 1 << 0;
/// [`Cpinfo::flags`]: made by the cleaner or a timer, not by a user.
pub const CPINFO_MINOR: u32 = 1 << 1;
/// The [`Cpinfo`] flags this version defines (replies keep others).
pub const CPINFO_FLAGS_KNOWN: u32 = CPINFO_SNAPSHOT | CPINFO_MINOR;

/// One checkpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cpinfo {
    /// Checkpoint number.
    pub cno: u64,
    /// `CPINFO_*` bits; unknown bits are kept.
    pub flags: u32,
    /// Creation time, ns since the Unix epoch.
    pub ctime_ns: u64,
    /// Blocks written since the previous checkpoint.
    pub nblk_inc: u64,
    /// Inodes in use.
    pub inodes_count: u64,
    /// Blocks in use.
    pub blocks_count: u64,
}

impl Cpinfo {
    /// Encoded size.
    pub const SIZE: usize = 44;
}

/// Reply to [`GetCpinfo`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpinfoList {
    /// Checkpoints in ascending order.
    pub items: Vec<Cpinfo>,
}

impl CpinfoList {
    /// Most entries in one reply (so that it fits in `MAX_PAYLOAD`).
    pub const MAX_ITEMS: usize = 1 << 14;
}

/// [`Sync::flags`]: write a checkpoint even if nothing changed.
pub const SYNC_FORCE_CHECKPOINT: u32 = 1 << 0;
/// Every flag a [`Sync`] may carry; others → EINVAL.
pub const SYNC_FLAGS_KNOWN: u32 = SYNC_FORCE_CHECKPOINT;

/// Make everything written so far durable in a checkpoint [nilfs SYNC].
/// Changes the filesystem: root or the owner only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sync {
    /// `SYNC_*` bits.
    pub flags: u32,
}

/// Reply to [`Sync`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncReply {
    /// The checkpoint that now holds everything written before the request
    /// (the new one, or the last one if nothing changed and no checkpoint
    /// was forced).
    pub cno: u64,
}

/// Paths changed between two checkpoints, below `path`, sorted, from the
/// first path after `after` (empty: from the start). A query. ENOENT if
/// either checkpoint does not exist, or `path` is in neither.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GetDiff {
    /// The older checkpoint.
    pub old_cno: u64,
    /// The newer one, 0 for the current state.
    pub new_cno: u64,
    /// Absolute path inside the filesystem (`/` for everything).
    pub path: String,
    /// Resume after this path (the last one of the previous reply).
    pub after: String,
}

/// Longest path in [`GetDiff`] and [`DiffItem`]: a quarter of a frame.
/// Paths inside a filesystem are not bounded by PATH_MAX (a tree can be
/// deeper than any path the kernel resolves; lfs(5), LIMITS), so 4096
/// made the diff of such a tree a reply the client refused; a path
/// longer than this fails the request with ENAMETOOLONG instead.
pub const DIFF_PATH_MAX: usize = 256 << 10;

/// [`DiffItem::change`]: only in the newer checkpoint.
pub const DIFF_CREATED: u8 = 1;
/// [`DiffItem::change`]: only in the older checkpoint.
pub const DIFF_DELETED: u8 = 2;
/// [`DiffItem::change`]: in both, changed.
pub const DIFF_MODIFIED: u8 = 3;

/// One changed path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiffItem {
    /// `DIFF_*`.
    pub change: u8,
    /// The path.
    pub path: String,
}

/// Reply to [`GetDiff`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiffList {
    /// More paths follow: ask again with `after` = the last path.
    pub more: bool,
    /// The paths, sorted.
    pub items: Vec<DiffItem>,
}

impl DiffList {
    /// Most items in one reply.
    pub const MAX_ITEMS: usize = 1 << 16;
}

impl Record for GetDiff {
    const WHAT: &'static str = "GetDiff";
    const MIN_SIZE: usize = 24;
    fn put(&self, w: &mut Writer) {
        w.u64(self.old_cno);
        w.u64(self.new_cno);
        w.string(&self.path);
        w.string(&self.after);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(GetDiff {
            old_cno: r.u64("old_cno")?,
            new_cno: r.u64("new_cno")?,
            path: r.string("path", DIFF_PATH_MAX)?,
            after: r.string("after", DIFF_PATH_MAX)?,
        })
    }
}

impl Record for DiffItem {
    const WHAT: &'static str = "DiffItem";
    const MIN_SIZE: usize = 5;
    fn put(&self, w: &mut Writer) {
        w.u8(self.change);
        w.string(&self.path);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let change = r.u8("change")?;
        if !(DIFF_CREATED..=DIFF_MODIFIED).contains(&change) {
            return Err(r.invalid("change", u64::from(change)));
        }
        Ok(DiffItem {
            change,
            path: r.string("path", DIFF_PATH_MAX)?,
        })
    }
}

impl Record for DiffList {
    const WHAT: &'static str = "DiffList";
    const MIN_SIZE: usize = 5;
    fn put(&self, w: &mut Writer) {
        w.u8(u8::from(self.more));
        w.list(&self.items);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let more = match r.u8("more")? {
            0 => false,
            1 => true,
            v => return Err(r.invalid("more", u64::from(v))),
        };
        Ok(DiffList {
            more,
            items: r.list("items", DiffList::MAX_ITEMS)?,
        })
    }
}

impl Record for Cpstat {
    const WHAT: &'static str = "Cpstat";
    const MIN_SIZE: usize = 24;
    fn put(&self, w: &mut Writer) {
        w.u64(self.last_cno);
        w.u64(self.ncheckpoints);
        w.u64(self.nsnapshots);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Cpstat {
            last_cno: r.u64("last_cno")?,
            ncheckpoints: r.u64("ncheckpoints")?,
            nsnapshots: r.u64("nsnapshots")?,
        })
    }
}

impl Record for GetCpinfo {
    const WHAT: &'static str = "GetCpinfo";
    const MIN_SIZE: usize = 16;
    fn put(&self, w: &mut Writer) {
        w.u64(self.start_cno);
        w.u32(self.count);
        w.u32(self.flags);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let start_cno = r.u64("start_cno")?;
        let count = r.u32("count")?;
        if count > GetCpinfo::MAX_COUNT {
            return Err(DecodeError::BadCount {
                what: Self::WHAT,
                field: "count",
                count: u64::from(count),
                max: u64::from(GetCpinfo::MAX_COUNT),
            });
        }
        let flags = r.flags("flags", GET_CPINFO_FLAGS_KNOWN)?;
        Ok(GetCpinfo {
            start_cno,
            count,
            flags,
        })
    }
}

impl Record for Cpinfo {
    const WHAT: &'static str = "Cpinfo";
    const MIN_SIZE: usize = Cpinfo::SIZE;
    fn put(&self, w: &mut Writer) {
        w.u64(self.cno);
        w.u32(self.flags);
        w.u64(self.ctime_ns);
        w.u64(self.nblk_inc);
        w.u64(self.inodes_count);
        w.u64(self.blocks_count);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Cpinfo {
            cno: r.u64("cno")?,
            flags: r.u32("flags")?,
            ctime_ns: r.u64("ctime_ns")?,
            nblk_inc: r.u64("nblk_inc")?,
            inodes_count: r.u64("inodes_count")?,
            blocks_count: r.u64("blocks_count")?,
        })
    }
}

impl Record for CpinfoList {
    const WHAT: &'static str = "CpinfoList";
    const MIN_SIZE: usize = 4;
    fn put(&self, w: &mut Writer) {
        w.list(&self.items);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(CpinfoList {
            items: r.list("items", CpinfoList::MAX_ITEMS)?,
        })
    }
}

impl Record for Sync {
    const WHAT: &'static str = "Sync";
    const MIN_SIZE: usize = 4;
    fn put(&self, w: &mut Writer) {
        w.u32(self.flags);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Sync {
            flags: r.flags("flags", SYNC_FLAGS_KNOWN)?,
        })
    }
}

impl Record for SyncReply {
    const WHAT: &'static str = "SyncReply";
    const MIN_SIZE: usize = 8;
    fn put(&self, w: &mut Writer) {
        w.u64(self.cno);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(SyncReply { cno: r.u64("cno")? })
    }
}

empty_record!(GetCpstat);

message!(GetCpstat, Cpstat, GetCpinfo, CpinfoList, Sync, SyncReply, GetDiff, DiffList);

request! {
    GetCpstat => codes::GET_CPSTAT, Cpstat;
    GetCpinfo => codes::GET_CPINFO, CpinfoList;
    Sync => codes::SYNC, SyncReply;
    GetDiff => codes::GET_DIFF, DiffList;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::testing::{canonical, golden, hex, round_trip};
    use crate::msg::{DecodeError, Message};
    use proptest::prelude::*;

    #[test]
    fn cpstat_golden() {
        golden(&GetCpstat, "");
        golden(
            &Cpstat {
                last_cno: 0x0a0b,
                ncheckpoints: 12,
                nsnapshots: 1,
            },
            "0b0a000000000000 0c00000000000000 0100000000000000",
        );
    }

    #[test]
    fn get_cpinfo_golden() {
        golden(
            &GetCpinfo {
                start_cno: 1,
                count: 100,
                flags: GET_CPINFO_SNAPSHOTS_ONLY,
            },
            "0100000000000000 64000000 01000000",
        );
    }

    #[test]
    fn get_cpinfo_rejects_unknown_flags_and_large_counts() {
        let bad_flags = GetCpinfo {
            start_cno: 1,
            count: 1,
            flags: 2,
        };
        assert!(matches!(
            GetCpinfo::decode(&bad_flags.encode()),
            Err(DecodeError::InvalidField {
                field: "flags",
                value: 2,
                ..
            })
        ));
        let too_many = GetCpinfo {
            start_cno: 1,
            count: GetCpinfo::MAX_COUNT + 1,
            flags: 0,
        };
        assert!(matches!(
            GetCpinfo::decode(&too_many.encode()),
            Err(DecodeError::BadCount { field: "count", .. })
        ));
    }

    #[test]
    fn cpinfo_list_golden() {
        let l = CpinfoList {
            items: vec![Cpinfo {
                cno: 3,
                flags: CPINFO_SNAPSHOT | CPINFO_MINOR,
                ctime_ns: 0x0102_0304_0506_0708,
                nblk_inc: 17,
                inodes_count: 5,
                blocks_count: 40,
            }],
        };
        golden(
            &l,
            "01000000 0300000000000000 03000000 0807060504030201
             1100000000000000 0500000000000000 2800000000000000",
        );
        assert_eq!(l.encode().len(), 4 + Cpinfo::SIZE);
    }

    #[test]
    fn diff_golden_and_bounds() {
        golden(
            &GetDiff {
                old_cno: 2,
                new_cno: 0,
                path: "/".into(),
                after: String::new(),
            },
            "0200000000000000 0000000000000000 01000000 2f 00000000",
        );
        golden(
            &DiffList {
                more: true,
                items: vec![DiffItem {
                    change: DIFF_MODIFIED,
                    path: "/a".into(),
                }],
            },
            "01 01000000 03 02000000 2f61",
        );
        assert!(matches!(
            DiffList::decode(&hex("00 01000000 04 00000000")),
            Err(DecodeError::InvalidField {
                field: "change",
                ..
            })
        ));
        assert!(matches!(
            DiffList::decode(&hex("02 00000000")),
            Err(DecodeError::InvalidField { field: "more", .. })
        ));
    }

    #[test]
    fn sync_golden_and_flags() {
        golden(
            &Sync {
                flags: SYNC_FORCE_CHECKPOINT,
            },
            "01000000",
        );
        golden(&SyncReply { cno: 9 }, "0900000000000000");
        assert!(matches!(
            Sync::decode(&[2, 0, 0, 0]),
            Err(DecodeError::InvalidField { field: "flags", .. })
        ));
    }

    fn cpinfo() -> impl Strategy<Value = Cpinfo> {
        (any::<u64>(), any::<u32>(), any::<[u64; 4]>()).prop_map(|(cno, flags, v)| Cpinfo {
            cno,
            flags,
            ctime_ns: v[0],
            nblk_inc: v[1],
            inodes_count: v[2],
            blocks_count: v[3],
        })
    }

    proptest! {
        #[test]
        fn round_trips(
            stat in any::<[u64; 3]>(),
            start_cno in any::<u64>(),
            count in 0..=GetCpinfo::MAX_COUNT,
            snapshots in any::<bool>(),
            items in proptest::collection::vec(cpinfo(), 0..32),
            force in any::<bool>(),
            cno in any::<u64>(),
        ) {
            round_trip(&Cpstat { last_cno: stat[0], ncheckpoints: stat[1], nsnapshots: stat[2] })?;
            round_trip(&GetCpinfo { start_cno, count, flags: u32::from(snapshots) })?;
            round_trip(&CpinfoList { items })?;
            round_trip(&Sync { flags: u32::from(force) })?;
            round_trip(&SyncReply { cno })?;
            round_trip(&GetDiff { old_cno: cno, new_cno: start_cno, path: "/x".into(), after: "é".into() })?;
            round_trip(&DiffList { more: force, items: vec![DiffItem { change: DIFF_CREATED, path: "/new".into() }] })?;
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            canonical::<GetCpstat>(&bytes)?;
            canonical::<Cpstat>(&bytes)?;
            canonical::<GetCpinfo>(&bytes)?;
            canonical::<CpinfoList>(&bytes)?;
            canonical::<Sync>(&bytes)?;
            canonical::<SyncReply>(&bytes)?;
            canonical::<GetDiff>(&bytes)?;
            canonical::<DiffList>(&bytes)?;
        }

        #[test]
        fn small_counts_then_random_bytes_never_panic(
            n in 0u32..4,
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut p = n.to_le_bytes().to_vec();
            p.extend_from_slice(&bytes);
            canonical::<CpinfoList>(&p)?;
        }
    }
}
