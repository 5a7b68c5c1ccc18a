//! lfs: a log-structured filesystem engine that runs in user space.
//!
//! Data flows down through the modules:
//!
//! * [`format`](mod@format): every on-disk structure, with explicit little-endian
//!   encoding and checksums. Nothing else in the crate touches raw bytes of
//!   the disk layout.
//! * [`blockdev`]: the user-space block layer that every byte goes through,
//!   with a fault-injecting device for crash tests.
//! * [`mkfs`]: builds a fresh filesystem image (superblocks and the
//!   initial checkpoint) on a block device.
//! * [`inspect`]: read-only views of an unmounted device (superblocks,
//!   segment logs) used by `fsctl`.

#![deny(unsafe_code)]

pub mod blockdev;
pub mod checkpoint;
pub mod error;
pub mod format;
pub mod fs;
pub mod fsck;
pub mod inspect;
pub mod log;
pub mod mkfs;
pub mod stats;

pub use error::{Error, Result};
