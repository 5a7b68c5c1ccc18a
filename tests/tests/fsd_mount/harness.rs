//! The harness of `fsd_mount.rs`: a guard around a running fsd and its
//! mount, mount table queries, and test data.

use std::fs::{self, File};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use lfs_e2e::{built_binary, require_tool, run, run_ok, Output};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// How long fsd may take to mount (recovery included, debug build).
pub const MOUNT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long fsd may take to exit after it was asked to.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one shell step of a test may run.
pub const CMD_TIMEOUT: Duration = Duration::from_secs(300);
/// How often mount state and exits are polled.
pub const POLL: Duration = Duration::from_millis(50);
/// Image size: large enough for the workloads, small enough for /tmp.
pub const IMAGE_SIZE: &str = "256M";

// fsd's exit statuses, from fsd(8).
pub const EXIT_OK: i32 = 0;
pub const EXIT_ERROR: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_MOUNTPOINT: i32 = 3;
pub const EXIT_NOT_LFS: i32 = 4;
pub const EXIT_BUSY: i32 = 5;

/// Panics unless this process can open /dev/fuse read-write: without it no
/// test here means anything.
pub fn require_fuse() {
    if let Err(e) = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nix::libc::O_CLOEXEC)
        .open("/dev/fuse")
    {
        panic!("/dev/fuse is not usable ({e}); these tests need FUSE (modprobe fuse, run as root)");
    }
}

/// Formats a fresh image `name` in `dir`.
pub fn mkfs(dir: &Path, name: &str) -> PathBuf {
    mkfs_with(dir, name, &["--size", IMAGE_SIZE])
}

/// Formats a fresh image `name` in `dir` with mkfs.lfs options `args`.
pub fn mkfs_with(dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    let image = dir.join(name);
    run_ok(
        Command::new(built_binary("mkfs-lfs"))
            .arg("-q")
            .args(args)
            .arg(&image),
        CMD_TIMEOUT,
    );
    image
}

