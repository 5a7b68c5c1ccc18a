//! End to end on NBD: `qemu-nbd` serves an image file on 127.0.0.1 or a
//! Unix socket; `mkfs.lfs` formats the export by its `nbd://` name, `fsd`
//! mounts it, ordinary programs use it, `fsctl` checks it, and the server
//! is killed and restarted under a running workload without losing
//! anything that was fsync'd. Also the refusals, with their exit codes.
//!
//! Needs qemu-nbd (Debian's qemu-utils) and FUSE; without them the tests
//! fail, never skip. Every server is a [`QemuNbd`] guard that kills it on
//! drop.

#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

use harness::*;
use lfs_e2e::qemu_nbd::{image, QemuNbd};
use lfs_e2e::{built_binary, run, run_ok};
use nix::sys::signal::Signal;

const IMAGE_BYTES: u64 = 256 << 20;

fn mkfs_nbd(name: &str) {
    run_ok(
        Command::new(built_binary("mkfs-lfs")).args(["-q", name]),
        CMD_TIMEOUT,
    );
}

fn mkfs_refusal(args: &[&str], code: i32, text: &str) {
    let o = run(
        Command::new(built_binary("mkfs-lfs")).args(args),
        CMD_TIMEOUT,
    );
    assert_eq!(o.status.code(), Some(code), "{o}");
    assert!(
        o.stderr.contains(text),
        "mkfs.lfs's message lacks {text:?}: {o}"
    );
}

/// Copies a tree, writes a file with dd, and returns the manifest.
fn workload(mnt: &Path, scratch: &Path) -> String {
    let src = scratch.join("src");
    if !src.exists() {
        fs::create_dir(&src).unwrap();
        make_tree(&src);
        fs::write(scratch.join("rand"), pattern(3 << 20, 5)).unwrap();
    }
    let (m, t) = (mnt.display(), scratch.display());
    sh(&format!(
        "M='{m}'; T='{t}'
         cp -a \"$T/src\" \"$M/tree\"
         diff -r \"$T/src\" \"$M/tree\"
         dd if=\"$T/rand\" of=\"$M/dd.bin\" bs=64k conv=fsync status=none
         cmp \"$T/rand\" \"$M/dd.bin\"
         mkdir -p \"$M/a/b\" && mv \"$M/tree/other\" \"$M/a/b/moved\"
         ln -s a/b/moved/x \"$M/link\" && test -f \"$M/link\"
         rm \"$M/tree/one\""
    ));
    manifest(mnt)
}

#[test]
fn mkfs_fsd_and_fsctl_on_an_nbd_export_over_tcp() {
    let tmp = lfs_e2e::temp_dir();
    let img = image(&tmp.path().join("export.img"), IMAGE_BYTES);
    let mnt = mkdir(tmp.path(), "mnt");
    let mut server = QemuNbd::tcp(&img, "img", &[]);
    let name = server.name();
    let dev = Path::new(&name);
    mkfs_nbd(&name);
    let sup = run_ok(&mut lfs_e2e::daemons::fsctl(&["super", &name]), CMD_TIMEOUT);
    assert!(sup.stdout.contains(&format!("device {name}")), "{sup}");
    run_ok(
        lfs_e2e::daemons::fsctl(&["dumpseg", &name, "0"]).stdout(Stdio::null()),
        CMD_TIMEOUT,
    );

    let mut fsd = Fsd::start(dev, &mnt, &[]);
    let before = workload(&mnt, tmp.path());
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM on NBD");
    assert_fsck_clean(dev, "after the workload on NBD");

    let mut fsd = Fsd::start(dev, &mnt, &[]);
    assert_eq!(manifest(&mnt), before, "the tree changed across a remount");
    run_ok(Command::new("umount").arg(&mnt), CMD_TIMEOUT);
    fsd.assert_clean_exit("umount on NBD");

    // The same image served read-only: fsd mounts it with -o ro, and
    // refuses a read-write mount naming the reason.
    server.kill();
    let server = QemuNbd::tcp(&img, "img", &["-r"]);
    let ro_name = server.name();
    let o = fsd_refusal(&[
        &ro_name,
        mnt.to_str().unwrap(),
        "--socket",
        "/tmp/unused.sock",
    ]);
    assert_refused(&o, EXIT_ERROR, "read-only");
    let mut fsd = Fsd::start(Path::new(&ro_name), &mnt, &["-o", "ro"]);
    assert_eq!(manifest(&mnt), before, "the read-only mount differs");
    fsd.signal(Signal::SIGTERM);
    let status = fsd.wait();
    assert_eq!(status.code(), Some(EXIT_OK), "{}", fsd.log());
    assert_fsck_clean(Path::new(&ro_name), "read-only export");
}

#[test]
fn fsd_on_an_nbd_export_over_a_unix_socket() {
    let tmp = lfs_e2e::temp_dir();
    let img = image(&tmp.path().join("unix.img"), IMAGE_BYTES);
    let mnt = mkdir(tmp.path(), "mnt");
    let server = QemuNbd::unix(&img, &tmp.path().join("nbd.sock"), "vol", &[]);
    let name = server.name();
    mkfs_nbd(&name);
    let mut fsd = Fsd::start(Path::new(&name), &mnt, &[]);
    let before = workload(&mnt, tmp.path());
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM on NBD over a Unix socket");
    assert_fsck_clean(Path::new(&name), "after the workload over a Unix socket");
    let mut fsd = Fsd::start(Path::new(&name), &mnt, &[]);
    assert_eq!(manifest(&mnt), before);
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("the remount");
}

