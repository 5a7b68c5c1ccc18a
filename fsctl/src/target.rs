//! Connecting to the fsd that serves a target. Which socket a target
//! names is decided by [`lfs_proto::target`], shared with cleanerd; that
//! the fsd answering there serves the device the target names is checked
//! here, before anything is asked of it: a socket is found by the
//! device's file name, and two images of one name share it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use lfs::inspect::read_superblocks;
use lfs::inspect::SuperblockBytes;
use lfs_proto::msg::{GetSuper, Super};
use lfs_proto::path::is_nbd_name;
use lfs_proto::target::{resolve, same_device, Resolved};
use lfs_proto::Client;

use crate::cmd::open_read_only;
use crate::fail::Fault;

/// Connects to the daemon serving `target`, having checked that it
/// serves the device the target names.
pub fn connect(target: Option<&Path>) -> Result<Client> {
    let resolved = resolve(target)?;
    let mut client = connect_to(resolved.socket())?;
    check_serves(&resolved, &mut client)?;
    Ok(client)
}

/// The control socket of the fsd serving `target`, checked as
/// [`connect`] checks it (`fsctl clean`: cleanerd's socket lies beside
/// it).
pub fn verified_socket(target: Option<&Path>) -> Result<PathBuf> {
    let resolved = resolve(target)?;
    let mut client = connect_to(resolved.socket())?;
    check_serves(&resolved, &mut client)?;
    Ok(resolved.socket().to_path_buf())
}

/// Connects to the daemon on `socket`, saying what went wrong when none
/// answers: nothing listens there, or this user may not connect.
pub fn connect_to(socket: &Path) -> Result<Client> {
    Client::connect(socket).map_err(|e| {
        let reason = lfs_common::report::io_reason(&e);
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            Fault::Denied(format!(
                "permission denied connecting to {} ({reason}); fsd's socket admits \
                 its owner and group (fsd(8), SECURITY)",
                socket.display()
            ))
            .into()
        } else {
            Fault::NoFsd(format!(
                "no fsd answers on {}; is the filesystem mounted? (fsd --socket changes \
                 the path: pass the socket as the target)",
                socket.display()
            ))
            .into()
        }
    })
}

/// Refuses an fsd that serves another device than the one `resolved`
/// names.
fn check_serves(resolved: &Resolved, client: &mut Client) -> Result<()> {
    let Some(device) = resolved.device() else {
        return Ok(());
    };
    let socket = resolved.socket();
    let sup = client
        .call(&GetSuper)
        .with_context(|| format!("asking the fsd on {} what it serves", socket.display()))?;
    if serves(device, &sup) {
        return Ok(());
    }
    Err(Fault::NoFsd(format!(
        "no fsd serves {}: the fsd on {} serves {} (fsd names its socket after the \
         device's file name; give the other fsd's --socket as the target)",
        device.display(),
        socket.display(),
        sup.device
    ))
    .into())
}

/// Whether the fsd that sent `sup` serves `device`: the same device
/// ([`same_device`]) and, where this user can read it, the same
/// filesystem (the current superblocks' uuids agree). An NBD export
/// cannot be read beside fsd: its name is its identity.
pub fn serves(device: &Path, sup: &Super) -> bool {
    if !same_device(device, &sup.device) {
        return false;
    }
    if is_nbd_name(device) {
        return true;
    }
    let Ok(here) = open_read_only(device).and_then(|d| Ok(read_superblocks(d.as_ref())?)) else {
        return true;
    };
    let there = SuperblockBytes {
        device_bytes: sup.device_bytes,
        primary: sup.primary.clone(),
        secondary_offset: sup.secondary_offset,
        secondary: sup.secondary.clone(),
    }
    .decode();
    match (here.current(), there.current()) {
        (Some(a), Some(b)) => a.uuid == b.uuid,
        _ => false,
    }
}