/// Creates and returns the empty directory `dir/name`.
pub fn mkdir(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    fs::create_dir(&path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
    path
}

/// Runs a `sh -c` script with `set -eux`, so a failure shows which command
/// failed, and returns its output.
pub fn sh(script: &str) -> Output {
    require_tool("sh");
    let script = format!("set -eux\n{script}");
    run_ok(Command::new("sh").arg("-c").arg(script), CMD_TIMEOUT)
}

/// Runs `fsctl fsck` on an unmounted image and asserts it is clean.
#[track_caller]
pub fn assert_fsck_clean(image: &Path, when: &str) {
    let o = run(
        &mut lfs_e2e::daemons::fsctl(&["fsck".as_ref(), image.as_os_str()]),
        CMD_TIMEOUT,
    );
    assert!(
        o.status.success() && o.stdout.contains("clean"),
        "fsctl fsck {when}: {o}"
    );
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
pub fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = field
            .get(i + 1..i + 4)
            .filter(|_| bytes[i] == b'\\')
            .and_then(|digits| u8::from_str_radix(digits, 8).ok());
        match octal {
            Some(v) => {
                out.push(v);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The filesystem type mounted at `path` (the last mount there), if
/// something is. Only `path`'s parent is resolved: the mount itself may be
/// a dead FUSE mount that cannot be stat'ed.
pub fn mount_type(path: &Path) -> Option<String> {
    let canonical = match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => fs::canonicalize(parent)
            .unwrap_or_else(|_| parent.to_path_buf())
            .join(name),
        _ => path.to_path_buf(),
    };
    let want = canonical.to_string_lossy().into_owned();
    let info = fs::read_to_string("/proc/self/mountinfo").expect("reading /proc/self/mountinfo");
    info.lines().rev().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let dash = fields.iter().position(|f| *f == "-")?;
        (unescape(fields.get(4)?) == want).then(|| fields.get(dash + 1).map(|t| t.to_string()))?
    })
}

/// A running fsd and its mount. Dropping it kills fsd and lazily unmounts.
pub struct Fsd {
    child: Option<Child>,
    mountpoint: PathBuf,
    log: PathBuf,
}

impl Fsd {
    /// Starts `fsd [args] image mountpoint` and waits until it is mounted;
    /// panics with fsd's log if it exits first or takes too long. Unless
    /// `args` choose one, the control socket goes beside the mount point
    /// (`MOUNTPOINT.sock`): tests run in parallel, and the default
    /// `/run/lfs/<image name>.sock` would collide between their images.
    /// fsd starts no cleanerd unless `args` ask ([`lfs_e2e::daemons::fsd`]).
    pub fn start(image: &Path, mountpoint: &Path, args: &[&str]) -> Fsd {
        let chosen = args
            .iter()
            .any(|a| *a == "--socket" || a.starts_with("--socket="));
        let sock = mountpoint.with_extension("sock");
        let mut all: Vec<&str> = args.to_vec();
        if !chosen {
            all.push("--socket");
            all.push(sock.to_str().expect("temporary paths are UTF-8"));
        }
        Self::start_exactly(image, mountpoint, &all)
    }

    /// [`Fsd::start`] with exactly `args` (the default socket path unless
    /// they say otherwise).
    pub fn start_exactly(image: &Path, mountpoint: &Path, args: &[&str]) -> Fsd {
        require_fuse();
        let log = mountpoint.with_extension(format!(
            "fsd.{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let out = File::create(&log).unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
        let err = out.try_clone().expect("duplicating the log file");
        let child = lfs_e2e::daemons::fsd(args)
            .arg(image)
            .arg(mountpoint)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("starting fsd: {e}"));
        let mut fsd = Fsd {
            child: Some(child),
            mountpoint: mountpoint.to_path_buf(),
            log,
        };
        let deadline = Instant::now() + MOUNT_TIMEOUT;
        loop {
            if mount_type(mountpoint).as_deref() == Some("fuse.lfs") {
                return fsd;
            }
            if let Some(status) = fsd.child_mut().try_wait().expect("waiting for fsd") {
                panic!(
                    "fsd exited with {status} before mounting {}:\n{}",
                    mountpoint.display(),
                    fsd.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "fsd did not mount {} within {MOUNT_TIMEOUT:?}:\n{}",
                mountpoint.display(),
                fsd.log()
            );
            sleep(POLL);
        }
    }

    pub fn child_mut(&mut self) -> &mut Child {
        self.child.as_mut().expect("fsd was already reaped")
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.process_id() as i32)
    }

    /// fsd's process id.
    pub fn process_id(&self) -> u32 {
        self.child.as_ref().expect("fsd was already reaped").id()
    }

    /// fsd's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).unwrap_or_else(|e| panic!("sending {signal} to fsd: {e}"));
    }

    /// Waits for fsd to exit; panics with its log if it does not in time.
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + EXIT_TIMEOUT;
        loop {
            if let Some(status) = self.child_mut().try_wait().expect("waiting for fsd") {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "fsd did not exit within {EXIT_TIMEOUT:?}:\n{}",
                self.log()
            );
            sleep(POLL);
        }
    }

    /// Waits for fsd to exit and asserts it exited 0 with its mount gone.
    pub fn assert_clean_exit(&mut self, after: &str) {
        let status = self.wait();
        let log = self.log();
        assert_eq!(status.code(), Some(EXIT_OK), "fsd after {after}:\n{log}");
        assert_eq!(
            mount_type(&self.mountpoint),
            None,
            "{} is still mounted after fsd exited:\n{log}",
            self.mountpoint.display()
        );
        assert!(
            log.contains("final checkpoint written"),
            "fsd did not report its final checkpoint after {after}:\n{log}"
        );
    }

    /// Polls the log until it contains `text`.
    pub fn wait_for_log(&self, text: &str) -> String {
        let deadline = Instant::now() + EXIT_TIMEOUT;
        loop {
            let log = self.log();
            if log.contains(text) {
                return log;
            }
            assert!(
                Instant::now() < deadline,
                "fsd's log did not say {text:?} within {EXIT_TIMEOUT:?}:\n{log}"
            );
            sleep(POLL);
        }
    }
}

