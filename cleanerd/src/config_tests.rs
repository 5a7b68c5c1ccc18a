use super::*;

fn file() -> &'static Path {
    Path::new("/etc/lfs/cleanerd.conf")
}

fn ok(text: &str) -> Config {
    parse(text, file()).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

/// Parses `text`, expects an error at `line` about `key`, whose message
/// contains `why`, and shows file:line: key in its text.
fn bad(text: &str, line: usize, key: Option<&str>, why: &str) {
    let e = parse(text, file()).unwrap_err();
    assert_eq!(e.line, Some(line), "{text:?}: {e}");
    assert_eq!(e.key.as_deref(), key, "{text:?}: {e}");
    assert!(e.reason.contains(why), "{text:?}: {e}");
    let shown = e.to_string();
    let prefix = match key {
        Some(k) => format!("/etc/lfs/cleanerd.conf:{line}: {k}: "),
        None => format!("/etc/lfs/cleanerd.conf:{line}: "),
    };
    assert!(shown.starts_with(&prefix), "{shown}");
}

fn geometry() -> Geometry {
    Geometry {
        nsegs: 1000,
        blocks_per_segment: 2048,
        block_size: 4096,
    }
}

#[test]
fn an_empty_file_is_the_defaults() {
    let c = ok("# nothing\n");
    assert_eq!(
        Config {
            origin: Origin::default(),
            ..c
        },
        Config::default()
    );
    let p = Config::default().resolve(&geometry()).unwrap();
    assert_eq!(
        p,
        Params {
            protection_s: 3600,
            strict_protection: false,
            min_clean: 100,
            max_clean: 200,
            clean_check_interval: Duration::from_secs(10),
            policy: Policy::Timestamp,
            nsegments: 2,
            mc_nsegments: 4,
            cleaning_interval: Duration::from_secs(5),
            mc_cleaning_interval: Duration::from_secs(1),
            retry_interval: Duration::from_secs(60),
            min_reclaimable: 205,
            mc_min_reclaimable: 21,
            use_set_suinfo: true,
        }
    );
}

#[test]
fn every_key_is_set() {
    let c = ok(r#"
protection_period = "30m"
strict_protection = true
min_clean_segments = 5
max_clean_segments = "1G"
clean_check_interval = 2.5
selection_policy = "cost-benefit"
nsegments_per_clean = 8
mc_nsegments_per_clean = "2%"
cleaning_interval = "500ms"
mc_cleaning_interval = 0.1
retry_interval = "2m"
min_reclaimable_blocks = "256K"
mc_min_reclaimable_blocks = 3
use_set_suinfo = false
log_priority = "notice"
"#);
    assert_eq!(c.protection_period, Duration::from_secs(1800));
    assert!(c.strict_protection);
    assert_eq!(c.min_clean_segments, Amount::Count(5));
    assert_eq!(c.max_clean_segments, Amount::Bytes(1 << 30));
    assert_eq!(c.clean_check_interval, Duration::from_millis(2500));
    assert_eq!(c.selection_policy, Policy::CostBenefit);
    assert_eq!(c.nsegments_per_clean, Amount::Count(8));
    assert_eq!(c.mc_nsegments_per_clean, Amount::Percent(2.0));
    assert_eq!(c.cleaning_interval, Duration::from_millis(500));
    assert_eq!(c.mc_cleaning_interval, Duration::from_millis(100));
    assert_eq!(c.retry_interval, Duration::from_secs(120));
    assert_eq!(c.min_reclaimable_blocks, Amount::Bytes(256 << 10));
    assert_eq!(c.mc_min_reclaimable_blocks, Amount::Count(3));
    assert!(!c.use_set_suinfo);
    assert_eq!(c.log_priority, LevelFilter::Info);
    assert_eq!(c.origin.lines.len(), KEYS.len());
    assert_eq!(c.origin.lines[key::LOG_PRIORITY], 16);
    let p = c.resolve(&geometry()).unwrap();
    // 1 GiB of 8 MiB segments: 128; 2% of 1000: 20; 256 KiB of 4 KiB: 64.
    assert_eq!((p.protection_s, p.min_clean, p.max_clean), (1800, 5, 128));
    assert_eq!((p.nsegments, p.mc_nsegments), (8, 20));
    assert_eq!((p.min_reclaimable, p.mc_min_reclaimable), (64, 3));
    assert!(!p.use_set_suinfo);
    assert!(p.strict_protection);
    assert_eq!(p.policy, Policy::CostBenefit);
    for (name, policy) in Policy::NAMES.iter().zip(Policy::ALL) {
        assert_eq!(
            ok(&format!("selection_policy = \"{name}\"")).selection_policy,
            policy
        );
    }
}

#[test]
fn log_priorities_map_syslog_names() {
    for (name, level) in [
        ("emerg", LevelFilter::Error),
        ("alert", LevelFilter::Error),
        ("crit", LevelFilter::Error),
        ("err", LevelFilter::Error),
        ("warning", LevelFilter::Warn),
        ("notice", LevelFilter::Info),
        ("info", LevelFilter::Info),
        ("DEBUG", LevelFilter::Debug),
        ("trace", LevelFilter::Trace),
        ("off", LevelFilter::Off),
    ] {
        assert_eq!(parse_log_priority(name), Ok(level), "{name}");
    }
    for name in LOG_PRIORITIES {
        assert!(parse_log_priority(name).is_ok(), "{name}");
    }
}

#[test]
fn unknown_keys_are_errors() {
    bad(
        "retry_interval = 5\nclean_intervall = 3\n",
        2,
        Some("clean_intervall"),
        "unknown key (the keys are protection_period, ",
    );
    bad("[section]\nx = 1\n", 1, Some("section"), "unknown key");
}

#[test]
fn wrong_types_are_errors() {
    bad(
        "protection_period = true",
        1,
        Some("protection_period"),
        "must be a number of seconds or a string such as \"30s\", \"5m\", \"1h\", not boolean",
    );
    bad(
        "\nmin_clean_segments = 1.5",
        2,
        Some("min_clean_segments"),
        "must be a count (integer) or a string such as \"10%\", \"64M\", not float",
    );
    bad(
        "selection_policy = 3",
        1,
        Some("selection_policy"),
        "must be a string, not integer",
    );
    bad(
        "strict_protection = 1",
        1,
        Some("strict_protection"),
        "must be true or false, not integer",
    );
    bad(
        "use_set_suinfo = \"yes\"",
        1,
        Some("use_set_suinfo"),
        "must be true or false, not string",
    );
    bad(
        "log_priority = [1]",
        1,
        Some("log_priority"),
        "must be a string, not array",
    );
    bad(
        "nsegments_per_clean = { a = 1 }",
        1,
        Some("nsegments_per_clean"),
        "not table",
    );
}

#[test]
fn bad_values_are_errors() {
    bad(
        "selection_policy = \"fifo\"",
        1,
        Some("selection_policy"),
        "unknown policy \"fifo\" (use one of timestamp, greedy, cost-benefit, declining-cost)",
    );
    bad(
        "log_priority = \"loud\"",
        1,
        Some("log_priority"),
        "unknown log priority \"loud\"",
    );
    bad(
        "cleaning_interval = \"5 fortnights\"",
        1,
        Some("cleaning_interval"),
        "unknown unit \"fortnights\"",
    );
    bad(
        "max_clean_segments = \"20 segs\"",
        1,
        Some("max_clean_segments"),
        "unknown unit \"segs\"",
    );
    bad(
        "min_reclaimable_blocks = \"many\"",
        1,
        Some("min_reclaimable_blocks"),
        "does not start with a number",
    );
    bad("x = ", 1, None, "not valid TOML");
    bad(
        "retry_interval = 5\nretry_interval = 6\n",
        2,
        None,
        "not valid TOML",
    );
}

#[test]
fn out_of_range_values_are_errors() {
    bad(
        "protection_period = -1",
        1,
        Some("protection_period"),
        "-1 seconds is negative",
    );
    bad(
        "protection_period = 5000000000",
        1,
        Some("protection_period"),
        "out of range (0s to 4294967295s)",
    );
    bad(
        "clean_check_interval = 0",
        1,
        Some("clean_check_interval"),
        "0s is out of range (0.01s to 24h)",
    );
    bad(
        "mc_cleaning_interval = \"2d\"",
        1,
        Some("mc_cleaning_interval"),
        "out of range",
    );
    bad(
        "retry_interval = \"1ms\"",
        1,
        Some("retry_interval"),
        "out of range",
    );
    bad(
        "nsegments_per_clean = 0",
        1,
        Some("nsegments_per_clean"),
        "0 is out of range (1 to 1024 segments)",
    );
    bad(
        "mc_nsegments_per_clean = 1025",
        1,
        Some("mc_nsegments_per_clean"),
        "out of range",
    );
    bad(
        "mc_nsegments_per_clean = \"0%\"",
        1,
        Some("mc_nsegments_per_clean"),
        "out of range",
    );
    bad(
        "min_clean_segments = -5",
        1,
        Some("min_clean_segments"),
        "-5 is negative",
    );
    bad(
        "mc_min_reclaimable_blocks = \"150%\"",
        1,
        Some("mc_min_reclaimable_blocks"),
        "at most 100%",
    );
    bad(
        "max_clean_segments = 10\nmin_clean_segments = 20\n",
        2,
        Some("min_clean_segments"),
        "min_clean_segments (20) exceeds max_clean_segments (10)",
    );
    bad(
        "min_clean_segments = \"30%\"\nmax_clean_segments = \"25%\"\n",
        2,
        Some("max_clean_segments"),
        "exceeds",
    );
}

#[test]
fn resolving_against_the_geometry_checks_ranges_with_file_line_and_key() {
    let resolve_err = |text: &str| ok(text).resolve(&geometry()).unwrap_err();
    let e = resolve_err("\nnsegments_per_clean = \"20G\"\n");
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(2), Some("nsegments_per_clean"))
    );
    assert!(e.reason.contains("2560 segments on this filesystem"), "{e}");
    assert!(
        e.to_string()
            .starts_with("/etc/lfs/cleanerd.conf:2: nsegments_per_clean: "),
        "{e}"
    );
    let e = resolve_err("min_reclaimable_blocks = \"16M\"");
    assert_eq!(e.key.as_deref(), Some("min_reclaimable_blocks"));
    assert!(
        e.reason.contains("more than a segment holds (2048 blocks)"),
        "{e}"
    );
    let e = resolve_err("min_clean_segments = 150\nmax_clean_segments = \"1G\"\n");
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(2), Some("max_clean_segments"))
    );
    assert!(e.reason.contains("150 segments"), "{e}");
    // Defaults name no file.
    let e = Config::default()
        .resolve(&Geometry {
            nsegs: 10,
            blocks_per_segment: 0,
            block_size: 4096,
        })
        .unwrap();
    assert_eq!(e.min_reclaimable, 0);
    let tiny = Config {
        nsegments_per_clean: Amount::Percent(1.0),
        ..Config::default()
    };
    let e = tiny.resolve(&geometry()).map(|p| p.nsegments);
    assert_eq!(e, Ok(10));
    let none = Config {
        nsegments_per_clean: Amount::Bytes(1),
        ..Config::default()
    }
    .resolve(&Geometry {
        nsegs: 0,
        ..geometry()
    });
    assert_eq!(none.map(|p| p.nsegments), Ok(1));
}

