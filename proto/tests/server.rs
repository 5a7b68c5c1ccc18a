//! The client against `serve_connection` over a real Unix socket in a
//! temporary directory, with a dummy engine: every request round trip,
//! errors, malformed input and silent clients. The test server spawns a
//! thread per connection, as fsd does.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use lfs_proto::codes;
use lfs_proto::frame::{read_frame, Frame, FrameError, Kind, HEADER_LEN, MAX_PAYLOAD};
use lfs_proto::msg::*;
use lfs_proto::server::{
    check_permission, dispatch, serve_connection_with, Closed, Handler, Peer, ServeConfig, Service,
};
use lfs_proto::{Client, ClientError};

const EINVAL: i32 = nix::libc::EINVAL;
const ENOTTY: i32 = nix::libc::ENOTTY;
const ENOENT: i32 = nix::libc::ENOENT;
/// How long a test waits for an answer it expects promptly.
const PROMPT: Duration = Duration::from_secs(5);

/// An engine that answers from its inputs, so that each reply shows the
/// request arrived intact.
struct Dummy {
    owner: u32,
}

impl Service for Dummy {
    fn get_sustat(&self, _: &Peer, _: GetSustat) -> Result<Sustat, i32> {
        Ok(sustat())
    }
    fn get_suinfo(&self, _: &Peer, r: GetSuinfo) -> Result<SuinfoList, i32> {
        let n = u64::from(r.count).min(SuinfoList::MAX_ITEMS as u64);
        Ok(SuinfoList {
            items: (r.start..r.start + n)
                .map(|segnum| Suinfo {
                    segnum,
                    last_mod: segnum * 10,
                    nblocks: 2048,
                    nlive: segnum as u32,
                    flags: SUINFO_DIRTY,
                })
                .collect(),
        })
    }
    fn get_cpstat(&self, _: &Peer, _: GetCpstat) -> Result<Cpstat, i32> {
        Ok(Cpstat {
            last_cno: 9,
            ncheckpoints: 4,
            nsnapshots: 1,
        })
    }
    fn get_cpinfo(&self, _: &Peer, r: GetCpinfo) -> Result<CpinfoList, i32> {
        let snapshots = r.flags & GET_CPINFO_SNAPSHOTS_ONLY != 0;
        Ok(CpinfoList {
            items: (r.start_cno..r.start_cno + u64::from(r.count))
                .map(|cno| Cpinfo {
                    cno,
                    flags: if snapshots { CPINFO_SNAPSHOT } else { 0 },
                    ctime_ns: cno * 1000,
                    nblk_inc: 1,
                    inodes_count: 2,
                    blocks_count: 3,
                })
                .collect(),
        })
    }
    fn sync(&self, _: &Peer, r: Sync) -> Result<SyncReply, i32> {
        Ok(SyncReply {
            cno: 100 + u64::from(r.flags),
        })
    }
    fn get_vinfo(&self, _: &Peer, r: GetVinfo) -> Result<VinfoList, i32> {
        Ok(VinfoList {
            items: r
                .vblocks
                .iter()
                .map(|&v| Vinfo {
                    vblock: v,
                    phys: v + 1,
                    start_cno: 1,
                    end_cno: u64::MAX,
                })
                .collect(),
        })
    }
    fn get_seg_summary(&self, _: &Peer, r: GetSegSummary) -> Result<SegSummary, i32> {
        if r.segnum >= 1000 {
            return Err(ENOENT);
        }
        Ok(seg_summary(r.segnum))
    }
    fn get_stats(&self, _: &Peer, _: GetStats) -> Result<Stats, i32> {
        Ok(stats())
    }
    fn get_df(&self, _: &Peer, _: GetDf) -> Result<Df, i32> {
        Ok(Df {
            block_size: 4096,
            total_blocks: 1 << 20,
            free_blocks: 1000,
            reserved_blocks: 100,
            live_blocks: 5000,
            snapshot_blocks: 0,
            protected_blocks: 7,
            reclaimable_blocks: 42,
            booked_blocks: 3,
            checkpoints_expired_for_space: 0,
        })
    }
    fn change_cpmode(&self, _: &Peer, r: ChangeCpmode) -> Result<Done, i32> {
        if r.cno == 0 {
            return Err(ENOENT);
        }
        Ok(Done)
    }
    fn delete_checkpoint(&self, _: &Peer, r: DeleteCheckpoint) -> Result<Done, i32> {
        if r.cno == 0 {
            return Err(ENOENT);
        }
        Ok(Done)
    }
    fn clean_segments(&self, _: &Peer, r: CleanSegments) -> Result<CleanReply, i32> {
        Ok(CleanReply {
            blocks_moved: r.segments.iter().sum(),
            segments_freed: r.segments.len() as u64,
            bytes_written: u64::from(r.protection_s),
            checkpoints_deleted: 0,
            blocks_freed: 0,
        })
    }
    fn mount_checkpoint(&self, _: &Peer, r: MountCheckpoint) -> Result<Done, i32> {
        if !r.path.starts_with('/') {
            return Err(EINVAL);
        }
        Ok(Done)
    }
    fn get_diff(&self, _: &Peer, r: GetDiff) -> Result<DiffList, i32> {
        Ok(DiffList {
            more: false,
            items: vec![DiffItem {
                change: DIFF_CREATED,
                path: format!("{}/{}-{}", r.path, r.old_cno, r.new_cno),
            }],
        })
    }
    fn umount_checkpoint(&self, _: &Peer, _: UmountCheckpoint) -> Result<Done, i32> {
        Err(ENOENT)
    }
    fn get_super(&self, _: &Peer, _: GetSuper) -> Result<Super, i32> {
        Ok(Super {
            current: SUPER_CURRENT_SECONDARY,
            device_bytes: 1 << 20,
            secondary_offset: (1 << 20) - 4096,
            device: "dummy".into(),
            primary: vec![1; 512],
            secondary: vec![2; 512],
            ..Super::default()
        })
    }
    fn freeze(&self, _: &Peer, _: Freeze) -> Result<Done, i32> {
        Ok(Done)
    }
    fn thaw(&self, _: &Peer, _: Thaw) -> Result<Done, i32> {
        Err(EINVAL)
    }
    fn set_suinfo(&self, _: &Peer, r: SetSuinfo) -> Result<Done, i32> {
        if r.items.iter().any(|u| u.segnum >= 1000) {
            return Err(EINVAL);
        }
        Ok(Done)
    }
}

