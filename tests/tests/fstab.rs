//! End to end, issue 26 item 7 (and 9's fstab pass column): lfs mounted
//! the way an administrator mounts any filesystem, through mount(8) and
//! an fstab line, with the commands `make install` installs.
//!
//! mount(8) finds a filesystem's helper only in /sbin, so the test runs
//! in a mount namespace of its own (unshare(1)) where an overlay puts the
//! staged install's sbin over /usr/sbin: the machine's /sbin is never
//! touched. There `mount -T FSTAB MNT` of a `fuse.lfs` line with the
//! generic options people write (defaults, noatime, nodev, nosuid,
//! _netdev, nofail, x-systemd.*) must return with the filesystem mounted
//! and fsd serving it in the background; `mount -t lfs` too; umount ends
//! fsd with its final checkpoint; fsck(8) checks the line (pass 2)
//! through fsck.fuse.lfs.

#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::ffi::OsString;
use std::fs;
use std::process::Command;

use harness::*;
use lfs_e2e::{make, require_tool, run, run_ok, temp_dir, MAKE_TIMEOUT};

#[test]
fn mount_and_fsck_through_fstab_with_the_installed_helper() {
    require_fuse();
    for tool in ["unshare", "mount", "umount", "fsck"] {
        require_tool(tool);
    }
    let d = temp_dir();
    let stage = d.path().join("stage");
    let mut install = make();
    let mut destdir = OsString::from("DESTDIR=");
    destdir.push(&stage);
    install.arg("install").arg(destdir).arg("PREFIX=/usr");
    run_ok(&mut install, MAKE_TIMEOUT);
    for name in ["mount.fuse.lfs", "mount.lfs", "fsck.lfs", "fsck.fuse.lfs"] {
        assert!(
            fs::symlink_metadata(stage.join("usr/sbin").join(name)).is_ok(),
            "make install did not install {name}"
        );
    }

    let image = mkfs_with(d.path(), "tab.img", &["-B", "64", "--size", "64M"]);
    let mnt = mkdir(d.path(), "mnt");
    let sock = d.path().join("tab.sock");
    let conf = lfs_e2e::daemons::shipped_conf("fsd.toml");
    let fstab = d.path().join("fstab");
    // The options of a real line; config= and socket= keep the test off
    // the machine's /etc/lfs and /run/lfs.
    let options = format!(
        "defaults,noatime,nodev,nosuid,_netdev,nofail,x-systemd.device-timeout=10s,\
         config={},socket={}",
        conf.display(),
        sock.display()
    );
    fs::write(
        &fstab,
        format!(
            "# lfs, as fstab(5)\n{} {} fuse.lfs {options} 0 2\n",
            image.display(),
            mnt.display()
        ),
    )
    .unwrap();
    // fsck(8) skips a line with nofail whose device is not a block device
    // (an image file): the same line without it, for the pass column.
    let fsck_tab = d.path().join("fstab.fsck");
    fs::write(
        &fsck_tab,
        format!(
            "{} {} fuse.lfs {} 0 2\n",
            image.display(),
            mnt.display(),
            options.replace(",nofail", "")
        ),
    )
    .unwrap();
    let (img, mp, so) = (image.display(), mnt.display(), sock.display());
    let script = format!(
        r#"set -eu
mount -t overlay overlay -o lowerdir={stage}/usr/sbin:/usr/sbin /usr/sbin
type_at() {{ awk -v mp="$1" '$5 == mp {{ for (i = 7; i <= NF; i++) if ($i == "-") t = $(i + 1) }} END {{ print t }}' /proc/self/mountinfo; }}
gone() {{ i=0; while [ -e {so} ]; do i=$((i + 1)); [ $i -lt 600 ] || {{ echo "fsd did not exit" >&2; exit 1; }}; sleep 0.1; done; }}

# The fstab line: mount returns once mounted, fsd in the background.
mount -T {fstab} {mp}
[ "$(type_at {mp})" = fuse.lfs ] || {{ echo "not mounted when mount returned" >&2; exit 1; }}
echo "through fstab" > {mp}/f
umount {mp}
gone

# -t lfs: the other helper name.
mount -t lfs -o config={conf},socket={so} {img} {mp}
[ "$(cat {mp}/f)" = "through fstab" ]
umount {mp}
gone

# mount -f checks and mounts nothing.
mount -f -T {fstab} {mp}
[ -z "$(type_at {mp})" ]

# The pass column: fsck(8) runs fsck.fuse.lfs for the line.
FSTAB_FILE={fsck_tab} fsck -A -T
echo done
"#,
        stage = stage.display(),
        fstab = fstab.display(),
        fsck_tab = fsck_tab.display(),
        conf = conf.display(),
    );
    let o = run(
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(&script),
        CMD_TIMEOUT,
    );
    assert!(o.status.success() && o.stdout.contains("done"), "{o}");
    // mount(8) says nothing when all is well.
    assert!(o.stderr.is_empty(), "{o}");
    assert!(o.stdout.contains("clean"), "fsck -A did not check: {o}");
    assert_eq!(mount_type(&mnt), None);
    assert_fsck_clean(&image, "after mounting through fstab");
}

