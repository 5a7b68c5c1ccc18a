//! A simulated fsd for tests (cleanerd's and fsctl's): segment usage in
//! memory, served with the real protocol over a real Unix socket, with
//! the semantics of the cleaning requests cleanerd relies on and errors
//! that tests can inject. Every request is recorded.
//!
//! What it models: CLEAN_SEGMENTS first applies the checkpoint expiry a
//! test queued ([`FakeState::expiry`]: live blocks that die once old
//! checkpoints go), then refuses the whole request with EAGAIN if a named
//! segment is clean, active, pending or marked busy, EINVAL if out of
//! range, and otherwise makes each named segment clean. It does not model
//! where the moved blocks go (no segment fills up with them).

use std::collections::BTreeSet;
use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use lfs_proto::msg::*;
use lfs_proto::server::{dispatch, serve_connection, Handler, Peer, Service};

use crate::acceptor::Acceptor;

const ENOTTY: i32 = nix::libc::ENOTTY;
const EAGAIN: i32 = nix::libc::EAGAIN;
const EINVAL: i32 = nix::libc::EINVAL;

/// A request the fake received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// GET_SUSTAT.
    Sustat,
    /// GET_SUINFO from `start`.
    Suinfo(u64),
    /// CLEAN_SEGMENTS.
    Clean {
        /// The protection period.
        protection_s: u32,
        /// The segments.
        segments: Vec<u64>,
        /// The `CLEAN_*` flags (the policy's placement).
        flags: u32,
    },
    /// SET_SUINFO.
    SetSuinfo(Vec<SuUpdate>),
}

/// The simulated filesystem.
#[derive(Debug, Clone, Default)]
pub struct FakeState {
    /// Blocks per segment.
    pub blocks_per_segment: u32,
    /// Block size.
    pub block_size: u32,
    /// The segments, numbered by index.
    pub segments: Vec<Suinfo>,
    /// Every request, in order.
    pub calls: Vec<Call>,
    /// Errnos to answer the next CLEAN_SEGMENTS requests with, in order.
    pub clean_errors: Vec<i32>,
    /// Answer every request with this errno while set.
    pub fail_all: Option<i32>,
    /// Answer SET_SUINFO with this errno while set.
    pub set_suinfo_error: Option<i32>,
    /// Segments CLEAN_SEGMENTS answers EAGAIN for.
    pub busy: BTreeSet<u64>,
    /// (segment, blocks) that die at the next CLEAN_SEGMENTS (old
    /// checkpoints deleted).
    pub expiry: Vec<(u64, u32)>,
    /// Checkpoints the next CLEAN_SEGMENTS deletes.
    pub expiring_checkpoints: u64,
    /// What GET_SUSTAT reports as changes waiting for space.
    pub space_waiters: u64,
}

impl FakeState {
    /// `nsegs` clean segments of `blocks_per_segment` 4 KiB blocks.
    pub fn new(nsegs: u64, blocks_per_segment: u32) -> FakeState {
        FakeState {
            blocks_per_segment,
            block_size: 4096,
            segments: (0..nsegs)
                .map(|segnum| Suinfo {
                    segnum,
                    ..Suinfo::default()
                })
                .collect(),
            ..FakeState::default()
        }
    }

    /// Makes segment `segnum` dirty with `nlive` of its full blocks live,
    /// last written at `last_mod`.
    pub fn dirty(&mut self, segnum: u64, last_mod: u64, nlive: u32) {
        let bps = self.blocks_per_segment;
        if let Some(s) = self.segments.get_mut(segnum as usize) {
            *s = Suinfo {
                segnum,
                last_mod,
                nblocks: bps,
                nlive,
                flags: SUINFO_DIRTY,
            };
        }
    }

    /// Clean segments.
    pub fn nclean(&self) -> u64 {
        self.segments.iter().filter(|s| s.flags == 0).count() as u64
    }

    /// GET_SUSTAT requests so far: the checks the cleaner made.
    pub fn checks(&self) -> usize {
        self.calls.iter().filter(|c| **c == Call::Sustat).count()
    }