impl Handler for Dummy {
    fn handle(&self, code: u32, payload: &[u8], peer: &Peer) -> Result<Vec<u8>, i32> {
        check_permission(code, peer, self.owner)?;
        dispatch(self, code, payload, peer)
    }
}

fn sustat() -> Sustat {
    Sustat {
        nsegs: 128,
        nclean: 100,
        ndirty: 27,
        npending: 1,
        nreserved: 8,
        blocks_per_segment: 2048,
        block_size: 4096,
        last_cno: 9,
        ctime_ns: 1_700_000_000_000_000_000,
        nongc_ctime_ns: 1_600_000_000_000_000_000,
        prot_seq: 77,
        space_waiters: 0,
    }
}

fn seg_summary(segnum: u64) -> SegSummary {
    SegSummary {
        segnum,
        start_block: segnum * 2048,
        nblocks: 2048,
        logs: vec![LogInfo {
            block: segnum * 2048,
            seq: 5,
            cno: 3,
            flags: 1,
            nblocks: 4,
            nsummary_blocks: 1,
            body_ok: 1,
            super_root: SUPER_ROOT_VALID,
            sr_cno: 3,
            sr_seq: 5,
            entries: vec![
                EntryInfo {
                    ino: 12,
                    offset: 0,
                    vblock: 99,
                    kind: 1,
                },
                EntryInfo {
                    ino: 12,
                    offset: 1,
                    vblock: 100,
                    kind: 1,
                },
            ],
            ..LogInfo::default()
        }],
        end: format!("block {} is unwritten (all zeros)", segnum * 2048 + 4),
    }
}

