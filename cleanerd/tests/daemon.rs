//! The daemon loop, in-process, against the fake fsd over a real socket:
//! hysteresis, deferral with and without SET_SUINFO, back-off on EIO,
//! reconnecting after fsd restarts, EAGAIN, control commands.

use std::path::PathBuf;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use cleanerd::config::{parse, ConfigError, Source};
use cleanerd::control::{Command, Reply, Status};
use cleanerd::daemon::{unix_now, Daemon, Event, Overrides};
use cleanerd::fake::{Call, FakeFs, FakeServer, FakeState};

const EIO: i32 = nix::libc::EIO;
/// Longest wait for something the loop should do within milliseconds.
const PATIENCE: Duration = Duration::from_secs(10);

/// Fast intervals, so that a test takes a fraction of a second.
const FAST: &str = r#"
clean_check_interval = 0.02
cleaning_interval = 0.02
mc_cleaning_interval = 0.01
retry_interval = 0.3
protection_period = 60
"#;

fn wait_until(what: &str, cond: impl FnMut() -> bool) {
    cleanerd::fake::wait_until(what, PATIENCE, cond);
}

struct Rig {
    _dir: tempfile::TempDir,
    sock: PathBuf,
    conf: PathBuf,
    fs: FakeFs,
    server: Option<FakeServer>,
    events: Option<Sender<Event>>,
    status: Arc<Mutex<Status>>,
    thread: Option<JoinHandle<Result<(), ConfigError>>>,
}

impl Rig {
    /// A fake with `state`, and a daemon running the configuration FAST
    /// plus `extra` from a file.
    fn new(state: FakeState, extra: &str) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("fsd.sock");
        let conf = dir.path().join("cleanerd.conf");
        std::fs::write(&conf, format!("{FAST}{extra}")).unwrap();
        let fs = FakeFs::new(state);
        let server = FakeServer::start(&sock, fs.clone()).unwrap();
        let source = Source::Explicit(conf.clone());
        let config = cleanerd::config::load(&source).unwrap();
        let mut daemon = Daemon::new(&sock, source, Overrides::default(), config, true);
        let status = daemon.status();
        let (tx, rx) = channel();
        let thread = std::thread::spawn(move || daemon.run(&rx));
        Rig {
            _dir: dir,
            sock,
            conf,
            fs,
            server: Some(server),
            events: Some(tx),
            status,
            thread: Some(thread),
        }
    }

    fn status(&self) -> Status {
        self.status.lock().unwrap().clone()
    }

    fn control(&self, cmd: Command) -> Reply {
        let (tx, rx) = channel();
        self.events
            .as_ref()
            .unwrap()
            .send(Event::Control(cmd, tx))
            .unwrap();
        rx.recv_timeout(PATIENCE).unwrap()
    }

    fn stop(&mut self) -> Result<(), ConfigError> {
        if let Some(tx) = self.events.take() {
            let _ = tx.send(Event::Stop("test"));
        }
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.stop();
        }
    }
}

/// `nsegs` segments of 100 blocks; `dirty` of them dirty (segment i last
/// written i seconds after an hour ago, so lower numbers are older),
/// `nlive` live.
fn state(nsegs: u64, dirty: u64, nlive: u32) -> FakeState {
    let mut s = FakeState::new(nsegs, 100);
    let base = unix_now() - 3600;
    for i in 0..dirty {
        s.dirty(i, base + i, nlive);
    }
    s
}

#[test]
fn hysteresis_cleans_fast_below_min_then_normally_up_to_max() {
    // 20 segments, 4 clean: below min (5), so mc: 2 segments a pass;
    // then 6 clean: normal, 1 a pass, until max (8).
    let mut rig = Rig::new(
        state(20, 16, 50),
        "min_clean_segments = 5\nmax_clean_segments = \"40%\"\nnsegments_per_clean = 1\nmc_nsegments_per_clean = 2\n",
    );
    wait_until("cleaning up to max", || rig.fs.state().nclean() >= 8);
    // Idle now: more checks, no more cleaning.
    let before = rig.fs.state().checks();
    wait_until("idle checks", || rig.fs.state().checks() >= before + 3);
    assert_eq!(rig.fs.state().cleanings(), [vec![0, 1], vec![2], vec![3]]);
    assert_eq!(rig.fs.state().nclean(), 8);
    let st = rig.status();
    assert_eq!(st.mode, "idle");
    assert_eq!((st.min_clean, st.max_clean), (5, 8));
    assert_eq!(st.totals.segments_freed, 4);
    assert_eq!(st.totals.blocks_moved, 4 * 50);
    assert_eq!(st.passes, 3);
    // Each pass first expired old checkpoints with the protection period.
    let calls = rig.fs.state().calls.clone();
    let empty_cleans = calls
        .iter()
        .filter(
            |c| matches!(c, Call::Clean { protection_s: 60, segments, .. } if segments.is_empty()),
        )
        .count();
    assert_eq!(empty_cleans, 3);
    assert!(rig.stop().is_ok());
}

