//! Every option and subcommand a command's `--help` lists is documented in
//! its man page.

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use lfs_e2e::help::{option_tokens, subcommands};
use lfs_e2e::roff::mentions;
use lfs_e2e::{installed_commands, man_text, run_ok, InstalledCommand, QUICK_TIMEOUT};

/// Subcommands nest no deeper than this (`fsctl clean status` is depth 2).
const MAX_DEPTH: usize = 4;

/// What a command's help lists that its man page does not mention.
#[derive(Debug, Default)]
struct Gaps {
    /// (command line, option) pairs.
    options: Vec<(String, String)>,
    /// Subcommand lines.
    commands: Vec<String>,
}

/// Runs `BIN [PATH...] --help`, checks its options and subcommands against
/// `man`, and recurses into the subcommands.
fn check(binary: &Path, name: &str, path: &[String], man: &str, gaps: &mut Gaps) {
    assert!(
        path.len() <= MAX_DEPTH,
        "subcommands nest too deep: {path:?}"
    );
    let line = std::iter::once(name.to_owned())
        .chain(path.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    // Started by its installed name: fsck.lfs is fsctl started so.
    let out = run_ok(
        Command::new(binary).arg0(name).args(path).arg("--help"),
        QUICK_TIMEOUT,
    );
    assert!(
        !out.stdout.trim().is_empty(),
        "`{line} --help` printed nothing"
    );
    let options: BTreeSet<String> = option_tokens(&out.stdout);
    assert!(
        options.contains("--help"),
        "found no --help in `{line} --help`, so its options were not parsed:\n{}",
        out.stdout
    );
    for option in options {
        if !mentions(man, &option) {
            gaps.options.push((line.clone(), option));
        }
    }
    for sub in subcommands(&out.stdout) {
        if !mentions(man, &sub) {
            gaps.commands.push(format!("{line} {sub}"));
        }
        let mut sub_path = path.to_vec();
        sub_path.push(sub);
        check(binary, name, &sub_path, man, gaps);
    }
}

fn check_command(command: &InstalledCommand) {
    let page = command.man_page();
    assert!(
        page.is_file(),
        "{} is missing: `{}` needs a man page",
        page.display(),
        command.name
    );
    let man = man_text(&page);
    let mut gaps = Gaps::default();
    check(&command.binary(), &command.name, &[], &man, &mut gaps);
    assert!(
        gaps.options.is_empty() && gaps.commands.is_empty(),
        "{} does not document everything `{} --help` lists.\nOptions missing (command: option):\n{}\nSubcommands missing:\n{}",
        page.display(),
        command.name,
        gaps.options
            .iter()
            .map(|(line, option)| format!("  {line}: {option}"))
            .collect::<Vec<_>>()
            .join("\n"),
        gaps.commands
            .iter()
            .map(|c| format!("  {c}"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
}

/// Every command in the Makefile's BINS, so commands added later are
/// covered without a new test.
#[test]
fn every_installed_command_help_matches_man_page() {
    let names: Vec<&str> = installed_commands()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    for required in ["mkfs.lfs", "fsctl", "fsd", "cleanerd"] {
        assert!(
            names.contains(&required),
            "`{required}` is not in the Makefile's BINS: {names:?}"
        );
    }
    for command in installed_commands() {
        check_command(command);
    }
}

/// The subcommand walk above only means something if it finds fsctl's
/// subcommands.
#[test]
fn fsctl_help_lists_subcommands() {
    let fsctl = installed_commands()
        .iter()
        .find(|c| c.name == "fsctl")
        .expect("`fsctl` is not in the Makefile's BINS");
    let help = run_ok(Command::new(fsctl.binary()).arg("--help"), QUICK_TIMEOUT);
    assert!(
        !subcommands(&help.stdout).is_empty(),
        "`fsctl --help` lists no subcommands in a Commands: section:\n{}",
        help.stdout
    );
}
