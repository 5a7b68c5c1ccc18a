//! The `cleanerd` binary against the fake fsd: --help, exit statuses,
//! --once, SIGHUP with a bad file, SIGTERM, a second cleanerd refused.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cleanerd::control::{request, Command as Ctl};
use cleanerd::daemon::unix_now;
use cleanerd::fake::{FakeFs, FakeServer, FakeState};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const BIN: &str = env!("CARGO_BIN_EXE_cleanerd");
const PATIENCE: Duration = Duration::from_secs(10);

fn wait_until(what: &str, cond: impl FnMut() -> bool) {
    cleanerd::fake::wait_until(what, PATIENCE, cond);
}

struct Fixture {
    dir: tempfile::TempDir,
    sock: PathBuf,
    conf: PathBuf,
    fs: FakeFs,
    _server: FakeServer,
}

fn fixture(conf: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("fsd.sock");
    let path = dir.path().join("cleanerd.conf");
    std::fs::write(&path, conf).unwrap();
    let mut state = FakeState::new(10, 100);
    for i in 0..10 {
        state.dirty(i, unix_now() - 100 + i, 40);
    }
    let fs = FakeFs::new(state);
    let server = FakeServer::start(&sock, fs.clone()).unwrap();
    Fixture {
        sock,
        conf: path,
        fs,
        _server: server,
        dir,
    }
}

fn cleanerd_sock(f: &Fixture) -> PathBuf {
    f.dir.path().join("fsd.cleanerd.sock")
}

fn spawn(f: &Fixture) -> Child {
    Command::new(BIN)
        .arg("-c")
        .arg(&f.conf)
        .arg(&f.sock)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `child` to exit; its status code and stderr.
fn finish(mut child: Child) -> (i32, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code().unwrap_or(-1), err);
        }
        if start.elapsed() > PATIENCE {
            let _ = child.kill();
            panic!("cleanerd did not exit");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn signal(child: &Child, sig: Signal) {
    kill(Pid::from_raw(child.id() as i32), sig).unwrap();
}

#[test]
fn help_lists_the_options() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for opt in [
        "--config",
        "--protection-period",
        "--once",
        "--log-level",
        "--verbose",
        "<TARGET>",
    ] {
        assert!(text.contains(opt), "{opt} missing from:\n{text}");
    }
    let out = Command::new(BIN).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_bad_or_missing_file_exits_2_naming_file_line_and_key() {
    let f = fixture("\nnsegments_per_clean = 0\n");
    let (code, err) = finish(spawn(&f));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cleanerd.conf:2: nsegments_per_clean: 0 is out of range"),
        "{err}"
    );
    let out = Command::new(BIN)
        .args(["-c", "/nonexistent/cleanerd.conf"])
        .arg(&f.sock)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent/cleanerd.conf: cannot read it"),
        "{err}"
    );
}

#[test]
fn once_cleans_and_prints_what_it_did() {
    let f = fixture("");
    let out = Command::new(BIN)
        .args(["--once", "-p", "90", "-c"])
        .arg(&f.conf)
        .arg(&f.sock)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("cleaned 2 segment(s) [0, 1]"), "{text}");
    assert_eq!(f.fs.state().cleanings(), [vec![0, 1]]);
    assert!(f.fs.state().calls.iter().any(|c| matches!(
        c,
        cleanerd::fake::Call::Clean {
            protection_s: 90,
            ..
        }
    )));
    // timestamp, the default, leaves placement to fsd.
    assert!(f.fs.state().calls.iter().all(|c| !matches!(
        c,
        cleanerd::fake::Call::Clean { flags, .. } if *flags != 0
    )));
    let out = Command::new(BIN)
        .args(["--once", "-c"])
        .arg(&f.conf)
        .arg(f.dir.path().join("nothing.sock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

/// declining-cost asks fsd for its placement on every request: file data
/// separated by lifespan, young moved blocks to the warm head.
#[test]
fn declining_cost_asks_for_its_placement() {
    let f = fixture("selection_policy = \"declining-cost\"\n");
    let out = Command::new(BIN)
        .args(["--once", "-c"])
        .arg(&f.conf)
        .arg(&f.sock)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = lfs_proto::msg::CLEAN_SEPARATE_WRITES | lfs_proto::msg::CLEAN_WARM_YOUNG;
    let s = f.fs.state();
    let flags: Vec<u32> = s
        .calls
        .iter()
        .filter_map(|c| match c {
            cleanerd::fake::Call::Clean { flags, .. } => Some(*flags),
            _ => None,
        })
        .collect();
    assert!(flags.len() >= 2, "{:?}", s.calls);
    assert!(flags.iter().all(|&f| f == want), "{flags:?}");
}

#[test]
fn sighup_with_a_bad_file_keeps_running_and_sigterm_exits_0() {
    let f =
        fixture("min_clean_segments = 0\nmax_clean_segments = 0\nclean_check_interval = 0.05\n");
    let child = spawn(&f);
    let ctl = cleanerd_sock(&f);
    wait_until("the control socket", || {
        request(&ctl, &Ctl::Status).is_ok_and(|r| r.status.is_some_and(|s| s.nsegs == 10))
    });
    std::fs::write(&f.conf, "selection_policy = 7\n").unwrap();
    signal(&child, Signal::SIGHUP);
    std::thread::sleep(Duration::from_millis(200));
    let st = request(&ctl, &Ctl::Status).unwrap().status.unwrap();
    assert_eq!(st.policy, "timestamp");
    let started = Instant::now();
    signal(&child, Signal::SIGTERM);
    let (code, err) = finish(child);
    assert_eq!(code, 0, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        err.contains("reload failed, keeping the running configuration")
            && err.contains("cleanerd.conf:1: selection_policy: must be a string, not integer"),
        "{err}"
    );
    assert!(err.contains("SIGTERM: exiting"), "{err}");
    assert!(!ctl.exists(), "the control socket was not removed");
}

#[test]
fn a_second_cleanerd_is_refused_with_exit_3() {
    let f = fixture("min_clean_segments = 0\nmax_clean_segments = 0\n");
    let first = spawn(&f);
    let ctl = cleanerd_sock(&f);
    wait_until("the control socket", || request(&ctl, &Ctl::Status).is_ok());
    let (code, err) = finish(spawn(&f));
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("another cleanerd is running"), "{err}");
    signal(&first, Signal::SIGINT);
    assert_eq!(finish(first).0, 0);
    // A socket left by a cleanerd that died is taken over.
    let _stale = std::os::unix::net::UnixListener::bind(&ctl).map(drop);
    assert!(Path::new(&ctl).exists());
    let again = spawn(&f);
    wait_until("the control socket", || request(&ctl, &Ctl::Status).is_ok());
    signal(&again, Signal::SIGTERM);
    assert_eq!(finish(again).0, 0);
}
