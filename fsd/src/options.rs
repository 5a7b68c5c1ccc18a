//! The command line beyond clap: `-o` mount options, command-line
//! overrides of the configuration file, logging, and the mount point check.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use log::LevelFilter;
use nix::errno::Errno;

use fsd::config::Config;

/// The `-o` options of fsd's own, as the refusal of an unknown one lists
/// them (the generic ones of mount(8) are accepted too, see
/// [`parse_mount_options`]).
pub const MOUNT_OPTIONS: &[&str] = &[
    "ro",
    "rw",
    "cp=CNO",
    "allow_other",
    "default_permissions",
    "config=FILE",
    "socket=PATH",
    "nogc",
    "gcconf=PATH",
];

/// The generic options mount(8), fstab(5) and systemd give every
/// filesystem that concern only them (or the helper's caller): accepted
/// and left alone, as FUSE filesystems do. `x-*` and `comment=*` too.
pub const USERSPACE_OPTIONS: &[&str] = &[
    "defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group", "_netdev", "nofail",
];

/// Access-time options: lfs keeps no access times (it is mounted
/// noatime), which these ask no more than.
pub const ATIME_OPTIONS: &[&str] = &["noatime", "relatime", "nodiratime", "lazytime"];

/// A mount flag passed to the kernel with the FUSE mount, as mount(8)
/// would for any filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelFlag {
    /// `dev` (true) or `nodev` (false, the default): device files work.
    Dev(bool),
    /// `suid` (true) or `nosuid` (false, the default): set-ID bits count.
    Suid(bool),
    /// `exec` (true, the default) or `noexec` (false).
    Exec(bool),
    /// `sync` (true) or `async` (false, the default): every write is
    /// durable before it returns (the kernel fsyncs after it).
    Sync(bool),
    /// `dirsync`: directory changes are durable before they return.
    DirSync,
}

impl KernelFlag {
    fn parse(option: &str) -> Option<KernelFlag> {
        Some(match option {
            "dev" => KernelFlag::Dev(true),
            "nodev" => KernelFlag::Dev(false),
            "suid" => KernelFlag::Suid(true),
            "nosuid" => KernelFlag::Suid(false),
            "exec" => KernelFlag::Exec(true),
            "noexec" => KernelFlag::Exec(false),
            "sync" => KernelFlag::Sync(true),
            "async" => KernelFlag::Sync(false),
            "dirsync" => KernelFlag::DirSync,
            _ => return None,
        })
    }

    /// Whether `self` and `other` set the same flag (the later one wins).
    fn same_kind(&self, other: &KernelFlag) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

/// What `-o` asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MountFlags {
    /// `ro`: mount read-only (the device is opened read-only too).
    pub read_only: bool,
    /// `allow_other`: users other than the one running fsd may use the
    /// mount.
    pub allow_other: bool,
    /// `default_permissions`: the kernel checks permissions from the mode
    /// bits. Forced on by `allow_other`.
    pub default_permissions: bool,
    /// True if `allow_other` forced `default_permissions` on.
    pub forced_default_permissions: bool,
    /// `cp=CNO`: mount that older checkpoint (read-only) instead of the
    /// latest state.
    pub checkpoint: Option<u64>,
    /// `config=FILE`: the configuration file (`--config` wins), for an
    /// fstab line, which passes no command-line option.
    pub config: Option<PathBuf>,
    /// `socket=PATH`: the control socket (`--socket` wins).
    pub socket: Option<PathBuf>,
    /// The kernel's mount flags asked for, the last of each kind.
    pub kernel: Vec<KernelFlag>,
    /// Options accepted and left alone (mount(8)'s, access times), for the
    /// log.
    pub ignored: Vec<String>,
    /// `nogc`: do not start cleanerd (the engine still keeps space:
    /// history yields and it cleans itself when space runs short).
    pub no_gc: bool,
    /// `gcconf=PATH`: cleanerd's configuration file.
    pub gc_conf: Option<PathBuf>,
}

