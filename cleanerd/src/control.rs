//! cleanerd's own control socket, which `fsctl clean` talks to.
//!
//! The socket lies beside fsd's: its path with `.sock` replaced by
//! `.cleanerd.sock` ([`lfs_proto::path::cleanerd_socket_path`]), mode
//! 0660, removed at exit. A socket another live cleanerd answers on is
//! never taken over ([`StartError::InUse`]); one left by a cleanerd that
//! died is replaced.
//!
//! The protocol is one JSON object per line each way, in order:
//!
//! ```text
//! → {"command":"status"}
//! ← {"ok":true,"status":{"mode":"normal","passes":3,...}}
//! → {"command":"once","segments":4,"protection_period":60}
//! ← {"ok":true,"report":{"outcome":"cleaned","cleaned":[7,9],...}}
//! → {"command":"suspend"}            (also "resume", "reload")
//! ← {"ok":true,"message":"suspended"}
//! ← {"ok":false,"error":"..."}       (any request that failed)
//! ```
//!
//! `status` is answered to anyone who can connect (the socket's mode and
//! group decide who can); the other commands change what the cleaner does
//! and are accepted only from root or the user cleanerd runs as (the
//! socket's owner), identified by SO_PEERCRED.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lfs_proto::server::Peer;
use log::{debug, warn};
use serde::{Deserialize, Serialize};

use crate::acceptor::Acceptor;
use crate::daemon::{Event, RECENT_PASSES};
use crate::pass::{Outcome, PassReport};

/// The socket's mode.
pub const SOCKET_MODE: u32 = 0o660;
/// How long a connection may stay silent before it is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a changing command may wait for the loop to answer (a pass
/// in progress finishes first; a pass of its own makes several requests
/// to fsd, each with the protocol client's 30 s timeout).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest request line accepted.
pub const MAX_LINE: usize = 4096;

/// A request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Command {
    /// What the cleaner is doing.
    Status,
    /// Stop cleaning until resumed.
    Suspend,
    /// Clean again.
    Resume,
    /// Reread the configuration (as SIGHUP).
    Reload,
    /// One pass now at normal speed.
    Once {
        /// Segments to choose instead of `nsegments_per_clean`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        segments: Option<u64>,
        /// Protection period in seconds instead of the configured one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        protection_period: Option<f64>,
        /// Least reclaimable blocks per chosen segment instead of
        /// `min_reclaimable_blocks`, as cleanerd.conf writes an amount
        /// ("0", "5%", "64K").
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_reclaimable: Option<String>,
    },
}

impl Command {
    /// Whether it changes what the cleaner does (root or the owner only).
    pub fn is_changing(&self) -> bool {
        !matches!(self, Command::Status)
    }
}

/// A reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Reply {
    /// Whether the request succeeded.
    pub ok: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether it was refused for the peer's user (a change from anyone
    /// but root or cleanerd's user): fsctl exits with its own status.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub denied: bool,
    /// What was done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// For `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// For `once`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<PassReport>,
}

impl Reply {
    /// A failure.
    pub fn error(e: &str) -> Reply {
        Reply {
            ok: false,
            error: Some(e.to_owned()),
            ..Reply::default()
        }
    }
    /// A success with a message.
    pub fn message(m: &str) -> Reply {
        Reply {
            ok: true,
            message: Some(m.to_owned()),
            ..Reply::default()
        }
    }
    /// A status.
    pub fn status(s: Status) -> Reply {
        Reply {
            ok: true,
            status: Some(s),
            ..Reply::default()
        }
    }
    /// A pass report.
    pub fn report(r: PassReport) -> Reply {
        Reply {
            ok: true,
            report: Some(r),
            ..Reply::default()
        }
    }
}

/// One pass in [`Status::recent`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassBrief {
    /// When, seconds since the epoch.
    pub at: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// Segments cleaned.
    pub segments: u64,
    /// Live blocks moved.
    pub blocks_moved: u64,
}

/// Sums over every pass since cleanerd started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Segments freed.
    pub segments_freed: u64,
    /// Live blocks moved.
    pub blocks_moved: u64,
    /// Bytes fsd wrote for cleaning.
    pub bytes_written: u64,
    /// Checkpoints deleted as older than the protection period.
    pub checkpoints_deleted: u64,
    /// Blocks those deletions freed.
    pub blocks_freed: u64,
    /// Passes deferred for too little to reclaim.
    pub deferrals: u64,
}

