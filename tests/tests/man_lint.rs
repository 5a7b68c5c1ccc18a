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

/// The rendered text of `page` at `width` columns, overstrikes removed.
fn rendered(page: &std::path::Path, width: usize) -> String {
    require_tool("mandoc");
    let out = run(
        Command::new("mandoc")
            .args(["-Tascii", "-O", &format!("width={width}")])
            .arg(page),
        QUICK_TIMEOUT,
    )
    .assert_success();
    lfs_e2e::roff::strip_overstrike(&out.stdout)
}

/// Issue 26 item 12: every page reads on an 80-column terminal (lfs(5)'s
/// tables ran past it), whatever wraps.
#[test]
fn every_page_fits_80_columns() {
    let mut wide = Vec::new();
    for page in man_pages() {
        for line in rendered(&page, 80).lines() {
            // man(1) leaves the margin to the pager's width: 80 with it.
            if line.chars().count() > 80 {
                wide.push(format!("{}: {line}", page.display()));
            }
        }
    }
    assert!(
        wide.is_empty(),
        "lines past 80 columns:\n{}",
        wide.join("\n")
    );
}

/// Issue 26 item 12: the pages that name files have FILES, every page's
/// SEE ALSO leads to the daemon and to the format, and fsctl(8) says what
/// a freeze does to the processes that wait on it.
#[test]
fn files_see_also_and_freeze_semantics() {
    let man = workspace_root().join("man");
    for page in [
        "fsd.8",
        "fsctl.8",
        "cleanerd.8",
        "cleanerd.conf.5",
        "fsck.lfs.8",
    ] {
        let text = std::fs::read_to_string(man.join(page)).unwrap();
        assert!(
            text.contains("\n.SH FILES\n"),
            "{page} has no FILES section"
        );
    }
    for page in man_pages() {
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&page).unwrap();
        let see_also = text
            .split("\n.SH SEE ALSO\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{name} has no SEE ALSO"));
        for (wanted, own) in [(".BR fsd (8)", "fsd.8"), (".BR lfs (5)", "lfs.5")] {
            if name != own {
                assert!(see_also.contains(wanted), "{name}: SEE ALSO lacks {wanted}");
            }
        }
    }
    let fsctl = rendered(&man.join("fsctl.8"), 400);
    assert!(
        fsctl.contains("cannot be killed until the thaw"),
        "fsctl(8) does not say that waiting writers cannot be killed"
    );
}
