//! End to end: `fsd` mounts images made by `mkfs.lfs` on real FUSE mounts,
//! ordinary programs use them, and the data survives SIGTERM, an external
//! umount and `kill -9`. Also every refusal fsd documents, with its exit
//! status.
//!
//! Every test needs a usable /dev/fuse and fails (never skips) without it.
//! A [`Fsd`] guard kills its daemon and lazily unmounts on drop, so a
//! failing test leaves no mount behind.

// Shared with the other whole-system tests; each uses part of it.
#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::fs::{self, File};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

use harness::*;
use lfs_e2e::{built_binary, require_tool, run, run_ok, temp_dir};
use nix::sys::signal::Signal;

#[test]
fn ordinary_programs_work_and_survive_remount() {
    require_tool("tar");
    let tmp = temp_dir();
    let t = tmp.path();
    let image = mkfs(t, "lfs.img");
    let mnt = mkdir(t, "mnt");
    let src = mkdir(t, "src");
    make_tree(&src);
    fs::write(t.join("rand"), pattern(2_621_440, 99)).unwrap();

    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let (m, t_) = (mnt.display(), t.display());
    sh(&format!(
        "M='{m}'; T='{t_}'
         cp -a \"$T/src\" \"$M/tree\"
         diff -r \"$T/src\" \"$M/tree\"
         dd if=\"$T/rand\" of=\"$M/dd.bin\" bs=64k status=none
         cmp \"$T/rand\" \"$M/dd.bin\"
         dd if=\"$M/dd.bin\" of=\"$T/rand.back\" bs=1M status=none
         cmp \"$T/rand\" \"$T/rand.back\"
         echo hello > \"$M/hello\"
         test \"$(cat \"$M/hello\")\" = hello
         mkdir -p \"$M/a/b/c/d\"
         mv \"$M/hello\" \"$M/a/b/c/d/hello2\"
         test ! -e \"$M/hello\"
         test \"$(cat \"$M/a/b/c/d/hello2\")\" = hello
         mv \"$M/tree/other\" \"$M/a/moved\"
         test -f \"$M/a/moved/x\"
         ln \"$M/a/b/c/d/hello2\" \"$M/hardlink\"
         test \"$(stat -c %h \"$M/hardlink\")\" = 2
         ln -s a/b/c/d/hello2 \"$M/symlink\"
         test \"$(readlink \"$M/symlink\")\" = a/b/c/d/hello2
         test \"$(cat \"$M/symlink\")\" = hello
         chmod 0640 \"$M/dd.bin\"
         test \"$(stat -c %a \"$M/dd.bin\")\" = 640
         truncate -s 100000 \"$M/dd.bin\"
         test \"$(stat -c %s \"$M/dd.bin\")\" = 100000
         head -c 100000 \"$T/rand\" | cmp - \"$M/dd.bin\"
         truncate -s 200000 \"$M/dd.bin\"
         head -c 100000 \"$T/rand\" > \"$T/expect\"
         head -c 100000 /dev/zero >> \"$T/expect\"
         cmp \"$T/expect\" \"$M/dd.bin\"
         ls -la \"$M\" \"$M/a/b/c/d\" \"$M/tree/sub\"
         tar -C \"$T/src\" -cf \"$T/in.tar\" .
         mkdir \"$M/untar\"
         tar -C \"$M/untar\" -xf \"$T/in.tar\"
         diff -r \"$T/src\" \"$M/untar\"
         tar -C \"$M/untar\" -cf \"$T/out.tar\" .
         mkdir \"$T/back\"
         tar -C \"$T/back\" -xf \"$T/out.tar\"
         diff -r \"$T/src\" \"$T/back\"
         rm -r \"$M/untar/sub\"
         test ! -e \"$M/untar/sub\""
    ));
    let statfs = sh(&format!("stat -f -c '%S %b %f %a %c %d' '{m}'")).stdout;
    let figures: Vec<u64> = statfs
        .split_whitespace()
        .map(|w| {
            w.parse()
                .unwrap_or_else(|_| panic!("stat -f printed {statfs:?}"))
        })
        .collect();
    let [bsize, blocks, bfree, bavail, files, ffree] = figures[..] else {
        panic!("stat -f printed {statfs:?}");
    };
    assert_eq!(bsize, 4096, "stat -f: {statfs}");
    assert!(
        blocks > 0 && bfree <= blocks && bavail <= bfree,
        "stat -f: {statfs}"
    );
    assert!(files > 0 && ffree <= files, "stat -f: {statfs}");
    // About 6 MiB were written: the free count must show it.
    assert!(
        blocks - bfree >= 1000,
        "stat -f shows no space used: {statfs}"
    );
    let before = manifest(&mnt);

    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&image, "after SIGTERM");

    let mut fsd = Fsd::start(&image, &mnt, &[]);
    assert_eq!(
        manifest(&mnt),
        before,
        "the tree changed across SIGTERM and remount"
    );
    sh(&format!(
        "cmp '{t_}/src/sub/deeper/large' '{m}/tree/sub/deeper/large'"
    ));

    // An external umount ends fsd the same way.
    run_ok(Command::new("umount").arg(&mnt), CMD_TIMEOUT);
    fsd.assert_clean_exit("umount");
    assert_fsck_clean(&image, "after umount");

    let mut fsd = Fsd::start(&image, &mnt, &["-o", "ro"]);
    assert_eq!(
        manifest(&mnt),
        before,
        "the tree changed across umount and remount"
    );
    let o = run(
        Command::new("sh")
            .arg("-c")
            .arg(format!("echo x > '{m}/new'")),
        CMD_TIMEOUT,
    );
    assert!(
        !o.status.success() && o.stderr.contains("Read-only file system"),
        "writing to an -o ro mount: {o}"
    );
    fsd.signal(Signal::SIGINT);
    let status = fsd.wait();
    assert_eq!(
        status.code(),
        Some(EXIT_OK),
        "fsd -o ro after SIGINT:\n{}",
        fsd.log()
    );
}

