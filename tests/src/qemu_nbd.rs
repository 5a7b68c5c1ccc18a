//! A qemu-nbd server for tests: serves an image file on 127.0.0.1 (a free
//! port) or on a Unix socket, and is killed when the guard is dropped.
//!
//! qemu-nbd runs with `--fork --pid-file`: its first process exits once
//! the server listens, so a test never races the server's start; the
//! daemon is then known by the pid it wrote, and [`QemuNbd`] kills exactly
//! that process. `--persistent` keeps it serving after a client leaves,
//! so fsctl can follow mkfs and fsd.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

use crate::require_tool;

/// How long qemu-nbd may take to start listening.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Ports tried before a TCP server start counts as failed.
const PORT_TRIES: u32 = 5;

/// Where a server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// 127.0.0.1 and this port.
    Tcp(u16),
    /// This Unix socket.
    Unix(PathBuf),
}

/// A running qemu-nbd; dropping it kills the server.
#[derive(Debug)]
pub struct QemuNbd {
    image: PathBuf,
    listen: Listen,
    export: String,
    extra: Vec<String>,
    pid_file: PathBuf,
    log: PathBuf,
    pid: Option<Pid>,
}

/// A TCP port on 127.0.0.1 that nothing listens on right now.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("binding a port: {e}"));
    l.local_addr()
        .unwrap_or_else(|e| panic!("local address: {e}"))
        .port()
}

/// A zero-filled image file of `len` bytes at `path`.
pub fn image(path: &Path, len: u64) -> PathBuf {
    let f = fs::File::create(path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
    f.set_len(len)
        .unwrap_or_else(|e| panic!("sizing {}: {e}", path.display()));
    path.to_path_buf()
}

impl QemuNbd {
    /// Serves `image` as `export` on 127.0.0.1 at a free port.
    pub fn tcp(image: &Path, export: &str, extra: &[&str]) -> QemuNbd {
        QemuNbd::start(image, Listen::Tcp(free_port()), export, extra)
    }

    /// Serves `image` as `export` on the Unix socket `socket`.
    pub fn unix(image: &Path, socket: &Path, export: &str, extra: &[&str]) -> QemuNbd {
        QemuNbd::start(image, Listen::Unix(socket.to_path_buf()), export, extra)
    }

    /// Starts qemu-nbd (`-f raw --persistent --cache=writeback
    /// --discard=unmap`, plus `extra`, e.g. `-r`) and waits until it
    /// listens. Panics, with its log, if it does not.
    pub fn start(image: &Path, listen: Listen, export: &str, extra: &[&str]) -> QemuNbd {
        require_tool("qemu-nbd");
        let base = image.with_extension(format!(
            "qemu-nbd.{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let mut server = QemuNbd {
            image: image.to_path_buf(),
            listen,
            export: export.to_string(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            pid_file: base.with_extension("pid"),
            log: base.with_extension("log"),
            pid: None,
        };
        // A free port may be taken by another test between free_port and
        // qemu-nbd's bind: then try another.
        let mut tries = 0;
        loop {
            tries += 1;
            match server.launch() {
                Ok(()) => return server,
                Err(e) if tries < PORT_TRIES && matches!(server.listen, Listen::Tcp(_)) => {
                    eprintln!("qemu-nbd did not start, trying another port: {e}");
                    server.listen = Listen::Tcp(free_port());
                }
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// Starts qemu-nbd; an error if it exits without serving (e.g. its
    /// port was taken meanwhile).
    fn launch(&mut self) -> Result<(), String> {
        let _ = fs::remove_file(&self.pid_file);
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap_or_else(|e| panic!("creating {}: {e}", self.log.display()));
        let mut cmd = Command::new("qemu-nbd");
        cmd.args([
            "-f",
            "raw",
            "--persistent",
            "--cache=writeback",
            "--discard=unmap",
            "--fork",
        ])
        .arg("--pid-file")
        .arg(&self.pid_file)
        .arg("-x")
        .arg(&self.export);
        match &self.listen {
            Listen::Tcp(port) => {
                cmd.args(["-b", "127.0.0.1", "-p", &port.to_string()]);
            }
            Listen::Unix(path) => {
                cmd.arg("-k").arg(path);
            }
        }
        cmd.args(&self.extra)
            .arg(&self.image)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("duplicating the log file"))
            .stderr(log);
        let mut parent = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting qemu-nbd: {e}"));
        let deadline = Instant::now() + START_TIMEOUT;
        let status = loop {
            if let Some(status) = parent.try_wait().expect("waiting for qemu-nbd") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = parent.kill();
                let _ = parent.wait();
                panic!(
                    "qemu-nbd did not start within {START_TIMEOUT:?}:\n{}",
                    self.log()
                );
            }
            sleep(Duration::from_millis(20));
        };
        if !status.success() {
            return Err(format!(
                "qemu-nbd exited with {status} before serving {}:\n{}",
                self.image.display(),
                self.log()
            ));
        }
        let text = fs::read_to_string(&self.pid_file)
            .unwrap_or_else(|e| panic!("qemu-nbd wrote no pid file: {e}\n{}", self.log()));
        let pid: i32 = text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("qemu-nbd's pid file says {text:?}"));
        self.pid = Some(Pid::from_raw(pid));
        Ok(())
    }

    /// The lfs device name of the export.
    pub fn name(&self) -> String {
        match &self.listen {
            Listen::Tcp(port) => format!("nbd://127.0.0.1:{port}/{}", self.export),
            Listen::Unix(path) => {
                format!("nbd+unix:///{}?socket={}", self.export, path.display())
            }
        }
    }

    /// qemu-nbd's output so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Kills the server with SIGKILL and waits until it is gone.
    pub fn kill(&mut self) {
        let Some(pid) = self.pid.take() else { return };
        let _ = kill(pid, Signal::SIGKILL);
        // The daemon is not our child (it forked away), so poll.
        let deadline = Instant::now() + START_TIMEOUT;
        while is_running(pid) && Instant::now() < deadline {
            // Reap it if it happens to be ours after all.
            let _ = waitpid(pid, Some(WaitPidFlag::WNOHANG));
            sleep(Duration::from_millis(10));
        }
        if let Listen::Unix(path) = &self.listen {
            let _ = fs::remove_file(path);
        }
    }

    /// Starts the server again, same image, address and options.
    pub fn restart(&mut self) {
        self.kill();
        if let Err(e) = self.launch() {
            panic!("restarting: {e}");
        }
    }
}

/// True while `pid` exists and is not a zombie (a zombie has released
/// its image lock and socket; its reaper may be anyone).
fn is_running(pid: Pid) -> bool {
    if kill(pid, None).is_err() {
        return false;
    }
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, None | Some("Z") | Some("X"))
}

impl Drop for QemuNbd {
    fn drop(&mut self) {
        self.kill();
    }
}
