//! End to end, issue 8 item 6: `kill -9` of fsd and of cleanerd at random
//! moments during a mixed workload (create + fsync, rename + fsync,
//! unlink), cycle after cycle on one image. After each kill every file
//! whose fsync returned is read back; after a kill of fsd the dead mount
//! is detached, the image is fsck'd while fsd is down, fsd is restarted,
//! and the cleanerd that kept running must reconnect by itself; a killed
//! cleanerd is restarted while the workload runs on, which must not fail
//! while fsd runs.
//!
//! `LFS_KILL_CYCLES` sets the number of cycles (10 by default, 100 with
//! `LFS_LONG=1`), `LFS_KILL_SEED` the random seed.

#[allow(dead_code)]
#[path = "fsd_mount/harness.rs"]
mod harness;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use harness::*;
use lfs_e2e::rng::SplitMix64;
use lfs_e2e::temp_dir;
use nix::sys::signal::Signal;

/// Cycles in the bounded run.
const CYCLES: usize = 10;
/// Cycles with `LFS_LONG=1`.
const LONG_CYCLES: usize = 100;
/// Files the writer keeps at most: their sizes stay far below the
/// image's, so the workload never meets ENOSPC.
const MAX_FILES: usize = 48;
/// Largest file the writer writes.
const MAX_LEN: usize = 256 << 10;
/// Longest a workload runs before its kill (the shortest is a tenth).
const MAX_RUN: Duration = Duration::from_millis(1500);

/// The content of every name the writer ever used: names are never
/// reused, so a name found on the image has one possible content.
#[derive(Default)]
struct Model {
    /// Name → (seed, length) of its content.
    known: BTreeMap<String, (u64, usize)>,
    /// The names whose content an fsync made durable and that the writer
    /// has not since renamed or unlinked (nor started to).
    durable: BTreeMap<String, (u64, usize)>,
    /// The next name number.
    next: u64,
    /// Files fsync'd in all.
    fsyncs: usize,
}

/// Writes `data` to `path` and fsyncs it.
fn write_synced(path: &Path, data: &[u8]) -> io::Result<()> {
    let mut f = File::create(path)?;
    f.write_all(data)?;
    f.sync_all()
}

/// One step of the workload: create a file and fsync it (most often),
/// rename a durable file and fsync it under its new name, or unlink one.
fn step(dir: &Path, m: &mut Model, rng: &mut SplitMix64) -> io::Result<()> {
    let choice = rng.below(10);
    let pick = |m: &Model, rng: &mut SplitMix64| {
        let names: Vec<String> = m.durable.keys().cloned().collect();
        names.get(rng.below(names.len())).cloned()
    };
    if choice < 6 && m.durable.len() < MAX_FILES {
        let name = format!("f{}", m.next);
        m.next += 1;
        let len = rng.below(MAX_LEN);
        let seed = rng.next_u64();
        m.known.insert(name.clone(), (seed, len));
        write_synced(&dir.join(&name), &pattern(len, seed))?;
        m.durable.insert(name, (seed, len));
        m.fsyncs += 1;
    } else if choice < 8 {
        let Some(old) = pick(m, rng) else {
            return Ok(());
        };
        let new = format!("r{}", m.next);
        m.next += 1;
        let content = m.durable.remove(&old).expect("picked from durable");
        m.known.insert(new.clone(), content);
        fs::rename(dir.join(&old), dir.join(&new))?;
        File::open(dir.join(&new))?.sync_all()?;
        m.durable.insert(new, content);
        m.fsyncs += 1;
    } else if let Some(old) = pick(m, rng) {
        m.durable.remove(&old);
        fs::remove_file(dir.join(&old))?;
    }
    Ok(())
}

/// What a verification found.
#[derive(Debug, Default)]
struct Verified {
    /// Durable files read back intact.
    intact: usize,
    /// Durable files missing or with other bytes, with what is wrong.
    lost: Vec<String>,
}

/// Reads every durable file back; checks that every other name on the
/// image is one the writer used, holding a prefix of its content (a
/// timer checkpoint may have caught it mid-write); then removes the files
/// that are not durable, so that the next cycle starts from `durable`.
fn verify(dir: &Path, m: &Model) -> Verified {
    let mut v = Verified::default();
    for (name, (seed, len)) in &m.durable {
        match fs::read(dir.join(name)) {
            Ok(data) if data == pattern(*len, *seed) => v.intact += 1,
            Ok(data) => v.lost.push(format!(
                "{name}: {} bytes that are not the {len} written",
                data.len()
            )),
            Err(e) => v.lost.push(format!("{name}: {e}")),
        }
    }
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("listing {}: {e}", dir.display())) {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if m.durable.contains_key(&name) {
            continue;
        }
        let &(seed, len) = m
            .known
            .get(&name)
            .unwrap_or_else(|| panic!("{name} on the image was never written"));
        let data = fs::read(dir.join(&name)).unwrap();
        assert!(
            data.len() <= len && data == pattern(len, seed)[..data.len()],
            "{name} holds {} bytes that are not a prefix of the {len} written",
            data.len()
        );
        fs::remove_file(dir.join(&name)).unwrap();
    }
    v
}

