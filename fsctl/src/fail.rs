//! What went wrong, as far as the exit status tells (fsctl(8), EXIT
//! STATUS): an error names its kind with a [`Fault`] somewhere in its
//! chain, or is recognised by its cause ([`exit_code`]).

use std::io;

use lfs_proto::target::TargetError;
use lfs_proto::ClientError;

use crate::Exit;

/// A failure with an exit status of its own.
#[derive(Debug, thiserror::Error)]
pub enum Fault {
    /// No fsd answers for the target, or the one that answers serves
    /// another filesystem.
    #[error("{0}")]
    NoFsd(String),
    /// The target holds no lfs filesystem.
    #[error("{0}")]
    NotLfs(String),
    /// A checkpoint named does not exist.
    #[error("{0}")]
    NoCheckpoint(String),
    /// This user may not do that.
    #[error("{0}")]
    Denied(String),
    /// The device is in use (mounted) where the command needs it unused.
    #[error("{0}")]
    Busy(String),
}

impl Fault {
    fn exit(&self) -> Exit {
        match self {
            Fault::NoFsd(_) => Exit::NoFsd,
            Fault::NotLfs(_) => Exit::NotLfs,
            Fault::NoCheckpoint(_) => Exit::NoCheckpoint,
            Fault::Denied(_) => Exit::Denied,
            Fault::Busy(_) => Exit::Busy,
        }
    }
}

/// The exit status of an error: its [`Fault`], else a refusal of the
/// daemon (EPERM, EACCES) or of the system (permission denied) is
/// [`Exit::Denied`], a path on no lfs mount [`Exit::NotLfs`], anything
/// else [`Exit::Error`].
pub fn exit_code(e: &anyhow::Error) -> Exit {
    for cause in e.chain() {
        if let Some(f) = cause.downcast_ref::<Fault>() {
            return f.exit();
        }
        if let Some(c) = cause.downcast_ref::<ClientError>() {
            if matches!(c.errno(), Some(nix::libc::EPERM | nix::libc::EACCES)) {
                return Exit::Denied;
            }
        }
        if let Some(TargetError::NotLfs(_)) = cause.downcast_ref::<TargetError>() {
            return Exit::NotLfs;
        }
        if cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::PermissionDenied)
        {
            return Exit::Denied;
        }
    }
    Exit::Error
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn faults_and_causes_pick_the_status() {
        let e = anyhow::Error::from(Fault::NoCheckpoint("x".into())).context("rmcp");
        assert_eq!(exit_code(&e), Exit::NoCheckpoint);
        let e: anyhow::Error = Err::<(), _>(ClientError::Errno {
            code: nix::libc::EPERM,
            name: "EPERM",
        })
        .context("SYNC")
        .unwrap_err();
        assert_eq!(exit_code(&e), Exit::Denied);
        let e = anyhow::Error::from(io::Error::from(io::ErrorKind::PermissionDenied));
        assert_eq!(exit_code(&e), Exit::Denied);
        assert_eq!(exit_code(&anyhow::anyhow!("other")), Exit::Error);
        let e = anyhow::Error::from(TargetError::NotLfs("/proc".into()));
        assert_eq!(exit_code(&e), Exit::NotLfs);
    }
}
