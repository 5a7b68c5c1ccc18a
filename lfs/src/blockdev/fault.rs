//! The crash and fault simulator every crash test runs the engine on.
//!
//! A [`FaultDevice`] wraps an inner device that stands for the *durable*
//! medium. Writes do not reach it when `write_at` returns: they are kept,
//! in order, as pending (unflushed) writes, and reads see the inner
//! contents with the pending writes laid over them in order
//! (read-your-writes). `flush` applies the pending writes to the inner
//! device in order and then flushes it. `discard` is recorded as a pending
//! write of zeros, the strongest effect the contract allows.
//!
//! A crash (at the n-th `write_at`, or explicitly) decides, by the
//! [`CrashMode`], which pending writes reach the inner device and how
//! torn they are, then makes every later operation fail with an I/O error
//! "device crashed (simulated)". The inner device is then the crash image,
//! which a test remounts. The modes cover what the block layer contract
//! permits after a crash: any subset of unflushed writes, in any order,
//! each torn at [`SECTOR_SIZE`] granularity. Tearing splits a write at the
//! device's sector boundaries, so an unaligned write tears inside its
//! first and last sectors exactly where a real disk would not.
//!
//! Injected errors (`fail_*`) make one call, or every call touching a byte
//! range, fail with an I/O error and no effect at all.
//!
//! Invariants: the state mutex is held for the whole of every operation,
//! including the calls into the inner device, so operations are atomic
//! with respect to each other and a crash never interleaves with a write.
//! Call counters count every call that passed argument validation while
//! the device was alive, including calls failed by injection.

use std::fmt;
use std::io::{self, IoSlice};
use std::ops::Range;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::{check_range, total_len, BlockDevice, SECTOR_SIZE};

/// What reaches the durable medium of the unflushed writes at a crash.
/// "Writes" here are the pending entries in call order: `write_at` and
/// `discard` calls since the last successful flush, the crashing write
/// included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CrashMode {
    /// No unflushed write survives.
    #[default]
    DropAll,
    /// Every unflushed write lands, in order.
    KeepAll,
    /// The first `k` unflushed writes land, in order; the rest are lost.
    KeepPrefix(usize),
    /// Each unflushed write is independently kept or dropped; a kept write
    /// may be torn (only a random subset of its sectors lands), and the
    /// kept writes land in a random order. Deterministic for a seed.
    Random {
        /// Seed of the generator that makes every choice.
        seed: u64,
    },
    /// Every unflushed write but the last lands in order; the last lands
    /// only its first `sectors` sectors.
    TearLast {
        /// How many leading sectors of the last write land.
        sectors: usize,
    },
}

/// One unflushed write (or discard, as zeros).
#[derive(Clone, PartialEq, Eq)]
pub struct PendingWrite {
    /// 1-based position among all writes and discards the device took.
    pub seq: u64,
    /// Device offset of the first byte.
    pub offset: u64,
    /// The bytes written.
    pub data: Vec<u8>,
}

impl fmt::Debug for PendingWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingWrite")
            .field("seq", &self.seq)
            .field("offset", &self.offset)
            .field("len", &self.data.len())
            .finish()
    }
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    Crashed,
    Injected,
}

/// The payload of every error the simulator makes up, so tests can tell
/// them from real ones with [`is_simulated_fault`].
#[derive(Debug)]
struct SimulatedFault(Fault);

impl fmt::Display for SimulatedFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Fault::Crashed => f.write_str("device crashed (simulated)"),
            Fault::Injected => f.write_str("injected I/O error (simulated EIO)"),
        }
    }
}

impl std::error::Error for SimulatedFault {}

fn fault_error(fault: Fault) -> io::Error {
    io::Error::other(SimulatedFault(fault))
}

/// True if `err` was made up by a [`FaultDevice`] (crash or injected
/// EIO), false for a real error such as a bounds violation.
pub fn is_simulated_fault(err: &io::Error) -> bool {
    err.get_ref().is_some_and(|e| e.is::<SimulatedFault>())
}

#[derive(Debug, Default)]
struct State {
    pending: Vec<PendingWrite>,
    seq: u64,
    writes: u64,
    reads: u64,
    flushes: u64,
    discards: u64,
    crashed: bool,
    mode: CrashMode,
    crash_at_write: Option<u64>,
    fail_read_at: Option<u64>,
    fail_write_at: Option<u64>,
    fail_flush_at: Option<u64>,
    fail_reads_in: Vec<Range<u64>>,
    fail_writes_in: Vec<Range<u64>>,
}