impl MountFlags {
    /// Lines worth a warning about how the options were interpreted.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.forced_default_permissions {
            notes.push(
                "-o allow_other without default_permissions: enabling default_permissions, \
                 since lfs leaves permission checks to the kernel"
                    .to_owned(),
            );
        }
        notes
    }
}

/// A `NAME=VALUE` option's path value, which must not be empty.
fn path_value(option: &str, value: &str) -> Result<PathBuf, String> {
    if value.is_empty() {
        return Err(format!("-o {option}: the path is empty"));
    }
    Ok(PathBuf::from(value))
}

/// Parses every `-o` argument, each a comma-separated list. Later options
/// win (`-o ro -o rw` is read-write), as with mount(8). With `sloppy`
/// (mount -s), an unknown option is left alone (and reported in
/// [`MountFlags::ignored`]) rather than refused.
pub fn parse_mount_options(args: &[String], sloppy: bool) -> Result<MountFlags, String> {
    let mut flags = MountFlags::default();
    for option in args.iter().flat_map(|a| a.split(',')) {
        if let Some(flag) = KernelFlag::parse(option) {
            flags.kernel.retain(|k| !k.same_kind(&flag));
            flags.kernel.push(flag);
            continue;
        }
        match option {
            "" => {}
            "ro" => flags.read_only = true,
            "rw" => flags.read_only = false,
            "allow_other" => flags.allow_other = true,
            "default_permissions" => flags.default_permissions = true,
            o if USERSPACE_OPTIONS.contains(&o)
                || ATIME_OPTIONS.contains(&o)
                || o.starts_with("x-")
                || o.starts_with("comment=") =>
            {
                flags.ignored.push(o.to_owned())
            }
            "atime" | "strictatime" => {
                return Err(format!(
                    "-o {option}: lfs keeps no access times (it is mounted noatime)"
                ))
            }
            cp if cp.starts_with("cp=") => {
                let n = &cp[3..];
                match n.parse::<u64>() {
                    Ok(c) if c > 0 => flags.checkpoint = Some(c),
                    _ => {
                        return Err(format!(
                            "-o {cp}: {n:?} is not a checkpoint number (1 or more; see fsctl lscp)"
                        ))
                    }
                }
            }
            "nogc" => flags.no_gc = true,
            g if g.starts_with("gcconf=") => flags.gc_conf = Some(path_value(g, &g[7..])?),
            c if c.starts_with("config=") => flags.config = Some(path_value(c, &c[7..])?),
            s if s.starts_with("socket=") => flags.socket = Some(path_value(s, &s[7..])?),
            other if sloppy => flags.ignored.push(other.to_owned()),
            other => {
                return Err(format!(
                    "unknown mount option {other:?} in -o (fsd knows {}, the kernel's \
                     dev, suid, exec, sync, dirsync and their no- forms, and mount(8)'s \
                     own such as defaults, noauto, nofail, _netdev, x-*)",
                    MOUNT_OPTIONS.join(", ")
                ))
            }
        }
    }
    // Without default_permissions nobody checks permissions: the engine
    // does not (DESIGN.md §3) and the kernel leaves it to the daemon. With
    // only the mounting user allowed in, that is that user's business;
    // with allow_other it would let every user read and write everything.
    if flags.allow_other && !flags.default_permissions {
        flags.default_permissions = true;
        flags.forced_default_permissions = true;
    }
    if let Some(c) = flags.checkpoint {
        if !flags.read_only {
            return Err(format!(
                "-o cp={c} needs -o ro: an older checkpoint can only be mounted read-only"
            ));
        }
    }
    Ok(flags)
}

/// Settings the command line fixes whatever the configuration file says,
/// at start and on every reload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// From `--log-level` or `-v`.
    pub log_level: Option<LevelFilter>,
    /// From `--socket`.
    pub socket: Option<PathBuf>,
}

