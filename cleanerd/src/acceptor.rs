//! An accept loop on a Unix socket, on a thread of its own, that can be
//! stopped: the control socket's and the test fake's.

use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use log::warn;

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
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(move || {
                    for stream in listener.incoming() {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        match stream {
                            Ok(s) => on_connection(s),
                            Err(e) => warn!("accepting a connection: {e}"),
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
        // Wakes the blocked accept, which then sees the flag.
        let _ = UnixStream::connect(&self.path);
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
