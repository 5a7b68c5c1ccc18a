//! Victim selection: which dirty segments a pass cleans.
//!
//! Pure functions of the segment usage fsd reports (GET_SUINFO) and, for
//! `declining-cost`, of what earlier passes observed ([`History`]).
//!
//! A segment is a candidate only if it is DIRTY, not ACTIVE, PENDING or
//! ERROR, and has something to reclaim (`nblocks > nlive`): cleaning a
//! segment whose blocks are all live copies a whole segment to free one.
//! Each policy orders the candidates best first; ties go to the segment
//! with more reclaimable blocks, then the older one, then the lower number,
//! so the order is total and passes are reproducible.
//!
//! * `timestamp` (nilfs's default): oldest `last_mod` first.
//! * `greedy`: most reclaimable blocks first.
//! * `cost-benefit` (Sprite LFS): highest `(1 − u)·age / (1 + u)` first,
//!   `u = nlive / blocks_per_segment`: reading the segment costs 1, writing
//!   its live blocks `u`, and the space gained `1 − u` lasts longer the older
//!   (colder) the data is.
//! * `declining-cost` (ours; in the spirit of minimum-declining-cost and
//!   SepBIT's estimated invalidation times): separates hot from cold by how
//!   fast each segment is dying now, not by its age. [`History`] keeps each
//!   unchanged segment's observed death rate ρ (live blocks lost per second
//!   between passes; before a second observation, its reclaimable blocks
//!   over its age). Cleaning a segment now copies `u/(1 − u)` blocks per
//!   block freed; left alone for [`HORIZON`] more passes, that cost falls by
//!   about `HORIZON · gap · ρ / (B · (1 − u)²)` (the derivative of
//!   `u/(1 − u)` as `u` falls at `ρ/B`, `gap` the mean time between
//!   passes). The policy cleans first the segments for which cleaning now
//!   plus what waiting would have saved is smallest: a hot segment still
//!   losing blocks fast is left to die further, a cold one is taken as soon
//!   as it is cheap, and a filesystem short of space is still cleaned (the
//!   order covers every candidate).

use std::collections::HashMap;

use lfs_proto::msg::{Suinfo, SUINFO_ACTIVE, SUINFO_DIRTY, SUINFO_ERROR, SUINFO_PENDING};

/// A selection policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Oldest first.
    Timestamp,
    /// Most reclaimable first.
    Greedy,
    /// Sprite LFS cost-benefit.
    CostBenefit,
    /// Cheapest now once what waiting would save is counted.
    DecliningCost,
}

impl Policy {
    /// Every policy's name, as the configuration spells it.
    pub const NAMES: &'static [&'static str] =
        &["timestamp", "greedy", "cost-benefit", "declining-cost"];
    /// Every policy, in [`Policy::NAMES`] order.
    pub const ALL: [Policy; 4] = [
        Policy::Timestamp,
        Policy::Greedy,
        Policy::CostBenefit,
        Policy::DecliningCost,
    ];

    /// The policy named `name`.
    pub fn from_name(name: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Timestamp => "timestamp",
            Policy::Greedy => "greedy",
            Policy::CostBenefit => "cost-benefit",
            Policy::DecliningCost => "declining-cost",
        }
    }
}

/// A segment that may be cleaned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Segment number.
    pub segnum: u64,
    /// Last modification, seconds since the epoch.
    pub last_mod: u64,
    /// Blocks written.
    pub nblocks: u32,
    /// Blocks still needed.
    pub nlive: u32,
}

impl Candidate {
    /// Blocks cleaning would free.
    pub fn reclaimable(&self) -> u64 {
        u64::from(self.nblocks.saturating_sub(self.nlive))
    }

    /// Seconds since the last modification at `now`.
    pub fn age(&self, now: u64) -> u64 {
        now.saturating_sub(self.last_mod)
    }
}

/// Flags that keep a segment from being cleaned.
const NOT_CLEANABLE: u32 = SUINFO_ACTIVE | SUINFO_PENDING | SUINFO_ERROR;

/// Whether `s` may be chosen (see the module doc).
pub fn is_candidate(s: &Suinfo) -> bool {
    s.flags & SUINFO_DIRTY != 0 && s.flags & NOT_CLEANABLE == 0 && s.nblocks > s.nlive
}

/// The candidates among `items`.
pub fn candidates(items: &[Suinfo]) -> Vec<Candidate> {
    items
        .iter()
        .filter(|s| is_candidate(s))
        .map(|s| Candidate {
            segnum: s.segnum,
            last_mod: s.last_mod,
            nblocks: s.nblocks,
            nlive: s.nlive,
        })
        .collect()
}

