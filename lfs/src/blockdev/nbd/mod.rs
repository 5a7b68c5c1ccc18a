//! A device served over the network by an NBD server (qemu-nbd, nbdkit,
//! nbd-server, Ceph's rbd-nbd ...), spoken to directly from user space.
//!
//! Job: the [`BlockDevice`] calls as NBD requests, on one connection with
//! many requests in flight, surviving a dropped connection or a restarted
//! server without ever losing a write silently.
//!
//! * Names: `nbd://HOST[:PORT]/EXPORT`, `nbd+unix:///EXPORT?socket=PATH`
//!   (`name.rs`). Handshake (`handshake.rs`): fixed newstyle,
//!   `NBD_OPT_GO`, falling back to `NBD_OPT_EXPORT_NAME`. Simple replies
//!   only (structured replies are optional and not negotiated).
//! * Requests (`conn.rs`): a sender under a mutex, a reader thread that
//!   hands each reply to its caller by handle. Reads, writes and trims are
//!   split at the server's maximum block size, at most [`MAX_REQUEST`].
//!   Flush is `NBD_CMD_FLUSH`; a server that offers no flush is taken to
//!   write through (as the kernel's NBD client does). Discard is
//!   `NBD_CMD_TRIM` if offered, else nothing (it is a hint).
//! * Opening refuses, with the export and the server's message named: an
//!   export the server refuses, a read-only export opened read-write, and
//!   an export smaller than [`MIN_EXPORT_SIZE`].
//!
//! Dropped connections and durability (also in docs/ARCHITECTURE.md):
//! * Reads, writes, trims and flushes in flight when the connection drops
//!   are sent again on a new one. Reconnecting retries with exponential
//!   back-off ([`FIRST_BACKOFF`] doubling to [`MAX_BACKOFF`]) for
//!   [`NbdOptions::reconnect_timeout`]; an operation that cannot be
//!   completed by then fails (the engine maps it to EIO and goes
//!   read-only). A new connection must show the same export size, and
//!   writable if opened read-write.
//! * A server may acknowledge a write before it is durable, so a write
//!   acknowledged on a connection that later dropped may be lost even
//!   though `write_at` returned `Ok`. Hence the rule: **every write since
//!   the last successful flush is re-sent on a new connection before
//!   anything else** (`journal.rs` keeps a copy of each, up to
//!   [`NbdOptions::replay_limit`] bytes). A flush therefore covers writes
//!   made before a reconnect as well as after. A write that does not fit
//!   the journal is sent with `NBD_CMD_FLAG_FUA` where the server offers
//!   FUA (durable when acknowledged, nothing to replay); without FUA it is
//!   noted without its data, and if the connection drops before a flush
//!   covers it, that loss is permanent: this flush and every later one
//!   fail with EIO. A flush never returns `Ok` for a write that may have
//!   been lost.
//! * Replay assumes the old connection's requests are finished or
//!   abandoned by the server when the new connection is accepted (true of
//!   a server that restarted; qemu-nbd admits one client at a time).
//!
//! No lock is taken on the export (NBD has none); the server decides who
//! may connect.
//!
//! Locks: `link` (the current connection; held while reconnecting, so
//! that nothing is sent on a new connection before the replay) is taken
//! before `journal`, never after. Neither is held while waiting for a
//! reply, except by the thread that reconnects and replays.

// Every byte the server sends is untrusted: no indexing, unwrap or panic
// outside tests.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic
    )
)]

mod conn;
mod handshake;
mod journal;
mod name;
mod retry;
mod wire;

use std::fmt;
use std::io::{self, IoSlice};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use self::conn::Conn;
use self::journal::Journal;
pub use self::name::{looks_like_nbd, Endpoint, NbdAddress, DEFAULT_PORT};
use super::{check_range, total_len, BlockDevice};
use crate::format;

