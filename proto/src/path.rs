//! Where control sockets live: the rule fsd uses to name its socket and
//! fsctl uses to find it from a device or mount.

use std::path::{Path, PathBuf};

/// Where the default control socket goes: `SOCKET_DIR/<device name>.sock`.
pub const SOCKET_DIR: &str = "/run/lfs";
/// Suffix of the default control socket's name.
pub const SOCKET_SUFFIX: &str = ".sock";
/// Longest socket path in bytes: `sun_path` holds 108 bytes with the NUL.
pub const SOCKET_PATH_MAX: usize = 107;

/// The default control socket for `device`:
/// `/run/lfs/<device file name>.sock`.
pub fn default_socket_path(device: &Path) -> Result<PathBuf, String> {
    let name = device.file_name().ok_or_else(|| {
        format!(
            "{} has no file name to name the socket after",
            device.display()
        )
    })?;
    let mut file = name.to_os_string();
    file.push(SOCKET_SUFFIX);
    let path = Path::new(SOCKET_DIR).join(file);
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
