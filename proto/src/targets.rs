//! The fuzz entry point of the protocol decoders, shared by cargo-fuzz
//! (`fuzz/fuzz_targets/proto_frame.rs`) and the ordinary tests
//! (`proto/tests/corpus.rs` runs it over the committed corpus in
//! `fuzz/corpus/proto_frame/`, random inputs and mutations).
//!
//! The input is a byte stream as a server or client would read it: frames
//! one after the other. Each frame is decoded with
//! [`decode_frame`], then its payload with the
//! message type of its code and kind (the request type for a request, the
//! reply type for a successful reply; an error reply, to any code, has
//! nothing to interpret). The verdict is the first error, or `Ok` when every frame
//! decoded. Rejecting the input is fine; panicking is a bug.
//!
//! Whatever decodes is also checked as an oracle: the frame re-encodes to
//! the bytes it came from, and so does the message (decoding is
//! canonical). The `assert!`s below are that oracle and the only way the
//! target panics on purpose.

use crate::codes;
use crate::frame::{decode_frame, Frame, FrameError, Kind};
use crate::msg::{
    ChangeCpmode, CleanSegments, DecodeError, DeleteCheckpoint, Freeze, GetCpinfo, GetCpstat,
    GetDf, GetDiff, GetSegSummary, GetStats, GetSuinfo, GetSuper, GetSustat, GetVinfo, Message,
    MountCheckpoint, Request, SetSuinfo, Sync, Thaw, UmountCheckpoint,
};

/// What the target rejected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    /// A frame did not decode.
    #[error("frame: {0}")]
    Frame(FrameError),
    /// A frame carries a code this version does not serve.
    #[error("code {0:#010x} is unknown or reserved")]
    UnknownCode(u32),
    /// A payload did not decode as its code's message.
    #[error("payload: {0}")]
    Payload(DecodeError),
}

/// The name the corpus uses for the kind of `err`: a file named
/// `bad-<kind>-*` in `fuzz/corpus/proto_frame/` must be rejected with an
/// error of that kind, a file named `good-*` accepted.
pub fn error_kind(err: &TargetError) -> &'static str {
    match err {
        TargetError::Frame(e) => match e {
            FrameError::Eof => "eof",
            FrameError::Io(_) => "io",
            FrameError::BadMagic { .. } => "magic",
            FrameError::BadVersion { .. } => "version",
            FrameError::TooLarge { .. } => "toolarge",
            FrameError::Truncated { .. } => "truncated",
            FrameError::BadHeader { .. } => "header",
        },
        TargetError::UnknownCode(_) => "code",
        TargetError::Payload(e) => match e {
            DecodeError::Truncated { .. } => "short",
            DecodeError::TrailingBytes { .. } => "trailing",
            DecodeError::BadCount { .. } => "count",
            DecodeError::BadUtf8 { .. } => "utf8",
            DecodeError::InvalidField { .. } => "field",
        },
    }
}

/// Every kind [`error_kind`] can return.
pub const ERROR_KINDS: &[&str] = &[
    "eof",
    "io",
    "magic",
    "version",
    "toolarge",
    "truncated",
    "header",
    "code",
    "short",
    "trailing",
    "count",
    "utf8",
    "field",
];

/// Decodes `payload` as `M` and checks that it re-encodes to itself.
fn message<M: Message + std::fmt::Debug>(payload: &[u8]) -> Result<(), TargetError> {
    let m = M::decode(payload).map_err(TargetError::Payload)?;
    assert_eq!(m.encode(), payload, "{m:?} does not re-encode to its bytes");
    Ok(())
}

/// The payload of `frame` as the request type `R` or its reply.
fn payload_of<R: Request + std::fmt::Debug>(frame: &Frame) -> Result<(), TargetError>
where
    R::Reply: std::fmt::Debug,
{
    match frame.kind {
        Kind::Request => message::<R>(&frame.payload),
        Kind::Reply if frame.status == 0 => message::<R::Reply>(&frame.payload),
        Kind::Reply => Ok(()),
    }
}

