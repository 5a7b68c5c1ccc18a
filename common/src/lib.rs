//! What lfs's commands share beyond the engine (`lfs`) and the control
//! protocol (`lfs-proto`): how sizes and times are written
//! ([`units`]), how a configuration file's errors are reported
//! ([`config`]), what a message looks like ([`report`]) and, with the
//! `logging` feature, the logger every command installs ([`logging`]);
//! with `completions`, their shell completion scripts ([`completions`]).
//!
//! One copy of each, so that "MB" means the same in fsd.toml, in
//! cleanerd.conf and on mkfs.lfs's command line, and every command
//! writes its lines the same way.

#![forbid(unsafe_code)]

#[cfg(feature = "completions")]
pub mod completions;
pub mod config;
#[cfg(feature = "logging")]
pub mod logging;
pub mod report;
pub mod units;
