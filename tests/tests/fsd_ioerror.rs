//! A device that fails under a mounted fsd: the lfs image lives on an XFS
//! loop mount that is shut down (`xfs_io -x -c shutdown`) while fsd runs,
//! so from then on every read, write and flush of the image fails with a
//! real EIO from the kernel. The fsync in flight gets EIO, later changes
//! get EROFS, fsd logs one line naming the device and the block and exits
//! without writing anything more; once the XFS filesystem is mounted
//! again (the "healthy device"), the image is clean and holds every byte
//! fsync'd before the failure.
//!
//! Needs FUSE, loop devices and xfsprogs; without them the test fails.

#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Command;

use harness::*;
use lfs_e2e::{built_binary, require_tool, run, run_ok};
use nix::sys::signal::Signal;

/// Mounts a fresh XFS image `xfs.img` of `dir` at `dir/xfs`.
fn mount_xfs(dir: &Path, fresh: bool) -> std::path::PathBuf {
    let img = dir.join("xfs.img");
    let at = dir.join("xfs");
    if fresh {
        fs::File::create(&img)
            .and_then(|f| f.set_len(320 << 20))
            .unwrap();
        run_ok(Command::new("mkfs.xfs").arg("-q").arg(&img), CMD_TIMEOUT);
        fs::create_dir(&at).unwrap();
    }
    run_ok(
        Command::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(&at),
        CMD_TIMEOUT,
    );
    at
}

/// Unmounts the XFS loop mount at `at` (it detaches its loop device).
struct XfsMount<'a>(&'a Path);

impl Drop for XfsMount<'_> {
    fn drop(&mut self) {
        let _ = run(Command::new("umount").arg(self.0), CMD_TIMEOUT);
    }
}

fn write_synced(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut f = fs::File::create(path)?;
    f.write_all(data)?;
    f.sync_all()
}

#[test]
fn a_device_that_fails_under_fsd_turns_it_read_only_and_loses_nothing_fsynced() {
    for tool in ["mkfs.xfs", "xfs_io", "mount", "umount"] {
        require_tool(tool);
    }
    let dir = tempfile::tempdir().unwrap();
    let xfs = mount_xfs(dir.path(), true);
    let guard = XfsMount(&xfs);
    let image = xfs.join("lfs.img");
    run_ok(
        Command::new(built_binary("mkfs-lfs"))
            .args(["-q", "--size", "128M"])
            .arg(&image),
        CMD_TIMEOUT,
    );
    let mnt = mkdir(dir.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);

    let kept = pattern(300_000, 1);
    write_synced(&mnt.join("kept"), &kept).unwrap();
    fs::create_dir(mnt.join("dir")).unwrap();
    write_synced(&mnt.join("dir/also-kept"), b"fsync'd before the failure").unwrap();

    // The device fails: XFS shut down, without flushing its log.
    run_ok(
        Command::new("xfs_io")
            .args(["-x", "-c", "shutdown"])
            .arg(&xfs),
        CMD_TIMEOUT,
    );
    let lost = pattern(200_000, 2);
    let err = write_synced(&mnt.join("lost"), &lost).expect_err("fsync on a failed device");
    assert_eq!(
        err.raw_os_error(),
        Some(nix::libc::EIO),
        "the fsync that hit the failure: {err}\n{}",
        fsd.log()
    );
    let err = fs::File::create(mnt.join("after")).expect_err("a change after the failure");
    assert_eq!(
        err.raw_os_error(),
        Some(nix::libc::EROFS),
        "a change after the failure: {err}\n{}",
        fsd.log()
    );
    // A read needs the device too: its bytes, or EIO, never others.
    match fs::read(mnt.join("kept")) {
        Ok(data) => assert!(data == kept, "wrong bytes read after the failure"),
        Err(e) => assert_eq!(e.raw_os_error(), Some(nix::libc::EIO), "{e}"),
    }

    let log = fsd.wait_for_log("going read-only");
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("going read-only"))
        .collect();
    assert_eq!(lines.len(), 1, "want one line, got:\n{log}");
    let device = image.display().to_string();
    assert!(
        lines[0].contains(&format!("{device}: ")) && lines[0].contains(" block "),
        "the line does not name the device and the block: {}",
        lines[0]
    );

    println!("io errors, fsd on a failed device: {}", lines[0]);

    // Unmounting writes nothing: the final checkpoint is refused, and fsd
    // says the next mount recovers.
    fsd.signal(Signal::SIGTERM);
    let status = fsd.wait();
    let log = fsd.log();
    assert_eq!(status.code(), Some(EXIT_ERROR), "fsd's exit:\n{log}");
    assert!(
        log.contains("the next mount recovers from the log"),
        "fsd's exit:\n{log}"
    );
    lazy_unmount(&mnt);

    // The healthy device: XFS mounted again (its log recovered).
    drop(guard);
    let xfs = mount_xfs(dir.path(), false);
    let _guard = XfsMount(&xfs);
    assert_fsck_clean(&image, "after the device failed");
    let fsd2 = Fsd::start(&image, &mnt, &[]);
    assert_eq!(fs::read(mnt.join("kept")).unwrap(), kept);
    assert_eq!(
        fs::read(mnt.join("dir/also-kept")).unwrap(),
        b"fsync'd before the failure"
    );
    // The file whose fsync failed is gone, or whole: never torn.
    match fs::read(mnt.join("lost")) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Ok(data) => assert!(data == lost, "a torn file after a failed fsync"),
        Err(e) => panic!("reading the file whose fsync failed: {e}"),
    }
    assert!(!mnt.join("after").exists());
    write_synced(&mnt.join("new"), b"writable again").unwrap();
    fsd2.signal(Signal::SIGTERM);
    let mut fsd2 = fsd2;
    fsd2.assert_clean_exit("SIGTERM after recovery");
    assert_fsck_clean(&image, "after the remount");
}
