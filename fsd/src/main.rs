//! `fsd`: mounts an lfs filesystem with FUSE and serves it, in the
//! foreground, until it is unmounted.
//!
//! This file is the thin part: arguments → configuration → engine mount →
//! FUSE session → final checkpoint. The FUSE adapter is [`fuse`], the
//! one errno mapping [`errno`], the configuration file [`config`] (in the
//! library half, `src/lib.rs`, which the fuzz targets link too), signal
//! handling [`signals`]. Exit codes are listed in fsd(8) and in [`Exit`].

mod control;
mod daemon;
mod errno;
mod fuse;
mod helper;
mod mount;
mod notify;
mod options;
mod signals;
mod snapshots;
mod supervise;

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::anyhow;
use clap::Parser;
use lfs::blockdev::{BlockDevice, DeviceName, OpenOptions};
use lfs::fs::{Fs, MountOptions};
use log::{debug, error, info, warn, LevelFilter};

use crate::options::{KernelFlag, MountFlags, Overrides};
use fsd::config::{self, Config, Source};

/// Exit statuses, as documented in fsd(8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    /// Mounted, served, unmounted cleanly (final checkpoint written).
    Ok = 0,
    /// An operational error: I/O, the FUSE mount failed, the final
    /// checkpoint failed.
    Error = 1,
    /// Bad usage, mount option or configuration file (also clap's code).
    Usage = 2,
    /// The mount point is not an empty directory (or is a stale mount).
    Mountpoint = 3,
    /// The device does not hold a usable lfs filesystem (not lfs, both
    /// superblocks bad, an unsupported format version or feature).
    NotLfs = 4,
    /// The device is in use by another fsd or mkfs.lfs, or is mounted.
    Busy = 5,
    /// The filesystem can only be mounted read-only (unknown ro-compat
    /// features): mount it with `-o ro`.
    NeedsReadOnly = 6,
}

/// A failure with the exit status it maps to.
struct Failure(Exit, anyhow::Error);

fn fail(code: Exit, e: impl Into<anyhow::Error>) -> Failure {
    Failure(code, e.into())
}

#[derive(Debug, Parser)]
#[command(
    name = "fsd",
    version,
    about = "Mount an lfs log-structured filesystem with FUSE and serve it (in the foreground unless \
             --daemon)",
    after_help = "Signals: SIGTERM/SIGINT unmount (final checkpoint, exit 0), SIGHUP reloads the \
                  configuration.\nExit status: 0 clean unmount, 1 error, 2 bad usage or \
                  configuration, 3 bad mount point, 4 not a usable lfs device, 5 device busy, \
                  6 needs -o ro. See fsd(8)."
)]
struct Args {
    /// Mount options, comma-separated: ro, rw, cp=CNO, allow_other, default_permissions,
    /// config=FILE, socket=PATH, nogc, gcconf=PATH, the kernel's (no)dev, (no)suid, (no)exec,
    /// sync, async, dirsync, and mount(8)'s own (defaults, noauto, nofail, _netdev, x-*), which
    /// are left alone.
    #[arg(short = 'o', value_name = "OPTS", action = clap::ArgAction::Append)]
    options: Vec<String>,

    /// Configuration file [default: /etc/lfs/fsd.toml if it exists].
    #[arg(short = 'c', long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Control socket path [default: /run/lfs/<device name>.sock].
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,

    /// Run in the foreground (the default; accepted for compatibility with FUSE filesystems).
    #[arg(short = 'f', long, conflicts_with = "daemon")]
    foreground: bool,

    /// Return once the filesystem is mounted, fsd serving it in the background (logging to
    /// syslog): what mount(8) runs fsd for.
    #[arg(long)]
    daemon: bool,

    /// Leave unknown -o options alone instead of refusing them (mount -s).
    #[arg(skip)]
    sloppy: bool,

    /// More log output: -v debug, -vv trace (overrides log_level).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, conflicts_with = "log_level")]
    verbose: u8,

    /// Log level: off, error, warn, info, debug, trace (overrides log_level).
    #[arg(long, value_name = "LEVEL", value_parser = config::parse_log_level)]
    log_level: Option<LevelFilter>,

    /// Print the completion script for SHELL (bash, zsh, fish, elvish, powershell) and exit.
    #[arg(long, value_name = "SHELL", exclusive = true)]
    completions: Option<lfs_common::completions::Shell>,

    /// Block device, image file or NBD export (nbd://HOST[:PORT]/EXPORT, nbd+unix:///EXPORT?socket=PATH).
    device: PathBuf,