/// Decodes the payload of one frame according to its code. An error reply
/// (to any code, unknown ones included) has nothing to decode.
pub fn payload(frame: &Frame) -> Result<(), TargetError> {
    if frame.kind == Kind::Reply && frame.status != 0 {
        return Ok(());
    }
    match frame.code {
        codes::GET_SUSTAT => payload_of::<GetSustat>(frame),
        codes::GET_SUINFO => payload_of::<GetSuinfo>(frame),
        codes::GET_CPSTAT => payload_of::<GetCpstat>(frame),
        codes::GET_CPINFO => payload_of::<GetCpinfo>(frame),
        codes::SYNC => payload_of::<Sync>(frame),
        codes::GET_VINFO => payload_of::<GetVinfo>(frame),
        codes::GET_SEG_SUMMARY => payload_of::<GetSegSummary>(frame),
        codes::GET_SUPER => payload_of::<GetSuper>(frame),
        codes::GET_STATS => payload_of::<GetStats>(frame),
        codes::GET_DF => payload_of::<GetDf>(frame),
        codes::CHANGE_CPMODE => payload_of::<ChangeCpmode>(frame),
        codes::DELETE_CHECKPOINT => payload_of::<DeleteCheckpoint>(frame),
        codes::CLEAN_SEGMENTS => payload_of::<CleanSegments>(frame),
        codes::SET_SUINFO => payload_of::<SetSuinfo>(frame),
        codes::GET_DIFF => payload_of::<GetDiff>(frame),
        codes::MOUNT_CHECKPOINT => payload_of::<MountCheckpoint>(frame),
        codes::UMOUNT_CHECKPOINT => payload_of::<UmountCheckpoint>(frame),
        codes::FREEZE => payload_of::<Freeze>(frame),
        codes::THAW => payload_of::<Thaw>(frame),
        other => Err(TargetError::UnknownCode(other)),
    }
}

/// The fuzz target: every frame of `data` and its payload.
pub fn proto_frame(data: &[u8]) -> Result<(), TargetError> {
    let mut rest = data;
    while !rest.is_empty() {
        let (frame, used) = decode_frame(rest).map_err(TargetError::Frame)?;
        let (this, next) = rest.split_at_checked(used).unwrap_or((rest, &[]));
        let again = frame.encode().map_err(TargetError::Frame)?;
        assert_eq!(again, this, "{frame:?} does not re-encode to its bytes");
        payload(&frame)?;
        rest = next;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{Df, Sustat};

    #[test]
    fn empty_input_is_accepted() {
        assert!(matches!(proto_frame(&[]), Ok(())));
    }

    #[test]
    fn a_stream_of_frames_is_checked_frame_by_frame() {
        let mut s = Frame::request(codes::GET_DF, 1, vec![]).encode().unwrap();
        s.extend(
            Frame::reply(codes::GET_DF, 1, Df::default().encode())
                .encode()
                .unwrap(),
        );
        s.extend(Frame::error(codes::GET_SUSTAT, 2, 1).encode().unwrap());
        assert!(matches!(proto_frame(&s), Ok(())));
        s.extend(
            Frame::reply(
                codes::GET_SUSTAT,
                3,
                Sustat::default().encode()[..79].to_vec(),
            )
            .encode()
            .unwrap(),
        );
        let e = proto_frame(&s).unwrap_err();
        assert_eq!(error_kind(&e), "short");
    }

    #[test]
    fn unknown_codes_are_unknown() {
        // 'L' 0x9f, no direction: not assigned.
        let unknown = 0x0000_4c9f;
        assert_eq!(codes::name(unknown), None);
        let f = Frame::request(unknown, 1, vec![]).encode().unwrap();
        assert!(matches!(
            proto_frame(&f),
            Err(TargetError::UnknownCode(c)) if c == unknown
        ));
    }
}
