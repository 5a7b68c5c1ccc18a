//! Frames: the unit of the stream, a 32-byte header and a payload.
//!
//! ```text
//! offset size field
//!      0    4 magic        the bytes "LFSP" (as a LE u32: 0x5053464c)
//!      4    2 version      1
//!      6    2 kind         0 request, 1 reply
//!      8    4 code         request code (crate::codes); a reply repeats it
//!     12    4 length       payload bytes that follow, at most MAX_PAYLOAD
//!     16    8 id           request id; a reply repeats it
//!     24    4 status       i32: requests 0; replies 0 or a positive errno
//!     28    4 reserved     0
//!     32    length payload
//! ```
//!
//! Magic and version come first and stay where they are in every version,
//! so that a peer of another version is recognised before anything else is
//! read. A reader checks, in order: magic, version, length (a payload
//! longer than [`MAX_PAYLOAD`] is never read: the stream cannot continue),
//! then reads the payload, then checks kind and reserved (the payload has
//! been consumed, so after [`FrameError::BadHeader`] the stream is still in
//! step and the peer can be answered).

use std::io::{self, Read, Write};

/// The first four bytes of every frame, "LFSP", read as a little-endian u32.
pub const MAGIC: u32 = u32::from_le_bytes(*b"LFSP");
/// The protocol version this build speaks.
pub const VERSION: u16 = 1;
/// Size of the frame header.
pub const HEADER_LEN: usize = 32;
/// Largest payload of a frame, either way.
pub const MAX_PAYLOAD: usize = 1 << 20;
/// Bytes by which a payload buffer grows while it is read, so that a peer
/// announcing a large payload and sending little holds little memory.
const READ_CHUNK: usize = 64 << 10;

/// Request or reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Client to daemon.
    Request,
    /// Daemon to client, one per request, in order.
    Reply,
}

impl Kind {
    /// The wire value.
    pub fn to_raw(self) -> u16 {
        match self {
            Kind::Request => 0,
            Kind::Reply => 1,
        }
    }

    /// From the wire value.
    pub fn from_raw(v: u16) -> Option<Kind> {
        match v {
            0 => Some(Kind::Request),
            1 => Some(Kind::Reply),
            _ => None,
        }
    }
}

/// One frame (the header's constant fields are implied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Request or reply.
    pub kind: Kind,
    /// Request code.
    pub code: u32,
    /// Request id.
    pub id: u64,
    /// 0, or an errno (replies only). An error reply has an empty payload.
    pub status: i32,
    /// The payload, at most [`MAX_PAYLOAD`] bytes.
    pub payload: Vec<u8>,
}

impl Frame {
    /// A request.
    pub fn request(code: u32, id: u64, payload: Vec<u8>) -> Frame {
        Frame {
            kind: Kind::Request,
            code,
            id,
            status: 0,
            payload,
        }
    }

    /// A successful reply to request `id` of code `code`.
    pub fn reply(code: u32, id: u64, payload: Vec<u8>) -> Frame {
        Frame {
            kind: Kind::Reply,
            code,
            id,
            status: 0,
            payload,
        }
    }

    /// A failed reply: status `errno`, no payload.
    pub fn error(code: u32, id: u64, errno: i32) -> Frame {
        Frame {
            kind: Kind::Reply,
            code,
            id,
            status: errno,
            payload: Vec::new(),
        }
    }

