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
use lfs_e2e::rng::SplitMix64;
use lfs_e2e::{require_tool, run, temp_dir, Output};
use nix::sys::signal::Signal;

fn fsctl<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    run(&mut lfs_e2e::daemons::fsctl(args), CMD_TIMEOUT)
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
    assert_eq!(o.status.code(), Some(5), "no fsd (fsctl(8)): {o}");
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
    let as_nobody = |args: &[&str]| run(&mut lfs_e2e::daemons::fsctl_as_nobody(args), CMD_TIMEOUT);
    as_nobody(&["lssu", &sock]).assert_success();
    as_nobody(&["df", &sock]).assert_success();
    let o = as_nobody(&["mkcp", &sock]);
    assert_eq!(
        o.status.code(),
        Some(8),
        "permission denied (fsctl(8)): {o}"
    );
    assert!(o.stderr.contains("EPERM"), "{o}");
    // Cleaning changes the filesystem: refused too (no cleanerd runs, so
    // fsctl sends CLEAN_SEGMENTS itself).
    let o = as_nobody(&["clean", &sock, "--once"]);
    assert_eq!(o.status.code(), Some(8), "{o}");
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
    // 64 concurrent clients while fio writes (two jobs, fsync every
    // 16 writes).
    require_tool("fio");
    let m = mnt.to_str().unwrap().to_string();
    let writer = std::thread::spawn(move || {
        sh(&format!(
            "fio --name=w --directory='{m}' --rw=write --bs=64k --size=16m --numjobs=2 \
             --fsync=16 --ioengine=psync --output=/dev/null"
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
    for job in ["w.0.0", "w.1.0"] {
        assert_eq!(
            std::fs::metadata(mnt.join(job)).unwrap().len(),
            16 << 20,
            "{job}"
        );
    }
    fsctl(&["df", &sock]).assert_success();
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM after hostile clients");
}

/// Streams fuzzed from the protocol's seed corpus: concatenations of
/// corpus files with bytes flipped, set to field edges, cut or repeated.
fn fuzzed_streams(count: usize) -> Vec<Vec<u8>> {
    let dir = lfs_e2e::workspace_root().join("fuzz/corpus/proto_frame");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    let good: Vec<Vec<u8>> = files
        .iter()
        .filter(|(n, _)| n.starts_with("good-"))
        .map(|(_, d)| d.clone())
        .collect();
    let all: Vec<Vec<u8>> = files.into_iter().map(|(_, d)| d).collect();
    assert!(
        good.len() > 2 && all.len() > 10,
        "the corpus in {} is missing",
        dir.display()
    );
    let mut rng = SplitMix64(0x5eed_f00d);
    (0..count)
        .map(|_| {
            // Mostly well-formed requests, so that the mutants reach the
            // payload decoders and the engine, not only the framing.
            let mut s = if rng.below(3) == 0 {
                all[rng.below(all.len())].clone()
            } else {
                good[rng.below(good.len())].clone()
            };
            if rng.below(3) == 0 {
                s.extend_from_slice(&all[rng.below(all.len())]);
            }
            for _ in 0..=rng.below(3) {
                let at = rng.below(s.len());
                match rng.below(4) {
                    0 => s[at] ^= 1 << rng.below(8),
                    1 => s[at] = [0, 1, 0x7f, 0x80, 0xff][rng.below(5)],
                    2 => s.truncate(at),
                    _ => {
                        let piece = s[at..].to_vec();
                        s.extend_from_slice(&piece);
                    }
                }
                if s.is_empty() {
                    break;
                }
            }
            s
        })
        .collect()
}

/// `stream` without the frames whose code is in `codes`, the frames read
/// as the daemon reads them (a 32-byte header whose length field gives the
/// payload).
fn without(stream: &[u8], codes: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(stream.len());
    let mut rest = stream;
    while rest.len() >= 32 {
        let code = u32::from_le_bytes(rest[8..12].try_into().unwrap());
        let len = u32::from_le_bytes(rest[12..16].try_into().unwrap()) as usize;
        let (frame, next) = rest.split_at(rest.len().min(32 + len));
        if !codes.contains(&code) {
            out.extend_from_slice(frame);
        }
        rest = next;
    }
    out.extend_from_slice(rest);
    out
}

#[test]
fn a_fuzzed_stream_of_frames_neither_crashes_nor_hangs_fsd() {
    /// MOUNT_CHECKPOINT and UMOUNT_CHECKPOINT would mount FUSE sessions
    /// where the fuzzer says; FREEZE would hold every later change. Each
    /// is tested on its own; they are cut out of the streams.
    const LEFT_OUT: [u32; 3] = [0x400c_4c95, 0x4004_4c96, 0x0000_4c93];
    const STREAMS: usize = 300;
    let tmp = temp_dir();
    let name = format!("fuzz-{}.img", std::process::id());
    let image = mkfs(tmp.path(), &name);
    let mnt = mkdir(tmp.path(), "mnt");
    let mut fsd = Fsd::start_exactly(&image, &mnt, &[]);
    let sock = socket_of(&image);
    let m = mnt.to_str().unwrap();
    sh(&format!(
        "dd if=/dev/urandom of='{m}/f' bs=64k count=64 conv=fsync status=none"
    ));
    let mut sent = 0;
    let mut answered = [0usize; 2];
    for stream in fuzzed_streams(STREAMS) {
        let stream = without(&stream, &LEFT_OUT);
        let mut c = UnixStream::connect(&sock).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        // The daemon may close the connection before it has read all.
        let _ = c.write_all(&stream);
        let _ = c.shutdown(std::net::Shutdown::Write);
        let mut replies = Vec::new();
        if let Err(e) = c.read_to_end(&mut replies) {
            assert!(
                e.kind() == std::io::ErrorKind::ConnectionReset,
                "no end to the answer to a fuzzed stream: {e}"
            );
        }
        sent += 1;
        // Replies carry their status at byte 24 of the header.
        let mut rest = &replies[..];
        while rest.len() >= 32 {
            let status = i32::from_le_bytes(rest[24..28].try_into().unwrap());
            let len = u32::from_le_bytes(rest[12..16].try_into().unwrap()) as usize;
            answered[usize::from(status != 0)] += 1;
            rest = rest.get(32 + len..).unwrap_or_default();
        }
    }
    eprintln!(
        "{sent} fuzzed streams; replies: {} ok, {} errors",
        answered[0], answered[1]
    );
    // The streams reached the engine and its decoders, not only the
    // framing.
    assert!(
        answered[0] > STREAMS && answered[1] > STREAMS / 10,
        "{answered:?}"
    );
    // Still answering, still writing, and it stops cleanly.
    fsctl(&["df", &sock]).assert_success();
    sh(&format!(
        "dd if=/dev/zero of='{m}/after' bs=64k count=16 conv=fsync status=none"
    ));
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM after fuzzed streams");
    assert_fsck_clean(&image, "after fuzzed streams");
}

/// `fsctl` with `RUST_LOG=fsctl=debug`, which says where it read from.
fn fsctl_traced<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    run(
        lfs_e2e::daemons::fsctl(args).env("RUST_LOG", "fsctl=debug"),
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
    // A plain directory now: not on an lfs mount (fsctl(8): 6).
    let o = fsctl(&["super", m]);
    assert_eq!(o.status.code(), Some(6), "{o}");
}

/// The control requests that fit ioctl(2), called on files of the mount.
#[allow(unsafe_code)]
mod ioctl {
    use std::os::fd::AsRawFd;

    nix::ioctl_none_bad!(freeze, 0x0000_4c93);
    nix::ioctl_none_bad!(thaw, 0x0000_4c94);
    nix::ioctl_none_bad!(get_sustat, 0x8000_4c85);
    nix::ioctl_write_ptr_bad!(delete_checkpoint, 0x4008_4c81, [u8; 8]);

    /// Calls `f` on `file`'s descriptor.
    pub fn call(file: &std::fs::File, f: unsafe fn(i32) -> nix::Result<i32>) -> nix::Result<i32> {
        // SAFETY: the descriptor is open for the call; these requests
        // carry no data.
        unsafe { f(file.as_raw_fd()) }
    }

    pub fn freeze_on(file: &std::fs::File) -> nix::Result<i32> {
        call(file, freeze)
    }
    pub fn thaw_on(file: &std::fs::File) -> nix::Result<i32> {
        call(file, thaw)
    }
    pub fn sustat_on(file: &std::fs::File) -> nix::Result<i32> {
        call(file, get_sustat)
    }
    pub fn delete_checkpoint_on(file: &std::fs::File, cno: u64) -> nix::Result<i32> {
        let arg = cno.to_le_bytes();
        // SAFETY: the descriptor is open and `arg` is the request's 8
        // bytes, alive for the call.
        unsafe { delete_checkpoint(file.as_raw_fd(), &arg) }
    }
}

#[test]
fn requests_that_fit_an_ioctl_work_as_ioctl_on_the_mount() {
    use nix::errno::Errno;
    let tmp = temp_dir();
    let image = mkfs(tmp.path(), "ioctl.img");
    let mnt = mkdir(tmp.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let sock = mnt.with_extension("sock");
    let s = sock.to_str().unwrap();
    let cno: u64 = fsctl(&["mkcp", "-p", s])
        .assert_success()
        .stdout
        .trim()
        .parse()
        .unwrap();
    fsctl(&["mkcp", s]).assert_success();
    let listed = |cno: u64| {
        json(&["lscp", "-a", "--json", s])["checkpoints"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["cno"] == cno)
    };
    assert!(listed(cno));

    let root = std::fs::File::open(&mnt).unwrap();
    ioctl::delete_checkpoint_on(&root, cno).unwrap();
    assert!(
        !listed(cno),
        "DELETE_CHECKPOINT by ioctl left checkpoint {cno}"
    );
    assert_eq!(ioctl::delete_checkpoint_on(&root, cno), Err(Errno::ENOENT));

    ioctl::freeze_on(&root).unwrap();
    assert_eq!(ioctl::freeze_on(&root), Err(Errno::EBUSY));
    // Frozen: the socket sees it, and thaws it.
    fsctl(&["thaw", s]).assert_success();
    assert_eq!(ioctl::thaw_on(&root), Err(Errno::EINVAL));

    // On a file inside the mount too.
    std::fs::write(mnt.join("f"), b"x").unwrap();
    let file = std::fs::File::open(mnt.join("f")).unwrap();
    ioctl::freeze_on(&file).unwrap();
    ioctl::thaw_on(&file).unwrap();
    // A query's reply does not fit its ioctl number: not served so.
    assert_eq!(ioctl::sustat_on(&root), Err(Errno::ENOTTY));
    drop((root, file));
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}

/// The ioctl path checks permissions as the socket does: another user who
/// may use the mount (allow_other) gets EPERM for FREEZE on its root, and
/// nothing is frozen.
#[test]
fn an_unprivileged_ioctl_on_the_mount_is_refused() {
    require_tool("setpriv");
    // Debian's, which nobody may run (a python3 earlier in root's PATH,
    // such as a pyenv shim under /root, may not be).
    let python = "/usr/bin/python3";
    assert!(
        Path::new(python).exists(),
        "{python} is missing: install Debian's python3 (scripts/setup-debian.sh)"
    );
    let tmp = temp_dir();
    let image = mkfs(tmp.path(), "ioctl-perm.img");
    let mnt = mkdir(tmp.path(), "mnt");
    // The temporary directory is 0700; nobody must reach the mount point.
    sh(&format!("chmod 0755 '{}'", tmp.path().display()));
    let mut fsd = Fsd::start(&image, &mnt, &["-o", "allow_other"]);
    let o = run(
        Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .args([python, "-c"])
            .arg(format!(
                "import errno, fcntl, os, sys\n\
                 fd = os.open(sys.argv[1], os.O_RDONLY)\n\
                 try:\n    fcntl.ioctl(fd, {:#x})\nexcept OSError as e:\n    \
                 print(errno.errorcode[e.errno])\nelse:\n    print('served')",
                0x0000_4c93 // FREEZE, as in the ioctl module above
            ))
            .arg(&mnt),
        CMD_TIMEOUT,
    );
    let o = o.assert_success();
    assert_eq!(o.stdout.trim(), "EPERM", "{o}");
    // Not frozen: a write by root goes through at once.
    std::fs::write(mnt.join("after"), b"x").unwrap();
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}

/// fsd stops its control server without going through the socket's
/// path: with the socket file removed behind its back (a cleaned /run,
/// a user's removed runtime directory), SIGTERM still ends it (it used to
/// hang at exit, its accept loop never woken).
#[test]
fn a_removed_socket_file_does_not_keep_fsd_from_exiting() {
    let tmp = temp_dir();
    let image = mkfs(tmp.path(), "rm.img");
    let mnt = mkdir(tmp.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    std::fs::remove_file(mnt.with_extension("sock")).unwrap();
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM with the socket file removed");
}
