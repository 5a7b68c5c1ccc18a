//! The cleaner's loop: connect to fsd, read the clean-segment count, let
//! the [`Schedule`] decide, run passes, and wait for the next check or an
//! [`Event`] (a signal, a control request) — whichever comes first, so a
//! SIGTERM is acted on at once even during a long sleep.
//!
//! Errors never end the loop. Each is logged once, with its cause, when it
//! starts (or its cause changes), with the wait before the retry; the
//! retries of the same failure are logged at debug level; the recovery is
//! logged once. The wait doubles from `cleaning_interval` to
//! `retry_interval`; EROFS (the filesystem went read-only) and ENOTTY (this
//! fsd cannot clean) wait `retry_interval` at once. A lost connection (fsd
//! restarted, the socket disappeared) is reopened on the next check.
//!
//! The one fatal error: a configuration that cannot be resolved against
//! the filesystem's geometry the first time it is seen (say
//! `nsegments_per_clean = "50%"` of 10,000 segments is more than one
//! request may name). On a reload such a file is refused and the running
//! configuration stays.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lfs_proto::msg::{GetSuper, GetSustat, Sustat};
use lfs_proto::{Client, ClientError};
use log::{debug, error, info, warn, LevelFilter};

use crate::config::{protection_seconds, Config, ConfigError, Geometry, Params, Source};
use crate::control::{Command, Reply, Status};
use crate::pass::{run_pass, Outcome, PassError, PassReport, PassSpec};
use crate::policy::History;
use crate::schedule::{effort, Mode, Schedule};
use crate::units::format_duration;
use crate::units::{parse_amount, Amount};

/// What wakes the loop besides its timer.
#[derive(Debug)]
pub enum Event {
    /// Exit (SIGTERM, SIGINT): the reason, for the log.
    Stop(&'static str),
    /// Reread the configuration (SIGHUP).
    Reload,
    /// A request from `fsctl clean`, with where to send the answer.
    Control(Command, Sender<Reply>),
}

/// Command-line settings that win over the file, also after a reload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `-p`: the protection period.
    pub protection_period: Option<Duration>,
    /// `-v`, `--log-level`.
    pub log_level: Option<LevelFilter>,
}

impl Overrides {
    /// `c` with the overrides applied.
    pub fn apply(&self, mut c: Config) -> Config {
        if let Some(p) = self.protection_period {
            c.protection_period = p;
        }
        if let Some(l) = self.log_level {
            c.log_priority = l;
        }
        c
    }
}

/// Why a check or pass failed.
#[derive(Debug)]
enum Failure {
    /// fsd's socket could not be connected to.
    Connect(std::io::Error),
    /// A request failed.
    Request(PassError),
}

impl Failure {
    /// The cause, as a key: a failure is logged again only when it changes.
    fn cause(&self) -> String {
        match self {
            Failure::Connect(_) => "connect".into(),
            Failure::Request(PassError {
                error: ClientError::Errno { name, .. },
                ..
            }) => (*name).into(),
            Failure::Request(_) => "connection".into(),
        }
    }

    fn errno(&self) -> Option<i32> {
        match self {
            Failure::Request(e) => e.error.errno(),
            Failure::Connect(_) => None,
        }
    }
}

/// What a pass asked for with [`Daemon::once`] does differently from the
/// configuration.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OnceOptions {
    /// Segments to choose instead of `nsegments_per_clean`.
    pub segments: Option<usize>,
    /// Protection period in seconds instead of `protection_period`.
    pub protection_s: Option<u32>,
    /// Least reclaimable blocks per chosen segment instead of
    /// `min_reclaimable_blocks` (0: never defer).
    pub min_reclaimable: Option<Amount>,
}

/// Why a pass asked for with [`Daemon::once`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OnceError {
    /// The configuration does not fit the filesystem.
    #[error("{0}")]
    Config(ConfigError),
    /// No fsd answers, or the one that answers serves another device.
    #[error("{0}")]
    NoFsd(String),
    /// fsd refused or failed a request.
    #[error("{0}")]
    Request(PassError),
}

