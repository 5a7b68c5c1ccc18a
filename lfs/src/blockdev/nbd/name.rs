//! NBD device names, as the commands take them:
//!
//! * `nbd://HOST[:PORT]/EXPORT`: TCP, port [`DEFAULT_PORT`] unless given;
//!   HOST may be a name, an IPv4 address or `[IPv6]`.
//! * `nbd+unix:///EXPORT?socket=PATH`: a Unix socket.
//!
//! This is the subset of the NBD URI format (`doc/uri.md` of the nbd
//! project) that lfs needs: no TLS (`nbds`), no other query parameters.
//! EXPORT is percent-decoded and may be empty (the server's default
//! export). Every error names the input.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// The IANA port of NBD.
pub const DEFAULT_PORT: u16 = 10809;
/// Scheme of TCP names.
pub const SCHEME_TCP: &str = "nbd://";
/// Scheme of Unix socket names.
pub const SCHEME_UNIX: &str = "nbd+unix://";

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// TCP: host (without brackets for IPv6) and port.
    Tcp {
        /// Host name or address.
        host: String,
        /// TCP port.
        port: u16,
    },
    /// A Unix socket path.
    Unix(PathBuf),
}

/// A parsed NBD device name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NbdAddress {
    /// Where to connect.
    pub endpoint: Endpoint,
    /// The export name (decoded).
    pub export: String,
    /// The name as the user wrote it, for messages.
    pub original: String,
}

/// True if `name` is written as an NBD name (any `nbd...://` scheme), so
/// it must parse as one rather than be taken for a file path.
pub fn looks_like_nbd(name: &str) -> bool {
    name.split_once("://")
        .is_some_and(|(scheme, _)| scheme.starts_with("nbd"))
}

fn invalid(name: &str, why: impl fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{name:?} is not a valid NBD device name: {why} (expected \
             nbd://HOST[:PORT]/EXPORT or nbd+unix:///EXPORT?socket=PATH)"
        ),
    )
}

/// Decodes `%XX` escapes.
fn percent_decode(name: &str, s: &str) -> io::Result<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b != b'%' {
            out.push(b);
            continue;
        }
        let hex: Option<u8> = match (bytes.next(), bytes.next()) {
            (Some(h), Some(l)) => std::str::from_utf8(&[h, l])
                .ok()
                .and_then(|t| u8::from_str_radix(t, 16).ok()),
            _ => None,
        };
        match hex {
            Some(v) => out.push(v),
            None => return Err(invalid(name, "a % is not followed by two hex digits")),
        }
    }
    String::from_utf8(out).map_err(|_| invalid(name, "the export name is not UTF-8"))
}

/// Splits `HOST[:PORT]`, with `[v6]` brackets.
fn parse_authority(name: &str, auth: &str) -> io::Result<(String, u16)> {
    let (host, port) = if let Some(rest) = auth.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| invalid(name, "an IPv6 address lacks its closing ]"))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| invalid(name, "junk after the IPv6 address"))?,
            ),
        };
        (host, port)
    } else {
        match auth.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (auth, None),
        }
    };
    if host.is_empty() {
        return Err(invalid(name, "the host is empty"));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => n,
            _ => return Err(invalid(name, format!("{p:?} is not a port number"))),
        },
    };
    Ok((host.to_string(), port))
}

