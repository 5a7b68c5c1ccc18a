//! Finding the control socket of the filesystem a command is about: the
//! one rule fsctl and cleanerd share.
//!
//! A target may be the control socket itself, a device, image file or NBD
//! name (the socket fsd names after it, [`default_socket_path`]), a mount
//! point or any path inside an lfs mount (the mount's device, from
//! /proc/self/mountinfo); with no target, the filesystem holding the
//! current directory. (Not to be confused with [`crate::targets`], the
//! fuzz targets.)

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use crate::path::{default_socket_path, default_socket_path_for, is_nbd_name};

/// The mount type fsd registers.
pub const FSTYPE: &str = "fuse.lfs";

/// Where mounts are listed.
const MOUNTINFO: &str = "/proc/self/mountinfo";

/// Why a target names no control socket.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    /// The target (or the mount table, or the current directory) could
    /// not be read.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done, naming the path.
        what: String,
        /// The error (in the message, so not also a `source()`).
        cause: io::Error,
    },
    /// The target is not on an lfs mount.
    #[error("{0} is not on an lfs mount (give a mount point, a path inside one, its device or its control socket)")]
    NotLfs(PathBuf),
    /// The socket path derived from the device is unusable.
    #[error("{0}")]
    BadSocketPath(String),
}

fn io_error(what: String) -> impl FnOnce(io::Error) -> TargetError {
    move |cause| TargetError::Io { what, cause }
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &str) -> String {
    let mut out = Vec::with_capacity(field.len());
    let mut rest = field.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        if first == b'\\' {
            if let Some(&[a, b, c]) = tail.get(..3) {
                if [a, b, c].iter().all(|d| (b'0'..=b'7').contains(d)) {
                    let v = (u32::from(a - b'0') << 6)
                        | (u32::from(b - b'0') << 3)
                        | u32::from(c - b'0');
                    if let Ok(v) = u8::try_from(v) {
                        out.push(v);
                        rest = tail.get(3..).unwrap_or_default();
                        continue;
                    }
                }
            }
        }
        out.push(first);
        rest = tail;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One mount of the mount table.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MountEntry {
    mountpoint: PathBuf,
    fstype: String,
    source: String,
    /// A FUSE mount's `user_id=` (the user who mounted it), if shown.
    user_id: Option<u32>,
}

/// Every mount listed in `text`, in mountinfo(5) format.
fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let mp = pre.split(' ').nth(4)?;
            let mut post = post.split(' ');
            let fstype = post.next()?;
            let source = post.next()?;
            let user_id = post.next().and_then(|opts| {
                opts.split(',')
                    .find_map(|o| o.strip_prefix("user_id="))
                    .and_then(|u| u.parse().ok())
            });
            Some(MountEntry {
                mountpoint: PathBuf::from(unescape(mp)),
                fstype: fstype.to_string(),
                source: unescape(source),
                user_id,
            })
        })
        .collect()
}

/// What a target names.
///
/// Sockets are found by name, and a name is not an identity: two images
/// called `ok.img` in two directories get the same default socket, so the
/// fsd answering there may serve the other one. [`Resolved::device`] is
/// what the answering fsd must serve (checked with [`same_device`]
/// against the device GET_SUPER reports) before anything is asked of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// A control socket given as the target: whoever answers there.
    Socket(PathBuf),
    /// An lfs mount holding the target, and the socket fsd names after
    /// its device.
    Mount {
        /// The mount's device (its source in the mount table).
        device: PathBuf,
        /// The socket fsd names after it.
        socket: PathBuf,
    },
    /// A device, image file or NBD name outside any lfs mount, and the
    /// socket an fsd serving it would have: if none answers there, the
    /// device itself can still be read.
    Device {
        /// The device as given.
        device: PathBuf,
        /// The socket fsd names after it.
        socket: PathBuf,
    },
}

impl Resolved {
    /// The control socket to try.
    pub fn socket(&self) -> &Path {
        match self {
            Resolved::Socket(s)
            | Resolved::Mount { socket: s, .. }
            | Resolved::Device { socket: s, .. } => s,
        }
    }

