//! The control socket: lfs-proto requests served from the engine.
//!
//! One thread accepts connections; each connection gets its own thread,
//! so a slow or silent client holds only itself up, and no request takes
//! a lock the FUSE threads need for longer than the engine query it runs.
//! The socket is mode 0660; every connection's peer is identified with
//! SO_PEERCRED, and requests that change anything are taken only from
//! root or the filesystem's owner (the root directory's owner).

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use lfs::format::ROOT_INO;
use lfs::fs::Fs;
use lfs::inspect::{SbCopy, SegmentDump};
use lfs_proto::msg::*;
use lfs_proto::server::{check_permission, dispatch, serve_connection, Handler, Peer, Service};
use log::{debug, info, warn};

/// Bytes of paths in one GET_DIFF reply (well inside the frame limit).
const DIFF_REPLY_BYTES: usize = 768 << 10;
/// Bytes of logs in one GET_SEG_SUMMARY reply (the segment header and
/// `end` fit in what the frame limit leaves).
const SEG_SUMMARY_REPLY_BYTES: usize = lfs_proto::MAX_PAYLOAD - (8 << 10);

/// Mode of the socket file: owner and group may connect.
const SOCKET_MODE: u32 = 0o660;
/// Mode of a socket directory fsd creates (e.g. /run/lfs).
const DIR_MODE: u32 = 0o755;

/// The control requests of one filesystem, shared by the socket's
/// connections and the FUSE adapter's ioctl path.
pub type Requests = Arc<dyn Handler + Send + std::marker::Sync>;

/// A running control server; stopping it removes the socket.
#[derive(Debug)]
pub struct Control {
    path: PathBuf,
    /// The listening socket, to wake the accept loop at stop without
    /// going through the path (which someone may have removed).
    waker: Option<UnixListener>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Why the socket could not be set up.
#[derive(Debug)]
pub enum StartError {
    /// Another live process answers on the path.
    InUse(PathBuf),
    /// Anything else.
    Io(PathBuf, io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::InUse(p) => write!(
                f,
                "control socket {} is served by another running fsd; use --socket",
                p.display()
            ),
            StartError::Io(p, e) => write!(f, "control socket {}: {e}", p.display()),
        }
    }
}

/// A control socket bound before the device is opened: the path is
/// fsd's from then on (a second fsd whose default socket has the same
/// name is refused before it touches its device), and connections wait
/// in the backlog until [`Control::start`] serves them. Dropped unused,
/// it removes the socket file.
#[derive(Debug)]
pub struct Claimed {
    path: PathBuf,
    listener: Option<UnixListener>,
}

impl Claimed {
    /// Binds `path` (mode 0660), creating its directory if need be; a
    /// socket left by an fsd that died is replaced, one that answers is
    /// [`StartError::InUse`].
    pub fn claim(path: &Path) -> Result<Claimed, StartError> {
        let io_err = |e| StartError::Io(path.to_path_buf(), e);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                std::fs::create_dir_all(dir).map_err(io_err)?;
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))
                    .map_err(io_err)?;
            }
        }
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(io_err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "exists and is not a socket",
                )));
            }
            match UnixStream::connect(path) {
                Ok(_) => return Err(StartError::InUse(path.to_path_buf())),
                // Nobody listens: a socket left by an fsd that died.
                Err(_) => std::fs::remove_file(path).map_err(io_err)?,
            }
        }
        let listener = UnixListener::bind(path).map_err(io_err)?;
        let claimed = Claimed {
            path: path.to_path_buf(),
            listener: Some(listener),
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(SOCKET_MODE))
            .map_err(io_err)?;
        Ok(claimed)
    }
}

