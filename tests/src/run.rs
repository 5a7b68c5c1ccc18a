//! Running a command with its output captured and a deadline.
//!
//! The child runs in a process group of its own, and on timeout the whole
//! group is killed: `make` or a script that hangs in a grandchild fails the
//! test instead of hanging CI.

use std::fmt;
use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// How often a running child is checked for exit.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// How long, after the child exits or is killed, its output pipes may stay
/// open (held by a leftover grandchild) before the group is killed.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// What a finished command did.
#[derive(Debug)]
pub struct Output {
    /// The command line, for messages.
    pub command: String,
    /// How it exited.
    pub status: ExitStatus,
    /// Standard output, lossily decoded.
    pub stdout: String,
    /// Standard error, lossily decoded.
    pub stderr: String,
}

impl Output {
    /// Panics, showing the command and its output, unless it exited 0.
    #[track_caller]
    pub fn assert_success(self) -> Self {
        assert!(self.status.success(), "{self}");
        self
    }
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.command, self.status, self.stdout, self.stderr
        )
    }
}

/// Why a command did not finish.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunError {
    /// It could not be started (or waited for).
    Spawn {
        /// The command line.
        command: String,
        /// The error.
        source: io::Error,
    },
    /// It ran past its deadline and was killed.
    TimedOut {
        /// The command line.
        command: String,
        /// The deadline it missed.
        timeout: Duration,
        /// Standard output up to the kill.
        stdout: String,
        /// Standard error up to the kill.
        stderr: String,
    },
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Spawn { command, source } if source.kind() == io::ErrorKind::NotFound => {
                write!(
                    f,
                    "could not run {command}: {source} (is it installed? run scripts/setup-debian.sh)"
                )
            }
            RunError::Spawn { command, source } => write!(f, "could not run {command}: {source}"),
            RunError::TimedOut {
                command,
                timeout,
                stdout,
                stderr,
            } => write!(
                f,
                "{command} did not finish within {timeout:?} and was killed\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
            ),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Spawn { source, .. } => Some(source),
            RunError::TimedOut { .. } => None,
        }
    }
}

/// Runs `cmd` with stdin from /dev/null, capturing its output, and kills its
/// process group if it is still running after `timeout`.
pub fn try_run(cmd: &mut Command, timeout: Duration) -> Result<Output, RunError> {
    let command = format!("`{cmd:?}`");
    let spawn_error = |source| RunError::Spawn {
        command: command.clone(),
        source,
    };
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(spawn_error)?;

    let (done_tx, done_rx) = mpsc::channel();
    let stdout = capture(child.stdout.take(), done_tx.clone());
    let stderr = capture(child.stderr.take(), done_tx);
    let text = |buf: &Arc<Mutex<Vec<u8>>>| {
        String::from_utf8_lossy(&buf.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    };

    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(spawn_error)? {
            break Some(status);
        }
        if Instant::now() >= deadline {
            break None;
        }
        thread::sleep(POLL_INTERVAL);
    };

    let Some(status) = status else {
        kill_group(&child);
        // Reap the child; its own exit status is of no interest now.
        let _ = child.wait();
        drain(&done_rx, &child);
        return Err(RunError::TimedOut {
            command,
            timeout,
            stdout: text(&stdout),
            stderr: text(&stderr),
        });
    };
    drain(&done_rx, &child);
    Ok(Output {
        command,
        status,
        stdout: text(&stdout),
        stderr: text(&stderr),
    })
}

/// [`try_run`], panicking if the command cannot be run or times out.
#[track_caller]
pub fn run(cmd: &mut Command, timeout: Duration) -> Output {
    try_run(cmd, timeout).unwrap_or_else(|e| panic!("{e}"))
}

/// [`run`], panicking also unless the command exits 0.
#[track_caller]
pub fn run_ok(cmd: &mut Command, timeout: Duration) -> Output {
    run(cmd, timeout).assert_success()
}

/// Copies `pipe` into a shared buffer on a thread of its own (so a partial
/// output can be shown after a kill) and signals `done` at end of file.
fn capture<R: Read + Send + 'static>(
    pipe: Option<R>,
    done: mpsc::Sender<()>,
) -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&buf);
    thread::spawn(move || {
        if let Some(mut pipe) = pipe {
            let mut chunk = [0u8; 8192];
            // A read error ends the capture like end of file does: the
            // output so far is all there is to show.
            while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend_from_slice(chunk.get(..n).unwrap_or_default());
            }
        }
        // The receiver is gone only if try_run already gave up waiting.
        let _ = done.send(());
    });
    buf
}

/// Waits for both capture threads; if a leftover process keeps a pipe open
/// past [`DRAIN_GRACE`], kills the group and stops waiting.
fn drain(done: &Receiver<()>, child: &Child) {
    let deadline = Instant::now() + DRAIN_GRACE;
    for _ in 0..2 {
        match done.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {}
            Err(RecvTimeoutError::Timeout) => {
                kill_group(child);
                return;
            }
        }
    }
}

fn kill_group(child: &Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // ESRCH (the group is already gone) is the outcome we want anyway.
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_and_status() {
        let out = try_run(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    fn kills_a_hung_command_and_its_children() {
        let start = Instant::now();
        let err = try_run(
            // The grandchild `sleep` holds stdout open: killing only `sh`
            // would leave the capture waiting.
            Command::new("sh").args(["-c", "echo started; sleep 600 & wait"]),
            Duration::from_millis(500),
        )
        .unwrap_err();
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "took {:?}",
            start.elapsed()
        );
        assert!(
            matches!(&err, RunError::TimedOut { stdout, .. } if stdout == "started\n"),
            "{err:?}"
        );
    }

    #[test]
    fn missing_program_is_a_spawn_error() {
        let err = try_run(
            &mut Command::new("lfs-e2e-no-such-program"),
            Duration::from_secs(10),
        )
        .unwrap_err();
        assert!(
            matches!(&err, RunError::Spawn { source, .. } if source.kind() == io::ErrorKind::NotFound)
        );
        assert!(err.to_string().contains("setup-debian.sh"), "{err}");
    }
}
