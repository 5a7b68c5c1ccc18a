//! End to end, issue 26's safety items: what an administrator can do
//! wrong must leave the filesystem as it was, and say why.
//!
//! * mkfs.lfs makes every check before its first change to the target:
//!   `-f --size` on a mounted image (or one attached to a loop device)
//!   refuses and leaves its size and bytes alone (item 1);
//! * sizes mean the same in fsd.toml, cleanerd.conf and on mkfs.lfs's
//!   command line (item 6).

#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::fs;
use std::path::Path;
use std::process::Command;

use harness::*;
use lfs_e2e::{built_binary, require_tool, run, run_ok, temp_dir, LoopDevice, Output};

/// mkfs.lfs's exit statuses (mkfs.lfs(8)).
const MKFS_EXISTS: i32 = 4;
const MKFS_BUSY: i32 = 5;

fn mkfs_in(dir: &Path, args: &[&str]) -> Output {
    run(
        Command::new(built_binary("mkfs-lfs"))
            .args(args)
            .current_dir(dir),
        CMD_TIMEOUT,
    )
}

/// Item 1: the data-loss sequence. A mounted 120M image, `mkfs.lfs -f
/// --size 70M` on it: refused as busy, and the image still 120M, still
/// readable through the mount, still clean after the unmount.
#[test]
fn mkfs_refuses_a_mounted_image_before_changing_its_size() {
    let d = temp_dir();
    let image = mkfs_with(d.path(), "shrink.img", &["--size", "120M"]);
    let mnt = mkdir(d.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let data = pattern(3 << 20, 26);
    fs::write(mnt.join("kept"), &data).unwrap();
    sh(&format!("sync '{}'", mnt.join("kept").display()));
    let before = fs::read(&image).unwrap();

    for args in [
        &["-f", "--size", "70M", "shrink.img"][..],
        &["-f", "--size", "200M", "shrink.img"],
        &["-f", "shrink.img"],
        &["-n", "-f", "--size", "70M", "shrink.img"],
    ] {
        let o = mkfs_in(d.path(), args);
        assert_eq!(o.status.code(), Some(MKFS_BUSY), "{args:?}: {o}");
        assert!(o.stderr.contains("in use"), "{args:?}: {o}");
        assert_eq!(
            fs::metadata(&image).unwrap().len(),
            120 << 20,
            "mkfs.lfs {args:?} changed the size of a mounted image"
        );
        assert!(
            fs::read(&image).unwrap() == before,
            "mkfs.lfs {args:?} changed the bytes of a mounted image"
        );
    }
    assert!(fs::read(mnt.join("kept")).unwrap() == data);
    fsd.signal(nix::sys::signal::Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&image, "after the refused mkfs runs");
}

/// Item 1, the other half: an ext4 image attached to a loop device is
/// neither grown nor shrunk by a refused `-f --size`, and a dry run says
/// what the real run would: exit 4 for an existing filesystem without
/// `-f` (item 10), 5 for an attached image.
#[test]
fn mkfs_leaves_an_attached_ext4_image_alone() {
    require_tool("losetup");
    require_tool("mkfs.ext4");
    let d = temp_dir();
    let img = d.path().join("e.img");
    fs::File::create(&img).unwrap().set_len(100 << 20).unwrap();
    run_ok(
        Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&img),
        CMD_TIMEOUT,
    );

    let o = mkfs_in(d.path(), &["-n", "e.img"]);
    assert_eq!(o.status.code(), Some(MKFS_EXISTS), "dry run: {o}");
    assert!(!o.stdout.contains("would format"), "{o}");
    let o = mkfs_in(d.path(), &["e.img"]);
    assert_eq!(o.status.code(), Some(MKFS_EXISTS), "real run: {o}");
    let o = mkfs_in(d.path(), &["-n", "-f", "e.img"]).assert_success();
    assert!(
        o.stdout
            .contains("would overwrite an existing ext2/ext3/ext4"),
        "{o}"
    );

    let _dev = LoopDevice::attach(&img);
    let before = fs::read(&img).unwrap();
    for args in [
        &["-f", "--size", "200M", "e.img"][..],
        &["-f", "--size", "70M", "e.img"],
        &["-n", "-f", "e.img"],
    ] {
        let o = mkfs_in(d.path(), args);
        assert_eq!(o.status.code(), Some(MKFS_BUSY), "{args:?}: {o}");
        assert_eq!(fs::metadata(&img).unwrap().len(), 100 << 20, "{args:?}");
        assert!(fs::read(&img).unwrap() == before, "{args:?} wrote");
    }
}

