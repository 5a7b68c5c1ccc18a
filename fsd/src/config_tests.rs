//! Tests of the configuration file: every key, every error, and the
//! shipped `conf/fsd.toml`.

use super::*;

const FILE: &str = "/etc/lfs/test.toml";

fn ok(text: &str) -> Config {
    parse(text, Path::new(FILE)).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

/// Parses `text`, which must fail, and returns the error's message.
fn err(text: &str) -> ConfigError {
    match parse(text, Path::new(FILE)) {
        Ok(c) => panic!("{text:?} was accepted as {c:?}"),
        Err(e) => e,
    }
}

/// Asserts the error names the file, the line, the key and mentions
/// `reason`.
#[track_caller]
fn assert_err(text: &str, line: usize, key: &str, reason: &str) {
    let e = err(text);
    let shown = e.to_string();
    assert_eq!(e.line, Some(line), "{shown}");
    assert_eq!(e.key.as_deref(), Some(key), "{shown}");
    assert!(
        shown.starts_with(&format!("{FILE}:{line}: {key}: ")),
        "{shown}"
    );
    assert!(shown.contains(reason), "{shown:?} lacks {reason:?}");
}

#[test]
fn empty_file_gives_defaults() {
    assert_eq!(ok(""), Config::default());
    assert_eq!(ok("# only a comment\n\n"), Config::default());
    let d = Config::default();
    assert_eq!(d.checkpoint_interval, Duration::from_secs(5));
    assert_eq!(d.dirty_limit, 32 << 20);
    assert_eq!(d.space_wait, Duration::from_secs(30));
    assert_eq!(d.threads, 4);
    assert_eq!(d.socket, None);
    assert_eq!(d.log_level, LevelFilter::Info);
}

#[test]
fn checkpoint_interval_accepts_integers_and_decimals() {
    assert_eq!(
        ok("checkpoint_interval = 30").checkpoint_interval,
        Duration::from_secs(30)
    );
    assert_eq!(
        ok("checkpoint_interval = 0.5").checkpoint_interval,
        Duration::from_millis(500)
    );
    assert_eq!(
        ok("checkpoint_interval = 0.1").checkpoint_interval,
        MIN_CHECKPOINT_INTERVAL
    );
    assert_eq!(
        ok("checkpoint_interval = 86400").checkpoint_interval,
        MAX_CHECKPOINT_INTERVAL
    );
}

#[test]
fn checkpoint_interval_errors() {
    assert_err(
        "checkpoint_interval = 0",
        1,
        KEY_CHECKPOINT_INTERVAL,
        "out of range",
    );
    assert_err(
        "checkpoint_interval = -3",
        1,
        KEY_CHECKPOINT_INTERVAL,
        "out of range",
    );
    assert_err(
        "checkpoint_interval = 0.01",
        1,
        KEY_CHECKPOINT_INTERVAL,
        "out of range",
    );
    assert_err(
        "checkpoint_interval = 86401",
        1,
        KEY_CHECKPOINT_INTERVAL,
        "out of range",
    );
    assert_err(
        "checkpoint_interval = nan",
        1,
        KEY_CHECKPOINT_INTERVAL,
        "out of range",
    );
    assert_err(
        "checkpoint_interval = inf",
        1,
        KEY_CHECKPOINT_INTERVAL,
        "out of range",
    );
    assert_err(
        "\n\ncheckpoint_interval = \"5s\"",
        3,
        KEY_CHECKPOINT_INTERVAL,
        "must be a number of seconds, not string",
    );
}

#[test]
fn dirty_limit_accepts_bytes_and_suffixes() {
    assert_eq!(ok("dirty_limit = 1048576").dirty_limit, 1 << 20);
    assert_eq!(ok("dirty_limit = \"64M\"").dirty_limit, 64 << 20);
    assert_eq!(ok("dirty_limit = \"1G\"").dirty_limit, 1 << 30);
    assert_eq!(ok("dirty_limit = \"512MiB\"").dirty_limit, 512 << 20);
    assert_eq!(ok("dirty_limit = \"2048k\"").dirty_limit, 2 << 20);
    assert_eq!(ok("dirty_limit = \"1t\"").dirty_limit, 1 << 40);
}

#[test]
fn dirty_limit_errors() {
    assert_err("dirty_limit = -1", 1, KEY_DIRTY_LIMIT, "negative");
    assert_err(
        "dirty_limit = 1000",
        1,
        KEY_DIRTY_LIMIT,
        "below the minimum",
    );
    assert_err(
        "dirty_limit = \"512K\"",
        1,
        KEY_DIRTY_LIMIT,
        "below the minimum",
    );
    assert_err(
        "dirty_limit = \"M\"",
        1,
        KEY_DIRTY_LIMIT,
        "does not start with a number",
    );
    assert_err("dirty_limit = \"5X\"", 1, KEY_DIRTY_LIMIT, "unknown unit");
    assert_err(
        "dirty_limit = \"99999999999999999T\"",
        1,
        KEY_DIRTY_LIMIT,
        "too large",
    );
    assert_err("dirty_limit = 1.5", 1, KEY_DIRTY_LIMIT, "not float");
}

#[test]
fn threads_accepts_its_range() {
    assert_eq!(ok("threads = 1").threads, 1);
    assert_eq!(ok("threads = 64").threads, MAX_THREADS);
}

#[test]
fn threads_errors() {
    assert_err("threads = 0", 1, KEY_THREADS, "out of range (1 to 64)");
    assert_err("threads = 65", 1, KEY_THREADS, "out of range");
    assert_err("threads = -2", 1, KEY_THREADS, "out of range");
    assert_err(
        "threads = \"4\"",
        1,
        KEY_THREADS,
        "must be an integer, not string",
    );
}

#[test]
fn socket_accepts_absolute_paths() {
    assert_eq!(
        ok("socket = \"/run/lfs/data.sock\"").socket,
        Some(PathBuf::from("/run/lfs/data.sock"))
    );
}

#[test]
fn socket_errors() {
    assert_err(
        "socket = \"relative.sock\"",
        1,
        KEY_SOCKET,
        "not an absolute path",
    );
    assert_err("socket = \"/\"", 1, KEY_SOCKET, "does not name a file");
    let long = format!("socket = \"/{}\"", "s".repeat(SOCKET_PATH_MAX));
    assert_err(&long, 1, KEY_SOCKET, "at most 107");
    assert_err("socket = 5", 1, KEY_SOCKET, "must be a string, not integer");
}

#[test]
fn log_level_accepts_every_level() {
    for (name, level) in [
        ("off", LevelFilter::Off),
        ("error", LevelFilter::Error),
        ("warn", LevelFilter::Warn),
        ("info", LevelFilter::Info),
        ("debug", LevelFilter::Debug),
        ("TRACE", LevelFilter::Trace),
    ] {
        assert_eq!(ok(&format!("log_level = \"{name}\"")).log_level, level);
    }
}

#[test]
fn log_level_errors() {
    assert_err(
        "log_level = \"loud\"",
        1,
        KEY_LOG_LEVEL,
        "unknown log level",
    );
    assert_err("log_level = 3", 1, KEY_LOG_LEVEL, "must be a string");
}

#[test]
fn space_wait_accepts_seconds_from_zero_to_an_hour() {
    assert_eq!(ok("space_wait = 0").space_wait, Duration::ZERO);
    assert_eq!(
        ok("space_wait = 2.5").space_wait,
        Duration::from_millis(2500)
    );
    assert_eq!(ok("space_wait = 3600").space_wait, MAX_SPACE_WAIT);
}

#[test]
fn space_wait_errors() {
    assert_err("space_wait = -1", 1, KEY_SPACE_WAIT, "out of range");
    assert_err("space_wait = 3601", 1, KEY_SPACE_WAIT, "out of range");
    assert_err("space_wait = nan", 1, KEY_SPACE_WAIT, "out of range");
    assert_err(
        "space_wait = \"30s\"",
        1,
        KEY_SPACE_WAIT,
        "must be a number of seconds",
    );
}

#[test]
fn unknown_key_is_named_with_its_line() {
    assert_err(
        "threads = 2\ncheckpoint_intervall = 5\n",
        2,
        "checkpoint_intervall",
        "unknown key (the keys are checkpoint_interval, dirty_limit, space_wait, threads, socket, log_level)",
    );
    assert_err("\"quoted\" = 1", 1, "quoted", "unknown key");
    assert_err("a.b = 1", 1, "a", "unknown key");
    assert_err("x = 1\n[section]\nthreads = 2\n", 1, "x", "unknown key");
    assert_err("[section]\nthreads = 2\n", 1, "section", "unknown key");
}

#[test]
fn invalid_toml_names_file_and_line() {
    let e = err("threads = 2\nthreads = = 3\n");
    assert_eq!(e.key, None);
    assert_eq!(e.line, Some(2), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("{FILE}:2: not valid TOML")),
        "{e}"
    );
    let e = err("threads = 2\nthreads = 3\n");
    assert!(e.to_string().contains("not valid TOML"), "{e}");
}

