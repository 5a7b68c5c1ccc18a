//! When to clean and how hard: nilfs's two-speed hysteresis, deferral and
//! error back-off, as a pure state machine. Time is a [`Duration`] since
//! an arbitrary start that the caller supplies (a monotonic clock in the
//! daemon, a fake one in tests).
//!
//! Modes, from the clean-segment count `n` each check reads:
//!
//! | current | `n < min` | `min ≤ n < max` | `n ≥ max` |
//! |---|---|---|---|
//! | idle | mc | idle | idle |
//! | normal | mc | normal | idle |
//! | mc | mc | normal | idle |
//!
//! So cleaning starts only below `min_clean_segments` (fast, "mc" mode:
//! `mc_nsegments_per_clean` every `mc_cleaning_interval`), continues at
//! normal speed (`nsegments_per_clean` every `cleaning_interval`) once
//! above it, and stops only at `max_clean_segments`. While idle the count
//! is checked every `clean_check_interval`.
//!
//! After a pass that found too little to reclaim (deferral) the next
//! check is `retry_interval` later. After a failure the wait doubles from
//! `cleaning_interval` up to `retry_interval` ([`Schedule::failed`]); a
//! success resets it. Suspended, nothing is due until resumed.

use std::time::Duration;

use crate::config::Params;

/// How the cleaner is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Enough clean segments: only checking.
    Idle,
    /// Cleaning at normal speed.
    Normal,
    /// Short of clean segments: cleaning fast.
    Mc,
    /// Suspended by `fsctl clean --suspend`.
    Suspended,
}

impl Mode {
    /// The name `fsctl clean --status` shows.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Idle => "idle",
            Mode::Normal => "normal",
            Mode::Mc => "mc",
            Mode::Suspended => "suspended",
        }
    }
}

/// What one pass should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effort {
    /// Segments to choose.
    pub nsegments: usize,
    /// Least reclaimable blocks per chosen segment.
    pub min_reclaimable: u64,
}

/// The pass of `mode` (normal effort for [`Mode::Idle`] and
/// [`Mode::Suspended`], which is what a requested one-off pass uses).
pub fn effort(mode: Mode, p: &Params) -> Effort {
    match mode {
        Mode::Mc => Effort {
            nsegments: p.mc_nsegments,
            min_reclaimable: p.mc_min_reclaimable,
        },
        _ => Effort {
            nsegments: p.nsegments,
            min_reclaimable: p.min_reclaimable,
        },
    }
}

/// The hysteresis: the mode after reading `nclean` in `current`.
pub fn next_mode(current: Mode, nclean: u64, min: u64, max: u64) -> Mode {
    if nclean >= max {
        Mode::Idle
    } else if nclean < min {
        Mode::Mc
    } else if current == Mode::Idle {
        Mode::Idle
    } else {
        Mode::Normal
    }
}

/// The state machine.
#[derive(Debug, Clone)]
pub struct Schedule {
    mode: Mode,
    suspended: bool,
    due: Duration,
    failures: u32,
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule::new()
    }
}

impl Schedule {
    /// Idle, with a check due at once.
    pub fn new() -> Schedule {
        Schedule {
            mode: Mode::Idle,
            suspended: false,
            due: Duration::ZERO,
            failures: 0,
        }
    }

    /// The mode, [`Mode::Suspended`] while suspended.
    pub fn mode(&self) -> Mode {
        if self.suspended {
            Mode::Suspended
        } else {
            self.mode
        }
    }

    /// When the next check is due.
    pub fn due(&self) -> Duration {
        self.due
    }

    /// Whether a check is due at `now`.
    pub fn is_due(&self, now: Duration) -> bool {
        !self.suspended && now >= self.due
    }

    /// Consecutive failures so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Stops cleaning until [`Schedule::resume`].
    pub fn suspend(&mut self) {
        self.suspended = true;
    }

    /// Resumes; a check is due at once.
    pub fn resume(&mut self, now: Duration) {
        self.suspended = false;
        self.due = now;
    }

