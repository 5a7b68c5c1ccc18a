//! Connecting to an NBD server and the newstyle handshake, up to the
//! transmission phase.
//!
//! Fixed newstyle with `NBD_OPT_GO` (asking for `NBD_INFO_BLOCK_SIZE`, so
//! the server may state its limits); a server that answers GO with
//! `NBD_REP_ERR_UNSUP`, or that is not fixed newstyle, gets
//! `NBD_OPT_EXPORT_NAME` instead. Every length the server sends is
//! bounded before anything is allocated for it, and the whole handshake
//! runs under a read timeout, so a silent server cannot hang an open.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::name::{Endpoint, NbdAddress};
use super::wire::{self, ExportInfo, WireError};

/// Longest option reply payload accepted: an error message may be up to
/// [`wire::MAX_STRING`] bytes; info payloads are far smaller.
const MAX_OPTION_REPLY: u32 = 2 * wire::MAX_STRING as u32;
/// Most option replies accepted for one `NBD_OPT_GO` (info replies the
/// client does not know are skipped, but not forever).
const MAX_OPTION_REPLIES: usize = 64;

/// A connected socket of either kind.
#[derive(Debug)]
pub(super) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    /// Connects to `endpoint`, each attempt bounded by `timeout`.
    pub(super) fn connect(endpoint: &Endpoint, timeout: Duration) -> io::Result<Stream> {
        match endpoint {
            Endpoint::Unix(path) => UnixStream::connect(path).map(Stream::Unix),
            Endpoint::Tcp { host, port } => {
                let mut last = None;
                for addr in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&addr, timeout) {
                        Ok(s) => {
                            // Requests are small and latency-bound: never
                            // wait to coalesce them.
                            s.set_nodelay(true)?;
                            return Ok(Stream::Tcp(s));
                        }
                        Err(e) => last = Some(e),
                    }
                }
                Err(last.unwrap_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"))
                }))
            }
        }
    }

    /// A second handle on the same socket (for the reply reader).
    pub(super) fn try_clone(&self) -> io::Result<Stream> {
        match self {
            Stream::Tcp(s) => s.try_clone().map(Stream::Tcp),
            Stream::Unix(s) => s.try_clone().map(Stream::Unix),
        }
    }

    /// Shuts both directions down; a blocked reader wakes with EOF.
    pub(super) fn shutdown(&self) {
        // An already closed socket is what we want anyway.
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }

    pub(super) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write_vectored(bufs),
            Stream::Unix(s) => s.write_vectored(bufs),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn protocol(addr: &NbdAddress, e: WireError) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{addr}: NBD protocol error during the handshake: {e}"),
    )
}

/// `read_exact` with an error that says the server hung up.
fn read_exact(s: &mut Stream, buf: &mut [u8], addr: &NbdAddress, what: &str) -> io::Result<()> {
    s.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => io::Error::new(
            e.kind(),
            format!("{addr}: the server closed the connection while sending {what} ({e})"),
        ),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{addr}: the server did not send {what} in time"),
        ),
        _ => io::Error::new(e.kind(), format!("{addr}: reading {what}: {e}")),
    })
}

fn send(s: &mut Stream, bytes: &[u8], addr: &NbdAddress) -> io::Result<()> {
    s.write_all(bytes)
        .map_err(|e| io::Error::new(e.kind(), format!("{addr}: sending to the server: {e}")))
}

/// Connects to `addr` and negotiates its export; returns the socket, in
/// transmission phase, and what the server said of the export.
pub(super) fn open(addr: &NbdAddress, timeout: Duration) -> io::Result<(Stream, ExportInfo)> {
    let mut s = Stream::connect(&addr.endpoint, timeout)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot connect to {addr}: {e}")))?;
    s.set_read_timeout(Some(timeout))?;
    let info = negotiate(&mut s, addr)?;
    s.set_read_timeout(None)?;
    Ok((s, info))
}

fn negotiate(s: &mut Stream, addr: &NbdAddress) -> io::Result<ExportInfo> {
    let mut greeting = [0u8; wire::GREETING_LEN];
    read_exact(s, &mut greeting, addr, "its greeting")?;
    let flags = wire::decode_greeting(&greeting)
        .map_err(|e| protocol(addr, e))?
        .flags;
    let fixed = flags & wire::FLAG_FIXED_NEWSTYLE != 0;
    let no_zeroes = flags & wire::FLAG_NO_ZEROES != 0;
    let mut client = 0u32;
    if fixed {
        client |= wire::FLAG_C_FIXED_NEWSTYLE;
    }
    if no_zeroes {
        client |= wire::FLAG_C_NO_ZEROES;
    }
    send(s, &client.to_be_bytes(), addr)?;
    if fixed {
        if let Some(info) = go(s, addr)? {
            return Ok(info);
        }
    }
    export_name(s, addr, no_zeroes)
}

