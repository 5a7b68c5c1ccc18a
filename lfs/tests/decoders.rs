//! The decoder fuzz targets (`lfs::format::targets::ALL`) as ordinary tests:
//! over the committed corpus in `fuzz/corpus/<target>/`, over random inputs
//! and over mutated copies of the corpus, all from a fixed-seed PRNG so a
//! failure reproduces. A target panics only when its decoder panics or its
//! round-trip oracle finds an asymmetry; either fails the test, which names
//! the target and writes the input to a file.
//!
//! The corpus must stay meaningful: every target has one, with at least one
//! `good-*` file (decodes, so the oracle runs) and one `bad-<kind>-*` file
//! (rejected with an error of that kind, `targets::error_kind`). cargo-fuzz
//! itself is run by `fuzz/run-smoke.sh`; see docs/FUZZING.md.
//!
//! `fuzz/` also holds targets of decoders outside the engine
//! ([`OTHER_CRATE_TARGETS`]), which this crate does not link; their own
//! crates run them over their corpus in the same way. Here they are only
//! checked to be wired up (target file, `[[bin]]`, the test that runs them,
//! a good and a bad corpus file), so that the no-strays check still catches
//! a fuzz target or a corpus directory that nothing runs.

use std::collections::BTreeSet;
use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use lfs::format::targets::{self, Target, ALL};
use lfs::format::DecodeError;

/// Fuzz targets whose decoders live in other crates: (name, the call its
/// `fuzz/fuzz_targets/<name>.rs` makes, the test that runs it over
/// `fuzz/corpus/<name>/`).
const OTHER_CRATE_TARGETS: &[(&str, &str, &str)] = &[(
    "proto_frame",
    "lfs_proto::targets::proto_frame(data)",
    "proto/tests/corpus.rs",
)];

/// Random inputs per target.
const RANDOM_INPUTS: usize = 20_000;
/// Mutated copies per corpus file.
const MUTATIONS_PER_FILE: usize = 1_000;
/// Most mutations stacked on one copy.
const MAX_STACKED_MUTATIONS: u64 = 4;
/// Most bytes a mutation appends.
const MAX_EXTENSION: u64 = 64;
/// Byte values that sit on the edges of fields.
const INTERESTING_BYTES: [u8; 6] = [0, 1, 0x7f, 0x80, 0xfe, 0xff];

/// splitmix64: tiny, fixed, good enough to drive mutations.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0; the modulo bias is irrelevant here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// A per-target seed that does not shift when targets are added (FNV-1a).
fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