fn stats() -> Stats {
    Stats {
        counters: vec![("user_bytes".into(), 1 << 30), ("fsyncs".into(), 12)],
        histograms: vec![Histogram {
            name: "fsync_latency".into(),
            bucket_upper_ns: vec![1000, 2000, u64::MAX],
            counts: vec![5, 6, 1],
        }],
    }
}

/// A test server: its socket path, and why each connection ended.
struct Server {
    _dir: tempfile::TempDir,
    path: PathBuf,
    closed: Receiver<Closed>,
}

fn start(config: ServeConfig) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctl.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let handler = Arc::new(Dummy {
        owner: nix::unistd::geteuid().as_raw(),
    });
    let (tx, closed) = channel();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { break };
            let handler = Arc::clone(&handler);
            let tx = tx.clone();
            thread::spawn(move || {
                let _ = tx.send(serve_connection_with(stream, &*handler, &config));
            });
        }
    });
    Server {
        _dir: dir,
        path,
        closed,
    }
}

impl Server {
    /// Why the next connection that did not end with a clean EOF ended.
    fn next_abnormal_close(&self) -> Closed {
        loop {
            match self.closed.recv_timeout(PROMPT).unwrap() {
                Closed::Eof => continue,
                other => return other,
            }
        }
    }
}

fn quick() -> ServeConfig {
    ServeConfig {
        idle_timeout: Duration::from_secs(10),
        write_timeout: Duration::from_secs(10),
    }
}

fn raw(path: &Path) -> UnixStream {
    let s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(PROMPT)).unwrap();
    s
}

/// Reads one frame from `s`, failing the test if none comes promptly.
fn reply(s: &UnixStream) -> Frame {
    read_frame(&mut &*s).unwrap()
}

/// After the server closed `s`: EOF, or ECONNRESET if it closed with our
/// bytes unread.
fn assert_closed(s: &UnixStream) {
    let mut buf = [0u8; 64];
    match (&*s).read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("expected the server to close the connection, got {other:?}"),
    }
}

fn header(kind: u16, code: u32, len: u32, id: u64, status: i32, reserved: u32) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_LEN);
    h.extend_from_slice(b"LFSP");
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&kind.to_le_bytes());
    h.extend_from_slice(&code.to_le_bytes());
    h.extend_from_slice(&len.to_le_bytes());
    h.extend_from_slice(&id.to_le_bytes());
    h.extend_from_slice(&status.to_le_bytes());
    h.extend_from_slice(&reserved.to_le_bytes());
    h
}

