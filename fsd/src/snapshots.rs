//! Checkpoints mounted read-only beside the live filesystem
//! (`fsctl mount CNO MOUNTPOINT`): each is another FUSE session of this
//! fsd, over a view that reads through the live engine, so cleaning keeps
//! the checkpoint's blocks and knows where they went.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::mount::Unmounter;
use lfs::fs::Fs;
use log::{info, warn};

/// One mounted checkpoint.
struct Mounted {
    cno: u64,
    unmounter: Unmounter,
    thread: Option<JoinHandle<()>>,
}

/// Why a mount or unmount request failed, as an errno and a log line.
#[derive(Debug)]
pub struct MountError {
    /// The errno to reply.
    pub errno: i32,
    /// What went wrong.
    pub why: String,
}

fn err(errno: i32, why: String) -> MountError {
    MountError { errno, why }
}

/// The checkpoints this fsd serves, by mount point.
pub struct Snapshots {
    fs: Arc<Fs>,
    device: String,
    /// fsd's `-o` flags, made read-only with default permissions.
    flags: crate::options::MountFlags,
    mounts: Arc<Mutex<BTreeMap<PathBuf, Mounted>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Snapshots {
    /// None mounted yet; `device` names the mounts (`DEVICE@CNO`).
    pub fn new(fs: Arc<Fs>, device: &Path, flags: &crate::options::MountFlags) -> Snapshots {
        Snapshots {
            fs,
            device: device.display().to_string(),
            flags: crate::options::MountFlags {
                read_only: true,
                default_permissions: true,
                ..flags.clone()
            },
            mounts: Arc::default(),
        }
    }

    /// Mounts checkpoint `cno` read-only at `path`.
    pub fn mount(&self, cno: u64, path: &str) -> Result<(), MountError> {
        let p = PathBuf::from(path);
        if !p.is_absolute() {
            return Err(err(
                nix::libc::EINVAL,
                format!("{path}: not an absolute path"),
            ));
        }
        match std::fs::metadata(&p) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(err(nix::libc::ENOTDIR, format!("{path}: not a directory"))),
            Err(e) => {
                return Err(err(
                    e.raw_os_error().unwrap_or(nix::libc::EIO),
                    format!("{path}: {e}"),
                ))
            }
        }
        let mut mounts = lock(&self.mounts);
        if mounts.contains_key(&p) {
            return Err(err(
                nix::libc::EBUSY,
                format!("{path}: a checkpoint is already mounted there"),
            ));
        }
        let view = self.fs.open_checkpoint(cno).map_err(|e| match e {
            lfs::Error::NotFound => err(
                nix::libc::ENOENT,
                format!("checkpoint {cno} does not exist or was deleted"),
            ),
            e => err(
                crate::errno::engine_error("mount checkpoint", 1, &e).code(),
                format!("opening checkpoint {cno}: {e}"),
            ),
        })?;
        let config = self.fuse_config(cno);
        let mut session = fuser::Session::new(crate::fuse::Adapter::new(view), &p, &config)
            .map_err(|e| {
                err(
                    e.raw_os_error().unwrap_or(nix::libc::EIO),
                    format!("FUSE mount of checkpoint {cno} on {path}: {e}"),
                )
            })?;
        let unmounter = Unmounter::new(session.unmount_callable());
        let registry = Arc::clone(&self.mounts);
        let key = p.clone();
        let thread = std::thread::Builder::new()
            .name(format!("fsd-cp{cno}"))
            .spawn(move || {
                if let Err(e) = session.run() {
                    warn!("checkpoint {cno} on {}: FUSE session: {e}", key.display());
                }
                // Unmounted from outside (umount(8)) or by `umount`: the
                // view (and the pin on the checkpoint) went with the session.
                lock(&registry).remove(&key);
                info!("checkpoint {cno} unmounted from {}", key.display());
            })
            .map_err(|e| err(nix::libc::EAGAIN, format!("starting a session thread: {e}")))?;
        mounts.insert(
            p,
            Mounted {
                cno,
                unmounter,
                thread: Some(thread),
            },
        );
        info!("checkpoint {cno} mounted read-only on {path}");
        Ok(())
    }

    /// Unmounts the checkpoint mounted at `path` and waits for its session.
    pub fn umount(&self, path: &str) -> Result<(), MountError> {
        let p = PathBuf::from(path);
        let thread = {
            let mut mounts = lock(&self.mounts);
            let m = mounts.get_mut(&p).ok_or_else(|| {
                err(
                    nix::libc::ENOENT,
                    format!("{path}: no checkpoint of this filesystem is mounted there"),
                )
            })?;
            if let Err(e) = m.unmounter.unmount() {
                return Err(err(
                    e as i32,
                    format!("unmounting checkpoint {} from {path}: {e}", m.cno),
                ));
            }
            m.thread.take()
        };
        if let Some(t) = thread {
            let _ = t.join();
        }
        Ok(())
    }

    /// Unmounts every checkpoint (at exit).
    pub fn umount_all(&self) {
        let paths: Vec<PathBuf> = lock(&self.mounts).keys().cloned().collect();
        for p in paths {
            if let Err(e) = self.umount(&p.display().to_string()) {
                warn!("{}", e.why);
            }
        }
    }

    fn fuse_config(&self, cno: u64) -> fuser::Config {
        // Two request threads: a checkpoint is browsed, not loaded.
        crate::fuser_config(&self.flags, 2, format!("{}@{cno}", self.device))
    }
}
