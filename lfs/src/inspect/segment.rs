//! Walking the logs of one segment.
//!
//! Logs are laid end to end from the segment's first block. The walk stops
//! at the first block that does not start a log that verifies (bad magic,
//! checksum, counts that overflow the segment) and reports why.

use super::read_opt;
use crate::blockdev::BlockDevice;
use crate::format::{DecodeError, LogHeader, LogSummary, SuperRoot, Superblock};
use crate::{Error, Result};

/// One log as found on disk.
#[derive(Debug, Clone)]
pub struct LogDump {
    /// Block address of its first summary block.
    pub block: u64,
    /// Its verified summary.
    pub summary: LogSummary,
    /// Whether the body checksum matched.
    pub body_ok: bool,
    /// The body checksum error, if any.
    pub body_error: Option<DecodeError>,
    /// Its super root, decoded, if the log has one.
    pub super_root: Option<Result<SuperRoot, DecodeError>>,
}

/// The logs of a segment and why the walk stopped.
#[derive(Debug, Clone)]
pub struct SegmentDump {
    /// Segment number.
    pub segno: u64,
    /// First block of the segment.
    pub start_block: u64,
    /// Blocks in the segment.
    pub nblocks: u64,
    /// Logs that verified, in order.
    pub logs: Vec<LogDump>,
    /// Why no further log was found.
    pub end: String,
}

/// InvalidArgument, saying the range, unless the filesystem of `sb` has
/// segment `segno`.
pub fn check_segment(sb: &Superblock, segno: u64) -> Result<()> {
    if segno >= sb.nsegments {
        return Err(Error::InvalidArgument(format!(
            "segment {segno} does not exist (the filesystem has {} segments, 0 to {})",
            sb.nsegments,
            sb.nsegments.saturating_sub(1)
        )));
    }
    Ok(())
}

/// Reads and verifies every log of segment `segno`.
pub fn dump_segment(dev: &dyn BlockDevice, sb: &Superblock, segno: u64) -> Result<SegmentDump> {
    read_segment(dev, sb, segno, false).map(|(d, _)| d)
}

/// [`dump_segment`], and if `keep_bodies`, each log's body (its payload
/// blocks, super root included) as read and checked against the log's
/// body checksum, in the order of `SegmentDump::logs` (empty otherwise).
/// The cleaner takes the blocks it moves from these: what it copies is
/// exactly what was verified.
pub fn read_segment(
    dev: &dyn BlockDevice,
    sb: &Superblock,
    segno: u64,
    keep_bodies: bool,
) -> Result<(SegmentDump, Vec<Vec<u8>>)> {
    check_segment(sb, segno)?;
    let mut bodies = Vec::new();
    let bs = u64::from(sb.block_size);
    let start = sb.segment_start(segno);
    let seg_end = start + u64::from(sb.blocks_per_segment);
    let mut logs = Vec::new();
    let mut block = start;
    let mut last_seq = None;
    let end = loop {
        if block >= seg_end {
            break "end of segment".to_string();
        }
        let Some(first) = read_opt(dev, block * bs, bs as usize, "a log header")? else {
            break format!("block {block} is past the end of the device");
        };
        if first.iter().all(|&b| b == 0) {
            break format!("block {block} is unwritten (all zeros)");
        }
        let header = match LogHeader::decode_unverified(&first) {
            Ok(h) => h,
            Err(e) => break format!("no log at block {block}: {e}"),
        };
        if block + u64::from(header.nblocks) > seg_end {
            break format!(
                "log at block {block} claims {} blocks, past the segment end",
                header.nblocks
            );
        }
        let sum_len = u64::from(header.nsummary_blocks) * bs;
        let Some(sum) = read_opt(dev, block * bs, sum_len as usize, "a log summary")? else {
            break format!("log summary at block {block} is past the end of the device");
        };
        let summary = match LogSummary::decode(&sum, bs as usize, sb.crc_seed) {
            Ok(s) => s,
            Err(e) => break format!("log at block {block} does not verify: {e}"),
        };
        if let Some(prev) = last_seq {
            if summary.header.seq <= prev {
                break format!(
                    "log at block {block} has sequence {} after {prev}: stale",
                    summary.header.seq
                );
            }
        }
        let body_start = block + u64::from(header.nsummary_blocks);
        let body_blocks = u64::from(header.nblocks - header.nsummary_blocks);
        let body = read_opt(
            dev,
            body_start * bs,
            (body_blocks * bs) as usize,
            "a log body",
        )?
        .unwrap_or_default();
        let chunks: Vec<&[u8]> = body.chunks(bs as usize).collect();
        let body_error = summary.verify_body(sb.crc_seed, &chunks).err();
        let super_root = header
            .has_super_root()
            .then(|| SuperRoot::decode(chunks.last().copied().unwrap_or(&[]), sb.crc_seed));
        last_seq = Some(summary.header.seq);
        if keep_bodies {
            bodies.push(body);
        }
        block += u64::from(header.nblocks);
        logs.push(LogDump {
            block: block - u64::from(header.nblocks),
            summary,
            body_ok: body_error.is_none(),
            body_error,
            super_root,
        });
    };
    let dump = SegmentDump {
        segno,
        start_block: start,
        nblocks: u64::from(sb.blocks_per_segment),
        logs,
        end,
    };
    Ok((dump, bodies))
}
