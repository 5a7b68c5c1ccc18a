//! systemd's readiness protocol (sd_notify(3)), for `Type=notify` units
//! (`systemd/fsd@.service`): when systemd starts fsd it sets
//! `NOTIFY_SOCKET`, and fsd sends `READY=1` once the filesystem is
//! mounted, so that units ordered after it find it mounted, and
//! `STOPPING=1` when it unmounts. Without the variable nothing is sent.

use std::os::unix::net::UnixDatagram;

use log::debug;

/// The variable systemd sets.
const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Sends `state` (`READY=1`, ...) to systemd, if it asked.
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os(NOTIFY_SOCKET) else {
        return;
    };
    let sent = UnixDatagram::unbound().and_then(|s| {
        let bytes = path.as_encoded_bytes();
        match bytes.strip_prefix(b"@") {
            // An abstract socket: `@` stands for the leading NUL.
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                s.send_to_addr(state.as_bytes(), &addr)
            }
            None => s.send_to(state.as_bytes(), &path),
        }
    });
    if let Err(e) = sent {
        debug!("telling systemd {state}: {e}");
    }
}
