//! `fsctl clean`: controls the cleanerd(8) of a mounted filesystem
//! through cleanerd's control socket (beside fsd's, `.cleanerd.sock`);
//! without a cleanerd, `--once` runs one pass itself through fsd's socket
//! with cleanerd's own code and configuration (as nilfs-clean does).

use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use cleanerd::config::protection_seconds;
use cleanerd::control::{request, Command, Reply, RequestError, Status};
use cleanerd::daemon::{Daemon, OnceOptions, Overrides};
use cleanerd::pass::PassReport;
use cleanerd::units::parse_amount;

use super::utc;
use crate::fail::Fault;
use crate::target::verified_socket;
use crate::Exit;

/// What `fsctl clean` was asked to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `--status`.
    Status,
    /// `--suspend`.
    Suspend,
    /// `--resume`.
    Resume,
    /// `--reload`.
    Reload,
    /// `--once` (or no action) `[--segments N] [--protection-period S]
    /// [--min-reclaimable AMOUNT]`.
    Once {
        /// Segments to choose.
        segments: Option<u64>,
        /// Protection period.
        protection_period: Option<Duration>,
        /// Least reclaimable blocks per segment, as written ("0", "5%").
        min_reclaimable: Option<String>,
    },
}

/// Runs `action` on the cleaner of `target`; `config` is the cleanerd.conf
/// a pass without a cleanerd uses (default: /etc/lfs/cleanerd.conf if it
/// exists).
pub fn run(
    target: Option<&Path>,
    action: Action,
    config: Option<&Path>,
    json: bool,
) -> Result<Exit> {
    let fsd_socket = verified_socket(target)?;
    let socket = lfs_proto::path::cleanerd_socket_path(&fsd_socket).map_err(|e| anyhow!(e))?;
    let cmd = match action {
        Action::Status => Command::Status,
        Action::Suspend => Command::Suspend,
        Action::Resume => Command::Resume,
        Action::Reload => Command::Reload,
        Action::Once {
            segments,
            protection_period,
            ref min_reclaimable,
        } => Command::Once {
            segments,
            protection_period: protection_period.map(|d| d.as_secs_f64()),
            min_reclaimable: min_reclaimable.clone(),
        },
    };
    let reply = match request(&socket, &cmd) {
        Ok(reply) => reply,
        Err(RequestError::NotRunning { .. }) => {
            if let Action::Once {
                segments,
                protection_period,
                min_reclaimable,
            } = action
            {
                let opts = OnceOptions {
                    segments: segments.map(|n| n as usize),
                    protection_s: protection_period.map(protection_seconds),
                    min_reclaimable: min_reclaimable
                        .as_deref()
                        .map(parse_amount)
                        .transpose()
                        .map_err(|e| anyhow!("--min-reclaimable: {e}"))?,
                };
                return once_without_cleanerd(&fsd_socket, opts, protection_period, config, json);
            }
            bail!(
                "no cleanerd is running for this filesystem (nothing answers on {}); start cleanerd(8), or use --once to clean once without it",
                socket.display()
            );
        }
        Err(e @ RequestError::Denied { .. }) => return Err(Fault::Denied(e.to_string()).into()),
        Err(e) => return Err(e.into()),
    };
    print_reply(reply, json)?;
    Ok(Exit::Ok)
}

fn print_reply(reply: Reply, json: bool) -> Result<()> {
    if !reply.ok {
        let why = format!(
            "cleanerd refused: {}",
            reply.error.unwrap_or_else(|| "no reason given".into())
        );
        if reply.denied {
            return Err(Fault::Denied(why).into());
        }
        bail!(why);
    }
    if let Some(status) = reply.status {
        if json {
            println!("{}", serde_json::to_string_pretty(&status)?);
        } else {
            print_status(&status);
        }
    } else if let Some(report) = reply.report {
        print_report(&report, json)?;
    } else if let Some(message) = reply.message {
        println!("{message}");
    }
    Ok(())
}

fn print_report(report: &PassReport, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        println!("{}", report.summary());
    }
    Ok(())
}

/// nilfs-clean's job: one pass through fsd's socket, with the
/// configuration cleanerd would use.
fn once_without_cleanerd(
    fsd_socket: &Path,
    opts: OnceOptions,
    protection_period: Option<Duration>,
    config: Option<&Path>,
    json: bool,
) -> Result<Exit> {
    let source = match config {
        Some(file) => cleanerd::config::Source::Explicit(file.to_path_buf()),
        None => cleanerd::config::system(),
    };
    let overrides = Overrides {
        protection_period,
        log_level: None,
    };
    let config =
        overrides.apply(cleanerd::config::load(&source).context("cleanerd's configuration")?);
    let mut daemon = Daemon::new(fsd_socket, source, overrides, config, true).one_shot();
    let report = daemon.once(opts).map_err(|e| {
        let why = format!("cleaning once without cleanerd: {e}");
        match e.errno() {
            Some(nix::libc::EPERM | nix::libc::EACCES) => Fault::Denied(why).into(),
            _ => anyhow!(why),
        }
    })?;
    print_report(&report, json)?;
    Ok(Exit::Ok)
}

fn print_status(s: &Status) {
    let when = |t: Option<u64>| t.map_or_else(|| "never".to_owned(), utc);
    println!("cleanerd:     pid {} cleaning {}", s.pid, s.fsd_socket);
    println!(
        "config:       {}",
        s.config_file.as_deref().unwrap_or("built-in defaults")
    );
    println!("mode:         {}", s.mode);
    println!("connected:    {}", if s.connected { "yes" } else { "no" });
    println!("policy:       {}", s.policy);
    println!(
        "segments:     {} clean of {} (min_clean {}, max_clean {})",
        s.nclean, s.nsegs, s.min_clean, s.max_clean
    );
    println!("passes:       {}", s.passes);
    println!("last pass:    {}", when(s.last_pass_at));
    if let Some(r) = &s.last_pass {
        println!("              {}", r.summary());
    }
    if !s.recent.is_empty() {
        println!("recent passes (segments cleaned, live blocks moved):");
        for p in &s.recent {
            let outcome = serde_json::to_value(p.outcome)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            println!(
                "  {}  {:<13} {:>6} {:>10}",
                utc(p.at),
                outcome,
                p.segments,
                p.blocks_moved
            );
        }
    }
    let t = &s.totals;
    println!(
        "totals:       {} segments freed, {} blocks moved, {} bytes written, {} checkpoints deleted ({} blocks freed), {} deferrals",
        t.segments_freed, t.blocks_moved, t.bytes_written, t.checkpoints_deleted, t.blocks_freed, t.deferrals
    );
    match &s.last_error {
        Some(e) => println!("last error:   {e} ({})", when(s.last_error_unix)),
        None => println!("last error:   none"),
    }
}
