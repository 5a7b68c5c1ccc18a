//! End to end, issue 8 item 7: access control. As user `nobody`:
//! every request that changes something, through fsd's control socket
//! (by fsctl, and as raw frames of every mutating code) and through
//! cleanerd's, is refused and changes nothing; a mounted snapshot refuses
//! every change with EROFS, to root and to nobody alike; and on a mount
//! with `allow_other,default_permissions` the mode bits, the sticky bit
//! and ownership are enforced.

#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use harness::*;
use lfs_e2e::{require_tool, run, temp_dir, Output};
use nix::sys::signal::Signal;

/// Debian's python3, which nobody may run (a python3 earlier in root's
/// PATH, such as a pyenv shim under /root, may not be).
const PYTHON: &str = "/usr/bin/python3";

/// nobody's uid and nogroup's gid on Debian.
const NOBODY: u32 = 65534;

/// The mutating request codes of the control protocol (proto/src/codes.rs)
/// with their names.
const MUTATING: &[(&str, u32)] = &[
    ("CHANGE_CPMODE", 0x4010_4c80),
    ("DELETE_CHECKPOINT", 0x4008_4c81),
    ("CLEAN_SEGMENTS", 0xc010_4c88),
    ("SYNC", 0xc004_4c8a),
    ("SET_SUINFO", 0x4004_4c8d),
    ("FREEZE", 0x0000_4c93),
    ("THAW", 0x0000_4c94),
    ("MOUNT_CHECKPOINT", 0x400c_4c95),
    ("UMOUNT_CHECKPOINT", 0x4004_4c96),
];

/// Runs `cmd args` as nobody:nogroup with no supplementary groups.
fn as_nobody<S: AsRef<std::ffi::OsStr>>(cmd: &Path, args: &[S]) -> Output {
    require_tool("setpriv");
    run(
        Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(cmd)
            .args(args),
        CMD_TIMEOUT,
    )
}

fn fsctl_as_nobody(args: &[&str]) -> Output {
    as_nobody(
        &lfs_e2e::daemons::fsctl_binary(),
        &lfs_e2e::daemons::fsctl_args(args),
    )
}

/// Performs file operations given as JSON `[[op, path, arg], ...]` and
/// prints, as a JSON list, "OK" or the errno's name for each.
const OPS_SCRIPT: &str = r#"
import errno, json, os, sys
def do(op, p, a):
    if op == 'read': open(p, 'rb').read()
    elif op == 'write': os.close(os.open(p, os.O_WRONLY))
    elif op == 'append':
        fd = os.open(p, os.O_WRONLY | os.O_APPEND); os.write(fd, b'x'); os.close(fd)
    elif op == 'create': os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    elif op == 'unlink': os.unlink(p)
    elif op == 'mkdir': os.mkdir(p)
    elif op == 'rmdir': os.rmdir(p)
    elif op == 'rename': os.rename(p, a)
    elif op == 'chmod': os.chmod(p, int(a, 8))
    elif op == 'chown': os.chown(p, int(a), -1)
    elif op == 'truncate': os.truncate(p, int(a))
    elif op == 'utime': os.utime(p, (1, 1))
    elif op == 'symlink': os.symlink(a, p)
    elif op == 'link': os.link(p, a)
    elif op == 'mkfifo': os.mkfifo(p)
    elif op == 'setxattr': os.setxattr(p, 'user.t', b'v')
    elif op == 'list': os.listdir(p)
    else: raise ValueError(op)
out = []
for op, p, a in json.loads(sys.argv[1]):
    try:
        do(op, p, a); out.append('OK')
    except OSError as e:
        out.append(errno.errorcode[e.errno])
print(json.dumps(out))
"#;

/// One file operation and the outcome expected ("OK" or an errno name).
struct Check {
    op: &'static str,
    path: String,
    arg: String,
    want: &'static str,
}

fn check(op: &'static str, path: &Path, arg: &str, want: &'static str) -> Check {
    Check {
        op,
        path: path.display().to_string(),
        arg: arg.to_string(),
        want,
    }
}