/// The cost-benefit score; `capacity` is the blocks a segment holds.
pub fn cost_benefit(c: &Candidate, now: u64, capacity: u32) -> f64 {
    let u = if capacity == 0 {
        1.0
    } else {
        (f64::from(c.nlive) / f64::from(capacity)).min(1.0)
    };
    (1.0 - u) * c.age(now) as f64 / (1.0 + u)
}

/// The tie-break shared by every policy (see the module doc).
fn tie_break(a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
    b.reclaimable()
        .cmp(&a.reclaimable())
        .then(a.last_mod.cmp(&b.last_mod))
        .then(a.segnum.cmp(&b.segnum))
}

/// Sorts by descending `score`, then [`tie_break`].
fn by_score(cands: &mut [Candidate], score: impl Fn(&Candidate) -> f64) {
    cands.sort_by(|a, b| score(b).total_cmp(&score(a)).then_with(|| tie_break(a, b)));
}

/// The candidates in the order `policy` would clean them, best first.
pub fn rank(
    policy: Policy,
    cands: &[Candidate],
    now: u64,
    capacity: u32,
    history: &History,
) -> Vec<Candidate> {
    let mut v = cands.to_vec();
    match policy {
        Policy::Timestamp => {
            v.sort_by(|a, b| a.last_mod.cmp(&b.last_mod).then_with(|| tie_break(a, b)))
        }
        Policy::Greedy => v.sort_by(tie_break),
        Policy::CostBenefit => by_score(&mut v, |c| cost_benefit(c, now, capacity)),
        Policy::DecliningCost => by_score(&mut v, |c| -declining_cost(c, now, capacity, history)),
    }
    v
}

/// Passes over which `declining-cost` weighs what waiting would save,
/// chosen with the model in `sim.rs` (512 × 128-block segments): at 64 it
/// is ahead of cost-benefit on Zipf at 70–90 % and 90/10 at 90 %, within
/// 3 % behind on 80/20; at 16 it falls back towards greedy, at 256 it
/// waits too long at 90 %.
pub const HORIZON: f64 = 64.0;

/// `declining-cost`'s score of `c`, lower is better (see the module doc).
pub fn declining_cost(c: &Candidate, now: u64, capacity: u32, history: &History) -> f64 {
    let cap = f64::from(capacity.max(1));
    let u = (f64::from(c.nlive) / cap).min(MAX_UTILISATION);
    let rho = history
        .death_rate(c.segnum)
        .unwrap_or_else(|| c.reclaimable() as f64 / c.age(now).max(1) as f64);
    let gap = history.gap().unwrap_or(1.0);
    u / (1.0 - u) + HORIZON * gap * rho / cap / ((1.0 - u) * (1.0 - u))
}

/// Utilisation is capped below 1 so that a full segment's cost is finite.
const MAX_UTILISATION: f64 = 1.0 - 1e-6;

/// The first `n` of [`rank`].
pub fn select(
    policy: Policy,
    cands: &[Candidate],
    now: u64,
    capacity: u32,
    history: &History,
    n: usize,
) -> Vec<Candidate> {
    let mut v = rank(policy, cands, now, capacity, history);
    v.truncate(n);
    v
}

/// Weight of the newest observation in a segment's death-rate estimate
/// (an exponentially weighted moving average, so that it follows a
/// workload that changes within a few passes).
pub const RATE_WEIGHT: f64 = 0.5;

/// Weight of the newest interval in the pass-gap estimate: slower, since
/// passes come in bursts when space runs short.
pub const GAP_WEIGHT: f64 = 0.1;

/// What a segment looked like at the last observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    last_mod: u64,
    nblocks: u32,
    nlive: u32,
    at: u64,
}

/// What earlier passes saw: per segment its last usage and its death rate,
/// and the mean time between observations.
#[derive(Debug, Clone, Default)]
pub struct History {
    seen: HashMap<u64, Seen>,
    /// Live blocks lost per second, per unchanged segment.
    rate: HashMap<u64, f64>,
    /// Seconds between observations.
    gap: Option<f64>,
    last: Option<u64>,
}

