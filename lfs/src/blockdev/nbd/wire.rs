//! The NBD wire format: the constants of the protocol and the encoding of
//! every message the client sends or reads, as plain functions on byte
//! arrays. No I/O happens here.
//!
//! Source: the NBD protocol specification (`doc/proto.md` of the
//! NetworkBlockDevice/nbd project). Every number is big-endian ("network
//! byte order"). Decoders take fixed-size arrays or slices and return a
//! typed [`WireError`] on anything unexpected; they never index or unwrap
//! (the lints at the top of `nbd/mod.rs` deny it).

use std::fmt;

/// `NBDMAGIC`, the first 8 bytes every server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: the newstyle magic after [`NBDMAGIC`], and the prefix of
/// every option the client sends.
pub const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
/// The oldstyle magic after [`NBDMAGIC`] (`cliserv_magic`): a server too
/// old for named exports.
pub const CLISERV_MAGIC: u64 = 0x0000_4202_8186_1253;
/// Magic of every option reply in fixed newstyle negotiation.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of a transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of a simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Magic of a structured reply chunk (never negotiated by this client).
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Handshake flag: the server speaks fixed newstyle.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag: the server can omit the 124 zero bytes.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flag: the client speaks fixed newstyle.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag: omit the 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Transmission flag: always set by a conforming server.
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
/// Transmission flag: the export is read-only.
pub const FLAG_READ_ONLY: u16 = 1 << 1;
/// Transmission flag: the server accepts `NBD_CMD_FLUSH`.
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
/// Transmission flag: the server accepts `NBD_CMD_FLAG_FUA`.
pub const FLAG_SEND_FUA: u16 = 1 << 3;
/// Transmission flag: the server accepts `NBD_CMD_TRIM`.
pub const FLAG_SEND_TRIM: u16 = 1 << 5;

/// `NBD_OPT_EXPORT_NAME`: choose an export and enter transmission (no
/// error reply possible).
pub const OPT_EXPORT_NAME: u32 = 1;
/// `NBD_OPT_ABORT`: end negotiation.
pub const OPT_ABORT: u32 = 2;
/// `NBD_OPT_GO`: choose an export with information replies and errors.
pub const OPT_GO: u32 = 7;

/// `NBD_REP_ACK`: the option succeeded.
pub const REP_ACK: u32 = 1;
/// `NBD_REP_INFO`: one piece of information about the export.
pub const REP_INFO: u32 = 3;
/// Bit 31 marks an error reply.
pub const REP_FLAG_ERROR: u32 = 1 << 31;
/// `NBD_REP_ERR_UNSUP`: the server does not know the option.
pub const REP_ERR_UNSUP: u32 = REP_FLAG_ERROR | 1;
/// `NBD_REP_ERR_POLICY`: the server forbids it.
pub const REP_ERR_POLICY: u32 = REP_FLAG_ERROR | 2;
/// `NBD_REP_ERR_INVALID`: the option was malformed.
pub const REP_ERR_INVALID: u32 = REP_FLAG_ERROR | 3;
/// `NBD_REP_ERR_PLATFORM`: not supported on the server's platform.
pub const REP_ERR_PLATFORM: u32 = REP_FLAG_ERROR | 4;
/// `NBD_REP_ERR_TLS_REQD`: the server insists on TLS.
pub const REP_ERR_TLS_REQD: u32 = REP_FLAG_ERROR | 5;
/// `NBD_REP_ERR_UNKNOWN`: no such export.
pub const REP_ERR_UNKNOWN: u32 = REP_FLAG_ERROR | 6;
/// `NBD_REP_ERR_SHUTDOWN`: the server is shutting down.
pub const REP_ERR_SHUTDOWN: u32 = REP_FLAG_ERROR | 7;
/// `NBD_REP_ERR_BLOCK_SIZE_REQD`: block size constraints must be asked.
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = REP_FLAG_ERROR | 8;
/// `NBD_REP_ERR_TOO_BIG`: the request or reply is too large.
pub const REP_ERR_TOO_BIG: u32 = REP_FLAG_ERROR | 9;

