//! One NBD connection in transmission phase, with many requests in
//! flight.
//!
//! Callers send a request under the `writer` lock (header and data in
//! one go, so requests never interleave on the wire) after registering a
//! channel under its unique handle in `pending`; a reader thread reads
//! every reply and hands it to the waiting caller by handle, so replies
//! may come in any order. When anything goes wrong with the socket (EOF,
//! an I/O error, a protocol error, a request that got no reply within the
//! timeout), the connection is *dead*: every waiting caller is told so,
//! and nothing more is sent on it. What to do then (reconnect, retry) is
//! the device's business (`mod.rs`).
//!
//! Locks: `writer` (the sending half) and `pending` (handles waiting for a
//! reply, and whether the connection is dead) are never held together.

use std::collections::HashMap;
use std::io::{self, IoSlice, Read, Write};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::handshake::Stream;
use super::wire;

/// What the server answered.
#[derive(Debug)]
pub(super) enum Reply {
    /// Success; the data of a read (empty for other commands).
    Ok(Vec<u8>),
    /// The server's error number.
    Error(u32),
}

/// The connection died before the reply came; the message says how.
#[derive(Debug, Clone)]
pub(super) struct Dropped(pub String);

type Answer = Result<Reply, Dropped>;

struct Waiting {
    /// Bytes of data that follow a successful reply (reads).
    read_len: usize,
    tx: mpsc::Sender<Answer>,
}

#[derive(Default)]
struct Pending {
    waiting: HashMap<u64, Waiting>,
    /// Why the connection died, once it has.
    dead: Option<String>,
}

/// State shared with the reader thread.
struct Shared {
    pending: Mutex<Pending>,
    /// A handle on the socket to shut it down from either side.
    socket: Stream,
}

impl Shared {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks the connection dead (first cause wins), shuts the socket and
    /// fails every waiting caller.
    fn kill(&self, why: String) {
        let waiting = {
            let mut p = self.pending();
            if p.dead.is_none() {
                log::warn!("NBD connection lost: {why}");
                p.dead = Some(why);
            }
            std::mem::take(&mut p.waiting)
        };
        self.socket.shutdown();
        let why = self.pending().dead.clone().unwrap_or_default();
        for (_, w) in waiting {
            // A caller that gave up waiting has dropped its receiver.
            let _ = w.tx.send(Err(Dropped(why.clone())));
        }
    }
}

/// A live connection.
pub(super) struct Conn {
    writer: Mutex<Stream>,
    shared: Arc<Shared>,
    reader: Mutex<Option<JoinHandle<()>>>,
    timeout: Duration,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("dead", &self.shared.pending().dead)
            .finish_non_exhaustive()
    }
}

/// A request to send.
pub(super) struct Request<'a> {
    pub command: u16,
    pub flags: u16,
    pub handle: u64,
    pub offset: u64,
    pub len: u32,
    /// The data of a write (its lengths add up to `len`); empty otherwise.
    pub data: &'a [IoSlice<'a>],
}