    /// The frame's bytes: header then payload.
    pub fn encode(&self) -> Result<Vec<u8>, FrameError> {
        let len = match u32::try_from(self.payload.len()) {
            Ok(len) if self.payload.len() <= MAX_PAYLOAD => len,
            _ => {
                return Err(FrameError::TooLarge {
                    len: self.payload.len() as u64,
                    code: self.code,
                    id: self.id,
                })
            }
        };
        let mut out = Vec::with_capacity(HEADER_LEN + self.payload.len());
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.kind.to_raw().to_le_bytes());
        out.extend_from_slice(&self.code.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.status.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.payload);
        Ok(out)
    }
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The stream ended cleanly, before the first byte of a frame.
    #[error("connection closed")]
    Eof,
    /// Reading or writing failed (a timeout is `WouldBlock` or `TimedOut`).
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// Not an lfs control frame.
    #[error("bad frame magic {found:#010x} (expected {MAGIC:#010x}, \"LFSP\")")]
    BadMagic {
        /// The first four bytes, as a LE u32.
        found: u32,
    },
    /// A protocol version this build does not speak.
    #[error("unsupported protocol version {found} (this build speaks {VERSION})")]
    BadVersion {
        /// The version found.
        found: u16,
    },
    /// The payload is longer than [`MAX_PAYLOAD`]; it was not read.
    #[error("payload of {len} bytes exceeds the frame limit of {MAX_PAYLOAD} bytes")]
    TooLarge {
        /// The announced length.
        len: u64,
        /// The frame's code, for an error reply.
        code: u32,
        /// The frame's id, for an error reply.
        id: u64,
    },
    /// The stream ended inside a frame.
    #[error("truncated frame: {what} ends after {got} of {needed} bytes")]
    Truncated {
        /// "header" or "payload".
        what: &'static str,
        /// Bytes there were.
        got: usize,
        /// Bytes needed.
        needed: usize,
    },
    /// A header field holds a value this version does not allow. The whole
    /// frame was consumed: the stream is still in step.
    #[error("bad frame header: {field} is {value:#x}")]
    BadHeader {
        /// "kind" or "reserved".
        field: &'static str,
        /// The value found.
        value: u64,
        /// The frame's code, for an error reply.
        code: u32,
        /// The frame's id, for an error reply.
        id: u64,
    },
}

impl FrameError {
    /// The (code, id) an error reply to this frame would carry, if the
    /// header was read far enough to know them.
    pub fn reply_to(&self) -> Option<(u32, u64)> {
        match *self {
            FrameError::TooLarge { code, id, .. } | FrameError::BadHeader { code, id, .. } => {
                Some((code, id))
            }
            _ => None,
        }
    }

