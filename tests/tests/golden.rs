//! fsctl's output against golden files (`tests/golden/`, see
//! `lfs_e2e::golden`; `LFS_BLESS=1` rewrites them).
//!
//! `super` and `dumpseg` read a deterministic image (fixed uuid, so a fixed
//! checksum seed, and a fixed creation time), so their output is compared
//! byte for byte. The commands answered by fsd run on a mounted copy of it
//! after a fixed workload, with the checkpoint timer out of the way; dates
//! and time fields are normalised, and `stat`'s counters (latencies vary)
//! are reduced to their layout.

// Shared with fsd_mount.rs; each test binary uses part of it.
#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::path::Path;
use std::process::Command;

use harness::*;
use lfs_e2e::golden::{check, crcs, dates, json_times, numbers};
use lfs_e2e::{built_binary, run, temp_dir};
use nix::sys::signal::Signal;

/// The image's identity: with it mkfs.lfs writes the same bytes each time.
const UUID: &str = "2f1c4d9e-0b7a-4c55-9e31-6d0f8a2b7c44";
/// Its creation time (2023-11-14 22:13:20 UTC).
const EPOCH: &str = "1700000000";
/// Small segments, so that a dump stays short and several segments are
/// used.
const BLOCKS_PER_SEGMENT: &str = "64";
const SIZE: &str = "16M";

/// JSON fields that hold times.
const TIME_FIELDS: &[&str] = &["last_mod", "ctime_ns"];
/// JSON fields that hold times or checksums over them.
const LOG_FIELDS: &[&str] = &["ctime_ns", "summary_crc", "body_crc"];

/// Formats the deterministic image `name` in `dir`.
fn golden_image(dir: &Path, name: &str) -> std::path::PathBuf {
    let o = run(
        Command::new(built_binary("mkfs-lfs"))
            .args([
                "-q",
                "-K",
                "-L",
                "golden",
                "-U",
                UUID,
                "-B",
                BLOCKS_PER_SEGMENT,
            ])
            .args(["--size", SIZE, name])
            .env("SOURCE_DATE_EPOCH", EPOCH)
            .current_dir(dir),
        CMD_TIMEOUT,
    );
    o.assert_success();
    dir.join(name)
}

/// `fsctl ARGS` run in `dir`, its standard output; it must succeed.
fn fsctl_in(dir: &Path, args: &[&str]) -> String {
    let o = run(lfs_e2e::daemons::fsctl(args).current_dir(dir), CMD_TIMEOUT);
    o.assert_success().stdout
}

#[test]
fn the_image_mkfs_writes_with_a_fixed_uuid_and_time_is_the_same_each_time() {
    let tmp = temp_dir();
    let a = golden_image(tmp.path(), "a.img");
    let b = golden_image(tmp.path(), "b.img");
    assert!(
        std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
        "two images made with the same options differ"
    );
}

#[test]
fn super_and_dumpseg_of_the_golden_image() {
    let tmp = temp_dir();
    // A name no other test gives an image: it is read, not asked of an
    // fsd (whose socket would be named after it).
    golden_image(tmp.path(), "golden-offline.img");
    let d = tmp.path();
    let img = "golden-offline.img";
    check("super.txt", &fsctl_in(d, &["super", img]));
    check("super.json", &fsctl_in(d, &["super", "--json", img]));
    check("dumpseg-0.txt", &fsctl_in(d, &["dumpseg", img, "0"]));
    check(
        "dumpseg-0.json",
        &fsctl_in(d, &["dumpseg", "--json", img, "0"]),
    );
    check("dumpseg-1.txt", &fsctl_in(d, &["dumpseg", img, "1"]));
}

