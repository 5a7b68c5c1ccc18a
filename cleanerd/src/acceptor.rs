//! An accept loop on a Unix socket, on a thread of its own, that can be
//! stopped: the control socket's and the test fake's.
//!
//! The listener is non-blocking and polled every [`POLL`], so stopping
//! never depends on reaching the socket by its path (which someone may
//! have removed already).

use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use log::warn;

/// How often a stopped loop notices, and how long a connection may wait
/// to be accepted.
pub const POLL: Duration = Duration::from_millis(20);

/// The running loop. Dropping it stops it.
#[derive(Debug)]
pub struct Acceptor {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Acceptor {
    /// Accepts connections on `listener` (bound at `path`) and hands each
    /// to `on_connection`, on a thread named `name`.
    pub fn spawn(
        listener: UnixListener,
        path: &Path,
        name: &str,
        on_connection: impl Fn(UnixStream) + Send + 'static,
    ) -> io::Result<Acceptor> {
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        match listener.accept() {
                            Ok((s, _)) => match s.set_nonblocking(false) {
                                Ok(()) => on_connection(s),
                                Err(e) => warn!("accepting a connection: {e}"),
                            },
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                                std::thread::sleep(POLL)
                            }
                            Err(e) => {
                                warn!("accepting a connection: {e}");
                                std::thread::sleep(POLL);
                            }
                        }
                    }
                })?
        };
        Ok(Acceptor {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops accepting (connections already handed over are not
    /// affected) and removes the socket.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.shutdown();
        }
    }
}
