//! cleanerd's configuration file: its keys, their defaults, parsing and
//! validation (cleanerd.conf(5); the shipped `conf/cleanerd.conf` lists
//! every key at its default, and a test checks it against the constants
//! here).
//!
//! Rules, as for fsd's file, and why:
//! * An unknown key is an error: a misspelt key silently ignored is a
//!   setting the administrator thinks is in force.
//! * Every error names the file, the line, the key and the reason.
//! * Amounts (segment and block counts) may be percentages or bytes, so
//!   they only become counts once the filesystem's geometry is known:
//!   [`Config::resolve`] does that after connecting to fsd, and its
//!   errors name the file, line and key as well.
//! * Parsing touches nothing but the file: it is also what SIGHUP runs,
//!   and a bad file must leave the running configuration alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lfs_proto::msg::CleanSegments;
use log::LevelFilter;
use toml::Spanned;

use crate::policy::Policy;
use crate::units::{parse_amount, parse_duration, seconds, Amount};
use lfs_common::config::line_of;

/// The file read when `-c` is not given, if it exists.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/lfs/cleanerd.conf";

/// Checkpoints younger than this are kept by cleaning (nilfs's default).
pub const DEFAULT_PROTECTION_PERIOD: Duration = Duration::from_secs(3600);
/// Below this many clean segments, clean fast ("mc" mode).
pub const DEFAULT_MIN_CLEAN_SEGMENTS: Amount = Amount::Percent(10.0);
/// Above this many clean segments, stop cleaning.
pub const DEFAULT_MAX_CLEAN_SEGMENTS: Amount = Amount::Percent(20.0);
/// How often the clean-segment count is checked while idle.
pub const DEFAULT_CLEAN_CHECK_INTERVAL: Duration = Duration::from_secs(10);
/// The victim selection policy.
pub const DEFAULT_SELECTION_POLICY: Policy = Policy::Timestamp;
/// Segments cleaned per pass at normal speed.
pub const DEFAULT_NSEGMENTS_PER_CLEAN: Amount = Amount::Count(2);
/// Segments cleaned per pass in mc mode.
pub const DEFAULT_MC_NSEGMENTS_PER_CLEAN: Amount = Amount::Count(4);
/// Time between passes at normal speed.
pub const DEFAULT_CLEANING_INTERVAL: Duration = Duration::from_secs(5);
/// Time between passes in mc mode.
pub const DEFAULT_MC_CLEANING_INTERVAL: Duration = Duration::from_secs(1);
/// Wait after a deferred pass, and longest back-off after errors.
pub const DEFAULT_RETRY_INTERVAL: Duration = Duration::from_secs(60);
/// Least reclaimable blocks per chosen segment worth a pass (of the
/// blocks per segment when a percentage).
pub const DEFAULT_MIN_RECLAIMABLE_BLOCKS: Amount = Amount::Percent(10.0);
/// The same in mc mode.
pub const DEFAULT_MC_MIN_RECLAIMABLE_BLOCKS: Amount = Amount::Percent(1.0);
/// Whether deferred segments are marked young with SET_SUINFO. nilfs
/// defaults to false because old kernels lacked the ioctl; lfs's protocol
/// has it from version 1, and without it the timestamp policy picks the
/// same unrewarding oldest segments every pass and never reaches the
/// others (cleanerd.conf(5) explains).
pub const DEFAULT_USE_SET_SUINFO: bool = true;
/// The log level.
pub const DEFAULT_LOG_PRIORITY: LevelFilter = LevelFilter::Info;
/// History yields to space: when space runs short, fsd deletes the oldest
/// plain checkpoints whatever their age (cleanerd.conf(5)).
pub const DEFAULT_STRICT_PROTECTION: bool = false;

/// Shortest accepted interval: a faster loop only burns CPU.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// Longest accepted interval or protection period for the intervals (one
/// day).
pub const MAX_INTERVAL: Duration = Duration::from_secs(86_400);
/// Longest protection period: fsd takes it as a u32 of seconds.
pub const MAX_PROTECTION_PERIOD: Duration = Duration::from_secs(u32::MAX as u64);
/// Most segments one pass may name (a CLEAN_SEGMENTS request's limit).
pub const MAX_SEGMENTS_PER_CLEAN: u64 = CleanSegments::MAX_SEGMENTS as u64;

