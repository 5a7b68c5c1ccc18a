//! A loop device attached to an image file for the length of a test.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{require_tool, run_ok, QUICK_TIMEOUT};

/// A loop device; dropping it detaches it, even if the test fails.
#[derive(Debug)]
pub struct LoopDevice {
    /// Its node, `/dev/loopN`.
    pub node: PathBuf,
}

impl LoopDevice {
    /// `losetup -f --show image` (needs root).
    pub fn attach(image: &Path) -> LoopDevice {
        require_tool("losetup");
        let o = run_ok(
            Command::new("losetup").args(["-f", "--show"]).arg(image),
            QUICK_TIMEOUT,
        );
        // Owned first, so that a failed check below still detaches it.
        let dev = LoopDevice {
            node: PathBuf::from(o.stdout.trim()),
        };
        assert!(dev.name().starts_with("/dev/loop"), "{o}");
        dev
    }

    /// The node as a string, for command lines and messages.
    pub fn name(&self) -> &str {
        self.node.to_str().expect("/dev/loopN is UTF-8")
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.node).status();
    }
}