/// Runs `checks` in order, as nobody or as root, and asserts each
/// outcome; returns how many were made.
#[track_caller]
fn assert_checks(nobody: bool, checks: &[Check]) -> usize {
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is missing: install Debian's python3 (scripts/setup-debian.sh)"
    );
    let ops: Vec<[&str; 3]> = checks.iter().map(|c| [c.op, &c.path, &c.arg]).collect();
    let ops = serde_json::to_string(&ops).unwrap();
    let args = ["-c", OPS_SCRIPT, &ops];
    let o = if nobody {
        as_nobody(Path::new(PYTHON), &args)
    } else {
        run(Command::new(PYTHON).args(args), CMD_TIMEOUT)
    };
    let o = o.assert_success();
    let got: Vec<String> =
        serde_json::from_str(o.stdout.trim()).unwrap_or_else(|e| panic!("bad JSON ({e}): {o}"));
    let who = if nobody { "nobody" } else { "root" };
    let wrong: Vec<String> = checks
        .iter()
        .zip(&got)
        .filter(|(c, g)| c.want != g.as_str())
        .map(|(c, g)| format!("{who}: {} {} {}: {g}, not {}", c.op, c.path, c.arg, c.want))
        .collect();
    assert_eq!(got.len(), checks.len(), "{o}");
    assert!(wrong.is_empty(), "violations:\n{}", wrong.join("\n"));
    checks.len()
}

/// Sends one frame of request `code` with an empty payload to `sock` as
/// nobody and returns the reply's status (a positive errno, or 0).
fn raw_request_as_nobody(sock: &str, code: u32) -> i32 {
    let script = "import socket, struct, sys\n\
         s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n\
         s.sendall(b'LFSP' + struct.pack('<HHIIQiI', 1, 0, int(sys.argv[2]), 0, 7, 0, 0))\n\
         h = b''\n\
         while len(h) < 32:\n    c = s.recv(32 - len(h))\n    if not c: break\n    h += c\n\
         print(struct.unpack('<i', h[24:28])[0])";
    let o = as_nobody(Path::new(PYTHON), &["-c", script, sock, &code.to_string()]).assert_success();
    o.stdout
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("no status ({e}): {o}"))
}

/// The checkpoint timer set to a day: no checkpoint comes by itself, so
/// the filesystem's state changes only when asked to.
fn quiet_config(dir: &Path) -> String {
    let conf = dir.join("fsd.toml");
    fs::write(&conf, "checkpoint_interval = 86400\n").unwrap();
    conf.display().to_string()
}

/// Lets nobody reach the mount points and sockets in `dir` (a temporary
/// directory is 0700) and connect to `socks` (0660, so by group).
fn open_to_nobody(dir: &Path, socks: &[&str]) {
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
    for s in socks {
        sh(&format!("chgrp nogroup '{s}'"));
    }
}

