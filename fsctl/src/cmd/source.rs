//! Where `super` and `dumpseg` read from: the fsd serving the target,
//! which reads the device where no write is in progress (and is the only
//! way to an NBD export that takes one client), or, when no fsd serves it,
//! the device itself. The output is the same either way.
//!
//! A mount point, a path inside a mount or a socket needs its fsd. A
//! device, image or NBD name is asked of the fsd whose socket the mount
//! table or its name leads to; if none answers, or the one that answers
//! serves another device (`crate::target::serves`), the device is read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use lfs::blockdev::BlockDevice;
use lfs::format::Superblock;
use lfs::inspect::{read_superblocks, SbCopy, SuperblockBytes, SuperblockPair};
use lfs_proto::msg::{GetSuper, Super, SUPER_CURRENT_PRIMARY, SUPER_CURRENT_SECONDARY};
use lfs_proto::path::is_nbd_name;
use lfs_proto::target::{resolve, Resolved};
use lfs_proto::Client;
use log::debug;

use super::{no_valid_superblock, open_read_only};
use crate::target::serves;

/// Where the structures are read.
pub enum Source {
    /// The fsd serving the target, with its answer to GET_SUPER.
    Live {
        /// The connection.
        client: Client,
        /// Both superblock copies as fsd read them.
        sup: Super,
    },
    /// The device, opened read-only, as named.
    Offline {
        /// The device.
        dev: Arc<dyn BlockDevice>,
        /// Its name as given.
        name: PathBuf,
    },
}

impl Source {
    /// The source for `target` (see the module doc).
    pub fn open(target: Option<&Path>) -> Result<Source> {
        let (device, socket) = match resolve(target)? {
            Resolved::Device { device, socket } => (device, socket),
            // A mounted device named as the target (not a path inside the
            // mount): its fsd if it answers, else the device itself (an
            // fsd started with another --socket).
            Resolved::Mount { socket, .. } if target.is_some_and(names_a_device) => {
                (target.map(Path::to_path_buf).unwrap_or_default(), socket)
            }
            _ => {
                let client = crate::target::connect(target)?;
                let socket = client.path().map(Path::to_path_buf).unwrap_or_default();
                return live(client, &socket);
            }
        };
        let Ok(client) = Client::connect(&socket) else {
            debug!(
                "no fsd answers on {}: reading {} itself",
                socket.display(),
                device.display()
            );
            return offline(device);
        };
        let source = live(client, &socket)?;
        match &source {
            Source::Live { sup, .. } if !serves(&device, sup) => {
                debug!(
                    "the fsd on {} serves another filesystem: reading {} itself",
                    socket.display(),
                    device.display()
                );
                offline(device)
            }
            _ => Ok(source),
        }
    }

    /// The device, as the output names it: as given, or as fsd was given
    /// it.
    pub fn device_name(&self) -> String {
        match self {
            Source::Live { sup, .. } => sup.device.clone(),
            Source::Offline { name, .. } => name.display().to_string(),
        }
    }

    /// Both superblocks and the current one (an error if neither is valid).
    pub fn superblocks(&self) -> Result<(SuperblockPair, Option<SbCopy>, Superblock)> {
        let (pair, current) = match self {
            Source::Live { sup, .. } => {
                let pair = live_pair(sup);
                let current = match sup.current {
                    SUPER_CURRENT_PRIMARY => Some(SbCopy::Primary),
                    SUPER_CURRENT_SECONDARY => Some(SbCopy::Secondary),
                    _ => None,
                };
                (pair, current)
            }
            Source::Offline { dev, .. } => {
                let pair = read_superblocks(dev.as_ref())?;
                let current = pair.current_copy();
                (pair, current)
            }
        };
        let sb = match current {
            Some(SbCopy::Primary) => pair.primary.as_ref().ok(),
            Some(SbCopy::Secondary) => pair.secondary.as_ref().ok(),
            None => None,
        }
        .cloned()
        .ok_or_else(|| no_valid_superblock(&self.device_name(), &pair))?;
        Ok((pair, current, sb))
    }
}

/// Whether `target` is a device, image file or NBD name rather than a
/// path inside a mount or a socket.
fn names_a_device(target: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    is_nbd_name(target)
        || std::fs::metadata(target).is_ok_and(|m| m.is_file() || m.file_type().is_block_device())
}

/// The pair decoded from what fsd sent.
fn live_pair(sup: &Super) -> SuperblockPair {
    SuperblockBytes {
        device_bytes: sup.device_bytes,
        primary: sup.primary.clone(),
        secondary_offset: sup.secondary_offset,
        secondary: sup.secondary.clone(),
    }
    .decode()
}

fn live(mut client: Client, socket: &Path) -> Result<Source> {
    let sup = client
        .call(&GetSuper)
        .with_context(|| format!("asking the fsd on {} (GET_SUPER)", socket.display()))?;
    debug!("reading through the fsd on {}", socket.display());
    Ok(Source::Live { client, sup })
}

fn offline(device: PathBuf) -> Result<Source> {
    let dev = open_read_only(&device)?;
    Ok(Source::Offline { dev, name: device })
}