#[test]
fn every_key_at_once() {
    let c = ok("checkpoint_interval = 1.5\n\
         dirty_limit = \"8M\"\n\
         space_wait = 2\n\
         threads = 8\n\
         socket = \"/tmp/x.sock\"\n\
         log_level = \"debug\"\n");
    assert_eq!(
        c,
        Config {
            checkpoint_interval: Duration::from_millis(1500),
            dirty_limit: 8 << 20,
            space_wait: Duration::from_secs(2),
            threads: 8,
            socket: Some(PathBuf::from("/tmp/x.sock")),
            log_level: LevelFilter::Debug,
        }
    );
}

#[test]
fn load_reports_unreadable_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let e = load(&Source::Explicit(missing.clone())).unwrap_err();
    assert!(e.to_string().contains("cannot read it"), "{e}");
    assert!(
        e.to_string().starts_with(&missing.display().to_string()),
        "{e}"
    );
    assert_eq!(e.file, Some(missing));

    let good = dir.path().join("good.toml");
    std::fs::write(&good, "threads = 3\n").unwrap();
    let (c, from) = load(&Source::Explicit(good.clone())).unwrap();
    assert_eq!(c.threads, 3);
    assert_eq!(from, Some(good));
}

#[test]
fn default_socket_is_named_after_the_device() {
    assert_eq!(
        default_socket_path(Path::new("/dev/vdb")).unwrap(),
        PathBuf::from("/run/lfs/vdb.sock")
    );
    assert_eq!(
        default_socket_path(Path::new("images/lfs.img")).unwrap(),
        PathBuf::from("/run/lfs/lfs.img.sock")
    );
    assert!(default_socket_path(Path::new("/")).is_err());
    let long = format!("/dev/{}", "d".repeat(SOCKET_PATH_MAX));
    assert!(default_socket_path(Path::new(&long))
        .unwrap_err()
        .contains("at most"));
}