impl OnceError {
    /// The errno fsd answered, if that is what failed.
    pub fn errno(&self) -> Option<i32> {
        match self {
            OnceError::Request(e) => e.error.errno(),
            _ => None,
        }
    }
}

/// Passes kept in [`Status::recent`].
pub const RECENT_PASSES: usize = 10;

/// The wall clock, seconds since the epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The cleaner of one filesystem.
#[derive(Debug)]
pub struct Daemon {
    fsd_socket: PathBuf,
    /// The device the fsd on the socket must serve (the target named
    /// one), checked at every connection: a socket is found by the
    /// device's file name, which another image may share.
    device: Option<PathBuf>,
    /// Runs one pass for a caller (`cleanerd --once`, `fsctl clean`) that
    /// reports its failure: nothing is retried, so none is announced.
    one_shot: bool,
    source: Source,
    overrides: Overrides,
    config: Config,
    /// Whether RUST_LOG decides the log level (then log_priority does not).
    env_logging: bool,
    params: Option<Params>,
    geometry: Option<Geometry>,
    client: Option<Client>,
    /// Whether a connection ever succeeded (for "connected" vs "back").
    ever_connected: bool,
    schedule: Schedule,
    history: History,
    status: Arc<Mutex<Status>>,
    /// The cause of the failure in progress, if any.
    trouble: Option<String>,
    /// fsd answered ENOTTY to SET_SUINFO: do not try again this run.
    set_suinfo_unsupported: bool,
    last_outcome: Option<Outcome>,
    start: Instant,
}

impl Daemon {
    /// A cleaner for the fsd on `fsd_socket`, running `config` (already
    /// loaded from `source`, with `overrides` applied).
    pub fn new(
        fsd_socket: &Path,
        source: Source,
        overrides: Overrides,
        config: Config,
        env_logging: bool,
    ) -> Daemon {
        let status = Status {
            pid: std::process::id(),
            fsd_socket: fsd_socket.display().to_string(),
            mode: Mode::Idle.name().into(),
            policy: config.selection_policy.name().into(),
            config_file: config.origin.file.as_ref().map(|f| f.display().to_string()),
            ..Status::default()
        };
        Daemon {
            fsd_socket: fsd_socket.to_path_buf(),
            device: None,
            one_shot: false,
            source,
            overrides,
            config,
            env_logging,
            params: None,
            geometry: None,
            client: None,
            ever_connected: false,
            schedule: Schedule::new(),
            history: History::default(),
            status: Arc::new(Mutex::new(status)),
            trouble: None,
            set_suinfo_unsupported: false,
            last_outcome: None,
            start: Instant::now(),
        }
    }

    /// Cleans only while the fsd on the socket serves `device` (see
    /// [`lfs_proto::target::Resolved::device`]).
    pub fn serving(mut self, device: Option<PathBuf>) -> Daemon {
        self.device = device;
        self
    }

    /// For a caller that runs [`Daemon::once`] and reports its error
    /// itself: failures are not logged as retried.
    pub fn one_shot(mut self) -> Daemon {
        self.one_shot = true;
        self
    }

    /// The status the control socket reports, kept current by the loop.
    pub fn status(&self) -> Arc<Mutex<Status>> {
        Arc::clone(&self.status)
    }

