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
//! `fuzz/` also holds targets outside the engine's decoders
//! ([`OTHER_CRATE_TARGETS`]: the protocol, the configuration files, and
//! the operation-sequence crash target, whose code lives with these
//! tests in `common/ops.rs` and `common/plan.rs`); their own tests run
//! them over their corpus. Here they are only checked to be wired up
//! (target file, `[[bin]]`, the test that runs them, corpus files named
//! as that test expects), so that the no-strays check still catches a
//! fuzz target or a corpus directory that nothing runs.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use lfs::format::targets::{self, ALL};
use lfs_e2e::fuzz_corpus::{assert_none, check_verdicts, corpus, mutations, run, seed_of};
use lfs_e2e::rng::SplitMix64;

/// A fuzz target whose entry point is not in `lfs::format::targets`.
struct OtherTarget {
    name: &'static str,
    /// The call its `fuzz/fuzz_targets/<name>.rs` makes.
    call: &'static str,
    /// The test that runs it over `fuzz/corpus/<name>/`.
    runner: &'static str,
    /// What its corpus files are named: each starts with one of these, and
    /// each of these starts at least one.
    prefixes: &'static [&'static str],
}

/// Files that must be accepted, and rejected with an error of a kind.
const VERDICTS: &[&str] = &["good-", "bad-"];

const OTHER_CRATE_TARGETS: &[OtherTarget] = &[
    OtherTarget {
        name: "proto_frame",
        call: "lfs_proto::targets::proto_frame(data)",
        runner: "proto/tests/corpus.rs",
        prefixes: VERDICTS,
    },
    OtherTarget {
        name: "cleanerd_conf",
        call: "cleanerd::targets::cleanerd_conf(data)",
        runner: "cleanerd/tests/corpus.rs",
        prefixes: VERDICTS,
    },
    OtherTarget {
        name: "fsd_toml",
        call: "fsd::targets::fsd_toml(data)",
        runner: "fsd/tests/corpus.rs",
        prefixes: VERDICTS,
    },
    // Plans, which have no verdict: each must run without a violation.
    OtherTarget {
        name: "ops_crash",
        call: "ops::ops_crash(data)",
        runner: "lfs/tests/ops_crash.rs",
        prefixes: &["seq-"],
    },
];

/// Random inputs per target.
const RANDOM_INPUTS: usize = 20_000;
/// Mutated copies per corpus file.
const MUTATIONS_PER_FILE: usize = 1_000;
#[test]
fn target_names_are_unique() {
    let mut names: BTreeSet<&str> = ALL.iter().map(|(n, _)| *n).collect();
    assert_eq!(names.len(), ALL.len(), "duplicate target name in ALL");
    for t in OTHER_CRATE_TARGETS {
        assert!(
            names.insert(t.name),
            "{} is in ALL or OTHER_CRATE_TARGETS twice",
            t.name
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
    for t in OTHER_CRATE_TARGETS {
        let name = t.name;
        let path = fuzz.join("fuzz_targets").join(format!("{name}.rs"));
        let src = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            src.contains(t.call),
            "{} does not call {}",
            path.display(),
            t.call
        );
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml has no [[bin]] {name}"
        );
        let runner = fuzz.join("..").join(t.runner);
        let runner_src =
            fs::read_to_string(&runner).unwrap_or_else(|e| panic!("{}: {e}", runner.display()));
        assert!(
            runner_src.contains(&format!("\"{name}\"")),
            "{} does not run the corpus of {name}",
            runner.display()
        );
        // Its own test checks each file; here, that the names are the
        // ones that test expects.
        let files = corpus(name);
        for prefix in t.prefixes {
            assert!(
                files.iter().any(|(f, _)| f.starts_with(prefix)),
                "fuzz/corpus/{name} needs a {prefix}* file"
            );
        }
        for (file, _) in &files {
            assert!(
                t.prefixes.iter().any(|p| file.starts_with(p)),
                "fuzz/corpus/{name}/{file}: not named {}*",
                t.prefixes.join("* or ")
            );
        }
    }
    let known: BTreeSet<&str> = ALL
        .iter()
        .map(|(n, _)| *n)
        .chain(OTHER_CRATE_TARGETS.iter().map(|t| t.name))
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

/// The kinds `targets::error_kind` returns.
const ERROR_KINDS: &[&str] = &[
    "truncated",
    "magic",
    "version",
    "checksum",
    "features",
    "field",
];

#[test]
fn corpus_files_decode_as_their_names_say() {
    let mut failures = Vec::new();
    for &(name, target) in ALL {
        failures.extend(check_verdicts(
            name,
            target,
            targets::error_kind,
            ERROR_KINDS,
        ));
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
        let mut rng = SplitMix64(seed_of(name));
        for i in 0..RANDOM_INPUTS {
            let len = rng.below(2 * block + 1);
            let data = if i % 2 == 0 {
                rng.bytes(len)
            } else {
                // Mostly zeros: all-zero records are often valid, so the
                // decoders get past their first checks and the oracle runs.
                let mut v = vec![0u8; len];
                for _ in 0..rng.below(8) {
                    if len > 0 {
                        let at = rng.below(len);
                        v[at] = rng.next_u64() as u8;
                    }
                }
                v
            };
            if let Err(e) = run(name, &data, &format!("random input {i}"), target) {
                failures.push(e);
                break;
            }
        }
    }
    assert_none(&failures);
}

#[test]
fn mutated_corpus_never_panics() {
    let mut failures = Vec::new();
    for &(name, target) in ALL {
        if let Err(e) = mutations(name, MUTATIONS_PER_FILE, target) {
            failures.push(e);
        }
    }
    assert_none(&failures);
}
