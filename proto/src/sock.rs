//! Writing to a Unix stream without SIGPIPE.

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

use nix::sys::socket::{send, MsgFlags};

/// Writes with `send(MSG_NOSIGNAL)`: a peer that has gone away is an
/// `EPIPE` error, never a SIGPIPE that kills a process which did not
/// ignore it (Rust binaries do; a library cannot count on it). The
/// stream's write timeout applies (`WouldBlock`).
#[derive(Debug)]
pub(crate) struct NoSigPipe<'a>(pub(crate) &'a UnixStream);

impl Write for NoSigPipe<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        send(self.0.as_raw_fd(), buf, MsgFlags::MSG_NOSIGNAL).map_err(io::Error::from)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
