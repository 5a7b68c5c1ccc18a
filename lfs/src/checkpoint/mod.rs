//! Checkpoints: building one from the in-memory state, and recovering the
//! last one at mount.
//!
//! * [`build`]: turns every change since the last checkpoint into logs
//!   (payload, metadata file blocks, super root) with their addresses, and
//!   advances the in-memory state to match. Pure computation: the caller
//!   writes the returned buffers.
//! * [`history`]: which checkpoints are kept (continuous checkpoints and
//!   snapshots) and freeing the blocks only deleted ones kept.
//! * [`recover`]: finds the last valid checkpoint from the superblock
//!   cursor and loads the state from it.
//! * [`rollback`]: makes the newest intact checkpoint the current one
//!   when the last is damaged (an explicit act, never a mount's).

pub mod build;
pub(crate) mod dsync;
pub mod history;
pub mod recover;
pub mod rollback;

/// Write the superblock at least every this many checkpoints, to bound the
/// recovery scan (see lfs(5), commit protocol step 3).
pub const SB_UPDATE_EVERY: u64 = 64;