#[test]
fn every_request_round_trips() {
    let srv = start(quick());
    let mut c = Client::connect(&srv.path).unwrap();
    assert_eq!(c.path(), Some(srv.path.as_path()));

    assert_eq!(c.call(&GetSustat).unwrap(), sustat());

    let l = c.call(&GetSuinfo { start: 5, count: 3 }).unwrap();
    assert_eq!(
        l.items.iter().map(|s| s.segnum).collect::<Vec<_>>(),
        [5, 6, 7]
    );
    assert_eq!(l.items[2].last_mod, 70);
    // The largest request: the reply stops at what fits in a frame.
    let l = c
        .call(&GetSuinfo {
            start: 0,
            count: GetSuinfo::MAX_COUNT,
        })
        .unwrap();
    assert_eq!(l.items.len(), SuinfoList::MAX_ITEMS);

    assert_eq!(
        c.call(&GetCpstat).unwrap(),
        Cpstat {
            last_cno: 9,
            ncheckpoints: 4,
            nsnapshots: 1
        }
    );

    let l = c
        .call(&GetCpinfo {
            start_cno: 2,
            count: 2,
            flags: GET_CPINFO_SNAPSHOTS_ONLY,
        })
        .unwrap();
    assert_eq!(l.items.len(), 2);
    assert_eq!(l.items[1].cno, 3);
    assert_eq!(l.items[1].ctime_ns, 3000);
    assert_eq!(l.items[1].flags, CPINFO_SNAPSHOT);

    assert_eq!(
        c.call(&Sync {
            flags: SYNC_FORCE_CHECKPOINT
        })
        .unwrap(),
        SyncReply { cno: 101 }
    );

    let v = c
        .call(&GetVinfo {
            vblocks: vec![7, 8, 1 << 40],
        })
        .unwrap();
    assert_eq!(
        v.items.iter().map(|i| i.phys).collect::<Vec<_>>(),
        [8, 9, (1 << 40) + 1]
    );

    assert_eq!(
        c.call(&GetSegSummary { segnum: 4 }).unwrap(),
        seg_summary(4)
    );
    assert_eq!(c.call(&GetStats).unwrap(), stats());
    assert_eq!(c.call(&GetDf).unwrap().reclaimable_blocks, 42);
    let cp = ChangeCpmode {
        cno: 3,
        mode: CPMODE_SNAPSHOT,
        flags: 0,
    };
    assert_eq!(c.call(&cp).unwrap(), Done);
    assert_eq!(
        c.call(&DeleteCheckpoint { cno: 0 }).unwrap_err().errno(),
        Some(ENOENT)
    );
    let r = c
        .call(&CleanSegments {
            protection_s: 60,
            segments: vec![4, 5],
            warm: vec![5],
            flags: 0,
        })
        .unwrap();
    assert_eq!(
        (r.blocks_moved, r.segments_freed, r.bytes_written),
        (9, 2, 60)
    );
    let u = SetSuinfo {
        items: vec![SuUpdate {
            segnum: 1000,
            last_mod: 1,
        }],
    };
    assert_eq!(c.call(&u).unwrap_err().errno(), Some(EINVAL));
    let m = MountCheckpoint {
        cno: 2,
        path: "relative".into(),
    };
    assert_eq!(c.call(&m).unwrap_err().errno(), Some(EINVAL));
    let u = UmountCheckpoint { path: "/x".into() };
    assert_eq!(c.call(&u).unwrap_err().errno(), Some(ENOENT));
    let d = GetDiff {
        old_cno: 3,
        new_cno: 4,
        path: "/p".into(),
        after: String::new(),
    };
    assert_eq!(c.call(&d).unwrap().items[0].path, "/p/3-4");
    assert_eq!(c.call(&Freeze).unwrap(), Done);
    let sup = c.call(&GetSuper).unwrap();
    assert_eq!(
        (sup.current, sup.device.as_str(), sup.secondary[0]),
        (SUPER_CURRENT_SECONDARY, "dummy", 2)
    );
    assert_eq!(c.call(&Thaw).unwrap_err().errno(), Some(EINVAL));
}

#[test]
fn engine_errors_and_unknown_codes_leave_the_connection_usable() {
    let srv = start(quick());
    let mut c = Client::connect(&srv.path).unwrap();
    let e = c.call(&GetSegSummary { segnum: 1000 }).unwrap_err();
    assert!(matches!(
        e,
        ClientError::Errno {
            code: ENOENT,
            name: "ENOENT"
        }
    ));

    let e = c.call_raw(0x8000_4cff, &[]).unwrap_err();
    assert!(matches!(
        e,
        ClientError::Errno {
            code: ENOTTY,
            name: "ENOTTY"
        }
    ));
    for reserved in codes::ALL.iter().filter(|i| !i.served) {
        let e = c.call_raw(reserved.code, &[0; 16]).unwrap_err();
        assert_eq!(e.errno(), Some(ENOTTY), "{}", reserved.name);
    }
    assert_eq!(c.call(&GetCpstat).unwrap().last_cno, 9);
}

