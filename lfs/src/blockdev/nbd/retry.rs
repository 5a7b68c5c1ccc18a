//! Requests that survive dropped connections: finding the live
//! connection (reconnecting with back-off and replaying the journal when
//! there is none) and retrying a request until it gets an answer or the
//! reconnect timeout has passed. The rules are in the module doc of
//! `nbd/mod.rs`.

use std::io::{self, IoSlice};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use super::conn::{Conn, Dropped, Reply, Request};
use super::{handshake, wire, NbdDevice, Op, CONNECT_TIMEOUT, FIRST_BACKOFF, MAX_BACKOFF, WRITE};

impl NbdDevice {
    /// The live connection, reconnecting (with back-off, for up to the
    /// reconnect timeout) if there is none.
    pub(super) fn connection(&self) -> io::Result<Arc<Conn>> {
        let mut link = self.link.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(conn) = link.as_ref().filter(|c| !c.is_dead()) {
            return Ok(Arc::clone(conn));
        }
        *link = None;
        let deadline = Instant::now() + self.opts.reconnect_timeout;
        let mut delay = FIRST_BACKOFF;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            match self.reconnect_once() {
                Ok(conn) => {
                    *link = Some(Arc::clone(&conn));
                    return Ok(conn);
                }
                Err(e) if Instant::now() + delay < deadline => {
                    if attempts == 1 {
                        log::warn!("{}: reconnecting: {e}", self.addr);
                    } else {
                        log::debug!("{}: reconnect attempt {attempts}: {e}", self.addr);
                    }
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(MAX_BACKOFF);
                }
                Err(e) => {
                    return Err(io::Error::other(format!(
                        "{}: the connection was lost and could not be restored in {:?} \
                         ({attempts} attempts; last: {e})",
                        self.addr, self.opts.reconnect_timeout
                    )))
                }
            }
        }
    }

    /// One attempt: connect, check the export is the same, replay every
    /// unflushed write.
    fn reconnect_once(&self) -> io::Result<Arc<Conn>> {
        let (stream, info) = handshake::open(&self.addr, CONNECT_TIMEOUT)?;
        if info.size != self.len {
            return Err(io::Error::other(format!(
                "the export's size changed from {} to {} bytes",
                self.len, info.size
            )));
        }
        if info.flags & wire::FLAG_READ_ONLY != 0 && !self.opts.read_only {
            return Err(io::Error::other("the export became read-only"));
        }
        let conn = Arc::new(Conn::start(
            stream,
            self.opts.request_timeout,
            &self.addr.original,
        )?);
        let entries = self.journal().replay("reconnected");
        let mut bytes = 0u64;
        for e in &entries {
            let Some(data) = &e.data else { continue };
            bytes += data.len() as u64;
            self.replay_write(&conn, e.offset, data)
                .map_err(|failed| io::Error::other(format!("replaying writes: {failed}")))?;
        }
        let n = self.reconnects.fetch_add(1, Ordering::Relaxed) + 1;
        log::warn!(
            "{}: reconnected (reconnect {n}); replayed {} unflushed writes ({bytes} bytes)",
            self.addr,
            entries.len()
        );
        Ok(conn)
    }

    /// Writes `data` at `offset` on `conn` (a replay), without retrying.
    fn replay_write(&self, conn: &Conn, offset: u64, data: &[u8]) -> Result<(), String> {
        let data = [IoSlice::new(data)];
        self.pieces(offset, data[0].len() as u64, &data, |o, n, part| match self
            .call(conn, WRITE, o, n, part)
        {
            Ok(Reply::Ok(_)) => Ok(Vec::new()),
            Ok(Reply::Error(code)) => Err(wire::nbd_error_name(code).to_string()),
            Err(Dropped(why)) => Err(why),
        })
        .map(drop)
    }

    /// Calls `f(offset, len, part of data)` for each piece of at most
    /// `max_request` bytes of `[offset, offset + len)`, in order (`data`
    /// is empty for requests without a payload), and concatenates what
    /// the calls return.
    fn pieces<E>(
        &self,
        offset: u64,
        len: u64,
        data: &[IoSlice<'_>],
        mut f: impl FnMut(u64, u64, &[IoSlice<'_>]) -> Result<Vec<u8>, E>,
    ) -> Result<Vec<u8>, E> {
        let mut done = 0u64;
        let mut out = Vec::new();
        while done < len {
            let n = (len - done).min(u64::from(self.max_request));
            let part = if data.is_empty() {
                Vec::new()
            } else {
                sub_slices(data, done, n)
            };
            out.extend(f(offset + done, n, &part)?);
            done += n;
        }
        Ok(out)
    }

    fn call(
        &self,
        conn: &Conn,
        op: Op,
        offset: u64,
        len: u64,
        data: &[IoSlice<'_>],
    ) -> Result<Reply, Dropped> {
        let len = u32::try_from(len).map_err(|_| Dropped("request too large".into()))?;
        conn.call(&Request {
            command: op.command,
            flags: op.flags,
            handle: self.next_handle.fetch_add(1, Ordering::Relaxed),
            offset,
            len,
            data,
        })
    }

    /// One request, retried on new connections until it gets an answer
    /// or the reconnect timeout has passed since it was first dropped.
    pub(super) fn transact(
        &self,
        op: Op,
        offset: u64,
        len: u64,
        data: &[IoSlice<'_>],
    ) -> io::Result<Vec<u8>> {
        let mut first_drop: Option<Instant> = None;
        loop {
            let conn = self.connection().map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("{} of {len} bytes at offset {offset}: {e}", op.name),
                )
            })?;
            let why = match self.call(&conn, op, offset, len, data) {
                Ok(Reply::Ok(d)) => return Ok(d),
                Ok(Reply::Error(wire::ESHUTDOWN)) => {
                    // The spec asks for a disconnect; then try again.
                    let why = "the server is shutting down (ESHUTDOWN)".to_string();
                    conn.kill(why.clone());
                    why
                }
                Ok(Reply::Error(code)) => {
                    let kind = io::Error::from_raw_os_error(code as i32).kind();
                    return Err(io::Error::new(
                        kind,
                        format!(
                            "{}: the server failed the {} of {len} bytes at offset {offset}: {}",
                            self.addr,
                            op.name,
                            wire::nbd_error_name(code)
                        ),
                    ));
                }
                Err(Dropped(why)) => why,
            };
            let since = *first_drop.get_or_insert_with(Instant::now);
            if since.elapsed() > self.opts.reconnect_timeout {
                return Err(io::Error::other(format!(
                    "{}: {} of {len} bytes at offset {offset} failed: the connection kept \
                     dropping for {:?} (last: {why})",
                    self.addr, op.name, self.opts.reconnect_timeout
                )));
            }
            log::debug!(
                "{}: {} at offset {offset} interrupted ({why}); retrying",
                self.addr,
                op.name
            );
        }
    }

    /// `transact` in requests of at most `max_request` bytes.
    pub(super) fn transact_chunks(
        &self,
        op: Op,
        offset: u64,
        len: u64,
        data: &[IoSlice<'_>],
    ) -> io::Result<Vec<u8>> {
        self.pieces(offset, len, data, |o, n, part| {
            self.transact(op, o, n, part)
        })
    }
}

/// The part `[start, start + len)` of the concatenation of `bufs`.
fn sub_slices<'a>(bufs: &'a [IoSlice<'a>], start: u64, len: u64) -> Vec<IoSlice<'a>> {
    let mut out = Vec::new();
    let mut skip = start;
    let mut want = len;
    for b in bufs {
        if want == 0 {
            break;
        }
        let blen = b.len() as u64;
        if skip >= blen {
            skip -= blen;
            continue;
        }
        let take = (blen - skip).min(want);
        // In range: skip < blen and take <= blen - skip.
        if let Some(part) = b.get(skip as usize..(skip + take) as usize) {
            out.push(IoSlice::new(part));
        }
        want -= take;
        skip = 0;
    }
    out
}