    /// Empty directory to mount it on.
    mountpoint: PathBuf,
}

/// The arguments: fsd's own, or mount(8)'s when fsd is started as its
/// helper (`helper`); `None` when there is nothing more to do (`mount -f`,
/// `--completions`).
fn arguments() -> Result<Option<Args>, Failure> {
    let mut argv = std::env::args_os();
    let started_as = argv
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    if !helper::NAMES.contains(&started_as.as_str()) {
        if lfs_common::completions::requested(<Args as clap::CommandFactory>::command) {
            return Ok(None);
        }
        return Ok(Some(Args::parse()));
    }
    let h = helper::parse(argv).map_err(|e| fail(Exit::Usage, anyhow!("{started_as}: {e}")))?;
    // mount -f: everything checked that can be without mounting.
    options::parse_mount_options(&h.options, h.sloppy)
        .map_err(|e| fail(Exit::Usage, anyhow!(e)))?;
    if h.fake {
        return Ok(None);
    }
    Ok(Some(Args {
        options: h.options,
        config: None,
        socket: None,
        foreground: false,
        daemon: true,
        sloppy: h.sloppy,
        verbose: u8::from(h.verbose),
        log_level: None,
        completions: None,
        device: h.device,
        mountpoint: h.mountpoint,
    }))
}

fn main() -> ExitCode {
    let args = match arguments() {
        Ok(Some(args)) => args,
        Ok(None) => return ExitCode::from(Exit::Ok as u8),
        Err(Failure(code, e)) => {
            lfs_common::logging::fatal("fsd", &format!("{e:#}"));
            return ExitCode::from(code as u8);
        }
    };
    // A panic means the engine's memory can no longer be trusted: never
    // write a checkpoint from it. Abort; the next mount recovers from the
    // last durable log, as after a crash.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        eprintln!("fsd: aborting after a panic; the next mount recovers the filesystem");
        std::process::abort();
    }));
    // Removed only after run() has closed everything, the device included.
    let mut socket_file = None;
    let result = run(&args, &mut socket_file);
    drop(socket_file);
    match result {
        Ok(()) => ExitCode::from(Exit::Ok as u8),
        Err(Failure(code, e)) => {
            lfs_common::logging::fatal("fsd", &format!("{e:#}"));
            ExitCode::from(code as u8)
        }
    }
}