#[test]
fn malformed_payloads_are_einval_and_leave_the_connection_usable() {
    let srv = start(quick());
    let mut c = Client::connect(&srv.path).unwrap();
    let bad: [(u32, &[u8]); 6] = [
        (codes::GET_SUINFO, &[1, 2, 3]),
        (codes::GET_SUSTAT, &[0]),
        (codes::SYNC, &[2, 0, 0, 0]),
        (codes::GET_CPINFO, &[0; 17]),
        // 65537 segments asked for.
        (codes::GET_SUINFO, &[0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0]),
        // A billion vblocks announced, none sent.
        (codes::GET_VINFO, &[0x00, 0xca, 0x9a, 0x3b]),
    ];
    for (code, payload) in bad {
        let e = c.call_raw(code, payload).unwrap_err();
        assert_eq!(
            e.errno(),
            Some(EINVAL),
            "{:?} {payload:?}",
            codes::name(code)
        );
    }
    assert_eq!(c.call(&GetDf).unwrap().block_size, 4096);
}

#[test]
fn bad_kind_reserved_or_status_is_einval_and_the_stream_goes_on() {
    let srv = start(quick());
    let s = raw(&srv.path);
    let cases = [
        header(2, codes::GET_DF, 0, 1, 0, 0),
        header(0, codes::GET_DF, 0, 2, 0, 7),
        header(0, codes::GET_DF, 0, 3, 5, 0),
        header(1, codes::GET_DF, 0, 4, 0, 0),
    ];
    for (i, h) in cases.iter().enumerate() {
        (&s).write_all(h).unwrap();
        let r = reply(&s);
        assert_eq!(
            (r.kind, r.id, r.status),
            (Kind::Reply, i as u64 + 1, EINVAL)
        );
        assert!(r.payload.is_empty());
    }
    (&s).write_all(&header(0, codes::GET_DF, 0, 9, 0, 0))
        .unwrap();
    let r = reply(&s);
    assert_eq!((r.id, r.status), (9, 0));
    assert_eq!(Df::decode(&r.payload).unwrap().block_size, 4096);
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let srv = start(quick());
    let s = raw(&srv.path);
    let mut bytes = Vec::new();
    for id in 10..20u64 {
        let p = GetSegSummary { segnum: id }.encode();
        bytes.extend(
            Frame::request(codes::GET_SEG_SUMMARY, id, p)
                .encode()
                .unwrap(),
        );
    }
    (&s).write_all(&bytes).unwrap();
    for id in 10..20u64 {
        let r = reply(&s);
        assert_eq!(r.id, id);
        assert_eq!(SegSummary::decode(&r.payload).unwrap(), seg_summary(id));
    }
}

#[test]
fn garbage_closes_the_connection_and_the_next_client_works() {
    let srv = start(quick());
    for garbage in [
        &b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"[..],
        &[0xff; 64][..],
        // Right magic, wrong version.
        &b"LFSP\x02\x00\x00\x00 and then some more bytes here"[..],
    ] {
        let s = raw(&srv.path);
        (&s).write_all(garbage).unwrap();
        let mut buf = Vec::new();
        // Closed without a reply, or EINVAL then closed.
        match (&s).read_to_end(&mut buf) {
            Ok(_) => {}
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
        }
        if !buf.is_empty() {
            let (f, _) = lfs_proto::decode_frame(&buf).unwrap();
            assert_eq!(f.status, EINVAL);
        }
        let why = srv.next_abnormal_close();
        assert!(
            matches!(
                why,
                Closed::Malformed(FrameError::BadMagic { .. } | FrameError::BadVersion { .. })
            ),
            "{why:?}"
        );
        let mut c = Client::connect(&srv.path).unwrap();
        assert_eq!(c.call(&GetCpstat).unwrap().ncheckpoints, 4);
    }
}

