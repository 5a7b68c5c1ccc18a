//! End to end, issue 26 items 3 and 9: what fsctl and fsck.lfs say and
//! exit with when something is wrong.
//!
//! * `fsctl fsck` of a filesystem an fsd has mounted read-write refuses
//!   (it used to say "clean", exit 0, reading a device being written);
//!   one mounted read-only is checked;
//! * fsck.lfs, fsck(8)'s checker, exits as fsck(8) says (0, 4, 8, 16,
//!   32), also when fsck(8) runs it for `-t lfs`;
//! * fsctl's exit statuses tell apart no fsd, not lfs, no such
//!   checkpoint, permission denied, a device in use and bad usage.

#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use harness::*;
use lfs_e2e::{require_tool, run, temp_dir, Output};
use nix::sys::signal::Signal;

// fsctl(8), EXIT STATUS.
const FSCTL_USAGE: i32 = 2;
const FSCTL_NO_FSD: i32 = 5;
const FSCTL_NOT_LFS: i32 = 6;
const FSCTL_NO_CHECKPOINT: i32 = 7;
const FSCTL_DENIED: i32 = 8;
const FSCTL_BUSY: i32 = 9;

// fsck(8), as fsck.lfs(8) gives them.
const FSCK_OK: i32 = 0;
const FSCK_UNCORRECTED: i32 = 4;
const FSCK_OPERATIONAL: i32 = 8;
const FSCK_USAGE: i32 = 16;
const FSCK_CANCELED: i32 = 32;

/// A directory holding `fsck.lfs` (fsctl under that name, as `make
/// install` puts it), for PATH.
fn fsck_dir(dir: &Path) -> PathBuf {
    let bin = dir.join("sbin");
    fs::create_dir_all(&bin).unwrap();
    let link = bin.join("fsck.lfs");
    if !link.exists() {
        std::os::unix::fs::symlink(lfs_e2e::daemons::fsctl_binary(), &link).unwrap();
    }
    bin
}

fn fsck_lfs(dir: &Path, args: &[&str]) -> Output {
    run(
        Command::new(fsck_dir(dir).join("fsck.lfs")).args(args),
        CMD_TIMEOUT,
    )
}

