//! Reading both superblocks and choosing the current one.

use super::read_opt;
use crate::blockdev::BlockDevice;
use crate::format::{DecodeError, Superblock, MAX_BLOCK_SIZE, MIN_BLOCK_SIZE, SB_SIZE};
use crate::Result;

/// Which copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SbCopy {
    /// At byte 0.
    Primary,
    /// In the last block.
    Secondary,
}

impl SbCopy {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            SbCopy::Primary => "primary",
            SbCopy::Secondary => "secondary",
        }
    }
}

/// Both superblocks as found on the device.
#[derive(Debug, Clone)]
pub struct SuperblockPair {
    /// The primary copy, or why it is unusable.
    pub primary: Result<Superblock, DecodeError>,
    /// The secondary copy, or why it is unusable.
    pub secondary: Result<Superblock, DecodeError>,
    /// Byte offset the secondary was read from, if one was located.
    pub secondary_offset: Option<u64>,
}

impl SuperblockPair {
    /// Which copy is current: the valid one with the higher generation; the
    /// primary on a tie.
    pub fn current_copy(&self) -> Option<SbCopy> {
        match (&self.primary, &self.secondary) {
            (Ok(p), Ok(s)) if s.generation > p.generation => Some(SbCopy::Secondary),
            (Ok(_), _) => Some(SbCopy::Primary),
            (Err(_), Ok(_)) => Some(SbCopy::Secondary),
            (Err(_), Err(_)) => None,
        }
    }

    /// The current superblock, if either copy is valid.
    pub fn current(&self) -> Option<&Superblock> {
        match self.current_copy()? {
            SbCopy::Primary => self.primary.as_ref().ok(),
            SbCopy::Secondary => self.secondary.as_ref().ok(),
        }
    }
}

/// Both copies as raw bytes, as a daemon that has the device open reads
/// them (and sends them to `fsctl super`): decoding them gives what
/// [`read_superblocks`] would have found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuperblockBytes {
    /// Device size in bytes.
    pub device_bytes: u64,
    /// The primary copy (empty if the device is smaller than one).
    pub primary: Vec<u8>,
    /// Where the secondary copy was read.
    pub secondary_offset: u64,
    /// The secondary copy (empty if it lies past the end).
    pub secondary: Vec<u8>,
}

impl SuperblockBytes {
    /// Reads both copies of `dev`, the secondary at `secondary_offset`
    /// (which the caller knows from the geometry it mounted).
    pub fn read(dev: &dyn BlockDevice, secondary_offset: u64) -> Result<SuperblockBytes> {
        let copy = |off, what| read_opt(dev, off, SB_SIZE, what).map(Option::unwrap_or_default);
        Ok(SuperblockBytes {
            device_bytes: dev.len(),
            primary: copy(0, "the primary superblock")?,
            secondary_offset,
            secondary: copy(secondary_offset, "the secondary superblock")?,
        })
    }

    /// Verifies both copies, as [`read_superblocks`] does.
    pub fn decode(&self) -> SuperblockPair {
        SuperblockPair {
            primary: decode_primary(Some(&self.primary), self.device_bytes),
            secondary: decode_secondary(&self.secondary, self.secondary_offset, self.device_bytes),
            secondary_offset: Some(self.secondary_offset),
        }
    }
}

/// The primary copy from its bytes (`None`: past the end of the device).
fn decode_primary(buf: Option<&[u8]>, dev_len: u64) -> Result<Superblock, DecodeError> {
    match buf {
        Some(b) if !b.is_empty() => decode_fitting(b, dev_len),
        _ => Err(DecodeError::Truncated {
            what: "superblock",
            needed: SB_SIZE,
            got: dev_len as usize,
        }),
    }
}

/// A secondary copy read at `off`: valid only where it says it belongs.
fn decode_secondary(buf: &[u8], off: u64, dev_len: u64) -> Result<Superblock, DecodeError> {
    decode_fitting(buf, dev_len).and_then(|sb| {
        let expect = sb.secondary_block() * u64::from(sb.block_size);
        if expect == off {
            Ok(sb)
        } else {
            Err(DecodeError::InvalidField {
                what: "superblock",
                field: "location",
                value: off,
            })
        }
    })
}

fn decode_fitting(buf: &[u8], dev_len: u64) -> Result<Superblock, DecodeError> {
    let sb = Superblock::decode(buf)?;
    let fs_bytes = sb.total_blocks.saturating_mul(sb.block_size.into());
    if fs_bytes > dev_len {
        return Err(DecodeError::InvalidField {
            what: "superblock",
            field: "device blocks (larger than the device)",
            value: sb.total_blocks,
        });
    }
    Ok(sb)
}

/// Reads and verifies both copies. Only an I/O error is an `Err`; bad
/// copies are reported inside the pair.
pub fn read_superblocks(dev: &dyn BlockDevice) -> Result<SuperblockPair> {
    let len = dev.len();
    let primary = decode_primary(
        read_opt(dev, 0, SB_SIZE, "the primary superblock")?.as_deref(),
        len,
    );
    // With a valid primary the secondary's place is known; otherwise try
    // the last block for every possible block size.
    let candidates: Vec<u64> = match &primary {
        Ok(sb) => vec![sb.secondary_block() * u64::from(sb.block_size)],
        Err(_) => (MIN_BLOCK_SIZE.trailing_zeros()..=MAX_BLOCK_SIZE.trailing_zeros())
            .map(|s| 1u64 << s)
            .filter(|&bs| len >= 2 * bs)
            .map(|bs| (len / bs - 1) * bs)
            .collect(),
    };
    let mut secondary = Err(DecodeError::Truncated {
        what: "superblock",
        needed: SB_SIZE,
        got: 0,
    });
    let mut secondary_offset = candidates.first().copied();
    for off in candidates {
        let Some(b) = read_opt(dev, off, SB_SIZE, "the secondary superblock")? else {
            continue;
        };
        let r = decode_secondary(&b, off, len);
        let ok = r.is_ok();
        // Past a damaged copy that is an lfs superblock, the other
        // candidates only say "bad magic": report the damaged one.
        let lfs_found = !matches!(
            secondary,
            Err(DecodeError::BadMagic { .. } | DecodeError::Truncated { .. })
        );
        if ok || !lfs_found {
            secondary = r;
            secondary_offset = Some(off);
        }
        if ok {
            break;
        }
    }
    Ok(SuperblockPair {
        primary,
        secondary,
        secondary_offset,
    })
}