fn run(args: &Args, socket_file: &mut Option<control::SocketFile>) -> Result<(), Failure> {
    // A malformed NBD name is bad usage, found before anything is done.
    let name = DeviceName::parse(&args.device).map_err(|e| fail(Exit::Usage, e))?;
    // The device by its canonical path: the name GET_SUPER reports and
    // the mount table shows, which fsctl and cleanerd check against the
    // device they were given (two images of one file name share a
    // default socket name).
    let canonical = match &name {
        DeviceName::File(path) => std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()),
        DeviceName::Nbd(_) => args.device.clone(),
    };
    let device = &canonical;
    let mut flags = options::parse_mount_options(&args.options, args.sloppy)
        .map_err(|e| fail(Exit::Usage, anyhow!(e)))?;
    if let Some(conf) = &flags.gc_conf {
        // Checked now, and made absolute: cleanerd is started later, and
        // again after any exit (after --daemon left the directory too).
        let abs = std::path::absolute(conf)
            .and_then(|p| std::fs::File::open(&p).map(|_| p))
            .map_err(|e| {
                fail(
                    Exit::Usage,
                    anyhow!("-o gcconf={}: cannot read it: {e}", conf.display()),
                )
            })?;
        flags.gc_conf = Some(abs);
    }
    // The command line wins over -o config= and socket= (an fstab line's
    // way to say them).
    let socket_arg = args.socket.clone().or_else(|| flags.socket.clone());
    let overrides = Overrides::new(args.verbose, args.log_level, socket_arg);
    let source = match args.config.as_ref().or(flags.config.as_ref()) {
        // Absolute, so that a reload after --daemon left the directory
        // reads the same file.
        Some(path) => Source::Explicit(std::path::absolute(path).unwrap_or_else(|_| path.clone())),
        None => config::system(),
    };
    let (file_config, config_file) = config::load(&source).map_err(|e| fail(Exit::Usage, e))?;
    let config = overrides.apply(file_config);
    let env_logging = options::init_logging(config.log_level);
    if args.daemon {
        lfs_common::logging::hold_until_detached();
    }
    match &config_file {
        Some(file) => info!("configuration from {}", file.display()),
        None => info!("no configuration file; built-in defaults"),
    }
    if env_logging {
        info!("RUST_LOG is set: it decides the log level, not log_level or -v");
    }
    for note in flags.notes() {
        warn!("{note}");
    }
    if !flags.ignored.is_empty() {
        debug!("mount options left alone: {}", flags.ignored.join(","));
    }

    let socket = match &config.socket {
        Some(path) => {
            config::validate_socket_path(path)
                .map_err(|e| fail(Exit::Usage, anyhow!("control socket: {e}")))?;
            path.clone()
        }
        None => config::default_socket_path(device)
            .map_err(|e| fail(Exit::Usage, anyhow!("control socket: {e}; use --socket")))?,
    };

    let mountpoint =
        options::check_mountpoint(&args.mountpoint).map_err(|e| fail(Exit::Mountpoint, e))?;
    // Before any thread starts (the signal thread, the engine's): the
    // parent waits here until the mount is ready or fsd failed.
    let detached = if args.daemon {
        let d = daemon::detach()
            .map_err(|e| fail(Exit::Error, anyhow!("going to the background: {e}")))?;
        // Nothing holds a directory of the caller's.
        let _ = std::env::set_current_dir("/");
        Some(d)
    } else {
        None
    };
    let signals = signals::register()
        .map_err(|e| fail(Exit::Error, anyhow!("registering signal handlers: {e}")))?;

    // The socket is fsd's before the device is touched: if another fsd
    // answers there (a device of the same file name), nothing is
    // recovered or written here.
    let claimed = control::Claimed::claim(&socket).map_err(|e| {
        let code = match e {
            control::StartError::InUse(_) => Exit::Busy,
            control::StartError::Io(..) => Exit::Error,
        };
        fail(code, anyhow!("{e}"))
    })?;
    let dev = open_device(&name, flags.read_only)?;
    let opts = MountOptions {
        read_only: flags.read_only,
        checkpoint_interval: config.checkpoint_interval,
        dirty_limit_bytes: config.dirty_limit,
        space_wait: config.space_wait,
        device: device.display().to_string(),
        background_space: true,
    };
    let fs = match flags.checkpoint {
        Some(cno) => Fs::mount_checkpoint(dev, cno).map_err(|e| match e {
            lfs::Error::NotFound => fail(
                Exit::Usage,
                anyhow!(
                    "{}: checkpoint {cno} does not exist or was deleted (fsctl lscp lists them)",
                    device.display()
                ),
            ),
            e => mount_failure(device, true, e),
        })?,
        None => Fs::mount(dev, opts).map_err(|e| {
            let damaged = matches!(e, lfs::Error::Corrupted { .. });
            let failure = mount_failure(device, flags.read_only, e);
            match damaged.then(|| rollback_hint(&name, device)).flatten() {
                Some(hint) => Failure(failure.0, failure.1.context(hint)),
                None => failure,
            }
        })?,
    };

    let snapshots = Arc::new(snapshots::Snapshots::new(Arc::clone(&fs), device, &flags));
    let service = control::service(Arc::clone(&fs), device, Arc::clone(&snapshots));
    let control = match control::Control::start(Arc::clone(&service), claimed) {
        Ok(c) => c,
        Err(e) => {
            let code = match e {
                control::StartError::InUse(_) => Exit::Busy,
                control::StartError::Io(..) => Exit::Error,
            };
            final_unmount(&fs, device)?;
            return Err(fail(code, anyhow!("{e}")));
        }
    };

    let settings = fuser_config(&flags, config.threads, device.display().to_string());
    let deferred = match fuse::deferred::Deferred::start(config.threads) {
        Ok(d) => Arc::new(d),
        Err(e) => {
            final_unmount(&fs, device)?;
            return Err(fail(
                Exit::Error,
                anyhow!("starting the threads for changes made while frozen: {e}"),
            ));
        }
    };
    let adapter = fuse::Adapter::live(Arc::clone(&fs), Arc::clone(&deferred), service);
    let mut session = match fuser::Session::new(adapter, &mountpoint, &settings) {
        Ok(s) => s,
        Err(e) => {
            let why = mount::user_may_not_mount()
                .unwrap_or_else(|| "is /dev/fuse there and usable?".to_owned());
            let e = anyhow!(e).context(format!(
                "FUSE mount of {} on {} failed ({why})",
                device.display(),
                mountpoint.display()
            ));
            final_unmount(&fs, device)?;
            return Err(fail(Exit::Error, e));
        }
    };
    let device_number = std::fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|m| signals::fuse_device_number(&m, &mountpoint));
    if device_number.is_none() {
        warn!(
            "{} is not in /proc/self/mountinfo; unmounting on SIGTERM will not check it is ours",
            mountpoint.display()
        );
    }
    let current = Arc::new(Mutex::new(config.clone()));
    let reload = {
        let fs = Arc::clone(&fs);
        let current = Arc::clone(&current);
        Box::new(move || reload(&source, &overrides, &current, &fs, env_logging))
    };
    let before_unmount = {
        let fs = Arc::clone(&fs);
        Box::new(move || thaw_to_stop(&fs, "stopping"))
    };
    let targets = signals::Targets {
        unmounter: mount::Unmounter::new(session.unmount_callable()),
        mountpoint: mountpoint.clone(),
        device_number,
        reload,
        before_unmount,
    };
    let signal_thread = match signals.spawn(targets) {
        Ok(t) => t,
        Err(e) => {
            drop(session); // unmounts
            final_unmount(&fs, device)?;
            return Err(fail(
                Exit::Error,
                anyhow!("starting the signal thread: {e}"),
            ));
        }
    };
    let cleaner = start_cleanerd(&flags, &socket, args.daemon);
    info!(
        "mounted {} on {} ({}, {} request threads, block size {})",
        device.display(),
        mountpoint.display(),
        match (flags.checkpoint, flags.read_only) {
            (Some(c), _) => format!("checkpoint {c}, read-only"),
            (None, true) => "read-only".to_string(),
            (None, false) => "read-write".to_string(),
        },
        config.threads,
        fs.block_size()
    );

    if let Some(d) = detached {
        if let Err(e) = d.ready() {
            warn!("telling the caller that the mount is ready: {e}");
        }
    }
    notify::notify("READY=1");
    let served = session.run();
    notify::notify("STOPPING=1");
    if let Some(c) = cleaner {
        c.stop();
    }
    signal_thread.stop();
    *socket_file = Some(control.stop());
    // The changes deferred by a freeze are answered before the final
    // checkpoint (their replies go nowhere now, but what they did lands).
    thaw_to_stop(&fs, "unmounted");
    deferred.shutdown();
    snapshots.umount_all();
    if let Err(e) = &served {
        error!("the FUSE session ended with an error: {e}");
    }
    final_unmount(&fs, device)?;
    served.map_err(|e| fail(Exit::Error, anyhow!("FUSE session: {e}")))
}

