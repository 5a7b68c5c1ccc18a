//! `fsctl fsck DEVICE` and `fsck.lfs DEVICE`: the offline consistency
//! check (read-only). Both open the device as fsd `-o ro` does (a shared
//! lock): never while an fsd or mkfs.lfs has it open read-write, since
//! what is read would be changing under the check.

use std::path::Path;

use anyhow::{anyhow, Result};
use lfs::blockdev::{open_device, OpenOptions};
use lfs::fsck::FsckReport;
use serde_json::json;

use crate::fail::Fault;
use crate::Exit;

/// Checks the filesystem on `path`. A device in use read-write is
/// [`Fault::Busy`], one without an lfs filesystem [`Fault::NotLfs`].
pub fn check(path: &Path) -> Result<FsckReport> {
    let shown = path.display();
    let dev = open_device(
        path,
        OpenOptions {
            read_only: true,
            direct: false,
            exclusive: true,
        },
    )
    .map_err(|e| -> anyhow::Error {
        if e.kind() == std::io::ErrorKind::ResourceBusy {
            Fault::Busy(format!(
                "{shown} is mounted read-write (an fsd, or mkfs.lfs, has it open): fsck \
                 checks an unmounted filesystem, or one mounted with -o ro; unmount it \
                 first (fsctl super and dumpseg read a mounted one through its fsd)"
            ))
            .into()
        } else {
            anyhow!(e)
        }
    })?;
    lfs::fsck::fsck(dev).map_err(|e| match e {
        lfs::Error::Unsupported(why) => Fault::NotLfs(format!("{shown}: {why}")).into(),
        e => anyhow!(e).context(format!("checking {shown}")),
    })
}

/// Prints what the check found: each error, then one summary line (or
/// JSON).
pub fn print(path: &Path, r: &FsckReport, as_json: bool) -> Result<()> {
    let shown = path.display();
    if as_json {
        let v = json!({
            "device": shown.to_string(),
            "checkpoint": (r.cno != 0).then_some(r.cno),
            "inodes": r.inodes,
            "directories": r.directories,
            "blocks": r.blocks,
            "clean": r.is_clean(),
            "errors": r.errors,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    for e in &r.errors {
        println!("{shown}: {e}");
    }
    if r.cno == 0 {
        // Nothing was checked past the superblocks: no counts to give.
        println!(
            "{shown}: no checkpoint could be checked: {} error(s)",
            r.errors.len()
        );
        return Ok(());
    }
    println!(
        "{shown}: checkpoint {}: {} inodes ({} directories), {} live blocks: {}",
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
    Ok(())
}

/// `fsctl fsck`: exit status 0 if clean, 4 if errors were found.
pub fn run(path: &Path, as_json: bool) -> Result<Exit> {
    let r = check(path)?;
    print(path, &r, as_json)?;
    Ok(if r.is_clean() {
        Exit::Ok
    } else {
        Exit::FsckErrors
    })
}
