//! Reading clap's `--help` output: the options and subcommands it lists.
//!
//! clap prints each option on a line indented by two spaces, the option
//! spec first and its description after two or more spaces (or, in long
//! help, on following lines indented by ten):
//!
//! ```text
//! Options:
//!   -b, --block-size <BYTES>  Block size in bytes [default: 4096]
//!       --dry-run             Print what would be written
//! ```
//!
//! and each subcommand in the `Commands:` section the same way.

use std::collections::BTreeSet;
use std::ops::RangeInclusive;

/// clap indents an option line by 2 spaces, or 6 when the option has no
/// short form; long-help descriptions are indented by 10.
const MAX_OPTION_INDENT: usize = 6;

/// clap indents each line of the `Commands:` section by 2 spaces; wrapped
/// descriptions are indented deeper.
const COMMAND_INDENT: usize = 2;

/// The option tokens (`-b`, `--block-size`) that a `--help` text lists.
pub fn option_tokens(help: &str) -> BTreeSet<String> {
    let mut tokens = BTreeSet::new();
    for line in help.lines() {
        let Some(item) = item(line, 1..=MAX_OPTION_INDENT) else {
            continue;
        };
        if !item.starts_with('-') {
            continue;
        }
        let spec = item.split("  ").next().unwrap_or_default();
        for word in spec.split(|c: char| c.is_whitespace() || c == ',') {
            let name = word.split(['=', '[', '<']).next().unwrap_or_default();
            if is_option_name(name) {
                tokens.insert(name.to_owned());
            }
        }
    }
    tokens
}

/// The subcommands listed in the `Commands:` section, without `help`.
pub fn subcommands(help: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut in_commands = false;
    for line in help.lines() {
        if !in_commands {
            in_commands = line.trim_end() == "Commands:";
            continue;
        }
        if line.trim().is_empty() || !line.starts_with(' ') {
            break;
        }
        let Some(item) = item(line, COMMAND_INDENT..=COMMAND_INDENT) else {
            continue;
        };
        let name = item
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .trim_end_matches(',');
        if !name.is_empty() && name != "help" {
            commands.push(name.to_owned());
        }
    }
    commands
}

/// The text of `line` if it is indented by an amount in `indent`.
fn item(line: &str, indent: RangeInclusive<usize>) -> Option<&str> {
    let text = line.trim_start_matches(' ');
    (indent.contains(&(line.len() - text.len())) && !text.is_empty()).then_some(text)
}

/// `-x` or `--long-name`.
fn is_option_name(word: &str) -> bool {
    if let Some(long) = word.strip_prefix("--") {
        let mut chars = long.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '-')
    } else if let Some(short) = word.strip_prefix('-') {
        let mut chars = short.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphanumeric()) && chars.next().is_none()
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHORT_HELP: &str = "\
Format a device or image file as lfs

Usage: mkfs-lfs [OPTIONS] <DEVICE>

Arguments:
  <DEVICE>  The device or image file

Options:
  -L, --label <LABEL>        Volume label, see --uuid too
  -b, --block-size <BYTES>   Block size [default: 4096]
      --size=<SIZE>          Image size
      --color[=<WHEN>]       Colour
  -n                         Dry run
  -h, --help                 Print help
  -V, --version              Print version
";

    const LONG_HELP: &str = "\
Usage: fsctl [OPTIONS] <COMMAND>

Commands:
  super  Print the superblock
  lssu   List segment usage, a long description that clap wrapped onto
         a second line
  clean  Control the cleaner
  help   Print this message or the help of the given subcommand(s)

Options:
  -v, --verbose
          More output.

          - a bullet that starts with a dash, --not-an-option
  -h, --help
          Print help (see a summary with '-h')
";

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_from_short_help() {
        assert_eq!(
            option_tokens(SHORT_HELP),
            set(&[
                "-L",
                "--label",
                "-b",
                "--block-size",
                "--size",
                "--color",
                "-n",
                "-h",
                "--help",
                "-V",
                "--version"
            ])
        );
    }

    #[test]
    fn options_from_long_help_ignore_descriptions() {
        assert_eq!(
            option_tokens(LONG_HELP),
            set(&["-v", "--verbose", "-h", "--help"])
        );
    }

    #[test]
    fn commands_section() {
        assert_eq!(subcommands(LONG_HELP), vec!["super", "lssu", "clean"]);
        assert!(subcommands(SHORT_HELP).is_empty());
    }
}