/// Item 3: fsck refuses a filesystem mounted read-write, with a status of
/// its own, and checks one mounted read-only.
#[test]
fn fsck_refuses_a_filesystem_mounted_read_write() {
    let d = temp_dir();
    let image = mkfs_with(d.path(), "m.img", &["-B", "64", "--size", "64M"]);
    let img = image.to_str().unwrap();
    let mnt = mkdir(d.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    fs::write(mnt.join("f"), pattern(100_000, 3)).unwrap();

    let o = fsctl(&["fsck", img]);
    assert_eq!(o.status.code(), Some(FSCTL_BUSY), "{o}");
    assert!(o.stderr.contains("mounted read-write"), "{o}");
    assert!(!o.stdout.contains("clean"), "{o}");
    let o = fsck_lfs(d.path(), &["-n", img]);
    assert_eq!(o.status.code(), Some(FSCK_OPERATIONAL), "{o}");
    assert!(o.stderr.contains("mounted read-write"), "{o}");

    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    let mut fsd = Fsd::start(&image, &mnt, &["-o", "ro"]);
    let o = fsctl(&["fsck", img]);
    assert_eq!(o.status.code(), Some(0), "read-only mount: {o}");
    assert!(o.stdout.contains("clean"), "{o}");
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}

/// Item 9: fsck.lfs's statuses are fsck(8)'s, and fsck(8) finds it.
#[test]
fn fsck_lfs_exits_as_fsck_8_says() {
    require_tool("fsck");
    let d = temp_dir();
    let image = mkfs_with(d.path(), "a.img", &["-B", "64", "--size", "16M"]);
    let img = image.to_str().unwrap();
    for flags in [&["-a"][..], &["-p"], &["-n"], &["-y", "-f"], &[]] {
        let mut args = flags.to_vec();
        args.push(img);
        let o = fsck_lfs(d.path(), &args);
        assert_eq!(o.status.code(), Some(FSCK_OK), "{flags:?}: {o}");
        assert!(o.stdout.contains("clean"), "{o}");
    }

    // fsck(8) runs fsck.TYPE from PATH.
    let path = format!(
        "{}:{}",
        fsck_dir(d.path()).display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = run(
        Command::new("fsck")
            .args(["-T", "-t", "lfs", img])
            .env("PATH", &path),
        CMD_TIMEOUT,
    );
    assert_eq!(o.status.code(), Some(FSCK_OK), "{o}");
    assert!(o.stdout.contains("clean"), "{o}");

    // Garbage: not lfs, an operational error, and no counts printed for
    // a checkpoint that was never found.
    let garbage = d.path().join("garbage.img");
    fs::write(&garbage, pattern(8 << 20, 9)).unwrap();
    let g = garbage.to_str().unwrap();
    let o = fsck_lfs(d.path(), &[g]);
    assert_eq!(o.status.code(), Some(FSCK_OPERATIONAL), "{o}");
    assert!(o.stderr.contains("no valid lfs superblock"), "{o}");
    assert!(!o.stdout.contains("checkpoint 0"), "{o}");
    let o = fsctl(&["fsck", g]);
    assert_eq!(o.status.code(), Some(FSCTL_NOT_LFS), "{o}");
    assert!(!o.stdout.contains("checkpoint 0"), "{o}");

    // A truncated image: an lfs filesystem with errors.
    let cut = d.path().join("cut.img");
    let mut bytes = fs::read(&image).unwrap();
    bytes.truncate(bytes.len() / 2);
    fs::write(&cut, &bytes).unwrap();
    let o = fsck_lfs(d.path(), &[cut.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(FSCK_UNCORRECTED), "{o}");
    let o = run(
        Command::new("fsck")
            .args(["-T", "-t", "lfs", cut.to_str().unwrap()])
            .env("PATH", &path),
        CMD_TIMEOUT,
    );
    assert_eq!(o.status.code(), Some(FSCK_UNCORRECTED), "{o}");

    let o = fsck_lfs(d.path(), &[]);
    assert_eq!(o.status.code(), Some(FSCK_USAGE), "{o}");
    let o = fsck_lfs(d.path(), &["-n", "-y", img]);
    assert_eq!(o.status.code(), Some(FSCK_USAGE), "{o}");
    let o = fsck_lfs(d.path(), &[d.path().join("missing.img").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(FSCK_OPERATIONAL), "{o}");
    assert!(!o.stderr.contains("os error"), "{o}");
}

/// Item 9: a check interrupted by a signal exits 32. The device is an
/// NBD export whose server never answers, so the check is waiting when
/// the signal comes (once fsck.lfs has installed its handler).
#[test]
fn an_interrupted_fsck_lfs_exits_32() {
    let d = temp_dir();
    let server = d.path().join("silent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&server).unwrap();
    let name = format!("nbd+unix:///x?socket={}", server.display());
    let mut child = Command::new(fsck_dir(d.path()).join("fsck.lfs"))
        .arg(&name)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let deadline = std::time::Instant::now() + CMD_TIMEOUT;
    // SigCgt: the signals with handlers, a hex mask; SIGINT is bit 1.
    let handles_sigint = || {
        fs::read_to_string(&status)
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .is_some_and(|m| m & (1 << (Signal::SIGINT as u64 - 1)) != 0)
    };
    while !handles_sigint() {
        assert!(std::time::Instant::now() < deadline, "no SIGINT handler");
        std::thread::sleep(POLL);
    }
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(FSCK_CANCELED), "{status}");
}

/// Item 9: fsctl's statuses tell the failures apart.
#[test]
fn fsctl_exit_statuses_say_what_failed() {
    require_tool("setpriv");
    let d = temp_dir();
    let image = mkfs_with(d.path(), "x.img", &["-B", "64", "--size", "64M"]);
    let img = image.to_str().unwrap();

    // No fsd: a device nobody mounted, a socket nobody serves.
    let o = fsctl(&["lscp", "--no-such-option", img]);
    assert_eq!(o.status.code(), Some(FSCTL_USAGE), "{o}");
    let o = fsctl(&["lscp", img]);
    assert_eq!(o.status.code(), Some(FSCTL_NO_FSD), "{o}");
    assert!(o.stderr.contains("no fsd"), "{o}");
    assert!(!o.stderr.contains("os error"), "{o}");

    // Not lfs.
    let garbage = d.path().join("g.img");
    fs::write(&garbage, pattern(1 << 20, 1)).unwrap();
    let o = fsctl(&["super", garbage.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(FSCTL_NOT_LFS), "{o}");
    let o = fsctl(&["lscp", "/proc"]);
    assert_eq!(o.status.code(), Some(FSCTL_NOT_LFS), "{o}");

    let mnt = mkdir(d.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let sock = mnt.with_extension("sock");
    let s = sock.to_str().unwrap();
    // No such checkpoint.
    for args in [
        &["rmcp", s, "999"][..],
        &["chcp", "ss", s, "999"],
        &["diff", "-t", s, "999", "0"],
    ] {
        let o = fsctl(args);
        assert_eq!(o.status.code(), Some(FSCTL_NO_CHECKPOINT), "{args:?}: {o}");
    }
    let mp = mkdir(d.path(), "old");
    let o = fsctl(&["mount", "999", mp.to_str().unwrap(), s]);
    assert_eq!(o.status.code(), Some(FSCTL_NO_CHECKPOINT), "{o}");

    // Permission denied: a change asked by nobody through a socket
    // opened to everyone, and a socket nobody may connect to.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&sock, fs::Permissions::from_mode(0o666)).unwrap();
    let as_nobody = |args: &[&str]| run(&mut lfs_e2e::daemons::fsctl_as_nobody(args), CMD_TIMEOUT);
    let o = as_nobody(&["mkcp", s]);
    assert_eq!(o.status.code(), Some(FSCTL_DENIED), "{o}");
    fs::set_permissions(&sock, fs::Permissions::from_mode(0o660)).unwrap();
    let o = as_nobody(&["lscp", s]);
    assert_eq!(o.status.code(), Some(FSCTL_DENIED), "{o}");
    assert!(o.stderr.contains("permission denied"), "{o}");
    assert!(!o.stderr.contains("is the filesystem mounted"), "{o}");

    // A device in use.
    let o = fsctl(&["fsck", img]);
    assert_eq!(o.status.code(), Some(FSCTL_BUSY), "{o}");
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}

/// Item 10: one message format. Every line fsd, cleanerd, mkfs.lfs and
/// fsctl write to stderr starts with the program's name, log records and
/// final errors alike, and none carries Rust's "(os error N)"; a user
/// refused by cleanerd's socket is told so, not that no cleanerd runs.
#[test]
fn messages_say_what_happened_in_one_format() {
    require_tool("setpriv");
    let d = temp_dir();
    let missing = d.path().join("missing.img");
    let mnt = mkdir(d.path(), "mnt");
    let (m, mp) = (missing.to_str().unwrap(), mnt.to_str().unwrap());
    let check = |o: &Output, program: &str| {
        assert!(!o.stderr.is_empty(), "{o}");
        for line in o.stderr.lines() {
            assert!(line.starts_with(&format!("{program}: ")), "{line:?} in {o}");
        }
        assert!(!o.stderr.contains("os error"), "{o}");
        assert!(
            !o.stderr.contains(" INFO ") && !o.stderr.contains(" WARN "),
            "{o}"
        );
    };
    check(&fsd_refusal(&["-v", m, mp]), "fsd");
    check(&fsctl(&["super", m]), "fsctl");
    check(&fsctl(&["fsck", m]), "fsctl");
    let o = run(
        lfs_e2e::daemons::cleanerd(&["--once", m]).current_dir(d.path()),
        CMD_TIMEOUT,
    );
    check(&o, "cleanerd");
    let o = run(
        Command::new(lfs_e2e::built_binary("mkfs-lfs")).arg(m),
        CMD_TIMEOUT,
    );
    check(&o, "mkfs.lfs");

    // cleanerd runs; nobody may reach fsd's socket but not cleanerd's.
    let image = mkfs_with(d.path(), "c.img", &["-B", "64", "--size", "64M"]);
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let sock = mnt.with_extension("sock");
    let s = sock.to_str().unwrap();
    let cleanerd = Cleanerd::start(d.path(), s);
    assert_reconnects(&cleanerd, s, 0, "at start");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&sock, fs::Permissions::from_mode(0o666)).unwrap();
    let o = run(
        &mut lfs_e2e::daemons::fsctl_as_nobody(&["clean", "--status", s]),
        CMD_TIMEOUT,
    );
    assert_eq!(o.status.code(), Some(FSCTL_DENIED), "{o}");
    assert!(o.stderr.contains("permission denied"), "{o}");
    assert!(!o.stderr.contains("no cleanerd is running"), "{o}");
    drop(cleanerd);
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}
