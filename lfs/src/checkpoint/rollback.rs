//! Rolling back to the newest intact checkpoint when the one the
//! superblock names is damaged (its log does not verify): a mount refuses
//! such a filesystem rather than silently lose what the damaged
//! checkpoint held, so making the older checkpoint current is an
//! explicit act (`fsctl fsck --rollback CNO`, fsctl(8)).
//!
//! The checkpoint rolled back to is the newest one found on the log
//! chain (recovery's [`Target::Intact`]): what recovery read right before
//! the damage. Its blocks are as it left them, since blocks a checkpoint
//! sees are freed only when it is deleted, and only a later checkpoint
//! could have deleted it; those later than it are what is lost. Both
//! superblock copies are written naming it, so that neither names the
//! damaged checkpoint again; the damaged logs are then leftovers the next
//! mount's scan stops at, overwritten as the log advances (lfs(5),
//! RECOVERY).

use std::sync::Arc;

use crate::blockdev::BlockDevice;
use crate::checkpoint::recover::{now_secs, Target};
use crate::fs::state::State;
use crate::{Error, Result};

/// What a rollback did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rollback {
    /// The checkpoint that is now the current one.
    pub cno: u64,
    /// The damaged checkpoint the superblock named.
    pub damaged: u64,
}

/// The newest intact checkpoint of the filesystem on `dev` when the one
/// its superblock names is damaged: `Some((intact, damaged))`; `None` if
/// the named one is intact. Reads only.
pub fn newest_intact(dev: Arc<dyn BlockDevice>) -> Result<Option<(u64, u64)>> {
    let (_, report) = State::recover_to(dev, true, Target::Intact)?;
    Ok(report.damaged.map(|d| (report.cno, d)))
}

/// Makes checkpoint `cno` the current one of the filesystem on `dev`
/// (opened read-write, exclusively), which must be its newest intact
/// checkpoint while the one its superblock names is damaged.
pub fn rollback(dev: Arc<dyn BlockDevice>, cno: u64) -> Result<Rollback> {
    let (intact, damaged) = match newest_intact(Arc::clone(&dev))? {
        Some(found) => found,
        None => {
            return Err(Error::InvalidArgument(
                "the last checkpoint is intact: there is nothing to roll back".into(),
            ))
        }
    };
    if cno != intact {
        return Err(Error::InvalidArgument(format!(
            "checkpoint {intact} is the newest intact one (checkpoint {damaged}, the last, is \
             damaged): only it can become the current one"
        )));
    }
    // Read-write recovery writes one superblock copy naming the intact
    // checkpoint (as dirty, as every mount does); the state is that
    // checkpoint's, with nothing since, so both copies then say clean.
    let (mut st, report) = State::recover_to(dev, false, Target::Intact)?;
    if report.cno != cno {
        return Err(Error::InvalidArgument(format!(
            "checkpoint {} is the newest intact one now, not {cno}",
            report.cno
        )));
    }
    st.sb.state = crate::format::FsState::Clean;
    let now = now_secs();
    st.write_superblock(now)?;
    st.write_superblock(now)?;
    log::warn!("rolled back to checkpoint {cno}: checkpoint {damaged} was damaged");
    Ok(Rollback { cno, damaged })
}
