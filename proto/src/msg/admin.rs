//! Requests that change checkpoints and segments, or stop all changes:
//! CHANGE_CPMODE, DELETE_CHECKPOINT, CLEAN_SEGMENTS, SET_SUINFO,
//! MOUNT_CHECKPOINT, UMOUNT_CHECKPOINT, FREEZE and THAW.
//!
//! Byte layouts (offsets in bytes, little-endian, records packed):
//!
//! ```text
//! ChangeCpmode     (request, 16 bytes)
//!    0 u64 cno   8 u32 mode (0 checkpoint, 1 snapshot)   12 u32 flags (0)
//! DeleteCheckpoint (request, 8 bytes)
//!    0 u64 cno
//! Done             (reply to both, and to SetSuinfo, 0 bytes)   empty
//!
//! CleanSegments    (request, 8 + 8 n bytes)
//!    0 u32 protection_s   4 u32 n (at most 1024), then n u64 segment numbers
//! CleanReply       (reply, 40 bytes)
//!    0 u64 blocks_moved   8 u64 segments_freed   16 u64 bytes_written
//!   24 u64 checkpoints_deleted   32 u64 blocks_freed
//!
//! SetSuinfo        (request, 4 + 16 n bytes)
//!    0 u32 n (at most 4096), then n SuUpdate:
//!      0 u64 segnum   8 u64 last_mod (seconds since the Unix epoch)
//!
//! MountCheckpoint  (request, 12 + n bytes)
//!    0 u64 cno   8 the mount point (string: u32 length at most 4096, UTF-8)
//! UmountCheckpoint (request, 4 + n bytes)
//!    0 the mount point (string)
//!
//! Freeze           (request, 0 bytes)   empty; reply Done
//! Thaw             (request, 0 bytes)   empty; reply Done
//! ```

use super::{empty_record, message, request, DecodeError, Reader, Record, Writer};
use crate::codes;

/// [`ChangeCpmode::mode`]: a plain checkpoint (reclaimable by cleaning).
pub const CPMODE_CHECKPOINT: u32 = 0;
/// [`ChangeCpmode::mode`]: a snapshot (kept, with its blocks, until turned
/// back into a checkpoint).
pub const CPMODE_SNAPSHOT: u32 = 1;

/// Turns checkpoint `cno` into a snapshot or back [nilfs CHANGE_CPMODE].
/// Changes the filesystem: root or the owner only. ENOENT if there is no
/// such checkpoint, EBUSY if it is a snapshot mounted read-only and would
/// stop being one, EINVAL for an unknown mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChangeCpmode {
    /// The checkpoint.
    pub cno: u64,
    /// `CPMODE_*`.
    pub mode: u32,
    /// Must be 0.
    pub flags: u32,
}

/// Deletes checkpoint `cno` [nilfs DELETE_CHECKPOINT]; the blocks only it
/// kept become free. ENOENT if there is no such checkpoint, EBUSY for a
/// snapshot (turn it into a checkpoint first), a mounted checkpoint or the
/// latest one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeleteCheckpoint {
    /// The checkpoint.
    pub cno: u64,
}

/// Freezes the filesystem [Linux FIFREEZE]: once the changes in progress
/// are done, a checkpoint of whatever changed is written, the superblock
/// names it and the device is flushed; from the reply until [`Thaw`] the
/// daemon writes nothing to the device. Every change (a write, a
/// namespace or attribute change, a checkpoint request, a cleaning pass)
/// waits, without failing, until the thaw; reads and queries are served.
/// The freeze outlives the connection that asked for it (as fsfreeze(8)).
/// Changes the filesystem: root or the owner only. EBUSY if it is frozen
/// already or being frozen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Freeze;

/// Thaws a frozen filesystem [Linux FITHAW]: the changes waiting go on.
/// Root or the owner only. EINVAL if it is not frozen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Thaw;

/// Empty reply: the request was carried out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Done;

/// Cleans `segments` [nilfs CLEAN_SEGMENTS].
///
/// First every plain checkpoint created more than `protection_s` seconds
/// ago is deleted (never a snapshot, a mounted checkpoint or the latest
/// one), so the blocks only those checkpoints kept are dead. Then the live
/// blocks of each segment are copied to the cold log and the segments
/// become clean at the next checkpoint, which the request writes before it
/// replies; that checkpoint records the deletion too. With no segments,
/// the deletion is written by the next checkpoint, at once only if it
/// emptied whole segments. EINVAL for a segment out of range, EBUSY if a cleaning is
/// already running, EAGAIN for a segment that is a log head, clean or
/// written after the last checkpoint (recovery may need it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanSegments {
    /// Checkpoints younger than this (seconds) are kept.
    pub protection_s: u32,
    /// Segments to clean, at most [`CleanSegments::MAX_SEGMENTS`].
    pub segments: Vec<u64>,
    /// Those of `segments` whose live blocks go to the cleaner's warm head
    /// rather than its cold one (a policy that separates hot survivors
    /// from cold ones); EINVAL for a segment not in `segments`.
    pub warm: Vec<u64>,
    /// `CLEAN_*` flags; unknown bits are EINVAL.
    pub flags: u32,
}

