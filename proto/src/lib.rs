//! lfs-proto: the control protocol between the lfs daemon (fsd) and its
//! tools (fsctl, cleanerd), DESIGN.md §6. This documentation is the
//! protocol's specification; fsctl(8) and lfs(5) refer to it.
//!
//! The requests mirror nilfs2's ioctls, carried over a Unix stream socket
//! instead of ioctl(2). The crate does not depend on the engine (`lfs`):
//! cleanerd links only this.
//!
//! # Transport
//!
//! A Unix stream socket created by fsd (mode 0660). The client sends
//! request frames; the daemon answers each with exactly one reply frame,
//! in order, carrying the request's code and id. The daemon reads each
//! peer's credentials (SO_PEERCRED) when it connects; requests that change
//! the filesystem ([`server::is_mutating`]) or whose reply names files
//! ([`server::names_files`]) are refused with EPERM unless the peer is
//! root or the filesystem's owner.
//!
//! The requests in [`codes::IOCTL`] are also served as ioctl(2) on a file
//! of the mount, the payload being the ioctl's argument.
//!
//! # Frames ([`frame`])
//!
//! A 32-byte header, all fields little-endian, then the payload:
//!
//! | offset | size | field | value |
//! |---|---|---|---|
//! | 0 | 4 | magic | the bytes `"LFSP"` (`0x5053464c` as a LE u32) |
//! | 4 | 2 | version | 1 |
//! | 6 | 2 | kind | 0 request, 1 reply |
//! | 8 | 4 | code | the request code ([`codes`]); a reply repeats it |
//! | 12 | 4 | length | payload bytes, at most [`frame::MAX_PAYLOAD`] (1 MiB) |
//! | 16 | 8 | id | request id, chosen by the client; a reply repeats it |
//! | 24 | 4 | status | i32: 0 in requests; in replies 0 (success) or a positive errno |
//! | 28 | 4 | reserved | 0 |
//! | 32 | length | payload | the message ([`msg`]) |
//!
//! A reply with a non-zero status has an empty payload. Errors the daemon
//! returns: ENOTTY for an unknown or reserved code, EINVAL for a payload
//! that is not a valid message of its code (wrong size, count over the
//! maximum, unknown request flag) or a malformed header, EPERM for a
//! mutating request from another user, EOVERFLOW if a reply would exceed
//! the frame limit, and whatever the engine reports (EIO, EROFS, ...).
//! After a payload length over the limit, a bad magic or version, or a
//! truncated frame, the daemon closes the connection (after an EINVAL
//! reply where it could read code and id); in every other case the
//! connection stays usable.
//!
//! # Request codes ([`codes`])
//!
//! Linux ioctl numbers `_IOC(dir, 'L', nr, size)`, size being the fixed
//! part of the request payload; see the table in [`codes`].
//!
//! # Payloads ([`msg`])
//!
//! Little-endian fixed-layout records, packed; a counted array is a `u32`
//! count then the records; a string is a `u32` byte length then UTF-8; no
//! trailing bytes. Every request (code: request → reply):
//!
//! | code | request (bytes) | reply |
//! |---|---|---|
//! | GET_SUSTAT | [`GetSustat`](msg::GetSustat) (0) | [`Sustat`](msg::Sustat) (80) |
//! | GET_SUINFO | [`GetSuinfo`](msg::GetSuinfo) (12) | [`SuinfoList`](msg::SuinfoList) (4 + 28 n) |
//! | GET_CPSTAT | [`GetCpstat`](msg::GetCpstat) (0) | [`Cpstat`](msg::Cpstat) (24) |
//! | GET_CPINFO | [`GetCpinfo`](msg::GetCpinfo) (16) | [`CpinfoList`](msg::CpinfoList) (4 + 44 n) |
//! | SYNC | [`Sync`](msg::Sync) (4) | [`SyncReply`](msg::SyncReply) (8) |
//! | GET_VINFO | [`GetVinfo`](msg::GetVinfo) (4 + 8 n) | [`VinfoList`](msg::VinfoList) (4 + 32 n) |
//! | GET_SEG_SUMMARY | [`GetSegSummary`](msg::GetSegSummary) (8) | [`SegSummary`](msg::SegSummary) |
//! | GET_SUPER | [`GetSuper`](msg::GetSuper) (0) | [`Super`](msg::Super) (44 + n) |
//! | GET_STATS | [`GetStats`](msg::GetStats) (0) | [`Stats`](msg::Stats) |
//! | GET_DF | [`GetDf`](msg::GetDf) (0) | [`Df`](msg::Df) (68) |
//! | CHANGE_CPMODE | [`ChangeCpmode`](msg::ChangeCpmode) (16) | [`Done`](msg::Done) (0) |
//! | DELETE_CHECKPOINT | [`DeleteCheckpoint`](msg::DeleteCheckpoint) (8) | [`Done`](msg::Done) (0) |
//! | CLEAN_SEGMENTS | [`CleanSegments`](msg::CleanSegments) (16 + 8 n + 8 w) | [`CleanReply`](msg::CleanReply) (40) |
//! | SET_SUINFO | [`SetSuinfo`](msg::SetSuinfo) (4 + 16 n) | [`Done`](msg::Done) (0) |
//! | MOUNT_CHECKPOINT | [`MountCheckpoint`](msg::MountCheckpoint) (12 + n) | [`Done`](msg::Done) (0) |
//! | GET_DIFF | [`GetDiff`](msg::GetDiff) (24 + n) | [`DiffList`](msg::DiffList) |
//! | UMOUNT_CHECKPOINT | [`UmountCheckpoint`](msg::UmountCheckpoint) (4 + n) | [`Done`](msg::Done) (0) |
//! | FREEZE | [`Freeze`](msg::Freeze) (0) | [`Done`](msg::Done) (0) |
//! | THAW | [`Thaw`](msg::Thaw) (0) | [`Done`](msg::Done) (0) |
//!
//! The byte layout of each is in the module docs of
//! [`msg::segments`], [`msg::device`], [`msg::checkpoints`], [`msg::stats`]
//! and [`msg::admin`].
//!
//! # Versioning
//!
//! Version 1 is this document. A change to a message's layout takes a new
//! code (its size changes anyway) or a new frame version; new counters and
//! histograms in [`Stats`](msg::Stats) and new reply flag bits are not
//! changes (clients ignore what they do not know).
//!
//! # Using it
//!
//! [`Client`] is the blocking client; [`server`] has what a daemon needs
//! without knowing the engine ([`serve_connection`], [`dispatch`],
//! [`check_permission`]).

#![forbid(unsafe_code)]
// Nothing a peer sends may panic the daemon or the tools; tests may.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic
    )
)]

pub mod client;
pub mod codes;
pub mod errno;
pub mod frame;
pub mod msg;
pub mod path;
pub mod server;
mod sock;
pub mod target;
pub mod targets;

pub use client::{Client, ClientError, DEFAULT_TIMEOUT};
pub use errno::{errno_desc, errno_name};
pub use frame::{
    decode_frame, read_frame, write_frame, Frame, FrameError, Kind, HEADER_LEN, MAX_PAYLOAD,
};
pub use msg::{DecodeError, Message, Request};
pub use server::{
    check_permission, dispatch, is_mutating, names_files, serve_connection, serve_connection_with,
    Closed, Handler, Peer, ServeConfig, Service,
};