#[test]
fn killing_and_restarting_the_server_mid_workload_loses_nothing_fsynced() {
    let tmp = lfs_e2e::temp_dir();
    let img = image(&tmp.path().join("restart.img"), IMAGE_BYTES);
    let mnt = mkdir(tmp.path(), "mnt");
    let mut server = QemuNbd::tcp(&img, "img", &[]);
    let name = server.name();
    let dev = Path::new(&name);
    mkfs_nbd(&name);
    let src = tmp.path().join("block");
    fs::write(&src, pattern(96 * 1024, 11)).unwrap();
    let mut fsd = Fsd::start(dev, &mnt, &[]);
    // Writes file after file, each fsync'd (dd conv=fsync), and prints a
    // file's number only once its fsync returned; stops at the first
    // failure (an EIO is an allowed outcome, a silent loss is not).
    let writer = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); \
             dd if='{}' of='{}/f'$i bs=32k conv=fsync status=none || {{ echo failed $i >&2; exit 1; }}; \
             echo $i; [ -e '{}' ] && exit 0; done",
            src.display(),
            mnt.display(),
            tmp.path().join("stop").display()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..2 {
        sleep(Duration::from_millis(1500));
        server.kill();
        sleep(Duration::from_millis(700));
        server.restart();
    }
    sleep(Duration::from_millis(1500));
    fs::write(tmp.path().join("stop"), b"").unwrap();
    let out = writer.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let synced: Vec<u64> = stdout.lines().map(|l| l.parse().unwrap()).collect();
    assert!(synced.len() > 10, "only {} fsyncs: {stderr}", synced.len());
    let transparent = out.status.success();
    fsd.signal(Signal::SIGTERM);
    if transparent {
        fsd.assert_clean_exit("SIGTERM after the server restarts");
        let log = fsd.log();
        assert!(log.contains("reconnected"), "fsd never reconnected:\n{log}");
    } else {
        // EIO reached the writer: fsd went read-only; its exit status is
        // that of a failed final checkpoint.
        eprintln!(
            "the writer saw an error ({stderr}); fsd's log:\n{}",
            fsd.log()
        );
        fsd.wait();
        lazy_unmount(&mnt);
    }
    drop(fsd);
    assert_fsck_clean(dev, "after the server restarts");
    let mut fsd = Fsd::start(dev, &mnt, &[]);
    let want = fs::read(&src).unwrap();
    for i in &synced {
        let got = fs::read(mnt.join(format!("f{i}")))
            .unwrap_or_else(|e| panic!("f{i} was fsync'd but is gone: {e}"));
        assert!(got == want, "f{i} was fsync'd but its content differs");
    }
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("the check after the restarts");
}

#[test]
fn refusals_name_the_export_and_use_the_documented_exit_codes() {
    let tmp = lfs_e2e::temp_dir();
    let img = image(&tmp.path().join("r.img"), IMAGE_BYTES);
    let tiny = image(&tmp.path().join("tiny.img"), 64 << 10);
    let small = image(&tmp.path().join("small.img"), 4 << 20);
    let ro_img = image(&tmp.path().join("ro.img"), IMAGE_BYTES);
    let server = QemuNbd::tcp(&img, "img", &[]);
    let ro = QemuNbd::tcp(&ro_img, "img", &["-r"]);
    let tiny_server = QemuNbd::tcp(&tiny, "tiny", &[]);
    let small_server = QemuNbd::tcp(&small, "small", &[]);
    let wrong = server.name().replace("/img", "/nosuch");
    mkfs_refusal(&["-q", &wrong], 1, "\"nosuch\"");
    mkfs_refusal(&["-q", &wrong], 1, "NBD_REP_ERR_UNKNOWN");
    mkfs_refusal(
        &["--size", "1G", &server.name()],
        2,
        "--size applies only to image files",
    );
    mkfs_refusal(&["-q", &ro.name()], 1, "read-only");
    mkfs_refusal(
        &["-q", &tiny_server.name()],
        1,
        "smaller than the smallest lfs filesystem",
    );
    mkfs_refusal(&["-q", &small_server.name()], 3, "too small");
    mkfs_refusal(
        &["-q", "nbd://127.0.0.1:0/x"],
        2,
        "\"nbd://127.0.0.1:0/x\" is not a valid NBD device name",
    );
    mkfs_refusal(&["-q", "nbd+unix:///x"], 2, "socket=PATH part is missing");
    let mnt = mkdir(tmp.path(), "mnt");
    let o = fsd_refusal(&["nbds://h/x", mnt.to_str().unwrap()]);
    assert_refused(&o, EXIT_USAGE, "not supported");
    let o = run(&mut lfs_e2e::daemons::fsctl(&["fsck", &wrong]), CMD_TIMEOUT);
    assert!(
        !o.status.success() && o.stderr.contains("\"nosuch\""),
        "{o}"
    );
}
