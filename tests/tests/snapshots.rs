//! End to end, issue 5's scenario: write v1 of a tree, make a snapshot,
//! change it to v2, mount the snapshot beside the live filesystem and
//! compare it byte for byte with v1 while v2 stays mounted; the same after
//! a crash and restart, and offline with `fsd -o ro,cp=N`; writes to a
//! snapshot fail with EROFS; a mounted snapshot cannot be unmade or
//! deleted.

#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::fs;
use std::path::Path;

use harness::*;
use lfs_e2e::{run, temp_dir, Output};
use nix::sys::signal::Signal;

fn fsctl(args: &[&str]) -> Output {
    run(&mut lfs_e2e::daemons::fsctl(args), CMD_TIMEOUT)
}

/// v1 → v2: one file rewritten, one deleted, one added, a directory
/// renamed.
fn change_to_v2(root: &Path) {
    fs::write(root.join("block"), pattern(4096, 99)).unwrap();
    fs::remove_file(root.join("one")).unwrap();
    fs::write(root.join("new"), pattern(5000, 77)).unwrap();
    fs::rename(root.join("other"), root.join("renamed")).unwrap();
}

/// [`manifest`] without directory sizes (lfs reports an empty directory as
/// 0 bytes, the source filesystem as a block).
fn tree(root: &Path) -> String {
    manifest(root)
        .lines()
        .map(|l| {
            let mut w: Vec<&str> = l.split(' ').collect();
            if w.get(1) == Some(&"d") && w.len() > 3 {
                w[3] = "-";
            }
            w.join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_read_only(root: &Path) {
    let e = fs::write(root.join("x"), b"no").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(nix::libc::EROFS), "create: {e}");
    let e = fs::OpenOptions::new()
        .write(true)
        .open(root.join("block"))
        .unwrap_err();
    assert_eq!(
        e.raw_os_error(),
        Some(nix::libc::EROFS),
        "open for write: {e}"
    );
    let e = fs::remove_file(root.join("block")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(nix::libc::EROFS), "unlink: {e}");
}

#[test]
fn a_snapshot_mounted_beside_the_live_filesystem_is_version_one() {
    let tmp = temp_dir();
    let image = mkfs(tmp.path(), "snap.img");
    let mnt = mkdir(tmp.path(), "mnt");
    let snap = mkdir(tmp.path(), "snap");
    let v1 = mkdir(tmp.path(), "v1");
    make_tree(&v1);
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let sock = mnt.with_extension("sock");
    let (m, s, k) = (
        mnt.to_str().unwrap(),
        snap.to_str().unwrap(),
        sock.to_str().unwrap(),
    );
    sh(&format!("cp -a '{}/.' '{m}/'", v1.display()));
    // cp -a sets modes through POSIX ACL attributes, which fsd refuses so
    // that cp falls back to chmod.
    assert_eq!(tree(&mnt), tree(&v1), "cp -a did not copy v1 exactly");
    let cno = fsctl(&["mkcp", "-s", "-p", k]).assert_success().stdout;
    let cno = cno.trim().to_string();
    assert!(cno.parse::<u64>().is_ok(), "mkcp -p printed {cno:?}");
    let listed = fsctl(&["lscp", "-s", k]).assert_success().stdout;
    assert!(
        listed
            .lines()
            .any(|l| l.split_whitespace().next() == Some(&cno) && l.contains(" ss ")),
        "lscp -s does not list snapshot {cno}:\n{listed}"
    );
    change_to_v2(&mnt);
    let v2 = tree(&mnt);
    assert_ne!(v2, tree(&v1));
    let cno2 = fsctl(&["mkcp", "-p", k]).assert_success().stdout;
    let d = fsctl(&["diff", &cno, cno2.trim(), "-t", k])
        .assert_success()
        .stdout;
    assert_eq!(
        d, "M /\nM /block\nA /new\nD /one\nD /other\nD /other/x\nA /renamed\nA /renamed/x\n",
        "fsctl diff {cno} {cno2}"
    );
    let d = fsctl(&["diff", &cno, "0", "/sub", "-t", k])
        .assert_success()
        .stdout;
    assert_eq!(d, "", "nothing changed below /sub");

    fsctl(&["mount", &cno, s, k]).assert_success();
    assert_eq!(mount_type(&snap).as_deref(), Some("fuse.lfs"));
    assert_eq!(tree(&snap), tree(&v1), "the snapshot is not v1");
    assert_eq!(tree(&mnt), v2, "the live filesystem is not v2");
    assert_read_only(&snap);
    // The live filesystem keeps working meanwhile.
    fs::write(mnt.join("later"), b"after the snapshot mount").unwrap();
    assert_eq!(tree(&snap), tree(&v1));

    // A mounted snapshot cannot stop being one, nor be deleted.
    let o = fsctl(&["chcp", "cp", k, &cno]);
    assert_eq!(o.status.code(), Some(1), "{o}");
    assert!(o.stderr.contains("is mounted"), "{o}");
    let o = fsctl(&["rmcp", k, &cno]);
    assert_eq!(o.status.code(), Some(1), "{o}");
    assert!(o.stderr.contains("chcp cp"), "{o}");
    let o = fsctl(&["mount", &cno, s, k]);
    assert!(!o.status.success(), "{o}");

    fsctl(&["umount", s, k]).assert_success();
    assert_ne!(mount_type(&snap).as_deref(), Some("fuse.lfs"));
    let o = fsctl(&["umount", s, k]);
    assert!(o.stderr.contains("no checkpoint"), "{o}");

    // After a crash, the snapshot is still there and still v1.
    sh(&format!("sync -f '{m}/later'"));
    fsd.signal(Signal::SIGKILL);
    let _ = fsd.wait();
    drop(fsd);
    lazy_unmount(&mnt);
    assert_fsck_clean(&image, "after kill -9");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    fsctl(&["mount", &cno, s, k]).assert_success();
    assert_eq!(tree(&snap), tree(&v1), "the snapshot after a crash");
    fsctl(&["umount", s, k]).assert_success();
    let later = tree(&mnt);
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    drop(fsd);

    // Offline: fsd -o ro,cp=N with nothing else running.
    let mut ro = Fsd::start(&image, &snap, &["-o", &format!("ro,cp={cno}")]);
    assert_eq!(tree(&snap), tree(&v1), "fsd -o ro,cp={cno}");
    assert_read_only(&snap);
    ro.signal(Signal::SIGTERM);
    ro.assert_clean_exit("SIGTERM");
    drop(ro);
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    assert_eq!(tree(&mnt), later);
    // Unmade, the snapshot can be deleted.
    fsctl(&["chcp", "cp", k, &cno]).assert_success();
    fsctl(&["rmcp", k, &cno]).assert_success();
    let o = fsctl(&["mount", &cno, s, k]);
    assert!(o.stderr.contains("does not exist"), "{o}");
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&image, "at the end");
}

#[test]
fn fsd_refuses_a_missing_checkpoint_and_cp_without_ro() {
    let tmp = temp_dir();
    let image = mkfs(tmp.path(), "cp.img");
    let mnt = mkdir(tmp.path(), "mnt");
    let (i, m) = (image.to_str().unwrap(), mnt.to_str().unwrap());
    let o = fsd_refusal(&["-o", "cp=1", i, m]);
    assert_refused(&o, 2, "needs -o ro");
    let o = fsd_refusal(&["-o", "ro,cp=999", i, m]);
    assert_refused(&o, 2, "checkpoint 999 does not exist");
}
