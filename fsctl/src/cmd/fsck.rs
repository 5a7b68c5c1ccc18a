//! `fsctl fsck DEVICE` and `fsck.lfs DEVICE`: the offline consistency
//! check (read-only). Both open the device as fsd `-o ro` does (a shared
//! lock): never while an fsd or mkfs.lfs has it open read-write, since
//! what is read would be changing under the check.

use std::path::Path;

use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use lfs::blockdev::{open_device, BlockDevice, OpenOptions};
use lfs::fsck::FsckReport;
use serde_json::json;

use crate::fail::Fault;
use crate::Exit;

/// Checks the filesystem on `path`. A device in use read-write is
/// [`Fault::Busy`], one without an lfs filesystem [`Fault::NotLfs`].
pub fn check(path: &Path) -> Result<FsckReport> {
    check_dev(path, open(path, true)?)
}

/// Opens `path` exclusively: read-only (shared with other readers) or
/// read-write (alone), refused as [`Fault::Busy`] while an fsd or
/// mkfs.lfs has it open read-write (or, read-write, open at all).
fn open(path: &Path, read_only: bool) -> Result<Arc<dyn BlockDevice>> {
    let shown = path.display();
    open_device(
        path,
        OpenOptions {
            read_only,
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
    })
}

fn check_dev(path: &Path, dev: Arc<dyn BlockDevice>) -> Result<FsckReport> {
    let shown = path.display();
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
            "rollback_to": r.rollback_to,
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
    if let Some(k) = r.rollback_to {
        println!(
            "{shown}: `fsctl fsck --rollback {k} {shown}` makes checkpoint {k} the current one \
             (what later checkpoints held is lost); fsd -o ro,cp={k} mounts it read-only"
        );
    }
    Ok(())
}

/// `fsctl fsck`: exit status 0 if clean, 4 if errors were found. With
/// `rollback`, the checkpoint to make current when the last one is
/// damaged: the device is opened read-write and alone, checked, and
/// rolled back only if `rollback` is the newest intact checkpoint and
/// that checkpoint has no error of its own.
pub fn run(path: &Path, rollback: Option<u64>, as_json: bool) -> Result<Exit> {
    let Some(cno) = rollback else {
        return report(path, check(path)?, as_json);
    };
    let dev = open(path, false)?;
    let r = check_dev(path, Arc::clone(&dev))?;
    let shown = path.display();
    match r.rollback_to {
        None if r.cno == 0 => {}
        None => bail!(
            "{shown}: checkpoint {}, the last one, is intact: there is nothing to roll back",
            r.cno
        ),
        Some(k) if k != cno => {
            return Err(Fault::NoCheckpoint(format!(
                "{shown}: checkpoint {k} is the newest intact one, the one --rollback can make \
                 current, not {cno}"
            ))
            .into())
        }
        // The damaged checkpoint is the one error a rollback mends.
        Some(_) if r.errors.len() > 1 => {
            print(path, &r, as_json)?;
            bail!("{shown}: checkpoint {cno} has errors of its own; not rolled back");
        }
        Some(_) => {}
    }
    if r.cno == 0 {
        print(path, &r, as_json)?;
        bail!("{shown}: no intact checkpoint was found to roll back to");
    }
    let done = lfs::checkpoint::rollback::rollback(dev, cno)
        .with_context(|| format!("rolling {shown} back to checkpoint {cno}"))?;
    if !as_json {
        println!(
            "{shown}: rolled back to checkpoint {}; checkpoint {} and what it held are gone",
            done.cno, done.damaged
        );
    }
    report(path, check(path)?, as_json)
}

/// Prints `r` and gives its status.
fn report(path: &Path, r: FsckReport, as_json: bool) -> Result<Exit> {
    print(path, &r, as_json)?;
    Ok(if r.is_clean() {
        Exit::Ok
    } else {
        Exit::FsckErrors
    })
}
