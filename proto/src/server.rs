//! The daemon side, without knowledge of the engine: a connection loop, the
//! peer's credentials, typed dispatch and the permission rule.
//!
//! fsd accepts connections, spawns a thread per connection (so that a
//! client that sends nothing holds only its own thread) and calls
//! [`serve_connection`] with its [`Handler`]. The handler checks
//! [`check_permission`] and calls [`dispatch`], which decodes the typed
//! request and calls the matching [`Service`] method.
//!
//! What the loop answers, frame by frame:
//!
//! | frame | answer | then |
//! |---|---|---|
//! | a request | the handler's reply or errno | next frame |
//! | payload the request type cannot decode | EINVAL (from [`dispatch`]) | next frame |
//! | unknown or reserved code | ENOTTY (from [`dispatch`]) | next frame |
//! | a reply, or a request with a non-zero status | EINVAL | next frame |
//! | bad kind or reserved field | EINVAL | next frame |
//! | payload length over `MAX_PAYLOAD` | EINVAL (payload not read) | close |
//! | bad magic, bad version, truncated | none | close |
//! | nothing for the idle timeout | none | close |
//! | a handler reply over `MAX_PAYLOAD` | EOVERFLOW | next frame |

use std::io;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::socket::{getsockopt, sockopt};

use crate::codes::{self, info_of};
use crate::frame::{read_frame, write_frame, Frame, FrameError, Kind, MAX_PAYLOAD};
use crate::msg::{
    ChangeCpmode, CleanReply, CleanSegments, CpinfoList, Cpstat, DeleteCheckpoint, Df, DiffList,
    Done, Freeze, GetCpinfo, GetCpstat, GetDf, GetDiff, GetSegSummary, GetStats, GetSuinfo,
    GetSuper, GetSustat, GetVinfo, Message, MountCheckpoint, Request, SegSummary, SetSuinfo, Stats,
    SuinfoList, Super, Sustat, Sync, SyncReply, Thaw, UmountCheckpoint, VinfoList,
};
use crate::sock::NoSigPipe;

/// How long a connection may stay silent before the server closes it.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a reply may take to be accepted by a client that reads slowly.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// The process at the other end of a connection (SO_PEERCRED: its
/// credentials when it connected).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
    /// Process id.
    pub pid: i32,
}

impl Peer {
    /// The credentials of `stream`'s peer.
    pub fn of(stream: &UnixStream) -> io::Result<Peer> {
        let c = getsockopt(stream, sockopt::PeerCredentials).map_err(io::Error::from)?;
        Ok(Peer {
            uid: c.uid(),
            gid: c.gid(),
            pid: c.pid(),
        })
    }
}

/// Answers requests. `handle` returns the reply payload or a positive errno.
pub trait Handler {
    /// Answers one request of `code` from `peer`.
    fn handle(&self, code: u32, payload: &[u8], peer: &Peer) -> Result<Vec<u8>, i32>;
}