#[test]
fn a_missing_file_is_an_error_only_when_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.conf");
    let e = load(&Source::Explicit(path.clone())).unwrap_err();
    assert!(e.reason.contains("cannot read it"), "{e}");
    assert!(e.to_string().contains("absent.conf"), "{e}");
    std::fs::write(&path, "cleaning_interval = 7\n").unwrap();
    let c = load(&Source::Explicit(path.clone())).unwrap();
    assert_eq!(c.cleaning_interval, Duration::from_secs(7));
    assert_eq!(c.origin.file.as_deref(), Some(path.as_path()));
}

#[test]
fn changed_keys_are_listed() {
    let a = Config::default();
    let b = ok("retry_interval = 61\nselection_policy = \"greedy\"\n");
    assert_eq!(
        a.changed_keys(&b),
        [key::SELECTION_POLICY, key::RETRY_INTERVAL]
    );
    assert!(a.changed_keys(&a.clone()).is_empty());
    assert_eq!(a.values().len(), KEYS.len());
}

#[test]
fn protection_is_sent_in_whole_seconds_rounding_up() {
    assert_eq!(protection_seconds(Duration::from_millis(1500)), 2);
    assert_eq!(protection_seconds(Duration::ZERO), 0);
    assert_eq!(protection_seconds(Duration::MAX), u32::MAX);
}