#[test]
fn nobody_cannot_change_anything_through_the_control_sockets() {
    let tmp = temp_dir();
    let image = mkfs(tmp.path(), "ctl.img");
    let mnt = mkdir(tmp.path(), "mnt");
    let snap = mkdir(tmp.path(), "snap");
    let snap2 = mkdir(tmp.path(), "snap2");
    let conf = quiet_config(tmp.path());
    let mut fsd = Fsd::start(&image, &mnt, &["-c", &conf]);
    let sock = mnt.with_extension("sock");
    let s = sock.to_str().unwrap();
    open_to_nobody(tmp.path(), &[s]);
    fs::write(mnt.join("f"), pattern(100_000, 1)).unwrap();
    let mkcp = |args: &[&str]| -> String {
        let mut all = vec!["mkcp", "-p"];
        all.extend_from_slice(args);
        all.push(s);
        fsctl(&all).assert_success().stdout.trim().to_string()
    };
    let plain = mkcp(&[]);
    let mounted = mkcp(&["-s"]);
    let snapshot = mkcp(&["-s"]);
    fsctl(&["mount", &mounted, snap.to_str().unwrap(), s]).assert_success();

    // Everything a change could touch: checkpoints and their modes,
    // segment usage, space, the snapshot mounts, the file.
    let state = || {
        [
            fsctl(&["lscp", "-a", "--json", s]).assert_success().stdout,
            fsctl(&["lssu", "--json", s]).assert_success().stdout,
            fsctl(&["df", "--json", s]).assert_success().stdout,
            format!("{:?} {:?}", mount_type(&snap), mount_type(&snap2)),
            format!(
                "{:?}",
                fs::read(mnt.join("f")).map(|d| d == pattern(100_000, 1))
            ),
        ]
    };
    let before = state();
    let (snap_s, snap2_s) = (snap.to_str().unwrap(), snap2.to_str().unwrap());
    let requests: &[(&str, &[&str])] = &[
        ("SYNC", &["mkcp", s]),
        ("SYNC (snapshot)", &["mkcp", "-s", s]),
        ("CHANGE_CPMODE ss", &["chcp", "ss", s, &plain]),
        ("CHANGE_CPMODE cp", &["chcp", "cp", s, &snapshot]),
        ("DELETE_CHECKPOINT", &["rmcp", s, &plain]),
        ("MOUNT_CHECKPOINT", &["mount", &snapshot, snap2_s, s]),
        ("UMOUNT_CHECKPOINT", &["umount", snap_s, s]),
        ("FREEZE", &["freeze", s]),
        ("CLEAN_SEGMENTS", &["clean", s, "--once"]),
    ];
    let mut refused = 0;
    for (what, args) in requests {
        let o = fsctl_as_nobody(args);
        // fsctl(8): 8, permission denied.
        assert_eq!(o.status.code(), Some(8), "{what} as nobody: {o}");
        assert!(o.stderr.contains("EPERM"), "{what} as nobody: {o}");
        assert_eq!(state(), before, "{what} as nobody changed something: {o}");
        refused += 1;
    }
    // THAW is refused while root holds the filesystem frozen.
    fsctl(&["freeze", s]).assert_success();
    let o = fsctl_as_nobody(&["thaw", s]);
    assert!(o.stderr.contains("EPERM"), "THAW as nobody: {o}");
    let o = fsctl(&["freeze", s]);
    assert!(!o.status.success(), "still frozen after nobody's THAW: {o}");
    fsctl(&["thaw", s]).assert_success();
    refused += 1;
    // Every mutating code as a raw frame, past fsctl's parsing: the
    // permission is checked before the payload is read.
    for (name, code) in MUTATING {
        let status = raw_request_as_nobody(s, *code);
        assert_eq!(
            status,
            nix::libc::EPERM,
            "{name} as a raw frame from nobody"
        );
        assert_eq!(state(), before, "{name} as a raw frame from nobody");
        refused += 1;
    }
    // Queries are answered.
    for args in [&["lssu", s][..], &["df", s], &["lscp", s], &["stat", s]] {
        fsctl_as_nobody(args).assert_success();
    }

    // cleanerd's socket: status for anyone, changes for root only.
    let mut cleanerd = Cleanerd::start(tmp.path(), s);
    let csock = mnt.with_extension("cleanerd.sock");
    let deadline = std::time::Instant::now() + EXIT_TIMEOUT;
    while !csock.exists() {
        assert!(std::time::Instant::now() < deadline, "{}", cleanerd.log());
        std::thread::sleep(POLL);
    }
    open_to_nobody(tmp.path(), &[csock.to_str().unwrap()]);
    let status = |o: Output| -> serde_json::Value {
        let o = o.assert_success();
        let v: serde_json::Value =
            serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {o}"));
        v["mode"].clone()
    };
    let mode = status(fsctl_as_nobody(&["clean", s, "--status", "--json"]));
    for action in ["--suspend", "--resume", "--reload", "--once"] {
        let o = fsctl_as_nobody(&["clean", s, action]);
        assert_eq!(o.status.code(), Some(8), "clean {action} as nobody: {o}");
        assert!(
            o.stderr.contains("permission denied"),
            "clean {action} as nobody: {o}"
        );
        assert_eq!(
            status(fsctl(&["clean", s, "--status", "--json"])),
            mode,
            "clean {action} as nobody"
        );
        refused += 1;
    }
    cleanerd.terminate();
    assert_eq!(state(), before, "after cleanerd ran");

    fsctl(&["umount", snap_s, s]).assert_success();
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&image, "after nobody's requests");
    println!(
        "access control: {refused} requests refused, 0 permission checks, 0 violations \
         (control sockets)"
    );
}