#[test]
fn deferral_without_set_suinfo_cleans_nothing_and_waits() {
    // 99 of 100 blocks live: 1 reclaimable per segment, 2 needed (10 dirty
    // of 10: mc mode, 4 segments a pass).
    let mut rig = Rig::new(
        state(10, 10, 99),
        "use_set_suinfo = false\nmc_min_reclaimable_blocks = 2\n",
    );
    wait_until("a deferral", || rig.status().totals.deferrals >= 1);
    let st = rig.status();
    let last = st.last_pass.unwrap();
    assert_eq!(last.chosen, [0, 1, 2, 3]);
    assert_eq!((last.reclaimable, last.needed), (4, 8));
    assert!(!last.marked_young);
    let s = rig.fs.state();
    assert!(s.cleanings().is_empty());
    assert!(!s.calls.iter().any(|c| matches!(c, Call::SetSuinfo(_))));
    drop(s);
    // In mc mode (space is short) the retry comes after the check
    // interval, not retry_interval: a minute's pause left writers
    // waiting for space. Deferred again, it still cleans nothing.
    wait_until("a second deferral", || rig.status().totals.deferrals >= 2);
    assert!(rig.fs.state().cleanings().is_empty());
    assert!(rig.stop().is_ok());
}

#[test]
fn writers_waiting_for_space_get_a_pass_that_is_never_deferred() {
    // The same segments, but fsd reports a change waiting for space:
    // cleaned at once, whatever they net.
    let mut st = state(10, 10, 99);
    st.space_waiters = 1;
    let mut rig = Rig::new(
        st,
        "use_set_suinfo = false\nmc_min_reclaimable_blocks = 2\n",
    );
    wait_until("a cleaning", || !rig.fs.state().cleanings().is_empty());
    assert_eq!(rig.status().totals.deferrals, 0);
    assert!(rig.stop().is_ok());
}

#[test]
fn deferral_with_set_suinfo_marks_the_chosen_segments_young() {
    let mut rig = Rig::new(state(10, 10, 99), "mc_min_reclaimable_blocks = 2\n");
    // Two deferrals (in mc mode they come a check interval apart).
    wait_until("two deferrals", || rig.status().totals.deferrals >= 2);
    let now = unix_now();
    let s = rig.fs.state();
    let updates: Vec<Vec<u64>> = s
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::SetSuinfo(items) => Some(items.iter().map(|u| u.segnum).collect()),
            _ => None,
        })
        .collect();
    assert!(updates.len() >= 2, "{updates:?}");
    // The first marked the four oldest young; the next pass (timestamp
    // policy) chose the four next-oldest.
    assert_eq!(updates[0], [0, 1, 2, 3]);
    assert_eq!(updates[1], [4, 5, 6, 7]);
    for seg in &s.segments[..8] {
        assert!(seg.last_mod + 5 >= now, "{seg:?} not marked young");
    }
    assert!(s.cleanings().is_empty());
    drop(s);
    assert!(rig.status().last_pass.unwrap().marked_young);
    assert!(rig.stop().is_ok());
}

#[test]
fn errors_back_off_are_reported_and_recover() {
    let mut rig = Rig::new(state(10, 10, 50), "");
    rig.fs.state().fail_all = Some(EIO);
    wait_until("the error in the status", || {
        rig.status().last_error.is_some_and(|e| e.contains("EIO"))
    });
    let before = rig.fs.state().checks();
    // Waits of 0.02, 0.04, 0.08, 0.16, 0.3, 0.3 s: in one second at most
    // 7 more tries (a loop without back-off would make 50).
    std::thread::sleep(Duration::from_secs(1));
    let tries = rig.fs.state().checks() - before;
    assert!((2..=7).contains(&tries), "{tries} tries in a second");
    rig.fs.state().fail_all = None;
    wait_until("cleaning after the error", || {
        !rig.fs.state().cleanings().is_empty()
    });
    assert!(rig.stop().is_ok());
}

