//! What the device holds, read by the daemon: GET_SEG_SUMMARY (one
//! segment's logs) and GET_SUPER (both superblock copies). `fsctl dumpseg`
//! and `fsctl super` print the same thing from these replies as from an
//! unmounted device.
//!
//! Byte layouts (offsets in bytes, little-endian, records packed):
//!
//! ```text
//! GetSegSummary    (request, 8 bytes)
//!    0 u64 segnum
//! SegSummary       (reply)
//!    0 u64 segnum   8 u64 start_block   16 u64 nblocks (in the segment)
//!   24 u32 nlogs (at most 65536), then nlogs LogInfo,
//!      then the string end (u32 length at most 4096, UTF-8).
//!    LogInfo (88 + e + s + 25 m bytes):
//!      0 u64 block        8 u64 seq           16 u64 cno
//!     24 u64 ctime_ns    32 u64 next_segment  40 u16 flags
//!     42 u32 nblocks     46 u32 nsummary_blocks
//!     50 u32 summary_crc 54 u32 body_crc      58 u8 body_ok
//!     59 u8 super_root (0 none, 1 valid, 2 damaged)
//!     60 u64 sr_cno      68 u64 sr_seq (both 0 unless valid)
//!     76 string body_error (e bytes, at most 4096; empty if body_ok)
//!        string sr_error (s bytes, at most 4096; empty unless damaged)
//!        u32 m (at most 65536), then m EntryInfo:
//!          0 u64 ino   8 u64 offset   16 u64 vblock   24 u8 kind
//!
//! GetSuper         (request, 0 bytes)    empty
//! Super            (reply, 48 + d + p + q bytes)
//!    0 u32 version (1)   4 u32 current (0 neither valid, 1 primary, 2 secondary)
//!    8 u64 device_bytes  16 u64 primary_offset   24 u64 secondary_offset
//!   32 string device (d bytes, at most 4096: the name fsd was given)
//!      u32 p (at most 65536), then p bytes: the primary copy as on the device
//!      u32 q (at most 65536), then q bytes: the secondary copy
//! ```

use super::{empty_record, message, request, DecodeError, Reader, Record, Writer};
use crate::codes;

/// The logs of one segment as they are on the device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetSegSummary {
    /// Segment number.
    pub segnum: u64,
}

/// One block entry of a log summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntryInfo {
    /// Owning inode.
    pub ino: u64,
    /// Block offset within the file.
    pub offset: u64,
    /// Virtual block number, 0 for a physically addressed block.
    pub vblock: u64,
    /// Block kind, as on disk (lfs(5): 1 data, 2 to 4 indirect levels 1 to
    /// 3, 5 xattr).
    pub kind: u8,
}

impl EntryInfo {
    /// Encoded size.
    pub const SIZE: usize = 25;
}

/// [`LogInfo::super_root`]: the log has no super root.
pub const SUPER_ROOT_NONE: u8 = 0;
/// [`LogInfo::super_root`]: the log's super root verifies.
pub const SUPER_ROOT_VALID: u8 = 1;
/// [`LogInfo::super_root`]: the log's super root does not verify
/// ([`LogInfo::sr_error`] says why).
pub const SUPER_ROOT_DAMAGED: u8 = 2;

/// One log found in a segment: its verified header, whether its body and
/// super root verify, and its block entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogInfo {
    /// Block address of its first summary block.
    pub block: u64,
    /// Write sequence number.
    pub seq: u64,
    /// Checkpoint it belongs to.
    pub cno: u64,
    /// When it was written, ns since the Unix epoch.
    pub ctime_ns: u64,
    /// The segment the log after it goes to.
    pub next_segment: u64,
    /// Log flags, as on disk (lfs(5)).
    pub flags: u16,
    /// Blocks in the log, summary blocks included.
    pub nblocks: u32,
    /// Summary blocks.
    pub nsummary_blocks: u32,
    /// The summary checksum (it matched: only verified logs are listed).
    pub summary_crc: u32,
    /// The body checksum stored in the summary.
    pub body_crc: u32,
    /// 1 if the body checksum matched, 0 if not.
    pub body_ok: u8,
    /// `SUPER_ROOT_*`.
    pub super_root: u8,
    /// The super root's checkpoint number, if it is valid.
    pub sr_cno: u64,
    /// The super root's sequence number, if it is valid.
    pub sr_seq: u64,
    /// Why the body does not verify; empty if it does.
    pub body_error: String,
    /// Why the super root does not verify; empty unless damaged.
    pub sr_error: String,
    /// Its block entries, in on-disk order.
    pub entries: Vec<EntryInfo>,
}

impl LogInfo {
    /// Encoded size without strings and entries (their lengths included).
    pub const FIXED_SIZE: usize = 88;
    /// Most entries per log.
    pub const MAX_ENTRIES: usize = 1 << 16;
    /// Longest error string, in bytes.
    pub const MAX_ERROR_LEN: usize = 4096;
}