/// The corpus of `target`, sorted by file name. Panics if it is missing or
/// empty: a target without a corpus is a mistake.
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_root().join(target);
    let entries = fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; every target needs a seed corpus (run `cargo run --example gen_corpus` in fuzz/)",
            dir.display()
        )
    });
    let mut files: Vec<(String, Vec<u8>)> = entries
        .map(|e| {
            let path = e.expect("reading the corpus directory").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_else(|| panic!("{}: file name is not UTF-8", path.display()))
                .to_string();
            let data = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (name, data)
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: empty corpus", dir.display());
    files
}

/// Runs `target` on `data` and returns its verdict, or, if it panics, a
/// message naming the input, which it saves under the test's scratch
/// directory.
fn run(
    name: &str,
    target: Target,
    data: &[u8],
    what: &str,
) -> Result<Result<(), DecodeError>, String> {
    match panic::catch_unwind(AssertUnwindSafe(|| target(data))) {
        Ok(verdict) => Ok(verdict),
        Err(cause) => {
            let msg = cause
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| cause.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("decoder-failures");
            let path = dir.join(format!("{name}-{}", what.replace([' ', '/'], "_")));
            let saved = fs::create_dir_all(&dir).and_then(|()| fs::write(&path, data));
            let place = match saved {
                Ok(()) => path.display().to_string(),
                Err(e) => format!("(not saved: {e})"),
            };
            Err(format!(
                "{name}: panicked on {what} ({} bytes, saved to {place}): {msg}",
                data.len()
            ))
        }
    }
}

/// Fails with every message in `failures`, if any.
fn assert_none(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn target_names_are_unique() {
    let names: BTreeSet<&str> = ALL.iter().map(|(n, _)| *n).collect();
    assert_eq!(names.len(), ALL.len(), "duplicate target name in ALL");
    for (name, _, _) in OTHER_CRATE_TARGETS {
        assert!(
            !names.contains(name),
            "{name} is in ALL and in OTHER_CRATE_TARGETS"
        );
    }
}

#[test]
fn every_target_has_a_cargo_fuzz_target_and_nothing_else_does() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let manifest = fs::read_to_string(fuzz.join("Cargo.toml")).expect("reading fuzz/Cargo.toml");
    for (name, _) in ALL {
        let path = fuzz.join("fuzz_targets").join(format!("{name}.rs"));
        let src = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            src.contains(&format!("lfs::format::targets::{name}(data)")),
            "{} does not call lfs::format::targets::{name}",
            path.display()
        );
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml has no [[bin]] {name}"
        );
    }
    for (name, call, runner) in OTHER_CRATE_TARGETS {
        let path = fuzz.join("fuzz_targets").join(format!("{name}.rs"));
        let src = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            src.contains(call),
            "{} does not call {call}",
            path.display()
        );
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml has no [[bin]] {name}"
        );
        let runner = fuzz.join("..").join(runner);
        let runner_src =
            fs::read_to_string(&runner).unwrap_or_else(|e| panic!("{}: {e}", runner.display()));
        assert!(
            runner_src.contains(&format!("\"{name}\"")),
            "{} does not run the corpus of {name}",
            runner.display()
        );
        // Its own crate checks each file's verdict; here, that there is a
        // good and a bad one, named as everywhere else.
        let files = corpus(name);
        let has = |prefix: &str| files.iter().any(|(f, _)| f.starts_with(prefix));
        assert!(
            has("good-") && has("bad-"),
            "fuzz/corpus/{name} needs a good-* and a bad-* file"
        );
        for (file, _) in &files {
            assert!(
                file.starts_with("good-") || file.starts_with("bad-"),
                "fuzz/corpus/{name}/{file}: not named good-* or bad-<kind>-*"
            );
        }
    }
    let known: BTreeSet<&str> = ALL
        .iter()
        .map(|(n, _)| *n)
        .chain(OTHER_CRATE_TARGETS.iter().map(|(n, _, _)| *n))
        .collect();
    for (dir, suffix) in [("fuzz_targets", ".rs"), ("corpus", "")] {
        for e in fs::read_dir(fuzz.join(dir)).expect("reading the fuzz directory") {
            let file = e.expect("reading the fuzz directory").file_name();
            let file = file.to_string_lossy();
            let target = file.strip_suffix(suffix).unwrap_or("");
            assert!(
                known.contains(target),
                "fuzz/{dir}/{file} belongs to no entry of targets::ALL or OTHER_CRATE_TARGETS"
            );
        }
    }
}