impl Overrides {
    /// `-v` means debug, `-vv` and more trace; `--log-level` is explicit.
    pub fn new(verbose: u8, log_level: Option<LevelFilter>, socket: Option<PathBuf>) -> Self {
        let log_level = log_level.or(match verbose {
            0 => None,
            1 => Some(LevelFilter::Debug),
            _ => Some(LevelFilter::Trace),
        });
        Overrides { log_level, socket }
    }

    /// `config` with the overrides applied.
    pub fn apply(&self, mut config: Config) -> Config {
        if let Some(level) = self.log_level {
            config.log_level = level;
        }
        if let Some(socket) = &self.socket {
            config.socket = Some(socket.clone());
        }
        config
    }
}

/// Starts logging (lfs-common's logger: `fsd: TEXT` lines on stderr).
/// Returns true if `RUST_LOG` decides the level rather than `level`.
pub fn init_logging(level: LevelFilter) -> bool {
    lfs_common::logging::init("fsd", level, Some(is_spurious_unmount_warning))
}

/// The one record dropped whatever the level. When a session ends after
/// an external umount, fuser 0.18.0 unmounts again (its `is_mounted`
/// takes POLLERR on the dead device for "still mounted") and warns that
/// this failed with EINVAL. Nothing is wrong then.
fn is_spurious_unmount_warning(record: &log::Record<'_>) -> bool {
    record.level() == log::Level::Warn
        && record.target() == "fuser::session"
        && record.args().to_string()
            == format!(
                "Failed to umount filesystem: {}",
                std::io::Error::from_raw_os_error(Errno::EINVAL as i32)
            )
}

