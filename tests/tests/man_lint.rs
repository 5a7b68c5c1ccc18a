//! The man pages exist and pass `mandoc -Tlint` at warning level.

use std::process::Command;

use lfs_e2e::{installed_commands, man_pages, require_tool, run, workspace_root, QUICK_TIMEOUT};

/// Pages besides the commands' own: formats and configuration files.
const REQUIRED_PAGES: &[&str] = &["lfs.5", "cleanerd.conf.5"];

#[test]
fn required_pages_exist() {
    let man = workspace_root().join("man");
    let mut required: Vec<String> = REQUIRED_PAGES.iter().map(|p| p.to_string()).collect();
    // Every installed command has a section 8 page.
    required.extend(installed_commands().iter().map(|c| format!("{}.8", c.name)));
    let missing: Vec<&String> = required
        .iter()
        .filter(|page| !man.join(page).is_file())
        .collect();
    assert!(
        missing.is_empty(),
        "missing man pages in {}: {missing:?}",
        man.display()
    );
}

#[test]
fn every_page_passes_mandoc_lint() {
    require_tool("mandoc");
    let pages = man_pages();
    assert!(!pages.is_empty(), "no man/*.[1-8] pages to lint");
    let mut failures = Vec::new();
    for page in &pages {
        let out = run(
            Command::new("mandoc")
                .args(["-Tlint", "-W", "warning"])
                .arg(page),
            QUICK_TIMEOUT,
        );
        if !out.status.success() || !out.stdout.is_empty() || !out.stderr.is_empty() {
            failures.push(out.to_string());
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} man pages fail mandoc -Tlint -W warning:\n{}",
        failures.len(),
        pages.len(),
        failures.join("\n")
    );
}