/// [`CleanSegments::flags`]: from this request on, until one without the
/// flag, fsd writes file data whose previous version lived longer than
/// the mean apart from the rest (the cleaner's policy separates user
/// writes by expected lifetime, as SepBIT does).
pub const CLEAN_SEPARATE_WRITES: u32 = 1;
/// [`CleanSegments::flags`]: this request's moved blocks that were
/// written more recently than the mean lifespan of overwritten blocks go
/// to the warm head, the older ones to the cold head (SepBIT's classes of
/// cleaned blocks by age, per block rather than per victim).
pub const CLEAN_WARM_YOUNG: u32 = 2;
/// Flag of [`CleanSegments::flags`]: keep the checkpoints younger than
/// `protection_s` even when space runs short (NoSpace rather than lose
/// history, as nilfs); without it the engine deletes the oldest plain
/// checkpoints when space runs short. fsd remembers it until a request
/// says otherwise.
pub const CLEAN_STRICT_PROTECTION: u32 = 4;
const CLEAN_FLAGS_KNOWN: u32 = CLEAN_SEPARATE_WRITES | CLEAN_WARM_YOUNG | CLEAN_STRICT_PROTECTION;

impl CleanSegments {
    /// Most segments one request may name.
    pub const MAX_SEGMENTS: usize = 1024;
}

/// Reply to [`CleanSegments`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanReply {
    /// Live blocks copied to the cold log.
    pub blocks_moved: u64,
    /// Segments the pass made clean (reusable once the superblock that
    /// follows its checkpoint is durable).
    pub segments_freed: u64,
    /// Bytes the pass wrote (copied blocks and their metadata).
    pub bytes_written: u64,
    /// Checkpoints deleted because they were older than the protection
    /// period.
    pub checkpoints_deleted: u64,
    /// Blocks that became free because no checkpoint kept them any more.
    pub blocks_freed: u64,
}

/// One segment's new usage for [`SetSuinfo`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SuUpdate {
    /// Segment number.
    pub segnum: u64,
    /// New last-modified time, seconds since the Unix epoch.
    pub last_mod: u64,
}

impl SuUpdate {
    /// Encoded size.
    pub const SIZE: usize = 16;
}

/// Sets the last-modified time of segments [nilfs SET_SUINFO]: a cleaner
/// defers a segment it chose not to clean yet by making it look young.
/// EINVAL for a segment out of range.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetSuinfo {
    /// The updates, at most [`SetSuinfo::MAX_ITEMS`].
    pub items: Vec<SuUpdate>,
}

impl SetSuinfo {
    /// Most updates in one request.
    pub const MAX_ITEMS: usize = 4096;
}

/// Longest mount point path in [`MountCheckpoint`] and
/// [`UmountCheckpoint`].
pub const MOUNT_PATH_MAX: usize = 4096;

/// Mounts checkpoint `cno` read-only at `path`, served by the running fsd
/// as another FUSE session while the filesystem stays mounted. Changes the
/// system: root or the owner only. ENOENT if there is no such checkpoint,
/// EINVAL for a path that is not absolute, ENOTDIR if it is not a
/// directory, EBUSY if something is mounted there already.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MountCheckpoint {
    /// The checkpoint.
    pub cno: u64,
    /// Absolute path of an existing directory.
    pub path: String,
}

/// Unmounts a checkpoint mounted by [`MountCheckpoint`] at `path`. ENOENT
/// if no checkpoint of this filesystem is mounted there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UmountCheckpoint {
    /// The mount point given to [`MountCheckpoint`].
    pub path: String,
}

impl Record for MountCheckpoint {
    const WHAT: &'static str = "MountCheckpoint";
    const MIN_SIZE: usize = 12;
    fn put(&self, w: &mut Writer) {
        w.u64(self.cno);
        w.string(&self.path);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(MountCheckpoint {
            cno: r.u64("cno")?,
            path: r.string("path", MOUNT_PATH_MAX)?,
        })
    }
}

impl Record for UmountCheckpoint {
    const WHAT: &'static str = "UmountCheckpoint";
    const MIN_SIZE: usize = 4;
    fn put(&self, w: &mut Writer) {
        w.string(&self.path);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(UmountCheckpoint {
            path: r.string("path", MOUNT_PATH_MAX)?,
        })
    }
}

