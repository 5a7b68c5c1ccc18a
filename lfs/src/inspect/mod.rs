//! Read-only views of a device: which filesystem it holds, its superblock
//! pair, and the logs of a segment. `fsctl super`, `fsctl dumpseg` and
//! mkfs's safety checks are built on these; a mounted filesystem answers
//! the same views through the engine (`fs/query.rs`), which reads them
//! where no write is in progress.
//!
//! Nothing here writes to the device.

mod probe;
mod segment;
mod superblocks;

pub use probe::{probe_signature, Signature};
pub use segment::{check_segment, dump_segment, read_segment, LogDump, SegmentDump};
pub use superblocks::{read_superblocks, SbCopy, SuperblockBytes, SuperblockPair};

use crate::blockdev::BlockDevice;
use crate::{Error, Result};

/// Reads `len` bytes at `offset`, or `None` if that lies past the end.
fn read_opt(dev: &dyn BlockDevice, offset: u64, len: usize, what: &str) -> Result<Option<Vec<u8>>> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= dev.len() => {}
        _ => return Ok(None),
    }
    let mut buf = vec![0u8; len];
    dev.read_at(&mut buf, offset)
        .map_err(|e| Error::io(format!("reading {what} at byte {offset}"), e))?;
    Ok(Some(buf))
}