#[test]
fn corpus_files_decode_as_their_names_say() {
    let mut failures = Vec::new();
    for &(name, target) in ALL {
        let files = corpus(name);
        let mut good = 0;
        let mut bad = 0;
        for (file, data) in &files {
            let verdict = match run(name, target, data, &format!("corpus file {file}")) {
                Ok(v) => v,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            let mut parts = file.split('-');
            match (parts.next(), parts.next(), verdict) {
                (Some("good"), Some(_), Ok(())) => good += 1,
                (Some("bad"), Some(kind), Err(e)) if targets::error_kind(&e) == kind => bad += 1,
                (Some("good" | "bad"), Some(_), v) => {
                    failures.push(format!("{name}/{file}: decodes to {v:?}"))
                }
                _ => failures.push(format!(
                    "{name}/{file}: not named good-* or bad-<kind>-* \
                     (kinds: truncated, magic, version, checksum, features, field)"
                )),
            }
        }
        if good == 0 || bad == 0 {
            failures.push(format!(
                "{name}: corpus needs a good-* and a bad-* file, has {good} good and {bad} bad"
            ));
        }
    }
    assert_none(&failures);
}

#[test]
fn random_inputs_never_panic() {
    let mut failures = Vec::new();
    for &(name, target) in ALL {
        // Lengths up to twice the largest seed: past every structure size
        // and block the target's inputs select.
        let block = corpus(name).iter().map(|(_, d)| d.len()).max().unwrap_or(0);
        let mut rng = Rng::new(seed_of(name));
        for i in 0..RANDOM_INPUTS {
            let len = rng.index(2 * block + 1);
            let data = if i % 2 == 0 {
                rng.bytes(len)
            } else {
                // Mostly zeros: all-zero records are often valid, so the
                // decoders get past their first checks and the oracle runs.
                let mut v = vec![0u8; len];
                for _ in 0..rng.below(8) {
                    if len > 0 {
                        let at = rng.index(len);
                        v[at] = rng.next() as u8;
                    }
                }
                v
            };
            if let Err(e) = run(name, target, &data, &format!("random input {i}")) {
                failures.push(e);
                break;
            }
        }
    }
    assert_none(&failures);
}

/// One random mutation of `data`; `others` are the target's corpus files,
/// for splicing.
fn mutate(rng: &mut Rng, data: &mut Vec<u8>, others: &[(String, Vec<u8>)]) {
    let len = data.len();
    match rng.below(7) {
        0 if len > 0 => {
            let at = rng.index(len);
            data[at] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let at = rng.index(len);
            data[at] = INTERESTING_BYTES[rng.index(INTERESTING_BYTES.len())];
        }
        2 if len >= 8 => {
            // A whole field: a 4- or 8-byte value at an aligned offset.
            let width = if rng.below(2) == 0 { 4 } else { 8 };
            let at = rng.index(len / width) * width;
            let value = match rng.below(4) {
                0 => 0,
                1 => u64::MAX,
                2 => 1 << rng.below(64),
                _ => rng.next(),
            };
            let at = at.min(len - width);
            data[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
        }
        3 => data.truncate(rng.index(len + 1)),
        4 => {
            let n = rng.below(MAX_EXTENSION) as usize + 1;
            if rng.below(2) == 0 {
                data.resize(len + n, 0);
            } else {
                data.extend(rng.bytes(n));
            }
        }
        5 => {
            // Splice: keep a prefix, continue with another seed's tail.
            let (_, other) = &others[rng.index(others.len())];
            let cut = rng.index(len + 1).min(other.len());
            data.truncate(cut);
            data.extend_from_slice(&other[cut..]);
        }
        _ if len > 0 => {
            // Duplicate or drop a run, shifting everything after it.
            let at = rng.index(len);
            let n = (rng.below(16) as usize + 1).min(len - at);
            if rng.below(2) == 0 {
                let run: Vec<u8> = data[at..at + n].to_vec();
                data.splice(at..at, run);
            } else {
                data.drain(at..at + n);
            }
        }
        _ => data.push(rng.next() as u8),
    }
}

#[test]
fn mutated_corpus_never_panics() {
    let mut failures = Vec::new();
    for &(name, target) in ALL {
        let files = corpus(name);
        let mut rng = Rng::new(seed_of(name) ^ 0x6d75_7461_7465);
        'files: for (file, seed) in &files {
            for i in 0..MUTATIONS_PER_FILE {
                let mut data = seed.clone();
                for _ in 0..=rng.below(MAX_STACKED_MUTATIONS) {
                    mutate(&mut rng, &mut data, &files);
                }
                if let Err(e) = run(name, target, &data, &format!("mutation {i} of {file}")) {
                    failures.push(e);
                    break 'files;
                }
            }
        }
    }
    assert_none(&failures);
}
