//! The replay journal: every write since the last successful flush, so
//! that a dropped connection cannot lose one silently.
//!
//! An NBD server may acknowledge a write before it is durable (it has a
//! write cache; only `NBD_CMD_FLUSH` or FUA makes data durable). If the
//! connection drops, or the server restarts, between that acknowledgement
//! and the next flush, the write may be gone although `write_at` returned
//! `Ok`. So the device keeps a copy of each write here until a flush that
//! started after the write completed succeeds, and replays every kept
//! write on a new connection before anything else is sent on it.
//!
//! Invariants:
//! * Entries are in the order their writes began (`seq` increases), so a
//!   replay applies overlapping writes in the order the engine issued them.
//! * An entry is removed only by a successful flush that started after its
//!   write had completed (`completed` was already set): that flush covers
//!   it.
//! * An entry without data (its copy would have passed the byte limit)
//!   cannot be replayed; a reconnect while one exists makes the loss
//!   permanent (`lost`), and every later flush fails with EIO, since each
//!   would claim durability for that write.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::sync::Arc;

/// A write the journal knows of.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    /// Order of the write's start.
    pub seq: u64,
    /// Device offset.
    pub offset: u64,
    /// Its data, or `None` if it was not kept (over the limit).
    pub data: Option<Arc<[u8]>>,
    /// `write_at` has returned (either way).
    pub completed: bool,
}

/// The writes since the last flush.
#[derive(Debug)]
pub(super) struct Journal {
    entries: VecDeque<Entry>,
    /// Bytes of data held.
    bytes: u64,
    /// Most bytes of data held; writes beyond are noted without data.
    limit: u64,
    next_seq: u64,
    /// Set once a write was lost for good; never cleared.
    lost: Option<String>,
}

/// What a flush covers: the writes that had completed when it began.
#[derive(Debug)]
pub(super) struct FlushTicket(Vec<u64>);

impl Journal {
    /// An empty journal holding at most `limit` bytes of write data.
    pub(super) fn new(limit: u64) -> Journal {
        Journal {
            entries: VecDeque::new(),
            bytes: 0,
            limit,
            next_seq: 0,
            lost: None,
        }
    }

    /// True if a copy of `len` more bytes fits under the limit.
    pub(super) fn has_room(&self, len: u64) -> bool {
        self.bytes.saturating_add(len) <= self.limit
    }

    /// Records a write that is about to be sent; `keep` says whether to
    /// copy its data (the caller checked [`Journal::has_room`]). Returns
    /// its sequence number.
    pub(super) fn record(&mut self, offset: u64, bufs: &[IoSlice<'_>], keep: bool) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let data = keep.then(|| {
            let copy: Arc<[u8]> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            self.bytes += copy.len() as u64;
            copy
        });
        self.entries.push_back(Entry {
            seq,
            offset,
            data,
            completed: false,
        });
        seq
    }

    /// Marks the write `seq` as returned to its caller.
    pub(super) fn complete(&mut self, seq: u64) {
        if let Ok(i) = self.entries.binary_search_by_key(&seq, |e| e.seq) {
            if let Some(e) = self.entries.get_mut(i) {
                e.completed = true;
            }
        }
    }

    /// The writes a flush starting now covers.
    pub(super) fn start_flush(&self) -> FlushTicket {
        FlushTicket(
            self.entries
                .iter()
                .filter(|e| e.completed)
                .map(|e| e.seq)
                .collect(),
        )
    }

    /// A flush with `ticket` succeeded: its writes are durable.
    pub(super) fn flushed(&mut self, ticket: &FlushTicket) {
        let covered = &ticket.0;
        let mut freed = 0u64;
        self.entries.retain(|e| {
            let drop = covered.binary_search(&e.seq).is_ok();
            if drop {
                freed += e.data.as_ref().map_or(0, |d| d.len() as u64);
            }
            !drop
        });
        self.bytes -= freed;
    }

    /// A new connection is up: the writes to send on it first. If one of
    /// them cannot be replayed, the loss is recorded for good.
    pub(super) fn replay(&mut self, why: &str) -> Vec<Entry> {
        if self.lost.is_none() {
            if let Some(e) = self.entries.iter().find(|e| e.data.is_none()) {
                self.lost = Some(format!(
                    "a write at offset {} since the last flush was not kept for replay \
                     (over the replay limit of {} bytes) and the connection dropped ({why})",
                    e.offset, self.limit
                ));
            }
        }
        self.entries
            .iter()
            .filter(|e| e.data.is_some())
            .cloned()
            .collect()
    }

    /// Why writes were lost, if they were.
    pub(super) fn lost(&self) -> Option<&str> {
        self.lost.as_deref()
    }

    /// Bytes of write data held.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(j: &mut Journal, offset: u64, data: &[u8]) -> u64 {
        let keep = j.has_room(data.len() as u64);
        j.record(offset, &[IoSlice::new(data)], keep)
    }

    #[test]
    fn flush_drops_only_writes_completed_before_it() {
        let mut j = Journal::new(1 << 20);
        let a = write(&mut j, 0, b"aaaa");
        let b = write(&mut j, 4, b"bb");
        j.complete(a);
        let ticket = j.start_flush();
        j.complete(b); // completed during the flush: not covered
        j.flushed(&ticket);
        let left = j.replay("test");
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].seq, b);
        assert_eq!(j.bytes(), 2);
        assert!(j.lost().is_none());
        let ticket = j.start_flush();
        j.flushed(&ticket);
        assert_eq!(j.bytes(), 0);
        assert!(j.replay("test").is_empty());
    }

    #[test]
    fn replay_keeps_issue_order_and_data() {
        let mut j = Journal::new(1 << 20);
        write(&mut j, 10, b"first");
        j.record(10, &[IoSlice::new(b"sec"), IoSlice::new(b"ond")], true);
        let r = j.replay("test");
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].data.as_deref().unwrap(), b"first");
        assert_eq!(r[1].data.as_deref().unwrap(), b"second");
        assert!(r[0].seq < r[1].seq);
    }

    #[test]
    fn unkept_write_and_reconnect_is_a_permanent_loss() {
        let mut j = Journal::new(4);
        let a = write(&mut j, 0, b"1234");
        let b = write(&mut j, 4, b"5");
        assert!(j.entries.iter().any(|e| e.seq == b && e.data.is_none()));
        j.complete(a);
        j.complete(b);
        // A flush before any reconnect covers it: nothing lost.
        let ticket = j.start_flush();
        j.flushed(&ticket);
        assert!(j.replay("drop").is_empty());
        assert!(j.lost().is_none());
        let c = write(&mut j, 8, b"toolong");
        j.complete(c);
        assert!(j.replay("server restarted").is_empty());
        let lost = j.lost().unwrap();
        assert!(
            lost.contains("offset 8") && lost.contains("server restarted"),
            "{lost}"
        );
        let ticket = j.start_flush();
        j.flushed(&ticket);
        assert!(j.lost().is_some(), "a loss is never forgotten");
    }
}
