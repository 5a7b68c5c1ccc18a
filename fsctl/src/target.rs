//! Finding the control socket of the filesystem a command is about.
//!
//! A target may be the control socket itself, a device or image file (the
//! socket fsd names after it), a mount point or any path inside an lfs
//! mount (the mount's device, from /proc/self/mountinfo); with no target,
//! the filesystem holding the current directory.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use lfs_proto::path::default_socket_path;
use lfs_proto::Client;

/// The mount type fsd registers.
const FSTYPE: &str = "fuse.lfs";

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// (mount point, fstype, source) of every mount.
fn mounts() -> Result<Vec<(PathBuf, String, String)>> {
    let text =
        std::fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let mp = pre.split(' ').nth(4)?;
            let mut post = post.split(' ');
            let fstype = post.next()?;
            let source = post.next()?;
            Some((
                PathBuf::from(unescape(mp)),
                fstype.to_string(),
                unescape(source),
            ))
        })
        .collect())
}

/// The control socket for `target` (see the module doc).
pub fn socket_for(target: Option<&Path>) -> Result<PathBuf> {
    let path = match target {
        Some(p) => p.to_path_buf(),
        None => std::env::current_dir().context("finding the current directory")?,
    };
    let meta =
        std::fs::metadata(&path).with_context(|| format!("cannot use {}", path.display()))?;
    let ft = meta.file_type();
    if ft.is_socket() {
        return Ok(path);
    }
    if ft.is_block_device() || ft.is_file() {
        // A device or image: the socket fsd names after it, unless the
        // path is a file inside an lfs mount.
        if mount_of(&path)?.is_none() {
            return default_socket_path(&path).map_err(|e| anyhow!(e));
        }
    }
    match mount_of(&path)? {
        Some((_, source)) => {
            default_socket_path(Path::new(live_source(&source))).map_err(|e| anyhow!(e))
        }
        None => bail!(
            "{} is not on an lfs mount (give a mount point, a path inside one, its device or its control socket)",
            path.display()
        ),
    }
}

/// The device of the live filesystem for a mount's source: fsd names a
/// checkpoint it mounts beside the live one `DEVICE@CNO`.
fn live_source(source: &str) -> &str {
    match source.rsplit_once('@') {
        Some((dev, cno)) if !cno.is_empty() && cno.bytes().all(|b| b.is_ascii_digit()) => dev,
        _ => source,
    }
}

/// The lfs mount holding `path`: (mount point, source device).
fn mount_of(path: &Path) -> Result<Option<(PathBuf, String)>> {
    let canon =
        std::fs::canonicalize(path).with_context(|| format!("resolving {}", path.display()))?;
    let best = mounts()?
        .into_iter()
        .filter(|(mp, _, _)| canon.starts_with(mp))
        .max_by_key(|(mp, _, _)| mp.as_os_str().len());
    Ok(best
        .filter(|(_, t, _)| t == FSTYPE)
        .map(|(mp, _, src)| (mp, src)))
}

/// Connects to the daemon serving `target`, with a message that says what
/// to check when none does.
pub fn connect(target: Option<&Path>) -> Result<Client> {
    let socket = socket_for(target)?;
    Client::connect(&socket).map_err(|e| {
        anyhow!(
            "no fsd answers on {} ({e}); is the filesystem mounted? (fsd --socket changes the path: pass the socket as the target)",
            socket.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape("plain"), "plain");
        assert_eq!(unescape("end\\04"), "end\\04");
    }

    #[test]
    fn checkpoint_mounts_lead_to_the_live_filesystem() {
        assert_eq!(live_source("/dev/vdb@12"), "/dev/vdb");
        assert_eq!(live_source("/srv/a@b.img"), "/srv/a@b.img");
        assert_eq!(live_source("/srv/x.img@"), "/srv/x.img@");
        assert_eq!(live_source("/srv/x.img"), "/srv/x.img");
    }

    #[test]
    fn a_path_outside_any_lfs_mount_is_refused() {
        let e = socket_for(Some(Path::new("/proc")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not on an lfs mount"), "{e}");
    }
}