impl State {
    fn check_alive(&self) -> io::Result<()> {
        if self.crashed {
            return Err(fault_error(Fault::Crashed));
        }
        Ok(())
    }

    fn record(&mut self, offset: u64, data: Vec<u8>) {
        self.seq += 1;
        self.pending.push(PendingWrite {
            seq: self.seq,
            offset,
            data,
        });
    }
}

/// Clears a one-shot trigger and returns true if it was set to `n`.
fn fire(trigger: &mut Option<u64>, n: u64) -> bool {
    if *trigger == Some(n) {
        *trigger = None;
        return true;
    }
    false
}

/// True if `[offset, offset + len)` shares a byte with any range (an
/// empty access shares none).
fn overlaps_any(ranges: &[Range<u64>], offset: u64, len: u64) -> bool {
    let end = offset.saturating_add(len);
    len > 0 && ranges.iter().any(|r| offset < r.end && r.start < end)
}

/// A device over a durable medium `D` that keeps writes pending until
/// `flush`, lets a [`CrashMode`] decide which unflushed writes survive a
/// simulated crash (dropped, reordered, torn at [`SECTOR_SIZE`]), and fails
/// chosen calls with injected EIO. Reads see pending writes; discards are
/// pending writes of zeros. After a crash every call fails and
/// [`durable`](Self::durable) is the crash image.
///
/// All configuration takes `&self`, so a test can share an
/// `Arc<FaultDevice<_>>` with the engine and trigger faults meanwhile.
/// Triggers that name "the n-th call" count from the device's creation,
/// as [`writes`](Self::writes), [`reads`](Self::reads) and
/// [`flushes`](Self::flushes) do: `dev.fail_write_at(dev.writes() + 1)`
/// fails the next write.
pub struct FaultDevice<D: BlockDevice> {
    inner: D,
    state: Mutex<State>,
}

impl<D: BlockDevice> fmt::Debug for FaultDevice<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.lock();
        f.debug_struct("FaultDevice")
            .field("inner", &self.inner)
            .field("crashed", &st.crashed)
            .field("mode", &st.mode)
            .field("pending", &st.pending.len())
            .field("writes", &st.writes)
            .field("reads", &st.reads)
            .field("flushes", &st.flushes)
            .finish_non_exhaustive()
    }
}

impl<D: BlockDevice> FaultDevice<D> {
    /// Wraps `inner`, the durable medium. No faults are armed and the
    /// crash mode is [`CrashMode::DropAll`].
    pub fn new(inner: D) -> FaultDevice<D> {
        FaultDevice {
            inner,
            state: Mutex::new(State::default()),
        }
    }

    // Every operation leaves the state consistent before it can panic
    // (the inner device is the only thing that could), so a poisoned lock
    // is still usable.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The durable medium: after a crash, the crash image. Unflushed
    /// writes are not in it.
    pub fn durable(&self) -> &D {
        &self.inner
    }

    /// Returns the durable medium; unflushed writes are discarded, as
    /// if lost in a crash with [`CrashMode::DropAll`].
    pub fn into_inner(self) -> D {
        self.inner
    }

    /// Sets what survives the next crash.
    pub fn set_crash_mode(&self, mode: CrashMode) {
        self.lock().mode = mode;
    }

    /// The current crash mode.
    pub fn crash_mode(&self) -> CrashMode {
        self.lock().mode
    }

    /// Crashes during the `n`-th `write_at` call (1-based, counted from
    /// creation). That write is recorded as pending first, so the crash
    /// mode decides whether (and how torn) it lands; the call returns the
    /// crash error. (If an injected error fails that same write, it is not
    /// recorded, and the crash still happens.) The trigger is one-shot.
    pub fn crash_at_write(&self, n: u64) {
        self.lock().crash_at_write = Some(n);
    }

    /// Crashes now: applies the crash mode to the pending writes and makes
    /// every later call fail. An error means the inner device failed to
    /// take the crash image. Crashing a crashed device does nothing.
    pub fn crash_now(&self) -> io::Result<()> {
        let mut st = self.lock();
        if st.crashed {
            return Ok(());
        }
        self.crash(&mut st)
    }

    /// True once the device has crashed.
    pub fn is_crashed(&self) -> bool {
        self.lock().crashed
    }

    /// Number of `write_at` calls so far.
    pub fn writes(&self) -> u64 {
        self.lock().writes
    }