/// `fsd --daemon` returns 0 once the filesystem is mounted, with fsd
/// serving it from a session of its own, and a failure before that with
/// its status and message; the generic options are accepted, the ones
/// lfs cannot honour refused.
#[test]
fn daemon_returns_once_mounted_and_reports_failures() {
    require_fuse();
    let d = temp_dir();
    let image = mkfs_with(d.path(), "bg.img", &["-B", "64", "--size", "64M"]);
    let mnt = mkdir(d.path(), "mnt");
    let sock = mnt.with_extension("sock");
    let (img, mp, so) = (
        image.to_str().unwrap(),
        mnt.to_str().unwrap(),
        sock.to_str().unwrap(),
    );
    let o = run(
        &mut lfs_e2e::daemons::fsd(&[
            "--daemon",
            "--socket",
            so,
            "-o",
            "defaults,noatime,nodev,nosuid,noexec,_netdev,x-systemd.automount",
            img,
            mp,
        ]),
        CMD_TIMEOUT,
    );
    assert_eq!(o.status.code(), Some(0), "{o}");
    // Mounted when it returned, and quiet.
    assert_eq!(mount_type(&mnt).as_deref(), Some("fuse.lfs"));
    assert!(o.stderr.is_empty(), "{o}");
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let line = info
        .lines()
        .find(|l| l.split(' ').nth(4) == Some(mp))
        .unwrap_or_else(|| panic!("{mp} not in mountinfo"));
    assert!(line.contains("noexec") && line.contains("nodev"), "{line}");
    fs::write(mnt.join("f"), b"served in the background").unwrap();
    fsctl(&["lscp", so]).assert_success();
    run_ok(Command::new("umount").arg(&mnt), CMD_TIMEOUT);
    let deadline = std::time::Instant::now() + CMD_TIMEOUT;
    while sock.exists() {
        assert!(std::time::Instant::now() < deadline, "fsd did not exit");
        std::thread::sleep(POLL);
    }
    assert_fsck_clean(&image, "after the daemon");

    // A failure before the mount: the status and the message.
    let missing = d.path().join("missing.img");
    let o = run(
        &mut lfs_e2e::daemons::fsd(&["--daemon", missing.to_str().unwrap(), mp]),
        CMD_TIMEOUT,
    );
    assert_eq!(o.status.code(), Some(EXIT_ERROR), "{o}");
    assert!(o.stderr.contains("missing.img"), "{o}");
    let o = fsd_refusal(&["-o", "strictatime", img, mp]);
    assert_refused(&o, EXIT_USAGE, "no access times");
    let o = fsd_refusal(&["-f", "--daemon", img, mp]);
    assert_eq!(o.status.code(), Some(EXIT_USAGE), "{o}");
}