    /// The CLEAN_SEGMENTS requests that named segments.
    pub fn cleanings(&self) -> Vec<Vec<u64>> {
        self.calls
            .iter()
            .filter_map(|c| match c {
                Call::Clean { segments, .. } if !segments.is_empty() => Some(segments.clone()),
                _ => None,
            })
            .collect()
    }

    fn clean(&mut self, r: CleanSegments) -> Result<CleanReply, i32> {
        let mut reply = CleanReply::default();
        for (segnum, n) in std::mem::take(&mut self.expiry) {
            if let Some(s) = self.segments.get_mut(segnum as usize) {
                let n = n.min(s.nlive);
                s.nlive -= n;
                reply.blocks_freed += u64::from(n);
            }
        }
        reply.checkpoints_deleted = std::mem::take(&mut self.expiring_checkpoints);
        if !self.clean_errors.is_empty() && !r.segments.is_empty() {
            return Err(self.clean_errors.remove(0));
        }
        for &segnum in &r.segments {
            let s = self.segments.get(segnum as usize).ok_or(EINVAL)?;
            let cleanable = s.flags & SUINFO_DIRTY != 0
                && s.flags & (SUINFO_ACTIVE | SUINFO_PENDING | SUINFO_ERROR) == 0;
            if !cleanable || self.busy.contains(&segnum) {
                return Err(EAGAIN);
            }
        }
        for &segnum in &r.segments {
            if let Some(s) = self.segments.get_mut(segnum as usize) {
                reply.blocks_moved += u64::from(s.nlive);
                reply.bytes_written += u64::from(s.nlive) * u64::from(self.block_size);
                reply.segments_freed += 1;
                *s = Suinfo {
                    segnum,
                    ..Suinfo::default()
                };
            }
        }
        Ok(reply)
    }
}

/// Polls `cond` every few milliseconds until it holds; panics naming
/// `what` after `patience` (for tests that wait for the cleaner).
pub fn wait_until(what: &str, patience: std::time::Duration, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < patience, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The service around a shared [`FakeState`].
#[derive(Debug, Clone)]
pub struct FakeFs(pub Arc<Mutex<FakeState>>);

impl FakeFs {
    /// A service over `state`.
    pub fn new(state: FakeState) -> FakeFs {
        FakeFs(Arc::new(Mutex::new(state)))
    }

    /// The state, locked.
    pub fn state(&self) -> MutexGuard<'_, FakeState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn with<T>(
        &self,
        call: Call,
        f: impl FnOnce(&mut FakeState) -> Result<T, i32>,
    ) -> Result<T, i32> {
        let mut s = self.state();
        s.calls.push(call);
        if let Some(e) = s.fail_all {
            return Err(e);
        }
        f(&mut s)
    }
}