impl History {
    /// Records the usage of `items` seen at `now`. A dirty segment not
    /// rewritten since the last observation (same `last_mod` and
    /// `nblocks`) updates its death rate; a rewritten one starts again; a
    /// clean one is forgotten.
    pub fn observe(&mut self, now: u64, items: &[Suinfo]) {
        if let Some(last) = self.last.filter(|&l| now > l) {
            self.gap = Some(ewma(self.gap, (now - last) as f64, GAP_WEIGHT));
        }
        self.last = Some(now);
        for s in items {
            if s.flags & SUINFO_DIRTY == 0 {
                self.seen.remove(&s.segnum);
                self.rate.remove(&s.segnum);
                continue;
            }
            match self.seen.get(&s.segnum) {
                Some(prev) if prev.last_mod == s.last_mod && prev.nblocks == s.nblocks => {
                    if now > prev.at {
                        let died = f64::from(prev.nlive.saturating_sub(s.nlive));
                        let r = died / (now - prev.at) as f64;
                        let old = self.rate.get(&s.segnum).copied();
                        self.rate.insert(s.segnum, ewma(old, r, RATE_WEIGHT));
                    }
                }
                _ => {
                    self.rate.remove(&s.segnum);
                }
            }
            self.seen.insert(
                s.segnum,
                Seen {
                    last_mod: s.last_mod,
                    nblocks: s.nblocks,
                    nlive: s.nlive,
                    at: now,
                },
            );
        }
    }

    /// The observed death rate of `segnum` (blocks per second), once it
    /// was seen unchanged twice.
    pub fn death_rate(&self, segnum: u64) -> Option<f64> {
        self.rate.get(&segnum).copied()
    }

    /// The mean seconds between observations, once there were two.
    pub fn gap(&self) -> Option<f64> {
        self.gap
    }

    /// Forgets everything (e.g. after a reconnect to a filesystem that
    /// changed).
    pub fn clear(&mut self) {
        *self = History::default();
    }
}