/// The keys, as spelt in the file; cleanerd.conf(5) describes each.
pub mod key {
    pub const PROTECTION_PERIOD: &str = "protection_period";
    pub const STRICT_PROTECTION: &str = "strict_protection";
    pub const MIN_CLEAN_SEGMENTS: &str = "min_clean_segments";
    pub const MAX_CLEAN_SEGMENTS: &str = "max_clean_segments";
    pub const CLEAN_CHECK_INTERVAL: &str = "clean_check_interval";
    pub const SELECTION_POLICY: &str = "selection_policy";
    pub const NSEGMENTS_PER_CLEAN: &str = "nsegments_per_clean";
    pub const MC_NSEGMENTS_PER_CLEAN: &str = "mc_nsegments_per_clean";
    pub const CLEANING_INTERVAL: &str = "cleaning_interval";
    pub const MC_CLEANING_INTERVAL: &str = "mc_cleaning_interval";
    pub const RETRY_INTERVAL: &str = "retry_interval";
    pub const MIN_RECLAIMABLE_BLOCKS: &str = "min_reclaimable_blocks";
    pub const MC_MIN_RECLAIMABLE_BLOCKS: &str = "mc_min_reclaimable_blocks";
    pub const USE_SET_SUINFO: &str = "use_set_suinfo";
    pub const LOG_PRIORITY: &str = "log_priority";
}

/// Every key, in the order of the documentation.
pub const KEYS: &[&str] = &[
    key::PROTECTION_PERIOD,
    key::STRICT_PROTECTION,
    key::MIN_CLEAN_SEGMENTS,
    key::MAX_CLEAN_SEGMENTS,
    key::CLEAN_CHECK_INTERVAL,
    key::SELECTION_POLICY,
    key::NSEGMENTS_PER_CLEAN,
    key::MC_NSEGMENTS_PER_CLEAN,
    key::CLEANING_INTERVAL,
    key::MC_CLEANING_INTERVAL,
    key::RETRY_INTERVAL,
    key::MIN_RECLAIMABLE_BLOCKS,
    key::MC_MIN_RECLAIMABLE_BLOCKS,
    key::USE_SET_SUINFO,
    key::LOG_PRIORITY,
];

/// The names `log_priority` accepts: syslog's priorities, which map onto
/// the log levels (emerg, alert, crit and err to error; notice to info),
/// and the log crate's own names.
pub const LOG_PRIORITIES: &[&str] = &[
    "emerg", "alert", "crit", "err", "error", "warning", "warn", "notice", "info", "debug",
    "trace", "off",
];

/// The settings, as written (amounts not yet resolved).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Checkpoints younger than this are kept.
    pub protection_period: Duration,
    /// Keep them even when space runs short (NoSpace rather than lose
    /// history).
    pub strict_protection: bool,
    /// Below this, mc mode.
    pub min_clean_segments: Amount,
    /// At or above this, idle.
    pub max_clean_segments: Amount,
    /// Check interval while idle.
    pub clean_check_interval: Duration,
    /// Victim selection.
    pub selection_policy: Policy,
    /// Segments per pass at normal speed.
    pub nsegments_per_clean: Amount,
    /// Segments per pass in mc mode.
    pub mc_nsegments_per_clean: Amount,
    /// Time between passes at normal speed.
    pub cleaning_interval: Duration,
    /// Time between passes in mc mode.
    pub mc_cleaning_interval: Duration,
    /// Wait after a deferral; back-off cap.
    pub retry_interval: Duration,
    /// Deferral threshold per segment at normal speed.
    pub min_reclaimable_blocks: Amount,
    /// Deferral threshold per segment in mc mode.
    pub mc_min_reclaimable_blocks: Amount,
    /// Mark deferred segments young.
    pub use_set_suinfo: bool,
    /// Log level.
    pub log_priority: LevelFilter,
    /// Where each key was set, for errors found by [`Config::resolve`].
    pub origin: Origin,
}