/// Requests beyond the everyday ones: xattrs (with size probing), renameat2
/// flags, FIFOs and sockets, fallocate, O_DIRECT at 512 bytes, access(2),
/// and what a write and a truncation do to set-ID bits and file
/// capabilities (fsd handles them itself: FUSE_HANDLE_KILLPRIV_V2).
#[test]
fn less_common_requests_reach_the_engine() {
    require_tool("python3");
    require_tool("fallocate");
    let tmp = temp_dir();
    let t = tmp.path();
    let image = mkfs(t, "lfs.img");
    let mnt = mkdir(t, "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let m = mnt.display();
    sh(&format!(
        "M='{m}'
         mkfifo \"$M/fifo\"
         test -p \"$M/fifo\"
         fallocate -l 1048576 \"$M/falloc\"
         test \"$(stat -c %s \"$M/falloc\")\" = 1048576
         fallocate -n -o 1048576 -l 65536 \"$M/falloc\"
         test \"$(stat -c %s \"$M/falloc\")\" = 1048576
         head -c 65536 /dev/urandom > \"$M/punch\"
         fallocate -p -o 4096 -l 8192 \"$M/punch\"
         test \"$(stat -c %s \"$M/punch\")\" = 65536
         dd if=\"$M/punch\" bs=4096 skip=1 count=2 status=none | cmp - /dev/zero -n 8192
         head -c 4096 /dev/urandom > \"$M/direct\"
         dd if=/dev/urandom of=\"$M/chunk\" bs=512 count=1 status=none
         dd if=\"$M/chunk\" of=\"$M/direct\" bs=512 seek=3 oflag=direct conv=notrunc status=none
         dd if=\"$M/direct\" bs=512 skip=3 count=1 iflag=direct status=none | cmp - \"$M/chunk\""
    ));
    let script = format!(
        r#"
import ctypes, errno, os, socket, stat, struct, time
M = {m:?}
# A write and a truncation clear set-user-ID, set-group-ID (group execute
# set) and file capabilities. (Attributes are cached for 1 s: the mode is
# read after that.)
c = os.path.join(M, "caps")
cap = struct.pack("<IIIII", 0x02000001, 1 << 13, 0, 0, 0)
for change in ("write", "truncate"):
    with open(c, "w") as fh:
        fh.write("x")
    os.chmod(c, 0o6755)
    os.setxattr(c, "security.capability", cap)
    assert os.getxattr(c, "security.capability") == cap
    if change == "write":
        with open(c, "r+") as fh:
            fh.write("y")
    else:
        os.truncate(c, 0)
    time.sleep(1.2)
    assert stat.S_IMODE(os.stat(c).st_mode) == 0o755, (change, oct(os.stat(c).st_mode))
    try:
        os.getxattr(c, "security.capability"); raise SystemExit(change + " kept the capabilities")
    except OSError as e:
        assert e.errno == errno.ENODATA, e
f = os.path.join(M, "x")
open(f, "w").close()
os.setxattr(f, "user.a", b"hello")
os.setxattr(f, "user.empty", b"")
assert os.getxattr(f, "user.a") == b"hello"
assert os.getxattr(f, "user.empty") == b""
assert sorted(os.listxattr(f)) == ["user.a", "user.empty"], os.listxattr(f)
try:
    os.setxattr(f, "user.a", b"x", os.XATTR_CREATE); raise SystemExit("XATTR_CREATE replaced")
except OSError as e:
    assert e.errno == errno.EEXIST, e
try:
    os.setxattr(f, "user.none", b"x", os.XATTR_REPLACE); raise SystemExit("XATTR_REPLACE created")
except OSError as e:
    assert e.errno == errno.ENODATA, e
os.removexattr(f, "user.a")
try:
    os.getxattr(f, "user.a"); raise SystemExit("removed xattr still there")
except OSError as e:
    assert e.errno == errno.ENODATA, e
libc = ctypes.CDLL(None, use_errno=True)
def renameat2(a, b, flags):
    r = libc.renameat2(-100, a.encode(), -100, b.encode(), flags)
    return 0 if r == 0 else ctypes.get_errno()
a, b = os.path.join(M, "ra"), os.path.join(M, "rb")
open(a, "w").write("A"); open(b, "w").write("B")
assert renameat2(a, b, 1) == errno.EEXIST
assert renameat2(a, b, 2) == 0
assert open(a).read() == "B" and open(b).read() == "A"
assert renameat2(a, b, 4) in (errno.EINVAL, errno.EPERM, errno.EOPNOTSUPP)
os.rename(a, b)
assert not os.path.exists(a) and open(b).read() == "B"
s = socket.socket(socket.AF_UNIX)
s.bind(os.path.join(M, "sock"))
assert stat.S_ISSOCK(os.stat(os.path.join(M, "sock")).st_mode)
os.chmod(f, 0o640)
assert os.access(f, os.R_OK | os.W_OK) and os.access(f, os.F_OK)
try:
    os.mkdir(os.path.join(M, "x")); raise SystemExit("mkdir over a file")
except FileExistsError:
    pass
try:
    os.rmdir(M); raise SystemExit("rmdir of the root")
except OSError:
    pass
long = os.path.join(M, "n" * 255)
open(long, "w").close()
try:
    open(os.path.join(M, "n" * 256), "w"); raise SystemExit("256-byte name")
except OSError as e:
    assert e.errno == errno.ENAMETOOLONG, e
"#
    );
    run_ok(Command::new("python3").arg("-c").arg(script), CMD_TIMEOUT);
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&image, "after SIGTERM");
}

