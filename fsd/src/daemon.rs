//! `--daemon`: fsd detaches from its caller once the filesystem is
//! mounted, and the caller's command returns only then (what mount(8)
//! expects of a helper, and an fstab line of type fuse.lfs needs).
//!
//! fsd forks before it starts any thread. The parent waits on a pipe:
//! one byte from the child means "mounted", and the parent exits 0; the
//! pipe closing without it means the child failed (it has written its
//! error to the standard error it shares with the parent), and the
//! parent exits with the child's status. The child starts a session of
//! its own at once and, once mounted, points its standard streams at
//! /dev/null and its log at syslog, so that it holds nothing of its
//! caller's (a pipe whose reader waits for the end, a terminal).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};

use nix::fcntl::OFlag;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{dup2, fork, pipe2, setsid, ForkResult};

/// The child's end of the pipe, until it says it is mounted.
#[derive(Debug)]
pub struct Detached {
    ready: File,
}

/// Forks. In the parent, waits for the child to be mounted (exit 0) or
/// to fail (its exit status): the parent's process ends inside. Returns
/// in the child, which is in a session of its own.
#[allow(unsafe_code)]
pub fn detach() -> io::Result<Detached> {
    // Close-on-exec: a program the child starts must not hold the pipe
    // open after the child is gone.
    let (read, write) = pipe2(OFlag::O_CLOEXEC)?;
    // SAFETY: fsd calls this before it starts any thread (main's first
    // steps only parse arguments and the configuration), so the child
    // inherits no lock held by another thread.
    match unsafe { fork() }? {
        ForkResult::Parent { child } => {
            drop(write);
            std::process::exit(i32::from(wait_for(read, child)));
        }
        ForkResult::Child => {
            drop(read);
            setsid()?;
            Ok(Detached {
                ready: File::from(write),
            })
        }
    }
}

/// The parent's side: the child's verdict.
fn wait_for(read: OwnedFd, child: nix::unistd::Pid) -> u8 {
    let mut byte = [0u8; 1];
    if matches!(File::from(read).read(&mut byte), Ok(1)) {
        return 0;
    }
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => return u8::try_from(code).unwrap_or(1),
            Ok(WaitStatus::Signaled(..)) => return 1,
            Ok(_) => continue,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return 1,
        }
    }
}

impl Detached {
    /// The filesystem is mounted: lets the parent exit 0, and leaves the
    /// caller's streams (from now on the log goes to syslog).
    pub fn ready(mut self) -> io::Result<()> {
        let null = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")?;
        for fd in 0..=2 {
            dup2(null.as_raw_fd(), fd)?;
        }
        lfs_common::logging::to_syslog();
        self.ready.write_all(&[1])
    }
}
