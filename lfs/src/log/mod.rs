//! The log: segment usage, the DAT, and where the next blocks go.
//!
//! * [`segments`]: the segment usage table in memory, the pool of clean
//!   segments, and the rule that a freed segment is reusable only after the
//!   superblock cursor has moved past the checkpoint that freed it.
//! * [`dat`]: virtual → physical block translation.
//! * [`layout`]: splitting a checkpoint's blocks into logs that fit the
//!   segments at the log head.

pub mod dat;
pub mod layout;
pub mod segments;