#[test]
fn diff_names_changed_keys() {
    let old = Config::default();
    assert_eq!(diff(&old, &old), Changes::default());
    let new = Config {
        dirty_limit: 1 << 30,
        log_level: LevelFilter::Debug,
        threads: 9,
        space_wait: Duration::ZERO,
        ..Config::default()
    };
    assert_eq!(
        diff(&old, &new).changed,
        vec![KEY_DIRTY_LIMIT, KEY_SPACE_WAIT, KEY_THREADS, KEY_LOG_LEVEL]
    );
    let new = Config {
        checkpoint_interval: Duration::from_secs(1),
        socket: Some(PathBuf::from("/x.sock")),
        ..Config::default()
    };
    assert_eq!(
        diff(&old, &new).changed,
        vec![KEY_CHECKPOINT_INTERVAL, KEY_SOCKET]
    );
}

/// `conf/fsd.toml` shows every key, commented out, set to the default of
/// this code; uncommented it parses to the defaults.
#[test]
fn shipped_conf_matches_defaults() {
    let shipped = include_str!("../../conf/fsd.toml");
    assert_eq!(ok(shipped), Config::default(), "conf/fsd.toml sets a key");
    let mut keys = Vec::new();
    let uncommented: String = shipped
        .lines()
        .map(|line| match line.strip_prefix('#') {
            Some(rest) if rest.contains(" = ") && !rest.starts_with(' ') => {
                keys.push(rest.split(" = ").next().unwrap_or_default().to_owned());
                format!("{rest}\n")
            }
            _ => format!("{line}\n"),
        })
        .collect();
    assert_eq!(
        keys, KEYS,
        "conf/fsd.toml must show each key once, in order"
    );
    let c = ok(&uncommented);
    assert_eq!(
        c,
        Config {
            socket: Some(default_socket_path(Path::new("/dev/NAME")).unwrap()),
            ..Config::default()
        }
    );
}

#[test]
fn parse_size_units() {
    assert_eq!(parse_size("4096"), Ok(4096));
    assert_eq!(parse_size(" 2K "), Ok(2048));
    // As cleanerd.conf reads it (one parser): GB is 10^9, G 2^30.
    assert_eq!(parse_size("3gb"), Ok(3_000_000_000));
    assert_eq!(parse_size("3g"), Ok(3 << 30));
    assert!(parse_size("").is_err());
}

#[test]
fn a_nilfs_style_file_is_explained() {
    let e = err("# converted badly\nthreads 4\n");
    assert_eq!(e.line, Some(2), "{e}");
    assert!(e.reason.contains("threads = VALUE"), "{e}");
}
