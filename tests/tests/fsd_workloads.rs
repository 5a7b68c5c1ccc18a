//! End to end, heavier workloads on a real mount: a directory of 100,000
//! files, rename storms from two processes, and an SQLite database under
//! writes when fsd is killed with SIGKILL.

// Shared with fsd_mount.rs; each test binary uses part of it.
#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::collections::BTreeSet;
use std::fs;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

use harness::*;
use lfs_e2e::{require_tool, run, temp_dir};
use nix::sys::signal::Signal;

/// Files in the big directory.
const MANY: usize = 100_000;

#[test]
fn one_hundred_thousand_files_in_one_directory() {
    let tmp = temp_dir();
    let image = mkfs(tmp.path(), "lfs.img");
    let mnt = mkdir(tmp.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let dir = mnt.join("big");
    fs::create_dir(&dir).unwrap();
    for i in 0..MANY {
        fs::File::create(dir.join(format!("file-{i:06}")))
            .unwrap_or_else(|e| panic!("file {i}: {e}"));
    }
    let count = |d: &std::path::Path| fs::read_dir(d).unwrap().count();
    assert_eq!(count(&dir), MANY);
    for i in (0..MANY).step_by(9973) {
        assert!(
            dir.join(format!("file-{i:06}")).exists(),
            "file {i} missing"
        );
    }
    fs::remove_file(dir.join("file-000042")).unwrap();
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM after creating 100,000 files");
    assert_fsck_clean(&image, "after 100,000 files");

    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let names: BTreeSet<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), MANY - 1);
    assert!(!names.contains("file-000042"));
    assert!(names.contains("file-099999"));
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM after the remount");
}

#[test]
fn rename_storms_between_directories_from_two_processes() {
    require_tool("python3");
    let tmp = temp_dir();
    let image = mkfs(tmp.path(), "lfs.img");
    let mnt = mkdir(tmp.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    for d in ["a", "b", "c"] {
        fs::create_dir(mnt.join(d)).unwrap();
    }
    const FILES: usize = 200;
    for i in 0..FILES {
        fs::write(mnt.join("a").join(format!("f{i}")), format!("content {i}")).unwrap();
    }
    // Each process moves every file it finds from one directory to the
    // next, round and round; the two race for the same files.
    let storm = |seed: u32| {
        Command::new("python3")
            .arg("-c")
            .arg(format!(
                "import os, random\n\
                 random.seed({seed})\n\
                 m = {mnt:?}\n\
                 dirs = ['a', 'b', 'c']\n\
                 for _ in range(3000):\n\
                 \x20   s = random.choice(dirs); t = random.choice(dirs)\n\
                 \x20   names = os.listdir(os.path.join(m, s))\n\
                 \x20   if not names or s == t: continue\n\
                 \x20   n = random.choice(names)\n\
                 \x20   try: os.rename(os.path.join(m, s, n), os.path.join(m, t, n))\n\
                 \x20   except FileNotFoundError: pass\n",
                mnt = mnt.display().to_string()
            ))
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut p1 = storm(1);
    let mut p2 = storm(2);
    assert!(p1.wait().unwrap().success(), "storm 1 failed");
    assert!(p2.wait().unwrap().success(), "storm 2 failed");
    let mut seen = BTreeSet::new();
    for d in ["a", "b", "c"] {
        for e in fs::read_dir(mnt.join(d)).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let i: usize = name[1..].parse().unwrap();
            assert_eq!(
                fs::read_to_string(e.path()).unwrap(),
                format!("content {i}")
            );
            assert!(seen.insert(name.clone()), "{name} is in two directories");
        }
    }
    assert_eq!(seen.len(), FILES, "files lost or duplicated by the storm");
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM after the storms");
    assert_fsck_clean(&image, "after the rename storms");
}

#[test]
fn sqlite_survives_kill_9_mid_workload() {
    require_tool("sqlite3");
    let tmp = temp_dir();
    let image = mkfs(tmp.path(), "lfs.img");
    let mnt = mkdir(tmp.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let db = mnt.join("test.db");
    let out = run(
        Command::new("sqlite3").arg(&db).arg(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;\
             CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);",
        ),
        CMD_TIMEOUT,
    );
    assert!(out.status.success(), "{out}");
    // A writer that commits one row per transaction and prints each id
    // after its commit returned; fsd is killed while it runs.
    let writer = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); \
             sqlite3 '{}' \"PRAGMA synchronous=FULL; INSERT INTO t(v) VALUES(hex(randomblob(300)));\" \
             && echo $i || exit 0; done",
            db.display()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    sleep(Duration::from_secs(3));
    fsd.signal(Signal::SIGKILL);
    let status = fsd.wait();
    assert_eq!(status.code(), None, "fsd was killed by a signal");
    let out = writer.wait_with_output().unwrap();
    let committed = String::from_utf8_lossy(&out.stdout).lines().count();
    assert!(committed > 10, "only {committed} commits before the kill");
    lazy_unmount(&mnt);
    assert_fsck_clean(&image, "after kill -9");

    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let out = run(
        Command::new("sqlite3")
            .arg(&db)
            .arg("PRAGMA integrity_check; SELECT count(*) FROM t;"),
        CMD_TIMEOUT,
    );
    assert!(out.status.success(), "{out}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"ok"), "{out}");
    let rows: usize = lines[1].parse().unwrap();
    assert!(
        rows >= committed,
        "{committed} transactions were committed before the kill, {rows} rows survived"
    );
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM after the SQLite check");
    assert_fsck_clean(&image, "after the SQLite check");
}