/// The changes tried on a read-only mount, each expected to fail with
/// EROFS: on a root-owned 0644 file, a file and a 0777 directory nobody
/// owns, and the root directory.
fn read_only_checks(root: &Path) -> Vec<Check> {
    let (rf, nf, open) = (
        root.join("rootfile"),
        root.join("open/mine"),
        root.join("open"),
    );
    let mut c = vec![
        check("read", &rf, "", "OK"),
        check("read", &nf, "", "OK"),
        check("list", root, "", "OK"),
    ];
    for f in [&rf, &nf] {
        for (op, arg) in [
            ("write", ""),
            ("append", ""),
            ("unlink", ""),
            ("chmod", "666"),
            ("chown", "0"),
            ("truncate", "0"),
            ("utime", ""),
            ("setxattr", ""),
        ] {
            c.push(check(op, f, arg, "EROFS"));
        }
        c.push(check(
            "rename",
            f,
            &root.join("moved").display().to_string(),
            "EROFS",
        ));
        c.push(check(
            "link",
            f,
            &open.join("hard").display().to_string(),
            "EROFS",
        ));
    }
    for d in [root, open.as_path()] {
        c.push(check("create", &d.join("new"), "", "EROFS"));
        c.push(check("mkdir", &d.join("newdir"), "", "EROFS"));
        c.push(check("symlink", &d.join("sym"), "rootfile", "EROFS"));
        c.push(check("mkfifo", &d.join("fifo"), "", "EROFS"));
    }
    c.push(check("rmdir", &open.join("sub"), "", "EROFS"));
    c
}

#[test]
fn a_snapshot_mount_refuses_every_change_with_erofs() {
    let tmp = temp_dir();
    let image = mkfs(tmp.path(), "snap.img");
    let mnt = mkdir(tmp.path(), "mnt");
    let snap = mkdir(tmp.path(), "snap");
    let conf = quiet_config(tmp.path());
    let mut fsd = Fsd::start(&image, &mnt, &["-c", &conf, "-o", "allow_other"]);
    let sock = mnt.with_extension("sock");
    let s = sock.to_str().unwrap();
    open_to_nobody(tmp.path(), &[s]);
    fs::write(mnt.join("rootfile"), b"root's").unwrap();
    fs::create_dir_all(mnt.join("open/sub")).unwrap();
    fs::write(mnt.join("open/mine"), b"nobody's").unwrap();
    fs::set_permissions(mnt.join("open"), fs::Permissions::from_mode(0o777)).unwrap();
    std::os::unix::fs::chown(mnt.join("open/mine"), Some(NOBODY), Some(NOBODY)).unwrap();
    let cno = fsctl(&["mkcp", "-s", "-p", s]).assert_success().stdout;
    fsctl(&["mount", cno.trim(), snap.to_str().unwrap(), s]).assert_success();
    let before = manifest(&snap);

    let checks = read_only_checks(&snap);
    let mut n = assert_checks(false, &checks);
    n += assert_checks(true, &checks);
    assert_eq!(manifest(&snap), before, "the snapshot changed");
    // The same kinds of change on the live mount work, for root: the
    // refusals came from the snapshot being read-only.
    let (rf, open) = (mnt.join("rootfile"), mnt.join("open"));
    let mut live: Vec<Check> = [
        "write", "append", "chmod", "chown", "truncate", "utime", "setxattr",
    ]
    .into_iter()
    .map(|op| check(op, &rf, if op == "chmod" { "600" } else { "0" }, "OK"))
    .collect();
    for d in [mnt.as_path(), open.as_path()] {
        for (op, arg) in [
            ("create", ""),
            ("mkdir", ""),
            ("symlink", "rootfile"),
            ("mkfifo", ""),
        ] {
            live.push(check(op, &d.join(format!("{op}-live")), arg, "OK"));
        }
    }
    live.extend([
        check("link", &rf, &open.join("hard").display().to_string(), "OK"),
        check(
            "rename",
            &open.join("mine"),
            &mnt.join("moved").display().to_string(),
            "OK",
        ),
        check("unlink", &rf, "", "OK"),
        check("rmdir", &open.join("sub"), "", "OK"),
    ]);
    assert_checks(false, &live);
    assert_eq!(
        manifest(&snap),
        before,
        "the snapshot changed with the live mount"
    );

    fsctl(&["umount", snap.to_str().unwrap(), s]).assert_success();
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&image, "after the snapshot checks");
    println!(
        "access control: 0 requests refused, {n} permission checks, 0 violations (snapshot mount)"
    );
}

/// The lines of a [`manifest`] about what nobody may not change.
fn untouched(manifest: &str) -> Vec<&str> {
    const PATHS: [&str; 5] = [
        ". ",
        "./rootfile ",
        "./secret ",
        "./closed ",
        "./sticky/roots ",
    ];
    manifest
        .lines()
        .filter(|l| {
            let path = l.split("  ").nth(1).map_or(*l, |p| p);
            PATHS
                .iter()
                .any(|p| path.starts_with(p) || format!("{path} ") == *p)
        })
        .collect()
}

