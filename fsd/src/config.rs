//! fsd's configuration file: its keys, their defaults, parsing and
//! validation.
//!
//! The file is TOML with five optional top-level keys (see fsd(8) and the
//! shipped, commented `conf/fsd.toml`). Every default is a named constant
//! here, and a test checks that `conf/fsd.toml` shows the same values.
//!
//! Rules, and why:
//! * An unknown key is an error, not a warning: a misspelt key silently
//!   ignored is a setting the administrator thinks is in force.
//! * Every error names the file, the line when known, the key and the
//!   reason, so it can be fixed without reading the code.
//! * Parsing never touches the device or the mount: it is also what SIGHUP
//!   runs, and a bad file must leave the running configuration alone.

use std::path::{Path, PathBuf};
use std::time::Duration;

use log::LevelFilter;

/// The file read when `--config` is not given, if it exists.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/lfs/fsd.toml";

/// Seconds between timed checkpoints.
pub const DEFAULT_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(5);
/// Shortest accepted checkpoint interval: below it the superblock would be
/// rewritten faster than it is useful.
pub const MIN_CHECKPOINT_INTERVAL: Duration = Duration::from_millis(100);
/// Longest accepted checkpoint interval (one day).
pub const MAX_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(24 * 3600);

/// Bytes of dirty file data the engine may hold before writers are
/// throttled: the engine's own default.
pub const DEFAULT_DIRTY_LIMIT: u64 = lfs::fs::DEFAULT_DIRTY_LIMIT;
/// Smallest accepted dirty limit: below one MiB every write would stall.
pub const MIN_DIRTY_LIMIT: u64 = 1 << 20;

/// How long a change that finds no space waits for a cleaner at work: the
/// engine's own default.
pub const DEFAULT_SPACE_WAIT: Duration = lfs::fs::DEFAULT_SPACE_WAIT;
/// Longest accepted wait for space (an hour).
pub const MAX_SPACE_WAIT: Duration = Duration::from_secs(3600);

/// FUSE request threads. More than the CPU count is useful: a thread
/// waiting for an fsync's flush serves nothing else meanwhile.
pub const DEFAULT_THREADS: usize = 4;
/// Most FUSE request threads accepted.
pub const MAX_THREADS: usize = 64;

/// Log level when neither the file, the command line nor `RUST_LOG` says.
pub const DEFAULT_LOG_LEVEL: LevelFilter = LevelFilter::Info;

#[cfg(test)]
pub use lfs_proto::path::SOCKET_PATH_MAX;
pub use lfs_proto::path::{default_socket_path, validate_socket_path};

/// The keys, as spelt in the file.
pub const KEY_CHECKPOINT_INTERVAL: &str = "checkpoint_interval";
/// See [`KEY_CHECKPOINT_INTERVAL`].
pub const KEY_DIRTY_LIMIT: &str = "dirty_limit";
/// See [`KEY_CHECKPOINT_INTERVAL`].
pub const KEY_SPACE_WAIT: &str = "space_wait";
/// See [`KEY_CHECKPOINT_INTERVAL`].
pub const KEY_THREADS: &str = "threads";
/// See [`KEY_CHECKPOINT_INTERVAL`].
pub const KEY_SOCKET: &str = "socket";
/// See [`KEY_CHECKPOINT_INTERVAL`].
pub const KEY_LOG_LEVEL: &str = "log_level";
/// Every key, in the order of the documentation.
pub const KEYS: &[&str] = &[
    KEY_CHECKPOINT_INTERVAL,
    KEY_DIRTY_LIMIT,
    KEY_SPACE_WAIT,
    KEY_THREADS,
    KEY_SOCKET,
    KEY_LOG_LEVEL,
];

/// The log levels `log_level` and `--log-level` accept.
pub const LOG_LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];