/// With `-o allow_other` other users get in, permissions are checked
/// (default_permissions is forced on), and new files take the caller's
/// uid and gid.
#[test]
fn allow_other_lets_other_users_in_with_permission_checks() {
    require_tool("setpriv");
    let tmp = temp_dir();
    let t = tmp.path();
    let image = mkfs(t, "lfs.img");
    let mnt = mkdir(t, "mnt");
    // The temporary directory is 0700; nobody must be able to reach the
    // mount point.
    sh(&format!("chmod 0755 '{}'", t.display()));
    let mut fsd = Fsd::start(&image, &mnt, &["-o", "allow_other"]);
    assert!(
        fsd.log().contains("enabling default_permissions"),
        "{}",
        fsd.log()
    );
    let m = mnt.display();
    sh(&format!(
        "M='{m}'
         as_nobody() {{ setpriv --reuid=65534 --regid=65534 --clear-groups \"$@\"; }}
         mkdir \"$M/shared\" && chmod 1777 \"$M/shared\"
         echo secret > \"$M/secret\" && chmod 0600 \"$M/secret\"
         echo public > \"$M/public\" && chmod 0644 \"$M/public\"
         test \"$(as_nobody cat \"$M/public\")\" = public
         ! as_nobody cat \"$M/secret\" 2>/dev/null
         ! as_nobody sh -c \"echo x >> '$M/public'\" 2>/dev/null
         ! as_nobody touch \"$M/rootdir-file\" 2>/dev/null
         as_nobody sh -c \"echo mine > '$M/shared/mine' && mkdir '$M/shared/d'\"
         test \"$(stat -c %u:%g \"$M/shared/mine\")\" = 65534:65534
         test \"$(stat -c %u:%g \"$M/shared/d\")\" = 65534:65534
         ! as_nobody chmod 0777 \"$M/public\" 2>/dev/null
         ! as_nobody rm \"$M/public\" 2>/dev/null
         mkdir \"$M/sgid\" && chgrp 100 \"$M/sgid\" && chmod 2777 \"$M/sgid\"
         as_nobody touch \"$M/sgid/f\"
         test \"$(stat -c %g \"$M/sgid/f\")\" = 100"
    ));
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&image, "after SIGTERM");
}

#[test]
fn sparse_file_past_4_gib_reads_zeros_in_holes() {
    let tmp = temp_dir();
    let t = tmp.path();
    let image = mkfs(t, "lfs.img");
    let mnt = mkdir(t, "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let m = mnt.display();
    // 4 KiB of data at 5 GiB, in a file of 5 GiB + 8 KiB.
    sh(&format!(
        "M='{m}'
         printf 'past four GiB' | dd of=\"$M/sparse\" bs=4096 seek=1310720 conv=notrunc status=none
         truncate -s 5368717312 \"$M/sparse\"
         test \"$(stat -c %s \"$M/sparse\")\" = 5368717312
         test \"$(dd if=\"$M/sparse\" bs=4096 skip=1310720 count=1 status=none | head -c 13)\" = 'past four GiB'
         dd if=\"$M/sparse\" bs=4096 skip=1000 count=1 status=none | cmp - /dev/zero -n 4096
         dd if=\"$M/sparse\" bs=4096 skip=1310721 count=1 status=none | cmp - /dev/zero -n 4096
         test \"$(stat -c %b \"$M/sparse\")\" -lt 1000"
    ));
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&image, "after SIGTERM");
}

/// The temporary-file idiom: open, unlink, keep using the descriptor.
/// The data stays until the last close, then the space comes back; fsck
/// is clean after the unmount.
#[test]
fn a_file_unlinked_while_open_stays_readable_until_closed() {
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::unix::fs::MetadataExt;
    let tmp = temp_dir();
    let t = tmp.path();
    let image = mkfs(t, "lfs.img");
    let mnt = mkdir(t, "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let path = mnt.join("scratch");
    let data = pattern(2 * 1024 * 1024, 11);
    let mut f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .unwrap();
    f.write_all(&data).unwrap();
    f.sync_all().unwrap();
    let free_before_unlink = nix::sys::statvfs::statvfs(&mnt).unwrap().files_free();
    fs::remove_file(&path).unwrap();
    assert!(!path.exists());
    assert_eq!(f.metadata().unwrap().nlink(), 0);
    f.write_all(b"appended after unlink").unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    let mut back = Vec::new();
    f.read_to_end(&mut back).unwrap();
    assert_eq!(back.len(), data.len() + 21);
    assert!(back[..data.len()] == data[..], "data changed after unlink");
    assert_eq!(&back[data.len()..], b"appended after unlink");
    drop(f);
    // The release reaches fsd asynchronously: wait for the inode to return.
    let mut freed = false;
    for _ in 0..100 {
        if nix::sys::statvfs::statvfs(&mnt).unwrap().files_free() > free_before_unlink {
            freed = true;
            break;
        }
        sleep(Duration::from_millis(50));
    }
    assert!(
        freed,
        "the inode was not freed after the last close:\n{}",
        fsd.log()
    );
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&image, "after SIGTERM");
}

#[test]
fn kill_9_keeps_fsynced_data() {
    let tmp = temp_dir();
    let t = tmp.path();
    let image = mkfs(t, "lfs.img");
    let mnt = mkdir(t, "mnt");
    fs::write(t.join("rand"), pattern(3 * 1024 * 1024 + 512, 7)).unwrap();
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let (m, t_) = (mnt.display(), t.display());
    sh(&format!(
        "M='{m}'; T='{t_}'
         dd if=\"$T/rand\" of=\"$M/synced\" bs=64k conv=fsync status=none
         mkdir \"$M/dir\"
         echo 'small and synced' > \"$M/dir/small\"
         sync \"$M/dir/small\"
         sync \"$M/dir\""
    ));
    // Writes in flight when fsd dies.
    let mut writer = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "i=0; while dd if=/dev/urandom of='{m}/busy'$i bs=64k count=16 status=none 2>/dev/null; \
             do i=$((i+1)); done"
        ))
        .stdin(Stdio::null())
        .spawn()
        .expect("starting the writer");
    sleep(Duration::from_secs(1));
    assert!(
        writer.try_wait().expect("polling the writer").is_none(),
        "the writer stopped before fsd was killed:\n{}",
        fsd.log()
    );
    fsd.signal(Signal::SIGKILL);
    let status = fsd.wait();
    assert_eq!(status.code(), None, "fsd survived SIGKILL");
    let _ = writer.kill();
    let _ = writer.wait();
    lazy_unmount(&mnt);
    assert_fsck_clean(&image, "after kill -9, before recovery");

    let mut fsd = Fsd::start(&image, &mnt, &[]);
    sh(&format!(
        "M='{m}'; T='{t_}'
         cmp \"$T/rand\" \"$M/synced\"
         test \"$(cat \"$M/dir/small\")\" = 'small and synced'
         ls -la \"$M\""
    ));
    fsd.signal(Signal::SIGINT);
    fsd.assert_clean_exit("SIGINT after recovery");
    assert_fsck_clean(&image, "after recovery and a clean unmount");
}