/// What `fsctl clean --status` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// cleanerd's process id.
    pub pid: u32,
    /// fsd's socket.
    pub fsd_socket: String,
    /// The configuration file, if any.
    pub config_file: Option<String>,
    /// idle, normal, mc or suspended.
    pub mode: String,
    /// Whether cleanerd is connected to fsd.
    pub connected: bool,
    /// The selection policy.
    pub policy: String,
    /// Segments, at the last check.
    pub nsegs: u64,
    /// Clean segments, at the last check.
    pub nclean: u64,
    /// min_clean_segments, resolved.
    pub min_clean: u64,
    /// max_clean_segments, resolved.
    pub max_clean: u64,
    /// Passes run.
    pub passes: u64,
    /// When the last pass ran, seconds since the epoch.
    pub last_pass_at: Option<u64>,
    /// The last pass.
    pub last_pass: Option<PassReport>,
    /// The last passes, oldest first.
    pub recent: Vec<PassBrief>,
    /// Sums.
    pub totals: Totals,
    /// The last error.
    pub last_error: Option<String>,
    /// When it happened.
    pub last_error_unix: Option<u64>,
}

impl Status {
    /// Adds a pass run at `at`.
    pub fn record(&mut self, r: &PassReport, at: u64) {
        self.passes += 1;
        self.last_pass_at = Some(at);
        self.last_pass = Some(r.clone());
        self.recent.push(PassBrief {
            at,
            outcome: r.outcome,
            segments: r.cleaned.len() as u64,
            blocks_moved: r.blocks_moved,
        });
        if self.recent.len() > RECENT_PASSES {
            self.recent.remove(0);
        }
        let t = &mut self.totals;
        t.segments_freed += r.segments_freed;
        t.blocks_moved += r.blocks_moved;
        t.bytes_written += r.bytes_written;
        t.checkpoints_deleted += r.checkpoints_deleted;
        t.blocks_freed += r.blocks_freed;
        if r.outcome == Outcome::Deferred {
            t.deferrals += 1;
        }
    }
}

/// Why the control socket could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// Another cleanerd answers on the path.
    #[error("another cleanerd is running for this filesystem: it answers on {0}")]
    InUse(PathBuf),
    /// Creating the socket failed.
    #[error("{0}: {1}")]
    Io(String, io::Error),
}

/// The running control server; dropping it removes the socket.
#[derive(Debug)]
pub struct ControlServer(Acceptor);

