//! The fuzz targets as ordinary tests: the committed corpora in
//! `fuzz/corpus/<target>/`, random inputs and mutated copies of the
//! corpus, all from a fixed-seed PRNG so that a failure reproduces.
//! cargo-fuzz runs the same entry points (`fuzz/run-smoke.sh`); these
//! helpers let `cargo test` replay every corpus file, the regressions
//! among them, on every run. See docs/FUZZING.md.
//!
//! A target panics only when it found a bug (a decoder or parser
//! panicked, or its oracle failed); [`run`] catches the panic, saves the
//! input under the target directory and returns a message naming both.
//!
//! Corpus files of targets that return a verdict are named `good-*`
//! (accepted) or `bad-<kind>-*` (rejected with an error of that kind):
//! [`check_verdicts`] holds every file to its name.

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;

use crate::rng::SplitMix64;

/// Byte values that sit on the edges of fields.
const INTERESTING_BYTES: [u8; 6] = [0, 1, 0x7f, 0x80, 0xfe, 0xff];
/// Most bytes a mutation appends.
const MAX_EXTENSION: usize = 64;
/// Most mutations stacked on one copy.
const MAX_STACKED_MUTATIONS: usize = 4;

/// `fuzz/corpus/<target>/`.
pub fn corpus_dir(target: &str) -> PathBuf {
    crate::workspace_root().join("fuzz/corpus").join(target)
}

/// The corpus of `target`, `(file name, bytes)` sorted by name. Panics
/// if it is missing or empty: a target without a corpus is a mistake.
pub fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir(target);
    let entries = fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; every fuzz target needs a seed corpus (docs/FUZZING.md)",
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