impl Drop for Claimed {
    fn drop(&mut self) {
        if self.listener.take().is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Control {
    /// Starts serving `handler` on the socket `claimed`.
    pub fn start(handler: Requests, mut claimed: Claimed) -> Result<Control, StartError> {
        let path = claimed.path.clone();
        let listener = claimed
            .listener
            .take()
            .expect("a Claimed socket is served once");
        let waker = listener.try_clone().ok();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("fsd-control".into())
                .spawn(move || accept_loop(&listener, &stop, &handler))
                .map_err(|e| {
                    let _ = std::fs::remove_file(&path);
                    StartError::Io(path.clone(), e)
                })?
        };
        info!("control socket {} ready", path.display());
        Ok(Control {
            path,
            waker,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops accepting; the socket file stays until the returned guard is
    /// dropped, which fsd does once everything is written and the device
    /// is closed: the file's disappearance tells a script (and a test)
    /// that the device is free again.
    pub fn stop(mut self) -> SocketFile {
        self.close();
        SocketFile(std::mem::take(&mut self.path))
    }

    fn shutdown(&mut self) {
        self.close();
        if !self.path.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// Stops the accept loop and waits for it.
    fn close(&mut self) {
        if self.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the accept loop: shutdown(2) of a listening socket ends a
        // blocked accept; connecting to the path is the fallback (and
        // fails if the socket file was removed behind fsd's back, which
        // made fsd hang at exit).
        let woken = self.waker.take().is_some_and(|l| {
            nix::sys::socket::shutdown(l.as_raw_fd(), nix::sys::socket::Shutdown::Both).is_ok()
        });
        if !woken {
            let _ = UnixStream::connect(&self.path);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A control socket no longer served, removed when dropped.
#[derive(Debug)]
pub struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The requests of `fs` (whose device fsd was given as `device`) as the
/// control socket and the FUSE ioctl path serve them.
pub fn service(
    fs: Arc<Fs>,
    device: &Path,
    snapshots: Arc<crate::snapshots::Snapshots>,
) -> Requests {
    Arc::new(FsService {
        fs,
        snapshots,
        device: device.display().to_string(),
    })
}

fn accept_loop(listener: &UnixListener, stop: &AtomicBool, service: &Requests) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match conn {
            Ok(stream) => {
                let service = service.clone();
                let spawned = std::thread::Builder::new()
                    .name("fsd-control-conn".into())
                    .spawn(move || {
                        let closed = serve_connection(stream, &*service);
                        debug!("control connection closed: {closed:?}");
                    });
                if let Err(e) = spawned {
                    warn!("control socket: cannot start a connection thread: {e}");
                }
            }
            Err(e) => warn!("control socket: accept failed: {e}"),
        }
    }
}

struct FsService {
    fs: Arc<Fs>,
    snapshots: Arc<crate::snapshots::Snapshots>,
    /// The device as fsd was given it (GET_SUPER names it).
    device: String,
}

/// The errno for an engine error.
fn errno(e: &lfs::Error) -> i32 {
    crate::errno::engine_error("control request", ROOT_INO, e).code()
}

impl Handler for FsService {
    fn handle(&self, code: u32, payload: &[u8], peer: &Peer) -> Result<Vec<u8>, i32> {
        let owner = self.fs.getattr(ROOT_INO).map_err(|e| errno(&e))?.uid;
        check_permission(code, peer, owner)?;
        dispatch(self, code, payload, peer)
    }
}

impl Service for FsService {
    fn get_sustat(&self, _: &Peer, _: GetSustat) -> Result<Sustat, i32> {
        let s = self.fs.sustat();
        Ok(Sustat {
            nsegs: s.nsegs,
            nclean: s.nclean,
            ndirty: s.ndirty,
            npending: s.npending,
            nreserved: s.nreserved,
            blocks_per_segment: s.blocks_per_segment,
            block_size: s.block_size,
            last_cno: s.last_cno,
            ctime_ns: s.ctime_ns,
            nongc_ctime_ns: s.nongc_ctime_ns,
            prot_seq: s.prot_seq,
            space_waiters: s.space_waiters,
        })
    }

    fn get_suinfo(&self, _: &Peer, r: GetSuinfo) -> Result<SuinfoList, i32> {
        let items = self
            .fs
            .segment_usage_range(r.start, u64::from(r.count))
            .into_iter()
            .map(|(segnum, u)| Suinfo {
                segnum,
                last_mod: u.last_mod,
                nblocks: u.nblocks,
                nlive: u.nlive,
                flags: suinfo_flags(u.flags),
            })
            .collect();
        Ok(SuinfoList { items })
    }

    fn get_cpstat(&self, _: &Peer, _: GetCpstat) -> Result<Cpstat, i32> {
        let (last_cno, ncheckpoints, nsnapshots) = self.fs.cpstat();
        Ok(Cpstat {
            last_cno,
            ncheckpoints,
            nsnapshots,
        })
    }

    fn get_cpinfo(&self, _: &Peer, r: GetCpinfo) -> Result<CpinfoList, i32> {
        let items = self
            .fs
            .cpinfo(
                r.start_cno,
                r.count as usize,
                r.flags & GET_CPINFO_SNAPSHOTS_ONLY != 0,
            )
            .map_err(|e| errno(&e))?
            .into_iter()
            .map(|e| Cpinfo {
                cno: e.cno,
                flags: cpinfo_flags(e.flags),
                ctime_ns: e.ctime_ns,
                nblk_inc: e.nblk_inc,
                inodes_count: e.inodes_count,
                blocks_count: e.blocks_count,
            })
            .collect();
        Ok(CpinfoList { items })
    }

    fn sync(&self, _: &Peer, r: Sync) -> Result<SyncReply, i32> {
        let cno = if r.flags & SYNC_FORCE_CHECKPOINT != 0 {
            self.fs.make_checkpoint(false)
        } else {
            self.fs.sync().map(|()| self.fs.cpstat().0)
        }
        .map_err(|e| errno(&e))?;
        Ok(SyncReply { cno })
    }

    fn get_vinfo(&self, _: &Peer, r: GetVinfo) -> Result<VinfoList, i32> {
        let items = self
            .fs
            .vinfo(&r.vblocks)
            .into_iter()
            .map(|(vblock, e)| Vinfo {
                vblock,
                phys: e.phys,
                start_cno: e.start_cno,
                end_cno: e.end_cno,
            })
            .collect();
        Ok(VinfoList { items })
    }

    fn get_seg_summary(&self, _: &Peer, r: GetSegSummary) -> Result<SegSummary, i32> {
        let d = self.fs.segment_summary(r.segnum).map_err(|e| errno(&e))?;
        Ok(seg_summary(&d))
    }

    fn get_super(&self, _: &Peer, _: GetSuper) -> Result<Super, i32> {
        let b = self.fs.superblock_copies().map_err(|e| errno(&e))?;
        let current = match b.decode().current_copy() {
            None => SUPER_CURRENT_NONE,
            Some(SbCopy::Primary) => SUPER_CURRENT_PRIMARY,
            Some(SbCopy::Secondary) => SUPER_CURRENT_SECONDARY,
        };
        Ok(Super {
            current,
            device_bytes: b.device_bytes,
            primary_offset: 0,
            secondary_offset: b.secondary_offset,
            device: self.device.clone(),
            primary: b.primary,
            secondary: b.secondary,
        })
    }

    fn get_stats(&self, _: &Peer, _: GetStats) -> Result<Stats, i32> {
        let s = self.fs.stats();
        Ok(Stats {
            counters: s
                .counters
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            histograms: s
                .histograms
                .into_iter()
                .map(|(name, b)| Histogram {
                    name: name.to_string(),
                    bucket_upper_ns: b.iter().map(|&(u, _)| u).collect(),
                    counts: b.iter().map(|&(_, c)| c).collect(),
                })
                .collect(),
        })
    }

    fn get_df(&self, _: &Peer, _: GetDf) -> Result<Df, i32> {
        let d = self.fs.df();
        Ok(Df {
            block_size: d.block_size,
            total_blocks: d.total_blocks,
            free_blocks: d.free_blocks,
            reserved_blocks: d.reserved_blocks,
            live_blocks: d.live_blocks,
            snapshot_blocks: d.snapshot_blocks,
            protected_blocks: d.protected_blocks,
            reclaimable_blocks: d.reclaimable_blocks,
            booked_blocks: d.booked_blocks,
            checkpoints_expired_for_space: d.checkpoints_expired_for_space,
        })
    }

    fn change_cpmode(&self, _: &Peer, r: ChangeCpmode) -> Result<Done, i32> {
        self.fs
            .change_cpmode(r.cno, r.mode == CPMODE_SNAPSHOT)
            .map_err(|e| errno(&e))?;
        info!(
            "checkpoint {} is now a {}",
            r.cno,
            if r.mode == CPMODE_SNAPSHOT {
                "snapshot"
            } else {
                "plain checkpoint"
            }
        );
        Ok(Done)
    }

    fn delete_checkpoint(&self, _: &Peer, r: DeleteCheckpoint) -> Result<Done, i32> {
        let freed = self.fs.delete_checkpoint(r.cno).map_err(|e| errno(&e))?;
        info!("deleted checkpoint {} ({freed} blocks freed)", r.cno);
        Ok(Done)
    }

    fn clean_segments(&self, _: &Peer, r: CleanSegments) -> Result<CleanReply, i32> {
        let rep = self
            .fs
            .clean_segments_placed(
                &r.segments,
                &lfs::fs::clean::Placement {
                    warm: r.warm,
                    separate_writes: r.flags & lfs_proto::msg::CLEAN_SEPARATE_WRITES != 0,
                    warm_young: r.flags & lfs_proto::msg::CLEAN_WARM_YOUNG != 0,
                    strict_protection: r.flags & lfs_proto::msg::CLEAN_STRICT_PROTECTION != 0,
                },
                std::time::Duration::from_secs(u64::from(r.protection_s)),
            )
            .map_err(|e| errno(&e))?;
        Ok(CleanReply {
            blocks_moved: rep.blocks_moved,
            segments_freed: rep.segments_freed,
            bytes_written: rep.bytes_written,
            checkpoints_deleted: rep.checkpoints_deleted,
            blocks_freed: rep.blocks_freed,
        })
    }

    fn mount_checkpoint(&self, _: &Peer, r: MountCheckpoint) -> Result<Done, i32> {
        self.snapshots.mount(r.cno, &r.path).map_err(|e| {
            warn!("mount of checkpoint {} refused: {}", r.cno, e.why);
            e.errno
        })?;
        Ok(Done)
    }

    fn get_diff(&self, _: &Peer, r: GetDiff) -> Result<DiffList, i32> {
        use lfs::fs::diff::Change;
        let all = self
            .fs
            .diff_checkpoints(r.old_cno, r.new_cno, r.path.as_bytes())
            .map_err(|e| errno(&e))?;
        // Paths sort as bytes; the reply carries those that are UTF-8
        // (the protocol's strings), lossily converted otherwise.
        let mut items = Vec::new();
        let mut bytes = 0;
        let mut more = false;
        for (change, path) in all {
            let path = String::from_utf8_lossy(&path).into_owned();
            if path.len() > DIFF_PATH_MAX {
                warn!(
                    "GET_DIFF {} to {}: a path of {} bytes is longer than the protocol's {DIFF_PATH_MAX}",
                    r.old_cno,
                    r.new_cno,
                    path.len()
                );
                return Err(nix::libc::ENAMETOOLONG);
            }
            if !r.after.is_empty() && path.as_str() <= r.after.as_str() {
                continue;
            }
            if bytes + path.len() + 5 > DIFF_REPLY_BYTES || items.len() == DiffList::MAX_ITEMS {
                // Both changes of a replaced path go in the same reply.
                while items.last().is_some_and(|i: &DiffItem| i.path == path) {
                    items.pop();
                }
                more = true;
                break;
            }
            bytes += path.len() + 5;
            items.push(DiffItem {
                change: match change {
                    Change::Created => DIFF_CREATED,
                    Change::Deleted => DIFF_DELETED,
                    Change::Modified => DIFF_MODIFIED,
                },
                path,
            });
        }
        Ok(DiffList { more, items })
    }

    fn umount_checkpoint(&self, _: &Peer, r: UmountCheckpoint) -> Result<Done, i32> {
        self.snapshots.umount(&r.path).map_err(|e| {
            warn!("unmount refused: {}", e.why);
            e.errno
        })?;
        Ok(Done)
    }

    /// The freeze stays when the connection that asked for it closes (as
    /// fsfreeze(8)): THAW, unmount or SIGTERM end it.
    fn freeze(&self, peer: &Peer, _: Freeze) -> Result<Done, i32> {
        let cno = self.fs.freeze().map_err(|e| errno(&e))?;
        info!(
            "FREEZE from uid {} (pid {}): frozen at checkpoint {cno}; changes wait for THAW",
            peer.uid, peer.pid
        );
        Ok(Done)
    }

    fn thaw(&self, peer: &Peer, _: Thaw) -> Result<Done, i32> {
        self.fs.thaw().map_err(|e| errno(&e))?;
        info!(
            "THAW from uid {} (pid {}): changes resume",
            peer.uid, peer.pid
        );
        Ok(Done)
    }

    fn set_suinfo(&self, _: &Peer, r: SetSuinfo) -> Result<Done, i32> {
        let updates: Vec<(u64, u64)> = r.items.iter().map(|u| (u.segnum, u.last_mod)).collect();
        self.fs
            .set_segment_mtimes(&updates)
            .map_err(|e| errno(&e))?;
        Ok(Done)
    }
}

/// Protocol checkpoint flags from the on-disk ones (lfs(5)).
fn cpinfo_flags(f: u32) -> u32 {
    let mut out = 0;
    if f & lfs::format::CP_FLAG_SNAPSHOT != 0 {
        out |= CPINFO_SNAPSHOT;
    }
    if f & lfs::format::CP_FLAG_MINOR != 0 {
        out |= CPINFO_MINOR;
    }
    out
}

/// Protocol segment flags from the on-disk ones.
fn suinfo_flags(f: u32) -> u32 {
    let mut out = 0;
    for (disk, proto) in [
        (lfs::format::SU_FLAG_ACTIVE, SUINFO_ACTIVE),
        (lfs::format::SU_FLAG_DIRTY, SUINFO_DIRTY),
        (lfs::format::SU_FLAG_ERROR, SUINFO_ERROR),
    ] {
        if f & disk != 0 {
            out |= proto;
        }
    }
    out
}

/// Longest error text in a GET_SEG_SUMMARY reply, in bytes (the
/// protocol's maximum, cut at a character boundary).
fn error_text(e: &impl std::fmt::Display) -> String {
    let mut s = e.to_string();
    let mut end = s.len().min(LogInfo::MAX_ERROR_LEN);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s
}

/// A segment's logs as GET_SEG_SUMMARY carries them: everything `fsctl
/// dumpseg` prints from an unmounted device. A segment whose entries do
/// not fit in a frame is cut after the last whole log that fits.
fn seg_summary(d: &SegmentDump) -> SegSummary {
    let mut logs = Vec::new();
    let mut bytes = 0;
    let mut end = error_text(&d.end);
    for l in &d.logs {
        let h = &l.summary.header;
        let (super_root, sr_cno, sr_seq, sr_error) = match &l.super_root {
            None => (SUPER_ROOT_NONE, 0, 0, String::new()),
            Some(Ok(sr)) => (SUPER_ROOT_VALID, sr.cno, sr.seq, String::new()),
            Some(Err(e)) => (SUPER_ROOT_DAMAGED, 0, 0, error_text(e)),
        };
        let log = LogInfo {
            block: l.block,
            seq: h.seq,
            cno: h.cno,
            ctime_ns: h.ctime_ns,
            next_segment: h.next_segment,
            flags: h.flags,
            nblocks: h.nblocks,
            nsummary_blocks: h.nsummary_blocks,
            summary_crc: h.summary_crc,
            body_crc: h.body_crc,
            body_ok: u8::from(l.body_ok),
            super_root,
            sr_cno,
            sr_seq,
            body_error: l.body_error.as_ref().map(error_text).unwrap_or_default(),
            sr_error,
            entries: l
                .summary
                .entries
                .iter()
                .map(|e| EntryInfo {
                    ino: e.ino,
                    offset: e.offset,
                    vblock: e.vblock,
                    kind: e.kind.to_raw(),
                })
                .collect(),
        };
        let size = LogInfo::FIXED_SIZE
            + log.body_error.len()
            + log.sr_error.len()
            + log.entries.len() * EntryInfo::SIZE;
        if bytes + size > SEG_SUMMARY_REPLY_BYTES {
            end = format!(
                "the reply ends before the log at block {} (the frame limit)",
                l.block
            );
            break;
        }
        bytes += size;
        logs.push(log);
    }
    SegSummary {
        segnum: d.segno,
        start_block: d.start_block,
        nblocks: d.nblocks,
        logs,
        end,
    }
}
