//! A repeatable workload for profiling what the engine does under its
//! state lock (docs/BENCHMARKS.md, "Profiles"): a 256 MiB file written
//! sequentially on a 1 GiB in-memory device with a checkpoint every 8 MiB
//! (where fsd's default dirty limit starts one), then rounds of 128 random
//! 64 KiB overwrites (W3's pattern) each followed by a checkpoint. Run it under callgrind, which
//! counts instructions (the same count for the same binary and input,
//! however loaded the machine is):
//!
//! ```text
//! cargo build --release -p lfs --example checkpoint_cost
//! valgrind --tool=callgrind --toggle-collect='*build_checkpoint*' \
//!     target/release/examples/checkpoint_cost
//! ```
//!
//! `--toggle-collect` restricts the count to the checkpoint builds, the
//! longest critical section under the state lock.

use std::sync::Arc;

use lfs::blockdev::{BlockDevice, MemDevice};
use lfs::format::ROOT_INO;
use lfs::fs::{Fs, MountOptions};
use lfs::mkfs::{format, MkfsOptions};

const FILE: u64 = 256 << 20;
const WRITE: usize = 64 << 10;
const ROUNDS: usize = 20;
const WRITES_PER_ROUND: usize = 128;

fn main() {
    let dev = MemDevice::new(1 << 30);
    let o = MkfsOptions::new([7; 16], 0x5eed, 1_700_000_000, 0);
    format(&dev, &o).expect("format");
    let dev: Arc<dyn BlockDevice> = Arc::new(dev);
    let opts = MountOptions {
        checkpoint_interval: std::time::Duration::from_secs(3600),
        dirty_limit_bytes: 1 << 30,
        ..MountOptions::default()
    };
    let fs = Fs::mount(dev, opts).expect("mount");
    let f = fs
        .create(ROOT_INO, b"f", 0o644, 0, 0, 0)
        .expect("create")
        .ino;
    let chunk = vec![0x5au8; 1 << 20];
    for off in (0..FILE).step_by(chunk.len()) {
        fs.write(f, off, &chunk).expect("fill");
        if (off + chunk.len() as u64) % (8 << 20) == 0 {
            fs.sync().expect("checkpoint");
        }
    }
    let data = vec![0xa5u8; WRITE];
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..ROUNDS {
        for _ in 0..WRITES_PER_ROUND {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let off = (x % (FILE / WRITE as u64)) * WRITE as u64;
            fs.write(f, off, &data).expect("write");
        }
        fs.sync().expect("checkpoint");
    }
    fs.unmount().expect("unmount");
    println!(
        "{ROUNDS} checkpoints of {WRITES_PER_ROUND} random {} KiB writes",
        WRITE >> 10
    );
}