/// The file and line of each key set in a file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// The file, `None` for the built-in defaults.
    pub file: Option<PathBuf>,
    /// Line of each key that was set.
    pub lines: BTreeMap<&'static str, usize>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            protection_period: DEFAULT_PROTECTION_PERIOD,
            strict_protection: DEFAULT_STRICT_PROTECTION,
            min_clean_segments: DEFAULT_MIN_CLEAN_SEGMENTS,
            max_clean_segments: DEFAULT_MAX_CLEAN_SEGMENTS,
            clean_check_interval: DEFAULT_CLEAN_CHECK_INTERVAL,
            selection_policy: DEFAULT_SELECTION_POLICY,
            nsegments_per_clean: DEFAULT_NSEGMENTS_PER_CLEAN,
            mc_nsegments_per_clean: DEFAULT_MC_NSEGMENTS_PER_CLEAN,
            cleaning_interval: DEFAULT_CLEANING_INTERVAL,
            mc_cleaning_interval: DEFAULT_MC_CLEANING_INTERVAL,
            retry_interval: DEFAULT_RETRY_INTERVAL,
            min_reclaimable_blocks: DEFAULT_MIN_RECLAIMABLE_BLOCKS,
            mc_min_reclaimable_blocks: DEFAULT_MC_MIN_RECLAIMABLE_BLOCKS,
            use_set_suinfo: DEFAULT_USE_SET_SUINFO,
            log_priority: DEFAULT_LOG_PRIORITY,
            origin: Origin::default(),
        }
    }
}

pub use lfs_common::config::{ConfigError, Source};

/// The system-wide file, read if it exists when `-c` is not given.
pub fn system() -> Source {
    Source::System(DEFAULT_CONFIG_PATH)
}

/// Reads the configuration `source` names (the built-in defaults if it
/// names none). Rereading (SIGHUP) uses the same rule.
pub fn load(source: &Source) -> Result<Config, ConfigError> {
    match source.read()? {
        Some((path, text)) => parse(&text, &path),
        None => Ok(Config::default()),
    }
}

/// Parses the text of a configuration file; `file` names it in errors.
pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
    let error = |line: Option<usize>, key: Option<&str>, reason: String| {
        ConfigError::in_file(file, line, key, reason)
    };
    let table: BTreeMap<Spanned<String>, Spanned<toml::Value>> =
        toml::from_str(text).map_err(|e| {
            // nilfs_cleanerd.conf's keys are much the same: say how to
            // convert such a file rather than where TOML gave up.
            if let Some((line, key)) = lfs_common::config::nilfs_style_line(text) {
                return error(
                    Some(line),
                    None,
                    lfs_common::config::nilfs_style_reason(&key),
                );
            }
            let line = e.span().map(|s| line_of(text, s.start));
            error(
                line,
                None,
                format!("not valid TOML: {}", e.message().trim()),
            )
        })?;
    // In file order, so the first error reported is the first in the file.
    let mut entries: Vec<_> = table.iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    let mut config = Config {
        origin: Origin {
            file: Some(file.to_path_buf()),
            lines: BTreeMap::new(),
        },
        ..Config::default()
    };
    for (k, v) in entries {
        let line = line_of(text, k.span().start);
        let name = k.get_ref().as_str();
        let Some(&known) = KEYS.iter().find(|&&known| known == name) else {
            return Err(error(
                Some(line),
                Some(name),
                format!("unknown key (the keys are {})", KEYS.join(", ")),
            ));
        };
        config
            .set(known, v.get_ref())
            .map_err(|reason| error(Some(line), Some(known), reason))?;
        config.origin.lines.insert(known, line);
    }
    config.check_min_max()?;
    Ok(config)
}

