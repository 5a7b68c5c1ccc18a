//! fsd starts cleanerd with every read-write mount and keeps it running,
//! as mount.nilfs2 starts nilfs_cleanerd (`-o nogc` opts out).
//!
//! cleanerd is the policy (which segments, when, where the survivors go);
//! the engine does not depend on it for space (`lfs/src/fs/space.rs`), so
//! a cleanerd that is missing, misconfigured or crashing costs write
//! amplification and latency, never data or a full filesystem. Hence:
//! * the program is `cleanerd` beside fsd's own executable, else on PATH;
//!   not found, fsd says so once and mounts without it;
//! * it gets fsd's control socket and, with `-o gcconf=PATH`, that
//!   configuration file (else its own default, /etc/lfs/cleanerd.conf if
//!   it exists); its output goes where fsd's does: standard error, or,
//!   once fsd runs in the background (`--daemon`), syslog (`--syslog`,
//!   its standard streams on /dev/null: it holds nothing of fsd's
//!   caller);
//! * when it exits, fsd starts it again after a back-off that doubles
//!   from [`FIRST_BACKOFF`] to [`MAX_BACKOFF`] (reset once a run lasted
//!   [`STABLE_RUN`]), logging each exit and its status once per status;
//! * at unmount fsd stops it with SIGTERM (SIGKILL after [`STOP_TIMEOUT`])
//!   before the final checkpoint.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::{debug, error, info, warn};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The first wait before cleanerd is started again.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait before cleanerd is started again.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A run at least this long resets the back-off.
pub const STABLE_RUN: Duration = Duration::from_secs(60);
/// How long cleanerd may take to exit after SIGTERM at unmount.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// What the supervisor thread and fsd share.
#[derive(Debug, Default)]
struct Shared {
    /// Set at unmount; the thread then stops restarting.
    stopping: Mutex<bool>,
    wake: Condvar,
    /// The running cleanerd's pid (0: none).
    pid: Mutex<i32>,
}

