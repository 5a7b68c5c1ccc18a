//! End to end: `fsctl freeze` and `fsctl thaw` against a running fsd.
//! Writers into the mount wait while it is frozen, reads and queries go
//! on, the device is a clean image meanwhile, and stopping fsd thaws it.

// Shared with fsd_mount.rs; each test binary uses part of it.
#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use harness::*;
use lfs_e2e::{require_tool, run, temp_dir, Output};
use nix::sys::signal::Signal;

/// Long enough for a 1 MiB write that does not wait to finish.
const SETTLE: Duration = Duration::from_secs(1);
/// How long a read of a frozen filesystem may take before it counts as
/// stuck behind the writers.
const READ_TIMEOUT: Duration = Duration::from_secs(20);
/// More writers than fsd's FUSE request threads (4 by default): if the
/// frozen writers held those threads, reads would stop.
const WRITERS: usize = 6;

fn fsctl(args: &[&str]) -> Output {
    run(&mut lfs_e2e::daemons::fsctl(args), CMD_TIMEOUT)
}

/// A background `dd` into the mount, killed if the test ends first.
struct Writer(Child);

impl Writer {
    /// Writes 1 MiB into `file`, which should exist: a writer that has to
    /// create it waits in the create, holding the kernel's lock on the
    /// directory (a listing of it then waits too).
    fn start(file: &Path) -> Writer {
        let child = Command::new("dd")
            .args([
                "if=/dev/zero",
                "bs=64k",
                "count=16",
                "conv=notrunc,fsync",
                "status=none",
            ])
            .arg(format!("of={}", file.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting dd: {e}"));
        Writer(child)
    }

    fn finished(&mut self) -> bool {
        self.0.try_wait().expect("waiting for dd").is_some()
    }

    /// Waits for dd to end; panics unless it succeeded in time.
    fn assert_completes(mut self, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.finished() {
            assert!(
                Instant::now() < deadline,
                "dd did not finish within {within:?}"
            );
            sleep(POLL);
        }
        let status = self.0.wait().expect("waiting for dd");
        assert!(status.success(), "dd failed: {status}");
    }
}

impl Drop for Writer {
    /// A dd whose request fsd holds cannot die until fsd answers (or
    /// dies, after this): it is not waited for long.
    fn drop(&mut self) {
        let _ = self.0.kill();
        let deadline = Instant::now() + SETTLE;
        while !self.finished() && Instant::now() < deadline {
            sleep(POLL);
        }
    }
}

#[test]
fn freeze_holds_writers_serves_readers_and_thaw_lets_them_finish() {
    require_tool("setpriv");
    let tmp = temp_dir();
    // The default socket, so that the mount point finds it: a unique
    // image name, since the socket is named after it.
    let image = mkfs(tmp.path(), &format!("freeze-{}.img", std::process::id()));
    let mnt = mkdir(tmp.path(), "mnt");
    let mut fsd = Fsd::start_exactly(&image, &mnt, &[]);
    let sock = format!(
        "/run/lfs/{}.sock",
        image.file_name().unwrap().to_string_lossy()
    );
    let (m, s) = (mnt.to_str().unwrap(), sock.as_str());
    // Written, not synced: the freeze's checkpoint must make it durable.
    std::fs::write(mnt.join("before"), b"written before the freeze").unwrap();
    for i in 0..WRITERS {
        std::fs::write(mnt.join(format!("w{i}")), b"").unwrap();
    }

    fsctl(&["freeze", m]).assert_success();
    // fsctl has exited: the freeze outlives its connection.
    let mut writers: Vec<Writer> = (0..WRITERS)
        .map(|i| Writer::start(&mnt.join(format!("w{i}"))))
        .collect();
    sleep(SETTLE);
    for (i, w) in writers.iter_mut().enumerate() {
        assert!(!w.finished(), "writer {i} finished while frozen");
    }

    // Reads through the mount and queries through the socket go on.
    let o = run(Command::new("cat").arg(mnt.join("before")), READ_TIMEOUT).assert_success();
    assert_eq!(o.stdout, "written before the freeze");
    run(Command::new("ls").arg("-l").arg(m), READ_TIMEOUT).assert_success();
    let st = fsctl(&["stat", "--json", s]).assert_success();
    assert!(st.stdout.contains("user_bytes_written"), "{st}");
    fsctl(&["lssu", m]).assert_success();
    // Cleaning is refused at once, not kept waiting for the thaw.
    let c = fsctl(&["clean", "--once", s]);
    assert!(
        !c.status.success() && c.stderr.contains("EBUSY"),
        "clean --once while frozen: {c}"
    );

    // A copy of the frozen device is a clean image of the last checkpoint.
    let copy = tmp.path().join("copy.img");
    run(
        Command::new("cp")
            .arg("--sparse=always")
            .arg(&image)
            .arg(&copy),
        CMD_TIMEOUT,
    )
    .assert_success();

    let o = fsctl(&["freeze", m]);
    assert_eq!(o.status.code(), Some(1), "{o}");
    assert!(o.stderr.contains("already frozen"), "{o}");

    // Only root or the owner may freeze or thaw.
    sh(&format!("chgrp nogroup '{s}'"));
    for cmd in ["thaw", "freeze"] {
        let o = run(
            Command::new("setpriv")
                .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
                .arg(lfs_e2e::daemons::fsctl_binary())
                .args(lfs_e2e::daemons::fsctl_args(&[cmd, s])),
            CMD_TIMEOUT,
        );
        assert_eq!(
            o.status.code(),
            Some(8),
            "permission denied (fsctl(8)): {o}"
        );
        assert!(o.stderr.contains("EPERM"), "{o}");
    }
    for (i, w) in writers.iter_mut().enumerate() {
        assert!(!w.finished(), "writer {i} finished before the thaw");
    }

    fsctl(&["thaw", m]).assert_success();
    for w in writers {
        w.assert_completes(CMD_TIMEOUT);
    }
    for i in 0..WRITERS {
        let len = std::fs::metadata(mnt.join(format!("w{i}"))).unwrap().len();
        assert_eq!(len, 1 << 20, "w{i}");
    }
    let o = fsctl(&["thaw", m]);
    assert_eq!(o.status.code(), Some(1), "{o}");
    assert!(o.stderr.contains("not frozen"), "{o}");
    let log = fsd.log();
    assert!(
        log.contains("frozen at checkpoint") && log.contains("changes resume"),
        "{log}"
    );
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");

    assert_fsck_clean(&copy, "of the copy taken while frozen");
    let mnt2 = mkdir(tmp.path(), "copy");
    let mut fsd2 = Fsd::start(&copy, &mnt2, &["-o", "ro"]);
    assert_eq!(
        std::fs::read(mnt2.join("before")).unwrap(),
        b"written before the freeze"
    );
    fsd2.signal(Signal::SIGTERM);
    fsd2.assert_clean_exit("SIGTERM");
}

#[test]
fn sigterm_thaws_a_frozen_filesystem_and_unmounts_it() {
    let tmp = temp_dir();
    let image = mkfs(tmp.path(), "frozen-stop.img");
    let mnt = mkdir(tmp.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let sock = mnt.with_extension("sock");
    fsctl(&["freeze", sock.to_str().unwrap()]).assert_success();
    let mut w = Writer::start(&mnt.join("w"));
    sleep(SETTLE);
    assert!(!w.finished(), "the writer finished while frozen");
    // The writer keeps the mount busy; fsd must thaw rather than wait for
    // it forever.
    fsd.signal(Signal::SIGTERM);
    w.assert_completes(EXIT_TIMEOUT);
    fsd.assert_clean_exit("SIGTERM while frozen");
    assert!(fsd.log().contains("thawed the filesystem"), "{}", fsd.log());
    assert_fsck_clean(&image, "after stopping a frozen fsd");
    let mnt = mkdir(tmp.path(), "again");
    let mut fsd = Fsd::start(&image, &mnt, &["-o", "ro"]);
    assert_eq!(std::fs::metadata(mnt.join("w")).unwrap().len(), 1 << 20);
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}
