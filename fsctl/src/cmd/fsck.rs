//! `fsctl fsck DEVICE`: the offline consistency check (read-only).

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use lfs::blockdev::BlockDevice;
use serde_json::json;

use super::open_read_only;
use crate::Exit;

/// Runs the check; exit status 0 if clean, 4 if errors were found.
pub fn run(path: &Path, as_json: bool) -> Result<Exit> {
    let dev: Arc<dyn BlockDevice> = open_read_only(path)?;
    let r = lfs::fsck::fsck(dev).with_context(|| format!("checking {}", path.display()))?;
    if as_json {
        let v = json!({
            "device": path.display().to_string(),
            "checkpoint": r.cno,
            "inodes": r.inodes,
            "directories": r.directories,
            "blocks": r.blocks,
            "clean": r.is_clean(),
            "errors": r.errors,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for e in &r.errors {
            println!("{}: {e}", path.display());
        }
        println!(
            "{}: checkpoint {}: {} inodes ({} directories), {} live blocks: {}",
            path.display(),
            r.cno,
            r.inodes,
            r.directories,
            r.blocks,
            if r.is_clean() {
                "clean".to_string()
            } else {
                format!("{} error(s)", r.errors.len())
            }
        );
    }
    Ok(if r.is_clean() {
        Exit::Ok
    } else {
        Exit::FsckErrors
    })
}
