//! The `cleanerd_conf` fuzz target (`cleanerd::targets::cleanerd_conf`)
//! as an ordinary test: over the committed corpus in
//! `fuzz/corpus/cleanerd_conf/` (each file accepted or rejected as its
//! name says), over random inputs and over mutated copies of the corpus,
//! from a fixed seed. The target panics only if the parser or its oracle
//! does; the failure names the input and saves it. The corpus is written
//! by `fuzz/examples/gen_corpus.rs`.

lfs_e2e::verdict_corpus_tests!(
    "cleanerd_conf",
    cleanerd::targets::cleanerd_conf,
    cleanerd::targets::error_kind,
    cleanerd::targets::ERROR_KINDS,
    random: 5_000,
    mutations: 500,
);
