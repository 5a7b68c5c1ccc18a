//! `fsctl freeze` and `fsctl thaw` (fsfreeze(8)'s -f and -u): stop every
//! change to a mounted filesystem with everything durable, and let changes
//! go on again.

use std::path::Path;

use anyhow::{bail, Context, Result};
use lfs_proto::msg::{Freeze, Thaw};

use crate::target::connect;
use crate::Exit;

const EBUSY: i32 = nix::libc::EBUSY;
const EINVAL: i32 = nix::libc::EINVAL;

/// How the target is named in messages.
fn shown(target: Option<&Path>) -> String {
    target.map_or_else(
        || "the filesystem of the current directory".to_string(),
        |t| t.display().to_string(),
    )
}

/// `fsctl freeze [TARGET]`.
pub fn freeze(target: Option<&Path>) -> Result<Exit> {
    let mut c = connect(target)?;
    match c.call(&Freeze) {
        Ok(_) => Ok(Exit::Ok),
        Err(e) if e.errno() == Some(EBUSY) => bail!(
            "{} is already frozen (or being frozen); fsctl thaw thaws it",
            shown(target)
        ),
        Err(e) => Err(e).with_context(|| format!("freezing {} (FREEZE)", shown(target))),
    }
}

/// `fsctl thaw [TARGET]`.
pub fn thaw(target: Option<&Path>) -> Result<Exit> {
    let mut c = connect(target)?;
    match c.call(&Thaw) {
        Ok(_) => Ok(Exit::Ok),
        Err(e) if e.errno() == Some(EINVAL) => bail!("{} is not frozen", shown(target)),
        Err(e) => Err(e).with_context(|| format!("thawing {} (THAW)", shown(target))),
    }
}
