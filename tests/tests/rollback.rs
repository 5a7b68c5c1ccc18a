//! End to end, issue 26 item 5: garbage over the last checkpoint's log.
//! fsd refuses to mount it (never silently older) and says what to do;
//! the newest intact checkpoint mounts read-only (`-o ro,cp=K`, refused
//! before); `fsctl fsck` reports it; `fsctl fsck --rollback K` makes it
//! the current one, after which the filesystem mounts read-write with
//! what checkpoint K held and goes on.

#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::fs;
use std::io::{Seek, SeekFrom, Write};

use harness::*;
use lfs_e2e::temp_dir;
use nix::sys::signal::Signal;

/// Mounts `image`, writes `name`, unmounts cleanly.
fn write_one(image: &std::path::Path, mnt: &std::path::Path, name: &str, data: &[u8]) {
    let mut fsd = Fsd::start(image, mnt, &[]);
    fs::write(mnt.join(name), data).unwrap();
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}

fn json(o: &lfs_e2e::Output) -> serde_json::Value {
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {o}"))
}

#[test]
fn a_damaged_last_checkpoint_is_looked_at_and_rolled_back() {
    let d = temp_dir();
    let image = mkfs_with(d.path(), "r.img", &["-B", "64", "--size", "64M"]);
    let img = image.to_str().unwrap();
    let mnt = mkdir(d.path(), "mnt");
    let kept = pattern(200_000, 5);
    write_one(&image, &mnt, "kept", &kept);
    write_one(&image, &mnt, "lost", b"written last");

    // Garbage over the log of the checkpoint the superblock names.
    let sup = json(&fsctl(&["super", "--json", img]).assert_success());
    let sb = &sup["superblock"];
    let (block, bs) = (
        sb["last_log_block"].as_u64().unwrap(),
        sb["block_size"].as_u64().unwrap(),
    );
    let last = sb["last_cno"].as_u64().unwrap();
    let mut f = fs::OpenOptions::new().write(true).open(&image).unwrap();
    f.seek(SeekFrom::Start(block * bs)).unwrap();
    f.write_all(&pattern(bs as usize, 77)).unwrap();
    drop(f);

    let o = fsctl(&["fsck", "--json", img]);
    assert_eq!(o.status.code(), Some(4), "{o}");
    let k = json(&o)["rollback_to"]
        .as_u64()
        .unwrap_or_else(|| panic!("no intact checkpoint named: {o}"));
    assert!(k < last, "{o}");
    let o = fsctl(&["fsck", img]);
    assert!(
        o.stdout.contains(&format!("--rollback {k}")),
        "fsck does not say how to roll back: {o}"
    );

    // A mount refuses, and says what to do.
    let o = fsd_refusal(&[img, mnt.to_str().unwrap()]);
    assert_refused(&o, EXIT_NOT_LFS, &format!("-o ro,cp={k}"));
    assert!(o.stderr.contains(&format!("--rollback {k}")), "{o}");

    // Read-only, the intact checkpoint mounts.
    let mut fsd = Fsd::start(&image, &mnt, &["-o", &format!("ro,cp={k}")]);
    assert!(fs::read(mnt.join("kept")).unwrap() == kept);
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");

    // Only the newest intact checkpoint can become current.
    let o = fsctl(&["fsck", "--rollback", &(k - 1).to_string(), img]);
    assert_eq!(o.status.code(), Some(7), "{o}");
    // Not while mounted.
    let mut fsd = Fsd::start(&image, &mnt, &["-o", &format!("ro,cp={k}")]);
    let o = fsctl(&["fsck", "--rollback", &k.to_string(), img]);
    assert_eq!(o.status.code(), Some(9), "{o}");
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");

    let o = fsctl(&["fsck", "--rollback", &k.to_string(), img]);
    assert_eq!(o.status.code(), Some(0), "{o}");
    assert!(
        o.stdout.contains(&format!("rolled back to checkpoint {k}")),
        "{o}"
    );
    assert_fsck_clean(&image, "after the rollback");
    let o = fsctl(&["fsck", "--rollback", &k.to_string(), img]);
    assert_eq!(o.status.code(), Some(1), "a second rollback: {o}");
    assert!(o.stderr.contains("nothing to roll back"), "{o}");

    // Read-write again: checkpoint k's files, and the filesystem goes on.
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    assert!(fs::read(mnt.join("kept")).unwrap() == kept);
    assert!(!mnt.join("lost").exists());
    fs::write(mnt.join("after"), b"after the rollback").unwrap();
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&image, "after writing on");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    assert_eq!(fs::read(mnt.join("after")).unwrap(), b"after the rollback");
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}