/// The settings of one fsd.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Time between timed checkpoints.
    pub checkpoint_interval: Duration,
    /// Dirty data limit in bytes.
    pub dirty_limit: u64,
    /// How long a change out of space waits for a cleaner at work.
    pub space_wait: Duration,
    /// FUSE request threads.
    pub threads: usize,
    /// The control socket path; `None` means the default for the device.
    pub socket: Option<PathBuf>,
    /// The log level.
    pub log_level: LevelFilter,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            checkpoint_interval: DEFAULT_CHECKPOINT_INTERVAL,
            dirty_limit: DEFAULT_DIRTY_LIMIT,
            space_wait: DEFAULT_SPACE_WAIT,
            threads: DEFAULT_THREADS,
            socket: None,
            log_level: DEFAULT_LOG_LEVEL,
        }
    }
}

pub use lfs_common::config::{ConfigError, Source};

/// The system-wide file, read if it exists when `--config` is not given.
pub fn system() -> Source {
    Source::System(DEFAULT_CONFIG_PATH)
}

/// Reads the configuration `source` names, and the file it came from
/// (`None`: the built-in defaults). Rereading (SIGHUP) uses the same rule.
pub fn load(source: &Source) -> Result<(Config, Option<PathBuf>), ConfigError> {
    match source.read()? {
        Some((path, text)) => parse(&text, &path).map(|c| (c, Some(path))),
        None => Ok((Config::default(), None)),
    }
}

/// Parses the text of a configuration file; `file` names it in errors.
pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
    let error = |line: Option<usize>, key: Option<&str>, reason: String| {
        ConfigError::in_file(file, line, key, reason)
    };
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        if let Some((line, key)) = lfs_common::config::nilfs_style_line(text) {
            return error(
                Some(line),
                None,
                lfs_common::config::nilfs_style_reason(&key),
            );
        }
        let line = e.span().map(|s| lfs_common::config::line_of(text, s.start));
        error(line, None, format!("not valid TOML: {}", e.message()))
    })?;
    // In file order, so the first error reported is the first in the file.
    let mut entries: Vec<_> = table
        .iter()
        .map(|(key, value)| (line_of_key(text, key), key, value))
        .collect();
    entries.sort_by_key(|&(line, ..)| line);
    let mut config = Config::default();
    for (line, key, value) in entries {
        let bad = |reason: String| error(line, Some(key), reason);
        match key.as_str() {
            KEY_CHECKPOINT_INTERVAL => {
                config.checkpoint_interval = checkpoint_interval(value).map_err(bad)?
            }
            KEY_DIRTY_LIMIT => config.dirty_limit = dirty_limit(value).map_err(bad)?,
            KEY_SPACE_WAIT => {
                config.space_wait = seconds(value, Duration::ZERO, MAX_SPACE_WAIT).map_err(bad)?
            }
            KEY_THREADS => config.threads = threads(value).map_err(bad)?,
            KEY_SOCKET => {
                let path = PathBuf::from(string(value).map_err(bad)?.to_owned());
                validate_socket_path(&path).map_err(bad)?;
                config.socket = Some(path);
            }
            KEY_LOG_LEVEL => {
                config.log_level = string(value).and_then(parse_log_level).map_err(bad)?
            }
            _ => {
                return Err(error(
                    line,
                    Some(key),
                    format!("unknown key (the keys are {})", KEYS.join(", ")),
                ))
            }
        }
    }
    Ok(config)
}

/// The line a top-level `key` is set on: the first line that starts with
/// it, bare or quoted, followed by `=`, or that opens a table of that name.
/// (The table API keeps no spans; top-level keys are unique, so the first
/// match is the line.)
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    let quoted = format!("\"{key}\"");
    text.lines()
        .position(|line| {
            let line = line.trim_start();
            [key, quoted.as_str()].iter().any(|k| {
                line.strip_prefix(k)
                    .is_some_and(|rest| rest.trim_start().starts_with(['=', '.']))
                    || line
                        .trim_start_matches('[')
                        .strip_prefix(k)
                        .is_some_and(|rest| rest.trim_start().starts_with([']', '.']))
                        && line.starts_with('[')
            })
        })
        .map(|i| i + 1)
}