fn ewma(old: Option<f64>, new: f64, weight: f64) -> f64 {
    match old {
        Some(o) => o + weight * (new - o),
        None => new,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 10_000;
    const CAP: u32 = 100;

    fn c(segnum: u64, age: u64, nlive: u32) -> Candidate {
        Candidate {
            segnum,
            last_mod: NOW - age,
            nblocks: CAP,
            nlive,
        }
    }

    fn order(p: Policy, cands: &[Candidate], h: &History) -> Vec<u64> {
        rank(p, cands, NOW, CAP, h)
            .iter()
            .map(|c| c.segnum)
            .collect()
    }

    /// 1: old, mostly live. 2: young, mostly dead. 3: middle-aged, half
    /// live. 4: very old, 90% live.
    fn mix() -> Vec<Candidate> {
        vec![c(1, 5000, 80), c(2, 10, 5), c(3, 2000, 50), c(4, 9000, 90)]
    }

    #[test]
    fn names_round_trip() {
        for p in Policy::ALL {
            assert_eq!(Policy::from_name(p.name()), Some(p));
        }
        assert_eq!(Policy::NAMES.len(), Policy::ALL.len());
        assert_eq!(Policy::from_name("fifo"), None);
    }

    #[test]
    fn candidates_are_dirty_idle_and_reclaimable() {
        let s = |segnum, flags, nblocks, nlive| Suinfo {
            segnum,
            last_mod: 1,
            nblocks,
            nlive,
            flags,
        };
        let items = [
            s(0, SUINFO_DIRTY, 10, 5),
            s(1, SUINFO_DIRTY | SUINFO_ACTIVE, 10, 5),
            s(2, SUINFO_DIRTY | SUINFO_PENDING, 10, 5),
            s(3, SUINFO_DIRTY | SUINFO_ERROR, 10, 5),
            s(4, 0, 0, 0),
            s(5, SUINFO_DIRTY, 10, 10),
            s(6, SUINFO_DIRTY | 0x100, 10, 0),
        ];
        let got: Vec<u64> = candidates(&items).iter().map(|c| c.segnum).collect();
        assert_eq!(got, [0, 6]);
    }

    #[test]
    fn timestamp_is_oldest_first() {
        assert_eq!(
            order(Policy::Timestamp, &mix(), &History::default()),
            [4, 1, 3, 2]
        );
    }

    #[test]
    fn greedy_is_most_reclaimable_first() {
        assert_eq!(
            order(Policy::Greedy, &mix(), &History::default()),
            [2, 3, 1, 4]
        );
    }

    #[test]
    fn cost_benefit_weighs_age_against_utilisation() {
        // 1: 0.2*5000/1.8 = 555; 2: 0.95*10/1.05 = 9; 3: 0.5*2000/1.5 = 666;
        // 4: 0.1*9000/1.9 = 473.
        assert_eq!(
            order(Policy::CostBenefit, &mix(), &History::default()),
            [3, 1, 4, 2]
        );
        let x = cost_benefit(&c(9, 2000, 50), NOW, CAP);
        assert!((x - 2000.0 / 3.0).abs() < 1e-9, "{x}");
        assert_eq!(cost_benefit(&c(9, 0, 0), NOW, CAP), 0.0);
        assert_eq!(cost_benefit(&c(9, 100, 0), NOW, 0), 0.0);
    }

    #[test]
    fn ties_go_to_more_reclaimable_then_older_then_lower_number() {
        let cands = [c(7, 100, 50), c(5, 100, 50), c(6, 100, 40), c(8, 200, 50)];
        assert_eq!(
            order(Policy::Greedy, &cands, &History::default()),
            [6, 8, 5, 7]
        );
        assert_eq!(
            order(Policy::Timestamp, &cands, &History::default()),
            [8, 6, 5, 7]
        );
    }

    fn su(segnum: u64, last_mod: u64, nlive: u32) -> Suinfo {
        Suinfo {
            segnum,
            last_mod,
            nblocks: CAP,
            nlive,
            flags: SUINFO_DIRTY,
        }
    }

    #[test]
    fn history_learns_death_rates_and_the_pass_gap() {
        let mut h = History::default();
        h.observe(1000, &[su(1, 900, 100), su(2, 0, 100)]);
        assert_eq!((h.death_rate(1), h.gap()), (None, None));
        // Between 1000 and 1200, segment 1 loses 40 blocks (0.2/s),
        // segment 2 none.
        h.observe(1200, &[su(1, 900, 60), su(2, 0, 100)]);
        assert_eq!(h.death_rate(1), Some(0.2));
        assert_eq!(h.death_rate(2), Some(0.0));
        assert_eq!(h.gap(), Some(200.0));
        // Then segment 1 loses 10 in 100 s (0.1/s): the average moves
        // halfway; the gap a tenth of the way. A rewritten segment (new last_mod) starts
        // again.
        h.observe(1300, &[su(1, 900, 50), su(2, 1250, 100)]);
        assert!((h.death_rate(1).unwrap() - 0.15).abs() < 1e-12);
        assert_eq!(h.death_rate(2), None);
        assert_eq!(h.gap(), Some(190.0));
        // A segment that became clean is forgotten.
        h.observe(
            1400,
            &[Suinfo {
                flags: 0,
                ..su(1, 900, 0)
            }],
        );
        assert_eq!(h.death_rate(1), None);
        h.clear();
        assert_eq!(h.gap(), None);
    }

    #[test]
    fn declining_cost_without_history_uses_the_mean_death_rate() {
        // No history: ρ = reclaimable / age, gap 1 s. Segment 2 (age 10,
        // 95 dead) is dying at 9.5/s: 0.05/0.95 + 64·9.5/100/0.95² ≈ 6.8,
        // so it waits behind 3 (0.5/0.5 + 64·0.025/100/0.25 = 1.064), 1
        // (4 + 64·0.004/100/0.04 = 4.064) and 4 (9 + 64·(10/9000)/100/0.01 ≈ 9.71).
        let h = History::default();
        let x = declining_cost(&c(3, 2000, 50), NOW, CAP, &h);
        assert!((x - 1.064).abs() < 1e-9, "{x}");
        assert_eq!(order(Policy::DecliningCost, &mix(), &h), [3, 1, 2, 4]);
        // A full segment has a finite cost.
        assert!(declining_cost(&c(9, 100, CAP), NOW, CAP, &h).is_finite());
    }

    #[test]
    fn declining_cost_leaves_segments_that_are_still_dying() {
        // Two segments with the same utilisation and age: 5 has been
        // losing 1 block/s, 6 nothing; cost-benefit cannot tell them
        // apart (it prefers the lower number), declining-cost takes the
        // stable one first and keeps the dying one for later.
        let mut h = History::default();
        h.observe(NOW - 20, &[su(5, NOW - 1000, 70), su(6, NOW - 1000, 50)]);
        h.observe(NOW, &[su(5, NOW - 1000, 50), su(6, NOW - 1000, 50)]);
        let cands = [c(5, 1000, 50), c(6, 1000, 50)];
        assert_eq!(order(Policy::CostBenefit, &cands, &h), [5, 6]);
        assert_eq!(order(Policy::DecliningCost, &cands, &h), [6, 5]);
        let picked: Vec<u64> = select(Policy::DecliningCost, &cands, NOW, CAP, &h, 1)
            .iter()
            .map(|c| c.segnum)
            .collect();
        assert_eq!(picked, [6]);
    }
}