/// Item 6: "MB" is 10^6 and "M" 2^20 for mkfs.lfs's `--size`, fsd.toml's
/// `dirty_limit` and cleanerd.conf alike (before, fsd read MB as 2^20).
#[test]
fn sizes_mean_the_same_everywhere() {
    let d = temp_dir();
    mkfs_in(d.path(), &["-q", "--size", "100MB", "si.img"]).assert_success();
    let len = fs::metadata(d.path().join("si.img")).unwrap().len();
    assert_eq!(len, 100_000_000);
    // 256 KiB segments, so that cleanerd's byte amounts below resolve to
    // segment counts that tell 10^6 from 2^20.
    let img = mkfs_with(d.path(), "bin.img", &["-B", "64", "--size", "100M"]);
    assert_eq!(fs::metadata(&img).unwrap().len(), 100 << 20);

    // 1MB is below fsd's minimum dirty limit of 1M (2^20 bytes).
    let conf = d.path().join("fsd.toml");
    fs::write(&conf, "dirty_limit = \"1MB\"\n").unwrap();
    let mnt = mkdir(d.path(), "mnt");
    let (conf_s, img_s, mnt_s) = (
        conf.to_str().unwrap(),
        img.to_str().unwrap(),
        mnt.to_str().unwrap(),
    );
    let o = fsd_refusal(&["-c", conf_s, img_s, mnt_s]);
    assert_refused(&o, EXIT_USAGE, "1000000 bytes is below the minimum");
    fs::write(&conf, "dirty_limit = \"1MiB\"\n").unwrap();
    let sock = mnt.with_extension("sock");
    let sock_s = sock.to_str().unwrap();
    let mut fsd = Fsd::start_exactly(&img, &mnt, &["-c", conf_s, "--socket", sock_s]);

    // cleanerd: 10MB is 38.1 segments of 256 KiB (39, rounding up), 10M
    // would be 40; 20MB 76.3 (77).
    let cconf = d.path().join("cleanerd.conf");
    fs::write(
        &cconf,
        "min_clean_segments = \"10MB\"\nmax_clean_segments = \"20MB\"\n",
    )
    .unwrap();
    let log = fs::File::create(d.path().join("cleanerd.log")).unwrap();
    let mut cleanerd = Cleanerd {
        child: lfs_e2e::daemons::cleanerd(&["-c".as_ref(), cconf.as_os_str()])
            .arg(sock_s)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
        log: d.path().join("cleanerd.log"),
    };
    assert_reconnects(&cleanerd, sock_s, 0, "at start");
    let o = fsctl(&["clean", sock_s, "--status", "--json"]).assert_success();
    let st: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(
        (st["min_clean"].as_u64(), st["max_clean"].as_u64()),
        (Some(39), Some(77)),
        "{o}"
    );
    cleanerd.terminate();
    fsd.signal(nix::sys::signal::Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}

/// fsctl's exit statuses (fsctl(8)).
const FSCTL_NO_FSD: i32 = 5;

/// `fsctl lscp -a` of the fsd on `sock`: the checkpoint numbers.
fn checkpoints(sock: &str) -> Vec<u64> {
    let o = fsctl(&["lscp", "-a", "--json", sock]).assert_success();
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    v["checkpoints"]
        .as_array()
        .unwrap_or_else(|| panic!("lscp --json has no checkpoints: {o}"))
        .iter()
        .map(|c| c["cno"].as_u64().unwrap())
        .collect()
}

/// Item 2: the wrong-image sequence. With `a/NAME` mounted on the default
/// socket (named after the file name), fsctl given `b/NAME`, another
/// image of the same name, must not reach `a`'s fsd: every command says
/// no fsd serves `b/NAME` (exit 5) and `a` is unchanged; and fsd given
/// `b/NAME` refuses before it reads or writes `b/NAME`.
#[test]
fn the_wrong_filesystem_never_answers() {
    let d = temp_dir();
    // A name no other test uses: the default socket lives in /run/lfs.
    let name = format!("ok-{}-{}.img", std::process::id(), line!());
    let (a, b) = (mkdir(d.path(), "a"), mkdir(d.path(), "b"));
    let img_a = mkfs_with(&a, &name, &["-B", "64", "--size", "64M"]);
    let img_b = mkfs_with(&b, &name, &["-B", "64", "--size", "64M"]);
    let mnt = mkdir(d.path(), "mnt");
    let mut fsd = Fsd::start_exactly(&img_a, &mnt, &[]);
    let sock = format!("/run/lfs/{name}.sock");
    let before = checkpoints(&sock);
    let b_bytes = fs::read(&img_b).unwrap();

    let other = format!("b/{name}");
    for args in [
        vec!["mkcp", "-p", &other],
        vec!["mkcp", "-s", &other],
        vec!["rmcp", &other, "1"],
        vec!["chcp", "ss", &other, "1"],
        vec!["freeze", &other],
        vec!["thaw", &other],
        vec!["lscp", &other],
        vec!["df", &other],
        vec!["diff", "-t", &other, "1", "0"],
        vec!["clean", "--status", &other],
    ] {
        let o = run(
            lfs_e2e::daemons::fsctl(&args).current_dir(d.path()),
            CMD_TIMEOUT,
        );
        assert_eq!(o.status.code(), Some(FSCTL_NO_FSD), "{args:?}: {o}");
        assert!(
            o.stderr.contains(&format!("no fsd serves {other}")),
            "{args:?}: {o}"
        );
    }
    assert_eq!(checkpoints(&sock), before, "a's checkpoints changed");
    // Not frozen: a write goes through at once.
    fs::write(mnt.join("after"), b"written").unwrap();

    // The right image, by any name, still answers.
    let o = run(
        lfs_e2e::daemons::fsctl(&["lscp", &format!("a/{name}")]).current_dir(d.path()),
        CMD_TIMEOUT,
    );
    assert!(o.status.success(), "{o}");
    fsctl(&["lscp", mnt.to_str().unwrap()]).assert_success();

    // cleanerd given b/NAME does not clean a.
    let log = d.path().join("wrong-cleanerd.log");
    let out = fs::File::create(&log).unwrap();
    let mut cleanerd = Cleanerd {
        child: lfs_e2e::daemons::cleanerd(&[other.as_str()])
            .current_dir(d.path())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap(),
        log,
    };
    let deadline = std::time::Instant::now() + CMD_TIMEOUT;
    while !cleanerd.log().contains("not cleaning it") {
        assert!(std::time::Instant::now() < deadline, "{}", cleanerd.log());
        std::thread::sleep(POLL);
    }
    assert!(
        !cleanerd.log().contains("connected to fsd"),
        "{}",
        cleanerd.log()
    );
    cleanerd.terminate();
    assert_eq!(
        checkpoints(&sock),
        before,
        "cleanerd changed a's checkpoints"
    );

    // fsd on b/NAME: refused (busy) before b/NAME is opened.
    let mnt2 = mkdir(d.path(), "mnt2");
    let o = run(
        lfs_e2e::daemons::fsd(&[other.as_str(), "mnt2"]).current_dir(d.path()),
        CMD_TIMEOUT,
    );
    assert_refused(&o, EXIT_BUSY, &sock);
    assert!(
        fs::read(&img_b).unwrap() == b_bytes,
        "the refused fsd wrote to b/{name}"
    );
    assert_eq!(mount_type(&mnt2), None);
    fsd.signal(nix::sys::signal::Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&img_a, "after the wrong-image attempts");
    assert_fsck_clean(&img_b, "after the refused fsd");
}

/// Item 4: `fsctl diff` names files whatever directories hold them, so
/// only root and the filesystem's owner may ask for it; a user the
/// socket admits (its group, as fsd(8) suggests for queries) is refused
/// and learns no name, while other queries still answer.
#[test]
fn diff_names_no_file_to_a_user_who_may_not_read_its_directory() {
    require_tool("setpriv");
    let d = temp_dir();
    let image = mkfs_with(d.path(), "p.img", &["-B", "64", "--size", "64M"]);
    let mnt = mkdir(d.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let sock = mnt.with_extension("sock");
    let s = sock.to_str().unwrap();
    let cp = fsctl(&["mkcp", "-p", s]).assert_success();
    let old = cp.stdout.trim().to_string();
    let private = mnt.join("private");
    fs::create_dir(&private).unwrap();
    fs::write(private.join("salary-2026.xlsx"), b"secret").unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).unwrap();
    sh(&format!("chgrp nogroup '{s}'"));

    let as_nobody = |args: &[&str]| run(&mut lfs_e2e::daemons::fsctl_as_nobody(args), CMD_TIMEOUT);
    let o = as_nobody(&["diff", "-t", s, &old, "0"]);
    assert_eq!(o.status.code(), Some(8), "{o}");
    assert!(!o.stdout.contains("salary"), "{o}");
    assert!(!o.stderr.contains("salary"), "{o}");
    assert!(o.stderr.contains("EPERM"), "{o}");
    as_nobody(&["lscp", s]).assert_success();
    as_nobody(&["df", s]).assert_success();

    let o = fsctl(&["diff", "-t", s, &old, "0"]).assert_success();
    assert!(o.stdout.contains("A /private/salary-2026.xlsx"), "{o}");
    fsd.signal(nix::sys::signal::Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}

/// Item 10: `fsctl df` counts the space a snapshot holds under snapshots
/// even when plain checkpoints made after it see the same blocks (it put
/// them under "older checkpoints", which deleting checkpoints would not
/// free).
#[test]
fn df_puts_what_a_snapshot_holds_under_snapshots() {
    let d = temp_dir();
    let image = mkfs_with(d.path(), "s.img", &["-B", "64", "--size", "64M"]);
    let mnt = mkdir(d.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let s = mnt.with_extension("sock");
    let s = s.to_str().unwrap();
    let big = 4 << 20;
    fs::write(mnt.join("big"), pattern(big, 12)).unwrap();
    fsctl(&["mkcp", "-s", s]).assert_success();
    // Plain checkpoints that still see the file, then it goes.
    for i in 0..3 {
        fs::write(mnt.join(format!("small{i}")), b"x").unwrap();
        fsctl(&["mkcp", s]).assert_success();
    }
    fs::remove_file(mnt.join("big")).unwrap();
    fsctl(&["mkcp", s]).assert_success();
    let df = df_json(s);
    let (snap, older) = (
        df["snapshot_bytes"].as_u64().unwrap(),
        df["protected_bytes"].as_u64().unwrap(),
    );
    assert!(snap >= big as u64, "{df}");
    assert!(older < big as u64 / 4, "{df}");
    fsd.signal(nix::sys::signal::Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}
