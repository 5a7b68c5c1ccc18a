//! The logger every lfs command installs: one line per record on stderr,
//! `PROGRAM: TEXT` for information, `PROGRAM: warning: TEXT`,
//! `PROGRAM: error: TEXT`, `PROGRAM: debug: TARGET: TEXT` (the same form
//! as the line a command prints for the error that ends it, see
//! [`crate::report`]), or, once a daemon has detached from its terminal,
//! to syslog (`/dev/log`), where the journal or syslogd adds the time.
//!
//! `RUST_LOG`, when set, decides which records pass (env_logger's
//! syntax); otherwise the level given, which [`set_level`] may change
//! later (a daemon's reload).

use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};

use log::{Level, LevelFilter, Log, Metadata, Record};

/// Where syslog listens.
const SYSLOG_SOCKET: &str = "/dev/log";
/// syslog's facility for system daemons (RFC 5424: 3).
const FACILITY_DAEMON: u8 = 3;

/// A record a command drops whatever the level (see [`init`]).
pub type Drop = fn(&Record<'_>) -> bool;

struct Logger {
    program: &'static str,
    /// env_logger's filter, when `RUST_LOG` decides.
    filter: Option<env_logger::Logger>,
    drop: Option<Drop>,
    /// Set once the daemon has detached: records go to syslog.
    syslog: AtomicBool,
    /// While set (a daemon not yet detached), records below warning
    /// level wait in `held` for syslog instead of going to the caller's
    /// stderr: mount(8) prints nothing when all is well.
    holding: AtomicBool,
    held: std::sync::Mutex<Vec<(Level, String)>>,
}

/// Most records [`hold_until_detached`] keeps; later ones are dropped.
const HELD_MAX: usize = 1000;

static LOGGER: std::sync::OnceLock<Logger> = std::sync::OnceLock::new();

/// Installs the logger for `program` at `level`, dropping the records
/// `drop` picks. Returns true if `RUST_LOG` decides the level instead.
/// A second call changes nothing (and returns what the first did).
pub fn init(program: &'static str, level: LevelFilter, drop: Option<Drop>) -> bool {
    let from_env = std::env::var_os("RUST_LOG").is_some_and(|v| !v.is_empty());
    let logger = LOGGER.get_or_init(|| Logger {
        program,
        filter: from_env.then(|| env_logger::Builder::new().parse_default_env().build()),
        drop,
        syslog: AtomicBool::new(false),
        holding: AtomicBool::new(false),
        held: std::sync::Mutex::new(Vec::new()),
    });
    let max = match &logger.filter {
        Some(f) => f.filter(),
        None => level,
    };
    // Fails only if a logger is already installed: then it is this one.
    let _ = log::set_logger(logger);
    log::set_max_level(max);
    logger.filter.is_some()
}

/// Changes the level (unless `RUST_LOG` decides it).
pub fn set_level(level: LevelFilter) {
    if LOGGER.get().is_some_and(|l| l.filter.is_none()) {
        log::set_max_level(level);
    }
}

/// Until [`to_syslog`], only warnings and errors reach stderr; the other
/// records are kept and sent to syslog then (a daemon starting for
/// mount(8), which should print nothing when all goes well).
pub fn hold_until_detached() {
    if let Some(l) = LOGGER.get() {
        l.holding.store(true, Ordering::SeqCst);
    }
}

/// From now on, records go to syslog instead of stderr (a daemon that
/// closed its standard streams), those held first. Without a syslog
/// socket they are lost, as fsd(8) says.
pub fn to_syslog() {
    if let Some(l) = LOGGER.get() {
        l.syslog.store(true, Ordering::SeqCst);
        l.holding.store(false, Ordering::SeqCst);
        let held = std::mem::take(&mut *l.held.lock().unwrap_or_else(|p| p.into_inner()));
        for (level, text) in held {
            l.send_to_syslog(level, &text);
        }
    }
}

/// Reports the error a daemon exits with: logged at error level, or,
/// when no logger takes it (it failed before installing one, or logs
/// nothing), written to stderr in the same form.
pub fn fatal(program: &str, message: &dyn std::fmt::Display) {
    if log::log_enabled!(Level::Error) {
        log::error!("{message}");
    } else {
        eprintln!(
            "{}",
            crate::report::error_line(program, &format!("error: {message}"))
        );
    }
}

/// The text of a record, after the program's name.
pub fn format_record(record: &Record<'_>) -> String {
    let text = crate::report::clean(&record.args().to_string());
    match record.level() {
        Level::Error => format!("error: {text}"),
        Level::Warn => format!("warning: {text}"),
        Level::Info => text,
        Level::Debug => format!("debug: {}: {text}", record.target()),
        Level::Trace => format!("trace: {}: {text}", record.target()),
    }
}

/// syslog's severity for a level.
fn severity(level: Level) -> u8 {
    match level {
        Level::Error => 3,
        Level::Warn => 4,
        Level::Info => 6,
        Level::Debug | Level::Trace => 7,
    }
}

impl Logger {
    fn send_to_syslog(&self, level: Level, text: &str) {
        let pri = FACILITY_DAEMON * 8 + severity(level);
        let line = format!("<{pri}>{}[{}]: {text}", self.program, std::process::id());
        // Nothing to report a lost log line to.
        if let Ok(s) = UnixDatagram::unbound() {
            let _ = s.send_to(line.as_bytes(), SYSLOG_SOCKET);
        }
    }
}

impl Log for Logger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        match &self.filter {
            Some(f) => f.enabled(metadata),
            None => metadata.level() <= log::max_level(),
        }
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata())
            || self.filter.as_ref().is_some_and(|f| !f.matches(record))
            || self.drop.is_some_and(|drop| drop(record))
        {
            return;
        }
        let text = format_record(record);
        if self.syslog.load(Ordering::Relaxed) {
            self.send_to_syslog(record.level(), &text);
        } else if self.holding.load(Ordering::Relaxed) && record.level() > Level::Warn {
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            if held.len() < HELD_MAX {
                held.push((record.level(), text));
            }
        } else {
            // One write per line, so that threads' lines do not mix.
            let line = format!("{}: {text}\n", self.program);
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }

    fn flush(&self) {
        let _ = std::io::stderr().flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_like_the_final_error_line() {
        let r = |level, args: std::fmt::Arguments<'_>| {
            format_record(
                &Record::builder()
                    .level(level)
                    .target("fsd::control")
                    .args(args)
                    .build(),
            )
        };
        assert_eq!(r(Level::Info, format_args!("mounted")), "mounted");
        assert_eq!(
            r(Level::Warn, format_args!("slow (os error 5)")),
            "warning: slow"
        );
        assert_eq!(r(Level::Error, format_args!("gone")), "error: gone");
        assert_eq!(r(Level::Debug, format_args!("x")), "debug: fsd::control: x");
    }
}
