//! Helpers for lfs's whole-system tests (`tests/tests/*.rs`), which run the
//! built binaries, the Makefile and the system tools around them.
//!
//! Every helper panics with a message naming what failed and how to fix it:
//! a missing tool, a failed build or a hung command fails the test. Nothing
//! here skips.

#![forbid(unsafe_code)]

pub mod daemons;
pub mod fuzz_corpus;
pub mod golden;
pub mod help;
mod loopdev;
pub mod qemu_nbd;
pub mod rng;
pub mod roff;
mod run;

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

pub use loopdev::LoopDevice;
pub use run::{run, run_ok, try_run, Output, RunError};

/// How long a cargo build started by a test may take. Generous: on a cold
/// target directory the build compiles the whole engine.
pub const BUILD_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// How long one `make install` may take, including the (normally up to date)
/// cargo build it starts.
pub const MAKE_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// How long a command that only prints (`--help`, `mandoc`, `man -w`) may
/// take before it counts as hung.
pub const QUICK_TIMEOUT: Duration = Duration::from_secs(60);

/// The workspace root, the parent of this crate's directory.
pub fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .unwrap_or_else(|| panic!("{} has no parent", manifest_dir.display()))
        .to_path_buf()
}

/// Cargo's target directory: `$CARGO_TARGET_DIR` (a relative one is taken
/// relative to the workspace root) or `<root>/target`.
pub fn target_dir() -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                workspace_root().join(dir)
            }
        }
        _ => workspace_root().join("target"),
    }
}

/// The cargo profile the binaries under test are built with: the one this
/// test crate was built with, so `cargo test --release` tests release
/// binaries.
pub fn cargo_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "dev"
    } else {
        "release"
    }
}

/// Where cargo puts binaries of [`cargo_profile`].
pub fn bin_dir() -> PathBuf {
    target_dir().join(if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    })
}

/// The cargo that runs these tests (`$CARGO`, set by `cargo test`), so that
/// nested builds use the same toolchain.
pub fn cargo() -> OsString {
    env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// Panics unless `tool` is an executable on `PATH`.
pub fn require_tool(tool: &str) {
    let found = env::var_os("PATH")
        .map(|path| env::split_paths(&path).any(|dir| is_executable(&dir.join(tool))))
        .unwrap_or(false);
    assert!(
        found,
        "`{tool}` is not installed (not found on PATH); run scripts/setup-debian.sh"
    );
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Variables the Makefile reads that must not leak into a test from the
/// environment of whoever runs it.
const MAKE_ENV: &[&str] = &[
    "MAKEFLAGS",
    "MFLAGS",
    "MAKELEVEL",
    "MAKEOVERRIDES",
    "PREFIX",
    "DESTDIR",
    "SBINDIR",
    "MANDIR",
    "SYSCONFDIR",
    "CONF_SRC",
    "BINS",
    "BIN_DIR",
    "TARGET_DIR",
    "PROFILE",
    "NO_BUILD",
    "INSTALL",
];

/// `make` in the workspace root, building with this test's cargo, profile
/// and target directory. Add the target and variables.
pub fn make() -> Command {
    require_tool("make");
    let mut cmd = Command::new("make");
    cmd.current_dir(workspace_root())
        .arg("--no-print-directory");
    for var in MAKE_ENV {
        cmd.env_remove(var);
    }
    let mut cargo_var = OsString::from("CARGO=");
    cargo_var.push(cargo());
    let mut target_var = OsString::from("TARGET_DIR=");
    target_var.push(target_dir());
    cmd.arg(cargo_var)
        .arg(format!("PROFILE={}", cargo_profile()))
        .arg(target_var);
    cmd
}

/// One installed command: a cargo binary and the name `make install` gives
/// it, from the Makefile's `BINS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledCommand {
    /// The cargo binary name, e.g. `mkfs-lfs`.
    pub cargo_bin: String,
    /// The installed name, e.g. `mkfs.lfs`.
    pub name: String,
}

impl InstalledCommand {
    /// Its man page source. Commands go to sbin, so section 8.
    pub fn man_page(&self) -> PathBuf {
        workspace_root()
            .join("man")
            .join(format!("{}.8", self.name))
    }

    /// The built binary, building it first if this test process has not.
    pub fn binary(&self) -> PathBuf {
        built_binary(&self.cargo_bin)
    }
}

/// The Makefile's `BINS` list (`make print-bins`): every command that
/// `make install` installs.
pub fn installed_commands() -> &'static [InstalledCommand] {
    static COMMANDS: OnceLock<Vec<InstalledCommand>> = OnceLock::new();
    COMMANDS.get_or_init(|| {
        let out = run_ok(make().arg("-s").arg("print-bins"), QUICK_TIMEOUT);
        let commands = parse_bins(&out.stdout)
            .unwrap_or_else(|e| panic!("`make print-bins` printed {:?}: {e}", out.stdout));
        assert!(!commands.is_empty(), "the Makefile's BINS is empty: {out}");
        commands
    })
}

