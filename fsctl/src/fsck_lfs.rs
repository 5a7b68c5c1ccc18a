//! `fsck.lfs`: the checker fsck(8) runs for a filesystem of type lfs
//! (`fsck -t lfs`, and the sixth field of an fstab line), with fsck(8)'s
//! exit statuses. It is fsctl's `fsck` under another name: `make install`
//! installs fsctl a second time as fsck.lfs, and fsctl's `main` comes
//! here when it is started by that name.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use crate::fail::Fault;

/// The name fsck(8) runs for the type lfs.
pub const NAME: &str = "fsck.lfs";
/// Every name that starts the checker: fsck(8) runs fsck.fuse.lfs for an
/// fstab line of type fuse.lfs (`make install` links it to fsck.lfs).
pub const NAMES: &[&str] = &[NAME, "fsck.fuse.lfs"];

/// fsck(8)'s exit statuses (the ones fsck.lfs gives; it never corrects
/// anything, so never 1 or 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// No errors.
    Clean = 0,
    /// Filesystem errors left uncorrected.
    Errors = 4,
    /// Operational error: not lfs, in use, unreadable.
    Operational = 8,
    /// Usage or syntax error.
    Usage = 16,
    /// Checking canceled by user request.
    Canceled = 32,
}

#[derive(Debug, Parser)]
#[command(
    name = NAME,
    version,
    about = "Check an lfs filesystem (fsck(8)'s checker for type lfs); it never changes it",
    after_help = "Exit status, as fsck(8): 0 no errors, 4 errors left uncorrected, 8 operational \
                  error (not lfs, mounted read-write, I/O), 16 usage error, 32 canceled by a \
                  signal. See fsck.lfs(8)."
)]
struct Args {
    /// Check without asking, as fsck -a at boot (fsck.lfs never asks and never repairs).
    #[arg(short = 'a', short_alias = 'p')]
    preen: bool,
    /// Make no changes (fsck.lfs never makes any).
    #[arg(short = 'n', conflicts_with_all = ["preen", "yes"])]
    no: bool,
    /// Answer yes to every question (fsck.lfs asks none and repairs nothing).
    #[arg(short = 'y')]
    yes: bool,
    /// Check even if the filesystem seems clean (fsck.lfs always checks everything).
    #[arg(short = 'f')]
    force: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Block device, image file or NBD export (nbd://HOST[:PORT]/EXPORT, nbd+unix:///EXPORT?socket=PATH).
    device: PathBuf,
}

/// Installs handlers that end the check with [`Status::Canceled`] on
/// SIGINT, SIGTERM and SIGHUP (fsck(8) forwards them): the check writes
/// nothing, so it can stop anywhere.
#[allow(unsafe_code)]
fn cancel_on_signals() {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    extern "C" fn canceled(_: nix::libc::c_int) {
        // SAFETY: _exit is async-signal-safe; nothing needs flushing.
        unsafe { nix::libc::_exit(Status::Canceled as i32) }
    }
    let action = SigAction::new(
        SigHandler::Handler(canceled),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: called at start, before any other thread exists; the
        // handler only calls _exit.
        let _ = unsafe { sigaction(signal, &action) };
    }
}

/// fsck.lfs's `main`.
pub fn main() -> ExitCode {
    cancel_on_signals();
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if e.use_stderr() => {
            let _ = e.print();
            return ExitCode::from(Status::Usage as u8);
        }
        Err(e) => {
            // --help, --version.
            let _ = e.print();
            return ExitCode::from(Status::Clean as u8);
        }
    };
    let status = match crate::cmd::fsck::check(&args.device) {
        Ok(r) => match crate::cmd::fsck::print(&args.device, &r, args.json) {
            Ok(()) if r.is_clean() => Status::Clean,
            Ok(()) => Status::Errors,
            Err(e) => report(&e),
        },
        Err(e) => report(&e),
    };
    ExitCode::from(status as u8)
}

/// Prints the error that ended the check; every one is operational.
fn report(e: &anyhow::Error) -> Status {
    eprintln!(
        "{}",
        lfs_common::report::error_line(NAME, &format!("{e:#}"))
    );
    if e.chain()
        .any(|c| matches!(c.downcast_ref::<Fault>(), Some(Fault::Busy(_))))
    {
        eprintln!("{NAME}: not checked while mounted read-write");
    }
    Status::Operational
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsck_8_options_parse() {
        use clap::CommandFactory;
        Args::command().debug_assert();
        for argv in [
            &["fsck.lfs", "-a", "/dev/vdb"][..],
            &["fsck.lfs", "-p", "/dev/vdb"],
            &["fsck.lfs", "-n", "-f", "/dev/vdb"],
            &["fsck.lfs", "-y", "/dev/vdb"],
        ] {
            assert!(Args::try_parse_from(argv).is_ok(), "{argv:?}");
        }
        assert!(Args::try_parse_from(["fsck.lfs", "-n", "-y", "d"]).is_err());
        assert!(Args::try_parse_from(["fsck.lfs"]).is_err());
    }
}