/// `NBD_INFO_EXPORT`: size and transmission flags.
pub const INFO_EXPORT: u16 = 0;
/// `NBD_INFO_BLOCK_SIZE`: minimum, preferred and maximum block sizes.
pub const INFO_BLOCK_SIZE: u16 = 3;

/// `NBD_CMD_READ`.
pub const CMD_READ: u16 = 0;
/// `NBD_CMD_WRITE`.
pub const CMD_WRITE: u16 = 1;
/// `NBD_CMD_DISC`: soft disconnect; no reply.
pub const CMD_DISC: u16 = 2;
/// `NBD_CMD_FLUSH`.
pub const CMD_FLUSH: u16 = 3;
/// `NBD_CMD_TRIM`.
pub const CMD_TRIM: u16 = 4;
/// Command flag `NBD_CMD_FLAG_FUA`: reply only once the data is durable.
pub const CMD_FLAG_FUA: u16 = 1 << 0;

/// `NBD_ESHUTDOWN`: the server is going away; the client must disconnect.
pub const ESHUTDOWN: u32 = 108;

/// Bytes of a request header.
pub const REQUEST_LEN: usize = 28;
/// Bytes of a simple reply header.
pub const SIMPLE_REPLY_LEN: usize = 16;
/// Bytes of an option reply header.
pub const OPTION_REPLY_LEN: usize = 20;
/// Bytes of the server's first message (two magics and the handshake
/// flags).
pub const GREETING_LEN: usize = 18;
/// Bytes the server sends after `NBD_OPT_EXPORT_NAME` (size, flags), not
/// counting the 124 optional zero bytes.
pub const EXPORT_NAME_REPLY_LEN: usize = 10;
/// The zero bytes that follow unless `NBD_FLAG_C_NO_ZEROES` was agreed.
pub const EXPORT_NAME_ZEROES: usize = 124;
/// The spec's limit on strings (export names, error messages).
pub const MAX_STRING: usize = 4096;

/// A message that breaks the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, WireError> {
    Err(WireError(msg.into()))
}

/// Reads big-endian fields from a slice front to back; running out is an
/// error, never a panic.
pub struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor(bytes)
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        match self.0.split_first_chunk::<N>() {
            Some((head, rest)) => {
                self.0 = rest;
                Ok(*head)
            }
            None => err(format!(
                "message too short: {N} more bytes expected, {} left",
                self.0.len()
            )),
        }
    }

    /// The next big-endian u16.
    pub fn u16(&mut self) -> Result<u16, WireError> {
        self.take().map(u16::from_be_bytes)
    }

    /// The next big-endian u32.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        self.take().map(u32::from_be_bytes)
    }

    /// The next big-endian u64.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        self.take().map(u64::from_be_bytes)
    }
}

/// What the server's first message says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Greeting {
    /// Handshake flags.
    pub flags: u16,
}

/// Decodes the server's greeting.
pub fn decode_greeting(bytes: &[u8; GREETING_LEN]) -> Result<Greeting, WireError> {
    let mut c = Cursor::new(bytes);
    let magic = c.u64()?;
    if magic != NBDMAGIC {
        return err(format!(
            "not an NBD server (first 8 bytes {magic:#018x}, expected NBDMAGIC)"
        ));
    }
    match c.u64()? {
        IHAVEOPT => Ok(Greeting { flags: c.u16()? }),
        CLISERV_MAGIC => err(
            "the server speaks only the oldstyle handshake, which has no export names; \
             use a newstyle server",
        ),
        other => err(format!(
            "unknown handshake magic {other:#018x} (expected IHAVEOPT)"
        )),
    }
}

