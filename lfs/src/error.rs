//! The engine's error type.
//!
//! Callers must be able to tell an I/O failure from corruption from a full
//! filesystem from a bad argument, so each is its own variant.

use std::io;

/// Every error the engine reports.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The device failed an operation.
    #[error("I/O error while {op}: {source}")]
    Io {
        /// What the engine was doing.
        op: String,
        /// The device's error.
        #[source]
        source: io::Error,
    },
    /// On-disk data failed verification. The message includes the reason
    /// (it is not the error's `source`): every report of a corruption,
    /// from fsck's lines to fsd's log and mount refusal, then says which
    /// structure failed and how.
    #[error("corrupted {what} at {location}: {reason}")]
    Corrupted {
        /// Which structure.
        what: &'static str,
        /// Where it was found (byte offset, block or segment number).
        location: String,
        /// Why decoding failed.
        reason: crate::format::DecodeError,
    },
    /// The device does not hold an lfs filesystem, or holds one this
    /// version cannot use.
    #[error("{0}")]
    Unsupported(String),
    /// The device cannot hold a filesystem of the requested geometry.
    #[error(
        "device is too small: {size} bytes, the minimum for {block_size}-byte blocks and \
         {blocks_per_segment} blocks per segment is {min} bytes"
    )]
    DeviceTooSmall {
        /// Bytes on the device.
        size: u64,
        /// Smallest usable size.
        min: u64,
        /// Block size asked for.
        block_size: u32,
        /// Blocks per segment asked for.
        blocks_per_segment: u32,
    },
    /// No space is left for the operation.
    #[error("no space left on device")]
    NoSpace,
    /// No such file or directory.
    #[error("no such file or directory")]
    NotFound,
    /// The name already exists.
    #[error("file exists")]
    Exists,
    /// A directory was needed.
    #[error("not a directory")]
    NotDir,
    /// A non-directory was needed.
    #[error("is a directory")]
    IsDir,
    /// The directory is not empty.
    #[error("directory not empty")]
    NotEmpty,
    /// A name is longer than 255 bytes.
    #[error("file name too long")]
    NameTooLong,
    /// The filesystem is read-only, or went read-only after an error.
    #[error("read-only filesystem{0}")]
    ReadOnly(String),
    /// The extended attribute does not exist.
    #[error("no such attribute")]
    NoData,
    /// The offset or size is beyond what a file can hold.
    #[error("file too large")]
    FileTooLarge,
    /// The operation is not permitted on this kind of file (e.g. a hard
    /// link to a directory).
    #[error("operation not permitted")]
    NotPermitted,
    /// The operation is not supported.
    #[error("operation not supported")]
    NotSupported,
    /// The value does not fit (extended attributes).
    #[error("value too large for the attribute block")]
    TooBig,
    /// An argument was out of range or inconsistent.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The object is in use (a mounted snapshot, a cleaning in progress).
    #[error("busy: {0}")]
    Busy(String),
    /// Not possible now, but may be later (a segment being written).
    #[error("try again: {0}")]
    Again(String),
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub fn io(op: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            op: op.into(),
            source,
        }
    }
}

/// Result with the engine's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
