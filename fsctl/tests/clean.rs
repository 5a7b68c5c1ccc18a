//! `fsctl clean` end to end: the fsctl binary against a cleanerd (the
//! library's daemon and control socket, in this process) and the fake
//! fsd, and against the fake fsd alone.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::mpsc::channel;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cleanerd::config::{parse, Source};
use cleanerd::control::ControlServer;
use cleanerd::daemon::{unix_now, Daemon, Event, Overrides};
use cleanerd::fake::{FakeFs, FakeServer, FakeState};

const FSCTL: &str = env!("CARGO_BIN_EXE_fsctl");

fn fake(dir: &Path) -> (PathBuf, FakeFs, FakeServer) {
    let sock = dir.join("fsd.sock");
    let mut state = FakeState::new(10, 100);
    for i in 0..10 {
        state.dirty(i, unix_now() - 100 + i, 40);
    }
    let fs = FakeFs::new(state);
    let server = FakeServer::start(&sock, fs.clone()).unwrap();
    (sock, fs, server)
}

fn fsctl(args: &[&str], target: &Path) -> Output {
    Command::new(FSCTL)
        .arg("clean")
        .args(args)
        .arg(target)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A cleanerd that only cleans when asked (both marks 0).
struct Cleaner {
    events: std::sync::mpsc::Sender<Event>,
    thread: Option<JoinHandle<()>>,
}

fn cleaner(sock: &Path) -> Cleaner {
    // An explicit file: a reload must not read the machine's /etc/lfs.
    let text = "min_clean_segments = 0\nmax_clean_segments = 0\nclean_check_interval = 0.05\n";
    let file = sock.with_extension("conf");
    std::fs::write(&file, text).unwrap();
    let config = parse(text, &file).unwrap();
    let source = Source::Explicit(file);
    let mut daemon = Daemon::new(sock, source, Overrides::default(), config, true);
    let (tx, rx) = channel();
    let path = lfs_proto::path::cleanerd_socket_path(sock).unwrap();
    let control = ControlServer::start(&path, daemon.status(), tx.clone()).unwrap();
    let thread = std::thread::spawn(move || {
        let _ = daemon.run(&rx);
        control.stop();
    });
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    Cleaner {
        events: tx,
        thread: Some(thread),
    }
}

impl Drop for Cleaner {
    fn drop(&mut self) {
        let _ = self.events.send(Event::Stop("test"));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn status_suspend_once_resume_reload_through_cleanerd() {
    let dir = tempfile::tempdir().unwrap();
    let (sock, fs, _server) = fake(dir.path());
    let _c = cleaner(&sock);

    let o = fsctl(&["--status"], &sock);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("mode:         idle") || t.contains("mode:"),
        "{t}"
    );
    assert!(t.contains("policy:       timestamp"), "{t}");
    assert!(t.contains("last error:   none"), "{t}");

    let o = fsctl(&["--suspend"], &sock);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "suspended");
    let o = fsctl(&["--status", "--json"], &sock);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["mode"], "suspended");

    let o = fsctl(
        &["--once", "--segments", "3", "--protection-period", "2m"],
        &sock,
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("cleaned 3 segment(s) [0, 1, 2]"),
        "{}",
        text(&o)
    );
    assert_eq!(fs.state().cleanings(), [vec![0, 1, 2]]);
    assert!(fs.state().calls.iter().any(|c| matches!(
        c,
        cleanerd::fake::Call::Clean { protection_s: 120, segments, .. } if segments.len() == 3
    )));

    let o = fsctl(&["--status", "--json"], &sock);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["passes"], 1);
    assert_eq!(v["totals"]["segments_freed"], 3);
    assert_eq!(v["totals"]["blocks_moved"], 120);
    assert_eq!(v["recent"][0]["segments"], 3);
    let t = text(&fsctl(&["--status"], &sock));
    assert!(t.contains("3 segments freed, 120 blocks moved"), "{t}");

    let o = fsctl(&["--resume"], &sock);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "resumed");
    // The in-process cleaner reads the default configuration source
    // (none on a test machine): a reload succeeds.
    let o = fsctl(&["--reload"], &sock);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("reloaded"), "{}", text(&o));
}

#[test]
fn without_cleanerd_once_cleans_through_fsd_and_the_rest_fail() {
    let dir = tempfile::tempdir().unwrap();
    let (sock, fs, _server) = fake(dir.path());
    for action in ["--status", "--suspend", "--resume", "--reload"] {
        let o = fsctl(&[action], &sock);
        assert_eq!(o.status.code(), Some(1), "{action}: {}", text(&o));
        let t = text(&o);
        assert!(
            t.contains("no cleanerd is running") && t.contains("fsd.cleanerd.sock"),
            "{t}"
        );
    }
    assert!(fs.state().calls.is_empty());
    let o = fsctl(&["--once", "--json"], &sock);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["outcome"], "cleaned");
    assert_eq!(v["cleaned"], serde_json::json!([0, 1]));
    assert_eq!(fs.state().cleanings(), [vec![0, 1]]);
}

#[test]
fn usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("fsd.sock");
    // No action is not an error: it is --once, as nilfs-clean.
    for args in [
        vec!["-m", "lots"],
        vec!["--status", "-m", "0"],
        vec!["--status", "--suspend"],
        vec!["--status", "--segments", "2"],
        vec!["--once", "--segments", "0"],
        vec!["--once", "--protection-period", "5 years"],
    ] {
        let o = fsctl(&args, &sock);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
    }
    let o = fsctl(&["--once"], &dir.path().join("missing"));
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("missing"), "{}", text(&o));
}