#[test]
fn sighup_reloads_the_configuration() {
    let tmp = temp_dir();
    let t = tmp.path();
    let image = mkfs(t, "lfs.img");
    let mnt = mkdir(t, "mnt");
    let conf = t.join("fsd.toml");
    fs::write(&conf, "checkpoint_interval = 5\nthreads = 2\n").unwrap();
    let conf_arg = conf.to_str().unwrap();
    let mut fsd = Fsd::start(&image, &mnt, &["--config", conf_arg]);
    fs::write(
        &conf,
        "checkpoint_interval = 0.5\nthreads = 3\ndirty_limit = \"64M\"\n",
    )
    .unwrap();
    fsd.signal(Signal::SIGHUP);
    let log = fsd.wait_for_log("reloaded ");
    assert!(
        log.contains(
            "applied checkpoint_interval, dirty_limit; changed but needing a restart: threads"
        ),
        "{log}"
    );
    fs::write(&conf, "threads = 3\nbogus = 1\n").unwrap();
    fsd.signal(Signal::SIGHUP);
    let log = fsd.wait_for_log("reload failed");
    assert!(
        log.contains(&format!("{conf_arg}:2: bogus: unknown key")),
        "{log}"
    );
    // Still serving.
    sh(&format!(
        "echo still > '{}/f' && test \"$(cat '{}/f')\" = still",
        mnt.display(),
        mnt.display()
    ));
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}