    /// Number of `read_at` calls so far.
    pub fn reads(&self) -> u64 {
        self.lock().reads
    }

    /// Number of `flush` calls so far.
    pub fn flushes(&self) -> u64 {
        self.lock().flushes
    }

    /// Number of `discard` calls so far.
    pub fn discards(&self) -> u64 {
        self.lock().discards
    }

    /// Number of unflushed writes (discards included).
    pub fn pending_writes(&self) -> usize {
        self.lock().pending.len()
    }

    /// A copy of the unflushed writes, oldest first.
    pub fn pending(&self) -> Vec<PendingWrite> {
        self.lock().pending.clone()
    }

    /// Flips the bits of `mask` in the byte at `offset` of the durable
    /// medium: corruption at rest (bit rot, a misdirected write), which
    /// only checksums can notice. An unflushed write over that byte still
    /// reads as written.
    pub fn flip_bits(&self, offset: u64, mask: u8) -> io::Result<()> {
        let _st = self.lock();
        let mut b = [0u8; 1];
        self.inner.read_at(&mut b, offset)?;
        b[0] ^= mask;
        self.inner.write_at(&[IoSlice::new(&b)], offset)
    }

    /// The `n`-th `read_at` call fails with EIO and reads nothing. One-shot.
    pub fn fail_read_at(&self, n: u64) {
        self.lock().fail_read_at = Some(n);
    }

    /// The `n`-th `write_at` call fails with EIO and writes nothing.
    /// One-shot.
    pub fn fail_write_at(&self, n: u64) {
        self.lock().fail_write_at = Some(n);
    }

    /// The `n`-th `flush` call fails with EIO and makes nothing durable.
    /// One-shot.
    pub fn fail_flush_at(&self, n: u64) {
        self.lock().fail_flush_at = Some(n);
    }

    /// Every read overlapping `range` (bytes) fails with EIO, until
    /// [`clear_faults`](Self::clear_faults).
    pub fn fail_reads_in(&self, range: Range<u64>) {
        self.lock().fail_reads_in.push(range);
    }

    /// Every write or discard overlapping `range` (bytes) fails with EIO
    /// and has no effect, until [`clear_faults`](Self::clear_faults).
    pub fn fail_writes_in(&self, range: Range<u64>) {
        self.lock().fail_writes_in.push(range);
    }

    /// Disarms every injected error (one-shot and ranges). A scheduled
    /// crash stays scheduled.
    pub fn clear_faults(&self) {
        let mut st = self.lock();
        st.fail_read_at = None;
        st.fail_write_at = None;
        st.fail_flush_at = None;
        st.fail_reads_in.clear();
        st.fail_writes_in.clear();
    }

    /// Marks the device crashed and writes what the crash mode lets
    /// survive to the inner device.
    fn crash(&self, st: &mut State) -> io::Result<()> {
        st.crashed = true;
        st.crash_at_write = None;
        let pending = std::mem::take(&mut st.pending);
        for (index, bytes) in crash_plan(st.mode, &pending) {
            let w = &pending[index];
            self.inner
                .write_all_at(&w.data[bytes.clone()], w.offset + bytes.start as u64)?;
        }
        self.inner.flush()
    }
}

/// The byte ranges, relative to a write of `len` bytes at `offset`, that
/// each cover one device sector (partial at the ends if unaligned).
fn sector_pieces(offset: u64, len: usize) -> Vec<Range<usize>> {
    let mut pieces = Vec::with_capacity(len / SECTOR_SIZE + 2);
    let mut start = 0;
    while start < len {
        let into_sector = ((offset + start as u64) % SECTOR_SIZE as u64) as usize;
        let end = (start + SECTOR_SIZE - into_sector).min(len);
        pieces.push(start..end);
        start = end;
    }
    pieces
}

