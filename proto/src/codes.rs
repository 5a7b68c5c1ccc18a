//! Request codes: real ioctl numbers, so that the same numbers can serve as
//! ioctl(2) requests on a file of the mount as well as over the socket.
//!
//! Each is Linux's `_IOC(dir, 'L', nr, size)` built with nix's
//! `request_code_*!` macros: bits 0-7 the number `nr`, bits 8-15 the type
//! `'L'` (0x4c), bits 16-29 the size, bits 30-31 the direction (1 write:
//! the request carries data to the daemon, 2 read: the reply carries data
//! back, 3 both, 0 none). The size is that of the fixed part of the request
//! payload (the fields before any counted array, counts included); it is
//! part of the number, so a request whose fixed part changes gets a new
//! code. The numbers `nr` follow nilfs2's ioctls where there is one (nilfs
//! uses type `'n'`), and 0x90 on for requests nilfs lacks; 'L' 0x80-0x9f is
//! unused in Linux's ioctl-number registry.
//!
//! | code | name | dir | nr | size | nilfs |
//! |---|---|---|---|---|---|
//! | `0x40104c80` | CHANGE_CPMODE | W | 0x80 | 16 | CHANGE_CPMODE |
//! | `0x40084c81` | DELETE_CHECKPOINT | W | 0x81 | 8 | DELETE_CHECKPOINT |
//! | `0xc0104c82` | GET_CPINFO | RW | 0x82 | 16 | GET_CPINFO |
//! | `0x80004c83` | GET_CPSTAT | R | 0x83 | 0 | GET_CPSTAT |
//! | `0xc00c4c84` | GET_SUINFO | RW | 0x84 | 12 | GET_SUINFO |
//! | `0x80004c85` | GET_SUSTAT | R | 0x85 | 0 | GET_SUSTAT |
//! | `0xc0044c86` | GET_VINFO | RW | 0x86 | 4 | GET_VINFO |
//! | `0xc0104c88` | CLEAN_SEGMENTS | RW | 0x88 | 16 | CLEAN_SEGMENTS |
//! | `0xc0044c8a` | SYNC | RW | 0x8a | 4 | SYNC |
//! | `0x40044c8d` | SET_SUINFO | W | 0x8d | 4 | SET_SUINFO |
//! | `0xc0084c90` | GET_SEG_SUMMARY | RW | 0x90 | 8 | - |
//! | `0x80004c91` | GET_STATS | R | 0x91 | 0 | - |
//! | `0x80004c92` | GET_DF | R | 0x92 | 0 | - |
//! | `0x00004c93` | FREEZE | none | 0x93 | 0 | (FIFREEZE) |
//! | `0x00004c94` | THAW | none | 0x94 | 0 | (FITHAW) |
//! | `0x400c4c95` | MOUNT_CHECKPOINT | W | 0x95 | 12 | - |
//! | `0x40044c96` | UMOUNT_CHECKPOINT | W | 0x96 | 4 | - |
//! | `0xc0144c97` | GET_DIFF | RW | 0x97 | 20 | - |
//! | `0x80004c98` | GET_SUPER | R | 0x98 | 0 | - |
//!
//! Reserved codes (none at present; [`ALL`] marks them) are not served:
//! the daemon answers them ENOTTY like any unknown code.

/// The ioctl type byte of every lfs request.
pub const IOC_TYPE: u8 = b'L';

/// Computes a code with nix's macro (whose type differs between libcs: the
/// value always fits in 32 bits).
macro_rules! code {
    (none, $nr:expr) => {
        nix::request_code_none!(IOC_TYPE, $nr) as u32
    };
    (read, $nr:expr, $size:expr) => {
        nix::request_code_read!(IOC_TYPE, $nr, $size) as u32
    };
    (write, $nr:expr, $size:expr) => {
        nix::request_code_write!(IOC_TYPE, $nr, $size) as u32
    };
    (readwrite, $nr:expr, $size:expr) => {
        nix::request_code_readwrite!(IOC_TYPE, $nr, $size) as u32
    };
}

/// Segment statistics [nilfs GET_SUSTAT]: `msg::GetSustat`.
pub const GET_SUSTAT: u32 = code!(read, 0x85, 0);
/// Segment usage of a range [nilfs GET_SUINFO]: `msg::GetSuinfo`.
pub const GET_SUINFO: u32 = code!(readwrite, 0x84, 12);
/// Checkpoint statistics [nilfs GET_CPSTAT]: `msg::GetCpstat`.
pub const GET_CPSTAT: u32 = code!(read, 0x83, 0);
/// Checkpoints of a range [nilfs GET_CPINFO]: `msg::GetCpinfo`.
pub const GET_CPINFO: u32 = code!(readwrite, 0x82, 16);
/// Sync and make a checkpoint [nilfs SYNC]: `msg::Sync`. Mutating.
pub const SYNC: u32 = code!(readwrite, 0x8a, 4);
/// Lifetimes of virtual blocks [nilfs GET_VINFO]: `msg::GetVinfo`.
pub const GET_VINFO: u32 = code!(readwrite, 0x86, 4);
/// The logs of one segment: `msg::GetSegSummary`.
pub const GET_SEG_SUMMARY: u32 = code!(readwrite, 0x90, 8);
/// Engine counters and histograms: `msg::GetStats`.
pub const GET_STATS: u32 = code!(read, 0x91, 0);
/// Space accounting: `msg::GetDf`.
pub const GET_DF: u32 = code!(read, 0x92, 0);