/// A supervised cleanerd.
#[derive(Debug)]
pub struct Supervisor {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// `cleanerd` beside `exe` (fsd's own executable), else the first on
/// PATH.
pub fn find_cleanerd(exe: Option<&Path>) -> Option<PathBuf> {
    let beside = exe.and_then(Path::parent).map(|d| d.join("cleanerd"));
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("cleanerd"));
    beside.into_iter().chain(on_path).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl Supervisor {
    /// Starts `program SOCKET` (with `-c CONF`) and a thread that keeps it
    /// running.
    pub fn start(
        program: PathBuf,
        socket: PathBuf,
        conf: Option<PathBuf>,
        syslog: bool,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let s = Arc::clone(&shared);
        let how = How {
            program,
            socket,
            conf,
            syslog,
        };
        let thread = std::thread::Builder::new()
            .name("fsd-cleanerd".into())
            .spawn(move || supervise(&s, &how))?;
        Ok(Supervisor {
            shared,
            thread: Some(thread),
        })
    }

    /// Stops cleanerd (SIGTERM, then SIGKILL after [`STOP_TIMEOUT`]) and
    /// the thread.
    pub fn stop(mut self) {
        *lock(&self.shared.stopping) = true;
        self.shared.wake.notify_all();
        signal(&self.shared, Signal::SIGTERM);
        let Some(thread) = self.thread.take() else {
            return;
        };
        let t = Instant::now();
        while !thread.is_finished() && t.elapsed() < STOP_TIMEOUT {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !thread.is_finished() {
            warn!("cleanerd did not exit within {STOP_TIMEOUT:?} of SIGTERM; killing it");
            signal(&self.shared, Signal::SIGKILL);
        }
        let _ = thread.join();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn signal(shared: &Shared, sig: Signal) {
    let pid = *lock(&shared.pid);
    if pid > 0 {
        let _ = kill(Pid::from_raw(pid), sig);
    }
}

/// How cleanerd is started.
#[derive(Debug)]
struct How {
    program: PathBuf,
    socket: PathBuf,
    conf: Option<PathBuf>,
    /// Log to syslog, standard streams on /dev/null (fsd in the
    /// background).
    syslog: bool,
}

fn spawn(how: &How) -> std::io::Result<Child> {
    let mut cmd = Command::new(&how.program);
    if let Some(c) = &how.conf {
        cmd.arg("-c").arg(c);
    }
    let out = || {
        if how.syslog {
            Stdio::null()
        } else {
            Stdio::inherit()
        }
    };
    if how.syslog {
        cmd.arg("--syslog");
    }
    // cleanerd must not outlive an fsd that is killed (SIGKILL, a crash):
    // the kernel sends it SIGTERM when the thread that started it (this
    // supervisor thread, which waits for it) exits. If fsd died before
    // the request took effect, the child is already an orphan: give up.
    let parent = std::process::id() as i32;
    // SAFETY: the closure runs in the child between fork and exec and
    // makes only async-signal-safe system calls (prctl, getppid).
    #[allow(unsafe_code)]
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                .map_err(std::io::Error::from)?;
            if nix::unistd::getppid().as_raw() != parent {
                return Err(std::io::Error::other("fsd exited before cleanerd started"));
            }
            Ok(())
        });
    }
    cmd.arg(&how.socket)
        .stdin(Stdio::null())
        .stdout(out())
        .stderr(out())
        .spawn()
}

/// The supervisor thread's loop.
fn supervise(shared: &Shared, how: &How) {
    let (program, socket, conf) = (&how.program, &how.socket, how.conf.as_deref());
    let mut backoff = FIRST_BACKOFF;
    let mut last_status: Option<String> = None;
    loop {
        if *lock(&shared.stopping) {
            return;
        }
        let started = Instant::now();
        let status = match spawn(how) {
            Ok(mut child) => {
                *lock(&shared.pid) = child.id() as i32;
                // Stopping may have begun between the check and the pid:
                // the signal it sent found no pid.
                if *lock(&shared.stopping) {
                    let _ = child.kill();
                }
                if last_status.is_none() {
                    info!(
                        "started cleanerd (pid {}): {} {}{}",
                        child.id(),
                        program.display(),
                        conf.map_or(String::new(), |c| format!("-c {} ", c.display())),
                        socket.display()
                    );
                } else {
                    debug!("restarted cleanerd (pid {})", child.id());
                }
                let st = child.wait();
                *lock(&shared.pid) = 0;
                match st {
                    Ok(st) => st.to_string(),
                    Err(e) => format!("waiting for it failed: {e}"),
                }
            }
            Err(e) => format!("could not be started: {e}"),
        };
        if *lock(&shared.stopping) {
            return;
        }
        if started.elapsed() >= STABLE_RUN {
            backoff = FIRST_BACKOFF;
        }
        if last_status.as_deref() != Some(status.as_str()) {
            error!(
                "cleanerd ({}) {}{status}; starting it again in {backoff:?} (the engine keeps \
                 space meanwhile; see fsd(8), CLEANING)",
                program.display(),
                if status.starts_with("could not") {
                    ""
                } else {
                    "exited: "
                }
            );
            last_status = Some(status);
        } else {
            debug!("cleanerd exited again ({status}); next start in {backoff:?}");
        }
        let stopping = lock(&shared.stopping);
        let (stopping, _) = shared
            .wake
            .wait_timeout_while(stopping, backoff, |s| !*s)
            .unwrap_or_else(PoisonError::into_inner);
        if *stopping {
            return;
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in that exits at once: the supervisor starts it again with
    /// a back-off, and stop ends everything.
    #[test]
    fn a_program_that_exits_is_started_again_and_stop_ends_it() {
        let dir = tempfile::tempdir().unwrap();
        let count = dir.path().join("count");
        let prog = dir.path().join("fake-cleanerd");
        std::fs::write(
            &prog,
            format!("#!/bin/sh\necho run >> {}\nexit 7\n", count.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let s = Supervisor::start(prog, dir.path().join("sock"), None, false).unwrap();
        // Runs at 0 s and, after the first back-off, at about 1 s.
        let t = Instant::now();
        while std::fs::read_to_string(&count).map_or(0, |c| c.lines().count()) < 2 {
            assert!(t.elapsed() < Duration::from_secs(30), "not restarted");
            std::thread::sleep(Duration::from_millis(20));
        }
        s.stop();
    }

    /// A long-running program is stopped by SIGTERM at stop.
    #[test]
    fn stop_terminates_a_running_program() {
        let dir = tempfile::tempdir().unwrap();
        let prog = dir.path().join("fake-cleanerd");
        std::fs::write(&prog, "#!/bin/sh\nexec sleep 600\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let s = Supervisor::start(prog, dir.path().join("sock"), None, false).unwrap();
        let t = Instant::now();
        while *lock(&s.shared.pid) == 0 {
            assert!(t.elapsed() < Duration::from_secs(30), "not started");
            std::thread::sleep(Duration::from_millis(10));
        }
        let pid = *lock(&s.shared.pid);
        s.stop();
        assert!(
            kill(Pid::from_raw(pid), None).is_err(),
            "cleanerd {pid} still runs after stop"
        );
    }

    #[test]
    fn cleanerd_is_looked_for_beside_fsd_first() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("fsd");
        let c = dir.path().join("cleanerd");
        std::fs::write(&c, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&c, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(find_cleanerd(Some(&exe)), Some(c));
    }
}
