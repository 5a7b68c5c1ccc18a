//! Device names as the commands take them, and opening one: the single
//! place that decides between an image file or block device
//! ([`FileDevice`]) and an NBD export ([`NbdDevice`]).
//!
//! A name written `SCHEME://...` with an `nbd` scheme is an NBD name and
//! must parse as one (`nbd://HOST[:PORT]/EXPORT`,
//! `nbd+unix:///EXPORT?socket=PATH`); anything else is a path. (A file
//! whose name starts that way can still be given as `./nbd:...`.)

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::nbd::{looks_like_nbd, NbdAddress, NbdDevice, NbdOptions};
use super::{BlockDevice, FileDevice, OpenOptions};

/// What a device name names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceName {
    /// An image file or a block device node.
    File(PathBuf),
    /// An NBD export.
    Nbd(NbdAddress),
}

impl DeviceName {
    /// Parses a device name; a malformed NBD name is an
    /// [`io::ErrorKind::InvalidInput`] error naming it.
    pub fn parse(name: &Path) -> io::Result<DeviceName> {
        match name.to_str() {
            Some(s) if looks_like_nbd(s) => NbdAddress::parse(s).map(DeviceName::Nbd),
            _ => Ok(DeviceName::File(name.to_path_buf())),
        }
    }

    /// True for an NBD export.
    pub fn is_nbd(&self) -> bool {
        matches!(self, DeviceName::Nbd(_))
    }

    /// Opens it. For NBD, `read_only` is honoured, `direct` and
    /// `exclusive` do not apply (the server decides who may connect), and
    /// the other settings are [`NbdOptions`]'s defaults.
    pub fn open(&self, opts: OpenOptions) -> io::Result<Arc<dyn BlockDevice>> {
        Ok(match self {
            DeviceName::File(path) => Arc::new(FileDevice::open(path, opts)?),
            DeviceName::Nbd(addr) => Arc::new(NbdDevice::open(
                addr,
                NbdOptions {
                    read_only: opts.read_only,
                    ..NbdOptions::default()
                },
            )?),
        })
    }
}

impl fmt::Display for DeviceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceName::File(path) => write!(f, "{}", path.display()),
            DeviceName::Nbd(addr) => write!(f, "{addr}"),
        }
    }
}

/// Parses `name` and opens the device it names.
pub fn open_device(name: &Path, opts: OpenOptions) -> io::Result<Arc<dyn BlockDevice>> {
    DeviceName::parse(name)?.open(opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_nbd_names_are_told_apart() {
        assert_eq!(
            DeviceName::parse(Path::new("/dev/vdb")).unwrap(),
            DeviceName::File("/dev/vdb".into())
        );
        assert_eq!(
            DeviceName::parse(Path::new("./nbd://x")).unwrap(),
            DeviceName::File("./nbd://x".into())
        );
        let n = DeviceName::parse(Path::new("nbd://127.0.0.1:10900/img")).unwrap();
        assert!(n.is_nbd());
        assert_eq!(n.to_string(), "nbd://127.0.0.1:10900/img");
        let e = DeviceName::parse(Path::new("nbd://:1/x")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("nbd://:1/x"), "{e}");
    }

    #[test]
    fn open_device_opens_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.img");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(1 << 20)
            .unwrap();
        let dev = open_device(&path, OpenOptions::default()).unwrap();
        assert_eq!(dev.len(), 1 << 20);
        let e = open_device(Path::new("nbd+unix:///x"), OpenOptions::default()).unwrap_err();
        assert!(e.to_string().contains("socket=PATH"), "{e}");
    }
}
