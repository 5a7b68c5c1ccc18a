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

use lfs_e2e::fuzz_corpus::{assert_none, check_verdicts, corpus, mutations, run};
use lfs_e2e::rng::SplitMix64;
use lfs_proto::codes;
use lfs_proto::targets::{error_kind, proto_frame, ERROR_KINDS};

const TARGET: &str = "proto_frame";
/// Random inputs.
const RANDOM_INPUTS: usize = 20_000;
/// Mutated copies per corpus file.
const MUTATIONS_PER_FILE: usize = 2_000;

#[test]
fn corpus_files_decode_as_their_names_say() {
    assert_none(&check_verdicts(
        TARGET,
        proto_frame,
        error_kind,
        ERROR_KINDS,
    ));
}

#[test]
fn the_corpus_reaches_every_served_code_and_every_rejection_kind() {
    let files = corpus(TARGET);
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
    let longest = corpus(TARGET)
        .iter()
        .map(|(_, d)| d.len())
        .max()
        .unwrap_or(0);
    let mut rng = SplitMix64(0x70_726f_746f);
    for i in 0..RANDOM_INPUTS {
        let len = rng.below(2 * longest + 1);
        let data = if i % 2 == 0 {
            rng.bytes(len)
        } else {
            // A valid header start, so that decoding gets past the magic.
            let mut v = b"LFSP\x01\x00".to_vec();
            v.extend(rng.bytes(len));
            v
        };
        if let Err(e) = run(TARGET, &data, &format!("random input {i}"), proto_frame) {
            panic!("{e}");
        }
    }
}

#[test]
fn mutated_corpus_never_panics() {
    mutations(TARGET, MUTATIONS_PER_FILE, proto_frame).unwrap_or_else(|e| panic!("{e}"));
}
