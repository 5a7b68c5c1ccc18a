//! End to end, issue 26 item 14: a user who owns an image file formats,
//! mounts, inspects, snapshots, cleans and unmounts it without root.
//!
//! The user is `lfs-e2e-user`, created here if missing (useradd). The
//! mount goes through fusermount3 (fuse3), which opens /dev/fuse with the
//! user's own rights: the machine must give /dev/fuse Debian's mode 0666
//! (scripts/setup-debian.sh does where no udev did); a machine that does
//! not fails this test rather than skip it. The control sockets live in
//! the user's runtime directory (`$XDG_RUNTIME_DIR/lfs`), where fsd
//! creates them and fsctl and cleanerd find them.

#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use harness::*;
use lfs_e2e::{built_binary, require_tool, run, run_ok, temp_dir, Output};
use nix::sys::signal::Signal;

/// The unprivileged user the test runs the commands as.
const USER: &str = "lfs-e2e-user";

/// The user's uid, creating the user if need be.
fn user_id() -> u32 {
    let id = |flag: &str| run(Command::new("id").args([flag, USER]), CMD_TIMEOUT);
    if !id("-u").status.success() {
        require_tool("useradd");
        run_ok(
            Command::new("useradd").args([
                "--system",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                USER,
            ]),
            CMD_TIMEOUT,
        );
    }
    let o = id("-u").assert_success();
    o.stdout.trim().parse().unwrap()
}

/// A copy of the binaries and the shipped configuration the user can
/// reach (the build may be in a directory only root can enter).
struct Kit {
    dir: PathBuf,
    runtime: PathBuf,
}

impl Kit {
    fn new(dir: &Path) -> Kit {
        let kit = dir.join("kit");
        fs::create_dir(&kit).unwrap();
        for bin in ["mkfs-lfs", "fsd", "fsctl", "cleanerd"] {
            fs::copy(built_binary(bin), kit.join(bin)).unwrap();
        }
        for conf in ["fsd.toml", "cleanerd.conf"] {
            fs::copy(lfs_e2e::daemons::shipped_conf(conf), kit.join(conf)).unwrap();
        }
        let runtime = dir.join("run");
        fs::create_dir(&runtime).unwrap();
        run_ok(
            Command::new("chown")
                .arg("-R")
                .arg(format!("{USER}:"))
                .arg(dir),
            CMD_TIMEOUT,
        );
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(&runtime, fs::Permissions::from_mode(0o700)).unwrap();
        Kit { dir: kit, runtime }
    }

    /// `PROGRAM ARGS...` as the user, with its runtime directory; one of
    /// lfs's commands is taken from the kit.
    fn command<S: AsRef<OsStr>>(&self, program: &str, args: &[S]) -> Command {
        let program = match program {
            "mkfs-lfs" | "fsd" | "fsctl" | "cleanerd" => self.dir.join(program),
            other => PathBuf::from(other),
        };
        let mut c = Command::new("setpriv");
        c.args(["--reuid", USER, "--regid", USER, "--init-groups", "env"])
            .arg(format!("XDG_RUNTIME_DIR={}", self.runtime.display()))
            .arg("RUST_LOG=")
            .arg(program)
            .args(args);
        c
    }

    fn run<S: AsRef<OsStr>>(&self, program: &str, args: &[S]) -> Output {
        run(&mut self.command(program, args), CMD_TIMEOUT)
    }

