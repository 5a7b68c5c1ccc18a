//! `fsctl`: inspection and administration of lfs filesystems.
//!
//! Each subcommand lives in its own module under `cmd/`; this file only
//! parses arguments and maps failures to the exit statuses documented in
//! fsctl(8).

mod cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit statuses, as documented in fsctl(8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// An error: I/O, no valid superblock, bad argument value.
    Error = 1,
    /// Bad usage (clap's code).
    Usage = 2,
    /// The command worked but found damage (e.g. one bad superblock copy).
    Damaged = 3,
    /// fsck found errors (as fsck(8)).
    FsckErrors = 4,
}

#[derive(Debug, Parser)]
#[command(
    name = "fsctl",
    version,
    about = "Inspect and administer lfs filesystems",
    after_help = "Exit status: 0 success, 1 error, 2 bad usage, 3 damage found, 4 fsck found errors. \
                  See fsctl(8)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show both superblocks of an unmounted device, which one is current, and the geometry.
    Super {
        /// Block device or image file.
        device: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check an unmounted filesystem's consistency without changing it (exit 4 if errors).
    Fsck {
        /// Block device or image file.
        device: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the logs of one segment of an unmounted device, with their block entries.
    Dumpseg {
        /// Block device or image file.
        device: PathBuf,
        /// Segment number (0 to segments - 1).
        segnum: u64,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Super { device, json } => cmd::superblock::run(device, *json),
        Command::Fsck { device, json } => cmd::fsck::run(device, *json),
        Command::Dumpseg {
            device,
            segnum,
            json,
        } => cmd::dumpseg::run(device, *segnum, *json),
    };
    match result {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("fsctl: {e:#}");
            ExitCode::from(Exit::Error as u8)
        }
    }
}
