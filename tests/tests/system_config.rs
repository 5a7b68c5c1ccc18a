//! Issue 26 item 15: no test reads the machine's configuration. fsd,
//! cleanerd and `fsctl clean --once` read /etc/lfs when no file is named,
//! and an administrator's settings there must not change what the suite
//! checks (a failing test's log once began "configuration from
//! /etc/lfs/fsd.toml"). So every test starts them through
//! `lfs_e2e::daemons`, which names a file: this test finds any that does
//! not, in the whole-system tests and in the crates' own tests.

use std::fs;
use std::path::{Path, PathBuf};

use lfs_e2e::workspace_root;

/// Where the command is started another way, and the way.
const FORBIDDEN: &[&str] = &[
    "built_binary(\"fsd\")",
    "built_binary(\"cleanerd\")",
    "built_binary(\"fsctl\")",
];

/// The one file that may start them directly.
const HELPER: &str = "tests/src/daemons.rs";

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_test_names_its_configuration() {
    let root = workspace_root();
    let mut files = Vec::new();
    for dir in ["tests/tests", "tests/src", "lfs/tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut found = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&root).unwrap_or(file);
        if rel == Path::new(HELPER) {
            continue;
        }
        let text = fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if FORBIDDEN.iter().any(|f| line.contains(f)) && !line.contains("FORBIDDEN") {
                found.push(format!("{}:{}: {}", rel.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "start fsd, cleanerd and fsctl through lfs_e2e::daemons (which names a \
         configuration file, never /etc/lfs):\n{}",
        found.join("\n")
    );
}

/// The crates' own tests build their daemons from an explicit file too:
/// none uses the system-wide source.
#[test]
fn crate_tests_name_their_configuration() {
    let root = workspace_root();
    let mut files = Vec::new();
    for dir in ["cleanerd/tests", "fsctl/tests", "fsd/tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut found = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.contains("Source::System") || line.contains("config::system()") {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "tests reading /etc/lfs:\n{}",
        found.join("\n")
    );
}