    /// A check read `nclean`, and `waiters` changes waiting for space in
    /// fsd: returns the pass to run now, if any (and when none, schedules
    /// the next check). With writers waiting the pass is mc mode's and is
    /// never deferred: whatever it nets is space they wait for.
    pub fn decide(
        &mut self,
        now: Duration,
        nclean: u64,
        waiters: u64,
        p: &Params,
    ) -> Option<Effort> {
        self.mode = next_mode(self.mode, nclean, p.min_clean, p.max_clean);
        if waiters > 0 {
            self.mode = Mode::Mc;
            return Some(Effort {
                min_reclaimable: 0,
                ..effort(Mode::Mc, p)
            });
        }
        if self.mode == Mode::Idle {
            self.failures = 0;
            self.due = now + p.clean_check_interval;
            return None;
        }
        Some(effort(self.mode, p))
    }

    /// The pass of the current mode cleaned something (or found nothing
    /// to choose): the next one after the mode's interval.
    pub fn cleaned(&mut self, now: Duration, p: &Params) {
        self.failures = 0;
        self.due = now
            + match self.mode {
                Mode::Mc => p.mc_cleaning_interval,
                Mode::Normal => p.cleaning_interval,
                Mode::Idle | Mode::Suspended => p.clean_check_interval,
            };
    }

    /// The pass found too little to reclaim: try again after
    /// `retry_interval`, or in mc mode (space is short) after at most
    /// `clean_check_interval`: a minute's pause then left writers waiting
    /// for space that a pass a few seconds later would have freed.
    pub fn deferred(&mut self, now: Duration, p: &Params) {
        self.failures = 0;
        self.due = now
            + match self.mode {
                Mode::Mc => p.retry_interval.min(p.clean_check_interval),
                _ => p.retry_interval,
            };
    }

    /// A check or pass failed: returns the wait, doubling from
    /// `first` (normally `cleaning_interval`) up to `cap` (normally
    /// `retry_interval`) with each consecutive failure.
    pub fn failed(&mut self, now: Duration, first: Duration, cap: Duration) -> Duration {
        let wait = backoff(self.failures, first, cap);
        self.failures = self.failures.saturating_add(1);
        self.due = now + wait;
        wait
    }

    /// A failure that will not go away soon (the filesystem is
    /// read-only, fsd cannot clean): wait `retry_interval`.
    pub fn failed_slowly(&mut self, now: Duration, retry: Duration) -> Duration {
        self.failures = self.failures.saturating_add(1);
        self.due = now + retry;
        retry
    }
}

