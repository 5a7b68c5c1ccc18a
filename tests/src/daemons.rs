//! The commands that read lfs's configuration files, as the tests run
//! them: with an explicit file, the shipped one (`conf/`) unless the test
//! names its own, never the machine's `/etc/lfs` (issue 26 item 15: an
//! administrator's settings must not change what the suite checks).
//! `tests/tests/system_config.rs` checks that no test starts fsd,
//! cleanerd or fsctl another way.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use crate::{built_binary, workspace_root};

/// A shipped configuration file, `conf/NAME`.
pub fn shipped_conf(name: &str) -> PathBuf {
    workspace_root().join("conf").join(name)
}

/// True if `args` name a configuration file.
fn names_config<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> bool {
    args.iter().any(|a| {
        let a = a.as_ref().to_string_lossy();
        a == "-c" || a == "--config" || a.starts_with("--config=")
    })
}

/// `BIN ARGS...`, with `-c conf/CONF` unless `args` name a file.
fn with_config<S: AsRef<std::ffi::OsStr>>(bin: &str, conf: &str, args: &[S]) -> Command {
    let mut cmd = Command::new(built_binary(bin));
    if !names_config(args) {
        cmd.arg("-c").arg(shipped_conf(conf));
    }
    cmd.args(args).env_remove("RUST_LOG");
    cmd
}

/// `fsd ARGS...`, with `-c conf/fsd.toml` unless `args` name a file, and
/// `-o nogc` unless they mention cleanerd's options (`-o gcconf=...`,
/// `-o nogc`): a test that cleans starts its own cleanerd, or makes fsd
/// start one with a configuration it names, never with the machine's
/// /etc/lfs/cleanerd.conf.
pub fn fsd<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Command {
    let mut cmd = with_config("fsd", "fsd.toml", args);
    let gc = args.iter().any(|a| {
        let a = a.as_ref().to_string_lossy();
        a.contains("gcconf=") || a.contains("nogc")
    });
    if !gc {
        cmd.args(["-o", "nogc"]);
    }
    cmd
}

/// `cleanerd ARGS...`, with `-c conf/cleanerd.conf` unless `args` name a
/// file.
pub fn cleanerd<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Command {
    with_config("cleanerd", "cleanerd.conf", args)
}

/// fsctl's arguments as the tests pass them: `fsctl clean` (whose
/// `--once` without a cleanerd reads cleanerd's configuration) gets
/// `-c conf/cleanerd.conf` unless `args` name a file.
pub fn fsctl_args<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Vec<OsString> {
    let mut out: Vec<OsString> = args.iter().map(|a| a.as_ref().to_owned()).collect();
    if out.first().is_some_and(|a| a == "clean") && !names_config(args) {
        out.insert(1, "-c".into());
        out.insert(2, shipped_conf("cleanerd.conf").into());
    }
    out
}

/// The fsctl binary, for a test that runs it through another program
/// (setpriv, a shell); its arguments go through [`fsctl_args`].
pub fn fsctl_binary() -> PathBuf {
    built_binary("fsctl")
}

/// `fsctl ARGS...` (see [`fsctl_args`]).
pub fn fsctl<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Command {
    let mut cmd = Command::new(fsctl_binary());
    cmd.args(fsctl_args(args)).env_remove("RUST_LOG");
    cmd
}

/// `fsctl ARGS...` as user nobody (group nogroup, no other groups),
/// through setpriv(1).
pub fn fsctl_as_nobody<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Command {
    crate::require_tool("setpriv");
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(fsctl_binary())
        .args(fsctl_args(args))
        .env_remove("RUST_LOG");
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_gets_the_shipped_file_unless_given_one() {
        let a = fsctl_args(&["clean", "/s", "--once"]);
        assert_eq!(a[1], "-c");
        assert!(a[2].to_string_lossy().ends_with("conf/cleanerd.conf"));
        assert_eq!(fsctl_args(&["clean", "-c", "x", "/s"]).len(), 4);
        assert_eq!(fsctl_args(&["lscp", "/s"]).len(), 2);
    }
}
