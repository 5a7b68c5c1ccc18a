//! End to end, issue 26 item 8: the systemd units `make install` installs
//! pass `systemd-analyze verify` as installed (their commands and man
//! pages found), and fsd speaks the readiness protocol their
//! `Type=notify` relies on.

#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::ffi::OsString;
use std::fs;
use std::os::unix::net::UnixDatagram;
use std::process::Command;
use std::time::Duration;

use harness::*;
use lfs_e2e::{make, require_tool, run, run_ok, temp_dir, MAKE_TIMEOUT};
use nix::sys::signal::Signal;

#[test]
fn the_installed_units_pass_systemd_analyze_verify() {
    require_tool("systemd-analyze");
    let d = temp_dir();
    let prefix = d.path().join("usr");
    let sysconf = d.path().join("etc/lfs");
    let mut install = make();
    for (var, value) in [("PREFIX", &prefix), ("SYSCONFDIR", &sysconf)] {
        let mut arg = OsString::from(format!("{var}="));
        arg.push(value);
        install.arg(arg);
    }
    install.arg("install");
    run_ok(&mut install, MAKE_TIMEOUT);

    let units = prefix.join("lib/systemd/system");
    let fsd_unit = fs::read_to_string(units.join("fsd@.service")).unwrap();
    assert!(
        fsd_unit.contains(&format!("ExecStart={}/sbin/fsd ", prefix.display())),
        "{fsd_unit}"
    );
    assert!(fsd_unit.contains("Type=notify"), "{fsd_unit}");
    assert!(
        fsd_unit.contains(&format!("{}/mounts/%i.env", sysconf.display())),
        "{fsd_unit}"
    );
    assert!(!fsd_unit.contains("@SBINDIR@") && !fsd_unit.contains("@SYSCONFDIR@"));
    // fsd starts cleanerd itself: no unit of its own (fsd(8), CLEANING).
    assert!(!units.join("cleanerd@.service").exists());

    // Templates are verified through an instance.
    let mut args = vec![OsString::from("verify")];
    let instance = units.join("fsd@srv-data.service");
    std::os::unix::fs::symlink("fsd@.service", &instance).unwrap();
    args.push(instance.into_os_string());
    let o = run(
        Command::new("systemd-analyze")
            .args(&args)
            // Documentation= is checked with man(1): the installed pages.
            .env("MANPATH", prefix.join("share/man")),
        CMD_TIMEOUT,
    );
    assert!(o.status.success(), "{o}");
    assert!(o.stderr.trim().is_empty(), "{o}");
}

/// `Type=notify`: fsd sends READY=1 once mounted and STOPPING=1 when it
/// unmounts, to the socket systemd names in NOTIFY_SOCKET.
#[test]
fn fsd_tells_systemd_when_it_is_mounted() {
    let d = temp_dir();
    let image = mkfs_with(d.path(), "n.img", &["-B", "64", "--size", "64M"]);
    let mnt = mkdir(d.path(), "mnt");
    let notify = d.path().join("notify.sock");
    let listener = UnixDatagram::bind(&notify).unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let sock = mnt.with_extension("sock");
    let mut child = lfs_e2e::daemons::fsd(&[
        "--socket".as_ref(),
        sock.as_os_str(),
        image.as_os_str(),
        mnt.as_os_str(),
    ])
    .env("NOTIFY_SOCKET", &notify)
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let mut buf = [0u8; 256];
    let n = listener.recv(&mut buf).expect("no READY=1 from fsd");
    assert_eq!(&buf[..n], b"READY=1");
    assert_eq!(mount_type(&mnt).as_deref(), Some("fuse.lfs"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        Signal::SIGTERM,
    )
    .unwrap();
    let n = listener.recv(&mut buf).expect("no STOPPING=1 from fsd");
    assert_eq!(&buf[..n], b"STOPPING=1");
    assert!(child.wait().unwrap().success());
    lazy_unmount(&mnt);
}
