//! `cleanerd`: cleans the segments of a mounted lfs filesystem through
//! fsd's control socket, in the foreground, until SIGTERM or SIGINT.
//!
//! The thin part: arguments → configuration → logging → target → control
//! socket and signal thread → the loop ([`cleanerd::daemon`]). Exit codes
//! are listed in cleanerd(8) and in [`Exit`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc::channel;
use std::time::Duration;

use clap::Parser;
use cleanerd::config::{self, Source, MAX_PROTECTION_PERIOD};
use cleanerd::control::{ControlServer, StartError};
use cleanerd::daemon::{Daemon, Event, Overrides};
use cleanerd::units::{format_duration, parse_duration};
use log::{info, LevelFilter};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Exit statuses, as documented in cleanerd(8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    /// Stopped by SIGTERM/SIGINT, or `--once` succeeded.
    Ok = 0,
    /// An error: the target names no lfs filesystem, the control socket
    /// cannot be created, `--once` failed.
    Error = 1,
    /// Bad usage or configuration.
    Usage = 2,
    /// Another cleanerd already cleans this filesystem.
    Busy = 3,
}

#[derive(Debug, Parser)]
#[command(
    name = "cleanerd",
    version,
    about = "Clean the segments of a mounted lfs filesystem through its fsd, in the foreground",
    after_help = "Signals: SIGTERM/SIGINT exit (0), SIGHUP reloads the configuration.\n\
                  Exit status: 0 stopped by a signal or --once done, 1 error, 2 bad usage or \
                  configuration, 3 another cleanerd runs for the filesystem. See cleanerd(8)."
)]
struct Args {
    /// Configuration file [default: /etc/lfs/cleanerd.conf if it exists].
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Protection period (seconds, or with a unit: 30m, 1h), overriding protection_period.
    #[arg(short = 'p', long = "protection-period", value_name = "SECONDS", value_parser = protection)]
    protection_period: Option<Duration>,

    /// Run one pass at normal speed whatever the clean-segment count, print what it did, exit.
    #[arg(long)]
    once: bool,

    /// More log output: -v debug, -vv trace (overrides log_priority).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, conflicts_with = "log_level")]
    verbose: u8,

    /// Log level: a syslog priority (emerg .. debug) or error, warn, info, debug, trace, off.
    #[arg(long = "log-level", value_name = "LEVEL", value_parser = config::parse_log_priority)]
    log_level: Option<LevelFilter>,

    /// Log to syslog (/dev/log) instead of standard error: what fsd asks of the cleanerd it starts
    /// once it runs in the background (fsd --daemon).
    #[arg(long)]
    syslog: bool,

    /// Print the completion script for SHELL (bash, zsh, fish, elvish, powershell) and exit.
    #[arg(long, value_name = "SHELL", exclusive = true)]
    completions: Option<lfs_common::completions::Shell>,

    /// fsd's control socket, the device or image file, or a mount point or path inside the mount.
    target: PathBuf,
}

fn protection(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d > MAX_PROTECTION_PERIOD {
        return Err(format!(
            "{s} is out of range (0 to {} seconds)",
            MAX_PROTECTION_PERIOD.as_secs()
        ));
    }
    Ok(d)
}

fn main() -> ExitCode {
    if lfs_common::completions::requested(<Args as clap::CommandFactory>::command) {
        return ExitCode::from(Exit::Ok as u8);
    }
    let args = Args::parse();
    let code = match run(&args) {
        Ok(()) => Exit::Ok,
        Err((code, message)) => {
            lfs_common::logging::fatal("cleanerd", &message);
            code
        }
    };
    ExitCode::from(code as u8)
}

fn run(args: &Args) -> Result<(), (Exit, String)> {
    // Registered first, so that a signal during start-up is not fatal.
    let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])
        .map_err(|e| (Exit::Error, format!("registering signal handlers: {e}")))?;
    let source = match &args.config {
        Some(path) => Source::Explicit(path.clone()),
        None => config::system(),
    };
    let overrides = Overrides {
        protection_period: args.protection_period,
        log_level: match args.verbose {
            0 => args.log_level,
            1 => Some(LevelFilter::Debug),
            _ => Some(LevelFilter::Trace),
        },
    };
    let config = overrides.apply(config::load(&source).map_err(|e| (Exit::Usage, e.to_string()))?);
    let env_logging = lfs_common::logging::init("cleanerd", config.log_priority, None);
    if args.syslog {
        lfs_common::logging::to_syslog();
    }
    match &config.origin.file {
        Some(f) => info!("configuration from {}", f.display()),
        None => info!("no configuration file; built-in defaults"),
    }
    info!(
        "protection period {}",
        format_duration(config.protection_period)
    );
    let target =
        lfs_proto::target::resolve(Some(&args.target)).map_err(|e| (Exit::Error, e.to_string()))?;
    let fsd_socket = target.socket().to_path_buf();
    let mut daemon = Daemon::new(&fsd_socket, source, overrides, config, env_logging)
        .serving(target.device().map(std::path::Path::to_path_buf));

    if args.once {
        let mut daemon = daemon.one_shot();
        let report = daemon
            .once(cleanerd::daemon::OnceOptions::default())
            .map_err(|e| (Exit::Error, e.to_string()))?;
        println!("{}", report.summary());
        return Ok(());
    }

    let path = lfs_proto::path::cleanerd_socket_path(&fsd_socket)
        .map_err(|e| (Exit::Error, format!("cleanerd's control socket: {e}")))?;
    let (tx, rx) = channel();
    let control = ControlServer::start(&path, daemon.status(), tx.clone()).map_err(|e| {
        let code = match e {
            StartError::InUse(_) => Exit::Busy,
            _ => Exit::Error,
        };
        (code, e.to_string())
    })?;
    info!("control socket {}", path.display());
    let handle = signals.handle();
    let signal_thread = std::thread::Builder::new()
        .name("cleanerd-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                let event = match signal {
                    SIGHUP => Event::Reload,
                    SIGINT => Event::Stop("SIGINT"),
                    _ => Event::Stop("SIGTERM"),
                };
                if tx.send(event).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| (Exit::Error, format!("starting the signal thread: {e}")))?;
    let result = daemon.run(&rx);
    control.stop();
    handle.close();
    let _ = signal_thread.join();
    result.map_err(|e| (Exit::Usage, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse() {
        use clap::CommandFactory;
        Args::command().debug_assert();
        let a = Args::try_parse_from(["cleanerd", "-c", "x.conf", "-p", "30m", "--once", "/mnt"])
            .unwrap();
        assert_eq!(a.protection_period, Some(Duration::from_secs(1800)));
        assert!(a.once);
        assert_eq!(a.config, Some(PathBuf::from("x.conf")));
        assert!(Args::try_parse_from(["cleanerd", "-p", "5w", "/mnt"]).is_err());
        assert!(Args::try_parse_from(["cleanerd", "-v", "--log-level", "info", "/mnt"]).is_err());
        assert!(Args::try_parse_from(["cleanerd"]).is_err());
        let a = Args::try_parse_from(["cleanerd", "--log-level", "notice", "/mnt"]).unwrap();
        assert_eq!(a.log_level, Some(LevelFilter::Info));
        assert!(Args::try_parse_from(["cleanerd", "-p", "99999999999", "/mnt"]).is_err());
    }
}