fn type_name(value: &toml::Value) -> &'static str {
    value.type_str()
}

fn string(value: &toml::Value) -> Result<&str, String> {
    value
        .as_str()
        .ok_or_else(|| format!("must be a string, not {}", type_name(value)))
}

fn checkpoint_interval(value: &toml::Value) -> Result<Duration, String> {
    seconds(value, MIN_CHECKPOINT_INTERVAL, MAX_CHECKPOINT_INTERVAL)
}

/// A number of seconds (integer or decimal) from `min` to `max`.
fn seconds(value: &toml::Value, min: Duration, max: Duration) -> Result<Duration, String> {
    let secs = match value {
        toml::Value::Integer(n) => *n as f64,
        toml::Value::Float(x) => *x,
        other => {
            return Err(format!(
                "must be a number of seconds, not {}",
                type_name(other)
            ))
        }
    };
    let (min, max) = (min.as_secs_f64(), max.as_secs_f64());
    if !secs.is_finite() || secs < min || secs > max {
        return Err(format!(
            "{secs} seconds is out of range ({min} to {max} seconds)"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn dirty_limit(value: &toml::Value) -> Result<u64, String> {
    let bytes = match value {
        toml::Value::Integer(n) => u64::try_from(*n).map_err(|_| format!("{n} is negative"))?,
        toml::Value::String(s) => parse_size(s)?,
        other => {
            return Err(format!(
                "must be a byte count (integer) or a size string such as \"256M\", not {}",
                type_name(other)
            ))
        }
    };
    if bytes < MIN_DIRTY_LIMIT {
        return Err(format!(
            "{bytes} bytes is below the minimum of {MIN_DIRTY_LIMIT} bytes (1M)"
        ));
    }
    Ok(bytes)
}

fn threads(value: &toml::Value) -> Result<usize, String> {
    let n = value
        .as_integer()
        .ok_or_else(|| format!("must be an integer, not {}", type_name(value)))?;
    match usize::try_from(n) {
        Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
        _ => Err(format!("{n} is out of range (1 to {MAX_THREADS})")),
    }
}

/// Parses a log level name (case-insensitive).
pub fn parse_log_level(s: &str) -> Result<LevelFilter, String> {
    match s.to_ascii_lowercase().as_str() {
        "off" => Ok(LevelFilter::Off),
        "error" => Ok(LevelFilter::Error),
        "warn" => Ok(LevelFilter::Warn),
        "info" => Ok(LevelFilter::Info),
        "debug" => Ok(LevelFilter::Debug),
        "trace" => Ok(LevelFilter::Trace),
        _ => Err(format!(
            "unknown log level {s:?} (use one of {})",
            LOG_LEVELS.join(", ")
        )),
    }
}

pub use lfs_common::units::parse_size;

/// What a reload changed, by key.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Keys whose new value differs from the old.
    pub changed: Vec<&'static str>,
}

/// The keys whose values differ between `old` and `new`.
pub fn diff(old: &Config, new: &Config) -> Changes {
    let mut changed = Vec::new();
    if old.checkpoint_interval != new.checkpoint_interval {
        changed.push(KEY_CHECKPOINT_INTERVAL);
    }
    if old.dirty_limit != new.dirty_limit {
        changed.push(KEY_DIRTY_LIMIT);
    }
    if old.space_wait != new.space_wait {
        changed.push(KEY_SPACE_WAIT);
    }
    if old.threads != new.threads {
        changed.push(KEY_THREADS);
    }
    if old.socket != new.socket {
        changed.push(KEY_SOCKET);
    }
    if old.log_level != new.log_level {
        changed.push(KEY_LOG_LEVEL);
    }
    Changes { changed }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
