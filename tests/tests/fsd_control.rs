//! End to end: the control socket of a mounted fsd and the fsctl commands
//! that use it.

// Shared with fsd_mount.rs; each test binary uses part of it.
#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;

use harness::*;
use lfs_e2e::{built_binary, require_tool, run, temp_dir, Output};
use nix::sys::signal::Signal;

fn fsctl<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    run(Command::new(built_binary("fsctl")).args(args), CMD_TIMEOUT)
}

fn json(args: &[&str]) -> serde_json::Value {
    let o = fsctl(args).assert_success();
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {o}"))
}

fn socket_of(image: &Path) -> String {
    format!(
        "/run/lfs/{}.sock",
        image.file_name().unwrap().to_string_lossy()
    )
}

#[test]
fn fsctl_reports_truthful_figures_of_a_mounted_filesystem() {
    let tmp = temp_dir();
    // A unique image name: the socket is named after it.
    let name = format!("ctl-{}.img", std::process::id());
    let image = mkfs(tmp.path(), &name);
    let mnt = mkdir(tmp.path(), "mnt");
    let mut fsd = Fsd::start_exactly(&image, &mnt, &[]);
    let m = mnt.to_str().unwrap();
    let written: u64 = 8 << 20;
    sh(&format!(
        "dd if=/dev/urandom of='{m}/data' bs=1M count=8 conv=fsync status=none"
    ));

    let df = json(&["df", "--json", m]);
    let live = df["live_bytes"].as_u64().unwrap();
    assert!(
        live >= written && live < written + (1 << 20),
        "df says {live} live bytes after writing {written}: {df}"
    );
    assert!(df["free_bytes"].as_u64().unwrap() < df["total_bytes"].as_u64().unwrap());

    // Every form of target reaches the same daemon.
    let sock = socket_of(&image);
    let inside = format!("{m}/data");
    for target in [m, inside.as_str(), sock.as_str(), image.to_str().unwrap()] {
        let v = json(&["lssu", "--json", target]);
        assert!(
            !v["segments"].as_array().unwrap().is_empty(),
            "lssu {target}: {v}"
        );
    }
    let o = fsctl(&["lssu", "-l", m]).assert_success();
    assert!(
        o.stdout.contains("NLIVEBLOCKS") && o.stdout.contains("LIVE%"),
        "{o}"
    );

    let before = json(&["lscp", "--json", "-a", m])["checkpoints"]
        .as_array()
        .unwrap()
        .len();
    let o = fsctl(&["mkcp", "-p", m]).assert_success();
    let cno: u64 = o.stdout.trim().parse().unwrap();
    let cps = json(&["lscp", "--json", "-a", m]);
    let list = cps["checkpoints"].as_array().unwrap();
    assert_eq!(list.len(), before + 1);
    assert_eq!(list.last().unwrap()["cno"].as_u64(), Some(cno));
    let o = fsctl(&["lscp", "-r", "-n", "1", m]).assert_success();
    assert!(
        o.stdout.contains(&format!(" {cno} ")),
        "mkcp's checkpoint is not the newest: {o}"
    );

    let st = json(&["stat", "--json", m]);
    assert!(
        st["counters"]["user_bytes_written"].as_u64().unwrap() >= written,
        "{st}"
    );
    assert!(st["counters"]["fsyncs"].as_u64().unwrap() >= 1, "{st}");
    let wa = st["write_amplification"].as_f64().unwrap();
    assert!((1.0..1.5).contains(&wa), "write amplification {wa}");

    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert!(!Path::new(&sock).exists(), "{sock} left behind");
    let o = fsctl(&["df", image.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{o}");
    assert!(o.stderr.contains("no fsd answers"), "{o}");
}

#[test]
fn unprivileged_clients_query_but_cannot_change() {
    require_tool("setpriv");
    let tmp = temp_dir();
    let name = format!("perm-{}.img", std::process::id());
    let image = mkfs(tmp.path(), &name);
    let mnt = mkdir(tmp.path(), "mnt");
    let mut fsd = Fsd::start_exactly(&image, &mnt, &[]);
    let sock = socket_of(&image);
    // Let nobody's group connect, as an administrator would.
    sh(&format!("chgrp nogroup '{sock}'"));
    let as_nobody = |args: &[&str]| {
        run(
            Command::new("setpriv")
                .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
                .arg(built_binary("fsctl"))
                .args(args),
            CMD_TIMEOUT,
        )
    };
    as_nobody(&["lssu", &sock]).assert_success();
    as_nobody(&["df", &sock]).assert_success();
    let o = as_nobody(&["mkcp", &sock]);
    assert_eq!(o.status.code(), Some(1), "{o}");
    assert!(o.stderr.contains("EPERM"), "{o}");
    // Cleaning changes the filesystem: refused too (no cleanerd runs, so
    // fsctl sends CLEAN_SEGMENTS itself).
    let o = as_nobody(&["clean", &sock, "--once"]);
    assert_eq!(o.status.code(), Some(1), "{o}");
    assert!(o.stderr.contains("EPERM"), "{o}");
    fsctl(&["mkcp", &sock]).assert_success();
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}

#[test]
fn hostile_clients_do_not_disturb_the_daemon() {
    let tmp = temp_dir();
    let name = format!("hostile-{}.img", std::process::id());
    let image = mkfs(tmp.path(), &name);
    let mnt = mkdir(tmp.path(), "mnt");
    let mut fsd = Fsd::start_exactly(&image, &mnt, &[]);
    let sock = socket_of(&image);
    // A client that connects and says nothing.
    let _silent = UnixStream::connect(&sock).unwrap();
    // Garbage, an oversized length, an unknown request code.
    let mut g = UnixStream::connect(&sock).unwrap();
    g.write_all(&[0xff; 100]).unwrap();
    let mut sink = Vec::new();
    let _ = g.read_to_end(&mut sink);
    let mut big = UnixStream::connect(&sock).unwrap();
    let mut hdr = Vec::new();
    hdr.extend_from_slice(b"LFSP");
    hdr.extend_from_slice(&1u16.to_le_bytes());
    hdr.extend_from_slice(&0u16.to_le_bytes());
    hdr.extend_from_slice(&0x1234u32.to_le_bytes());
    hdr.extend_from_slice(&u32::MAX.to_le_bytes());
    hdr.extend_from_slice(&7u64.to_le_bytes());
    hdr.extend_from_slice(&[0u8; 8]);
    big.write_all(&hdr).unwrap();
    let _ = big.read(&mut [0u8; 64]);
    // 64 concurrent clients while a writer runs.
    let m = mnt.to_str().unwrap().to_string();
    let writer = std::thread::spawn(move || {
        sh(&format!(
            "dd if=/dev/zero of='{m}/w' bs=1M count=32 conv=fsync status=none"
        ))
    });
    let clients: Vec<_> = (0..64)
        .map(|_| {
            let s = sock.clone();
            std::thread::spawn(move || fsctl(&["lssu", &s]))
        })
        .collect();
    for c in clients {
        c.join().unwrap().assert_success();
    }
    writer.join().unwrap();
    fsctl(&["df", &sock]).assert_success();
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM after hostile clients");
}

/// `fsctl` with `RUST_LOG=fsctl=debug`, which says where it read from.
fn fsctl_traced<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    run(
        Command::new(built_binary("fsctl"))
            .args(args)
            .env("RUST_LOG", "fsctl=debug"),
        CMD_TIMEOUT,
    )
}

/// `super` and `dumpseg` through fsd, and from a copy of the device taken
/// while frozen (so the two are the same bytes), with the device line
/// made the same.
#[test]
fn super_and_dumpseg_read_through_fsd_or_from_the_device_alike() {
    let tmp = temp_dir();
    let name = format!("live-{}.img", std::process::id());
    let image = mkfs(tmp.path(), &name);
    let mnt = mkdir(tmp.path(), "mnt");
    let mut fsd = Fsd::start_exactly(&image, &mnt, &[]);
    let m = mnt.to_str().unwrap();
    let img = image.to_str().unwrap();
    let sock = socket_of(&image);
    sh(&format!(
        "dd if=/dev/urandom of='{m}/data' bs=64k count=40 conv=fsync status=none"
    ));
    fsctl(&["freeze", m]).assert_success();
    let copy = tmp.path().join("copy.img");
    let cp = run(
        Command::new("cp")
            .arg("--sparse=always")
            .arg(&image)
            .arg(&copy),
        CMD_TIMEOUT,
    );
    fsctl(&["thaw", m]).assert_success();
    cp.assert_success();
    let copy = copy.to_str().unwrap();

    for args in [
        &["super"][..],
        &["super", "--json"],
        &["dumpseg"],
        &["dumpseg", "--json"],
    ] {
        let with = |target: &str| -> Vec<String> {
            let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            a.push(target.to_string());
            if a[0] == "dumpseg" {
                a.push("0".to_string());
            }
            a
        };
        // The image fsd serves: through fsd, as are its mount point and
        // its socket.
        let live = fsctl_traced(&with(img)).assert_success();
        assert!(live.stderr.contains("reading through the fsd"), "{live}");
        for other in [m, sock.as_str()] {
            assert_eq!(
                fsctl(&with(other)).assert_success().stdout,
                live.stdout,
                "{other}"
            );
        }
        // The copy: no fsd serves it, so it is read.
        let offline = fsctl_traced(&with(copy)).assert_success();
        assert!(offline.stderr.contains("no fsd answers"), "{offline}");
        assert_eq!(offline.stdout.replace(copy, img), live.stdout, "{args:?}");
    }
    let v: serde_json::Value =
        serde_json::from_str(&fsctl(&["dumpseg", "--json", img, "0"]).stdout).unwrap();
    assert!(v["logs"].as_array().unwrap().len() > 1, "{v}");
    let o = fsctl(&["dumpseg", m, "100000"]);
    assert_eq!(o.status.code(), Some(1), "{o}");
    assert!(o.stderr.contains("segment 100000 does not exist"), "{o}");

    // An unmounted image of the same file name elsewhere shares the
    // socket name: it is read, not answered for by this fsd.
    let other_dir = mkdir(tmp.path(), "other");
    let other = mkfs(&other_dir, &name);
    let uuid = |target: &str| json(&["super", "--json", target])["superblock"]["uuid"].clone();
    let o = fsctl_traced(&["super", other.to_str().unwrap()]).assert_success();
    assert!(o.stderr.contains("serves another filesystem"), "{o}");
    assert_ne!(uuid(other.to_str().unwrap()), uuid(img));
    assert_eq!(uuid(copy), uuid(img));

    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    // Unmounted, the image itself is read.
    let o = fsctl_traced(&["super", img]).assert_success();
    assert!(o.stderr.contains("no fsd answers"), "{o}");
    assert!(o.stdout.contains("state               clean"), "{o}");
    let o = fsctl(&["super", m]);
    assert_eq!(o.status.code(), Some(1), "{o}");
}
