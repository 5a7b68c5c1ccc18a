//! The fuzz entry point of cleanerd's configuration parser, shared by
//! cargo-fuzz (`fuzz/fuzz_targets/cleanerd_conf.rs`) and the ordinary
//! tests (`cleanerd/tests/corpus.rs` runs it over the committed corpus in
//! `fuzz/corpus/cleanerd_conf/`, random inputs and mutations).
//!
//! The input is the bytes of a configuration file, as [`config::load`]
//! would read them: text that is not UTF-8 is rejected as reading it
//! would be, anything else goes to [`config::parse`]; an accepted file is
//! then resolved ([`Config::resolve`]) against every geometry in
//! [`GEOMETRIES`], as the daemon does after each GET_SUSTAT. Rejecting
//! the input, or failing to resolve it, is fine; panicking is a bug.
//!
//! What comes back is also checked, and the `assert!`s below are the only
//! way the target panics on purpose: resolved parameters are inside the
//! limits the daemon relies on (min ≤ max clean segments, 1 to
//! [`MAX_SEGMENTS_PER_CLEAN`] segments a pass, at most a segment's blocks
//! of reclaimable blocks), and every error names the file, a line inside
//! it, and a key (one of [`KEYS`] for a bad value, the unknown key
//! otherwise) unless the TOML itself is broken; a resolving error names
//! the line its key was set on.

use std::path::Path;

use crate::config::{
    self, protection_seconds, Config, ConfigError, Geometry, Params, KEYS, MAX_SEGMENTS_PER_CLEAN,
};

/// The name errors carry for the fuzzed file.
pub const FILE: &str = "/etc/lfs/cleanerd.conf";

/// The geometries every accepted file is resolved against: the smallest
/// filesystem mkfs.lfs makes (8 segments of 16 1-KiB blocks), the
/// default one (8 MiB segments of 4 KiB blocks) at 1 TiB, and the
/// extremes a GET_SUSTAT reply can carry, which the daemon must survive
/// whatever fsd says.
pub const GEOMETRIES: &[Geometry] = &[
    Geometry {
        nsegs: 8,
        blocks_per_segment: 16,
        block_size: 1024,
    },
    Geometry {
        nsegs: 131_072,
        blocks_per_segment: 2048,
        block_size: 4096,
    },
    Geometry {
        nsegs: 0,
        blocks_per_segment: 0,
        block_size: 0,
    },
    Geometry {
        nsegs: u64::MAX,
        blocks_per_segment: u32::MAX,
        block_size: u32::MAX,
    },
];

/// What the target rejected.
#[derive(Debug)]
#[non_exhaustive]
pub enum TargetError {
    /// The bytes are not UTF-8.
    Utf8(std::str::Utf8Error),
    /// The parser's verdict.
    Config(ConfigError),
}

/// The name the corpus uses for the kind of `err`: a file named
/// `bad-<kind>-*` in `fuzz/corpus/cleanerd_conf/` must be rejected with
/// an error of that kind, a file named `good-*` accepted.
pub fn error_kind(err: &TargetError) -> &'static str {
    match err {
        TargetError::Utf8(_) => "utf8",
        TargetError::Config(e) => match &e.key {
            None => "toml",
            Some(k) if KEYS.contains(&k.as_str()) => "value",
            Some(_) => "key",
        },
    }
}

/// Every kind [`error_kind`] can return.
pub const ERROR_KINDS: &[&str] = &["utf8", "toml", "key", "value"];

/// Parses `data` as cleanerd.conf, resolves what it accepts against
/// [`GEOMETRIES`] and checks what comes back (see the module doc). The
/// verdict is the parser's.
pub fn cleanerd_conf(data: &[u8]) -> Result<(), TargetError> {
    let text = std::str::from_utf8(data).map_err(TargetError::Utf8)?;
    let c = match config::parse(text, Path::new(FILE)) {
        Ok(c) => c,
        Err(e) => {
            check_error(text, &e);
            // Keys carry spans: a bad key or value is always placed.
            assert!(
                e.key.is_none() || e.line.is_some(),
                "error without a line: {e}"
            );
            return Err(TargetError::Config(e));
        }
    };
    // The reload log and `fsctl clean --status` show these.
    assert_eq!(c.values().len(), KEYS.len());
    let _ = c.changed_keys(&Config::default());
    for g in GEOMETRIES {
        match c.resolve(g) {
            Ok(p) => check_params(&c, g, &p),
            Err(e) => {
                check_error(text, &e);
                let key = e.key.as_deref().expect("a resolving error names its key");
                let set = c.origin.lines.iter().find(|(k, _)| **k == key);
                assert_eq!(
                    e.line,
                    set.map(|(_, line)| *line),
                    "resolving error not at the line its key was set on: {e}"
                );
            }
        }
    }
    Ok(())
}

fn check_params(c: &Config, g: &Geometry, p: &Params) {
    let shown = format!("{g:?}: {p:?}");
    assert!(p.min_clean <= p.max_clean, "{shown}");
    for n in [p.nsegments, p.mc_nsegments] {
        assert!(
            (1..=MAX_SEGMENTS_PER_CLEAN).contains(&(n as u64)),
            "{shown}"
        );
    }
    let bps = u64::from(g.blocks_per_segment);
    assert!(
        p.min_reclaimable <= bps && p.mc_min_reclaimable <= bps,
        "{shown}"
    );
    assert_eq!(p.protection_s, protection_seconds(c.protection_period));
    assert!(
        p.cleaning_interval >= config::MIN_INTERVAL && p.retry_interval <= config::MAX_INTERVAL,
        "{shown}"
    );
}

fn check_error(text: &str, e: &ConfigError) {
    let shown = e.to_string();
    assert!(
        shown.starts_with(FILE),
        "error does not name the file: {shown}"
    );
    // A line past the last is where an unterminated construct ends.
    let lines = text.split('\n').count();
    if let Some(line) = e.line {
        assert!(
            (1..=lines).contains(&line),
            "error at line {line} of a {lines}-line file: {shown}"
        );
    }
    assert!(!e.reason.is_empty(), "error without a reason: {shown}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_and_kinds() {
        assert!(cleanerd_conf(b"").is_ok());
        assert!(
            cleanerd_conf(b"selection_policy = \"greedy\"\nmin_clean_segments = \"5%\"\n").is_ok()
        );
        let kind = |data: &[u8]| error_kind(&cleanerd_conf(data).unwrap_err());
        assert_eq!(kind(b"\xff"), "utf8");
        assert_eq!(kind(b"retry_interval = "), "toml");
        assert_eq!(kind(b"retry = 4"), "key");
        assert_eq!(kind(b"nsegments_per_clean = 0"), "value");
    }

    #[test]
    fn accepted_files_may_fail_to_resolve_on_some_geometry() {
        // 1% of 8 segments is one; of 131,072 it is 1,311, more than a
        // pass may clean.
        let text = "nsegments_per_clean = \"1%\"\n";
        assert!(cleanerd_conf(text.as_bytes()).is_ok());
        let c = config::parse(text, Path::new(FILE)).unwrap();
        assert!(c.resolve(&GEOMETRIES[0]).is_ok());
        assert!(c.resolve(&GEOMETRIES[1]).is_err());
    }
}
