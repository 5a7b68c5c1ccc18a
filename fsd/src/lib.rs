//! The library half of fsd: what other crates need of fsd without the
//! daemon. Only the configuration file's parser lives here, so that the
//! fuzz workspace (`fuzz/`, target `fsd_toml`) can run the exact code
//! fsd runs at start and on SIGHUP; the FUSE adapter, the control server
//! and everything else stay in the binary (`main.rs`), which uses this
//! crate like any other.
//!
//! * [`config`]: fsd.toml, its keys, defaults, parsing and validation.
//! * [`targets`]: the fuzz entry point over [`config::parse`].

#![forbid(unsafe_code)]

pub mod config;
pub mod targets;