#[test]
fn sigterm_on_a_busy_mount_waits_and_a_second_one_forces() {
    let tmp = temp_dir();
    let t = tmp.path();
    let image = mkfs(t, "lfs.img");
    let mnt = mkdir(t, "mnt");
    let m = mnt.display();

    // A process inside the mount: fsd waits for it to leave.
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let mut user = Command::new("sh")
        .arg("-c")
        .arg(format!("cd '{m}' && sleep 3"))
        .spawn()
        .expect("starting a process in the mount");
    sleep(Duration::from_millis(500));
    fsd.signal(Signal::SIGTERM);
    fsd.wait_for_log("is busy; retrying");
    sleep(Duration::from_millis(500));
    assert_eq!(
        mount_type(&mnt).as_deref(),
        Some("fuse.lfs"),
        "a busy mount went away before its user left:\n{}",
        fsd.log()
    );
    assert!(
        fsd.child_mut().try_wait().unwrap().is_none(),
        "fsd exited while its mount was busy"
    );
    assert!(
        user.wait().unwrap().success(),
        "the process in the mount failed"
    );
    fsd.assert_clean_exit("SIGTERM, once the mount was no longer busy");

    // A second SIGTERM does not wait: the user gets ENOTCONN.
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let user = Command::new("sh")
        .arg("-c")
        .arg(format!("cd '{m}' && sleep 2 && ls ."))
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting a process in the mount");
    sleep(Duration::from_millis(500));
    fsd.signal(Signal::SIGTERM);
    fsd.wait_for_log("is busy; retrying");
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("two SIGTERMs on a busy mount");
    let out = user.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("Transport endpoint is not connected"),
        "ls in a forcibly unmounted directory: {} {stderr}",
        out.status
    );
}

