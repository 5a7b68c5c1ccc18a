//! Shell completion scripts (bash, zsh, fish, ...) of a command, from its
//! clap definition: what `--completions SHELL` prints and `make install`
//! installs.

use std::io::Write;

use clap::ValueEnum;
pub use clap_complete::Shell;

/// The option's name.
const OPTION: &str = "--completions";

/// Writes the completion script of `command` for `shell` to stdout.
pub fn print(shell: Shell, mut command: clap::Command) {
    let name = command.get_name().to_owned();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut command, name, &mut out);
    let _ = out.flush();
}

/// If the command line asks for `--completions SHELL`, prints the script
/// of `command` and returns true. Checked before clap parses the rest,
/// since the command's required arguments are not given then (clap
/// reports a bad SHELL and `--completions` with other arguments itself,
/// the option being declared exclusive).
pub fn requested(command: impl FnOnce() -> clap::Command) -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let shell = match args.as_slice() {
        [opt, value] if opt == OPTION => value.as_str(),
        [one] => match one.strip_prefix(OPTION).and_then(|v| v.strip_prefix('=')) {
            Some(value) => value,
            None => return false,
        },
        _ => return false,
    };
    match Shell::from_str(shell, true) {
        Ok(shell) => {
            print(shell, command());
            true
        }
        Err(_) => false,
    }
}
