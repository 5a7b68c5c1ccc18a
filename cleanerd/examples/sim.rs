//! Prints the cleaner model's write-amplification table (a model, not a
//! measurement: see cleanerd/src/sim.rs).
//!
//! `cargo run --release -p cleanerd --example sim [SEGMENTS [BLOCKS]]`

use cleanerd::policy::Policy;
use cleanerd::sim::{report, SimConfig, Workload};

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut base = SimConfig::small(Workload::Uniform, 0.8, Policy::Timestamp);
    base.nsegs = 512;
    base.bps = 128;
    if let Some(n) = args.next() {
        base.nsegs = n.parse().map_err(|e| format!("SEGMENTS {n:?}: {e}"))?;
    }
    if let Some(n) = args.next() {
        base.bps = n.parse().map_err(|e| format!("BLOCKS {n:?}: {e}"))?;
    }
    print!("{}", report(&base)?);
    Ok(())
}