    /// The running configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn with_status(&self, f: impl FnOnce(&mut Status)) {
        f(&mut self.status.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// Runs until a [`Event::Stop`] (or every sender is gone). Returns an
    /// error only for a configuration that does not fit the filesystem
    /// when first connected (see the module doc).
    pub fn run(&mut self, events: &Receiver<Event>) -> Result<(), ConfigError> {
        info!(
            "cleaning the filesystem served on {} with policy {}",
            self.fsd_socket.display(),
            self.config.selection_policy.name()
        );
        loop {
            let now = self.now();
            if self.schedule.is_due(now) {
                self.step(now)?;
            }
            self.with_status(|s| s.mode = self.schedule.mode().name().into());
            let wait = if self.schedule.mode() == Mode::Suspended {
                self.config.clean_check_interval
            } else {
                self.schedule.due().saturating_sub(self.now())
            };
            match events.recv_timeout(wait) {
                Ok(Event::Stop(why)) => {
                    info!("{why}: exiting");
                    return Ok(());
                }
                Ok(Event::Reload) => {
                    info!("SIGHUP: reloading the configuration");
                    let _ = self.reload();
                }
                Ok(Event::Control(cmd, reply)) => {
                    let answer = self.control(cmd);
                    let _ = reply.send(answer);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
    }

    /// Connects if not connected; logs the connection (and that it is
    /// back after a loss).
    fn client(&mut self) -> Result<&mut Client, Failure> {
        self.connect()?;
        self.client.as_mut().ok_or_else(|| {
            Failure::Connect(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "not connected",
            ))
        })
    }

    fn connect(&mut self) -> Result<(), Failure> {
        if self.client.is_none() {
            let mut c = Client::connect(&self.fsd_socket).map_err(Failure::Connect)?;
            self.check_serves(&mut c)?;
            if self.ever_connected {
                info!("connection to fsd on {} is back", self.fsd_socket.display());
            } else {
                info!("connected to fsd on {}", self.fsd_socket.display());
            }
            self.ever_connected = true;
            self.with_status(|s| s.connected = true);
            self.client = Some(c);
            self.tell_strict_protection();
        }
        Ok(())
    }

    /// With `strict_protection`, tells fsd at once (an expiry-only
    /// CLEAN_SEGMENTS with the flag), not at the first pass: until then
    /// fsd would delete young checkpoints if space ran short.
    fn tell_strict_protection(&mut self) {
        if !self.config.strict_protection {
            return;
        }
        let req = lfs_proto::msg::CleanSegments {
            protection_s: crate::config::protection_seconds(self.config.protection_period),
            segments: Vec::new(),
            warm: Vec::new(),
            flags: lfs_proto::msg::CLEAN_STRICT_PROTECTION,
        };
        if let Some(c) = self.client.as_mut() {
            if let Err(e) = c.call(&req) {
                warn!("telling fsd to keep the protection period strictly: {e}");
            }
        }
    }

    /// Refuses an fsd that serves another device than the one named.
    fn check_serves(&self, c: &mut Client) -> Result<(), Failure> {
        let Some(device) = &self.device else {
            return Ok(());
        };
        let sup = c.call(&GetSuper).map_err(|error| {
            Failure::Request(PassError {
                request: "GET_SUPER".into(),
                error,
            })
        })?;
        if lfs_proto::target::same_device(device, &sup.device) {
            return Ok(());
        }
        Err(Failure::Connect(std::io::Error::other(format!(
            "the fsd on {} serves {}, not {}: not cleaning it",
            self.fsd_socket.display(),
            sup.device,
            device.display()
        ))))
    }

    /// GET_SUSTAT, and the configuration resolved against its geometry.
    fn sustat(&mut self) -> Result<Result<(Sustat, Params), ConfigError>, Failure> {
        let st = self.client()?.call(&GetSustat).map_err(|error| {
            Failure::Request(PassError {
                request: "GET_SUSTAT".into(),
                error,
            })
        })?;
        let g = Geometry::from(&st);
        if self.geometry != Some(g) {
            if self.geometry.is_some() {
                info!(
                    "the filesystem's geometry changed ({} segments of {} blocks of {} bytes); forgetting what earlier passes saw",
                    g.nsegs, g.blocks_per_segment, g.block_size
                );
                self.history.clear();
            }
            self.geometry = Some(g);
        }
        Ok(match self.config.resolve(&g) {
            Ok(p) => {
                self.with_status(|s| {
                    s.nsegs = st.nsegs;
                    s.nclean = st.nclean;
                    s.min_clean = p.min_clean;
                    s.max_clean = p.max_clean;
                });
                self.params = Some(p.clone());
                Ok((st, p))
            }
            Err(e) => Err(e),
        })
    }

    fn step(&mut self, now: Duration) -> Result<(), ConfigError> {
        let (st, params) = match self.sustat() {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => match self.params.clone() {
                // The geometry changed under a running configuration:
                // keep the last parameters that fitted.
                Some(old) => {
                    error!("{e}; keeping the previous settings");
                    self.schedule.failed_slowly(now, old.retry_interval);
                    return Ok(());
                }
                None => return Err(e),
            },
            Err(f) => {
                self.fail(now, &f);
                return Ok(());
            }
        };
        let before = self.schedule.mode();
        let Some(effort) = self
            .schedule
            .decide(now, st.nclean, st.space_waiters, &params)
        else {
            self.log_mode(before, &st, &params);
            self.recovered();
            return Ok(());
        };
        self.log_mode(before, &st, &params);
        let spec = self.spec(&params, effort, None);
        self.pass(now, &st, &spec, &params)
            .map_err(|f| self.fail(now, &f))
            .ok();
        Ok(())
    }

    fn log_mode(&self, before: Mode, st: &Sustat, p: &Params) {
        let after = self.schedule.mode();
        if before == after {
            return;
        }
        let why = match after {
            Mode::Mc if st.space_waiters > 0 => format!(
                "{} change(s) wait for space in fsd ({} clean segments): cleaning fast",
                st.space_waiters, st.nclean
            ),
            Mode::Mc => format!("{} clean segments, below min_clean_segments ({}): cleaning fast", st.nclean, p.min_clean),
            Mode::Normal => format!("{} clean segments, at least min_clean_segments ({}): cleaning at normal speed until max_clean_segments ({})", st.nclean, p.min_clean, p.max_clean),
            Mode::Idle => format!("{} clean segments, at least max_clean_segments ({}): idle", st.nclean, p.max_clean),
            Mode::Suspended => "suspended".into(),
        };
        info!("{why}");
    }

    fn spec(
        &self,
        p: &Params,
        effort: crate::schedule::Effort,
        protection_s: Option<u32>,
    ) -> PassSpec {
        PassSpec {
            protection_s: protection_s.unwrap_or(p.protection_s),
            strict_protection: p.strict_protection,
            policy: p.policy,
            effort,
            use_set_suinfo: p.use_set_suinfo && !self.set_suinfo_unsupported,
        }
    }

    /// Runs a pass and reschedules after it.
    fn pass(
        &mut self,
        now: Duration,
        st: &Sustat,
        spec: &PassSpec,
        p: &Params,
    ) -> Result<PassReport, Failure> {
        let wall = unix_now();
        self.connect()?;
        // `client()` would borrow all of self; the history is needed too.
        let (Some(client), history) = (self.client.as_mut(), &mut self.history) else {
            return Err(Failure::Connect(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "not connected",
            )));
        };
        let report = run_pass(client, st, spec, history, wall).map_err(Failure::Request)?;
        self.recovered();
        if report.set_suinfo_unsupported && !self.set_suinfo_unsupported {
            warn!("fsd answered ENOTTY to SET_SUINFO: deferred segments are not marked young (use_set_suinfo has no effect with this fsd)");
            self.set_suinfo_unsupported = true;
        }
        match report.outcome {
            Outcome::Cleaned => {
                info!("{}", report.summary());
                self.schedule.cleaned(now, p);
            }
            Outcome::Deferred => {
                info!(
                    "{}; next try in {}",
                    report.summary(),
                    format_duration(p.retry_interval)
                );
                self.schedule.deferred(now, p);
            }
            Outcome::NoCandidates => {
                if self.last_outcome != Some(Outcome::NoCandidates) {
                    info!(
                        "{}; next try in {}",
                        report.summary(),
                        format_duration(p.retry_interval)
                    );
                }
                self.schedule.deferred(now, p);
            }
        }
        self.last_outcome = Some(report.outcome);
        self.with_status(|s| s.record(&report, wall));
        Ok(report)
    }

    /// Logs and schedules the retry of a failure (see the module doc).
    fn fail(&mut self, now: Duration, f: &Failure) {
        // EBUSY: the filesystem is frozen (a pass fsd runs itself when
        // space runs short is waited for, not refused). Not trouble: the
        // next pass comes after the usual interval, with no back-off and
        // no warning.
        if f.errno() == Some(nix::libc::EBUSY) && !self.one_shot {
            debug!("fsd is busy (frozen); next pass after the usual interval");
            if let Some(p) = self.params.clone() {
                self.schedule.cleaned(now, &p);
            }
            return;
        }
        let (first, cap) = (self.config.cleaning_interval, self.config.retry_interval);
        let slow = matches!(f.errno(), Some(nix::libc::EROFS | nix::libc::ENOTTY));
        let wait = if slow {
            self.schedule.failed_slowly(now, cap)
        } else {
            self.schedule.failed(now, first, cap)
        };
        let socket = self.fsd_socket.display().to_string();
        let message = match f {
            Failure::Connect(e) if self.ever_connected => {
                format!("lost fsd on {socket} ({e}); reconnecting")
            }
            Failure::Connect(e) => format!("cannot reach fsd on {socket} ({e})"),
            Failure::Request(
                e @ PassError {
                    error: ClientError::Errno { code, .. },
                    ..
                },
            ) => {
                let hint = match *code {
                    nix::libc::EROFS => "; the filesystem is read-only, cleaning waits",
                    nix::libc::ENOTTY => "; this fsd cannot clean yet",
                    nix::libc::EBUSY => "; the filesystem is frozen",
                    nix::libc::ENOSPC => "; no space even for cleaning",
                    _ => "",
                };
                format!("{e}{hint}")
            }
            Failure::Request(e) => {
                self.client = None;
                format!("lost fsd on {socket} ({e}); reconnecting")
            }
        };
        let lost = self.client.is_none() || matches!(f, Failure::Connect(_));
        let cause = f.cause();
        if self.one_shot {
            debug!("{message}");
        } else if self.trouble.as_deref() == Some(cause.as_str()) {
            debug!(
                "still failing: {message}; retrying in {}",
                format_duration(wait)
            );
        } else {
            warn!(
                "{message}; retrying in {} (then backing off up to {})",
                format_duration(wait),
                format_duration(cap)
            );
            self.trouble = Some(cause);
        }
        // One update, so that a reader never sees the connection lost
        // without its error.
        self.with_status(|s| {
            if lost {
                s.connected = false;
            }
            s.last_error = Some(message);
            s.last_error_unix = Some(unix_now());
        });
    }

    fn recovered(&mut self) {
        if let Some(cause) = self.trouble.take() {
            info!("recovered ({cause} no longer)");
        }
    }

    /// Rereads the configuration; on an error keeps the running one and
    /// logs why. Returns the keys that changed.
    pub fn reload(&mut self) -> Result<Vec<&'static str>, String> {
        let new = match crate::config::load(&self.source) {
            Ok(c) => self.overrides.apply(c),
            Err(e) => {
                error!("reload failed, keeping the running configuration: {e}");
                return Err(e.to_string());
            }
        };
        let params = match self.geometry.map(|g| new.resolve(&g)) {
            Some(Err(e)) => {
                error!("reload failed, keeping the running configuration: {e}");
                return Err(e.to_string());
            }
            Some(Ok(p)) => Some(p),
            None => None,
        };
        let changed = self.config.changed_keys(&new);
        let from = new
            .origin
            .file
            .as_ref()
            .map_or("built-in defaults".to_owned(), |f| f.display().to_string());
        if !self.env_logging {
            log::set_max_level(new.log_priority);
        }
        self.with_status(|s| {
            s.policy = new.selection_policy.name().into();
            s.config_file = new.origin.file.as_ref().map(|f| f.display().to_string());
        });
        self.config = new;
        if params.is_some() {
            self.params = params;
        }
        if changed.is_empty() {
            info!("reloaded {from}: nothing changed");
        } else {
            info!("reloaded {from}: changed {}", changed.join(", "));
        }
        Ok(changed)
    }

    /// One pass at normal speed now, whatever the marks say (`--once`,
    /// `fsctl clean`); `opts` override the configuration.
    pub fn once(&mut self, opts: OnceOptions) -> Result<PassReport, OnceError> {
        let OnceOptions {
            segments,
            protection_s,
            min_reclaimable,
        } = opts;
        let now = self.now();
        let (st, p) = match self.sustat() {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => return Err(OnceError::Config(e)),
            Err(f) => {
                self.fail(now, &f);
                return Err(match f {
                    Failure::Connect(e) => OnceError::NoFsd(format!(
                        "no fsd answers on {}: {}",
                        self.fsd_socket.display(),
                        lfs_common::report::io_reason(&e)
                    )),
                    Failure::Request(e) => OnceError::Request(e),
                });
            }
        };
        let mut e = effort(Mode::Normal, &p);
        if let Some(n) = segments {
            e.nsegments = n;
        }
        if let Some(a) = min_reclaimable {
            // As min_reclaimable_blocks: of a segment's blocks, rounding
            // up; at most a segment (more would defer every pass).
            let g = Geometry::from(&st);
            let bps = u64::from(g.blocks_per_segment);
            e.min_reclaimable = a.resolve(bps, u64::from(g.block_size)).min(bps);
        }
        let spec = self.spec(&p, e, protection_s);
        let due = self.schedule.clone();
        let result = self.pass(now, &st, &spec, &p);
        // A one-off pass does not move the regular schedule.
        self.schedule = due;
        result.map_err(|f| {
            self.fail(now, &f);
            match f {
                Failure::Connect(e) => OnceError::NoFsd(lfs_common::report::io_reason(&e)),
                Failure::Request(e) => OnceError::Request(e),
            }
        })
    }

    fn control(&mut self, cmd: Command) -> Reply {
        match cmd {
            Command::Status => Reply::status(
                self.status
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone(),
            ),
            Command::Suspend => {
                self.schedule.suspend();
                self.with_status(|s| s.mode = Mode::Suspended.name().into());
                info!("suspended by fsctl clean --suspend");
                Reply::message("suspended")
            }
            Command::Resume => {
                self.schedule.resume(self.now());
                info!("resumed by fsctl clean --resume");
                Reply::message("resumed")
            }
            Command::Reload => match self.reload() {
                Ok(keys) if keys.is_empty() => Reply::message("reloaded: nothing changed"),
                Ok(keys) => Reply::message(&format!("reloaded: changed {}", keys.join(", "))),
                Err(e) => Reply::error(&format!(
                    "reload failed, the running configuration stays: {e}"
                )),
            },
            Command::Once {
                segments,
                protection_period,
                min_reclaimable,
            } => {
                let min_reclaimable = match min_reclaimable.as_deref().map(parse_amount) {
                    None => None,
                    Some(Ok(a)) => Some(a),
                    Some(Err(e)) => return Reply::error(&format!("min_reclaimable: {e}")),
                };
                let opts = OnceOptions {
                    segments: segments.map(|n| n as usize),
                    protection_s: protection_period.map(|secs| {
                        protection_seconds(
                            Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX),
                        )
                    }),
                    min_reclaimable,
                };
                match self.once(opts) {
                    Ok(r) => Reply::report(r),
                    Err(e) => Reply::error(&e.to_string()),
                }
            }
        }
    }
}