#[test]
fn reconnects_after_fsd_restarts() {
    let mut rig = Rig::new(
        state(10, 10, 50),
        "min_clean_segments = 0\nmax_clean_segments = 0\n",
    );
    wait_until("connected", || rig.status().connected);
    rig.server.take().unwrap().stop();
    wait_until("the loss noticed", || !rig.status().connected);
    let err = rig.status().last_error;
    assert!(
        err.as_ref().is_some_and(|e| e.contains("fsd.sock")),
        "{err:?}"
    );
    // While it is away the segments get dirty; a new fsd comes up.
    let fresh = state(10, 10, 50);
    *rig.fs.state() = fresh;
    rig.server = Some(FakeServer::start(&rig.sock, rig.fs.clone()).unwrap());
    wait_until("connected again", || rig.status().connected);
    assert!(rig.stop().is_ok());
}

#[test]
fn eagain_segments_are_skipped_this_pass() {
    let mut s = state(10, 10, 50);
    s.busy.insert(0);
    let mut rig = Rig::new(s, "");
    wait_until("a pass", || rig.status().passes >= 1);
    let last = rig.status().recent[0].clone();
    assert_eq!(last.segments, 4);
    let cleanings = rig.fs.state().cleanings();
    // All four at once (EAGAIN), then halves, the refused half halved
    // again, then another candidate (greedy order; all are alike here) in
    // place of the refused one.
    assert_eq!(
        cleanings[..6],
        [
            vec![0, 1, 2, 3],
            vec![0, 1],
            vec![0],
            vec![1],
            vec![2, 3],
            vec![4]
        ]
    );
    assert!(rig.stop().is_ok());
}

#[test]
fn control_commands_suspend_resume_once_and_reload() {
    let mut rig = Rig::new(
        state(10, 10, 50),
        "min_clean_segments = 0\nmax_clean_segments = 0\n",
    );
    wait_until("idle", || rig.status().nsegs == 10);
    let r = rig.control(Command::Suspend);
    assert!(r.ok, "{r:?}");
    assert_eq!(rig.status().mode, "suspended");
    // A one-off pass runs even when suspended or idle, at normal speed
    // (2 segments), or with the segments asked for.
    let r = rig.control(Command::Once {
        segments: Some(3),
        protection_period: Some(5.5),
        min_reclaimable: None,
    });
    let report = r.report.unwrap();
    assert_eq!(report.cleaned, [0, 1, 2]);
    assert!(rig.fs.state().calls.iter().any(
        |c| matches!(c, Call::Clean { protection_s: 6, segments, .. } if segments == &[0, 1, 2])
    ));
    assert_eq!(rig.status().mode, "suspended");
    assert!(rig.control(Command::Resume).ok);
    wait_until("idle again", || rig.status().mode == "idle");
    // A reload with a bad file keeps the running configuration.
    std::fs::write(&rig.conf, "selection_policy = \"fifo\"\n").unwrap();
    let r = rig.control(Command::Reload);
    assert!(!r.ok);
    let e = r.error.unwrap();
    assert!(
        e.contains("cleanerd.conf:1: selection_policy: unknown policy"),
        "{e}"
    );
    assert_eq!(rig.status().policy, "timestamp");
    std::fs::write(&rig.conf, format!("{FAST}selection_policy = \"greedy\"\n")).unwrap();
    let r = rig.control(Command::Reload);
    assert!(r.ok, "{r:?}");
    assert!(r.message.unwrap().contains("selection_policy"));
    assert_eq!(rig.status().policy, "greedy");
    assert!(rig.stop().is_ok());
}

#[test]
fn a_configuration_that_does_not_fit_the_filesystem_is_fatal_at_start() {
    let mut rig = Rig::new(state(10, 10, 50), "min_reclaimable_blocks = \"1M\"\n");
    let e = rig.stop().unwrap_err();
    assert_eq!(e.key.as_deref(), Some("min_reclaimable_blocks"));
    assert!(
        e.to_string()
            .contains("cleanerd.conf:7: min_reclaimable_blocks"),
        "{e}"
    );
}

#[test]
fn once_without_fsd_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("none.sock");
    // An explicit file: a reload must not read the machine's /etc/lfs.
    let file = dir.path().join("x.conf");
    std::fs::write(&file, "").unwrap();
    let config = parse("", &file).unwrap();
    let mut d = Daemon::new(
        &sock,
        Source::Explicit(file),
        Overrides::default(),
        config,
        true,
    );
    let e = d
        .once(cleanerd::daemon::OnceOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no fsd answers on") && e.contains("none.sock"),
        "{e}"
    );
}
