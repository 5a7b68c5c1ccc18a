//! End to end, issue 6's "done when": with cleanerd running, a workload
//! that overwrites five times the filesystem's free space completes
//! without ENOSPC, every byte verifies, fsck is clean, and `fsctl df` and
//! `fsctl clean --status` tell the truth along the way.

#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use harness::*;
use lfs_e2e::temp_dir;
use nix::sys::signal::Signal;

const CHUNK: usize = 64 << 10;

/// Chunk `c` of version `v`.
fn chunk(c: u64, v: u32) -> Vec<u8> {
    pattern(CHUNK, c.wrapping_mul(1_000_003) ^ u64::from(v) << 40 | 1)
}

#[test]
fn cleanerd_keeps_a_filesystem_writable_through_five_times_its_free_space() {
    let tmp = temp_dir();
    let image = mkfs_with(tmp.path(), "clean.img", &["--size", "96M", "-B", "256"]);
    let mnt = mkdir(tmp.path(), "mnt");
    let mut fsd = Fsd::start(&image, &mnt, &[]);
    let sock = mnt.with_extension("sock");
    let s = sock.to_str().unwrap();

    // A 32 MiB file: about a third of the filesystem is live data.
    let path = mnt.join("data");
    let f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let nchunks: u64 = (32 << 20) / CHUNK as u64;
    let mut ver = vec![0u32; nchunks as usize];
    for c in 0..nchunks {
        f.write_all_at(&chunk(c, 0), c * CHUNK as u64).unwrap();
    }
    f.sync_all().unwrap();
    let d = df_json(s);
    let free = d["free_bytes"].as_u64().unwrap();
    assert!(free > 32 << 20, "{d}");

    let mut cleanerd = Cleanerd::start(tmp.path(), s);
    let log = cleanerd.log.clone();
    // Overwrite 5× the free space at random, skewed 80/20, syncing every
    // 64 chunks (each sync is a checkpoint that keeps what it replaced
    // until cleanerd deletes it).
    let total = 5 * free;
    let mut written = 0u64;
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut i = 0u64;
    let started = Instant::now();
    while written < total {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let c = if rng % 10 < 8 {
            (rng >> 8) % (nchunks / 5)
        } else {
            (rng >> 8) % nchunks
        };
        ver[c as usize] += 1;
        if let Err(e) = f.write_all_at(&chunk(c, ver[c as usize]), c * CHUNK as u64) {
            panic!(
                "write {i} after {written} of {total} bytes: {e}\ndf: {}\ncleanerd:\n{}\nfsd:\n{}",
                df_json(s),
                std::fs::read_to_string(&log).unwrap_or_default(),
                fsd.log()
            );
        }
        written += CHUNK as u64;
        i += 1;
        if i % 64 == 0 {
            f.sync_data().unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "too slow: {written} of {total} bytes in 10 minutes"
        );
    }
    f.sync_all().unwrap();
    if let Some(st) = cleanerd.child.try_wait().unwrap() {
        panic!(
            "cleanerd exited with {st}:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
    // What cleanerd says it did.
    let o = fsctl(&["clean", s, "--status", "--json"]).assert_success();
    let status: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let stats = fsctl(&["stat", "--json", s]).assert_success().stdout;
    assert!(stats.contains("gc_passes"), "{stats}");
    eprintln!("wrote {written} bytes over {free} free; cleanerd: {status}");

    // Every byte.
    let mut buf = vec![0u8; CHUNK];
    for c in 0..nchunks {
        f.read_exact_at(&mut buf, c * CHUNK as u64).unwrap();
        assert!(
            buf == chunk(c, ver[c as usize]),
            "chunk {c} (version {})",
            ver[c as usize]
        );
    }
    drop(f);
    cleanerd.terminate();
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM");
    assert_fsck_clean(&image, "after the workload");
}