    /// Whether the stream can go on with the next frame.
    pub fn in_step(&self) -> bool {
        matches!(self, FrameError::BadHeader { .. })
    }
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
fn fill(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while let Some(rest) = buf.get_mut(got..).filter(|b| !b.is_empty()) {
        match r.read(rest) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn le_u16(b: &[u8; HEADER_LEN], at: usize) -> u16 {
    let mut v = [0; 2];
    if let Some(s) = b.get(at..at + 2) {
        v.copy_from_slice(s);
    }
    u16::from_le_bytes(v)
}

fn le_u32(b: &[u8; HEADER_LEN], at: usize) -> u32 {
    let mut v = [0; 4];
    if let Some(s) = b.get(at..at + 4) {
        v.copy_from_slice(s);
    }
    u32::from_le_bytes(v)
}

fn le_u64(b: &[u8; HEADER_LEN], at: usize) -> u64 {
    let mut v = [0; 8];
    if let Some(s) = b.get(at..at + 8) {
        v.copy_from_slice(s);
    }
    u64::from_le_bytes(v)
}

/// Reads one frame. Allocates at most [`MAX_PAYLOAD`] bytes, and no more
/// than 64 KiB beyond what the peer actually sent; never panics.
pub fn read_frame(r: &mut impl Read) -> Result<Frame, FrameError> {
    let mut h = [0u8; HEADER_LEN];
    match fill(r, &mut h)? {
        0 => return Err(FrameError::Eof),
        HEADER_LEN => {}
        got => {
            return Err(FrameError::Truncated {
                what: "header",
                got,
                needed: HEADER_LEN,
            })
        }
    }
    let magic = le_u32(&h, 0);
    if magic != MAGIC {
        return Err(FrameError::BadMagic { found: magic });
    }
    let version = le_u16(&h, 4);
    if version != VERSION {
        return Err(FrameError::BadVersion { found: version });
    }
    let kind = le_u16(&h, 6);
    let code = le_u32(&h, 8);
    let len = le_u32(&h, 12);
    let id = le_u64(&h, 16);
    let status = le_u32(&h, 24) as i32;
    let reserved = le_u32(&h, 28);
    let len = match usize::try_from(len) {
        Ok(n) if n <= MAX_PAYLOAD => n,
        _ => {
            return Err(FrameError::TooLarge {
                len: u64::from(len),
                code,
                id,
            })
        }
    };
    let mut payload = Vec::new();
    while payload.len() < len {
        let have = payload.len();
        let want = (len - have).min(READ_CHUNK);
        payload.reserve_exact(want);
        payload.resize(have + want, 0);
        let got = fill(r, payload.get_mut(have..).unwrap_or_default())?;
        if got < want {
            return Err(FrameError::Truncated {
                what: "payload",
                got: have + got,
                needed: len,
            });
        }
    }
    let Some(kind) = Kind::from_raw(kind) else {
        return Err(FrameError::BadHeader {
            field: "kind",
            value: u64::from(kind),
            code,
            id,
        });
    };
    if reserved != 0 {
        return Err(FrameError::BadHeader {
            field: "reserved",
            value: u64::from(reserved),
            code,
            id,
        });
    }
    Ok(Frame {
        kind,
        code,
        id,
        status,
        payload,
    })
}

/// Writes one frame with a single write call where the writer allows.
pub fn write_frame(w: &mut impl Write, frame: &Frame) -> Result<(), FrameError> {
    let bytes = frame.encode()?;
    w.write_all(&bytes)?;
    w.flush()?;
    Ok(())
}

/// Decodes the frame at the start of `data`; returns it and the bytes it
/// took. Exactly what [`read_frame`] does on a stream holding `data`
/// (an empty `data` is [`FrameError::Eof`]).
pub fn decode_frame(data: &[u8]) -> Result<(Frame, usize), FrameError> {
    let mut rest = data;
    let frame = read_frame(&mut rest)?;
    Ok((frame, data.len() - rest.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::testing::hex;
    use proptest::prelude::*;

    const GOLDEN: &str = "4c465350 0100 0000 854c0080 03000000 0700000000000000 00000000 00000000
                          aabbcc";

    #[test]
    fn golden_request() {
        let f = Frame::request(crate::codes::GET_SUSTAT, 7, vec![0xaa, 0xbb, 0xcc]);
        let bytes = hex(GOLDEN);
        assert_eq!(f.encode().unwrap(), bytes);
        assert_eq!(&bytes[..4], b"LFSP");
        let (g, used) = decode_frame(&bytes).unwrap();
        assert_eq!(g, f);
        assert_eq!(used, HEADER_LEN + 3);
    }

    #[test]
    fn golden_error_reply() {
        let f = Frame::error(0x1234_5678, u64::MAX, 25);
        let bytes = hex("4c465350 0100 0100 78563412 00000000 ffffffffffffffff 19000000 00000000");
        assert_eq!(f.encode().unwrap(), bytes);
        assert_eq!(decode_frame(&bytes).unwrap(), (f, HEADER_LEN));
    }

    #[test]
    fn empty_input_is_eof_and_short_input_truncated() {
        assert!(matches!(decode_frame(&[]), Err(FrameError::Eof)));
        let bytes = hex(GOLDEN);
        for len in 1..HEADER_LEN {
            assert!(matches!(
                decode_frame(&bytes[..len]),
                Err(FrameError::Truncated { what: "header", got, .. }) if got == len
            ));
        }
        for len in HEADER_LEN..bytes.len() {
            assert!(matches!(
                decode_frame(&bytes[..len]),
                Err(FrameError::Truncated { what: "payload", got, needed: 3 }) if got == len - HEADER_LEN
            ));
        }
    }

    #[test]
    fn magic_version_length_kind_reserved_are_checked() {
        let good = hex(GOLDEN);
        let patched = |at: usize, v: &[u8]| {
            let mut b = good.clone();
            b[at..at + v.len()].copy_from_slice(v);
            decode_frame(&b)
        };
        assert!(matches!(
            patched(0, b"LFSQ"),
            Err(FrameError::BadMagic { found }) if found == u32::from_le_bytes(*b"LFSQ")
        ));
        assert!(matches!(
            patched(4, &2u16.to_le_bytes()),
            Err(FrameError::BadVersion { found: 2 })
        ));
        let too_large = (MAX_PAYLOAD as u32 + 1).to_le_bytes();
        let e = patched(12, &too_large).unwrap_err();
        assert!(matches!(
            e,
            FrameError::TooLarge { len, id: 7, .. } if len == MAX_PAYLOAD as u64 + 1
        ));
        assert_eq!(e.reply_to(), Some((crate::codes::GET_SUSTAT, 7)));
        assert!(!e.in_step());
        let e = patched(6, &2u16.to_le_bytes()).unwrap_err();
        assert!(matches!(
            e,
            FrameError::BadHeader {
                field: "kind",
                value: 2,
                ..
            }
        ));
        assert!(e.in_step());
        assert!(matches!(
            patched(28, &[1, 0, 0, 0]),
            Err(FrameError::BadHeader {
                field: "reserved",
                value: 1,
                ..
            })
        ));
    }

    #[test]
    fn the_largest_payload_passes_and_one_more_byte_does_not() {
        let f = Frame::reply(1, 2, vec![0x5a; MAX_PAYLOAD]);
        let bytes = f.encode().unwrap();
        let (g, used) = decode_frame(&bytes).unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(g, f);
        let big = Frame::reply(1, 2, vec![0; MAX_PAYLOAD + 1]);
        assert!(matches!(
            big.encode(),
            Err(FrameError::TooLarge { len, .. }) if len == MAX_PAYLOAD as u64 + 1
        ));
        assert!(matches!(
            write_frame(&mut Vec::new(), &big),
            Err(FrameError::TooLarge { .. })
        ));
    }

    #[test]
    fn a_lying_length_is_not_preallocated() {
        // Claims MAX_PAYLOAD, sends 10 bytes: the buffer grew by one chunk.
        let mut b = Frame::request(1, 1, vec![]).encode().unwrap();
        b[12..16].copy_from_slice(&(MAX_PAYLOAD as u32).to_le_bytes());
        b.extend_from_slice(&[0; 10]);
        assert!(matches!(
            decode_frame(&b),
            Err(FrameError::Truncated {
                what: "payload",
                got: 10,
                needed: MAX_PAYLOAD
            })
        ));
    }

    /// A reader that returns one byte per call and `Interrupted` between.
    struct Trickle<'a>(&'a [u8], bool);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.1 = !self.1;
            if self.1 {
                return Err(io::ErrorKind::Interrupted.into());
            }
            match (self.0.split_first(), buf.first_mut()) {
                (Some((&b, rest)), Some(slot)) => {
                    *slot = b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn short_reads_and_interrupts_are_retried() {
        let bytes = hex(GOLDEN);
        let mut r = Trickle(&bytes, false);
        let f = read_frame(&mut r).unwrap();
        assert_eq!(f.payload, [0xaa, 0xbb, 0xcc]);
        assert!(matches!(read_frame(&mut r), Err(FrameError::Eof)));
    }

    #[test]
    fn io_errors_are_io() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::ErrorKind::TimedOut.into())
            }
        }
        assert!(matches!(
            read_frame(&mut Broken),
            Err(FrameError::Io(e)) if e.kind() == io::ErrorKind::TimedOut
        ));
    }

    #[test]
    fn frames_follow_each_other_on_a_stream() {
        let mut stream = Vec::new();
        let a = Frame::request(1, 1, b"one".to_vec());
        let b = Frame::error(2, 2, 22);
        write_frame(&mut stream, &a).unwrap();
        write_frame(&mut stream, &b).unwrap();
        let mut r = &stream[..];
        assert_eq!(read_frame(&mut r).unwrap(), a);
        assert_eq!(read_frame(&mut r).unwrap(), b);
        assert!(matches!(read_frame(&mut r), Err(FrameError::Eof)));
    }

    fn frame() -> impl Strategy<Value = Frame> {
        (
            any::<bool>(),
            any::<u32>(),
            any::<u64>(),
            any::<i32>(),
            proptest::collection::vec(any::<u8>(), 0..300),
        )
            .prop_map(|(reply, code, id, status, payload)| Frame {
                kind: if reply { Kind::Reply } else { Kind::Request },
                code,
                id,
                status,
                payload,
            })
    }

    proptest! {
        #[test]
        fn round_trips(f in frame(), tail in proptest::collection::vec(any::<u8>(), 0..8)) {
            let mut bytes = f.encode().unwrap();
            let len = bytes.len();
            bytes.extend_from_slice(&tail);
            let (g, used) = decode_frame(&bytes).unwrap();
            prop_assert_eq!(g, f);
            prop_assert_eq!(used, len);
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            if let Ok((f, used)) = decode_frame(&bytes) {
                prop_assert_eq!(f.encode().unwrap(), &bytes[..used]);
            }
        }

        #[test]
        fn random_bytes_after_a_valid_prefix_never_panic(
            len in 0u32..64,
            tail in proptest::collection::vec(any::<u8>(), 0..128),
        ) {
            let mut bytes = Frame::request(1, 1, vec![]).encode().unwrap();
            bytes[12..16].copy_from_slice(&len.to_le_bytes());
            bytes.extend_from_slice(&tail);
            if let Ok((f, used)) = decode_frame(&bytes) {
                prop_assert_eq!(f.encode().unwrap(), &bytes[..used]);
            }
        }
    }
}