/// Clean segments [nilfs CLEAN_SEGMENTS]: `msg::CleanSegments`. Mutating.
pub const CLEAN_SEGMENTS: u32 = code!(readwrite, 0x88, 16);
/// Turn a checkpoint into a snapshot or back [nilfs CHANGE_CPMODE]:
/// `msg::ChangeCpmode`. Mutating.
pub const CHANGE_CPMODE: u32 = code!(write, 0x80, 16);
/// Delete a checkpoint [nilfs DELETE_CHECKPOINT]: `msg::DeleteCheckpoint`.
/// Mutating.
pub const DELETE_CHECKPOINT: u32 = code!(write, 0x81, 8);
/// Set segments' last-modified time [nilfs SET_SUINFO]: `msg::SetSuinfo`.
/// Mutating.
pub const SET_SUINFO: u32 = code!(write, 0x8d, 4);
/// Suspend changes, with everything durable [Linux FIFREEZE]:
/// `msg::Freeze`. Mutating.
pub const FREEZE: u32 = code!(none, 0x93);
/// Resume changes after FREEZE [Linux FITHAW]: `msg::Thaw`. Mutating.
pub const THAW: u32 = code!(none, 0x94);

/// Mount a checkpoint read-only beside the live filesystem:
/// `msg::MountCheckpoint`. Mutating.
pub const MOUNT_CHECKPOINT: u32 = code!(write, 0x95, 12);
/// Unmount it: `msg::UmountCheckpoint`. Mutating.
pub const UMOUNT_CHECKPOINT: u32 = code!(write, 0x96, 4);

/// Paths changed between two checkpoints: `msg::GetDiff`.
pub const GET_DIFF: u32 = code!(readwrite, 0x97, 20);
/// Both superblock copies as the device holds them: `msg::GetSuper`.
pub const GET_SUPER: u32 = code!(read, 0x98, 0);

/// The requests fsd also takes as ioctl(2) on a file or directory of the
/// mount. The kernel passes a FUSE daemon only restricted ioctls, which
/// carry exactly the size in the number in (if the direction says write)
/// and out (if read); the size of these numbers is the request's fixed
/// part, so only requests that are all fixed part and have an empty reply
/// fit.
pub const IOCTL: &[u32] = &[CHANGE_CPMODE, DELETE_CHECKPOINT, FREEZE, THAW];

/// What is known about one code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeInfo {
    /// The code.
    pub code: u32,
    /// Its name, as in this module.
    pub name: &'static str,
    /// Whether it changes the filesystem: only root or the filesystem's
    /// owner may send it.
    pub mutating: bool,
    /// Whether its reply names files (paths): also only root or the
    /// owner, since the socket's group is not checked against the
    /// directories that hold them.
    pub names_files: bool,
    /// Whether this version serves it (reserved codes are not served).
    pub served: bool,
}

const fn info(code: u32, name: &'static str, mutating: bool, served: bool) -> CodeInfo {
    CodeInfo {
        code,
        name,
        mutating,
        names_files: false,
        served,
    }
}

/// A query whose reply names files.
const fn naming(code: u32, name: &'static str) -> CodeInfo {
    CodeInfo {
        names_files: true,
        ..info(code, name, false, true)
    }
}

/// Every code this version knows, served and reserved. A new code gets a
/// line here, which forces a decision on `mutating` (and `names_files`:
/// `naming` for a query whose reply holds paths).
pub const ALL: &[CodeInfo] = &[
    info(GET_SUSTAT, "GET_SUSTAT", false, true),
    info(GET_SUINFO, "GET_SUINFO", false, true),
    info(GET_CPSTAT, "GET_CPSTAT", false, true),
    info(GET_CPINFO, "GET_CPINFO", false, true),
    info(SYNC, "SYNC", true, true),
    info(GET_VINFO, "GET_VINFO", false, true),
    info(GET_SEG_SUMMARY, "GET_SEG_SUMMARY", false, true),
    info(GET_STATS, "GET_STATS", false, true),
    info(GET_DF, "GET_DF", false, true),
    info(CLEAN_SEGMENTS, "CLEAN_SEGMENTS", true, true),
    info(CHANGE_CPMODE, "CHANGE_CPMODE", true, true),
    info(DELETE_CHECKPOINT, "DELETE_CHECKPOINT", true, true),
    info(SET_SUINFO, "SET_SUINFO", true, true),
    info(FREEZE, "FREEZE", true, true),
    info(THAW, "THAW", true, true),
    info(MOUNT_CHECKPOINT, "MOUNT_CHECKPOINT", true, true),
    info(UMOUNT_CHECKPOINT, "UMOUNT_CHECKPOINT", true, true),
    naming(GET_DIFF, "GET_DIFF"),
    info(GET_SUPER, "GET_SUPER", false, true),
];