/// Reply to [`GetSegSummary`].
///
/// A server must keep the encoding within `MAX_PAYLOAD` (a segment with
/// more entries than fit is cut after the last whole log that fits, and
/// `end` says so) and every string within its maximum.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SegSummary {
    /// Segment number.
    pub segnum: u64,
    /// Its first block.
    pub start_block: u64,
    /// Blocks in the segment.
    pub nblocks: u64,
    /// The logs that verified, in order.
    pub logs: Vec<LogInfo>,
    /// Why the walk stopped, for people.
    pub end: String,
}

impl SegSummary {
    /// Most logs in a reply.
    pub const MAX_LOGS: usize = 1 << 16;
    /// Longest `end`, in bytes.
    pub const MAX_END_LEN: usize = 4096;
}

/// Both superblock copies as the device holds them, read while no
/// superblock is being written, and which one the daemon counts as
/// current. Empty request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetSuper;

/// [`Super::current`]: neither copy is valid.
pub const SUPER_CURRENT_NONE: u32 = 0;
/// [`Super::current`]: the primary copy.
pub const SUPER_CURRENT_PRIMARY: u32 = 1;
/// [`Super::current`]: the secondary copy.
pub const SUPER_CURRENT_SECONDARY: u32 = 2;

/// Reply to [`GetSuper`]. The copies are raw bytes, to be decoded as
/// lfs(5) describes (what `fsctl super` does with an unmounted device
/// too); a copy that does not verify is sent as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Super {
    /// `SUPER_CURRENT_*`.
    pub current: u32,
    /// Size of the device in bytes.
    pub device_bytes: u64,
    /// Byte offset of the primary copy (0).
    pub primary_offset: u64,
    /// Byte offset of the secondary copy (in the last block).
    pub secondary_offset: u64,
    /// The device as fsd was given it, for people.
    pub device: String,
    /// The primary copy's bytes (empty past the end of the device).
    pub primary: Vec<u8>,
    /// The secondary copy's bytes.
    pub secondary: Vec<u8>,
}

impl Super {
    /// The layout version this crate writes and reads; another is refused
    /// (EINVAL-style decode error) rather than misread.
    pub const VERSION: u32 = 1;
    /// Encoded size without the device name and copies (their lengths
    /// included).
    pub const FIXED_SIZE: usize = 44;
    /// Longest copy, in bytes.
    pub const MAX_COPY_LEN: usize = 1 << 16;
    /// Longest device name, in bytes.
    pub const MAX_DEVICE_LEN: usize = 4096;
}

impl Record for GetSegSummary {
    const WHAT: &'static str = "GetSegSummary";
    const MIN_SIZE: usize = 8;
    fn put(&self, w: &mut Writer) {
        w.u64(self.segnum);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(GetSegSummary {
            segnum: r.u64("segnum")?,
        })
    }
}

impl Record for EntryInfo {
    const WHAT: &'static str = "EntryInfo";
    const MIN_SIZE: usize = EntryInfo::SIZE;
    fn put(&self, w: &mut Writer) {
        w.u64(self.ino);
        w.u64(self.offset);
        w.u64(self.vblock);
        w.u8(self.kind);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(EntryInfo {
            ino: r.u64("ino")?,
            offset: r.u64("offset")?,
            vblock: r.u64("vblock")?,
            kind: r.u8("kind")?,
        })
    }
}

impl Record for LogInfo {
    const WHAT: &'static str = "LogInfo";
    const MIN_SIZE: usize = LogInfo::FIXED_SIZE;
    fn put(&self, w: &mut Writer) {
        w.u64(self.block);
        w.u64(self.seq);
        w.u64(self.cno);
        w.u64(self.ctime_ns);
        w.u64(self.next_segment);
        w.u16(self.flags);
        w.u32(self.nblocks);
        w.u32(self.nsummary_blocks);
        w.u32(self.summary_crc);
        w.u32(self.body_crc);
        w.u8(self.body_ok);
        w.u8(self.super_root);
        w.u64(self.sr_cno);
        w.u64(self.sr_seq);
        w.string(&self.body_error);
        w.string(&self.sr_error);
        w.list(&self.entries);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(LogInfo {
            block: r.u64("block")?,
            seq: r.u64("seq")?,
            cno: r.u64("cno")?,
            ctime_ns: r.u64("ctime_ns")?,
            next_segment: r.u64("next_segment")?,
            flags: r.u16("flags")?,
            nblocks: r.u32("nblocks")?,
            nsummary_blocks: r.u32("nsummary_blocks")?,
            summary_crc: r.u32("summary_crc")?,
            body_crc: r.u32("body_crc")?,
            body_ok: r.u8("body_ok")?,
            super_root: r.u8("super_root")?,
            sr_cno: r.u64("sr_cno")?,
            sr_seq: r.u64("sr_seq")?,
            body_error: r.string("body_error", LogInfo::MAX_ERROR_LEN)?,
            sr_error: r.string("sr_error", LogInfo::MAX_ERROR_LEN)?,
            entries: r.list("entries", LogInfo::MAX_ENTRIES)?,
        })
    }
}