impl Service for FakeFs {
    fn get_sustat(&self, _: &Peer, _: GetSustat) -> Result<Sustat, i32> {
        self.with(Call::Sustat, |s| {
            let count = |bit: u32| s.segments.iter().filter(|u| u.flags & bit != 0).count() as u64;
            Ok(Sustat {
                nsegs: s.segments.len() as u64,
                nclean: s.nclean(),
                ndirty: count(SUINFO_DIRTY),
                npending: count(SUINFO_PENDING),
                nreserved: 0,
                blocks_per_segment: s.blocks_per_segment,
                block_size: s.block_size,
                last_cno: 1,
                ctime_ns: 0,
                nongc_ctime_ns: 0,
                prot_seq: 0,
                space_waiters: s.space_waiters,
            })
        })
    }
    fn get_suinfo(&self, _: &Peer, r: GetSuinfo) -> Result<SuinfoList, i32> {
        self.with(Call::Suinfo(r.start), |s| {
            Ok(SuinfoList {
                items: s
                    .segments
                    .iter()
                    .skip(r.start as usize)
                    .take(r.count as usize)
                    .copied()
                    .collect(),
            })
        })
    }
    fn get_cpstat(&self, _: &Peer, _: GetCpstat) -> Result<Cpstat, i32> {
        Err(ENOTTY)
    }
    fn get_cpinfo(&self, _: &Peer, _: GetCpinfo) -> Result<CpinfoList, i32> {
        Err(ENOTTY)
    }
    fn sync(&self, _: &Peer, _: Sync) -> Result<SyncReply, i32> {
        Err(ENOTTY)
    }
    fn get_vinfo(&self, _: &Peer, _: GetVinfo) -> Result<VinfoList, i32> {
        Err(ENOTTY)
    }
    fn get_seg_summary(&self, _: &Peer, _: GetSegSummary) -> Result<SegSummary, i32> {
        Err(ENOTTY)
    }
    fn get_stats(&self, _: &Peer, _: GetStats) -> Result<Stats, i32> {
        Err(ENOTTY)
    }
    fn get_df(&self, _: &Peer, _: GetDf) -> Result<Df, i32> {
        Err(ENOTTY)
    }
    fn change_cpmode(&self, _: &Peer, _: ChangeCpmode) -> Result<Done, i32> {
        Err(ENOTTY)
    }
    fn delete_checkpoint(&self, _: &Peer, _: DeleteCheckpoint) -> Result<Done, i32> {
        Err(ENOTTY)
    }
    fn clean_segments(&self, _: &Peer, r: CleanSegments) -> Result<CleanReply, i32> {
        let call = Call::Clean {
            protection_s: r.protection_s,
            segments: r.segments.clone(),
            flags: r.flags,
        };
        self.with(call, |s| s.clean(r))
    }
    // A cleaner never mounts or compares checkpoints: the fake answers
    // as a daemon that does not serve them.
    fn mount_checkpoint(&self, _: &Peer, _: MountCheckpoint) -> Result<Done, i32> {
        Err(nix::libc::ENOTTY)
    }
    fn umount_checkpoint(&self, _: &Peer, _: UmountCheckpoint) -> Result<Done, i32> {
        Err(nix::libc::ENOTTY)
    }
    fn get_diff(&self, _: &Peer, _: GetDiff) -> Result<DiffList, i32> {
        Err(nix::libc::ENOTTY)
    }
    fn get_super(&self, _: &Peer, _: GetSuper) -> Result<Super, i32> {
        Err(ENOTTY)
    }
    fn freeze(&self, _: &Peer, _: Freeze) -> Result<Done, i32> {
        Err(nix::libc::ENOTTY)
    }
    fn thaw(&self, _: &Peer, _: Thaw) -> Result<Done, i32> {
        Err(nix::libc::ENOTTY)
    }

    fn set_suinfo(&self, _: &Peer, r: SetSuinfo) -> Result<Done, i32> {
        self.with(Call::SetSuinfo(r.items.clone()), |s| {
            if let Some(e) = s.set_suinfo_error {
                return Err(e);
            }
            for u in &r.items {
                let seg = s.segments.get_mut(u.segnum as usize).ok_or(EINVAL)?;
                seg.last_mod = u.last_mod;
            }
            Ok(Done)
        })
    }
}

impl Handler for FakeFs {
    fn handle(&self, code: u32, payload: &[u8], peer: &Peer) -> Result<Vec<u8>, i32> {
        dispatch(self, code, payload, peer)
    }
}

/// The fake served on a socket, a thread per connection, until stopped.
#[derive(Debug)]
pub struct FakeServer {
    acceptor: Option<Acceptor>,
    conns: Arc<Mutex<Vec<UnixStream>>>,
}

impl FakeServer {
    /// Serves `fs` on a new socket at `path`.
    pub fn start(path: &Path, fs: FakeFs) -> io::Result<FakeServer> {
        let listener = UnixListener::bind(path)?;
        let conns: Arc<Mutex<Vec<UnixStream>>> = Arc::default();
        let kept = Arc::clone(&conns);
        let acceptor = Acceptor::spawn(listener, path, "fake-fsd", move |stream| {
            if let Ok(copy) = stream.try_clone() {
                kept.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(copy);
            }
            let fs = fs.clone();
            std::thread::spawn(move || serve_connection(stream, &fs));
        })?;
        Ok(FakeServer {
            acceptor: Some(acceptor),
            conns,
        })
    }

    /// Stops serving as a dying fsd would: closes every connection and
    /// removes the socket.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(a) = self.acceptor.take() {
            a.stop();
        }
        for c in self
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}