/// What this version knows about `code`.
pub fn info_of(code: u32) -> Option<&'static CodeInfo> {
    ALL.iter().find(|i| i.code == code)
}

/// The name of `code`, if it is a known (served or reserved) code.
pub fn name(code: u32) -> Option<&'static str> {
    info_of(code).map(|i| i.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Linux's `_IOC` (include/uapi/asm-generic/ioctl.h), written out.
    const fn ioc(dir: u32, nr: u32, size: u32) -> u32 {
        (dir << 30) | (size << 16) | ((IOC_TYPE as u32) << 8) | nr
    }

    #[test]
    fn codes_are_linux_ioctl_numbers() {
        const NONE: u32 = 0;
        const W: u32 = 1;
        const R: u32 = 2;
        let expect = [
            (GET_SUSTAT, ioc(R, 0x85, 0), 0x8000_4c85),
            (GET_SUINFO, ioc(R | W, 0x84, 12), 0xc00c_4c84),
            (GET_CPSTAT, ioc(R, 0x83, 0), 0x8000_4c83),
            (GET_CPINFO, ioc(R | W, 0x82, 16), 0xc010_4c82),
            (SYNC, ioc(R | W, 0x8a, 4), 0xc004_4c8a),
            (GET_VINFO, ioc(R | W, 0x86, 4), 0xc004_4c86),
            (GET_SEG_SUMMARY, ioc(R | W, 0x90, 8), 0xc008_4c90),
            (GET_STATS, ioc(R, 0x91, 0), 0x8000_4c91),
            (GET_DF, ioc(R, 0x92, 0), 0x8000_4c92),
            (CLEAN_SEGMENTS, ioc(R | W, 0x88, 16), 0xc010_4c88),
            (CHANGE_CPMODE, ioc(W, 0x80, 16), 0x4010_4c80),
            (DELETE_CHECKPOINT, ioc(W, 0x81, 8), 0x4008_4c81),
            (SET_SUINFO, ioc(W, 0x8d, 4), 0x4004_4c8d),
            (FREEZE, ioc(NONE, 0x93, 0), 0x0000_4c93),
            (THAW, ioc(NONE, 0x94, 0), 0x0000_4c94),
            (MOUNT_CHECKPOINT, ioc(W, 0x95, 12), 0x400c_4c95),
            (UMOUNT_CHECKPOINT, ioc(W, 0x96, 4), 0x4004_4c96),
            (GET_DIFF, ioc(R | W, 0x97, 20), 0xc014_4c97),
            (GET_SUPER, ioc(R, 0x98, 0), 0x8000_4c98),
        ];
        for (code, computed, literal) in expect {
            assert_eq!(code, computed, "{:?}", name(code));
            assert_eq!(code, literal, "{:?}", name(code));
        }
        assert_eq!(expect.len(), ALL.len());
    }

    #[test]
    fn sizes_are_the_fixed_parts_of_the_requests() {
        use crate::msg::*;
        fn size(code: u32) -> usize {
            ((code >> 16) & 0x3fff) as usize
        }
        assert_eq!(size(GET_SUSTAT), GetSustat.encode().len());
        assert_eq!(size(GET_SUINFO), GetSuinfo::default().encode().len());
        assert_eq!(size(GET_CPSTAT), GetCpstat.encode().len());
        assert_eq!(size(GET_CPINFO), GetCpinfo::default().encode().len());
        assert_eq!(size(SYNC), Sync::default().encode().len());
        // The count of an empty array.
        assert_eq!(size(GET_VINFO), GetVinfo::default().encode().len());
        assert_eq!(
            size(GET_SEG_SUMMARY),
            GetSegSummary::default().encode().len()
        );
        assert_eq!(size(GET_STATS), GetStats.encode().len());
        assert_eq!(size(GET_DF), GetDf.encode().len());
        assert_eq!(size(GET_SUPER), GetSuper.encode().len());
        assert_eq!(size(CHANGE_CPMODE), ChangeCpmode::default().encode().len());
        assert_eq!(
            size(DELETE_CHECKPOINT),
            DeleteCheckpoint::default().encode().len()
        );
        assert_eq!(
            size(CLEAN_SEGMENTS),
            CleanSegments::default().encode().len()
        );
        assert_eq!(size(SET_SUINFO), SetSuinfo::default().encode().len());
        assert_eq!(size(FREEZE), Freeze.encode().len());
        assert_eq!(size(THAW), Thaw.encode().len());
        assert_eq!(
            size(MOUNT_CHECKPOINT),
            MountCheckpoint::default().encode().len()
        );
        assert_eq!(
            size(UMOUNT_CHECKPOINT),
            UmountCheckpoint::default().encode().len()
        );
        // The fixed part: two numbers and the first string's length.
        assert_eq!(size(GET_DIFF), GetDiff::default().encode().len() - 4);
    }

    #[test]
    fn request_types_carry_their_codes() {
        use crate::msg::*;
        assert_eq!(GetSustat::CODE, GET_SUSTAT);
        assert_eq!(GetSuinfo::CODE, GET_SUINFO);
        assert_eq!(GetCpstat::CODE, GET_CPSTAT);
        assert_eq!(GetCpinfo::CODE, GET_CPINFO);
        assert_eq!(<Sync as Request>::CODE, SYNC);
        assert_eq!(GetVinfo::CODE, GET_VINFO);
        assert_eq!(GetSegSummary::CODE, GET_SEG_SUMMARY);
        assert_eq!(GetStats::CODE, GET_STATS);
        assert_eq!(GetDf::CODE, GET_DF);
        assert_eq!(ChangeCpmode::CODE, CHANGE_CPMODE);
        assert_eq!(DeleteCheckpoint::CODE, DELETE_CHECKPOINT);
        assert_eq!(CleanSegments::CODE, CLEAN_SEGMENTS);
        assert_eq!(SetSuinfo::CODE, SET_SUINFO);
        assert_eq!(Freeze::CODE, FREEZE);
        assert_eq!(Thaw::CODE, THAW);
        assert_eq!(MountCheckpoint::CODE, MOUNT_CHECKPOINT);
        assert_eq!(UmountCheckpoint::CODE, UMOUNT_CHECKPOINT);
        assert_eq!(GetDiff::CODE, GET_DIFF);
        assert_eq!(GetSuper::CODE, GET_SUPER);
    }

    #[test]
    fn the_ioctl_requests_are_all_fixed_part_with_empty_replies() {
        use crate::msg::*;
        fn empty_reply<R: Request<Reply = Done>>(r: R) -> usize {
            r.encode().len()
        }
        fn size(code: u32) -> usize {
            ((code >> 16) & 0x3fff) as usize
        }
        let sizes = [
            (CHANGE_CPMODE, empty_reply(ChangeCpmode::default())),
            (DELETE_CHECKPOINT, empty_reply(DeleteCheckpoint::default())),
            (FREEZE, empty_reply(Freeze)),
            (THAW, empty_reply(Thaw)),
        ];
        assert_eq!(sizes.map(|(c, _)| c), IOCTL);
        for (code, len) in sizes {
            assert_eq!(size(code), len, "{:?}", name(code));
        }
    }

    #[test]
    fn codes_names_and_numbers_are_unique() {
        let codes: BTreeSet<u32> = ALL.iter().map(|i| i.code).collect();
        let names: BTreeSet<&str> = ALL.iter().map(|i| i.name).collect();
        let nrs: BTreeSet<u32> = ALL.iter().map(|i| i.code & 0xff).collect();
        assert_eq!(codes.len(), ALL.len());
        assert_eq!(names.len(), ALL.len());
        assert_eq!(nrs.len(), ALL.len());
    }

    #[test]
    fn names() {
        assert_eq!(name(GET_SUSTAT), Some("GET_SUSTAT"));
        assert_eq!(name(CLEAN_SEGMENTS), Some("CLEAN_SEGMENTS"));
        assert_eq!(name(0), None);
        assert_eq!(name(0x8000_4c85 ^ 0x1_0000), None);
    }

    #[test]
    fn the_served_mutating_codes() {
        let served_mutating: Vec<&str> = ALL
            .iter()
            .filter(|i| i.served && i.mutating)
            .map(|i| i.name)
            .collect();
        assert_eq!(
            served_mutating,
            [
                "SYNC",
                "CLEAN_SEGMENTS",
                "CHANGE_CPMODE",
                "DELETE_CHECKPOINT",
                "SET_SUINFO",
                "FREEZE",
                "THAW",
                "MOUNT_CHECKPOINT",
                "UMOUNT_CHECKPOINT"
            ]
        );
        assert!(ALL.iter().all(|i| i.served), "no code is reserved now");
    }

    #[test]
    fn only_the_diff_names_files() {
        let naming: Vec<&str> = ALL
            .iter()
            .filter(|i| i.names_files)
            .map(|i| i.name)
            .collect();
        assert_eq!(naming, ["GET_DIFF"]);
    }
}