/// The typed requests, one method each. Return a positive errno to fail.
pub trait Service {
    /// GET_SUSTAT.
    fn get_sustat(&self, peer: &Peer, req: GetSustat) -> Result<Sustat, i32>;
    /// GET_SUINFO.
    fn get_suinfo(&self, peer: &Peer, req: GetSuinfo) -> Result<SuinfoList, i32>;
    /// GET_CPSTAT.
    fn get_cpstat(&self, peer: &Peer, req: GetCpstat) -> Result<Cpstat, i32>;
    /// GET_CPINFO.
    fn get_cpinfo(&self, peer: &Peer, req: GetCpinfo) -> Result<CpinfoList, i32>;
    /// SYNC (mutating).
    fn sync(&self, peer: &Peer, req: Sync) -> Result<SyncReply, i32>;
    /// GET_VINFO.
    fn get_vinfo(&self, peer: &Peer, req: GetVinfo) -> Result<VinfoList, i32>;
    /// GET_SEG_SUMMARY.
    fn get_seg_summary(&self, peer: &Peer, req: GetSegSummary) -> Result<SegSummary, i32>;
    /// GET_SUPER.
    fn get_super(&self, peer: &Peer, req: GetSuper) -> Result<Super, i32>;
    /// GET_STATS.
    fn get_stats(&self, peer: &Peer, req: GetStats) -> Result<Stats, i32>;
    /// GET_DF.
    fn get_df(&self, peer: &Peer, req: GetDf) -> Result<Df, i32>;
    /// CHANGE_CPMODE (mutating).
    fn change_cpmode(&self, peer: &Peer, req: ChangeCpmode) -> Result<Done, i32>;
    /// DELETE_CHECKPOINT (mutating).
    fn delete_checkpoint(&self, peer: &Peer, req: DeleteCheckpoint) -> Result<Done, i32>;
    /// CLEAN_SEGMENTS (mutating).
    fn clean_segments(&self, peer: &Peer, req: CleanSegments) -> Result<CleanReply, i32>;
    /// SET_SUINFO (mutating).
    fn set_suinfo(&self, peer: &Peer, req: SetSuinfo) -> Result<Done, i32>;
    /// MOUNT_CHECKPOINT (mutating).
    fn mount_checkpoint(&self, peer: &Peer, req: MountCheckpoint) -> Result<Done, i32>;
    /// GET_DIFF.
    fn get_diff(&self, peer: &Peer, req: GetDiff) -> Result<DiffList, i32>;
    /// UMOUNT_CHECKPOINT (mutating).
    fn umount_checkpoint(&self, peer: &Peer, req: UmountCheckpoint) -> Result<Done, i32>;
    /// FREEZE (mutating).
    fn freeze(&self, peer: &Peer, req: Freeze) -> Result<Done, i32>;
    /// THAW (mutating).
    fn thaw(&self, peer: &Peer, req: Thaw) -> Result<Done, i32>;
}

fn typed<R: Request>(
    payload: &[u8],
    call: impl FnOnce(R) -> Result<R::Reply, i32>,
) -> Result<Vec<u8>, i32> {
    let req = R::decode(payload).map_err(|_| Errno::EINVAL as i32)?;
    call(req).map(|reply| reply.encode())
}

/// Decodes the request of `code` and calls its [`Service`] method; EINVAL
/// if the payload does not decode, ENOTTY for unknown and reserved codes.
pub fn dispatch<S: Service + ?Sized>(
    service: &S,
    code: u32,
    payload: &[u8],
    peer: &Peer,
) -> Result<Vec<u8>, i32> {
    match code {
        codes::GET_SUSTAT => typed(payload, |r| service.get_sustat(peer, r)),
        codes::GET_SUINFO => typed(payload, |r| service.get_suinfo(peer, r)),
        codes::GET_CPSTAT => typed(payload, |r| service.get_cpstat(peer, r)),
        codes::GET_CPINFO => typed(payload, |r| service.get_cpinfo(peer, r)),
        codes::SYNC => typed(payload, |r| service.sync(peer, r)),
        codes::GET_VINFO => typed(payload, |r| service.get_vinfo(peer, r)),
        codes::GET_SEG_SUMMARY => typed(payload, |r| service.get_seg_summary(peer, r)),
        codes::GET_SUPER => typed(payload, |r| service.get_super(peer, r)),
        codes::GET_STATS => typed(payload, |r| service.get_stats(peer, r)),
        codes::GET_DF => typed(payload, |r| service.get_df(peer, r)),
        codes::CHANGE_CPMODE => typed(payload, |r| service.change_cpmode(peer, r)),
        codes::DELETE_CHECKPOINT => typed(payload, |r| service.delete_checkpoint(peer, r)),
        codes::CLEAN_SEGMENTS => typed(payload, |r| service.clean_segments(peer, r)),
        codes::SET_SUINFO => typed(payload, |r| service.set_suinfo(peer, r)),
        codes::MOUNT_CHECKPOINT => typed(payload, |r| service.mount_checkpoint(peer, r)),
        codes::GET_DIFF => typed(payload, |r| service.get_diff(peer, r)),
        codes::UMOUNT_CHECKPOINT => typed(payload, |r| service.umount_checkpoint(peer, r)),
        codes::FREEZE => typed(payload, |r| service.freeze(peer, r)),
        codes::THAW => typed(payload, |r| service.thaw(peer, r)),
        _ => Err(Errno::ENOTTY as i32),
    }
}