/// Starts cleanerd under supervision for a read-write mount, unless
/// `-o nogc` (fsd(8), CLEANING). Not found, fsd says so and goes on: the
/// engine keeps space without it.
fn start_cleanerd(
    flags: &MountFlags,
    socket: &Path,
    daemon: bool,
) -> Option<supervise::Supervisor> {
    if flags.read_only || flags.checkpoint.is_some() {
        return None;
    }
    if flags.no_gc {
        info!("-o nogc: cleanerd not started (the engine still keeps space itself)");
        return None;
    }
    let exe = std::env::current_exe().ok();
    let Some(program) = supervise::find_cleanerd(exe.as_deref()) else {
        warn!(
            "cleanerd not found beside {} or on PATH: not cleaning in the background (the \
             engine still keeps space itself); install it, or mount with -o nogc to say so",
            exe.as_deref()
                .map_or("fsd".into(), |e| e.display().to_string())
        );
        return None;
    };
    match supervise::Supervisor::start(program, socket.to_path_buf(), flags.gc_conf.clone(), daemon)
    {
        Ok(s) => Some(s),
        Err(e) => {
            warn!("could not start the thread that supervises cleanerd: {e}");
            None
        }
    }
}

/// Opens the device (a path or an NBD name; a file exclusively for
/// read-write), wrapped for the engine.
fn open_device(name: &DeviceName, read_only: bool) -> Result<Arc<dyn BlockDevice>, Failure> {
    let opts = OpenOptions {
        read_only,
        direct: false,
        exclusive: true,
    };
    match name.open(opts) {
        Ok(dev) => Ok(dev),
        Err(e) if e.kind() == ErrorKind::ResourceBusy => Err(fail(
            Exit::Busy,
            anyhow!("{e}: another fsd or mkfs.lfs has it open, or it is mounted"),
        )),
        Err(e) => Err(fail(Exit::Error, e)),
    }
}

