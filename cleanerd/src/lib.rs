//! cleanerd: the policy half of lfs's segment cleaning (DESIGN.md §7).
//! fsd owns the mechanism (CLEAN_SEGMENTS copies live blocks and frees
//! segments); cleanerd decides when to clean, how hard, and which
//! segments, talking to fsd only through the control protocol
//! (`lfs-proto`; never the engine).
//!
//! Modules, one job each:
//! * [`units`]: amounts (counts, percentages, bytes) and times as written.
//! * [`config`]: the configuration file, cleanerd.conf(5).
//! * [`policy`]: victim selection.
//! * [`schedule`]: the two-speed hysteresis, deferral and back-off.
//! * [`pass`]: one cleaning pass over a connection to fsd.
//! * [`daemon`]: the loop, connection, reconnect, reload.
//! * [`control`]: cleanerd's own control socket for `fsctl clean`.
//! * [`sim`]: a model that compares the policies' write amplification.
//! * [`fake`]: a simulated fsd for tests.
//! * [`acceptor`]: a stoppable accept loop (control socket, fake).
//! * [`targets`]: the fuzz entry point over [`config`].

#![forbid(unsafe_code)]

pub mod acceptor;
pub mod config;
pub mod control;
pub mod daemon;
pub mod fake;
pub mod pass;
pub mod policy;
pub mod schedule;
pub mod sim;
pub mod targets;
pub mod units;
