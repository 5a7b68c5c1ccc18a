//! The fuzz entry point of fsd's configuration parser, shared by
//! cargo-fuzz (`fuzz/fuzz_targets/fsd_toml.rs`) and the ordinary tests
//! (`fsd/tests/corpus.rs` runs it over the committed corpus in
//! `fuzz/corpus/fsd_toml/`, random inputs and mutations).
//!
//! The input is the bytes of a configuration file, as [`config::load`]
//! would read them: text that is not UTF-8 is rejected as reading it
//! would be, anything else goes to [`config::parse`]. Rejecting the input
//! is fine; panicking is a bug.
//!
//! What the parser returns is also checked, and the `assert!`s below are
//! the only way the target panics on purpose: an accepted file gives
//! values inside the documented limits (fsd(8)), and a rejected one an
//! error that names the file, a line inside the file, and a key (one of
//! [`config::KEYS`] for a bad value, the unknown key otherwise) unless
//! the TOML itself is broken.

use std::path::Path;

use crate::config::{self, Config, ConfigError};

/// The name errors carry for the fuzzed file.
pub const FILE: &str = "/etc/lfs/fsd.toml";

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
/// `bad-<kind>-*` in `fuzz/corpus/fsd_toml/` must be rejected with an
/// error of that kind, a file named `good-*` accepted.
pub fn error_kind(err: &TargetError) -> &'static str {
    match err {
        TargetError::Utf8(_) => "utf8",
        TargetError::Config(e) => match &e.key {
            None => "toml",
            Some(k) if config::KEYS.contains(&k.as_str()) => "value",
            Some(_) => "key",
        },
    }
}

/// Every kind [`error_kind`] can return.
pub const ERROR_KINDS: &[&str] = &["utf8", "toml", "key", "value"];

/// Parses `data` as fsd.toml and checks what comes back (see the module
/// doc).
pub fn fsd_toml(data: &[u8]) -> Result<(), TargetError> {
    let text = std::str::from_utf8(data).map_err(TargetError::Utf8)?;
    match config::parse(text, Path::new(FILE)) {
        Ok(c) => {
            check_config(&c);
            Ok(())
        }
        Err(e) => {
            check_error(text, &e);
            Err(TargetError::Config(e))
        }
    }
}

fn check_config(c: &Config) {
    assert!(
        (config::MIN_CHECKPOINT_INTERVAL..=config::MAX_CHECKPOINT_INTERVAL)
            .contains(&c.checkpoint_interval),
        "accepted checkpoint_interval {:?}",
        c.checkpoint_interval
    );
    assert!(
        c.dirty_limit >= config::MIN_DIRTY_LIMIT,
        "accepted dirty_limit {}",
        c.dirty_limit
    );
    assert!(
        c.space_wait <= config::MAX_SPACE_WAIT,
        "accepted space_wait {:?}",
        c.space_wait
    );
    assert!(
        (1..=config::MAX_THREADS).contains(&c.threads),
        "accepted threads {}",
        c.threads
    );
    if let Some(socket) = &c.socket {
        assert!(
            config::validate_socket_path(socket).is_ok(),
            "accepted socket {}",
            socket.display()
        );
    }
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
    if e.key.is_some() {
        assert!(!e.reason.is_empty(), "error without a reason: {shown}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_and_kinds() {
        assert!(fsd_toml(b"").is_ok());
        assert!(fsd_toml(b"threads = 8\nlog_level = \"debug\"\n").is_ok());
        let kind = |data: &[u8]| error_kind(&fsd_toml(data).unwrap_err());
        assert_eq!(kind(b"\xff"), "utf8");
        assert_eq!(kind(b"threads = "), "toml");
        assert_eq!(kind(b"thread = 4"), "key");
        assert_eq!(kind(b"threads = 0"), "value");
        assert_eq!(kind(b"[threads]\nx = 1"), "value");
    }

    #[test]
    #[should_panic(expected = "line 3 of a 2-line file")]
    fn the_oracle_catches_a_line_past_the_end() {
        check_error(
            "a\nb",
            &ConfigError {
                file: Some(FILE.into()),
                line: Some(3),
                key: None,
                reason: "x".into(),
            },
        );
    }
}