/// When the last checkpoint is damaged and an older one is intact, what
/// to do about it (read from the device again, read-only).
fn rollback_hint(name: &DeviceName, device: &Path) -> Option<String> {
    let dev = name
        .open(OpenOptions {
            read_only: true,
            direct: false,
            exclusive: false,
        })
        .ok()?;
    let (intact, damaged) = lfs::checkpoint::rollback::newest_intact(dev).ok()??;
    let shown = device.display();
    Some(format!(
        "checkpoint {damaged}, the last one, is damaged and checkpoint {intact} is the newest \
         intact one: -o ro,cp={intact} mounts it read-only, `fsctl fsck --rollback {intact} \
         {shown}` makes it the current one (what checkpoint {damaged} held is lost)"
    ))
}

/// The exit status and message of a failed engine mount.
fn mount_failure(device: &Path, read_only: bool, e: lfs::Error) -> Failure {
    let shown = device.display();
    match e {
        lfs::Error::ReadOnly(_) if !read_only => fail(
            Exit::NeedsReadOnly,
            anyhow!("{shown}: {e} (mount with -o ro)"),
        ),
        lfs::Error::Corrupted { .. } | lfs::Error::Unsupported(_) => fail(
            Exit::NotLfs,
            anyhow!("{shown} does not hold a usable lfs filesystem: {e}"),
        ),
        e => fail(
            Exit::Error,
            anyhow!(e).context(format!("mounting the filesystem on {shown}")),
        ),
    }
}

/// Thaws a frozen filesystem that fsd is about to stop serving: the
/// changes waiting for the thaw go on, so the mount is no longer kept busy
/// by them and the final checkpoint can be written.
fn thaw_to_stop(fs: &Fs, why: &str) {
    if fs.is_frozen() && fs.thaw().is_ok() {
        warn!("{why} while frozen: thawed the filesystem so that waiting changes finish");
    }
}

/// The final checkpoint; marks the filesystem clean.
fn final_unmount(fs: &Fs, device: &Path) -> Result<(), Failure> {
    fs.unmount().map_err(|e| {
        fail(
            Exit::Error,
            anyhow!(e).context(format!(
                "final checkpoint of {} failed; the next mount recovers from the log",
                device.display()
            )),
        )
    })?;
    info!(
        "unmounted {}: final checkpoint written, filesystem clean",
        device.display()
    );
    let stats = fs.stats();
    let counters: Vec<String> = stats
        .counters
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    info!("statistics: {}", counters.join(" "));
    Ok(())
}

/// fuser's session settings: see fsd(8), FUSE MOUNT OPTIONS.
/// Also for checkpoints mounted beside the live filesystem
/// (`snapshots.rs`), with their own name and flags.
pub(crate) fn fuser_config(flags: &MountFlags, threads: usize, fsname: String) -> fuser::Config {
    use fuser::MountOption as M;
    let mut mount_options = vec![
        M::FSName(fsname),
        // As a kernel option, so /proc/mounts shows the type fuse.lfs.
        M::CUSTOM("subtype=lfs".into()),
        M::NoAtime,
    ];
    if flags.default_permissions {
        mount_options.push(M::DefaultPermissions);
    }
    mount_options.push(if flags.read_only { M::RO } else { M::RW });
    // Without dev and suid the kernel mounts nodev,nosuid (fuser's
    // default, as libfuse's).
    mount_options.extend(flags.kernel.iter().map(|k| match *k {
        KernelFlag::Dev(true) => M::Dev,
        KernelFlag::Dev(false) => M::NoDev,
        KernelFlag::Suid(true) => M::Suid,
        KernelFlag::Suid(false) => M::NoSuid,
        KernelFlag::Exec(true) => M::Exec,
        KernelFlag::Exec(false) => M::NoExec,
        KernelFlag::Sync(true) => M::Sync,
        KernelFlag::Sync(false) => M::Async,
        KernelFlag::DirSync => M::DirSync,
    }));
    let mut c = fuser::Config::default();
    c.mount_options = mount_options;
    c.acl = if flags.allow_other {
        fuser::SessionACL::All
    } else {
        fuser::SessionACL::Owner
    };
    c.n_threads = Some(threads);
    c.clone_fd = true;
    c
}