impl Record for ChangeCpmode {
    const WHAT: &'static str = "ChangeCpmode";
    const MIN_SIZE: usize = 16;
    fn put(&self, w: &mut Writer) {
        w.u64(self.cno);
        w.u32(self.mode);
        w.u32(self.flags);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let cno = r.u64("cno")?;
        let mode = r.u32("mode")?;
        if mode > CPMODE_SNAPSHOT {
            return Err(r.invalid("mode", u64::from(mode)));
        }
        let flags = r.flags("flags", 0)?;
        Ok(ChangeCpmode { cno, mode, flags })
    }
}

impl Record for DeleteCheckpoint {
    const WHAT: &'static str = "DeleteCheckpoint";
    const MIN_SIZE: usize = 8;
    fn put(&self, w: &mut Writer) {
        w.u64(self.cno);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(DeleteCheckpoint { cno: r.u64("cno")? })
    }
}

impl Record for CleanSegments {
    const WHAT: &'static str = "CleanSegments";
    const MIN_SIZE: usize = 16;
    fn put(&self, w: &mut Writer) {
        w.u32(self.protection_s);
        w.list(&self.segments);
        w.list(&self.warm);
        w.u32(self.flags);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let protection_s = r.u32("protection_s")?;
        let segments = r.list("segments", CleanSegments::MAX_SEGMENTS)?;
        let warm = r.list("warm", CleanSegments::MAX_SEGMENTS)?;
        let flags = r.u32("flags")?;
        if flags & !CLEAN_FLAGS_KNOWN != 0 {
            return Err(DecodeError::InvalidField {
                what: Self::WHAT,
                field: "flags",
                value: flags.into(),
            });
        }
        Ok(CleanSegments {
            protection_s,
            segments,
            warm,
            flags,
        })
    }
}

impl Record for CleanReply {
    const WHAT: &'static str = "CleanReply";
    const MIN_SIZE: usize = 40;
    fn put(&self, w: &mut Writer) {
        w.u64(self.blocks_moved);
        w.u64(self.segments_freed);
        w.u64(self.bytes_written);
        w.u64(self.checkpoints_deleted);
        w.u64(self.blocks_freed);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(CleanReply {
            blocks_moved: r.u64("blocks_moved")?,
            segments_freed: r.u64("segments_freed")?,
            bytes_written: r.u64("bytes_written")?,
            checkpoints_deleted: r.u64("checkpoints_deleted")?,
            blocks_freed: r.u64("blocks_freed")?,
        })
    }
}

impl Record for SuUpdate {
    const WHAT: &'static str = "SuUpdate";
    const MIN_SIZE: usize = SuUpdate::SIZE;
    fn put(&self, w: &mut Writer) {
        w.u64(self.segnum);
        w.u64(self.last_mod);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(SuUpdate {
            segnum: r.u64("segnum")?,
            last_mod: r.u64("last_mod")?,
        })
    }
}

impl Record for SetSuinfo {
    const WHAT: &'static str = "SetSuinfo";
    const MIN_SIZE: usize = 4;
    fn put(&self, w: &mut Writer) {
        w.list(&self.items);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(SetSuinfo {
            items: r.list("items", SetSuinfo::MAX_ITEMS)?,
        })
    }
}

empty_record!(Done, Freeze, Thaw);