/// `NBD_OPT_GO`; `None` if the server does not know it.
fn go(s: &mut Stream, addr: &NbdAddress) -> io::Result<Option<ExportInfo>> {
    let data = wire::go_data(addr.export.as_bytes(), &[wire::INFO_BLOCK_SIZE])
        .map_err(|e| protocol(addr, e))?;
    let option = wire::encode_option(wire::OPT_GO, &data).map_err(|e| protocol(addr, e))?;
    send(s, &option, addr)?;
    let mut info = ExportInfo::default();
    let mut have_export = false;
    for _ in 0..MAX_OPTION_REPLIES {
        let mut header = [0u8; wire::OPTION_REPLY_LEN];
        read_exact(s, &mut header, addr, "an option reply")?;
        let reply =
            wire::decode_option_reply(&header, wire::OPT_GO).map_err(|e| protocol(addr, e))?;
        if reply.len > MAX_OPTION_REPLY {
            return Err(protocol(
                addr,
                WireError(format!("option reply of {} bytes", reply.len)),
            ));
        }
        let mut payload = vec![0u8; reply.len as usize];
        read_exact(s, &mut payload, addr, "an option reply's data")?;
        match reply.kind {
            wire::REP_INFO => {
                have_export |=
                    wire::apply_info(&payload, &mut info).map_err(|e| protocol(addr, e))?
            }
            wire::REP_ACK if have_export => return Ok(Some(info)),
            wire::REP_ACK => {
                return Err(protocol(
                    addr,
                    WireError("NBD_OPT_GO succeeded without NBD_INFO_EXPORT".into()),
                ))
            }
            wire::REP_ERR_UNSUP => return Ok(None),
            kind if kind & wire::REP_FLAG_ERROR != 0 => {
                // Soft disconnect, best effort: the error is what matters.
                if let Ok(abort) = wire::encode_option(wire::OPT_ABORT, &[]) {
                    let _ = s.write_all(&abort);
                }
                return Err(refused(addr, kind, &payload));
            }
            kind => {
                return Err(protocol(
                    addr,
                    WireError(format!("unexpected reply type {kind} to NBD_OPT_GO")),
                ))
            }
        }
    }
    Err(protocol(
        addr,
        WireError(format!(
            "more than {MAX_OPTION_REPLIES} replies to NBD_OPT_GO"
        )),
    ))
}

/// The error for an export the server refused, with its message.
fn refused(addr: &NbdAddress, kind: u32, message: &[u8]) -> io::Error {
    let text = String::from_utf8_lossy(message);
    let said = if text.trim().is_empty() {
        String::new()
    } else {
        format!(": {}", text.trim())
    };
    let errkind = match kind {
        wire::REP_ERR_UNKNOWN => io::ErrorKind::NotFound,
        wire::REP_ERR_POLICY | wire::REP_ERR_TLS_REQD => io::ErrorKind::PermissionDenied,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(
        errkind,
        format!(
            "{addr}: the server refused export {:?}: {}{said}",
            addr.export,
            wire::rep_error_name(kind)
        ),
    )
}

/// `NBD_OPT_EXPORT_NAME`: the server answers with the export or hangs up.
fn export_name(s: &mut Stream, addr: &NbdAddress, no_zeroes: bool) -> io::Result<ExportInfo> {
    let option = wire::encode_option(wire::OPT_EXPORT_NAME, addr.export.as_bytes())
        .map_err(|e| protocol(addr, e))?;
    send(s, &option, addr)?;
    let mut reply = [0u8; wire::EXPORT_NAME_REPLY_LEN];
    s.read_exact(&mut reply).map_err(|e| {
        io::Error::new(
            if e.kind() == io::ErrorKind::UnexpectedEof {
                io::ErrorKind::NotFound
            } else {
                e.kind()
            },
            format!(
                "{addr}: the server refused export {:?} (it closed the connection after \
                 NBD_OPT_EXPORT_NAME: {e})",
                addr.export
            ),
        )
    })?;
    let (size, flags) = wire::decode_export_name_reply(&reply).map_err(|e| protocol(addr, e))?;
    if !no_zeroes {
        let mut zeroes = [0u8; wire::EXPORT_NAME_ZEROES];
        read_exact(s, &mut zeroes, addr, "the export reply's padding")?;
    }
    Ok(ExportInfo {
        size,
        flags,
        min_block: None,
        max_block: None,
    })
}
