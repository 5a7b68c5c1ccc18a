//! The blocking client used by fsctl and cleanerd.
//!
//! One request at a time: [`Client::call`] writes a request frame and reads
//! frames until its reply. Request ids start at 1 and increase by one per
//! call. A reply whose id, code or kind does not match the request is
//! [`ClientError::BadReply`]; after that, or after an I/O error (a timeout
//! included), the stream may be out of step, so the client refuses further
//! calls: reconnect.

use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::errno::{errno_desc, errno_name};
use crate::frame::{read_frame, write_frame, Frame, FrameError, Kind, MAX_PAYLOAD};
use crate::msg::{Message, Request};
use crate::sock::NoSigPipe;

/// Read and write timeout of a new client.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The connection failed, timed out or was closed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The daemon answered with an error status.
    #[error("the daemon answered {name} ({})", errno_desc(*.code))]
    Errno {
        /// The errno.
        code: i32,
        /// Its symbolic name ("EPERM").
        name: &'static str,
    },
    /// The reply did not make sense.
    #[error("bad reply from the daemon: {0}")]
    BadReply(String),
}

impl ClientError {
    /// The errno of an error reply, if that is what this is.
    pub fn errno(&self) -> Option<i32> {
        match self {
            ClientError::Errno { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// A connection to a daemon's control socket.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    path: Option<PathBuf>,
    next_id: u64,
    /// Why the stream can no longer be trusted to be in step.
    broken: Option<String>,
}

impl Client {
    /// Connects to the socket at `path`, with [`DEFAULT_TIMEOUT`]. The
    /// error names the path.
    pub fn connect(path: impl AsRef<Path>) -> io::Result<Client> {
        let path = path.as_ref();
        let stream = UnixStream::connect(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("connecting to control socket {}: {e}", path.display()),
            )
        })?;
        let mut c = Client::from_stream(stream)?;
        c.path = Some(path.to_path_buf());
        Ok(c)
    }

    /// A client over an already connected stream, with [`DEFAULT_TIMEOUT`].
    pub fn from_stream(stream: UnixStream) -> io::Result<Client> {
        let mut c = Client {
            stream,
            path: None,
            next_id: 1,
            broken: None,
        };
        c.set_timeout(Some(DEFAULT_TIMEOUT))?;
        Ok(c)
    }

    /// Sets the read and write timeouts (`None`: wait forever).
    pub fn set_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.stream.set_read_timeout(timeout)?;
        self.stream.set_write_timeout(timeout)
    }

    /// The socket path, if connected with [`Client::connect`].
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Sends `req` and waits for its reply.
    pub fn call<R: Request>(&mut self, req: &R) -> Result<R::Reply, ClientError> {
        let payload = self.call_raw(R::CODE, &req.encode())?;
        R::Reply::decode(&payload).map_err(|e| {
            ClientError::BadReply(format!(
                "{} reply: {e}",
                crate::codes::name(R::CODE).unwrap_or("?")
            ))
        })
    }

