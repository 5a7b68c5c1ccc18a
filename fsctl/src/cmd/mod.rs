//! fsctl subcommands.

pub mod checkpoints;
pub mod clean;
pub mod dumpseg;
pub mod freeze;
pub mod fsck;
pub mod online;
pub mod source;
pub mod superblock;

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use lfs::blockdev::{open_device, BlockDevice, OpenOptions};
use lfs::inspect::SuperblockPair;

/// Opens a device (a path or an NBD name) read-only (no lock: inspecting
/// a device that fsd has open is allowed, though what is read may be
/// changing; `super` and `dumpseg` ask fsd instead, see `source`).
pub fn open_read_only(path: &Path) -> Result<Arc<dyn BlockDevice>> {
    Ok(open_device(
        path,
        OpenOptions {
            read_only: true,
            direct: false,
            exclusive: false,
        },
    )?)
}

/// The error for a device with no valid superblock: its name and why
/// each copy is bad.
pub fn no_valid_superblock(name: &str, pair: &SuperblockPair) -> anyhow::Error {
    crate::fail::Fault::NotLfs(format!(
        "{name}: no valid lfs superblock (primary: {}; secondary: {})",
        reason(&pair.primary),
        reason(&pair.secondary)
    ))
    .into()
}

/// "valid" or the decode error.
pub fn reason<T>(r: &Result<T, lfs::format::DecodeError>) -> String {
    match r {
        Ok(_) => "valid".into(),
        Err(e) => e.to_string(),
    }
}

/// Seconds since the epoch as UTC `YYYY-MM-DD HH:MM:SS`.
pub fn utc(secs: u64) -> String {
    let days = secs / 86400;
    let rem = secs % 86400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::utc(1_700_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(super::utc(951_782_400), "2000-02-29 00:00:00 UTC");
    }
}