message!(
    ChangeCpmode,
    DeleteCheckpoint,
    Done,
    CleanSegments,
    CleanReply,
    SetSuinfo,
    MountCheckpoint,
    UmountCheckpoint,
    Freeze,
    Thaw
);
request! {
    ChangeCpmode => codes::CHANGE_CPMODE, Done;
    DeleteCheckpoint => codes::DELETE_CHECKPOINT, Done;
    CleanSegments => codes::CLEAN_SEGMENTS, CleanReply;
    SetSuinfo => codes::SET_SUINFO, Done;
    MountCheckpoint => codes::MOUNT_CHECKPOINT, Done;
    UmountCheckpoint => codes::UMOUNT_CHECKPOINT, Done;
    Freeze => codes::FREEZE, Done;
    Thaw => codes::THAW, Done;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::testing::{canonical, golden, round_trip};
    use crate::msg::{DecodeError, Message};
    use proptest::prelude::*;

    #[test]
    fn cpmode_and_delete_golden() {
        golden(
            &ChangeCpmode {
                cno: 0x0102,
                mode: CPMODE_SNAPSHOT,
                flags: 0,
            },
            "0201000000000000 01000000 00000000",
        );
        golden(&DeleteCheckpoint { cno: 7 }, "0700000000000000");
        golden(&Done, "");
        golden(&Freeze, "");
        golden(&Thaw, "");
    }

    #[test]
    fn cpmode_rejects_unknown_modes_and_flags() {
        let mut p = ChangeCpmode::default().encode();
        p[8] = 2;
        assert!(matches!(
            ChangeCpmode::decode(&p),
            Err(DecodeError::InvalidField { field: "mode", .. })
        ));
        let mut p = ChangeCpmode::default().encode();
        p[12] = 1;
        assert!(matches!(
            ChangeCpmode::decode(&p),
            Err(DecodeError::InvalidField { field: "flags", .. })
        ));
    }

    #[test]
    fn clean_golden_and_bounds() {
        golden(
            &CleanSegments {
                protection_s: 3600,
                segments: vec![5, 0x0102],
                warm: vec![5],
                flags: CLEAN_SEPARATE_WRITES,
            },
            "100e0000 02000000 0500000000000000 0201000000000000
             01000000 0500000000000000 01000000",
        );
        golden(
            &CleanReply {
                blocks_moved: 1,
                segments_freed: 2,
                bytes_written: 3,
                checkpoints_deleted: 4,
                blocks_freed: 5,
            },
            "0100000000000000 0200000000000000 0300000000000000
             0400000000000000 0500000000000000",
        );
        // Every known flag decodes; an unknown bit is refused.
        let all = CleanSegments {
            flags: CLEAN_SEPARATE_WRITES | CLEAN_WARM_YOUNG | CLEAN_STRICT_PROTECTION,
            ..CleanSegments::default()
        };
        assert_eq!(CleanSegments::decode(&all.encode()).unwrap(), all);
        let mut p = all.encode();
        let n = p.len();
        p[n - 4] = 8;
        assert!(matches!(
            CleanSegments::decode(&p),
            Err(DecodeError::InvalidField { field: "flags", .. })
        ));
        let mut p = 0u32.to_le_bytes().to_vec();
        p.extend_from_slice(&(CleanSegments::MAX_SEGMENTS as u32 + 1).to_le_bytes());
        p.resize(16 + 8 * (CleanSegments::MAX_SEGMENTS + 1), 0);
        assert!(matches!(
            CleanSegments::decode(&p),
            Err(DecodeError::BadCount { .. })
        ));
    }

    #[test]
    fn mount_golden() {
        golden(
            &MountCheckpoint {
                cno: 5,
                path: "/m".into(),
            },
            "0500000000000000 02000000 2f6d",
        );
        golden(&UmountCheckpoint { path: "/m".into() }, "02000000 2f6d");
    }

    #[test]
    fn set_suinfo_golden() {
        golden(
            &SetSuinfo {
                items: vec![SuUpdate {
                    segnum: 3,
                    last_mod: 0x10,
                }],
            },
            "01000000 0300000000000000 1000000000000000",
        );
    }

    proptest! {
        #[test]
        fn round_trips(
            cno in any::<u64>(),
            snapshot in any::<bool>(),
            protection_s in any::<u32>(),
            segments in proptest::collection::vec(any::<u64>(), 0..64),
            reply in any::<[u64; 5]>(),
            updates in proptest::collection::vec(any::<(u64, u64)>(), 0..64),
        ) {
            round_trip(&ChangeCpmode { cno, mode: u32::from(snapshot), flags: 0 })?;
            round_trip(&DeleteCheckpoint { cno })?;
            round_trip(&MountCheckpoint { cno, path: format!("/mnt/{cno}") })?;
            round_trip(&UmountCheckpoint { path: format!("/mnt/é{cno}") })?;
            let warm = segments.iter().copied().step_by(2).collect();
            let flags = u32::from(snapshot);
            round_trip(&CleanSegments { protection_s, segments, warm, flags })?;
            round_trip(&CleanReply {
                blocks_moved: reply[0],
                segments_freed: reply[1],
                bytes_written: reply[2],
                checkpoints_deleted: reply[3],
                blocks_freed: reply[4],
            })?;
            round_trip(&SetSuinfo {
                items: updates
                    .into_iter()
                    .map(|(segnum, last_mod)| SuUpdate { segnum, last_mod })
                    .collect(),
            })?;
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            canonical::<ChangeCpmode>(&bytes)?;
            canonical::<DeleteCheckpoint>(&bytes)?;
            canonical::<Done>(&bytes)?;
            canonical::<CleanSegments>(&bytes)?;
            canonical::<CleanReply>(&bytes)?;
            canonical::<SetSuinfo>(&bytes)?;
            canonical::<MountCheckpoint>(&bytes)?;
            canonical::<UmountCheckpoint>(&bytes)?;
            canonical::<Freeze>(&bytes)?;
            canonical::<Thaw>(&bytes)?;
        }
    }
}