/// Largest read, write or trim sent in one request (the spec's default
/// maximum payload); a server's smaller maximum wins.
pub const MAX_REQUEST: u32 = 32 << 20;
/// Default of [`NbdOptions::reconnect_timeout`].
pub const DEFAULT_RECONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default of [`NbdOptions::request_timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Default of [`NbdOptions::replay_limit`]: well above what one
/// checkpoint writes with the default dirty limit.
pub const DEFAULT_REPLAY_LIMIT: u64 = 256 << 20;
/// Bound on connecting and on the whole handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// First pause between reconnection attempts.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(50);
/// Longest pause between reconnection attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// The smallest export accepted: the smallest filesystem mkfs can make
/// (minimum segments × minimum segment × minimum block).
pub const MIN_EXPORT_SIZE: u64 =
    format::MIN_SEGMENTS * format::MIN_BLOCKS_PER_SEGMENT as u64 * format::MIN_BLOCK_SIZE as u64;

/// How to open an [`NbdDevice`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NbdOptions {
    /// Open read-only: writes and discards fail; a read-only export is
    /// accepted.
    pub read_only: bool,
    /// How long an operation keeps trying to reconnect after the
    /// connection dropped before it fails.
    pub reconnect_timeout: Duration,
    /// How long one request may wait for its reply before the connection
    /// is declared dead (and the request retried on a new one).
    pub request_timeout: Duration,
    /// Most bytes of unflushed writes kept for replay after a reconnect.
    pub replay_limit: u64,
}

impl Default for NbdOptions {
    /// Read-write, with the default timeouts and replay limit.
    fn default() -> Self {
        NbdOptions {
            read_only: false,
            reconnect_timeout: DEFAULT_RECONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            replay_limit: DEFAULT_REPLAY_LIMIT,
        }
    }
}

/// A [`BlockDevice`] on an NBD export.
pub struct NbdDevice {
    addr: NbdAddress,
    opts: NbdOptions,
    len: u64,
    flags: u16,
    max_request: u32,
    min_block: u32,
    next_handle: AtomicU64,
    reconnects: AtomicU64,
    /// The current connection, `None` after it died and before a new one.
    link: Mutex<Option<Arc<Conn>>>,
    journal: Mutex<Journal>,
}

impl fmt::Debug for NbdDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NbdDevice")
            .field("addr", &self.addr.original)
            .field("len", &self.len)
            .field("flags", &format_args!("{:#x}", self.flags))
            .field("max_request", &self.max_request)
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

/// An operation, for messages.
#[derive(Debug, Clone, Copy)]
struct Op {
    name: &'static str,
    command: u16,
    flags: u16,
}

const READ: Op = Op {
    name: "read",
    command: wire::CMD_READ,
    flags: 0,
};
const WRITE: Op = Op {
    name: "write",
    command: wire::CMD_WRITE,
    flags: 0,
};
const FLUSH: Op = Op {
    name: "flush",
    command: wire::CMD_FLUSH,
    flags: 0,
};
const TRIM: Op = Op {
    name: "trim",
    command: wire::CMD_TRIM,
    flags: 0,
};

impl NbdDevice {
    /// Parses `name` and opens it.
    pub fn open_name(name: &str, opts: NbdOptions) -> io::Result<NbdDevice> {
        NbdDevice::open(&NbdAddress::parse(name)?, opts)
    }

    /// Connects to the export `addr` names and checks it can be used.
    pub fn open(addr: &NbdAddress, opts: NbdOptions) -> io::Result<NbdDevice> {
        let (stream, mut info) = handshake::open(addr, CONNECT_TIMEOUT)?;
        let export = format!("export {:?} of {addr}", addr.export);
        if info.flags & wire::FLAG_HAS_FLAGS == 0 {
            log::warn!("{export}: the server did not set NBD_FLAG_HAS_FLAGS; using no feature");
            info.flags = 0;
        }
        if info.flags & wire::FLAG_READ_ONLY != 0 && !opts.read_only {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{export} is read-only (the server says so); open it read-only, \
                     or serve it writable"
                ),
            ));
        }
        if info.size < MIN_EXPORT_SIZE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{export} is {} bytes, smaller than the smallest lfs filesystem \
                     ({MIN_EXPORT_SIZE} bytes)",
                    info.size
                ),
            ));
        }
        let min_block = info.min_block.unwrap_or(1);
        let max = info.max_block.unwrap_or(MAX_REQUEST).min(MAX_REQUEST);
        // Requests must be multiples of the minimum; the spec promises the
        // maximum is one, but do not trust it.
        let max_request = (max / min_block).max(1) * min_block;
        let conn = Conn::start(stream, opts.request_timeout, &addr.original)?;
        log::info!(
            "{export}: {} bytes, flags {:#x} (flush {}, fua {}, trim {}), requests up to {} bytes",
            info.size,
            info.flags,
            info.flags & wire::FLAG_SEND_FLUSH != 0,
            info.flags & wire::FLAG_SEND_FUA != 0,
            info.flags & wire::FLAG_SEND_TRIM != 0,
            max_request
        );
        Ok(NbdDevice {
            addr: addr.clone(),
            journal: Mutex::new(Journal::new(opts.replay_limit)),
            opts,
            len: info.size,
            flags: info.flags,
            max_request,
            min_block,
            next_handle: AtomicU64::new(1),
            reconnects: AtomicU64::new(0),
            link: Mutex::new(Some(Arc::new(conn))),
        })
    }

    /// The name it was opened with.
    pub fn address(&self) -> &NbdAddress {
        &self.addr
    }

    /// How many times the connection was re-established.
    pub fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Relaxed)
    }

    /// The server offers `NBD_CMD_FLUSH`.
    pub fn supports_flush(&self) -> bool {
        self.flags & wire::FLAG_SEND_FLUSH != 0
    }

    /// The server offers `NBD_CMD_FLAG_FUA`.
    pub fn supports_fua(&self) -> bool {
        self.flags & wire::FLAG_SEND_FUA != 0
    }

    /// The server offers `NBD_CMD_TRIM`.
    pub fn supports_trim(&self) -> bool {
        self.flags & wire::FLAG_SEND_TRIM != 0
    }

    /// Largest request sent.
    pub fn max_request(&self) -> u32 {
        self.max_request
    }

    /// Bytes of unflushed writes held for replay.
    pub fn unflushed_bytes(&self) -> u64 {
        self.journal().bytes()
    }

    fn journal(&self) -> MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn check_writable(&self, op: &str) -> io::Result<()> {
        if self.opts.read_only {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("cannot {op} {}: opened read-only", self.addr),
            ));
        }
        Ok(())
    }

    fn check_aligned(&self, op: &str, offset: u64, len: u64) -> io::Result<()> {
        let m = u64::from(self.min_block);
        if offset % m != 0 || len % m != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{op} {}: the server needs offsets and lengths in multiples of {m} bytes, \
                     got {len} bytes at offset {offset}",
                    self.addr
                ),
            ));
        }
        Ok(())
    }
}

impl BlockDevice for NbdDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let op = format!("read {}", self.addr);
        check_range(&op, self.len, offset, buf.len() as u64)?;
        if buf.is_empty() {
            return Ok(());
        }
        self.check_aligned("read", offset, buf.len() as u64)?;
        let mut pos = offset;
        for chunk in buf.chunks_mut(self.max_request as usize) {
            let data = self.transact(READ, pos, chunk.len() as u64, &[])?;
            if data.len() != chunk.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{op}: {} bytes of reply for {}", data.len(), chunk.len()),
                ));
            }
            chunk.copy_from_slice(&data);
            pos += chunk.len() as u64;
        }
        Ok(())
    }

    fn write_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<()> {
        self.check_writable("write")?;
        let total = total_len(bufs)?;
        check_range(&format!("write {}", self.addr), self.len, offset, total)?;
        if total == 0 {
            return Ok(());
        }
        self.check_aligned("write", offset, total)?;
        // Kept for replay until a flush covers it; if it does not fit,
        // written through with FUA (nothing to replay), or noted as
        // unreplayable.
        let (seq, op) = {
            let mut j = self.journal();
            let keep = j.has_room(total);
            if !keep && self.supports_fua() {
                (
                    None,
                    Op {
                        flags: wire::CMD_FLAG_FUA,
                        ..WRITE
                    },
                )
            } else {
                (Some(j.record(offset, bufs, keep)), WRITE)
            }
        };
        let result = self.transact_chunks(op, offset, total, bufs).map(drop);
        if let Some(seq) = seq {
            self.journal().complete(seq);
        }
        result
    }

    fn flush(&self) -> io::Result<()> {
        if self.opts.read_only {
            return Ok(());
        }
        let ticket = self.journal().start_flush();
        let lost = |why: &str| {
            io::Error::other(format!(
                "flush {}: writes may have been lost: {why}",
                self.addr
            ))
        };
        if let Some(why) = self.journal().lost() {
            return Err(lost(why));
        }
        if self.supports_flush() {
            self.transact(FLUSH, 0, 0, &[])?;
        }
        let mut j = self.journal();
        if let Some(why) = j.lost() {
            return Err(lost(why));
        }
        j.flushed(&ticket);
        Ok(())
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_writable("discard")?;
        check_range(&format!("discard {}", self.addr), self.len, offset, len)?;
        if !self.supports_trim() {
            return Ok(());
        }
        // A hint: trim the aligned part inside the range.
        let m = u64::from(self.min_block);
        let start = offset.div_ceil(m) * m;
        let end = (offset + len) / m * m;
        if end <= start {
            return Ok(());
        }
        self.transact_chunks(TRIM, start, end - start, &[])
            .map(drop)
    }

    fn len(&self) -> u64 {
        self.len
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
