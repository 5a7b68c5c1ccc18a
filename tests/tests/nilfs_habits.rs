//! End to end, issue 26 item 11: what an administrator who knows
//! nilfs-utils tries works as they expect.

#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::fs;

use harness::*;
use lfs_e2e::{run, temp_dir};
use nix::sys::signal::Signal;

fn cnos(o: &lfs_e2e::Output) -> Vec<u64> {
    o.stdout
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

/// lscp lists the latest checkpoint even when the timer made it (a minor
/// one): an idle filesystem with only timer checkpoints listed nothing.
#[test]
fn lscp_always_lists_the_latest_checkpoint() {
    let d = temp_dir();
    let image = mkfs_with(d.path(), "t.img", &["-B", "64", "--size", "64M"]);
    let mnt = mkdir(d.path(), "mnt");
    let conf = d.path().join("fsd.toml");
    fs::write(&conf, "checkpoint_interval = 0.1\n").unwrap();
    let mut fsd = Fsd::start(&image, &mnt, &["-c", conf.to_str().unwrap()]);
    let s = mnt.with_extension("sock");
    let s = s.to_str().unwrap();
    fs::write(mnt.join("f"), b"by the timer").unwrap();
    let deadline = std::time::Instant::now() + CMD_TIMEOUT;
    let all = loop {
        let all = cnos(&fsctl(&["lscp", "-a", s]).assert_success());
        if all.len() > 1 {
            break all;
        }
        assert!(std::time::Instant::now() < deadline, "no timer checkpoint");
        std::thread::sleep(POLL);
    };
    let o = fsctl(&["lscp", s]).assert_success();
    let listed = cnos(&o);
    let latest = *all.last().unwrap();
    assert!(listed.contains(&latest), "latest {latest} missing: {o}");
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}

/// rmcp takes `..N` and `-f`; dumpseg several segments; fsctl finds a
/// mounted device's fsd through the mount table, by any of its names.
#[test]
fn rmcp_ranges_dumpseg_segments_and_devices_by_any_name() {
    let d = temp_dir();
    let real = mkfs_with(d.path(), "real.img", &["-B", "64", "--size", "64M"]);
    let link = d.path().join("link.img");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let mnt = mkdir(d.path(), "mnt");
    // The default socket, named after the device: a name no other test
    // uses, since it lives in /run/lfs.
    let name = format!("habits-{}.img", std::process::id());
    let named = d.path().join(&name);
    fs::rename(&real, &named).unwrap();
    fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&named, &link).unwrap();
    let mut fsd = Fsd::start_exactly(&link, &mnt, &[]);
    let (by_link, by_name) = (link.to_str().unwrap(), named.to_str().unwrap());
    for target in [by_link, by_name, mnt.to_str().unwrap()] {
        fsctl(&["lscp", target]).assert_success();
    }
    for _ in 0..5 {
        fsctl(&["mkcp", by_name]).assert_success();
    }
    let before = cnos(&fsctl(&["lscp", "-a", by_name]).assert_success());
    let o = fsctl(&["rmcp", by_name, "..3"]).assert_success();
    let after = cnos(&fsctl(&["lscp", "-a", by_name]).assert_success());
    assert!(after.iter().all(|&c| c > 3), "{before:?} -> {after:?}: {o}");
    let o = fsctl(&["rmcp", by_name, "999"]);
    assert_eq!(o.status.code(), Some(7), "{o}");
    let o = fsctl(&["rmcp", "-f", by_name, "999", "4"]).assert_success();
    assert!(!cnos(&fsctl(&["lscp", "-a", by_name])).contains(&4), "{o}");

    let o = fsctl(&["dumpseg", by_name, "0", "1"]).assert_success();
    assert!(
        o.stdout.contains("segment 0 (") && o.stdout.contains("segment 1 ("),
        "{o}"
    );
    let o = fsctl(&["dumpseg", "--json", by_link, "0", "1"]).assert_success();
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v.as_array().map(Vec::len), Some(2), "{o}");
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
}

/// `fsctl clean` with no action cleans once, as nilfs-clean does, and
/// `-m 0` forces a pass that the configured min_reclaimable_blocks
/// defers.
#[test]
fn clean_without_an_action_cleans_once_and_m_forces_it() {
    let d = temp_dir();
    let image = mkfs_with(d.path(), "c.img", &["-B", "64", "--size", "64M"]);
    let mnt = mkdir(d.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let s = mnt.with_extension("sock");
    let s = s.to_str().unwrap();
    // Full segments with a few dead blocks each: below 10% reclaimable.
    fs::write(mnt.join("big"), pattern(2 << 20, 3)).unwrap();
    fsctl(&["mkcp", s]).assert_success();
    let f = fs::OpenOptions::new()
        .write(true)
        .open(mnt.join("big"))
        .unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(b"x", 100_000).unwrap();
    drop(f);
    fsctl(&["mkcp", s]).assert_success();

    let o = fsctl(&["clean", s, "-p", "0", "--segments", "2"]);
    assert!(o.status.success(), "{o}");
    assert!(
        o.stdout.contains("deferred"),
        "no action should clean once: {o}"
    );
    let o = fsctl(&["clean", s, "-p", "0", "--segments", "2", "-m", "0"]);
    assert!(o.status.success(), "{o}");
    assert!(
        o.stdout.contains("cleaned"),
        "-m 0 should force the pass: {o}"
    );
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&image, "after the forced pass");
}

/// cleanerd says how to convert a nilfs_cleanerd.conf instead of
/// reporting a TOML syntax error.
#[test]
fn cleanerd_explains_a_nilfs_style_configuration() {
    let d = temp_dir();
    let conf = d.path().join("cleanerd.conf");
    fs::write(
        &conf,
        "# copied from nilfs_cleanerd.conf\nprotection_period\t3600\nmin_clean_segments\t10%\n",
    )
    .unwrap();
    let o = run(
        &mut lfs_e2e::daemons::cleanerd(&["-c".as_ref(), conf.as_os_str(), "/".as_ref()]),
        CMD_TIMEOUT,
    );
    assert_eq!(o.status.code(), Some(2), "{o}");
    assert!(
        o.stderr.contains("cleanerd.conf:2")
            && o.stderr.contains("nilfs")
            && o.stderr.contains("protection_period = VALUE"),
        "{o}"
    );
    assert!(!o.stderr.contains("expected"), "{o}");
}