#[test]
fn refuses_a_mountpoint_that_is_not_an_empty_directory() {
    let tmp = temp_dir();
    let t = tmp.path();
    let image = mkfs(t, "lfs.img");
    let img = image.to_str().unwrap();
    let full = mkdir(t, "full");
    fs::write(full.join("file"), "x").unwrap();
    let o = fsd_refusal(&[img, full.to_str().unwrap()]);
    assert_refused(&o, EXIT_MOUNTPOINT, "is not empty");
    let file = full.join("file");
    let o = fsd_refusal(&[img, file.to_str().unwrap()]);
    assert_refused(&o, EXIT_MOUNTPOINT, "is not a directory");
    let o = fsd_refusal(&[img, t.join("missing").to_str().unwrap()]);
    assert_refused(&o, EXIT_MOUNTPOINT, "cannot use mount point");
}

#[test]
fn refuses_a_device_another_fsd_has_open() {
    let tmp = temp_dir();
    let t = tmp.path();
    let image = mkfs(t, "lfs.img");
    let first = mkdir(t, "first");
    let second = mkdir(t, "second");
    let mut fsd = Fsd::start(&image, &first, &[]);
    let o = fsd_refusal(&[image.to_str().unwrap(), second.to_str().unwrap()]);
    assert_refused(&o, EXIT_BUSY, "in use by another process");
    assert_eq!(mount_type(&second), None, "the refused fsd mounted anyway");
    // mkfs.lfs refuses it too while fsd has it.
    let o = run(
        Command::new(built_binary("mkfs-lfs")).args(["-f", image.to_str().unwrap()]),
        CMD_TIMEOUT,
    );
    assert_eq!(o.status.code(), Some(5), "mkfs.lfs on a mounted image: {o}");
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}

#[test]
fn refuses_a_device_that_is_not_lfs() {
    require_tool("mkfs.ext4");
    let tmp = temp_dir();
    let t = tmp.path();
    let mnt = mkdir(t, "mnt");
    let ext4 = t.join("ext4.img");
    File::create(&ext4).unwrap().set_len(64 << 20).unwrap();
    run_ok(
        Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&ext4),
        CMD_TIMEOUT,
    );
    let o = fsd_refusal(&[ext4.to_str().unwrap(), mnt.to_str().unwrap()]);
    assert_refused(&o, EXIT_NOT_LFS, "does not hold a usable lfs filesystem");
    assert!(o.stderr.contains("no valid lfs superblock"), "{o}");

    let zeros = t.join("zeros.img");
    File::create(&zeros).unwrap().set_len(64 << 20).unwrap();
    let o = fsd_refusal(&[zeros.to_str().unwrap(), mnt.to_str().unwrap()]);
    assert_refused(&o, EXIT_NOT_LFS, "does not hold a usable lfs filesystem");
    assert_eq!(mount_type(&mnt), None);
}

#[test]
fn refuses_bad_usage_and_configuration() {
    let tmp = temp_dir();
    let t = tmp.path();
    let image = mkfs(t, "lfs.img");
    let img = image.to_str().unwrap();
    let mnt = mkdir(t, "mnt");
    let mp = mnt.to_str().unwrap();

    let o = fsd_refusal(&["-o", "ro,bogus", img, mp]);
    assert_refused(&o, EXIT_USAGE, "unknown mount option \"bogus\"");

    let conf = t.join("bad.toml");
    fs::write(&conf, "threads = 4\ncheckpoint_intervall = 3\n").unwrap();
    let o = fsd_refusal(&["--config", conf.to_str().unwrap(), img, mp]);
    assert_refused(
        &o,
        EXIT_USAGE,
        &format!("{}:2: checkpoint_intervall: unknown key", conf.display()),
    );
    fs::write(&conf, "threads = 0\n").unwrap();
    let o = fsd_refusal(&["--config", conf.to_str().unwrap(), img, mp]);
    assert_refused(
        &o,
        EXIT_USAGE,
        &format!("{}:1: threads: 0 is out of range", conf.display()),
    );
    let o = fsd_refusal(&["--config", t.join("none.toml").to_str().unwrap(), img, mp]);
    assert_refused(&o, EXIT_USAGE, "cannot read it");
    let o = fsd_refusal(&["--socket", "relative.sock", img, mp]);
    assert_refused(&o, EXIT_USAGE, "not an absolute path");
    let o = fsd_refusal(&[img]);
    assert_eq!(o.status.code(), Some(EXIT_USAGE), "{o}");
    let o = fsd_refusal(&[t.join("missing.img").to_str().unwrap(), mp]);
    assert_refused(&o, EXIT_ERROR, "missing.img");
    assert_eq!(mount_type(&mnt), None);
}
