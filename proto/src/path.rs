//! Where control sockets live: the rule fsd uses to name its socket and
//! fsctl uses to find it from a device or mount.

use std::path::{Path, PathBuf};

/// Where root's default control sockets go: `SOCKET_DIR/<device name>.sock`.
pub const SOCKET_DIR: &str = "/run/lfs";
/// The directory under a user's runtime directory that holds that user's
/// default control sockets.
pub const USER_SOCKET_SUBDIR: &str = "lfs";

/// The directory of the default control sockets of the filesystems user
/// `uid` mounts: root's in [`SOCKET_DIR`]; any other user's in that
/// user's runtime directory (only root may create files in /run):
/// `$XDG_RUNTIME_DIR/lfs` for the user running, if set, else
/// `/run/user/UID/lfs` (what the variable usually says).
pub fn socket_dir_for(uid: u32) -> PathBuf {
    if uid == 0 {
        return PathBuf::from(SOCKET_DIR);
    }
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty() && uid == nix::unistd::geteuid().as_raw())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format!("/run/user/{uid}")));
    runtime.join(USER_SOCKET_SUBDIR)
}

/// The directory of this user's default control sockets
/// ([`socket_dir_for`] the effective user).
pub fn socket_dir() -> PathBuf {
    socket_dir_for(nix::unistd::geteuid().as_raw())
}
/// Suffix of the default control socket's name.
pub const SOCKET_SUFFIX: &str = ".sock";
/// Longest socket path in bytes: `sun_path` holds 108 bytes with the NUL.
pub const SOCKET_PATH_MAX: usize = 107;

/// True if `device` is written as an NBD device name (`nbd://...`,
/// `nbd+unix://...`: any `nbd` scheme), which names no file.
pub fn is_nbd_name(device: &Path) -> bool {
    device
        .to_str()
        .and_then(|s| s.split_once("://"))
        .is_some_and(|(scheme, _)| scheme.starts_with("nbd"))
}

/// The socket file name for an NBD device name: the scheme and the rest
/// of the name with every run of characters other than ASCII letters,
/// digits, `.` and `_` turned into one `-`: `nbd://10.0.0.5:10809/vol1`
/// → `nbd-10.0.0.5-10809-vol1`, `nbd+unix:///img?socket=/run/q.sock` →
/// `nbd-unix-img-socket-run-q.sock`. Derived from the name as written, so
/// write it the same way for fsd and fsctl.
fn nbd_socket_stem(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// The default control socket for `device`:
/// `/run/lfs/<device file name>.sock`, or for an NBD name
/// `/run/lfs/<name made a file name>.sock` (see `nbd_socket_stem`); for a
/// user other than root in [`socket_dir`] instead of /run/lfs.
pub fn default_socket_path(device: &Path) -> Result<PathBuf, String> {
    default_socket_path_in(&socket_dir(), device)
}

/// [`default_socket_path`] in the socket directory of user `uid` (the
/// owner of a mount fsctl was pointed at).
pub fn default_socket_path_for(device: &Path, uid: u32) -> Result<PathBuf, String> {
    default_socket_path_in(&socket_dir_for(uid), device)
}

fn default_socket_path_in(dir: &Path, device: &Path) -> Result<PathBuf, String> {
    if is_nbd_name(device) {
        let stem = nbd_socket_stem(&device.to_string_lossy());
        let path = dir.join(format!("{stem}{SOCKET_SUFFIX}"));
        validate_socket_path(&path)?;
        return Ok(path);
    }
    let name = device.file_name().ok_or_else(|| {
        format!(
            "{} has no file name to name the socket after",
            device.display()
        )
    })?;
    let mut file = name.to_os_string();
    file.push(SOCKET_SUFFIX);
    let path = dir.join(file);
    validate_socket_path(&path)?;
    Ok(path)
}

/// Checks that `path` can name a Unix socket: absolute, with a file name,
/// and short enough for `sun_path`.
pub fn validate_socket_path(path: &Path) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    let len = path.as_os_str().as_bytes().len();
    if !path.is_absolute() {
        return Err(format!("{} is not an absolute path", path.display()));
    }
    if path.file_name().is_none() {
        return Err(format!("{} does not name a file", path.display()));
    }
    if len > SOCKET_PATH_MAX {
        return Err(format!(
            "{} is {len} bytes long; a socket path holds at most {SOCKET_PATH_MAX}",
            path.display()
        ));
    }
    Ok(())
}

/// Suffix of a cleanerd control socket: it replaces [`SOCKET_SUFFIX`] of
/// the fsd socket it serves.
pub const CLEANERD_SOCKET_SUFFIX: &str = ".cleanerd.sock";

/// The control socket of the cleanerd that cleans the filesystem served
/// on `fsd_socket`: beside it, with `.sock` replaced by `.cleanerd.sock`
/// (appended if the name does not end in `.sock`).
pub fn cleanerd_socket_path(fsd_socket: &Path) -> Result<PathBuf, String> {
    use std::os::unix::ffi::OsStrExt;
    let name = fsd_socket
        .file_name()
        .ok_or_else(|| format!("{} does not name a socket file", fsd_socket.display()))?
        .as_bytes();
    let stem = name.strip_suffix(SOCKET_SUFFIX.as_bytes()).unwrap_or(name);
    let mut file = std::ffi::OsStr::from_bytes(stem).to_os_string();
    file.push(CLEANERD_SOCKET_SUFFIX);
    let path = fsd_socket.with_file_name(file);
    validate_socket_path(&path)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nbd_names_get_a_socket_named_after_them() {
        let p = |s: &str| default_socket_path(Path::new(s)).unwrap();
        assert_eq!(
            p("nbd://10.0.0.5:10809/vol1"),
            PathBuf::from("/run/lfs/nbd-10.0.0.5-10809-vol1.sock")
        );
        assert_eq!(
            p("nbd+unix:///img?socket=/run/q.sock"),
            PathBuf::from("/run/lfs/nbd-unix-img-socket-run-q.sock.sock")
        );
        assert_eq!(p("nbd://h/a/b"), PathBuf::from("/run/lfs/nbd-h-a-b.sock"));
        assert!(is_nbd_name(Path::new("nbd://h/x")));
        assert!(!is_nbd_name(Path::new("/dev/nbd0")));
        let long = format!("nbd://h/{}", "x".repeat(120));
        assert!(default_socket_path(Path::new(&long)).is_err());
    }

    #[test]
    fn users_sockets_go_to_their_runtime_directory() {
        assert_eq!(socket_dir_for(0), PathBuf::from("/run/lfs"));
        assert_eq!(
            socket_dir_for(4_000_000),
            PathBuf::from("/run/user/4000000/lfs")
        );
        assert_eq!(
            default_socket_path_for(Path::new("/srv/u.img"), 4_000_000).unwrap(),
            PathBuf::from("/run/user/4000000/lfs/u.img.sock")
        );
    }

    #[test]
    fn cleanerd_socket_beside_fsd_socket() {
        assert_eq!(
            cleanerd_socket_path(Path::new("/run/lfs/vdb.sock")).unwrap(),
            PathBuf::from("/run/lfs/vdb.cleanerd.sock")
        );
        assert_eq!(
            cleanerd_socket_path(Path::new("/tmp/ctl")).unwrap(),
            PathBuf::from("/tmp/ctl.cleanerd.sock")
        );
        assert!(cleanerd_socket_path(Path::new("relative.sock")).is_err());
        let long = format!("/{}.sock", "x".repeat(100));
        assert!(cleanerd_socket_path(Path::new(&long)).is_err());
    }
}