/// Parses `CARGO-BIN:NAME` words.
pub fn parse_bins(text: &str) -> Result<Vec<InstalledCommand>, String> {
    text.split_whitespace()
        .map(|word| match word.split_once(':') {
            Some((cargo_bin, name)) if !cargo_bin.is_empty() && !name.is_empty() => {
                Ok(InstalledCommand {
                    cargo_bin: cargo_bin.to_owned(),
                    name: name.to_owned(),
                })
            }
            _ => Err(format!("{word:?} is not CARGO-BIN:NAME")),
        })
        .collect()
}

/// Builds every binary in [`installed_commands`] once per test process and
/// returns the path of `cargo_bin`.
///
/// It always runs `cargo build` (a no-op when up to date) rather than only
/// when a binary is missing, so a test never runs a stale binary. `cargo
/// test` does not hold the build lock while tests run, so this cannot
/// deadlock with it.
pub fn built_binary(cargo_bin: &str) -> PathBuf {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let mut cmd = Command::new(cargo());
        cmd.current_dir(workspace_root())
            .arg("build")
            .arg("--profile")
            .arg(cargo_profile())
            .arg("--target-dir")
            .arg(target_dir());
        for command in installed_commands() {
            cmd.arg("--bin").arg(&command.cargo_bin);
        }
        match try_run(&mut cmd, BUILD_TIMEOUT) {
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => Err(out.to_string()),
            Err(e) => Err(e.to_string()),
        }
    });
    if let Err(e) = built {
        panic!("building the binaries under test failed:\n{e}");
    }
    let path = bin_dir().join(cargo_bin);
    assert!(
        is_executable(&path),
        "{} does not exist after building (is `{cargo_bin}` in the Makefile's BINS?)",
        path.display()
    );
    path
}

/// A fresh temporary directory, removed when dropped.
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("lfs-e2e-")
        .tempdir()
        .unwrap_or_else(|e| panic!("creating a temporary directory: {e}"))
}

/// The man pages in `man/`: every `man/*.[1-8]`, sorted.
pub fn man_pages() -> Vec<PathBuf> {
    let dir = workspace_root().join("man");
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    let mut pages: Vec<PathBuf> = entries
        .map(|entry| {
            entry
                .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
                .path()
        })
        .filter(|path| man_section(path).is_some())
        .collect();
    pages.sort();
    pages
}

/// The section of a man page file named `NAME.[1-8]`.
pub fn man_section(path: &Path) -> Option<char> {
    let ext = path.extension()?.to_str()?;
    let mut chars = ext.chars();
    match (chars.next(), chars.next()) {
        (Some(c @ '1'..='8'), None) if path.is_file() => Some(c),
        _ => None,
    }
}

/// A man page's text in the two forms a reader sees it: the roff source with
/// the escapes that split option names removed, and the page as mandoc
/// renders it (which expands mdoc macros such as `.Fl b` to `-b`).
pub fn man_text(page: &Path) -> String {
    require_tool("mandoc");
    let source =
        std::fs::read_to_string(page).unwrap_or_else(|e| panic!("reading {}: {e}", page.display()));
    // A wide page so that no line break splits a long option name.
    let rendered = run_ok(
        Command::new("mandoc")
            .args(["-Tascii", "-O", "width=400"])
            .arg(page),
        QUICK_TIMEOUT,
    );
    format!(
        "{}\n{}",
        roff::normalise(&source),
        roff::strip_overstrike(&rendered.stdout)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_bins_splits_mapping() {
        assert_eq!(
            parse_bins("mkfs-lfs:mkfs.lfs fsctl:fsctl\n").unwrap(),
            vec![
                InstalledCommand {
                    cargo_bin: "mkfs-lfs".into(),
                    name: "mkfs.lfs".into()
                },
                InstalledCommand {
                    cargo_bin: "fsctl".into(),
                    name: "fsctl".into()
                },
            ]
        );
    }

    #[test]
    fn parse_bins_rejects_malformed_words() {
        assert!(parse_bins("mkfs-lfs").is_err());
        assert!(parse_bins("mkfs-lfs:").is_err());
        assert!(parse_bins(":fsctl").is_err());
    }

    #[test]
    fn man_section_accepts_only_numbered_sections() {
        let dir = temp_dir();
        for name in ["a.5", "b.8", "c.9", "d.txt", "e.55"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        assert_eq!(man_section(&dir.path().join("a.5")), Some('5'));
        assert_eq!(man_section(&dir.path().join("b.8")), Some('8'));
        assert_eq!(man_section(&dir.path().join("c.9")), None);
        assert_eq!(man_section(&dir.path().join("d.txt")), None);
        assert_eq!(man_section(&dir.path().join("e.55")), None);
    }
}