impl Drop for Fsd {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        lazy_unmount(&self.mountpoint);
    }
}

/// Detaches whatever is mounted at `path` (a dead FUSE mount included).
pub fn lazy_unmount(path: &Path) {
    while mount_type(path).is_some() {
        let out = run(Command::new("umount").arg("-l").arg(path), CMD_TIMEOUT);
        if !out.status.success() {
            eprintln!("cleaning up the mount at {}: {out}", path.display());
            return;
        }
    }
}

/// Runs `fsctl args` (its exit status is the caller's to check).
pub fn fsctl<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    run(&mut lfs_e2e::daemons::fsctl(args), CMD_TIMEOUT)
}

/// `fsctl df --json` of the fsd on `sock`.
pub fn df_json(sock: &str) -> serde_json::Value {
    let o = fsctl(&["df", "--json", sock]).assert_success();
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {o}"))
}

/// A configuration that makes cleanerd clean eagerly on a small image:
/// no protection period, passes every 0.2 s once a quarter of the
/// segments are no longer clean.
pub const EAGER_CLEANERD_CONF: &str = "protection_period = 0\n\
     min_clean_segments = \"25%\"\n\
     max_clean_segments = \"40%\"\n\
     clean_check_interval = \"0.2s\"\n\
     selection_policy = \"greedy\"\n\
     nsegments_per_clean = 4\n\
     mc_nsegments_per_clean = 8\n\
     cleaning_interval = \"0.2s\"\n\
     mc_cleaning_interval = \"0.05s\"\n\
     retry_interval = \"1s\"\n\
     min_reclaimable_blocks = \"5%\"\n\
     mc_min_reclaimable_blocks = \"1%\"\n";

/// A running cleanerd; dropping it kills it.
pub struct Cleanerd {
    pub child: Child,
    /// Its log (every cleanerd started in the same directory appends).
    pub log: PathBuf,
}

impl Cleanerd {
    /// Starts cleanerd with [`EAGER_CLEANERD_CONF`] (written to
    /// `dir/cleanerd.conf`) on fsd's socket `sock`, logging at info level
    /// to `dir/cleanerd.log`.
    pub fn start(dir: &Path, sock: &str) -> Cleanerd {
        let conf = dir.join("cleanerd.conf");
        fs::write(&conf, EAGER_CLEANERD_CONF).unwrap();
        let log = dir.join("cleanerd.log");
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap_or_else(|e| panic!("opening {}: {e}", log.display()));
        let child = lfs_e2e::daemons::cleanerd(&["-c".as_ref(), conf.as_os_str()])
            .args(["--log-level", "info"])
            .arg(sock)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("duplicating the log file"))
            .stderr(out)
            .spawn()
            .expect("starting cleanerd");
        Cleanerd { child, log }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), signal)
            .unwrap_or_else(|e| panic!("sending {signal} to cleanerd: {e}"));
    }

    /// Sends SIGTERM and asserts that cleanerd exits 0.
    pub fn terminate(&mut self) {
        self.signal(Signal::SIGTERM);
        let status = self.child.wait().expect("waiting for cleanerd");
        assert!(
            status.success(),
            "cleanerd on SIGTERM: {status}\n{}",
            self.log()
        );
    }
}

impl Drop for Cleanerd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Formats image `name` in `dir` with mkfs.lfs `args`, mounts it on
/// `dir/mnt` and starts cleanerd ([`Cleanerd::start`]), waiting until it
/// is connected. Returns the image, the mount point, fsd's control
/// socket (beside the mount point), fsd and cleanerd.
pub fn serve_with_cleanerd(
    dir: &Path,
    name: &str,
    args: &[&str],
) -> (PathBuf, PathBuf, String, Fsd, Cleanerd) {
    serve_with_cleanerd_args(dir, name, args, &[])
}

