//! What each signal does, on a thread of its own.
//!
//! * SIGTERM, SIGINT: unmount the FUSE mount. The kernel then finishes
//!   the requests in flight and ends the session; `main` sees the session
//!   end, writes the final checkpoint (`Fs::unmount`) and exits 0 — the
//!   same path as an external `umount`. If the mount is busy (a process
//!   has its working directory or a file open in it), the unmount is
//!   retried every [`BUSY_RETRY`] until the users let go. A second SIGTERM
//!   or SIGINT does not wait: a forced unmount aborts the FUSE connection
//!   (the remaining users get ENOTCONN) and a lazy one removes the mount;
//!   the final checkpoint is still written.
//!   A frozen filesystem is thawed first (with a log line): the changes
//!   waiting for the thaw keep their files open, so the mount would stay
//!   busy for as long as it is frozen.
//! * SIGHUP: reload the configuration (the callback `main` passes).
//!
//! The signals are registered before the engine is mounted, so one that
//! arrives during recovery is acted on as soon as the mount exists rather
//! than killing fsd half-way.
//!
//! fsd must never unmount a filesystem someone mounted at the mount point
//! after this one went away. The first attempt goes through fuser's
//! unmounter, which acts only while the session's connection is alive
//! (and afterwards keeps the session from unmounting again when it ends);
//! retries and the forced unmount first check that the last mount at the
//! mount point still has this session's device number. A user's mount
//! (made through fusermount3) is unmounted with `fusermount3 -u`, which
//! cannot force: the second signal detaches it lazily (`mount.rs`).

use std::io;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::{error, info, warn};
use nix::errno::Errno;
use nix::mount::MntFlags;

use crate::mount::Unmounter;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

/// How often a busy mount's unmount is retried after SIGTERM.
pub const BUSY_RETRY: Duration = Duration::from_secs(1);

/// How often signals are polled while retrying a busy unmount.
const BUSY_POLL: Duration = Duration::from_millis(100);

/// The registered signals, before the thread that handles them starts.
#[derive(Debug)]
pub struct Registered(Signals);

/// Registers SIGTERM, SIGINT and SIGHUP. Until [`Registered::spawn`], they
/// are queued instead of acted on.
pub fn register() -> io::Result<Registered> {
    Signals::new([SIGTERM, SIGINT, SIGHUP]).map(Registered)
}

/// What the signal thread acts on.
pub struct Targets {
    /// How the mount is removed: fuser's unmounter for the first attempt
    /// (once it has run, the session no longer tries to unmount again
    /// when it ends), umount(2) or fusermount3 after.
    pub unmounter: Unmounter,
    /// The mount point (canonical).
    pub mountpoint: PathBuf,
    /// The mount's device number (`MAJOR << 20 | MINOR`), if it was found
    /// in /proc/self/mountinfo.
    pub device_number: Option<u64>,
    /// Rereads and applies the configuration.
    pub reload: Box<dyn FnMut() + Send>,
    /// Called before each unmount attempt: thaws a frozen filesystem.
    pub before_unmount: Box<dyn FnMut() + Send>,
}

impl std::fmt::Debug for Targets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Targets")
            .field("mountpoint", &self.mountpoint)
            .field("device_number", &self.device_number)
            .finish_non_exhaustive()
    }
}

/// The running signal thread.
#[derive(Debug)]
pub struct SignalThread {
    handle: Handle,
    thread: JoinHandle<()>,
}

impl Registered {
    /// Starts acting on the signals (and on any that arrived already).
    pub fn spawn(self, targets: Targets) -> io::Result<SignalThread> {
        let Registered(mut signals) = self;
        let handle = signals.handle();
        let thread = std::thread::Builder::new()
            .name("fsd-signals".into())
            .spawn(move || run(&mut signals, targets))?;
        Ok(SignalThread { handle, thread })
    }
}

impl SignalThread {
    /// Stops the thread (once the session has ended) and waits for it.
    pub fn stop(self) {
        self.handle.close();
        if self.thread.join().is_err() {
            error!("the signal thread panicked");
        }
    }
}

/// Where the unmount stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// No stop requested.
    Serving,
    /// Stop requested, the mount is busy: retrying.
    Busy,
    /// Unmounted (or forced); the session is ending.
    Unmounted,
}

fn run(signals: &mut Signals, mut targets: Targets) {
    let mut stage = Stage::Serving;
    let mut next_retry = Instant::now();
    loop {
        let batch: Vec<i32> = if stage == Stage::Busy {
            std::thread::sleep(BUSY_POLL);
            signals.pending().collect()
        } else {
            signals.wait().collect()
        };
        if signals.is_closed() {
            return;
        }
        for signal in batch {
            match (signal, stage) {
                (SIGHUP, _) => {
                    info!("SIGHUP: reloading the configuration");
                    (targets.reload)();
                }
                (SIGTERM | SIGINT, Stage::Serving) => {
                    info!(
                        "{}: unmounting {}",
                        name(signal),
                        targets.mountpoint.display()
                    );
                    (targets.before_unmount)();
                    stage = first_unmount(&mut targets);
                    next_retry = Instant::now() + BUSY_RETRY;
                }
                (SIGTERM | SIGINT, Stage::Busy) => {
                    warn!(
                        "{} again: forcing the unmount of {}; processes still using it get ENOTCONN",
                        name(signal),
                        targets.mountpoint.display()
                    );
                    force_unmount(&targets);
                    stage = Stage::Unmounted;
                }
                (SIGTERM | SIGINT, Stage::Unmounted) => {
                    info!(
                        "{}: already unmounted, finishing the requests in flight",
                        name(signal)
                    );
                }
                _ => {}
            }
        }
        if stage == Stage::Busy && Instant::now() >= next_retry {
            next_retry = Instant::now() + BUSY_RETRY;
            // A freeze that was in progress at the first attempt.
            (targets.before_unmount)();
            match unmount_ours(&targets, MntFlags::empty()) {
                Err(Errno::EBUSY) => {}
                Ok(()) => {
                    info!(
                        "{} is no longer busy: unmounted",
                        targets.mountpoint.display()
                    );
                    stage = Stage::Unmounted;
                }
                Err(e) => {
                    warn!("unmounting {}: {e}", targets.mountpoint.display());
                    stage = Stage::Unmounted;
                }
            }
        }
    }
}