impl Config {
    /// Sets `key` from a TOML value.
    fn set(&mut self, key: &'static str, v: &toml::Value) -> Result<(), String> {
        match key {
            key::PROTECTION_PERIOD => {
                self.protection_period = time(v, Duration::ZERO, MAX_PROTECTION_PERIOD)?
            }
            key::STRICT_PROTECTION => self.strict_protection = boolean(v)?,
            key::MIN_CLEAN_SEGMENTS => self.min_clean_segments = amount(v)?,
            key::MAX_CLEAN_SEGMENTS => self.max_clean_segments = amount(v)?,
            key::CLEAN_CHECK_INTERVAL => self.clean_check_interval = interval(v)?,
            key::SELECTION_POLICY => {
                let name = string(v)?;
                self.selection_policy = Policy::from_name(name).ok_or_else(|| {
                    format!(
                        "unknown policy {name:?} (use one of {})",
                        Policy::NAMES.join(", ")
                    )
                })?
            }
            key::NSEGMENTS_PER_CLEAN => self.nsegments_per_clean = segments_per_clean(v)?,
            key::MC_NSEGMENTS_PER_CLEAN => self.mc_nsegments_per_clean = segments_per_clean(v)?,
            key::CLEANING_INTERVAL => self.cleaning_interval = interval(v)?,
            key::MC_CLEANING_INTERVAL => self.mc_cleaning_interval = interval(v)?,
            key::RETRY_INTERVAL => self.retry_interval = interval(v)?,
            key::MIN_RECLAIMABLE_BLOCKS => self.min_reclaimable_blocks = amount(v)?,
            key::MC_MIN_RECLAIMABLE_BLOCKS => self.mc_min_reclaimable_blocks = amount(v)?,
            key::USE_SET_SUINFO => self.use_set_suinfo = boolean(v)?,
            key::LOG_PRIORITY => self.log_priority = parse_log_priority(string(v)?)?,
            _ => return Err("unknown key".into()),
        }
        Ok(())
    }

    /// An error about `key` at the place it was set.
    fn error_at(&self, key: &'static str, reason: String) -> ConfigError {
        ConfigError {
            file: self.origin.file.clone(),
            line: self.origin.lines.get(key).copied(),
            key: Some(key.to_owned()),
            reason,
        }
    }

