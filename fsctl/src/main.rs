//! `fsctl`: inspection and administration of lfs filesystems.
//!
//! Each subcommand lives in its own module under `cmd/`; this file only
//! parses arguments and maps failures to the exit statuses documented in
//! fsctl(8).

mod cmd;
mod fail;
mod fsck_lfs;
mod target;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use std::time::Duration;

use clap::{ArgGroup, CommandFactory, Parser, Subcommand};

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
    /// fsck found errors.
    FsckErrors = 4,
    /// No fsd serves the target (none answers on its socket, or the one
    /// that answers serves another filesystem).
    NoFsd = 5,
    /// The target holds no lfs filesystem (or is on no lfs mount).
    NotLfs = 6,
    /// A checkpoint named does not exist.
    NoCheckpoint = 7,
    /// Permission denied: by fsd (a change from a user other than root or
    /// the owner) or by the system (the socket or the device).
    Denied = 8,
    /// The device is in use where the command needs it unused (fsck of a
    /// mounted filesystem).
    Busy = 9,
}

#[derive(Debug, Parser)]
#[command(
    name = "fsctl",
    version,
    about = "Inspect and administer lfs filesystems",
    after_help = "Exit status: 0 success, 1 error, 2 bad usage, 3 damage found, 4 fsck found errors, \
                  5 no fsd serves the target, 6 not lfs, 7 no such checkpoint, 8 permission denied, \
                  9 device in use. See fsctl(8)."
)]
#[command(arg_required_else_help = true, args_conflicts_with_subcommands = true)]
struct Cli {
    /// Print the completion script for SHELL (bash, zsh, fish, elvish, powershell) and exit.
    #[arg(long, value_name = "SHELL", exclusive = true)]
    completions: Option<lfs_common::completions::Shell>,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show both superblocks, which one is current, and the geometry (through fsd if it serves the target).
    Super {
        /// Device, image file or NBD export (nbd://HOST[:PORT]/EXPORT, nbd+unix:///EXPORT?socket=PATH),
        /// mount point, path inside it or control socket (default: the current directory).
        target: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check an unmounted filesystem's consistency without changing it (exit 4 if errors).
    Fsck {
        /// When the last checkpoint is damaged, make CNO, the newest intact one, the current one
        /// (what later checkpoints held is lost).
        #[arg(long, value_name = "CNO")]
        rollback: Option<u64>,
        /// Block device, image file or NBD export (nbd://HOST[:PORT]/EXPORT, nbd+unix:///EXPORT?socket=PATH).
        device: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List segment usage of a mounted filesystem (in-use segments unless -a).
    Lssu {
        /// Show every segment, clean ones too.
        #[arg(short = 'a', long)]
        all: bool,
        /// Add the live-block percentage of each segment.
        #[arg(short = 'l', long)]
        latest: bool,
        /// Start at this segment number.
        #[arg(short = 'i', long, value_name = "SEGNUM", default_value_t = 0)]
        index: u64,
        /// Show at most this many lines.
        #[arg(short = 'n', long, value_name = "LINES")]
        lines: Option<u64>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Mount point, path inside it, control socket or device (default: the current directory).
        target: Option<PathBuf>,
    },
    /// List the checkpoints of a mounted filesystem (minor ones with -a).
    Lscp {
        /// Include minor checkpoints (made by the timer or the dirty limit).
        #[arg(short = 'a', long)]
        all: bool,
        /// Snapshots only.
        #[arg(short = 's', long)]
        snapshots: bool,
        /// Newest first.
        #[arg(short = 'r', long)]
        reverse: bool,
        /// Start at this checkpoint number.
        #[arg(short = 'i', long, value_name = "CNO", default_value_t = 1)]
        index: u64,
        /// Show at most this many lines.
        #[arg(short = 'n', long, value_name = "LINES")]
        lines: Option<u64>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Mount point, path inside it, control socket or device (default: the current directory).
        target: Option<PathBuf>,
    },
    /// Write a checkpoint of a mounted filesystem now (a snapshot with -s).
    Mkcp {
        /// Make it a snapshot, kept until `chcp cp` turns it back.
        #[arg(short = 's', long)]
        snapshot: bool,
        /// Print the new checkpoint's number.
        #[arg(short = 'p', long)]
        print: bool,
        /// Mount point, path inside it, control socket or device (default: the current directory).
        target: Option<PathBuf>,
    },
    /// Turn checkpoints into snapshots (ss) or snapshots back into plain checkpoints (cp).
    Chcp {
        /// cp (plain checkpoint, reclaimable by cleaning) or ss (snapshot, kept).
        #[arg(value_name = "MODE")]
        mode: String,
        /// [TARGET] CNO...: an optional mount point, path inside it, control socket or
        /// device, then checkpoint numbers.
        #[arg(value_name = "[TARGET] CNO", required = true, num_args = 1..)]
        args: Vec<String>,
    },
    /// Delete checkpoints (numbers or ranges A..B, A.., ..B); snapshots must be made cp first.
    Rmcp {
        /// Skip what cannot be deleted (snapshots, the latest, missing ones) without failing, as
        /// rm -f.
        #[arg(short = 'f', long)]
        force: bool,
        /// [TARGET] CNO|A..B...: an optional mount point, path inside it, control socket or
        /// device, then checkpoint numbers or ranges.
        #[arg(value_name = "[TARGET] CNO", required = true, num_args = 1..)]
        args: Vec<String>,
    },
    /// Mount a checkpoint read-only beside the live filesystem (served by its fsd).
    Mount {
        /// The checkpoint (fsctl lscp lists them).
        cno: u64,
        /// An existing directory.
        mountpoint: PathBuf,
        /// Mount point, path inside it, control socket or device of the live filesystem
        /// (default: the current directory).
        target: Option<PathBuf>,
    },
    /// List the paths created (A), deleted (D) and modified (M) between two checkpoints.
    Diff {
        /// The older checkpoint.
        old: u64,
        /// The newer checkpoint, or 0 for the current state.
        new: u64,
        /// Only below this path (absolute inside the filesystem).
        #[arg(default_value = "/")]
        path: String,
        /// Mount point, path inside it, control socket or device (default: the current directory).
        #[arg(short = 't', long, value_name = "TARGET")]
        target: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Unmount a checkpoint mounted by fsctl mount.
    Umount {
        /// Where it is mounted.
        mountpoint: PathBuf,
        /// The live filesystem's mount point, control socket or device (default: found from
        /// the mount point).
        target: Option<PathBuf>,
    },
    /// Show where the space of a mounted filesystem went.
    Df {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Mount point, path inside it, control socket or device (default: the current directory).
        target: Option<PathBuf>,
    },
    /// Show the engine's counters, write amplification and latencies.
    Stat {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Mount point, path inside it, control socket or device (default: the current directory).
        target: Option<PathBuf>,
    },
    /// Freeze a mounted filesystem: write a checkpoint, flush, then hold every change until thaw.
    Freeze {
        /// Mount point, path inside it, control socket or device (default: the current directory).
        target: Option<PathBuf>,
    },
    /// Thaw a frozen filesystem: the changes waiting go on.
    Thaw {
        /// Mount point, path inside it, control socket or device (default: the current directory).
        target: Option<PathBuf>,
    },
    /// Control the cleanerd of a mounted filesystem; without an action (or with --once), clean
    /// once, through cleanerd or, without one, through fsd directly (as nilfs-clean).
    #[command(group(ArgGroup::new("action").args(["status", "suspend", "resume", "once", "reload"])))]
    Clean {
        /// Show what the cleaner is doing: mode, last pass, per-pass and total work, last error.
        #[arg(long)]
        status: bool,
        /// Stop cleaning until --resume.
        #[arg(long)]
        suspend: bool,
        /// Clean again after --suspend.
        #[arg(long)]
        resume: bool,
        /// Run one pass now at normal speed (the default action; without a cleanerd: through fsd
        /// directly).
        #[arg(long)]
        once: bool,
        /// Make cleanerd reread its configuration (as SIGHUP).
        #[arg(long)]
        reload: bool,
        /// With --once: segments to choose instead of nsegments_per_clean.
        #[arg(long, value_name = "N", conflicts_with_all = ["status", "suspend", "resume", "reload"], value_parser = clap::value_parser!(u64).range(1..=1024))]
        segments: Option<u64>,
        /// With --once: protection period (seconds, or 30m, 1h) instead of the configured one.
        #[arg(short = 'p', long, value_name = "SECONDS", conflicts_with_all = ["status", "suspend", "resume", "reload"], value_parser = protection_period)]
        protection_period: Option<Duration>,
        /// With --once: least reclaimable blocks per chosen segment instead of
        /// min_reclaimable_blocks (a count, N% or bytes; 0 forces a pass that would be deferred).
        #[arg(short = 'm', long, value_name = "AMOUNT", conflicts_with_all = ["status", "suspend", "resume", "reload"], value_parser = min_reclaimable)]
        min_reclaimable: Option<String>,
        /// cleanerd.conf for a pass fsctl runs itself (no cleanerd running) [default:
        /// /etc/lfs/cleanerd.conf if it exists].
        #[arg(short = 'c', long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Mount point, path inside it, control socket or device (default: the current directory).
        target: Option<std::path::PathBuf>,
    },
    /// List the logs of segments, with their block entries (through fsd if it serves the target).
    Dumpseg {
        /// [TARGET] SEGNUM...: an optional device, image file, NBD export, mount point, path inside
        /// it or control socket (default: the current directory), then segment numbers (0 to
        /// segments - 1).
        #[arg(value_name = "[TARGET] SEGNUM", required = true, num_args = 1..)]
        args: Vec<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// A `--protection-period` value.
fn protection_period(s: &str) -> Result<Duration, String> {
    let d = lfs_common::units::parse_duration(s)?;
    if d > cleanerd::config::MAX_PROTECTION_PERIOD {
        return Err(format!("{s} is more than {} seconds", u32::MAX));
    }
    Ok(d)
}

/// A `--min-reclaimable` value: an amount as cleanerd.conf(5) writes one.
fn min_reclaimable(s: &str) -> Result<String, String> {
    cleanerd::units::parse_amount(s).map(|_| s.to_owned())
}

/// Restores the default SIGPIPE action, so that `fsctl lssu | head` ends
/// quietly when head exits, as a Unix tool should (Rust ignores SIGPIPE
/// and would report a broken pipe on every later print).
#[allow(unsafe_code)]
fn default_sigpipe() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: called first in main, before any other thread exists;
    // SIG_DFL installs no Rust code as a handler.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
}

/// True if this process was started as one of `names` (argv[0]'s file
/// name).
fn started_as(names: &[&str]) -> bool {
    std::env::args_os().next().is_some_and(|a| {
        Path::new(&a)
            .file_name()
            .is_some_and(|f| names.iter().any(|n| f == *n))
    })
}

fn main() -> ExitCode {
    default_sigpipe();
    if started_as(fsck_lfs::NAMES) {
        lfs_common::logging::init(fsck_lfs::NAME, log::LevelFilter::Warn, None);
        return fsck_lfs::main();
    }
    lfs_common::logging::init("fsctl", log::LevelFilter::Warn, None);
    if lfs_common::completions::requested(Cli::command) {
        return ExitCode::from(Exit::Ok as u8);
    }
    let cli = Cli::parse();
    let Some(command) = &cli.command else {
        Cli::command()
            .error(
                clap::error::ErrorKind::MissingSubcommand,
                "a command is needed (fsctl --help lists them)",
            )
            .exit()
    };
    let result = match command {
        Command::Super { target, json } => cmd::superblock::run(target.as_deref(), *json),
        Command::Fsck {
            rollback,
            device,
            json,
        } => cmd::fsck::run(device, *rollback, *json),
        Command::Lssu {
            all,
            latest,
            index,
            lines,
            json,
            target,
        } => cmd::online::lssu(target.as_deref(), *all, *latest, *index, *lines, *json),
        Command::Lscp {
            all,
            snapshots,
            reverse,
            index,
            lines,
            json,
            target,
        } => cmd::online::lscp(
            target.as_deref(),
            *all,
            *snapshots,
            *reverse,
            *index,
            *lines,
            *json,
        ),
        Command::Mkcp {
            snapshot,
            print,
            target,
        } => cmd::checkpoints::mkcp(target.as_deref(), *snapshot, *print),
        Command::Chcp { mode, args } => cmd::checkpoints::chcp(mode, args),
        Command::Rmcp { force, args } => cmd::checkpoints::rmcp(args, *force),
        Command::Mount {
            cno,
            mountpoint,
            target,
        } => cmd::checkpoints::mount(*cno, mountpoint, target.as_deref()),
        Command::Diff {
            old,
            new,
            path,
            target,
            json,
        } => cmd::checkpoints::diff(*old, *new, path, target.as_deref(), *json),
        Command::Umount { mountpoint, target } => {
            cmd::checkpoints::umount(mountpoint, target.as_deref())
        }
        Command::Freeze { target } => cmd::freeze::freeze(target.as_deref()),
        Command::Thaw { target } => cmd::freeze::thaw(target.as_deref()),
        Command::Df { json, target } => cmd::online::df(target.as_deref(), *json),
        Command::Stat { json, target } => cmd::online::stat(target.as_deref(), *json),
        Command::Clean {
            status,
            suspend,
            resume,
            once,
            reload,
            segments,
            protection_period,
            min_reclaimable,
            config,
            json,
            target,
        } => {
            let action = if *status {
                cmd::clean::Action::Status
            } else if *suspend {
                cmd::clean::Action::Suspend
            } else if *resume {
                cmd::clean::Action::Resume
            } else if *reload {
                cmd::clean::Action::Reload
            } else {
                // --once, or no action: one pass, as nilfs-clean does.
                let _ = once;
                cmd::clean::Action::Once {
                    segments: *segments,
                    protection_period: *protection_period,
                    min_reclaimable: min_reclaimable.clone(),
                }
            };
            cmd::clean::run(target.as_deref(), action, config.as_deref(), *json)
        }
        Command::Dumpseg { args, json } => {
            // The first word is the target unless it reads as a number
            // (a directory named 5 is written ./5).
            let (target, numbers) = match args.split_first() {
                Some((first, rest)) if first.parse::<u64>().is_err() => {
                    (Some(Path::new(first.as_str())), rest)
                }
                _ => (None, &args[..]),
            };
            let segnums: Vec<u64> = numbers
                .iter()
                .map(|w| {
                    w.parse::<u64>().unwrap_or_else(|_| {
                        Cli::command()
                            .error(
                                clap::error::ErrorKind::ValueValidation,
                                format!("segment number {w:?} is not a number"),
                            )
                            .exit()
                    })
                })
                .collect();
            if segnums.is_empty() {
                Cli::command()
                    .error(
                        clap::error::ErrorKind::MissingRequiredArgument,
                        "dumpseg needs a segment number",
                    )
                    .exit()
            }
            cmd::dumpseg::run(target, &segnums, *json)
        }
    };
    match result {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!(
                "{}",
                lfs_common::report::error_line("fsctl", &format!("{e:#}"))
            );
            ExitCode::from(fail::exit_code(&e) as u8)
        }
    }
}