/// A per-target seed that does not shift when targets are added (FNV-1a
/// of the name).
pub fn seed_of(target: &str) -> u64 {
    target.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Runs `f` on `data`; if it panics, saves the input to
/// `<target dir>/tmp/fuzz-failures/` and returns a message naming the
/// target, the input (`what`) and where it was saved.
pub fn run<T>(
    target: &str,
    data: &[u8],
    what: &str,
    f: impl FnOnce(&[u8]) -> T,
) -> Result<T, String> {
    panic::catch_unwind(AssertUnwindSafe(|| f(data))).map_err(|cause| {
        let msg = cause
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| cause.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        let dir = crate::target_dir().join("tmp/fuzz-failures");
        let path = dir.join(format!("{target}-{}", what.replace([' ', '/'], "_")));
        let saved = fs::create_dir_all(&dir).and_then(|()| fs::write(&path, data));
        let place = match saved {
            Ok(()) => path.display().to_string(),
            Err(e) => format!("(not saved: {e})"),
        };
        format!(
            "{target}: panicked on {what} ({} bytes, saved to {place}): {msg}",
            data.len()
        )
    })
}

/// Fails with every message in `failures`, if any.
pub fn assert_none(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Checks every corpus file of `target` against its name: `good-*` must
/// be accepted, `bad-<kind>-*` rejected with `kind_of` its error giving
/// `<kind>` (one of `kinds`), and there must be at least one of each.
/// Returns the failures.
pub fn check_verdicts<E: std::fmt::Debug>(
    target: &str,
    f: impl Fn(&[u8]) -> Result<(), E>,
    kind_of: impl Fn(&E) -> &'static str,
    kinds: &[&str],
) -> Vec<String> {
    let mut failures = Vec::new();
    let (mut good, mut bad) = (0, 0);
    for (file, data) in corpus(target) {
        let verdict = match run(target, &data, &format!("corpus file {file}"), &f) {
            Ok(v) => v,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        let mut parts = file.split('-');
        match (parts.next(), parts.next(), verdict) {
            (Some("good"), Some(_), Ok(())) => good += 1,
            (Some("bad"), Some(kind), Err(e)) if kind_of(&e) == kind => bad += 1,
            (Some("good" | "bad"), Some(_), v) => {
                failures.push(format!("{target}/{file}: decodes to {v:?}"))
            }
            _ => failures.push(format!(
                "{target}/{file}: not named good-* or bad-<kind>-* (kinds: {})",
                kinds.join(", ")
            )),
        }
    }
    if good == 0 || bad == 0 {
        failures.push(format!(
            "{target}: corpus needs a good-* and a bad-* file, has {good} good and {bad} bad"
        ));
    }
    failures
}

/// Runs `f` on `n` random inputs of up to twice the largest corpus file:
/// half of them random bytes, half made of the bytes the corpus uses (so
/// text formats stay mostly text). Returns the first failure.
pub fn random_inputs<T>(target: &str, n: usize, f: impl Fn(&[u8]) -> T) -> Result<(), String> {
    let files = corpus(target);
    let longest = files.iter().map(|(_, d)| d.len()).max().unwrap_or(0);
    let alphabet: Vec<u8> = files.iter().flat_map(|(_, d)| d.iter().copied()).collect();
    let mut rng = SplitMix64(seed_of(target));
    for i in 0..n {
        let len = rng.below(2 * longest + 1);
        let data = if i % 2 == 0 || alphabet.is_empty() {
            rng.bytes(len)
        } else {
            (0..len)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect()
        };
        run(target, &data, &format!("random input {i}"), &f)?;
    }
    Ok(())
}

/// Runs `f` on `per_file` mutated copies of each corpus file (up to
/// [`MAX_STACKED_MUTATIONS`] mutations each). Returns the first failure.
pub fn mutations<T>(target: &str, per_file: usize, f: impl Fn(&[u8]) -> T) -> Result<(), String> {
    let files = corpus(target);
    let mut rng = SplitMix64(seed_of(target) ^ 0x6d75_7461_7465);
    for (file, seed) in &files {
        for i in 0..per_file {
            let mut data = seed.clone();
            for _ in 0..=rng.below(MAX_STACKED_MUTATIONS) {
                mutate(&mut rng, &mut data, &files);
            }
            run(target, &data, &format!("mutation {i} of {file}"), &f)?;
        }
    }
    Ok(())
}

/// One random mutation of `data`, libFuzzer's kinds in small: a bit
/// flipped, a byte or a whole 4- or 8-byte field set to an edge value, a
/// truncation, an extension, a splice with another corpus file
/// (`others`), a run duplicated or dropped.
pub fn mutate(rng: &mut SplitMix64, data: &mut Vec<u8>, others: &[(String, Vec<u8>)]) {
    let len = data.len();
    match rng.below(7) {
        0 if len > 0 => {
            let at = rng.below(len);
            data[at] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let at = rng.below(len);
            data[at] = INTERESTING_BYTES[rng.below(INTERESTING_BYTES.len())];
        }
        2 if len >= 8 => {
            let width = if rng.below(2) == 0 { 4 } else { 8 };
            let value = match rng.below(4) {
                0 => 0,
                1 => u64::MAX,
                2 => 1 << rng.below(64),
                _ => rng.next_u64(),
            };
            let at = rng.below(len - width + 1);
            data[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
        }
        3 => data.truncate(rng.below(len + 1)),
        4 => {
            let n = rng.below(MAX_EXTENSION) + 1;
            if rng.below(2) == 0 {
                data.resize(len + n, 0);
            } else {
                data.extend(rng.bytes(n));
            }
        }
        5 if !others.is_empty() => {
            // Keep a prefix, continue with another file's tail.
            let (_, other) = &others[rng.below(others.len())];
            let cut = rng.below(len + 1).min(other.len());
            data.truncate(cut);
            data.extend_from_slice(&other[cut..]);
        }
        _ if len > 0 => {
            let at = rng.below(len);
            let n = (rng.below(16) + 1).min(len - at);
            if rng.below(2) == 0 {
                let run: Vec<u8> = data[at..at + n].to_vec();
                data.splice(at..at, run);
            } else {
                data.drain(at..at + n);
            }
        }
        _ => data.push(rng.next_u64() as u8),
    }
}

/// The three tests of a fuzz target that returns a verdict, for its
/// crate's `tests/corpus.rs`: the corpus files are held to their names
/// ([`check_verdicts`]), and `$random` random inputs and `$mutations`
/// mutated copies of each corpus file never panic.
///
/// ```ignore
/// lfs_e2e::verdict_corpus_tests!(
///     "fsd_toml", fsd::targets::fsd_toml, fsd::targets::error_kind,
///     fsd::targets::ERROR_KINDS, random: 5_000, mutations: 500
/// );
/// ```
#[macro_export]
macro_rules! verdict_corpus_tests {
    ($target:expr, $f:path, $kind:path, $kinds:expr, random: $random:expr, mutations: $mutations:expr $(,)?) => {
        #[test]
        fn corpus_files_are_accepted_or_rejected_as_their_names_say() {
            $crate::fuzz_corpus::assert_none(&$crate::fuzz_corpus::check_verdicts(
                $target, $f, $kind, $kinds,
            ));
        }

        #[test]
        fn random_inputs_never_panic() {
            $crate::fuzz_corpus::random_inputs($target, $random, $f)
                .unwrap_or_else(|e| panic!("{e}"));
        }

        #[test]
        fn mutated_corpus_never_panics() {
            $crate::fuzz_corpus::mutations($target, $mutations, $f)
                .unwrap_or_else(|e| panic!("{e}"));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_caught_named_and_saved() {
        let e = run("unit", b"abc", "input 1", |_| panic!("boom")).unwrap_err();
        assert!(
            e.starts_with("unit: panicked on input 1 (3 bytes, saved to "),
            "{e}"
        );
        assert!(e.ends_with(": boom"), "{e}");
        assert_eq!(run("unit", b"abc", "input 2", |d| d.len()), Ok(3));
    }

    #[test]
    fn mutations_stay_in_bounds() {
        let others = vec![("x".to_string(), b"0123456789".to_vec())];
        let mut rng = SplitMix64(1);
        for _ in 0..10_000 {
            let len = rng.below(12);
            let mut d = rng.bytes(len);
            mutate(&mut rng, &mut d, &others);
            assert!(d.len() <= 12 + MAX_EXTENSION + 16);
        }
    }
}
