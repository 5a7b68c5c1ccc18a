//! fsd as mount(8)'s helper. For an fstab line (or `mount -t`) of type
//! `fuse.lfs` or `lfs`, mount(8) runs `/sbin/mount.fuse.lfs` or
//! `/sbin/mount.lfs`, which `make install` links to fsd, as
//!
//! ```text
//! mount.fuse.lfs SPEC DIR [-s] [-f] [-n] [-v] [-o OPTIONS] [-t TYPE]
//! ```
//!
//! (mount(8)'s "external helpers" convention). fsd started by one of
//! those names reads these arguments, then runs as `fsd --daemon -o
//! OPTIONS SPEC DIR`: it returns once the filesystem is mounted, with fsd
//! serving it in the background.

use std::ffi::OsString;
use std::path::PathBuf;

/// The names mount(8) runs a helper by for lfs's two type names.
pub const NAMES: &[&str] = &["mount.fuse.lfs", "mount.lfs"];

/// What mount(8) passed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HelperArgs {
    /// SPEC: the device or image file.
    pub device: PathBuf,
    /// DIR: the mount point.
    pub mountpoint: PathBuf,
    /// `-o`, as given (several are joined).
    pub options: Vec<String>,
    /// `-s`: sloppy, unknown options are left alone.
    pub sloppy: bool,
    /// `-f`: fake, check everything and mount nothing.
    pub fake: bool,
    /// `-v`: verbose.
    pub verbose: bool,
}

/// Parses a helper's arguments (after the program name).
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<HelperArgs, String> {
    let mut out = HelperArgs::default();
    let mut positional = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        match text.as_ref() {
            "-o" => {
                let value = args.next().ok_or("-o needs a value")?;
                out.options.push(value.to_string_lossy().into_owned());
            }
            "-t" => {
                let value = args.next().ok_or("-t needs a value")?;
                let t = value.to_string_lossy();
                if !matches!(t.as_ref(), "lfs" | "fuse.lfs" | "fuseblk.lfs") {
                    return Err(format!("-t {t}: this helper mounts lfs"));
                }
            }
            "-N" => return Err("-N (another mount namespace) is not supported".into()),
            flags if flags.starts_with('-') && flags.len() > 1 && !flags.starts_with("--") => {
                for c in flags[1..].chars() {
                    match c {
                        's' => out.sloppy = true,
                        'f' => out.fake = true,
                        'n' => {}
                        'v' => out.verbose = true,
                        other => return Err(format!("unknown option -{other}")),
                    }
                }
            }
            _ => positional.push(PathBuf::from(arg)),
        }
    }
    match <[PathBuf; 2]>::try_from(positional) {
        Ok([device, mountpoint]) => {
            out.device = device;
            out.mountpoint = mountpoint;
            Ok(out)
        }
        Err(p) => Err(format!(
            "expected SPEC and DIR, got {} argument(s) (usage: mount.fuse.lfs SPEC DIR \
             [-sfnv] [-o OPTIONS])",
            p.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Result<HelperArgs, String> {
        parse(a.iter().map(OsString::from))
    }

    #[test]
    fn mount_8_arguments() {
        let a = args(&["/srv/a.img", "/mnt/a", "-o", "rw,noatime,_netdev"]).unwrap();
        assert_eq!(a.device, PathBuf::from("/srv/a.img"));
        assert_eq!(a.mountpoint, PathBuf::from("/mnt/a"));
        assert_eq!(a.options, ["rw,noatime,_netdev"]);
        assert!(!a.fake && !a.sloppy);
        let a = args(&["-sfnv", "d", "m", "-t", "fuse.lfs"]).unwrap();
        assert!(a.fake && a.sloppy && a.verbose);
        let a = args(&["d", "m", "-s", "-n"]).unwrap();
        assert!(a.sloppy);
        assert!(args(&["d"]).is_err());
        assert!(args(&["d", "m", "x"]).is_err());
        assert!(args(&["d", "m", "-o"]).is_err());
        assert!(args(&["d", "m", "-t", "ext4"]).is_err());
        assert!(args(&["d", "m", "-N", "/proc/1/ns/mnt"]).is_err());
        assert!(args(&["d", "m", "-x"]).is_err());
    }
}
