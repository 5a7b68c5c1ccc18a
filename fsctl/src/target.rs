//! Connecting to the fsd that serves a target. Which socket a target
//! names is decided by [`lfs_proto::target`], shared with cleanerd.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use lfs_proto::Client;

/// The control socket for `target` (see [`lfs_proto::target`]).
pub fn socket_for(target: Option<&Path>) -> Result<PathBuf> {
    Ok(lfs_proto::target::socket_for(target)?)
}

/// Connects to the daemon serving `target`, with a message that says what
/// to check when none does.
pub fn connect(target: Option<&Path>) -> Result<Client> {
    connect_to(&socket_for(target)?)
}

/// Connects to the daemon on `socket`, with the same message.
pub fn connect_to(socket: &Path) -> Result<Client> {
    Client::connect(socket).map_err(|e| {
        anyhow!(
            "no fsd answers on {} ({e}); is the filesystem mounted? (fsd --socket changes the path: pass the socket as the target)",
            socket.display()
        )
    })
}