#[test]
fn a_truncated_frame_closes_the_connection() {
    let srv = start(quick());
    let s = raw(&srv.path);
    (&s).write_all(&header(0, codes::GET_SUINFO, 12, 1, 0, 0))
        .unwrap();
    (&s).write_all(&[1, 2, 3]).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    assert_closed(&s);
    let why = srv.next_abnormal_close();
    assert!(
        matches!(
            why,
            Closed::Malformed(FrameError::Truncated {
                what: "payload",
                got: 3,
                needed: 12
            })
        ),
        "{why:?}"
    );
}

#[test]
fn an_oversized_length_is_einval_then_close_without_reading_the_payload() {
    let srv = start(quick());
    for len in [MAX_PAYLOAD as u32 + 1, u32::MAX] {
        let s = raw(&srv.path);
        let t = Instant::now();
        // Only the header: a server that tried to read the payload would
        // wait for the idle timeout instead of answering.
        (&s).write_all(&header(0, codes::GET_VINFO, len, 77, 0, 0))
            .unwrap();
        let r = reply(&s);
        assert_eq!(
            (r.kind, r.code, r.id, r.status),
            (Kind::Reply, codes::GET_VINFO, 77, EINVAL)
        );
        assert_closed(&s);
        assert!(t.elapsed() < quick().idle_timeout);
        let why = srv.next_abnormal_close();
        assert!(
            matches!(why, Closed::Malformed(FrameError::TooLarge { len: l, .. }) if l == u64::from(len)),
            "{why:?}"
        );
    }
    let mut c = Client::connect(&srv.path).unwrap();
    assert_eq!(c.call(&GetCpstat).unwrap().last_cno, 9);
}

#[test]
fn a_silent_client_blocks_nobody_and_is_dropped_after_the_idle_timeout() {
    let idle = Duration::from_secs(1);
    let srv = start(ServeConfig {
        idle_timeout: idle,
        write_timeout: Duration::from_secs(5),
    });
    let t = Instant::now();
    let silent = raw(&srv.path);
    // Half a header, then nothing.
    let half = raw(&srv.path);
    (&half)
        .write_all(&header(0, codes::GET_DF, 0, 1, 0, 0)[..10])
        .unwrap();
    let mut c = Client::connect(&srv.path).unwrap();
    for _ in 0..20 {
        assert_eq!(c.call(&GetDf).unwrap().block_size, 4096);
    }
    assert!(
        t.elapsed() < idle,
        "other clients waited for the silent ones"
    );
    assert_closed(&silent);
    assert_closed(&half);
    assert!(t.elapsed() >= idle, "closed before the idle timeout");
    for _ in 0..2 {
        let why = srv.next_abnormal_close();
        assert!(matches!(why, Closed::Idle), "{why:?}");
    }
}

#[test]
fn many_concurrent_clients() {
    let srv = start(quick());
    let path = srv.path.clone();
    let threads: Vec<_> = (0..32)
        .map(|i| {
            let path = path.clone();
            thread::spawn(move || {
                let mut c = Client::connect(&path).unwrap();
                for j in 0..50u64 {
                    let seg = i * 1000 % 999 + j;
                    assert_eq!(c.call(&GetSegSummary { segnum: seg }).unwrap().segnum, seg);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn a_client_that_goes_away_mid_reply_does_not_hurt_the_server() {
    let srv = start(quick());
    for _ in 0..5 {
        let s = raw(&srv.path);
        let p = GetSuinfo {
            start: 0,
            count: GetSuinfo::MAX_COUNT,
        }
        .encode();
        (&s).write_all(&Frame::request(codes::GET_SUINFO, 1, p).encode().unwrap())
            .unwrap();
        drop(s);
    }
    let mut c = Client::connect(&srv.path).unwrap();
    assert_eq!(c.call(&GetCpstat).unwrap().last_cno, 9);
}
