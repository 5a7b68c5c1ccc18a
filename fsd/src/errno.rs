//! The boundary between engine errors and errno.
//!
//! [`Errno::of`] is the one place an [`lfs::Error`] becomes an errno; the
//! FUSE adapter replies with it, and the control server (a later issue)
//! will put the same value in its replies. Nothing else in fsd picks an
//! errno for an engine error.

use std::fmt;

use log::{debug, error, warn};
use nix::errno::Errno as Nix;

/// An errno as the kernel (FUSE replies) and control clients see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(Nix);

impl Errno {
    /// The value does not fit the caller's buffer (xattr probing).
    pub const ERANGE: Errno = Errno(Nix::ERANGE);
    /// An argument the engine never sees is invalid (unknown flags).
    pub const EINVAL: Errno = Errno(Nix::EINVAL);
    /// Not supported (POSIX ACLs).
    pub const EOPNOTSUPP: Errno = Errno(Nix::EOPNOTSUPP);
    /// Permission denied (the `access` check).
    pub const EACCES: Errno = Errno(Nix::EACCES);

    /// The errno an engine error means. Pure: see [`engine_error`] for
    /// the logging wrapper the adapter uses.
    pub fn of(err: &lfs::Error) -> Errno {
        use lfs::Error as E;
        Errno(match err {
            E::NotFound => Nix::ENOENT,
            E::Exists => Nix::EEXIST,
            E::NotDir => Nix::ENOTDIR,
            E::IsDir => Nix::EISDIR,
            E::NotEmpty => Nix::ENOTEMPTY,
            E::NameTooLong => Nix::ENAMETOOLONG,
            E::ReadOnly(_) => Nix::EROFS,
            E::NoData => Nix::ENODATA,
            E::FileTooLarge => Nix::EFBIG,
            E::NotPermitted => Nix::EPERM,
            E::NotSupported => Nix::EOPNOTSUPP,
            E::TooBig => Nix::E2BIG,
            E::NoSpace => Nix::ENOSPC,
            E::Io { .. } | E::Corrupted { .. } => Nix::EIO,
            // At run time "a feature this version cannot use" means it
            // cannot change the filesystem.
            E::Unsupported(_) => Nix::EROFS,
            E::InvalidArgument(_) | E::DeviceTooSmall { .. } => Nix::EINVAL,
            E::Busy(_) => Nix::EBUSY,
            E::Again(_) => Nix::EAGAIN,
            _ => Nix::EIO,
        })
    }

    /// True if [`Errno::of`] knows the variant, false if it fell back to
    /// EIO because the engine gained a variant fsd does not map yet.
    fn is_mapped(err: &lfs::Error) -> bool {
        use lfs::Error as E;
        matches!(
            err,
            E::NotFound
                | E::Exists
                | E::NotDir
                | E::IsDir
                | E::NotEmpty
                | E::NameTooLong
                | E::ReadOnly(_)
                | E::NoData
                | E::FileTooLarge
                | E::NotPermitted
                | E::NotSupported
                | E::TooBig
                | E::NoSpace
                | E::Io { .. }
                | E::Corrupted { .. }
                | E::Unsupported(_)
                | E::InvalidArgument(_)
                | E::DeviceTooSmall { .. }
                | E::Busy(_)
                | E::Again(_)
        )
    }

    /// The raw errno value.
    pub fn code(self) -> i32 {
        self.0 as i32
    }

    /// As fuser wants it in a reply.
    pub fn to_fuse(self) -> fuser::Errno {
        fuser::Errno::from_i32(self.code())
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.0, self.0.desc())
    }
}

/// Maps the error of engine call `op` on inode `ino` to an errno and logs
/// it: failures of the device or the on-disk data at error level (one line
/// each, naming the inode), an unmapped variant at warn, the answers of
/// ordinary requests (no such file, exists, ...) at debug.
pub fn engine_error(op: &str, ino: u64, err: &lfs::Error) -> Errno {
    let errno = Errno::of(err);
    match err {
        lfs::Error::Io { .. } | lfs::Error::Corrupted { .. } => {
            error!("{op} on inode {ino}: {err} (replying {errno})")
        }
        _ if !Errno::is_mapped(err) => {
            warn!("{op} on inode {ino}: engine error fsd does not map: {err:?} (replying {errno})")
        }
        _ => debug!("{op} on inode {ino}: {err} (replying {errno})"),
    }
    errno
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(err: lfs::Error) -> Nix {
        Nix::from_raw(Errno::of(&err).code())
    }

    #[test]
    fn every_variant_maps_to_its_errno() {
        use lfs::Error as E;
        let io = || std::io::Error::other("disk on fire");
        let cases = [
            (E::NotFound, Nix::ENOENT),
            (E::Exists, Nix::EEXIST),
            (E::NotDir, Nix::ENOTDIR),
            (E::IsDir, Nix::EISDIR),
            (E::NotEmpty, Nix::ENOTEMPTY),
            (E::NameTooLong, Nix::ENAMETOOLONG),
            (E::ReadOnly(String::new()), Nix::EROFS),
            (E::NoData, Nix::ENODATA),
            (E::FileTooLarge, Nix::EFBIG),
            (E::NotPermitted, Nix::EPERM),
            (E::NotSupported, Nix::EOPNOTSUPP),
            (E::TooBig, Nix::E2BIG),
            (E::NoSpace, Nix::ENOSPC),
            (E::Busy(String::new()), Nix::EBUSY),
            (E::Again(String::new()), Nix::EAGAIN),
            (E::io("reading", io()), Nix::EIO),
            (
                E::Corrupted {
                    what: "summary",
                    location: "block 7".into(),
                    reason: lfs::format::DecodeError::Truncated {
                        what: "summary",
                        needed: 2,
                        got: 1,
                    },
                },
                Nix::EIO,
            ),
            (E::Unsupported("feature".into()), Nix::EROFS),
            (E::InvalidArgument("x".into()), Nix::EINVAL),
            (
                E::DeviceTooSmall {
                    size: 1,
                    min: 2,
                    block_size: 4096,
                    blocks_per_segment: 16,
                },
                Nix::EINVAL,
            ),
        ];
        for (err, want) in cases {
            assert!(Errno::is_mapped(&err), "{err:?} is not marked as mapped");
            assert_eq!(code(err), want);
        }
    }

    #[test]
    fn converts_to_fuse_and_displays() {
        let e = Errno::of(&lfs::Error::NotFound);
        assert_eq!(e.to_fuse(), fuser::Errno::ENOENT);
        assert_eq!(e.code(), nix::libc::ENOENT);
        assert!(e.to_string().contains("ENOENT"), "{e}");
        assert_eq!(
            Errno::ERANGE.to_fuse(),
            fuser::Errno::from_i32(nix::libc::ERANGE)
        );
    }

    #[test]
    fn engine_error_returns_the_mapping() {
        assert_eq!(
            engine_error("lookup", 1, &lfs::Error::Exists),
            Errno::of(&lfs::Error::Exists)
        );
    }
}