impl Conn {
    /// Starts the reader thread on a socket in transmission phase.
    /// `timeout` bounds the wait for each reply.
    pub(super) fn start(stream: Stream, timeout: Duration, label: &str) -> io::Result<Conn> {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending::default()),
            socket: stream.try_clone()?,
        });
        let reader_stream = stream.try_clone()?;
        let reader_shared = Arc::clone(&shared);
        let reader = std::thread::Builder::new()
            .name(format!("nbd-reader {label}"))
            .spawn(move || read_replies(reader_stream, &reader_shared))?;
        Ok(Conn {
            writer: Mutex::new(stream),
            shared,
            reader: Mutex::new(Some(reader)),
            timeout,
        })
    }

    /// True once the connection has died.
    pub(super) fn is_dead(&self) -> bool {
        self.shared.pending().dead.is_some()
    }

    /// Declares the connection dead (e.g. after `NBD_ESHUTDOWN`).
    pub(super) fn kill(&self, why: String) {
        self.shared.kill(why);
    }

    /// Sends `req` and waits for its reply.
    pub(super) fn call(&self, req: &Request<'_>) -> Result<Reply, Dropped> {
        let (tx, rx) = mpsc::channel();
        let read_len = if req.command == wire::CMD_READ {
            req.len as usize
        } else {
            0
        };
        {
            let mut p = self.shared.pending();
            if let Some(why) = &p.dead {
                return Err(Dropped(why.clone()));
            }
            p.waiting.insert(req.handle, Waiting { read_len, tx });
        }
        if let Err(e) = self.send(req) {
            self.shared.kill(format!("sending a request: {e}"));
        }
        match rx.recv_timeout(self.timeout) {
            Ok(answer) => answer,
            Err(RecvTimeoutError::Timeout) => {
                let why = format!("no reply within {:?}", self.timeout);
                self.shared.kill(why.clone());
                Err(Dropped(why))
            }
            Err(RecvTimeoutError::Disconnected) => Err(Dropped("the reader stopped".into())),
        }
    }

    fn send(&self, req: &Request<'_>) -> io::Result<()> {
        let header = wire::encode_request(req.flags, req.command, req.handle, req.offset, req.len);
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(1 + req.data.len());
        slices.push(IoSlice::new(&header));
        slices.extend(req.data.iter().filter(|s| !s.is_empty()).copied());
        let mut w = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        write_all_vectored(&mut w, &mut slices)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Dead before the socket closes, so that the reader does not
        // report the server's hang-up as a lost connection.
        let was_alive = {
            let mut p = self.shared.pending();
            let alive = p.dead.is_none();
            if alive {
                p.dead = Some("closed by the client".into());
            }
            alive
        };
        if was_alive {
            // Soft disconnect: the server finishes what it has, then
            // closes. Best effort: we are going away either way.
            let disc = wire::encode_request(0, wire::CMD_DISC, 0, 0, 0);
            let mut w = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = w.write_all(&disc);
        }
        self.shared.socket.shutdown();
        let reader = self
            .reader
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = reader {
            // The reader only ends; a panic in it has been reported.
            let _ = handle.join();
        }
    }
}

/// `write_all` for a vectored buffer.
fn write_all_vectored(w: &mut Stream, mut slices: &mut [IoSlice<'_>]) -> io::Result<()> {
    while !slices.is_empty() {
        match w.write_vectored(slices) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "wrote nothing")),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The reader thread: replies to waiting callers until the socket ends.
fn read_replies(mut stream: Stream, shared: &Shared) {
    let why = loop {
        let mut header = [0u8; wire::SIMPLE_REPLY_LEN];
        if let Err(e) = stream.read_exact(&mut header) {
            break match e.kind() {
                io::ErrorKind::UnexpectedEof => "the server closed the connection".to_string(),
                _ => format!("reading a reply: {e}"),
            };
        }
        let reply = match wire::decode_simple_reply(&header) {
            Ok(r) => r,
            Err(e) => break format!("NBD protocol error: {e}"),
        };
        let Some(waiting) = shared.pending().waiting.remove(&reply.handle) else {
            break format!(
                "NBD protocol error: reply for handle {} that no request is waiting for",
                reply.handle
            );
        };
        let answer = if reply.error != 0 {
            Reply::Error(reply.error)
        } else {
            // The length is that of our own request, never the server's.
            let mut data = vec![0u8; waiting.read_len];
            if let Err(e) = stream.read_exact(&mut data) {
                let why = format!("reading {} bytes of read data: {e}", waiting.read_len);
                let _ = waiting.tx.send(Err(Dropped(why.clone())));
                break why;
            }
            Reply::Ok(data)
        };
        // The caller may have timed out and gone.
        let _ = waiting.tx.send(Ok(answer));
    };
    shared.kill(why);
}
