//! The `proto_frame` fuzz target (`lfs_proto::targets::proto_frame`) as an
//! ordinary test, as `lfs/tests/decoders.rs` does for the engine's
//! decoders: over the committed corpus in `fuzz/corpus/proto_frame/`, over
//! random inputs and over mutated copies of the corpus, all from a
//! fixed-seed PRNG so that a failure reproduces. The target panics only if
//! a decoder panics or its re-encoding oracle finds an asymmetry; either
//! fails the test, which names the input and saves it.
//!
//! The corpus must stay meaningful: at least one `good-*` file (accepted,
//! so the oracle runs) and one `bad-<kind>-*` file (rejected with an error
//! of that kind, `targets::error_kind`), and no file named otherwise.
//! `cargo run -p lfs-proto --example gen_corpus` writes it.

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use lfs_proto::codes;
use lfs_proto::targets::{error_kind, proto_frame, TargetError, ERROR_KINDS};

const TARGET: &str = "proto_frame";
/// Random inputs.
const RANDOM_INPUTS: usize = 20_000;
/// Mutated copies per corpus file.
const MUTATIONS_PER_FILE: usize = 2_000;
/// Most mutations stacked on one copy.
const MAX_STACKED_MUTATIONS: u64 = 4;
/// Most bytes a mutation appends.
const MAX_EXTENSION: u64 = 64;
/// Byte values on the edges of fields.
const INTERESTING_BYTES: [u8; 6] = [0, 1, 0x7f, 0x80, 0xfe, 0xff];

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(TARGET)
}

fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir();
    let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (run the gen_corpus example)", dir.display()))
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            let data = fs::read(&path).unwrap();
            (name, data)
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: empty corpus", dir.display());
    files
}

/// The target's verdict on `data`, or, if it panics, a message naming the
/// input, which is saved under the test's scratch directory.
fn run(data: &[u8], what: &str) -> Result<Result<(), TargetError>, String> {
    panic::catch_unwind(AssertUnwindSafe(|| proto_frame(data))).map_err(|cause| {
        let msg = cause
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| cause.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("decoder-failures");
        let path = dir.join(format!("{TARGET}-{}", what.replace([' ', '/'], "_")));
        let saved = fs::create_dir_all(&dir).and_then(|()| fs::write(&path, data));
        let place = match saved {
            Ok(()) => path.display().to_string(),
            Err(e) => format!("(not saved: {e})"),
        };
        format!(
            "{TARGET}: panicked on {what} ({} bytes, saved to {place}): {msg}",
            data.len()
        )
    })
}

#[test]
fn corpus_files_decode_as_their_names_say() {
    let mut failures = Vec::new();
    let (mut good, mut bad) = (0, 0);
    for (file, data) in corpus() {
        let verdict = match run(&data, &format!("corpus file {file}")) {
            Ok(v) => v,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        let mut parts = file.split('-');
        match (parts.next(), parts.next(), verdict) {
            (Some("good"), Some(_), Ok(())) => good += 1,
            (Some("bad"), Some(kind), Err(e)) if error_kind(&e) == kind => bad += 1,
            (Some("good" | "bad"), Some(_), v) => {
                failures.push(format!("{file}: decodes to {v:?}"))
            }
            _ => failures.push(format!(
                "{file}: not named good-* or bad-<kind>-* (kinds: {})",
                ERROR_KINDS.join(", ")
            )),
        }
    }
    if good == 0 || bad == 0 {
        failures.push(format!(
            "corpus needs a good-* and a bad-* file, has {good} good and {bad} bad"
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_corpus_reaches_every_served_code_and_every_rejection_kind() {
    let files = corpus();
    let all: Vec<u8> = files
        .iter()
        .filter(|(n, _)| n.starts_with("good-"))
        .flat_map(|(_, d)| d.clone())
        .collect();
    let mut rest = &all[..];
    let mut seen = std::collections::BTreeSet::new();
    while let Ok((f, used)) = lfs_proto::decode_frame(rest) {
        seen.insert((f.code, f.kind == lfs_proto::Kind::Request));
        rest = &rest[used..];
    }
    for c in codes::ALL.iter().filter(|c| c.served) {
        assert!(
            seen.contains(&(c.code, true)),
            "no good request for {}",
            c.name
        );
        assert!(
            seen.contains(&(c.code, false)),
            "no good reply for {}",
            c.name
        );
    }
    for kind in ERROR_KINDS.iter().filter(|k| !matches!(**k, "eof" | "io")) {
        assert!(
            files
                .iter()
                .any(|(n, _)| n.starts_with(&format!("bad-{kind}-"))),
            "no bad-{kind}-* file"
        );
    }
}

#[test]
fn random_inputs_never_panic() {
    let longest = corpus().iter().map(|(_, d)| d.len()).max().unwrap_or(0);
    let mut rng = Rng(0x70_726f_746f);
    for i in 0..RANDOM_INPUTS {
        let len = rng.index(2 * longest + 1);
        let data = if i % 2 == 0 {
            rng.bytes(len)
        } else {
            // A valid header start, so that decoding gets past the magic.
            let mut v = b"LFSP\x01\x00".to_vec();
            v.extend(rng.bytes(len));
            v
        };
        if let Err(e) = run(&data, &format!("random input {i}")) {
            panic!("{e}");
        }
    }
}

/// One random mutation of `data`; `others` are corpus files, for splicing.
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
            let width = if rng.below(2) == 0 { 4 } else { 8 };
            let value = match rng.below(4) {
                0 => 0,
                1 => u64::MAX,
                2 => 1 << rng.below(64),
                _ => rng.next(),
            };
            let at = rng.index(len - width + 1);
            data[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
        }
        3 => data.truncate(rng.index(len + 1)),
        4 => {
            let n = rng.below(MAX_EXTENSION) as usize + 1;
            let extra = rng.bytes(n);
            data.extend(extra);
        }
        5 => {
            let (_, other) = &others[rng.index(others.len())];
            let cut = rng.index(len + 1).min(other.len());
            data.truncate(cut);
            data.extend_from_slice(&other[cut..]);
        }
        _ if len > 0 => {
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
    let files = corpus();
    let mut rng = Rng(0x6d75_7461_7465);
    for (file, seed) in &files {
        for i in 0..MUTATIONS_PER_FILE {
            let mut data = seed.clone();
            for _ in 0..=rng.below(MAX_STACKED_MUTATIONS) {
                mutate(&mut rng, &mut data, &files);
            }
            if let Err(e) = run(&data, &format!("mutation {i} of {file}")) {
                panic!("{e}");
            }
        }
    }
}