/// Checks that `path` is an empty directory and returns it canonical.
pub fn check_mountpoint(path: &Path) -> anyhow::Result<PathBuf> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| {
        if e.raw_os_error() == Some(Errno::ENOTCONN as i32) {
            anyhow!(
                "mount point {shown} is a FUSE mount whose daemon is gone; \
                 unmount it first (umount -l {shown})"
            )
        } else {
            anyhow!("cannot use mount point {shown}: {e}")
        }
    })?;
    if !meta.is_dir() {
        return Err(anyhow!("mount point {shown} is not a directory"));
    }
    let mut entries =
        std::fs::read_dir(path).map_err(|e| anyhow!("cannot read mount point {shown}: {e}"))?;
    if entries.next().is_some() {
        return Err(anyhow!(
            "mount point {shown} is not empty; fsd mounts only on an empty directory"
        ));
    }
    std::fs::canonicalize(path).map_err(|e| anyhow!("cannot resolve mount point {shown}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> Result<MountFlags, String> {
        parse_mount_options(
            &args.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            false,
        )
    }

    #[test]
    fn mount_options() {
        assert_eq!(opts(&[]).unwrap(), MountFlags::default());
        let f = opts(&["ro,default_permissions"]).unwrap();
        assert!(f.read_only && f.default_permissions && !f.allow_other);
        assert!(f.notes().is_empty());
        assert!(!opts(&["ro", "rw"]).unwrap().read_only);
        assert!(opts(&["rw,,ro,"]).unwrap().read_only);
    }

    #[test]
    fn checkpoint_needs_ro_and_a_number() {
        assert_eq!(opts(&["ro,cp=12"]).unwrap().checkpoint, Some(12));
        assert!(opts(&["cp=12"]).unwrap_err().contains("needs -o ro"));
        assert!(opts(&["ro,cp=0"])
            .unwrap_err()
            .contains("not a checkpoint number"));
        assert!(opts(&["ro,cp=x"])
            .unwrap_err()
            .contains("not a checkpoint number"));
    }

    #[test]
    fn allow_other_forces_default_permissions() {
        let f = opts(&["allow_other"]).unwrap();
        assert!(f.allow_other && f.default_permissions && f.forced_default_permissions);
        assert_eq!(f.notes().len(), 1);
        let f = opts(&["allow_other,default_permissions"]).unwrap();
        assert!(f.default_permissions && !f.forced_default_permissions);
        assert!(f.notes().is_empty());
    }

    #[test]
    fn unknown_mount_option_is_named() {
        let e = opts(&["ro,bogus"]).unwrap_err();
        assert!(e.contains("\"bogus\""), "{e}");
        assert!(
            e.contains("ro, rw, cp=CNO, allow_other, default_permissions"),
            "{e}"
        );
        let f = parse_mount_options(&["ro,bogus".to_owned()], true).unwrap();
        assert!(f.read_only);
        assert_eq!(f.ignored, ["bogus"]);
    }

    #[test]
    fn generic_options_are_accepted() {
        let f = opts(&[
            "defaults,noatime,nodev,nosuid,_netdev,nofail,x-systemd.automount,noauto,comment=x",
        ])
        .unwrap();
        assert_eq!(f.kernel, [KernelFlag::Dev(false), KernelFlag::Suid(false)]);
        assert_eq!(f.ignored.len(), 7, "{:?}", f.ignored);
        let f = opts(&["sync,noexec", "async"]).unwrap();
        assert_eq!(f.kernel, [KernelFlag::Exec(false), KernelFlag::Sync(false)]);
        assert!(opts(&["atime"]).unwrap_err().contains("no access times"));
        let f = opts(&["config=/etc/x.toml,socket=/run/x.sock"]).unwrap();
        assert_eq!(f.config, Some(PathBuf::from("/etc/x.toml")));
        assert_eq!(f.socket, Some(PathBuf::from("/run/x.sock")));
        assert!(opts(&["config="]).is_err());
    }

    #[test]
    fn overrides_win_over_the_file() {
        let file = Config {
            log_level: LevelFilter::Warn,
            socket: Some("/a.sock".into()),
            ..Config::default()
        };
        assert_eq!(Overrides::new(0, None, None).apply(file.clone()), file);
        let o = Overrides::new(1, None, Some("/b.sock".into()));
        let c = o.apply(file.clone());
        assert_eq!(c.log_level, LevelFilter::Debug);
        assert_eq!(c.socket, Some(PathBuf::from("/b.sock")));
        assert_eq!(
            Overrides::new(3, None, None).log_level,
            Some(LevelFilter::Trace)
        );
        assert_eq!(
            Overrides::new(0, Some(LevelFilter::Error), None).log_level,
            Some(LevelFilter::Error)
        );
    }

    #[test]
    fn only_the_spurious_unmount_warning_is_dropped() {
        let einval = std::io::Error::from_raw_os_error(Errno::EINVAL as i32);
        let ebusy = std::io::Error::from_raw_os_error(Errno::EBUSY as i32);
        let check = |level, target, einval: &std::io::Error| {
            is_spurious_unmount_warning(
                &log::Record::builder()
                    .level(level)
                    .target(target)
                    .args(format_args!("Failed to umount filesystem: {einval}"))
                    .build(),
            )
        };
        assert!(check(log::Level::Warn, "fuser::session", &einval));
        assert!(!check(log::Level::Warn, "fuser::session", &ebusy));
        assert!(!check(log::Level::Error, "fuser::session", &einval));
        assert!(!check(log::Level::Warn, "fsd", &einval));
    }

    #[test]
    fn mountpoint_must_be_an_empty_directory() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert_eq!(
            check_mountpoint(&empty).unwrap(),
            std::fs::canonicalize(&empty).unwrap()
        );
        let full = dir.path().join("full");
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("f"), "x").unwrap();
        let e = check_mountpoint(&full).unwrap_err().to_string();
        assert!(e.contains("is not empty"), "{e}");
        let file = full.join("f");
        let e = check_mountpoint(&file).unwrap_err().to_string();
        assert!(e.contains("is not a directory"), "{e}");
        let e = check_mountpoint(&dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot use mount point"), "{e}");
    }
}
