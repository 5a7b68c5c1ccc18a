//! Removing the FUSE mount, for root and for a user.
//!
//! fuser makes the mount: root's with mount(2); a user's through the
//! setuid `fusermount3` (as libfuse does), once fuser has found that
//! mount(2) is refused. fusermount3 opens /dev/fuse with the user's own
//! rights, so a user mounts only where /dev/fuse admits users (Debian's
//! udev makes it 0666; [`user_may_not_mount`] says so when it is not),
//! and `allow_other` only with `user_allow_other` in /etc/fuse.conf,
//! which fusermount3 checks.
//!
//! fuser's unmounter makes the first attempt (through `fusermount3 -u`
//! for a user). The retries of a busy mount and the forced unmount are
//! fsd's: umount(2) for root, `fusermount3 -u` (lazily with `-z`, the
//! only force a user has) otherwise.

use std::path::Path;
use std::process::{Command, Stdio};

use fuser::SessionUnmounter;
use nix::errno::Errno;
use nix::mount::{umount2, MntFlags};

/// The setuid helper of libfuse 3 (Debian's fuse3).
pub const FUSERMOUNT: &str = "fusermount3";

/// How this fsd's mount is removed.
pub struct Unmounter {
    session: SessionUnmounter,
    /// Mounted by a user: umount(2) is root's.
    by_user: bool,
}

impl std::fmt::Debug for Unmounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unmounter")
            .field("by_user", &self.by_user)
            .finish_non_exhaustive()
    }
}

impl Unmounter {
    /// The unmounter of a session this process mounted.
    pub fn new(session: SessionUnmounter) -> Unmounter {
        Unmounter {
            session,
            by_user: !nix::unistd::geteuid().is_root(),
        }
    }

    /// The first attempt (SIGTERM, `fsctl umount`): fuser's, which acts
    /// only while the session is alive and keeps it from unmounting again
    /// when it ends.
    pub fn unmount(&mut self) -> Result<(), Errno> {
        self.session
            .unmount()
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(Errno::EIO as i32)))
    }

    /// Unmounts `mountpoint` again (a retry: `flags` empty) or by force
    /// (MNT_FORCE, then MNT_DETACH; a user can only detach).
    pub fn unmount_with(&self, mountpoint: &Path, flags: MntFlags) -> Result<(), Errno> {
        if !self.by_user {
            return umount2(mountpoint, flags);
        }
        if flags.contains(MntFlags::MNT_FORCE) {
            return Ok(());
        }
        fusermount_unmount(mountpoint, flags.contains(MntFlags::MNT_DETACH))
    }
}

/// Why a user cannot mount here, when /dev/fuse admits only root: for the
/// message of a failed mount.
pub fn user_may_not_mount() -> Option<String> {
    if nix::unistd::geteuid().is_root() {
        return None;
    }
    let denied = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied);
    denied.then(|| {
        "/dev/fuse admits only root on this system, and fusermount3 opens it with the \
         user's own rights: users mount FUSE filesystems where /dev/fuse is mode 0666 \
         (Debian's udev rule)"
            .to_owned()
    })
}

/// `fusermount3 -u [-z] MOUNTPOINT`; EBUSY when it says the mount is busy,
/// EINVAL when nothing is mounted there.
fn fusermount_unmount(mountpoint: &Path, lazy: bool) -> Result<(), Errno> {
    let mut cmd = Command::new(FUSERMOUNT);
    cmd.arg("-u");
    if lazy {
        cmd.arg("-z");
    }
    let out = cmd
        .arg("--")
        .arg(mountpoint)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(Errno::EIO as i32)))?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    log::debug!("{FUSERMOUNT} -u {}: {}", mountpoint.display(), said.trim());
    if said.contains("busy") {
        Err(Errno::EBUSY)
    } else if said.contains("not found in") || said.contains("not mounted") {
        Err(Errno::EINVAL)
    } else {
        Err(Errno::EIO)
    }
}