    /// The key to blame for a contradiction between two: the one set
    /// later in the file (or the one set at all).
    fn later(&self, a: &'static str, b: &'static str) -> &'static str {
        match (self.origin.lines.get(a), self.origin.lines.get(b)) {
            (Some(la), Some(lb)) if la > lb => a,
            (Some(_), None) => a,
            _ => b,
        }
    }

    /// min_clean_segments ≤ max_clean_segments, when both are the same
    /// kind of amount (otherwise [`Config::resolve`] checks it).
    fn check_min_max(&self) -> Result<(), ConfigError> {
        let (min, max) = (self.min_clean_segments, self.max_clean_segments);
        let contradicts = match (min, max) {
            (Amount::Count(a), Amount::Count(b)) | (Amount::Bytes(a), Amount::Bytes(b)) => a > b,
            (Amount::Percent(a), Amount::Percent(b)) => a > b,
            _ => false,
        };
        if contradicts {
            let blame = self.later(key::MIN_CLEAN_SEGMENTS, key::MAX_CLEAN_SEGMENTS);
            return Err(self.error_at(
                blame,
                format!("min_clean_segments ({min}) exceeds max_clean_segments ({max})"),
            ));
        }
        Ok(())
    }

    /// The concrete parameters for a filesystem of geometry `g`.
    pub fn resolve(&self, g: &Geometry) -> Result<Params, ConfigError> {
        let seg_bytes = u64::from(g.blocks_per_segment) * u64::from(g.block_size);
        let bps = u64::from(g.blocks_per_segment);
        let segs = |a: Amount| a.resolve(g.nsegs, seg_bytes);
        let blocks = |a: Amount| a.resolve(bps, u64::from(g.block_size));
        let min_clean = segs(self.min_clean_segments);
        let max_clean = segs(self.max_clean_segments);
        if min_clean > max_clean {
            let blame = self.later(key::MIN_CLEAN_SEGMENTS, key::MAX_CLEAN_SEGMENTS);
            return Err(self.error_at(
                blame,
                format!(
                    "min_clean_segments ({} = {min_clean} segments) exceeds max_clean_segments ({} = {max_clean} segments) on this filesystem",
                    self.min_clean_segments, self.max_clean_segments
                ),
            ));
        }
        let per_clean = |k: &'static str, a: Amount| {
            let n = segs(a);
            if (1..=MAX_SEGMENTS_PER_CLEAN).contains(&n) {
                Ok(n as usize)
            } else {
                Err(self.error_at(
                    k,
                    format!(
                        "{a} is {n} segments on this filesystem ({} segments of {seg_bytes} bytes); one pass cleans 1 to {MAX_SEGMENTS_PER_CLEAN}",
                        g.nsegs
                    ),
                ))
            }
        };
        let reclaimable = |k: &'static str, a: Amount| {
            let n = blocks(a);
            if n <= bps {
                Ok(n)
            } else {
                Err(self.error_at(
                    k,
                    format!("{a} is {n} blocks, more than a segment holds ({bps} blocks): nothing would ever be cleaned"),
                ))
            }
        };
        Ok(Params {
            protection_s: protection_seconds(self.protection_period),
            strict_protection: self.strict_protection,
            min_clean,
            max_clean,
            clean_check_interval: self.clean_check_interval,
            policy: self.selection_policy,
            nsegments: per_clean(key::NSEGMENTS_PER_CLEAN, self.nsegments_per_clean)?,
            mc_nsegments: per_clean(key::MC_NSEGMENTS_PER_CLEAN, self.mc_nsegments_per_clean)?,
            cleaning_interval: self.cleaning_interval,
            mc_cleaning_interval: self.mc_cleaning_interval,
            retry_interval: self.retry_interval,
            min_reclaimable: reclaimable(key::MIN_RECLAIMABLE_BLOCKS, self.min_reclaimable_blocks)?,
            mc_min_reclaimable: reclaimable(
                key::MC_MIN_RECLAIMABLE_BLOCKS,
                self.mc_min_reclaimable_blocks,
            )?,
            use_set_suinfo: self.use_set_suinfo,
        })
    }

    /// The keys whose values differ from `other`'s (for the reload log).
    pub fn changed_keys(&self, other: &Config) -> Vec<&'static str> {
        let a = self.values();
        let b = other.values();
        KEYS.iter()
            .zip(a.iter().zip(b.iter()))
            .filter(|(_, (x, y))| x != y)
            .map(|(k, _)| *k)
            .collect()
    }

    /// Every value as text, in [`KEYS`] order.
    pub fn values(&self) -> Vec<String> {
        vec![
            crate::units::format_duration(self.protection_period),
            self.strict_protection.to_string(),
            self.min_clean_segments.to_string(),
            self.max_clean_segments.to_string(),
            crate::units::format_duration(self.clean_check_interval),
            self.selection_policy.name().to_owned(),
            self.nsegments_per_clean.to_string(),
            self.mc_nsegments_per_clean.to_string(),
            crate::units::format_duration(self.cleaning_interval),
            crate::units::format_duration(self.mc_cleaning_interval),
            crate::units::format_duration(self.retry_interval),
            self.min_reclaimable_blocks.to_string(),
            self.mc_min_reclaimable_blocks.to_string(),
            self.use_set_suinfo.to_string(),
            self.log_priority.to_string().to_ascii_lowercase(),
        ]
    }
}

/// A protection period in the whole seconds fsd takes, rounding up.
pub fn protection_seconds(d: Duration) -> u32 {
    let s = d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0));
    u32::try_from(s).unwrap_or(u32::MAX)
}

/// The filesystem's geometry, from GET_SUSTAT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Segments.
    pub nsegs: u64,
    /// Blocks per segment.
    pub blocks_per_segment: u32,
    /// Block size in bytes.
    pub block_size: u32,
}

impl From<&lfs_proto::msg::Sustat> for Geometry {
    fn from(s: &lfs_proto::msg::Sustat) -> Self {
        Geometry {
            nsegs: s.nsegs,
            blocks_per_segment: s.blocks_per_segment,
            block_size: s.block_size,
        }
    }
}