impl Record for SegSummary {
    const WHAT: &'static str = "SegSummary";
    const MIN_SIZE: usize = 32;
    fn put(&self, w: &mut Writer) {
        w.u64(self.segnum);
        w.u64(self.start_block);
        w.u64(self.nblocks);
        w.list(&self.logs);
        w.string(&self.end);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(SegSummary {
            segnum: r.u64("segnum")?,
            start_block: r.u64("start_block")?,
            nblocks: r.u64("nblocks")?,
            logs: r.list("logs", SegSummary::MAX_LOGS)?,
            end: r.string("end", SegSummary::MAX_END_LEN)?,
        })
    }
}

impl Record for Super {
    const WHAT: &'static str = "Super";
    const MIN_SIZE: usize = Super::FIXED_SIZE;
    fn put(&self, w: &mut Writer) {
        w.u32(Super::VERSION);
        w.u32(self.current);
        w.u64(self.device_bytes);
        w.u64(self.primary_offset);
        w.u64(self.secondary_offset);
        w.string(&self.device);
        w.bytes(&self.primary);
        w.bytes(&self.secondary);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let version = r.u32("version")?;
        if version != Super::VERSION {
            return Err(r.invalid("version", u64::from(version)));
        }
        let current = r.u32("current")?;
        if current > SUPER_CURRENT_SECONDARY {
            return Err(r.invalid("current", u64::from(current)));
        }
        Ok(Super {
            current,
            device_bytes: r.u64("device_bytes")?,
            primary_offset: r.u64("primary_offset")?,
            secondary_offset: r.u64("secondary_offset")?,
            device: r.string("device", Super::MAX_DEVICE_LEN)?,
            primary: r.bytes("primary", Super::MAX_COPY_LEN)?,
            secondary: r.bytes("secondary", Super::MAX_COPY_LEN)?,
        })
    }
}

empty_record!(GetSuper);

message!(GetSegSummary, SegSummary, GetSuper, Super);