    /// The device the fsd on [`Resolved::socket`] must serve; `None` for a
    /// socket given as such.
    pub fn device(&self) -> Option<&Path> {
        match self {
            Resolved::Socket(_) => None,
            Resolved::Mount { device, .. } | Resolved::Device { device, .. } => Some(device),
        }
    }
}

/// Whether `served`, the device an fsd says it serves (GET_SUPER's
/// `device`), is `device`: the same block device (`st_rdev`) or the same
/// file (`st_dev`, `st_ino`), whatever path names it; NBD names (which
/// name no file) and paths that cannot be looked up must be equal as
/// written.
pub fn same_device(device: &Path, served: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    let served = Path::new(served);
    if is_nbd_name(device) || is_nbd_name(served) {
        return device == served;
    }
    match (std::fs::metadata(device), std::fs::metadata(served)) {
        (Ok(a), Ok(b)) => {
            let (ab, bb) = (
                a.file_type().is_block_device(),
                b.file_type().is_block_device(),
            );
            if ab || bb {
                ab && bb && a.rdev() == b.rdev()
            } else {
                a.dev() == b.dev() && a.ino() == b.ino()
            }
        }
        _ => device == served,
    }
}

/// The control socket for `target` (see the module doc).
pub fn socket_for(target: Option<&Path>) -> Result<PathBuf, TargetError> {
    resolve(target).map(|r| r.socket().to_path_buf())
}

/// What `target` names (see the module doc).
pub fn resolve(target: Option<&Path>) -> Result<Resolved, TargetError> {
    let path = match target {
        Some(p) => p.to_path_buf(),
        None => {
            std::env::current_dir().map_err(io_error("finding the current directory".into()))?
        }
    };
    let device = |path: PathBuf| {
        // Mounted? Then the mount says where its fsd's socket is (a
        // user's mount keeps it in that user's directory), whatever
        // name the device was given by.
        if let Some(m) = mount_serving(&path)? {
            return mount_socket(m);
        }
        // fsd names its socket after the device's canonical path.
        let named = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        let socket = default_socket_path(&named).map_err(TargetError::BadSocketPath)?;
        Ok(Resolved::Device {
            device: path,
            socket,
        })
    };
    if is_nbd_name(&path) {
        // An NBD export names no file: the socket fsd names after it.
        return device(path);
    }
    let meta =
        std::fs::metadata(&path).map_err(io_error(format!("cannot use {}", path.display())))?;
    let ft = meta.file_type();
    if ft.is_socket() {
        return Ok(Resolved::Socket(path));
    }
    let mount = mount_of(&path)?;
    if (ft.is_block_device() || ft.is_file()) && mount.is_none() {
        // A device or image, not a file inside an lfs mount: the socket
        // fsd names after it.
        return device(path);
    }
    match mount {
        Some(m) => mount_socket(m),
        None => Err(TargetError::NotLfs(path)),
    }
}

/// The socket of the fsd serving mount `m` (a user's fsd keeps it in
/// that user's directory).
fn mount_socket(m: MountEntry) -> Result<Resolved, TargetError> {
    let device = PathBuf::from(live_source(&m.source));
    let socket = match m.user_id {
        Some(uid) => default_socket_path_for(&device, uid),
        None => default_socket_path(&device),
    }
    .map_err(TargetError::BadSocketPath)?;
    Ok(Resolved::Mount { device, socket })
}

/// The live lfs mount of `device`, if one is in the mount table.
fn mount_serving(device: &Path) -> Result<Option<MountEntry>, TargetError> {
    let text =
        std::fs::read_to_string(MOUNTINFO).map_err(io_error(format!("reading {MOUNTINFO}")))?;
    Ok(parse_mountinfo(&text).into_iter().find(|m| {
        m.fstype == FSTYPE && live_source(&m.source) == m.source && same_device(device, &m.source)
    }))
}

/// The device of the live filesystem for a mount's source: fsd names a
/// checkpoint it mounts beside the live one `DEVICE@CNO`.
fn live_source(source: &str) -> &str {
    match source.rsplit_once('@') {
        Some((dev, cno)) if !cno.is_empty() && cno.bytes().all(|b| b.is_ascii_digit()) => dev,
        _ => source,
    }
}