#[test]
fn file_permissions_are_enforced_on_an_allow_other_mount() {
    let tmp = temp_dir();
    let image = mkfs(tmp.path(), "perm.img");
    let mnt = mkdir(tmp.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &["-o", "allow_other,default_permissions"]);
    open_to_nobody(tmp.path(), &[]);
    let mode = |p: &Path, m: u32| fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap();
    let (rf, secret) = (mnt.join("rootfile"), mnt.join("secret"));
    fs::write(&rf, b"root's").unwrap();
    mode(&rf, 0o644);
    fs::write(&secret, b"root's secret").unwrap();
    mode(&secret, 0o600);
    let (closed, open, sticky) = (mnt.join("closed"), mnt.join("open"), mnt.join("sticky"));
    fs::create_dir(&closed).unwrap();
    mode(&closed, 0o700);
    fs::create_dir(&open).unwrap();
    mode(&open, 0o777);
    fs::create_dir(&sticky).unwrap();
    mode(&sticky, 0o1777);
    let in_sticky = sticky.join("roots");
    fs::write(&in_sticky, b"root's, in a sticky directory").unwrap();
    mode(&in_sticky, 0o666);
    let loose = open.join("roots");
    fs::write(&loose, b"root's, in an open directory").unwrap();
    let before = manifest(&mnt);

    let mine = open.join("mine");
    let moved = |p: &Path| p.with_extension("moved").display().to_string();
    let nobody = [
        check("read", &rf, "", "OK"),
        check("write", &rf, "", "EACCES"),
        check("append", &rf, "", "EACCES"),
        check("truncate", &rf, "0", "EACCES"),
        check("read", &secret, "", "EACCES"),
        check("chmod", &rf, "666", "EPERM"),
        check("chown", &rf, &NOBODY.to_string(), "EPERM"),
        check("utime", &rf, "", "EPERM"),
        check("setxattr", &rf, "", "EACCES"),
        check("unlink", &rf, "", "EACCES"),
        check("rename", &rf, &moved(&rf), "EACCES"),
        check("create", &mnt.join("new"), "", "EACCES"),
        check("mkdir", &mnt.join("newdir"), "", "EACCES"),
        check("symlink", &mnt.join("sym"), "rootfile", "EACCES"),
        check("list", &closed, "", "EACCES"),
        check("create", &closed.join("new"), "", "EACCES"),
        // A 0777 directory: nobody creates and owns what it creates.
        check("create", &mine, "", "OK"),
        check("write", &mine, "", "OK"),
        check("chmod", &mine, "600", "OK"),
        check("mkdir", &open.join("dir"), "", "OK"),
        check("chown", &mine, "0", "EPERM"),
        // Without the sticky bit, another's file in it can be removed.
        check("rename", &loose, &moved(&loose), "OK"),
        // The sticky bit: a world-writable directory, but others' files
        // stay theirs (the file itself is 0666: writable, not removable).
        check("write", &in_sticky, "", "OK"),
        check("unlink", &in_sticky, "", "EPERM"),
        check("rename", &in_sticky, &moved(&in_sticky), "EPERM"),
        check("create", &sticky.join("nobodys"), "", "OK"),
        check(
            "rename",
            &sticky.join("nobodys"),
            &moved(&sticky.join("nobodys")),
            "OK",
        ),
    ];
    let mut n = assert_checks(true, &nobody);
    let owner = fs::metadata(&mine).unwrap();
    assert_eq!(
        (
            std::os::unix::fs::MetadataExt::uid(&owner),
            owner.permissions().mode() & 0o7777
        ),
        (NOBODY, 0o600),
        "nobody's file"
    );
    // What nobody was refused changed nothing.
    assert_eq!(
        untouched(&manifest(&mnt)),
        untouched(&before),
        "a refused change happened"
    );
    // Root may do what nobody may not, in the sticky directory too.
    let root = [
        check("write", &rf, "", "OK"),
        check("read", &secret, "", "OK"),
        check("unlink", &sticky.join("nobodys.moved"), "", "OK"),
        check("chown", &mine, "0", "OK"),
    ];
    n += assert_checks(false, &root);

    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&image, "after the permission checks");
    println!("access control: 0 requests refused, {n} permission checks, 0 violations (mount)");
}