/// What lands at a crash, in application order: (index into `pending`,
/// byte range within that write). Pure, so it can be tested directly.
fn crash_plan(mode: CrashMode, pending: &[PendingWrite]) -> Vec<(usize, Range<usize>)> {
    let whole = |i: usize| (i, 0..pending[i].data.len());
    match mode {
        CrashMode::DropAll => Vec::new(),
        CrashMode::KeepAll => (0..pending.len()).map(whole).collect(),
        CrashMode::KeepPrefix(k) => (0..pending.len().min(k)).map(whole).collect(),
        CrashMode::TearLast { sectors } => {
            let Some(last) = pending.len().checked_sub(1) else {
                return Vec::new();
            };
            let mut plan: Vec<_> = (0..last).map(whole).collect();
            let w = &pending[last];
            let pieces = sector_pieces(w.offset, w.data.len());
            let keep = sectors.min(pieces.len());
            if keep > 0 {
                plan.push((last, 0..pieces[keep - 1].end));
            }
            plan
        }
        CrashMode::Random { seed } => {
            let mut rng = SplitMix64(seed);
            // Per write: Vec of pieces that land.
            let mut kept: Vec<Vec<(usize, Range<usize>)>> = Vec::new();
            for (i, w) in pending.iter().enumerate() {
                if !rng.coin() {
                    continue;
                }
                if rng.coin() {
                    let torn = sector_pieces(w.offset, w.data.len())
                        .into_iter()
                        .filter(|_| rng.coin())
                        .map(|p| (i, p))
                        .collect();
                    kept.push(torn);
                } else {
                    kept.push(vec![whole(i)]);
                }
            }
            // Fisher-Yates: the kept writes land in a random order.
            for i in (1..kept.len()).rev() {
                kept.swap(i, rng.below(i + 1));
            }
            kept.into_iter().flatten().collect()
        }
    }
}

/// splitmix64: tiny, deterministic, good enough to pick crash outcomes.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn coin(&mut self) -> bool {
        self.next() >> 63 == 1
    }

    /// Uniform-enough in `0..n` for n > 0 (modulo bias is irrelevant here).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

impl<D: BlockDevice> BlockDevice for FaultDevice<D> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut st = self.lock();
        st.check_alive()?;
        let len = buf.len() as u64;
        check_range("FaultDevice read", self.inner.len(), offset, len)?;
        st.reads += 1;
        let n = st.reads;
        if fire(&mut st.fail_read_at, n) || overlaps_any(&st.fail_reads_in, offset, len) {
            return Err(fault_error(Fault::Injected));
        }
        self.inner.read_at(buf, offset)?;
        let end = offset + len;
        for w in &st.pending {
            let w_end = w.offset + w.data.len() as u64;
            let (from, to) = (offset.max(w.offset), end.min(w_end));
            if from < to {
                let dst = (from - offset) as usize..(to - offset) as usize;
                let src = (from - w.offset) as usize..(to - w.offset) as usize;
                buf[dst].copy_from_slice(&w.data[src]);
            }
        }
        Ok(())
    }

    fn write_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<()> {
        let mut st = self.lock();
        st.check_alive()?;
        let len = total_len(bufs)?;
        check_range("FaultDevice write", self.inner.len(), offset, len)?;
        st.writes += 1;
        let n = st.writes;
        let injected =
            fire(&mut st.fail_write_at, n) || overlaps_any(&st.fail_writes_in, offset, len);
        if !injected {
            // `len` fits in memory: it is the total of slices we were given.
            let mut data = Vec::with_capacity(len as usize);
            bufs.iter().for_each(|b| data.extend_from_slice(b));
            st.record(offset, data);
        }
        if st.crash_at_write == Some(n) {
            if let Err(e) = self.crash(&mut st) {
                log::error!("FaultDevice: writing the crash image failed: {e}");
            }
            return Err(fault_error(Fault::Crashed));
        }
        if injected {
            return Err(fault_error(Fault::Injected));
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        let mut st = self.lock();
        st.check_alive()?;
        st.flushes += 1;
        let n = st.flushes;
        if fire(&mut st.fail_flush_at, n) {
            return Err(fault_error(Fault::Injected));
        }
        let mut applied = 0;
        let mut result = Ok(());
        for w in &st.pending {
            result = self.inner.write_all_at(&w.data, w.offset);
            if result.is_err() {
                break;
            }
            applied += 1;
        }
        // What reached the inner device is no longer pending, even if a
        // later write failed.
        st.pending.drain(..applied);
        result?;
        self.inner.flush()
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        let mut st = self.lock();
        st.check_alive()?;
        check_range("FaultDevice discard", self.inner.len(), offset, len)?;
        st.discards += 1;
        if overlaps_any(&st.fail_writes_in, offset, len) {
            return Err(fault_error(Fault::Injected));
        }
        let zeros = usize::try_from(len).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("FaultDevice discard of {len} bytes does not fit in memory"),
            )
        })?;
        st.record(offset, vec![0u8; zeros]);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

#[cfg(test)]
#[path = "fault_tests.rs"]
mod tests;