/// Whether `code` changes the filesystem (SYNC and the reserved changing
/// codes): only root or the filesystem's owner may send it. Unknown codes
/// are not mutating; they are answered ENOTTY whoever sends them.
pub fn is_mutating(code: u32) -> bool {
    info_of(code).is_some_and(|i| i.mutating)
}

/// Whether `code`'s reply names files (GET_DIFF): only root or the
/// filesystem's owner may send it, since whoever reaches the socket is
/// not checked against the directories that hold the names.
pub fn names_files(code: u32) -> bool {
    info_of(code).is_some_and(|i| i.names_files)
}

/// The permission rule: a mutating request, or one whose reply names
/// files, only from root or `owner_uid` (EPERM otherwise); any other
/// request from anyone who could connect (the socket's mode and group
/// decide that).
pub fn check_permission(code: u32, peer: &Peer, owner_uid: u32) -> Result<(), i32> {
    if (is_mutating(code) || names_files(code)) && peer.uid != 0 && peer.uid != owner_uid {
        return Err(Errno::EPERM as i32);
    }
    Ok(())
}

/// Timeouts of [`serve_connection_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeConfig {
    /// Longest silence (within a frame or between frames) before closing.
    pub idle_timeout: Duration,
    /// Longest wait for a reply to be accepted by the client.
    pub write_timeout: Duration,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            idle_timeout: IDLE_TIMEOUT,
            write_timeout: WRITE_TIMEOUT,
        }
    }
}

/// Why [`serve_connection`] returned: for the daemon's log.
#[derive(Debug)]
#[non_exhaustive]
pub enum Closed {
    /// The client closed the connection between frames.
    Eof,
    /// The client sent nothing for the idle timeout.
    Idle,
    /// The client sent a frame the stream cannot continue after.
    Malformed(FrameError),
    /// Reading or writing failed, or the peer's credentials could not be
    /// read.
    Io(io::Error),
}

/// Serves one connection with the default timeouts until the client closes
/// it, falls silent or breaks the framing. Never panics on client input.
pub fn serve_connection<H: Handler + ?Sized>(stream: UnixStream, handler: &H) -> Closed {
    serve_connection_with(stream, handler, &ServeConfig::default())
}

/// [`serve_connection`] with explicit timeouts.
pub fn serve_connection_with<H: Handler + ?Sized>(
    stream: UnixStream,
    handler: &H,
    config: &ServeConfig,
) -> Closed {
    let setup = Peer::of(&stream).and_then(|peer| {
        stream.set_read_timeout(Some(config.idle_timeout))?;
        stream.set_write_timeout(Some(config.write_timeout))?;
        Ok(peer)
    });
    let peer = match setup {
        Ok(peer) => peer,
        Err(e) => return Closed::Io(e),
    };
    loop {
        let reply = match read_frame(&mut &stream) {
            Ok(req) => answer(handler, &peer, req),
            Err(FrameError::Eof) => return Closed::Eof,
            Err(FrameError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Closed::Idle
            }
            Err(FrameError::Io(e)) => return Closed::Io(e),
            Err(e) => match e.reply_to() {
                Some((code, id)) => {
                    let einval = Frame::error(code, id, Errno::EINVAL as i32);
                    if !e.in_step() {
                        // Best effort: the connection closes either way.
                        let _ = write_frame(&mut NoSigPipe(&stream), &einval);
                        return Closed::Malformed(e);
                    }
                    einval
                }
                None => return Closed::Malformed(e),
            },
        };
        match write_frame(&mut NoSigPipe(&stream), &reply) {
            Ok(()) => {}
            Err(FrameError::Io(e)) => return Closed::Io(e),
            Err(e) => return Closed::Malformed(e),
        }
    }
}