impl ControlServer {
    /// Listens on `path`; status requests are answered from `status`,
    /// the others sent to the loop through `events`.
    pub fn start(
        path: &Path,
        status: Arc<Mutex<Status>>,
        events: Sender<Event>,
    ) -> Result<ControlServer, StartError> {
        let shown = path.display().to_string();
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => {
                if UnixStream::connect(path).is_ok() {
                    return Err(StartError::InUse(path.to_path_buf()));
                }
                std::fs::remove_file(path)
                    .map_err(|e| StartError::Io(format!("removing the stale socket {shown}"), e))?;
            }
            Ok(_) => {
                return Err(StartError::Io(
                    format!("creating the control socket {shown}"),
                    io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        "a file that is not a socket is in the way",
                    ),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(StartError::Io(format!("checking {shown}"), e)),
        }
        let listener = UnixListener::bind(path)
            .map_err(|e| StartError::Io(format!("creating the control socket {shown}"), e))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(SOCKET_MODE))
            .map_err(|e| StartError::Io(format!("setting the mode of {shown}"), e))?;
        let owner = nix::unistd::geteuid().as_raw();
        let acceptor = Acceptor::spawn(listener, path, "cleanerd-control", move |stream| {
            let (status, events) = (Arc::clone(&status), events.clone());
            let spawned = std::thread::Builder::new()
                .name("cleanerd-conn".into())
                .spawn(move || serve(stream, owner, &status, &events));
            if let Err(e) = spawned {
                warn!("control socket: no thread for a connection: {e}");
            }
        })
        .map_err(|e| StartError::Io("starting the control thread".into(), e))?;
        Ok(ControlServer(acceptor))
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Stops listening and removes the socket.
    pub fn stop(self) {
        self.0.stop();
    }
}

/// Serves one connection: a reply per request line.
fn serve(stream: UnixStream, owner: u32, status: &Mutex<Status>, events: &Sender<Event>) {
    let peer = match Peer::of(&stream) {
        Ok(p) => p,
        Err(e) => {
            debug!("control socket: no peer credentials: {e}");
            return;
        }
    };
    let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut lines = BufReader::new(stream);
    loop {
        let mut line = String::new();
        match (&mut lines).take(MAX_LINE as u64 + 1).read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let reply = if line.len() > MAX_LINE {
            Reply::error(&format!("request longer than {MAX_LINE} bytes"))
        } else {
            answer(line.trim(), &peer, owner, status, events)
        };
        let mut text = serde_json::to_string(&reply).unwrap_or_else(|e| {
            format!("{{\"ok\":false,\"error\":\"cannot encode the reply: {e}\"}}")
        });
        text.push('\n');
        if out.write_all(text.as_bytes()).is_err() || line.len() > MAX_LINE {
            return;
        }
    }
}

fn answer(
    line: &str,
    peer: &Peer,
    owner: u32,
    status: &Mutex<Status>,
    events: &Sender<Event>,
) -> Reply {
    let cmd: Command = match serde_json::from_str(line) {
        Ok(c) => c,
        Err(e) => return Reply::error(&format!("bad request {line:?}: {e}")),
    };
    if cmd == Command::Status {
        return Reply::status(
            status
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        );
    }
    if cmd.is_changing() && peer.uid != 0 && peer.uid != owner {
        return Reply {
            denied: true,
            ..Reply::error(&format!(
                "permission denied: only root or user {owner} (who runs this cleanerd) may change it; uid {} may only ask for the status",
                peer.uid
            ))
        };
    }
    if let Command::Once {
        protection_period: Some(p),
        ..
    } = cmd
    {
        if !(p.is_finite() && p >= 0.0) {
            return Reply::error(&format!("protection_period {p} is not a number of seconds"));
        }
    }
    if let Command::Once {
        segments: Some(n), ..
    } = cmd
    {
        let max = crate::config::MAX_SEGMENTS_PER_CLEAN;
        if !(1..=max).contains(&n) {
            return Reply::error(&format!("segments {n} is out of range (1 to {max})"));
        }
    }
    let (tx, rx) = channel();
    if events.send(Event::Control(cmd, tx)).is_err() {
        return Reply::error("cleanerd is exiting");
    }
    rx.recv_timeout(ANSWER_TIMEOUT).unwrap_or_else(|_| {
        Reply::error(&format!(
            "cleanerd did not answer within {} s",
            ANSWER_TIMEOUT.as_secs()
        ))
    })
}

/// Why a control request could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// Nothing answers on the socket: no cleanerd runs.
    #[error("no cleanerd is running (nothing answers on {})", path.display())]
    NotRunning {
        /// The socket.
        path: PathBuf,
        /// Why connecting failed.
        cause: io::Error,
    },
    /// A cleanerd may run, but this user may not connect to its socket.
    #[error(
        "permission denied connecting to cleanerd on {} (its socket admits its owner and group)",
        path.display()
    )]
    Denied {
        /// The socket.
        path: PathBuf,
    },
    /// The exchange failed.
    #[error("talking to cleanerd on {}: {detail}", path.display())]
    Exchange {
        /// The socket.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
}

/// Sends `cmd` to the cleanerd on `path` and returns its reply.
pub fn request(path: &Path, cmd: &Command) -> Result<Reply, RequestError> {
    let exchange = |detail: String| RequestError::Exchange {
        path: path.to_path_buf(),
        detail,
    };
    let stream = UnixStream::connect(path).map_err(|cause| {
        if cause.kind() == io::ErrorKind::PermissionDenied {
            RequestError::Denied {
                path: path.to_path_buf(),
            }
        } else {
            RequestError::NotRunning {
                path: path.to_path_buf(),
                cause,
            }
        }
    })?;
    stream
        .set_read_timeout(Some(ANSWER_TIMEOUT + Duration::from_secs(10)))
        .map_err(|e| exchange(e.to_string()))?;
    let mut text = serde_json::to_string(cmd).map_err(|e| exchange(e.to_string()))?;
    text.push('\n');
    (&stream)
        .write_all(text.as_bytes())
        .map_err(|e| exchange(format!("sending: {e}")))?;
    let mut line = String::new();
    BufReader::new(&stream)
        .read_line(&mut line)
        .map_err(|e| exchange(format!("reading the reply: {e}")))?;
    if line.is_empty() {
        return Err(exchange("it closed the connection without replying".into()));
    }
    serde_json::from_str(&line).map_err(|e| exchange(format!("bad reply {:?}: {e}", line.trim())))
}