/// An option request: `IHAVEOPT`, the option, its data.
pub fn encode_option(option: u32, data: &[u8]) -> Result<Vec<u8>, WireError> {
    let len = u32::try_from(data.len())
        .map_err(|_| WireError(format!("option data of {} bytes", data.len())))?;
    let mut out = Vec::with_capacity(16 + data.len());
    out.extend_from_slice(&IHAVEOPT.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(data);
    Ok(out)
}

/// The data of `NBD_OPT_GO` for `name`, asking for the listed
/// information types.
pub fn go_data(name: &[u8], infos: &[u16]) -> Result<Vec<u8>, WireError> {
    if name.len() > MAX_STRING {
        return err(format!(
            "export name of {} bytes; NBD allows at most {MAX_STRING}",
            name.len()
        ));
    }
    let name_len = u32::try_from(name.len()).map_err(|_| WireError("export name".into()))?;
    let count = u16::try_from(infos.len()).map_err(|_| WireError("info requests".into()))?;
    let mut out = Vec::with_capacity(6 + name.len() + 2 * infos.len());
    out.extend_from_slice(&name_len.to_be_bytes());
    out.extend_from_slice(name);
    out.extend_from_slice(&count.to_be_bytes());
    for info in infos {
        out.extend_from_slice(&info.to_be_bytes());
    }
    Ok(out)
}

/// The header of an option reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionReply {
    /// The option it answers.
    pub option: u32,
    /// `NBD_REP_*`.
    pub kind: u32,
    /// Bytes of data that follow.
    pub len: u32,
}

/// Decodes an option reply header; `expected` is the option just sent.
pub fn decode_option_reply(
    bytes: &[u8; OPTION_REPLY_LEN],
    expected: u32,
) -> Result<OptionReply, WireError> {
    let mut c = Cursor::new(bytes);
    let magic = c.u64()?;
    if magic != OPTION_REPLY_MAGIC {
        return err(format!("bad option reply magic {magic:#018x}"));
    }
    let reply = OptionReply {
        option: c.u32()?,
        kind: c.u32()?,
        len: c.u32()?,
    };
    if reply.option != expected {
        return err(format!(
            "option reply for option {} while waiting for option {expected}",
            reply.option
        ));
    }
    Ok(reply)
}

/// What the server says about the export: size, flags, block sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExportInfo {
    /// Size in bytes.
    pub size: u64,
    /// Transmission flags (`FLAG_*`).
    pub flags: u16,
    /// Minimum block size, if the server said (requests must be multiples).
    pub min_block: Option<u32>,
    /// Maximum block size, if the server said (no request may be larger).
    pub max_block: Option<u32>,
}

/// One `NBD_REP_INFO` payload, folded into `info`. Unknown types are
/// ignored, as the spec asks; a known type with the wrong length is an
/// error. Returns true if it was `NBD_INFO_EXPORT`.
pub fn apply_info(payload: &[u8], info: &mut ExportInfo) -> Result<bool, WireError> {
    let mut c = Cursor::new(payload);
    let kind = c.u16()?;
    match kind {
        INFO_EXPORT if payload.len() == 12 => {
            info.size = c.u64()?;
            info.flags = c.u16()?;
            Ok(true)
        }
        INFO_BLOCK_SIZE if payload.len() == 14 => {
            let min = c.u32()?;
            let _preferred = c.u32()?;
            let max = c.u32()?;
            if min == 0 || max < min {
                return err(format!(
                    "nonsensical block sizes: minimum {min}, maximum {max}"
                ));
            }
            info.min_block = Some(min);
            info.max_block = Some(max);
            Ok(false)
        }
        INFO_EXPORT | INFO_BLOCK_SIZE => err(format!(
            "information reply of type {kind} with {} bytes",
            payload.len()
        )),
        _ => Ok(false),
    }
}

/// The reply to `NBD_OPT_EXPORT_NAME`: size and transmission flags.
pub fn decode_export_name_reply(
    bytes: &[u8; EXPORT_NAME_REPLY_LEN],
) -> Result<(u64, u16), WireError> {
    let mut c = Cursor::new(bytes);
    Ok((c.u64()?, c.u16()?))
}