    fn conf(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

/// Waits until `sock` is gone: fsd removes it once it has closed the
/// device.
fn wait_gone(sock: &Path) {
    let deadline = std::time::Instant::now() + CMD_TIMEOUT;
    while sock.exists() {
        assert!(std::time::Instant::now() < deadline, "fsd did not exit");
        std::thread::sleep(POLL);
    }
}

#[test]
fn a_user_formats_mounts_inspects_cleans_and_unmounts_an_image() {
    require_tool("setpriv");
    require_tool("fusermount3");
    let mode = fs::metadata("/dev/fuse")
        .unwrap_or_else(|e| panic!("/dev/fuse: {e}; run scripts/setup-debian.sh"))
        .permissions()
        .mode();
    assert!(
        mode & 0o006 == 0o006,
        "/dev/fuse is mode {:o}: users cannot mount FUSE filesystems here \
         (fusermount3 opens it with the user's rights); scripts/setup-debian.sh gives it \
         Debian's 0666",
        mode & 0o777
    );
    let uid = user_id();
    let d = temp_dir();
    let kit = Kit::new(d.path());
    let (image, mnt) = (d.path().join("u.img"), d.path().join("m"));
    let (img, mp) = (image.to_str().unwrap(), mnt.to_str().unwrap());
    let fsd_conf = kit.conf("fsd.toml");
    let clean_conf = kit.conf("cleanerd.conf");

    kit.run("mkfs-lfs", &["-q", "-B", "64", "--size", "64M", img])
        .assert_success();
    kit.run("mkdir", &[mp]).assert_success();

    // Mounted by the user, through fusermount3, in the background.
    let o = kit.run("fsd", &["--daemon", "-c", &fsd_conf, img, mp]);
    assert_eq!(o.status.code(), Some(0), "{o}");
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let line = info
        .lines()
        .find(|l| l.split(' ').nth(4) == Some(mp))
        .unwrap_or_else(|| panic!("{mp} is not mounted:\n{info}"));
    assert!(
        line.contains(" - fuse.lfs ") && line.contains(&format!("user_id={uid}")),
        "{line}"
    );
    let sock = kit.runtime.join("lfs/u.img.sock");
    assert!(sock.exists(), "no socket in the user's runtime directory");

    let o = kit
        .run(
            "sh",
            &["-c", &format!("echo mine > '{mp}/f' && cat '{mp}/f'")],
        )
        .assert_success();
    assert_eq!(o.stdout, "mine\n");
    // fsctl and cleanerd find the socket from the image, as the user.
    let o = kit
        .run("fsctl", &["mkcp", "-s", "-p", img])
        .assert_success();
    let snapshot = o.stdout.trim().to_owned();
    let o = kit.run("fsctl", &["lscp", "-s", img]).assert_success();
    assert!(o.stdout.contains(&snapshot), "{o}");
    kit.run("fsctl", &["df", img]).assert_success();
    let o = kit.run("cleanerd", &["-c", &clean_conf, "--once", "-p", "0", img]);
    assert!(o.status.success(), "{o}");

    // allow_other stays root's unless /etc/fuse.conf says otherwise.
    let allowed = fs::read_to_string("/etc/fuse.conf")
        .unwrap_or_default()
        .lines()
        .any(|l| l.trim() == "user_allow_other");
    let other = d.path().join("other.img");
    let m2 = d.path().join("m2");
    kit.run(
        "mkfs-lfs",
        &["-q", "-B", "64", "--size", "64M", other.to_str().unwrap()],
    )
    .assert_success();
    kit.run("mkdir", &[m2.to_str().unwrap()]).assert_success();
    if !allowed {
        let o = kit.run(
            "fsd",
            &[
                "-o",
                "allow_other",
                "-c",
                &fsd_conf,
                other.to_str().unwrap(),
                m2.to_str().unwrap(),
            ],
        );
        assert_eq!(o.status.code(), Some(EXIT_ERROR), "{o}");
        assert!(o.stderr.contains("user_allow_other"), "{o}");
    }

    // Unmounted by the user: fusermount3 -u ends fsd.
    kit.run("fusermount3", &["-u", mp]).assert_success();
    wait_gone(&sock);

    // In the foreground, SIGTERM unmounts (fuser goes through fusermount3).
    let mut child = kit
        .command("fsd", &["-c", &fsd_conf, img, mp])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + MOUNT_TIMEOUT;
    while mount_type(&mnt).as_deref() != Some("fuse.lfs") {
        assert!(std::time::Instant::now() < deadline, "fsd did not mount");
        if let Some(status) = child.try_wait().unwrap() {
            panic!("fsd exited with {status} before mounting");
        }
        std::thread::sleep(POLL);
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        Signal::SIGTERM,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(mount_type(&mnt), None);
    assert_fsck_clean(&image, "after the user's mounts");
    let o = kit.run("fsctl", &["fsck", img]).assert_success();
    assert!(o.stdout.contains("clean"), "{o}");
}