/// The wait after `failures` earlier consecutive failures:
/// `first · 2^failures`, at most `cap`.
pub fn backoff(failures: u32, first: Duration, cap: Duration) -> Duration {
    let factor = 1u32.checked_shl(failures.min(31)).unwrap_or(u32::MAX);
    first.checked_mul(factor).unwrap_or(cap).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Geometry};

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    /// Defaults on 100 segments: min 10, max 20.
    fn params() -> Params {
        Config::default()
            .resolve(&Geometry {
                nsegs: 100,
                blocks_per_segment: 2048,
                block_size: 4096,
            })
            .unwrap()
    }

    #[test]
    fn hysteresis_table() {
        use Mode::*;
        for (current, n, want) in [
            (Idle, 5, Mc),
            (Idle, 15, Idle),
            (Idle, 20, Idle),
            (Normal, 5, Mc),
            (Normal, 15, Normal),
            (Normal, 20, Idle),
            (Mc, 9, Mc),
            (Mc, 10, Normal),
            (Mc, 25, Idle),
        ] {
            assert_eq!(next_mode(current, n, 10, 20), want, "{current:?} n={n}");
        }
        // min == max: no normal band.
        assert_eq!(next_mode(Idle, 9, 10, 10), Mc);
        assert_eq!(next_mode(Mc, 10, 10, 10), Idle);
    }

    #[test]
    fn a_run_with_a_fake_clock() {
        let p = params();
        let mut sch = Schedule::new();
        assert!(sch.is_due(s(0)));
        // Plenty of space: idle, next check after clean_check_interval.
        assert_eq!(sch.decide(s(0), 50, 0, &p), None);
        assert_eq!(sch.mode(), Mode::Idle);
        assert_eq!(sch.due(), s(10));
        assert!(!sch.is_due(s(9)));
        assert!(sch.is_due(s(10)));
        // Between the marks while idle: still idle.
        assert_eq!(sch.decide(s(10), 15, 0, &p), None);
        // Below min: mc effort, mc interval.
        let e = sch.decide(s(20), 8, 0, &p).unwrap();
        assert_eq!(
            e,
            Effort {
                nsegments: 4,
                min_reclaimable: 21
            }
        );
        assert_eq!(sch.mode(), Mode::Mc);
        sch.cleaned(s(20), &p);
        assert_eq!(sch.due(), s(21));
        // Above min, below max: normal effort and interval, until max.
        let e = sch.decide(s(21), 12, 0, &p).unwrap();
        assert_eq!(
            e,
            Effort {
                nsegments: 2,
                min_reclaimable: 205
            }
        );
        assert_eq!(sch.mode(), Mode::Normal);
        sch.cleaned(s(21), &p);
        assert_eq!(sch.due(), s(26));
        assert!(sch.decide(s(26), 19, 0, &p).is_some());
        sch.cleaned(s(26), &p);
        assert_eq!(sch.decide(s(31), 20, 0, &p), None);
        assert_eq!(sch.mode(), Mode::Idle);
        assert_eq!(sch.due(), s(41));
    }

    #[test]
    fn deferral_waits_retry_interval_or_less_when_space_is_short() {
        let p = params();
        let mut sch = Schedule::new();
        // mc mode: the check interval.
        assert!(sch.decide(s(0), 5, 0, &p).is_some());
        assert_eq!(sch.mode(), Mode::Mc);
        sch.deferred(s(0), &p);
        assert_eq!(sch.due(), s(10));
        // Normal mode: retry_interval.
        assert!(sch.decide(s(10), 15, 0, &p).is_some());
        assert_eq!(sch.mode(), Mode::Normal);
        sch.deferred(s(10), &p);
        assert_eq!(sch.due(), s(70));
    }

    #[test]
    fn writers_waiting_for_space_get_a_pass_that_is_never_deferred() {
        let p = params();
        let mut sch = Schedule::new();
        // Plenty of clean segments, but writers wait: mc effort at once,
        // with no reclaimable minimum.
        let e = sch.decide(s(0), 50, 2, &p).unwrap();
        assert_eq!(sch.mode(), Mode::Mc);
        assert_eq!(e.min_reclaimable, 0);
        assert_eq!(e.nsegments, p.mc_nsegments);
        // Nobody waits any more: back to the hysteresis.
        assert_eq!(sch.decide(s(1), 50, 0, &p), None);
        assert_eq!(sch.mode(), Mode::Idle);
    }

    #[test]
    fn failures_back_off_exponentially_up_to_retry_interval() {
        let p = params();
        let mut sch = Schedule::new();
        let waits: Vec<u64> = (0..6)
            .map(|_| {
                sch.failed(s(100), p.cleaning_interval, p.retry_interval)
                    .as_secs()
            })
            .collect();
        assert_eq!(waits, [5, 10, 20, 40, 60, 60]);
        assert_eq!(sch.due(), s(160));
        assert_eq!(sch.failures(), 6);
        // A success resets the back-off.
        assert!(sch.decide(s(160), 5, 0, &p).is_some());
        sch.cleaned(s(160), &p);
        assert_eq!(sch.failures(), 0);
        assert_eq!(
            sch.failed(s(200), p.cleaning_interval, p.retry_interval),
            s(5)
        );
        assert_eq!(sch.failed_slowly(s(200), p.retry_interval), s(60));
        assert_eq!(backoff(40, s(5), s(60)), s(60));
        assert_eq!(backoff(0, s(5), s(2)), s(2));
    }

    #[test]
    fn suspended_is_never_due_and_resume_is_due_at_once() {
        let p = params();
        let mut sch = Schedule::new();
        sch.decide(s(0), 50, 0, &p);
        sch.suspend();
        assert_eq!(sch.mode(), Mode::Suspended);
        assert!(!sch.is_due(s(1000)));
        sch.resume(s(3));
        assert!(sch.is_due(s(3)));
        assert_eq!(sch.mode(), Mode::Idle);
        assert_eq!(Mode::Suspended.name(), "suspended");
    }

    #[test]
    fn one_off_passes_use_normal_effort() {
        let p = params();
        assert_eq!(effort(Mode::Idle, &p), effort(Mode::Normal, &p));
        assert_eq!(effort(Mode::Suspended, &p).nsegments, 2);
        assert_eq!(effort(Mode::Mc, &p).nsegments, 4);
    }
}