/// The name of an option error reply type, for messages.
pub fn rep_error_name(kind: u32) -> String {
    match kind {
        REP_ERR_UNSUP => "NBD_REP_ERR_UNSUP (option not supported)".into(),
        REP_ERR_POLICY => "NBD_REP_ERR_POLICY (forbidden by server policy)".into(),
        REP_ERR_INVALID => "NBD_REP_ERR_INVALID (request invalid)".into(),
        REP_ERR_PLATFORM => "NBD_REP_ERR_PLATFORM (not supported on the server)".into(),
        REP_ERR_TLS_REQD => "NBD_REP_ERR_TLS_REQD (the server requires TLS)".into(),
        REP_ERR_UNKNOWN => "NBD_REP_ERR_UNKNOWN (no such export)".into(),
        REP_ERR_SHUTDOWN => "NBD_REP_ERR_SHUTDOWN (the server is shutting down)".into(),
        REP_ERR_BLOCK_SIZE_REQD => "NBD_REP_ERR_BLOCK_SIZE_REQD".into(),
        REP_ERR_TOO_BIG => "NBD_REP_ERR_TOO_BIG".into(),
        other => format!("error reply {:#x}", other),
    }
}

/// A transmission request header. The data of a write follows it.
pub fn encode_request(
    flags: u16,
    command: u16,
    handle: u64,
    offset: u64,
    len: u32,
) -> [u8; REQUEST_LEN] {
    let mut out = [0u8; REQUEST_LEN];
    let fields: [&[u8]; 6] = [
        &REQUEST_MAGIC.to_be_bytes(),
        &flags.to_be_bytes(),
        &command.to_be_bytes(),
        &handle.to_be_bytes(),
        &offset.to_be_bytes(),
        &len.to_be_bytes(),
    ];
    let mut rest: &mut [u8] = &mut out;
    for field in fields {
        let (head, tail) = rest.split_at_mut(field.len());
        head.copy_from_slice(field);
        rest = tail;
    }
    out
}

/// A simple reply header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimpleReply {
    /// 0, or an NBD error number (errno values).
    pub error: u32,
    /// The request's handle.
    pub handle: u64,
}

/// Decodes a simple reply header. A structured reply is an error: this
/// client never negotiates them, so a server that sends one is broken.
pub fn decode_simple_reply(bytes: &[u8; SIMPLE_REPLY_LEN]) -> Result<SimpleReply, WireError> {
    let mut c = Cursor::new(bytes);
    match c.u32()? {
        SIMPLE_REPLY_MAGIC => Ok(SimpleReply {
            error: c.u32()?,
            handle: c.u64()?,
        }),
        STRUCTURED_REPLY_MAGIC => err("structured reply received, but none was negotiated"),
        other => err(format!("bad reply magic {other:#010x}")),
    }
}