/// The reply to a well-framed request.
fn answer<H: Handler + ?Sized>(handler: &H, peer: &Peer, req: Frame) -> Frame {
    if req.kind != Kind::Request || req.status != 0 {
        return Frame::error(req.code, req.id, Errno::EINVAL as i32);
    }
    match handler.handle(req.code, &req.payload, peer) {
        Ok(payload) if payload.len() <= MAX_PAYLOAD => Frame::reply(req.code, req.id, payload),
        Ok(_) => Frame::error(req.code, req.id, Errno::EOVERFLOW as i32),
        Err(errno) if errno > 0 => Frame::error(req.code, req.id, errno),
        // Not an errno: a handler bug, reported as such rather than as
        // success.
        Err(_) => Frame::error(req.code, req.id, Errno::EIO as i32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: Peer = Peer {
        uid: 0,
        gid: 0,
        pid: 1,
    };
    const OWNER: Peer = Peer {
        uid: 1000,
        gid: 1000,
        pid: 2,
    };
    const OTHER: Peer = Peer {
        uid: 1001,
        gid: 1000,
        pid: 3,
    };

    #[test]
    fn mutating_codes() {
        for c in codes::ALL {
            assert_eq!(is_mutating(c.code), c.mutating, "{}", c.name);
        }
        assert!(is_mutating(codes::SYNC));
        assert!(is_mutating(codes::CLEAN_SEGMENTS));
        assert!(!is_mutating(codes::GET_SUSTAT));
        assert!(!is_mutating(0xdead_beef));
    }

    #[test]
    fn permission_rule() {
        let eperm = Err(Errno::EPERM as i32);
        assert_eq!(check_permission(codes::SYNC, &ROOT, 1000), Ok(()));
        assert_eq!(check_permission(codes::SYNC, &OWNER, 1000), Ok(()));
        assert_eq!(check_permission(codes::SYNC, &OTHER, 1000), eperm);
        assert_eq!(check_permission(codes::FREEZE, &OTHER, 1000), eperm);
        assert_eq!(check_permission(codes::GET_SUINFO, &OTHER, 1000), Ok(()));
        assert_eq!(check_permission(0xdead_beef, &OTHER, 1000), Ok(()));
    }

    #[test]
    fn peer_credentials_are_ours_on_a_socket_pair() {
        let (a, _b) = UnixStream::pair().unwrap();
        let p = Peer::of(&a).unwrap();
        assert_eq!(p.uid, nix::unistd::geteuid().as_raw());
        assert_eq!(p.gid, nix::unistd::getegid().as_raw());
        assert_eq!(p.pid, std::process::id() as i32);
    }

    struct Fixed(Result<Vec<u8>, i32>);

    impl Handler for Fixed {
        fn handle(&self, _: u32, _: &[u8], _: &Peer) -> Result<Vec<u8>, i32> {
            self.0.clone()
        }
    }

    #[test]
    fn answers_oversized_replies_and_bad_errnos_with_errors() {
        let req = || Frame::request(1, 9, vec![]);
        let big = Fixed(Ok(vec![0; MAX_PAYLOAD + 1]));
        assert_eq!(answer(&big, &ROOT, req()).status, Errno::EOVERFLOW as i32);
        assert_eq!(
            answer(&Fixed(Err(0)), &ROOT, req()).status,
            Errno::EIO as i32
        );
        assert_eq!(
            answer(&Fixed(Err(-5)), &ROOT, req()).status,
            Errno::EIO as i32
        );
        assert_eq!(answer(&Fixed(Err(13)), &ROOT, req()).status, 13);
        let ok = answer(&Fixed(Ok(vec![1, 2])), &ROOT, req());
        assert_eq!(ok, Frame::reply(1, 9, vec![1, 2]));
    }

    #[test]
    fn answers_replies_and_nonzero_status_requests_with_einval() {
        let h = Fixed(Ok(vec![]));
        let reply = Frame::reply(1, 2, vec![]);
        assert_eq!(answer(&h, &ROOT, reply).status, Errno::EINVAL as i32);
        let mut req = Frame::request(1, 2, vec![]);
        req.status = 5;
        assert_eq!(answer(&h, &ROOT, req).status, Errno::EINVAL as i32);
    }
}