    /// Sends a request with any code and payload; returns the reply's
    /// payload. For codes this crate has no type for (and tests).
    pub fn call_raw(&mut self, code: u32, payload: &[u8]) -> Result<Vec<u8>, ClientError> {
        if let Some(why) = &self.broken {
            return Err(ClientError::Io(io::Error::new(
                io::ErrorKind::NotConnected,
                format!("connection unusable after an earlier error ({why}); reconnect"),
            )));
        }
        if payload.len() > MAX_PAYLOAD {
            // Refused before anything is sent: the stream stays in step.
            return Err(ClientError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "request payload of {} bytes exceeds the frame limit of {MAX_PAYLOAD}",
                    payload.len()
                ),
            )));
        }
        let result = self.exchange(code, payload);
        if let Err(e @ (ClientError::Io(_) | ClientError::BadReply(_))) = &result {
            self.broken = Some(e.to_string());
        }
        result
    }

    fn exchange(&mut self, code: u32, payload: &[u8]) -> Result<Vec<u8>, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let req = Frame::request(code, id, payload.to_vec());
        write_frame(&mut NoSigPipe(&self.stream), &req).map_err(|e| match e {
            FrameError::Io(e) => ClientError::Io(e),
            other => ClientError::Io(io::Error::new(io::ErrorKind::InvalidInput, other)),
        })?;
        let reply = read_frame(&mut &self.stream).map_err(|e| match e {
            FrameError::Io(e) => ClientError::Io(e),
            FrameError::Eof => ClientError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection without replying",
            )),
            other => ClientError::BadReply(other.to_string()),
        })?;
        if reply.kind != Kind::Reply {
            return Err(ClientError::BadReply(format!(
                "a request frame (id {}) instead of a reply",
                reply.id
            )));
        }
        if reply.id != id || reply.code != code {
            return Err(ClientError::BadReply(format!(
                "reply to request {} (code {:#010x}) while waiting for {id} (code {code:#010x})",
                reply.id, reply.code
            )));
        }
        match reply.status {
            0 => Ok(reply.payload),
            errno if errno > 0 => Err(ClientError::Errno {
                code: errno,
                name: errno_name(errno),
            }),
            bad => Err(ClientError::BadReply(format!("negative status {bad}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes;
    use crate::msg::{Cpstat, GetCpstat};
    use std::thread;

    /// A fake daemon on one end of a socket pair that answers each request
    /// with `answer`.
    fn fake(answer: impl Fn(Frame) -> Vec<u8> + Send + 'static) -> Client {
        let (a, b) = UnixStream::pair().unwrap();
        thread::spawn(move || {
            while let Ok(f) = read_frame(&mut &b) {
                if std::io::Write::write_all(&mut &b, &answer(f)).is_err() {
                    break;
                }
            }
        });
        Client::from_stream(a).unwrap()
    }

    #[test]
    fn ids_increase_and_replies_decode() {
        let mut c = fake(|f| {
            let p = Cpstat {
                last_cno: f.id,
                ..Cpstat::default()
            };
            Frame::reply(f.code, f.id, p.encode()).encode().unwrap()
        });
        assert_eq!(c.call(&GetCpstat).unwrap().last_cno, 1);
        assert_eq!(c.call(&GetCpstat).unwrap().last_cno, 2);
        assert_eq!(c.call(&GetCpstat).unwrap().last_cno, 3);
    }

    #[test]
    fn error_status_is_errno_with_its_name() {
        let mut c = fake(|f| {
            Frame::error(f.code, f.id, nix::libc::EPERM)
                .encode()
                .unwrap()
        });
        let e = c.call(&GetCpstat).unwrap_err();
        assert!(
            matches!(e, ClientError::Errno { code, name: "EPERM" } if code == nix::libc::EPERM)
        );
        assert_eq!(e.errno(), Some(nix::libc::EPERM));
        assert!(
            e.to_string().contains("EPERM (Operation not permitted)"),
            "{e}"
        );
        // An error reply leaves the connection usable.
        assert!(matches!(c.call(&GetCpstat), Err(ClientError::Errno { .. })));
    }

    #[test]
    fn mismatched_id_is_bad_reply_and_breaks_the_client() {
        let mut c = fake(|f| {
            Frame::reply(f.code, f.id + 1, vec![0; 24])
                .encode()
                .unwrap()
        });
        assert!(matches!(c.call(&GetCpstat), Err(ClientError::BadReply(_))));
        assert!(matches!(
            c.call(&GetCpstat),
            Err(ClientError::Io(e)) if e.kind() == io::ErrorKind::NotConnected
        ));
    }

    #[test]
    fn mismatched_kind_code_or_payload_is_bad_reply() {
        let mut c = fake(|f| Frame::request(f.code, f.id, vec![]).encode().unwrap());
        assert!(matches!(c.call(&GetCpstat), Err(ClientError::BadReply(_))));
        let mut c = fake(|f| {
            Frame::reply(f.code ^ 1, f.id, vec![0; 24])
                .encode()
                .unwrap()
        });
        assert!(matches!(c.call(&GetCpstat), Err(ClientError::BadReply(_))));
        let mut c = fake(|f| Frame::reply(f.code, f.id, vec![0; 23]).encode().unwrap());
        assert!(
            matches!(c.call(&GetCpstat), Err(ClientError::BadReply(m)) if m.contains("GET_CPSTAT"))
        );
        let mut c = fake(|_| b"garbage that is not a frame at all".to_vec());
        assert!(matches!(c.call(&GetCpstat), Err(ClientError::BadReply(_))));
    }

    #[test]
    fn an_oversized_request_is_refused_before_sending() {
        let mut c = fake(|f| Frame::reply(f.code, f.id, vec![0; 24]).encode().unwrap());
        let huge = crate::msg::GetVinfo {
            vblocks: vec![0; MAX_PAYLOAD / 8],
        };
        assert!(matches!(
            c.call(&huge),
            Err(ClientError::Io(e)) if e.kind() == io::ErrorKind::InvalidInput
        ));
        // Nothing was sent: the next call works, with the next id.
        assert_eq!(c.call(&GetCpstat).unwrap(), Cpstat::default());
    }

    #[test]
    fn a_closed_connection_is_io() {
        let (a, b) = UnixStream::pair().unwrap();
        drop(b);
        let mut c = Client::from_stream(a).unwrap();
        assert!(matches!(
            c.call_raw(codes::GET_DF, &[]),
            Err(ClientError::Io(_))
        ));
    }

    #[test]
    fn a_silent_daemon_times_out() {
        let (a, _b) = UnixStream::pair().unwrap();
        let mut c = Client::from_stream(a).unwrap();
        c.set_timeout(Some(Duration::from_millis(50))).unwrap();
        assert!(matches!(
            c.call(&GetCpstat),
            Err(ClientError::Io(e))
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
        ));
    }

    #[test]
    fn connect_errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no-such.sock");
        let e = Client::connect(&path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains(&*path.to_string_lossy()), "{e}");
    }
}