/// The errno an NBD error number stands for, as a message.
pub fn nbd_error_name(error: u32) -> &'static str {
    match error {
        1 => "EPERM (operation not permitted)",
        5 => "EIO (input/output error)",
        12 => "ENOMEM (out of memory)",
        22 => "EINVAL (invalid argument)",
        28 => "ENOSPC (no space left on device)",
        75 => "EOVERFLOW (value too large)",
        95 => "ENOTSUP (operation not supported)",
        ESHUTDOWN => "ESHUTDOWN (server shutting down)",
        _ => "unknown error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magics_spell_their_names() {
        assert_eq!(&NBDMAGIC.to_be_bytes(), b"NBDMAGIC");
        assert_eq!(&IHAVEOPT.to_be_bytes(), b"IHAVEOPT");
    }

    #[test]
    fn greeting_accepts_newstyle_and_names_oldstyle() {
        let mut g = [0u8; GREETING_LEN];
        g[..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
        g[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
        g[16..].copy_from_slice(&3u16.to_be_bytes());
        assert_eq!(decode_greeting(&g), Ok(Greeting { flags: 3 }));
        g[8..16].copy_from_slice(&CLISERV_MAGIC.to_be_bytes());
        assert!(decode_greeting(&g).unwrap_err().0.contains("oldstyle"));
        g[..8].copy_from_slice(b"HTTP/1.1");
        assert!(decode_greeting(&g)
            .unwrap_err()
            .0
            .contains("not an NBD server"));
    }

    #[test]
    fn request_header_golden_bytes() {
        let r = encode_request(CMD_FLAG_FUA, CMD_WRITE, 0x0102_0304_0506_0708, 0x1000, 512);
        assert_eq!(
            r,
            [
                0x25, 0x60, 0x95, 0x13, 0, 1, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0x10,
                0, 0, 0, 2, 0
            ]
        );
    }

    #[test]
    fn go_data_layout() {
        let d = go_data(b"img", &[INFO_BLOCK_SIZE]).unwrap();
        assert_eq!(d, [0, 0, 0, 3, b'i', b'm', b'g', 0, 1, 0, 3]);
        assert!(go_data(&[b'x'; MAX_STRING + 1], &[]).is_err());
        let o = encode_option(OPT_GO, &d).unwrap();
        assert_eq!(&o[..8], b"IHAVEOPT");
        assert_eq!(&o[8..16], &[0, 0, 0, 7, 0, 0, 0, 11]);
    }

    #[test]
    fn option_reply_checks_magic_and_option() {
        let mut b = [0u8; OPTION_REPLY_LEN];
        b[..8].copy_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
        b[8..12].copy_from_slice(&OPT_GO.to_be_bytes());
        b[12..16].copy_from_slice(&REP_ERR_UNKNOWN.to_be_bytes());
        b[16..].copy_from_slice(&5u32.to_be_bytes());
        let r = decode_option_reply(&b, OPT_GO).unwrap();
        assert_eq!((r.kind, r.len), (REP_ERR_UNKNOWN, 5));
        assert!(decode_option_reply(&b, OPT_ABORT).is_err());
        b[1] = 0;
        assert!(decode_option_reply(&b, OPT_GO).is_err());
    }

    #[test]
    fn info_replies_fold_and_reject_bad_lengths() {
        let mut info = ExportInfo::default();
        let mut p = vec![0, 0];
        p.extend_from_slice(&(1u64 << 30).to_be_bytes());
        p.extend_from_slice(&(FLAG_HAS_FLAGS | FLAG_SEND_FLUSH).to_be_bytes());
        assert_eq!(apply_info(&p, &mut info), Ok(true));
        assert_eq!(info.size, 1 << 30);
        let mut b = vec![0, 3];
        for v in [512u32, 4096, 1 << 25] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        assert_eq!(apply_info(&b, &mut info), Ok(false));
        assert_eq!((info.min_block, info.max_block), (Some(512), Some(1 << 25)));
        assert!(apply_info(&p[..11], &mut info).is_err());
        assert!(apply_info(&[0], &mut info).is_err());
        assert_eq!(apply_info(&[0, 9, 1, 2, 3], &mut info), Ok(false));
        let mut bad = vec![0, 3];
        for v in [4096u32, 4096, 512] {
            bad.extend_from_slice(&v.to_be_bytes());
        }
        assert!(apply_info(&bad, &mut info).is_err());
    }

    #[test]
    fn simple_reply_decodes_and_refuses_structured() {
        let mut b = [0u8; SIMPLE_REPLY_LEN];
        b[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
        b[4..8].copy_from_slice(&5u32.to_be_bytes());
        b[8..].copy_from_slice(&42u64.to_be_bytes());
        assert_eq!(
            decode_simple_reply(&b),
            Ok(SimpleReply {
                error: 5,
                handle: 42
            })
        );
        b[..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
        assert!(decode_simple_reply(&b).is_err());
        b[..4].copy_from_slice(&[1, 2, 3, 4]);
        assert!(decode_simple_reply(&b).is_err());
    }

    #[test]
    fn decoders_never_panic_on_any_bytes() {
        use proptest::prelude::*;
        proptest!(|(bytes in proptest::collection::vec(any::<u8>(), 0..64))| {
            let mut info = ExportInfo::default();
            let _ = apply_info(&bytes, &mut info);
            let mut g = [0u8; GREETING_LEN];
            let mut r = [0u8; SIMPLE_REPLY_LEN];
            let mut o = [0u8; OPTION_REPLY_LEN];
            for (dst, src) in g.iter_mut().chain(r.iter_mut()).chain(o.iter_mut()).zip(bytes.iter()) {
                *dst = *src;
            }
            let _ = decode_greeting(&g);
            let _ = decode_simple_reply(&r);
            let _ = decode_option_reply(&o, OPT_GO);
        });
    }
}