/// SIGHUP: rereads the configuration and applies what can change while
/// mounted; says which changed keys need a restart.
fn reload(
    source: &Source,
    overrides: &Overrides,
    current: &Mutex<Config>,
    fs: &Fs,
    env_logging: bool,
) {
    let (loaded, file) = match config::load(source) {
        Ok(c) => c,
        Err(e) => {
            error!("reload failed, keeping the running configuration: {e}");
            return;
        }
    };
    let new = overrides.apply(loaded);
    let mut current = current.lock().unwrap_or_else(PoisonError::into_inner);
    let changes = config::diff(&current, &new);
    let from = file.map_or("built-in defaults".to_owned(), |f| f.display().to_string());
    if changes.changed.is_empty() {
        info!("reloaded {from}: nothing changed");
        return;
    }
    let mut applied = Vec::new();
    let mut restart = Vec::new();
    for key in changes.changed {
        match key {
            config::KEY_LOG_LEVEL if env_logging => restart.push(key),
            config::KEY_LOG_LEVEL => {
                lfs_common::logging::set_level(new.log_level);
                current.log_level = new.log_level;
                applied.push(key);
            }
            config::KEY_CHECKPOINT_INTERVAL | config::KEY_DIRTY_LIMIT | config::KEY_SPACE_WAIT => {
                current.checkpoint_interval = new.checkpoint_interval;
                current.dirty_limit = new.dirty_limit;
                current.space_wait = new.space_wait;
                applied.push(key);
            }
            _ => restart.push(key),
        }
    }
    let engine_keys = [
        config::KEY_CHECKPOINT_INTERVAL,
        config::KEY_DIRTY_LIMIT,
        config::KEY_SPACE_WAIT,
    ];
    if applied.iter().any(|k| engine_keys.contains(k)) {
        fs.set_options(
            current.checkpoint_interval,
            current.dirty_limit,
            current.space_wait,
        );
    }
    info!(
        "reloaded {from}: applied {}; changed but needing a restart: {}",
        list(&applied),
        list(&restart)
    );
}

fn list(keys: &[&str]) -> String {
    if keys.is_empty() {
        "none".into()
    } else {
        keys.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(read_only: bool, e: lfs::Error) -> Exit {
        mount_failure(Path::new("/dev/vdb"), read_only, e).0
    }

    #[test]
    fn engine_mount_errors_pick_the_documented_exit_status() {
        let ro = || lfs::Error::ReadOnly(": unknown ro-compat features".into());
        assert_eq!(code(false, ro()), Exit::NeedsReadOnly);
        assert_eq!(code(true, ro()), Exit::Error);
        assert_eq!(
            code(
                false,
                lfs::Error::Unsupported("no valid lfs superblock".into())
            ),
            Exit::NotLfs
        );
        let io = lfs::Error::io("reading", std::io::Error::other("gone"));
        assert_eq!(code(false, io), Exit::Error);
        let Failure(_, e) = mount_failure(Path::new("/dev/vdb"), false, ro());
        assert!(e.to_string().contains("mount with -o ro"), "{e}");
    }

    #[test]
    fn fuser_settings_follow_the_options() {
        let flags = options::parse_mount_options(&["ro,allow_other,noexec,sync".to_owned()], false)
            .unwrap();
        let config = Config {
            threads: 7,
            ..Config::default()
        };
        let c = fuser_config(&flags, config.threads, "/dev/vdb".into());
        use fuser::MountOption as M;
        for want in [
            M::FSName("/dev/vdb".into()),
            M::CUSTOM("subtype=lfs".into()),
            M::DefaultPermissions,
            M::RO,
            M::NoAtime,
            M::NoExec,
            M::Sync,
        ] {
            assert!(
                c.mount_options.contains(&want),
                "{want:?} in {:?}",
                c.mount_options
            );
        }
        assert_eq!(c.acl, fuser::SessionACL::All);
        assert_eq!(c.n_threads, Some(7));
        assert!(c.clone_fd);
        let c = fuser_config(&MountFlags::default(), config.threads, "x.img".into());
        assert!(c.mount_options.contains(&M::RW));
        assert!(!c.mount_options.contains(&M::DefaultPermissions));
        assert_eq!(c.acl, fuser::SessionACL::Owner);
    }

    #[test]
    fn help_parses() {
        use clap::CommandFactory;
        Args::command().debug_assert();
        let a =
            Args::try_parse_from(["fsd", "-o", "ro", "-o", "allow_other", "-f", "d", "m"]).unwrap();
        assert_eq!(a.options, ["ro", "allow_other"]);
        assert!(Args::try_parse_from(["fsd", "-v", "--log-level", "info", "d", "m"]).is_err());
    }
}