/// The lfs mount holding `path`.
fn mount_of(path: &Path) -> Result<Option<MountEntry>, TargetError> {
    let canon =
        std::fs::canonicalize(path).map_err(io_error(format!("resolving {}", path.display())))?;
    let text =
        std::fs::read_to_string(MOUNTINFO).map_err(io_error(format!("reading {MOUNTINFO}")))?;
    let best = parse_mountinfo(&text)
        .into_iter()
        .filter(|m| canon.starts_with(&m.mountpoint))
        .max_by_key(|m| m.mountpoint.as_os_str().len());
    Ok(best.filter(|m| m.fstype == FSTYPE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape("plain"), "plain");
        assert_eq!(unescape("end\\04"), "end\\04");
        assert_eq!(unescape("\\134x"), "\\x");
        assert_eq!(unescape("\\999"), "\\999");
    }

    #[test]
    fn mountinfo_lines() {
        let text = "36 35 98:0 / /mnt/my\\040data rw,noatime master:1 - fuse.lfs /dev/vdb rw,user_id=1000,group_id=1000\n\
                    37 35 98:0 / /proc rw - proc proc rw\ngarbage\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[0],
            MountEntry {
                mountpoint: PathBuf::from("/mnt/my data"),
                fstype: "fuse.lfs".into(),
                source: "/dev/vdb".into(),
                user_id: Some(1000),
            }
        );
        assert_eq!(m[1].user_id, None);
    }

    #[test]
    fn checkpoint_mounts_lead_to_the_live_filesystem() {
        assert_eq!(live_source("/dev/vdb@12"), "/dev/vdb");
        assert_eq!(live_source("/srv/a@b.img"), "/srv/a@b.img");
        assert_eq!(live_source("/srv/x.img@"), "/srv/x.img@");
        assert_eq!(live_source("/srv/x.img"), "/srv/x.img");
    }

    #[test]
    fn nbd_names_resolve_to_the_socket_fsd_names_after_them() {
        assert_eq!(
            socket_for(Some(Path::new("nbd://127.0.0.1:10809/img"))).unwrap(),
            PathBuf::from("/run/lfs/nbd-127.0.0.1-10809-img.sock")
        );
    }

    #[test]
    fn a_path_outside_any_lfs_mount_is_refused() {
        let e = socket_for(Some(Path::new("/proc"))).unwrap_err();
        assert!(matches!(e, TargetError::NotLfs(_)), "{e}");
        assert!(e.to_string().contains("not on an lfs mount"), "{e}");
    }

    #[test]
    fn devices_are_the_same_by_identity_not_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let (one, other) = (a.join("ok.img"), b.join("ok.img"));
        std::fs::write(&one, b"1").unwrap();
        std::fs::write(&other, b"2").unwrap();
        let link = dir.path().join("link.img");
        std::os::unix::fs::symlink(&one, &link).unwrap();
        let shown = |p: &Path| p.to_str().unwrap().to_owned();
        assert!(same_device(&one, &shown(&one)));
        assert!(same_device(&link, &shown(&one)));
        assert!(!same_device(&other, &shown(&one)));
        assert!(!same_device(&other, "ok.img"));
        assert!(same_device(Path::new("nbd://h/x"), "nbd://h/x"));
        assert!(!same_device(Path::new("nbd://h/x"), "nbd://h/y"));
        assert!(same_device(Path::new("/gone/x"), "/gone/x"));
    }

    #[test]
    fn sockets_and_images_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("x.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert_eq!(socket_for(Some(&sock)).unwrap(), sock);
        let img = dir.path().join("lfs.img");
        std::fs::write(&img, b"").unwrap();
        assert_eq!(
            socket_for(Some(&img)).unwrap(),
            PathBuf::from("/run/lfs/lfs.img.sock")
        );
        assert_eq!(
            resolve(Some(&sock)).unwrap(),
            Resolved::Socket(sock.clone())
        );
        assert_eq!(
            resolve(Some(&img)).unwrap(),
            Resolved::Device {
                device: img.clone(),
                socket: PathBuf::from("/run/lfs/lfs.img.sock")
            }
        );
        let e = socket_for(Some(&dir.path().join("missing"))).unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
    }
}
