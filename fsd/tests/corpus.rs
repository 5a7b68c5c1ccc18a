//! The `fsd_toml` fuzz target (`fsd::targets::fsd_toml`) as an ordinary
//! test: over the committed corpus in `fuzz/corpus/fsd_toml/` (each file
//! accepted or rejected as its name says), over random inputs and over
//! mutated copies of the corpus, from a fixed seed. The target panics
//! only if the parser or its oracle does; the failure names the input
//! and saves it. The corpus is written by `fuzz/examples/gen_corpus.rs`.

lfs_e2e::verdict_corpus_tests!(
    "fsd_toml",
    fsd::targets::fsd_toml,
    fsd::targets::error_kind,
    fsd::targets::ERROR_KINDS,
    random: 5_000,
    mutations: 500,
);