fn name(signal: i32) -> &'static str {
    match signal {
        SIGTERM => "SIGTERM",
        SIGINT => "SIGINT",
        SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

/// The first unmount attempt after SIGTERM or SIGINT.
fn first_unmount(targets: &mut Targets) -> Stage {
    match targets.unmounter.unmount() {
        Ok(()) => Stage::Unmounted,
        Err(Errno::EBUSY) => {
            warn!(
                "{} is busy; retrying every {BUSY_RETRY:?} until the processes using it let go \
                 (send SIGTERM again to force: they get ENOTCONN)",
                targets.mountpoint.display()
            );
            Stage::Busy
        }
        Err(e) => {
            error!(
                "unmounting {} failed: {e}; send SIGTERM again to force",
                targets.mountpoint.display()
            );
            Stage::Busy
        }
    }
}

/// Aborts the FUSE connection (what a forced unmount does to FUSE), then
/// detaches the mount, which is still busy.
fn force_unmount(targets: &Targets) {
    match unmount_ours(targets, MntFlags::MNT_FORCE) {
        Ok(()) | Err(Errno::EBUSY) => {}
        Err(e) => warn!("forced unmount of {}: {e}", targets.mountpoint.display()),
    }
    match unmount_ours(targets, MntFlags::MNT_DETACH) {
        Ok(()) | Err(Errno::EINVAL) => {}
        Err(e) => error!("lazy unmount of {}: {e}", targets.mountpoint.display()),
    }
}

/// Unmounts the mount point with `flags` if the last mount there is still
/// this session's; `EINVAL` (not mounted) if it is not.
fn unmount_ours(targets: &Targets, flags: MntFlags) -> Result<(), Errno> {
    if let Some(ours) = targets.device_number {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(Errno::EIO as i32)))?;
        if fuse_device_number(&mountinfo, &targets.mountpoint) != Some(ours) {
            return Err(Errno::EINVAL);
        }
    }
    targets.unmounter.unmount_with(&targets.mountpoint, flags)
}

/// The device number of the FUSE mount at `mountpoint` (the last one
/// mounted there), from a `/proc/self/mountinfo` text.
///
/// A mountinfo line is `ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS
/// [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS`, the mount point with
/// space, tab, newline and backslash escaped as octal. The number is the
/// kernel's `MAJOR << 20 | MINOR`, also the FUSE connection's id.
pub fn fuse_device_number(mountinfo: &str, mountpoint: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let want = mountpoint.as_os_str().as_bytes();
    mountinfo.lines().rev().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let dash = fields.iter().position(|f| *f == "-")?;
        let fstype = fields.get(dash + 1)?;
        if *fstype != "fuse" && !fstype.starts_with("fuse.") {
            return None;
        }
        if unescape(fields.get(4)?) != want {
            return None;
        }
        let (major, minor) = fields.get(2)?.split_once(':')?;
        Some((major.parse::<u64>().ok()? << 20) | minor.parse::<u64>().ok()?)
    })
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
pub fn unescape(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| b == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .map(|d| d.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0')));
        match octal.and_then(|v| u8::try_from(v).ok()) {
            Some(v) => {
                out.push(v);
                i += 4;
            }
            None => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:45 / /mnt/data rw,nosuid,nodev,relatime shared:20 - fuse /dev/vdb rw,user_id=0,group_id=0
41 22 0:46 / /mnt/my\\040dir rw,nosuid,nodev - fuse.lfs lfs.img rw,user_id=0,group_id=0
42 22 0:47 / /mnt/tmp rw - tmpfs tmpfs rw
43 22 0:48 / /mnt/data rw,nosuid,nodev - fuse /dev/vdc rw,user_id=0,group_id=0
";

    #[test]
    fn finds_the_last_fuse_mount_at_a_path() {
        assert_eq!(
            fuse_device_number(MOUNTINFO, Path::new("/mnt/data")),
            Some(48)
        );
        assert_eq!(
            fuse_device_number(MOUNTINFO, Path::new("/mnt/my dir")),
            Some(46)
        );
        assert_eq!(fuse_device_number(MOUNTINFO, Path::new("/mnt/tmp")), None);
        assert_eq!(fuse_device_number(MOUNTINFO, Path::new("/")), None);
        assert_eq!(
            fuse_device_number("1 2 3:4 / /x rw - fuse a b\n", Path::new("/x")),
            Some((3 << 20) | 4)
        );
    }

    #[test]
    fn unescapes_octal() {
        assert_eq!(unescape("/a\\040b"), b"/a b");
        assert_eq!(unescape("/a\\134b"), b"/a\\b");
        assert_eq!(unescape("/tab\\011"), b"/tab\t");
        assert_eq!(unescape("/bad\\08"), b"/bad\\08");
        assert_eq!(unescape("/end\\04"), b"/end\\04");
        assert_eq!(unescape("plain"), b"plain");
    }
}