/// [`serve_with_cleanerd`] with `fsd_args` for fsd.
pub fn serve_with_cleanerd_args(
    dir: &Path,
    name: &str,
    args: &[&str],
    fsd_args: &[&str],
) -> (PathBuf, PathBuf, String, Fsd, Cleanerd) {
    let image = mkfs_with(dir, name, args);
    let mnt = mkdir(dir, "mnt");
    let sock = mnt.with_extension("sock").to_str().unwrap().to_string();
    let fsd = Fsd::start(&image, &mnt, fsd_args);
    let cleanerd = Cleanerd::start(dir, &sock);
    assert_reconnects(&cleanerd, &sock, 0, "at start");
    (image, mnt, sock, fsd, cleanerd)
}

/// How long cleanerd may take to notice a restarted fsd (its
/// `retry_interval` is 1 s).
pub const RECONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How many times cleanerd's log says it (re)connected to fsd.
pub fn connections(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("connected to fsd on") || l.contains("is back"))
        .count()
}

/// Waits until cleanerd's log shows more than `before` connections and
/// `fsctl clean --status` answers through it with `connected: true`.
pub fn assert_reconnects(cleanerd: &Cleanerd, sock: &str, before: usize, when: &str) {
    let deadline = Instant::now() + RECONNECT_TIMEOUT;
    loop {
        let log = cleanerd.log();
        if connections(&log) > before {
            let o = fsctl(&["clean", sock, "--status", "--json"]);
            if o.status.success() {
                let st: serde_json::Value = serde_json::from_str(&o.stdout)
                    .unwrap_or_else(|e| panic!("bad JSON ({e}): {o}"));
                if st["connected"] == true {
                    return;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "cleanerd did not reconnect within {RECONNECT_TIMEOUT:?} {when}:\n{log}"
        );
        sleep(POLL);
    }
}

/// The number in environment variable `name`, or `default` if unset.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| v.parse().unwrap_or_else(|e| panic!("{name}={v}: {e}")))
        .unwrap_or(default)
}

/// True if `LFS_LONG=1` asks for the long version of a test.
pub fn long_mode() -> bool {
    std::env::var_os("LFS_LONG").is_some_and(|v| v == "1")
}

/// Deterministic pseudo-random bytes (xorshift64*), so a failure can be
/// reproduced.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

/// A source tree outside the mount: sizes around block boundaries, an
/// empty file, a multi-MiB file, nested directories, modes.
pub fn make_tree(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let files: &[(&str, usize)] = &[
        ("empty", 0),
        ("one", 1),
        ("block-1", 4095),
        ("block", 4096),
        ("block+1", 4097),
        ("sub/medium", 300_000),
        ("sub/deeper/large", 3 * 1024 * 1024 + 123),
        ("sub/deeper/deepest/small", 17),
        ("other/x", 8192),
    ];
    for (i, (name, len)) in files.iter().enumerate() {
        let path = root.join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, pattern(*len, i as u64 + 1)).unwrap();
    }
    fs::set_permissions(root.join("one"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::set_permissions(root.join("block"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::create_dir(root.join("emptydir")).unwrap();
}

/// What `find` sees of a tree: path, type, mode, size, links, link target
/// and mtime of every entry, plus a checksum of every regular file.
pub fn manifest(root: &Path) -> String {
    let root = root.display();
    let out = sh(&format!(
        "cd '{root}'\n\
         find . -printf '%p %y %m %s %n %l %T@\\n' | LC_ALL=C sort\n\
         find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r md5sum"
    ));
    out.stdout
}

/// Runs fsd to completion (it is expected to refuse) and returns its
/// output.
pub fn fsd_refusal(args: &[&str]) -> Output {
    run(&mut lfs_e2e::daemons::fsd(args), CMD_TIMEOUT)
}

#[track_caller]
pub fn assert_refused(o: &Output, code: i32, text: &str) {
    assert_eq!(o.status.code(), Some(code), "{o}");
    assert!(o.stderr.contains(text), "fsd's message lacks {text:?}: {o}");
}