impl NbdAddress {
    /// Parses an NBD device name.
    pub fn parse(name: &str) -> io::Result<NbdAddress> {
        let (endpoint, export) = if let Some(rest) = name.strip_prefix(SCHEME_UNIX) {
            let (path, query) = rest
                .split_once('?')
                .ok_or_else(|| invalid(name, "the ?socket=PATH part is missing"))?;
            let export = path
                .strip_prefix('/')
                .ok_or_else(|| invalid(name, "nbd+unix names have no host (use nbd+unix:///)"))?;
            let mut socket = None;
            for pair in query.split('&') {
                match pair.split_once('=') {
                    Some(("socket", p)) if !p.is_empty() => {
                        socket = Some(PathBuf::from(percent_decode(name, p)?))
                    }
                    _ => {
                        return Err(invalid(
                            name,
                            format!("unknown or empty query parameter {pair:?}"),
                        ))
                    }
                }
            }
            let socket = socket.ok_or_else(|| invalid(name, "socket=PATH is missing"))?;
            (Endpoint::Unix(socket), export)
        } else if let Some(rest) = name.strip_prefix(SCHEME_TCP) {
            if rest.contains('?') {
                return Err(invalid(name, "nbd:// names take no query parameters"));
            }
            let (auth, export) = rest.split_once('/').unwrap_or((rest, ""));
            let (host, port) = parse_authority(name, auth)?;
            (Endpoint::Tcp { host, port }, export)
        } else {
            let scheme = name.split_once("://").map_or(name, |(s, _)| s);
            let why = if scheme.starts_with("nbds") {
                format!("{scheme}:// (NBD over TLS) is not supported")
            } else {
                format!("unknown scheme {scheme:?}")
            };
            return Err(invalid(name, why));
        };
        Ok(NbdAddress {
            endpoint,
            export: percent_decode(name, export)?,
            original: name.to_string(),
        })
    }
}

impl fmt::Display for NbdAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.original)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(name: &str) -> (String, u16, String) {
        let a = NbdAddress::parse(name).unwrap();
        match a.endpoint {
            Endpoint::Tcp { host, port } => (host, port, a.export),
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn tcp_names() {
        assert_eq!(
            tcp("nbd://127.0.0.1/img"),
            ("127.0.0.1".into(), 10809, "img".into())
        );
        assert_eq!(
            tcp("nbd://host:1234/a/b"),
            ("host".into(), 1234, "a/b".into())
        );
        assert_eq!(tcp("nbd://[::1]:99/x"), ("::1".into(), 99, "x".into()));
        assert_eq!(tcp("nbd://[::1]/x"), ("::1".into(), 10809, "x".into()));
        assert_eq!(tcp("nbd://h"), ("h".into(), 10809, "".into()));
        assert_eq!(tcp("nbd://h/"), ("h".into(), 10809, "".into()));
        assert_eq!(
            tcp("nbd://h/my%20disk"),
            ("h".into(), 10809, "my disk".into())
        );
    }

    #[test]
    fn unix_names() {
        let a = NbdAddress::parse("nbd+unix:///img?socket=/run/nbd.sock").unwrap();
        assert_eq!(a.endpoint, Endpoint::Unix("/run/nbd.sock".into()));
        assert_eq!(a.export, "img");
        assert_eq!(a.to_string(), "nbd+unix:///img?socket=/run/nbd.sock");
        let a = NbdAddress::parse("nbd+unix:///?socket=s").unwrap();
        assert_eq!(a.export, "");
    }

    #[test]
    fn bad_names_are_refused_naming_the_input() {
        for (name, why) in [
            ("nbd:///img", "host is empty"),
            ("nbd://h:0/x", "not a port"),
            ("nbd://h:99999/x", "not a port"),
            ("nbd://h:port/x", "not a port"),
            ("nbd://[::1/x", "closing ]"),
            ("nbd://h/x?socket=/s", "no query"),
            ("nbd+unix:///img", "socket=PATH"),
            ("nbd+unix://host/img?socket=/s", "no host"),
            ("nbd+unix:///img?socket=", "query parameter"),
            ("nbd+unix:///img?sock=/s", "query parameter"),
            ("nbds://h/x", "TLS"),
            ("nbd+ssh://h/x", "unknown scheme"),
            ("nbd://h/%zz", "hex digits"),
            ("nbd://h/%ff", "UTF-8"),
        ] {
            let e = NbdAddress::parse(name).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{name}");
            let msg = e.to_string();
            assert!(msg.contains(why), "{name}: {msg}");
            assert!(msg.contains(&format!("{name:?}")), "{name}: {msg}");
        }
    }

    #[test]
    fn only_nbd_schemes_look_like_nbd() {
        assert!(looks_like_nbd("nbd://h/x"));
        assert!(looks_like_nbd("nbd+unix:///x?socket=s"));
        assert!(looks_like_nbd("nbds://h/x"));
        assert!(!looks_like_nbd("/dev/vdb"));
        assert!(!looks_like_nbd("lfs.img"));
        assert!(!looks_like_nbd("./nbd"));
    }
}