/// The shipped conf/cleanerd.conf lists every key, commented out, at its
/// default; uncommented it parses to the defaults.
#[test]
fn shipped_file_shows_every_default() {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conf/cleanerd.conf");
    let text = std::fs::read_to_string(&shipped).unwrap();
    assert!(
        text.lines().all(|l| l.is_empty() || l.starts_with('#')),
        "every line of conf/cleanerd.conf is a comment"
    );
    let settings: String = text
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .filter(|l| KEYS.iter().any(|k| l.starts_with(&format!("{k} ="))))
        .map(|l| format!("{l}\n"))
        .collect();
    let c = ok(&settings);
    assert_eq!(c.origin.lines.len(), KEYS.len(), "{settings}");
    assert!(
        c.changed_keys(&Config::default()).is_empty(),
        "conf/cleanerd.conf differs from the defaults in {:?}",
        c.changed_keys(&Config::default())
    );
}

#[test]
fn a_nilfs_style_file_says_how_to_convert_it() {
    let text = "# from nilfs_cleanerd.conf\nprotection_period\t3600\nmin_clean_segments 10%\n";
    let e = parse(text, Path::new("/etc/lfs/cleanerd.conf")).unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
    assert!(e.reason.contains("protection_period = VALUE"), "{e}");
    assert!(!e.reason.contains("expected"), "{e}");
}
