//! Victim selection: which dirty segments a pass cleans.
//!
//! Pure functions of the segment usage fsd reports (GET_SUINFO) and, for
//! `age-threshold`, of what earlier passes observed ([`History`]).
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
//! * `age-threshold` (ours; f2fs ATGC- and SepBIT-like): young segments
//!   are skipped while their blocks are still dying, then cost-benefit
//!   among the old ones. The threshold adapts: [`History`] watches how
//!   `nlive` of unchanged segments drops between passes and keeps the
//!   average age at which blocks die (their lifespan, weighted by the
//!   blocks that died); a segment younger than that is probably still
//!   hot, and waiting lets more of it die before it is copied. Before
//!   any death has been seen, the threshold is the candidates' mean age
//!   (as ATGC). If too few segments are old enough, the young ones follow
//!   in cost-benefit order, so a filesystem short of space is always
//!   cleaned.

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
    /// Skip segments younger than the observed lifespan, then cost-benefit.
    AgeThreshold,
}

impl Policy {
    /// Every policy's name, as the configuration spells it.
    pub const NAMES: &'static [&'static str] =
        &["timestamp", "greedy", "cost-benefit", "age-threshold"];
    /// Every policy, in [`Policy::NAMES`] order.
    pub const ALL: [Policy; 4] = [
        Policy::Timestamp,
        Policy::Greedy,
        Policy::CostBenefit,
        Policy::AgeThreshold,
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
            Policy::AgeThreshold => "age-threshold",
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
        Policy::AgeThreshold => {
            let threshold = age_threshold(&v, now, history);
            let (mut old, mut young): (Vec<_>, Vec<_>) =
                v.into_iter().partition(|c| c.age(now) as f64 >= threshold);
            by_score(&mut old, |c| cost_benefit(c, now, capacity));
            by_score(&mut young, |c| cost_benefit(c, now, capacity));
            old.extend(young);
            v = old;
        }
    }
    v
}

/// The age (seconds) below which `age-threshold` skips a segment: the
/// observed lifespan, else the candidates' mean age.
pub fn age_threshold(cands: &[Candidate], now: u64, history: &History) -> f64 {
    history.lifespan().unwrap_or_else(|| {
        if cands.is_empty() {
            0.0
        } else {
            cands.iter().map(|c| c.age(now) as f64).sum::<f64>() / cands.len() as f64
        }
    })
}

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

/// Weight of the newest pass in the lifespan estimate (an exponentially
/// weighted moving average, so the estimate follows a workload that
/// changes, within a few passes).
pub const LIFESPAN_WEIGHT: f64 = 0.5;

/// What a segment looked like at the last observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    last_mod: u64,
    nblocks: u32,
    nlive: u32,
    at: u64,
}

/// What earlier passes saw: per segment its last usage, and the estimated
/// lifespan of blocks (mean age at which they die).
#[derive(Debug, Clone, Default)]
pub struct History {
    seen: HashMap<u64, Seen>,
    lifespan: Option<f64>,
}

impl History {
    /// Records the usage of `items` seen at `now`: every dirty segment that
    /// was not rewritten since the last observation (same `last_mod` and
    /// `nblocks`) and lost live blocks contributes those deaths, at the
    /// segment's age in the middle of the interval.
    pub fn observe(&mut self, now: u64, items: &[Suinfo]) {
        let (mut deaths, mut weighted_age) = (0.0f64, 0.0f64);
        for s in items {
            if s.flags & SUINFO_DIRTY == 0 {
                self.seen.remove(&s.segnum);
                continue;
            }
            if let Some(prev) = self.seen.get(&s.segnum) {
                if prev.last_mod == s.last_mod && prev.nblocks == s.nblocks && s.nlive < prev.nlive
                {
                    let died = f64::from(prev.nlive - s.nlive);
                    let mid = (prev.at + now) as f64 / 2.0;
                    deaths += died;
                    weighted_age += died * (mid - s.last_mod as f64).max(0.0);
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
        if deaths > 0.0 {
            let pass = weighted_age / deaths;
            self.lifespan = Some(match self.lifespan {
                Some(old) => old + LIFESPAN_WEIGHT * (pass - old),
                None => pass,
            });
        }
    }

    /// The estimated block lifespan in seconds, once a death was seen.
    pub fn lifespan(&self) -> Option<f64> {
        self.lifespan
    }

    /// Forgets segments not in `items` (e.g. after a reconnect to a
    /// filesystem that changed).
    pub fn clear(&mut self) {
        *self = History::default();
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

    #[test]
    fn age_threshold_without_history_uses_the_mean_age() {
        // Mean age of mix() is 4002.5: 1 and 4 are old, ranked by
        // cost-benefit (1 before 4), then 3 and 2 by cost-benefit.
        let h = History::default();
        assert_eq!(age_threshold(&mix(), NOW, &h), 4002.5);
        assert_eq!(order(Policy::AgeThreshold, &mix(), &h), [1, 4, 3, 2]);
        assert_eq!(age_threshold(&[], NOW, &h), 0.0);
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
    fn history_learns_the_lifespan_from_deaths() {
        let mut h = History::default();
        h.observe(1000, &[su(1, 900, 100), su(2, 0, 100)]);
        assert_eq!(h.lifespan(), None);
        // Segment 1 loses 30 blocks between 1000 and 1200 (mid 1100, age
        // 200); segment 2 loses 10 (age 1100); lifespan = (30*200 +
        // 10*1100) / 40 = 425.
        h.observe(1200, &[su(1, 900, 70), su(2, 0, 90)]);
        assert_eq!(h.lifespan(), Some(425.0));
        // A rewritten segment (new last_mod) contributes nothing; the
        // average moves halfway to the new pass's 1300 (segment 2, mid 1300).
        h.observe(1400, &[su(1, 1300, 10), su(2, 0, 80)]);
        assert_eq!(h.lifespan(), Some(425.0 + 0.5 * (1300.0 - 425.0)));
        // A segment that became clean is forgotten.
        h.observe(
            1500,
            &[Suinfo {
                flags: 0,
                ..su(2, 0, 0)
            }],
        );
        h.observe(1600, &[su(2, 0, 0)]);
        assert_eq!(h.lifespan(), Some(862.5));
        h.clear();
        assert_eq!(h.lifespan(), None);
    }

    #[test]
    fn age_threshold_skips_segments_younger_than_the_lifespan() {
        let mut h = History::default();
        h.observe(NOW - 100, &[su(9, NOW - 1100, 100)]);
        h.observe(NOW, &[su(9, NOW - 1100, 50)]);
        // Lifespan: mid NOW-50, age 1050.
        assert_eq!(h.lifespan(), Some(1050.0));
        // 3 (age 2000) would win cost-benefit among the old ones, and 5
        // (age 1000, almost empty) overall; but 5 is younger than the
        // lifespan, so it comes after every old segment.
        let cands = [c(5, 1000, 1), c(3, 2000, 50), c(4, 9000, 90)];
        assert_eq!(order(Policy::CostBenefit, &cands, &h), [5, 3, 4]);
        assert_eq!(order(Policy::AgeThreshold, &cands, &h), [3, 4, 5]);
        let picked: Vec<u64> = select(Policy::AgeThreshold, &cands, NOW, CAP, &h, 2)
            .iter()
            .map(|c| c.segnum)
            .collect();
        assert_eq!(picked, [3, 4]);
    }
}