#[test]
fn listings_of_the_golden_image_after_a_fixed_workload() {
    let tmp = temp_dir();
    let image = golden_image(tmp.path(), "golden-live.img");
    // No timed checkpoint may come between the workload's steps.
    let conf = tmp.path().join("fsd.toml");
    std::fs::write(&conf, "checkpoint_interval = 86400\n").unwrap();
    let mnt = mkdir(tmp.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &["-c", conf.to_str().unwrap()]);
    let sock = mnt.with_extension("sock");
    let s = sock.to_str().unwrap();
    let m = mnt.to_str().unwrap();
    // 200 KiB in one file and 64 KiB in another, each made durable by its
    // fsync; a snapshot; a directory.
    sh(&format!(
        "dd if=/dev/zero of='{m}/a' bs=4k count=50 conv=fsync status=none\n\
         dd if=/dev/zero of='{m}/b' bs=64k count=1 conv=fsync status=none"
    ));
    fsctl_in(tmp.path(), &["mkcp", "-s", s]);
    std::fs::create_dir(mnt.join("dir")).unwrap();
    fsctl_in(tmp.path(), &["mkcp", s]);

    let d = tmp.path();
    check("lssu.txt", &dates(&fsctl_in(d, &["lssu", s])));
    check("lssu-l.txt", &dates(&fsctl_in(d, &["lssu", "-l", s])));
    check(
        "lssu-a-n4.txt",
        &dates(&fsctl_in(d, &["lssu", "-a", "-n", "4", s])),
    );
    check(
        "lssu.json",
        &json_times(&fsctl_in(d, &["lssu", "--json", s]), TIME_FIELDS),
    );
    check("lscp.txt", &dates(&fsctl_in(d, &["lscp", s])));
    check("lscp-a.txt", &dates(&fsctl_in(d, &["lscp", "-a", s])));
    check("lscp-s.txt", &dates(&fsctl_in(d, &["lscp", "-s", s])));
    check(
        "lscp-a.json",
        &json_times(&fsctl_in(d, &["lscp", "-a", "--json", s]), TIME_FIELDS),
    );
    check("df.txt", &fsctl_in(d, &["df", s]));
    check("df.json", &fsctl_in(d, &["df", "--json", s]));
    check(
        "stat.txt",
        &numbers(&untimed_waits(&fsctl_in(d, &["stat", s]))),
    );
    check(
        "stat.json",
        &numbers(&untimed_waits_json(&fsctl_in(d, &["stat", "--json", s]))),
    );
    // Through fsd, of what the workload wrote: times are in the logs, so
    // their checksums vary too; the device is named as fsd was given it.
    let live = |args: &[&str]| fsctl_in(d, args).replace(image.to_str().unwrap(), "IMAGE");
    check("live-dumpseg-1.txt", &crcs(&live(&["dumpseg", s, "1"])));
    check(
        "live-dumpseg-1.json",
        &json_times(&live(&["dumpseg", "--json", s, "1"]), LOG_FIELDS),
    );
    check("live-super.txt", &dates(&live(&["super", s])));

    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}

/// `stat`'s state_lock_wait histogram counts waits only when another
/// thread held the lock, which depends on the machine's timing: its row
/// (text) keeps its name only.
fn untimed_waits(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.starts_with("state_lock_wait ") {
                "state_lock_wait (figures depend on timing)".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + if text.ends_with('\n') { "\n" } else { "" }
}

/// [`untimed_waits`] for `stat --json`: the state_lock_wait entry's
/// count, quantiles and bucket counts are set to 0.
fn untimed_waits_json(text: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(text).expect("stat --json is JSON");
    for h in v["latency"].as_array_mut().expect("a latency list") {
        if h["name"] == "state_lock_wait" {
            for (k, x) in h.as_object_mut().unwrap().iter_mut() {
                if k.ends_with("_below") || k == "count" {
                    *x = serde_json::json!(0);
                }
            }
            for b in h["buckets"].as_array_mut().unwrap() {
                b["count"] = serde_json::json!(0);
            }
        }
    }
    serde_json::to_string_pretty(&v).unwrap() + "\n"
}