request! {
    GetSegSummary => codes::GET_SEG_SUMMARY, SegSummary;
    GetSuper => codes::GET_SUPER, Super;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::testing::{canonical, golden, round_trip, text};
    use crate::msg::{DecodeError, Message};
    use proptest::prelude::*;

    fn one_log() -> LogInfo {
        LogInfo {
            block: 0x1800,
            seq: 42,
            cno: 7,
            ctime_ns: 0x0102,
            next_segment: 4,
            flags: 1,
            nblocks: 3,
            nsummary_blocks: 1,
            summary_crc: 0xaabb_ccdd,
            body_crc: 0x1122_3344,
            body_ok: 0,
            super_root: SUPER_ROOT_DAMAGED,
            sr_cno: 0,
            sr_seq: 0,
            body_error: "bad".into(),
            sr_error: "x".into(),
            entries: vec![EntryInfo {
                ino: 12,
                offset: 0,
                vblock: 99,
                kind: 1,
            }],
        }
    }

    #[test]
    fn seg_summary_golden() {
        golden(&GetSegSummary { segnum: 3 }, "0300000000000000");
        let s = SegSummary {
            segnum: 3,
            start_block: 0x1800,
            nblocks: 0x40,
            logs: vec![one_log()],
            end: "end of segment".to_string(),
        };
        golden(
            &s,
            "0300000000000000 0018000000000000 4000000000000000 01000000
             0018000000000000 2a00000000000000 0700000000000000
             0201000000000000 0400000000000000 0100
             03000000 01000000 ddccbbaa 44332211 00 02
             0000000000000000 0000000000000000
             03000000 626164 01000000 78
             01000000 0c00000000000000 0000000000000000 6300000000000000 01
             0e000000 656e64206f66207365676d656e74",
        );
        assert_eq!(
            s.encode().len(),
            <SegSummary as Record>::MIN_SIZE
                + LogInfo::FIXED_SIZE
                + 3
                + 1
                + EntryInfo::SIZE
                + s.end.len()
        );
    }

    #[test]
    fn seg_summary_strings_are_bounded() {
        let s = SegSummary {
            end: "x".repeat(SegSummary::MAX_END_LEN + 1),
            ..SegSummary::default()
        };
        assert!(matches!(
            SegSummary::decode(&s.encode()),
            Err(DecodeError::BadCount { field: "end", .. })
        ));
        let s = SegSummary {
            logs: vec![LogInfo {
                body_error: "x".repeat(LogInfo::MAX_ERROR_LEN + 1),
                ..LogInfo::default()
            }],
            ..SegSummary::default()
        };
        assert!(matches!(
            SegSummary::decode(&s.encode()),
            Err(DecodeError::BadCount {
                field: "body_error",
                ..
            })
        ));
    }

    #[test]
    fn super_golden() {
        golden(&GetSuper, "");
        let s = Super {
            current: SUPER_CURRENT_SECONDARY,
            device_bytes: 0x10_0000,
            primary_offset: 0,
            secondary_offset: 0xf_f000,
            device: "/d".into(),
            primary: vec![1, 2],
            secondary: vec![3],
        };
        golden(
            &s,
            "01000000 02000000 0000100000000000 0000000000000000 00f00f0000000000
             02000000 2f64 02000000 0102 01000000 03",
        );
        assert_eq!(s.encode().len(), Super::FIXED_SIZE + 2 + 2 + 1);
    }

    #[test]
    fn super_refuses_other_versions_and_unknown_current_copies() {
        let mut p = Super::default().encode();
        p[0] = 2;
        assert!(matches!(
            Super::decode(&p),
            Err(DecodeError::InvalidField {
                field: "version",
                value: 2,
                ..
            })
        ));
        let mut p = Super::default().encode();
        p[4] = 3;
        assert!(matches!(
            Super::decode(&p),
            Err(DecodeError::InvalidField {
                field: "current",
                value: 3,
                ..
            })
        ));
        let too_long = Super {
            primary: vec![0; Super::MAX_COPY_LEN + 1],
            ..Super::default()
        };
        assert!(matches!(
            Super::decode(&too_long.encode()),
            Err(DecodeError::BadCount {
                field: "primary",
                ..
            })
        ));
    }

    fn entry() -> impl Strategy<Value = EntryInfo> {
        (any::<[u64; 3]>(), any::<u8>()).prop_map(|([ino, offset, vblock], kind)| EntryInfo {
            ino,
            offset,
            vblock,
            kind,
        })
    }

    fn log() -> impl Strategy<Value = LogInfo> {
        (
            any::<[u64; 7]>(),
            any::<u16>(),
            any::<[u32; 4]>(),
            any::<[u8; 2]>(),
            (text(16), text(16)),
            proptest::collection::vec(entry(), 0..8),
        )
            .prop_map(
                |(n, flags, c, [body_ok, super_root], (be, se), entries)| LogInfo {
                    block: n[0],
                    seq: n[1],
                    cno: n[2],
                    ctime_ns: n[3],
                    next_segment: n[4],
                    flags,
                    nblocks: c[0],
                    nsummary_blocks: c[1],
                    summary_crc: c[2],
                    body_crc: c[3],
                    body_ok,
                    super_root,
                    sr_cno: n[5],
                    sr_seq: n[6],
                    body_error: be,
                    sr_error: se,
                    entries,
                },
            )
    }

    proptest! {
        #[test]
        fn seg_summary_round_trips(
            n in any::<[u64; 3]>(),
            logs in proptest::collection::vec(log(), 0..6),
            end in text(64),
        ) {
            round_trip(&GetSegSummary { segnum: n[0] })?;
            round_trip(&SegSummary { segnum: n[0], start_block: n[1], nblocks: n[2], logs, end })?;
        }

        #[test]
        fn super_round_trips(
            current in 0..=SUPER_CURRENT_SECONDARY,
            n in any::<[u64; 3]>(),
            device in text(32),
            primary in proptest::collection::vec(any::<u8>(), 0..600),
            secondary in proptest::collection::vec(any::<u8>(), 0..600),
        ) {
            round_trip(&Super {
                current,
                device_bytes: n[0],
                primary_offset: n[1],
                secondary_offset: n[2],
                device,
                primary,
                secondary,
            })?;
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            canonical::<GetSegSummary>(&bytes)?;
            canonical::<SegSummary>(&bytes)?;
            canonical::<GetSuper>(&bytes)?;
            canonical::<Super>(&bytes)?;
        }

        #[test]
        fn small_counts_then_random_bytes_never_panic(
            n in 0u32..4,
            bytes in proptest::collection::vec(any::<u8>(), 0..256),
        ) {
            // Random bytes rarely start with a count that fits: force one
            // after the fixed fields.
            let mut s = vec![0u8; 24];
            s.extend_from_slice(&n.to_le_bytes());
            s.extend_from_slice(&bytes);
            canonical::<SegSummary>(&s)?;
            let mut p = 1u32.to_le_bytes().to_vec();
            p.extend_from_slice(&[0u8; 28]);
            p.extend_from_slice(&n.to_le_bytes());
            p.extend_from_slice(&bytes);
            canonical::<Super>(&p)?;
        }
    }
}