/// Runs the workload on `dir` until `stop`, or until a call fails: then
/// returns the error, with whether `killed` was set when it came (a
/// failure is expected only once fsd was killed).
fn workload(
    dir: PathBuf,
    mut m: Model,
    mut rng: SplitMix64,
    stop: Arc<AtomicBool>,
    killed: Arc<AtomicBool>,
) -> (Model, Option<(io::Error, bool)>) {
    while !stop.load(Ordering::SeqCst) {
        if let Err(e) = step(&dir, &mut m, &mut rng) {
            return (m, Some((e, killed.load(Ordering::SeqCst))));
        }
    }
    (m, None)
}

#[test]
fn kill_9_of_fsd_and_cleanerd_loses_no_fsynced_file() {
    let long = long_mode();
    let cycles = env_usize("LFS_KILL_CYCLES", if long { LONG_CYCLES } else { CYCLES });
    let seed = env_usize("LFS_KILL_SEED", 0x6b11) as u64;
    let tmp = temp_dir();
    let (image, mnt, s, mut fsd, mut cleanerd) =
        serve_with_cleanerd(tmp.path(), "faults.img", &["--size", "64M", "-B", "256"]);
    let dir = mnt.join("w");
    fs::create_dir(&dir).unwrap();

    let mut rng = SplitMix64(seed);
    let mut model = Model::default();
    let (mut fsd_kills, mut cleanerd_kills, mut verified) = (0, 0, 0);
    for cycle in 0..cycles {
        let kill_fsd = cycle % 2 == 0;
        let stop = Arc::new(AtomicBool::new(false));
        let killed = Arc::new(AtomicBool::new(false));
        let writer = {
            let (dir, wrng) = (dir.clone(), SplitMix64(rng.next_u64()));
            let (stop, killed) = (Arc::clone(&stop), Arc::clone(&killed));
            let m = std::mem::take(&mut model);
            thread::spawn(move || workload(dir, m, wrng, stop, killed))
        };
        let tenth = MAX_RUN.as_millis() as usize / 10;
        thread::sleep(Duration::from_millis(
            (tenth + rng.below(MAX_RUN.as_millis() as usize - tenth)) as u64,
        ));
        let when = format!("in cycle {cycle} (seed {seed:#x})");
        if kill_fsd {
            // The workload runs on into the dead mount and fails there;
            // a failure before the kill would be a bug.
            let before = connections(&cleanerd.log());
            killed.store(true, Ordering::SeqCst);
            fsd.signal(Signal::SIGKILL);
            let status = fsd.wait();
            assert_eq!(status.code(), None, "fsd was killed by a signal {when}");
            let (m, error) = writer.join().unwrap();
            model = m;
            match error {
                Some((_, true)) => {}
                other => panic!("the workload did not fail only after the kill {when}: {other:?}"),
            }
            drop(fsd);
            lazy_unmount(&mnt);
            assert_fsck_clean(&image, &format!("after kill -9 of fsd {when}"));
            fsd = Fsd::start(&image, &mnt, &[]);
            assert!(
                cleanerd.child.try_wait().unwrap().is_none(),
                "cleanerd exited when fsd died {when}:\n{}",
                cleanerd.log()
            );
            assert_reconnects(&cleanerd, &s, before, &when);
            fsd_kills += 1;
        } else {
            killed.store(true, Ordering::SeqCst);
            cleanerd.signal(Signal::SIGKILL);
            let status = cleanerd.child.wait().unwrap();
            assert_eq!(
                status.code(),
                None,
                "cleanerd was killed by a signal {when}"
            );
            // Restarted as a supervisor would, while the workload runs
            // on: a change out of space waits for a cleaner heard from
            // in the last 15 s, so a writer the dead cleanerd left
            // waiting is served by the new one. (Stopped first, the
            // workload got ENOSPC in release builds, which fill the
            // image with dead blocks faster than cleanerd reclaims them.)
            let before = connections(&cleanerd.log());
            drop(cleanerd);
            cleanerd = Cleanerd::start(tmp.path(), &s);
            assert_reconnects(&cleanerd, &s, before, &format!("after its restart {when}"));
            stop.store(true, Ordering::SeqCst);
            let (m, error) = writer.join().unwrap();
            model = m;
            assert!(
                error.is_none(),
                "the workload failed with fsd running {when}: {error:?}\n{}",
                fsd.log()
            );
            cleanerd_kills += 1;
        }
        let v = verify(&dir, &model);
        assert!(
            v.lost.is_empty(),
            "fsync'd files lost {when}: {:?}\nfsd:\n{}",
            v.lost,
            fsd.log()
        );
        verified += v.intact;
    }
    cleanerd.terminate();
    fsd.signal(Signal::SIGTERM);
    fsd.assert_clean_exit("SIGTERM after the kill cycles");
    assert_fsck_clean(&image, "after the kill cycles");
    // Cleaning went on between the kills, or killing cleanerd proved
    // little.
    let passes = cleanerd
        .log()
        .lines()
        .filter(|l| l.contains("cleaned ") && l.contains(" segment(s) "))
        .count();
    assert!(passes > 0, "cleanerd never cleaned:\n{}", cleanerd.log());
    println!(
        "process faults: {cycles} cycles ({fsd_kills} fsd kills, {cleanerd_kills} cleanerd kills), \
         {} files fsync'd, {verified} fsync'd files verified, {passes} cleaning passes, 0 lost",
        model.fsyncs
    );
}