/// The configuration resolved against a geometry: what the daemon runs on.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Protection period in seconds.
    pub protection_s: u32,
    /// Keep the protection period even when space runs short.
    pub strict_protection: bool,
    /// Clean segments below which mc mode starts.
    pub min_clean: u64,
    /// Clean segments at which cleaning stops.
    pub max_clean: u64,
    /// Check interval while idle.
    pub clean_check_interval: Duration,
    /// Victim selection.
    pub policy: Policy,
    /// Segments per pass at normal speed.
    pub nsegments: usize,
    /// Segments per pass in mc mode.
    pub mc_nsegments: usize,
    /// Time between passes at normal speed.
    pub cleaning_interval: Duration,
    /// Time between passes in mc mode.
    pub mc_cleaning_interval: Duration,
    /// Wait after a deferral; back-off cap.
    pub retry_interval: Duration,
    /// Least reclaimable blocks per chosen segment, normal speed.
    pub min_reclaimable: u64,
    /// The same in mc mode.
    pub mc_min_reclaimable: u64,
    /// Mark deferred segments young.
    pub use_set_suinfo: bool,
}

fn boolean(v: &toml::Value) -> Result<bool, String> {
    v.as_bool()
        .ok_or_else(|| format!("must be true or false, not {}", v.type_str()))
}

fn string(v: &toml::Value) -> Result<&str, String> {
    v.as_str()
        .ok_or_else(|| format!("must be a string, not {}", v.type_str()))
}

/// A time: a number of seconds (integer or decimal) or a string with a
/// unit, within `min..=max`.
fn time(v: &toml::Value, min: Duration, max: Duration) -> Result<Duration, String> {
    let d = match v {
        toml::Value::Integer(n) if *n < 0 => {
            return Err(format!("{n} seconds is negative"));
        }
        toml::Value::Integer(n) => Duration::from_secs(*n as u64),
        toml::Value::Float(x) => {
            seconds(*x).map_err(|_| format!("{x} is not a usable number of seconds"))?
        }
        toml::Value::String(s) => parse_duration(s)?,
        other => {
            return Err(format!(
                "must be a number of seconds or a string such as \"30s\", \"5m\", \"1h\", not {}",
                other.type_str()
            ))
        }
    };
    if d < min || d > max {
        return Err(format!(
            "{} is out of range ({} to {})",
            crate::units::format_duration(d),
            crate::units::format_duration(min),
            crate::units::format_duration(max)
        ));
    }
    Ok(d)
}

fn interval(v: &toml::Value) -> Result<Duration, String> {
    time(v, MIN_INTERVAL, MAX_INTERVAL)
}

/// A count (integer), or a string: a count, a percentage or bytes.
fn amount(v: &toml::Value) -> Result<Amount, String> {
    match v {
        toml::Value::Integer(n) => u64::try_from(*n)
            .map(Amount::Count)
            .map_err(|_| format!("{n} is negative")),
        toml::Value::String(s) => parse_amount(s),
        other => Err(format!(
            "must be a count (integer) or a string such as \"10%\", \"64M\", not {}",
            other.type_str()
        )),
    }
}

/// A segments-per-pass amount: an explicit count must be 1 to
/// [`MAX_SEGMENTS_PER_CLEAN`] (other kinds are checked on resolving).
fn segments_per_clean(v: &toml::Value) -> Result<Amount, String> {
    let a = amount(v)?;
    match a {
        Amount::Count(n) if !(1..=MAX_SEGMENTS_PER_CLEAN).contains(&n) => Err(format!(
            "{n} is out of range (1 to {MAX_SEGMENTS_PER_CLEAN} segments)"
        )),
        Amount::Percent(0.0) => Err("0% is out of range (at least one segment)".into()),
        Amount::Bytes(0) => Err("0 bytes is out of range (at least one segment)".into()),
        _ => Ok(a),
    }
}

/// Parses a log priority: a syslog name or a log level (case-insensitive).
pub fn parse_log_priority(s: &str) -> Result<LevelFilter, String> {
    Ok(match s.to_ascii_lowercase().as_str() {
        "emerg" | "alert" | "crit" | "err" | "error" => LevelFilter::Error,
        "warning" | "warn" => LevelFilter::Warn,
        "notice" | "info" => LevelFilter::Info,
        "debug" => LevelFilter::Debug,
        "trace" => LevelFilter::Trace,
        "off" => LevelFilter::Off,
        _ => {
            return Err(format!(
                "unknown log priority {s:?} (use one of {})",
                LOG_PRIORITIES.join(", ")
            ))
        }
    })
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
