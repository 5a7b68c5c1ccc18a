//! Victim selection, which dirty segments a pass cleans, and placement,
//! where fsd puts what it writes.
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
//!   unchanged segment's observed death rate ρ (live blocks lost per block
//!   that died in the filesystem between passes; before a second
//!   observation, its reclaimable blocks over the blocks that died since it
//!   was first seen). Cleaning a segment now copies `u/(1 − u)` blocks per
//!   block freed; left alone for [`HORIZON`] more passes, that cost falls by
//!   about `HORIZON · gap · ρ / (B · (1 − u)²)` (the derivative of
//!   `u/(1 − u)` as `u` falls at `ρ/B`, `gap` the mean deaths between
//!   passes). The policy cleans first the segments for which cleaning now
//!   plus what waiting would have saved is smallest: a hot segment still
//!   losing blocks fast is left to die further, a cold one is taken as soon
//!   as it is cheap, and a filesystem short of space is still cleaned (the
//!   order covers every candidate). It also places: survivors of victims
//!   that are still dying fast go to fsd's warm head ([`warm_victims`]),
//!   and it asks fsd to write file data that lived long apart from the
//!   rest ([`separates_writes`]). The other policies only choose.

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
        Policy::DecliningCost => by_score(&mut v, |c| -declining_cost(c, capacity, history)),
    }
    v
}

/// Passes over which `declining-cost` weighs what waiting would save,
/// chosen with the model in `sim.rs` (256 × 128-block segments, the
/// warm head in use): 32 is ahead of cost-benefit and greedy on every
/// skewed workload at 70–90 %; 16 and 64 lose ground at 70 % and at 90 %,
/// 128 waits too long at 90 %.
pub const HORIZON: f64 = 32.0;

/// `declining-cost`'s score of `c`, lower is better (see the module doc).
/// Rates and the gap between passes are in blocks written (the
/// [`History`]'s clock), so the score is the same whether passes come
/// every 10 ms or every minute.
pub fn declining_cost(c: &Candidate, capacity: u32, history: &History) -> f64 {
    let cap = f64::from(capacity.max(1));
    let u = (f64::from(c.nlive) / cap).min(MAX_UTILISATION);
    u / (1.0 - u) + HORIZON * history.deaths_per_pass(c) / cap / ((1.0 - u) * (1.0 - u))
}

/// Whether `declining-cost` sends the survivors of victim `c` to the warm
/// head: at the rate it is dying, its live blocks would all be dead
/// within [`HOT_HORIZON`] passes. Such survivors are the hot blocks a
/// pass caught before they were overwritten; mixed with the cold ones in
/// one segment, they would leave holes there soon after, and that
/// segment, mostly cold data, would have to be copied again.
pub fn is_hot(c: &Candidate, history: &History) -> bool {
    c.nlive > 0
        && history.death_rate(c.segnum).is_some()
        && HOT_HORIZON * history.deaths_per_pass(c) >= f64::from(c.nlive)
}

/// See [`is_hot`]; in the model, 16 catches too few hot victims on 80/20,
/// and 64 to 256 do about equally well.
pub const HOT_HORIZON: f64 = 64.0;

/// Whether `policy` asks fsd to write file data whose previous version
/// lived long apart from the rest (only `declining-cost`; see
/// `CLEAN_SEPARATE_WRITES`): user writes mix hot and cold data, and the
/// cold blocks among them pin segments whose hot blocks died (SepBIT's
/// separation of user writes by the lifespan of the block they replace).
pub fn separates_writes(policy: Policy) -> bool {
    policy == Policy::DecliningCost
}

/// Whether `policy` asks fsd to send the moved blocks written more
/// recently than the mean lifespan of overwritten blocks to the warm head,
/// whichever victim they come from (only `declining-cost`; see
/// `CLEAN_WARM_YOUNG`): a victim holds hot survivors and cold ones, and
/// [`warm_victims`] can only send all of them to one head. Through fsd,
/// 80/20 overwrites at 90 % cost 7.8 device bytes a user byte without it
/// and 7.2–7.3 with it (cost-benefit 7.4–7.8; bench/RESULTS-cleaning.md);
/// the hot data had been spread over a hundred segments of mostly cold
/// data.
pub fn warms_young(policy: Policy) -> bool {
    policy == Policy::DecliningCost
}

/// The victims among `chosen` whose survivors `policy` sends to the warm
/// head rather than the cold one: only `declining-cost` separates them
/// ([`is_hot`]); the other policies choose victims only.
pub fn warm_victims(policy: Policy, chosen: &[Candidate], history: &History) -> Vec<u64> {
    match policy {
        Policy::DecliningCost => chosen
            .iter()
            .filter(|c| is_hot(c, history))
            .map(|c| c.segnum)
            .collect(),
        _ => Vec::new(),
    }
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
/// workload that changes within some ten passes). A segment loses about
/// one block between two passes at 80 %, so one observation says little:
/// at 0.5 that noise reordered the segments, and through fsd 80/20 at
/// 80 % cost 3.6 device bytes a user byte against 3.2 at 0.15 (the model
/// is level between them).
pub const RATE_WEIGHT: f64 = 0.15;

/// Weight of the newest interval in the pass-gap estimate: slower, since
/// passes come in bursts when space runs short.
pub const GAP_WEIGHT: f64 = 0.1;

/// What a segment looked like at the last observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    last_mod: u64,
    nblocks: u32,
    nlive: u32,
    /// The clock then.
    at: u64,
    /// The clock when these contents were first seen.
    born: u64,
}

/// What earlier passes saw: per segment its last usage and its death
/// rate, and the mean interval between observations.
///
/// Its clock counts the blocks written to the device, as the usage
/// reports show them (each observation adds what segments gained since
/// the last one): wall-clock seconds were too coarse (a benchmark cell
/// made 50 passes a second, and every rate and gap was 0 or a whole
/// second), and counting passes misreads bursts of passes after a
/// pause. Rates are dead blocks per block written.
#[derive(Debug, Clone, Default)]
pub struct History {
    seen: HashMap<u64, Seen>,
    /// Live blocks lost per block written, per unchanged segment.
    rate: HashMap<u64, f64>,
    /// Blocks written between observations.
    gap: Option<f64>,
    /// Blocks written (the clock).
    clock: u64,
    observed: bool,
}

impl History {
    /// Records the usage of `items`. A dirty segment not rewritten since
    /// the last observation (same `last_mod` and `nblocks`) updates its
    /// death rate; a rewritten one starts again; a clean one is
    /// forgotten.
    pub fn observe(&mut self, items: &[Suinfo]) {
        let died: u64 = items
            .iter()
            .filter(|s| s.flags & SUINFO_DIRTY != 0)
            .filter_map(|s| {
                let p = self.seen.get(&s.segnum)?;
                (p.last_mod == s.last_mod && p.nblocks == s.nblocks)
                    .then(|| u64::from(p.nlive.saturating_sub(s.nlive)))
            })
            .sum();
        if self.observed {
            self.clock += died;
            if died > 0 {
                self.gap = Some(ewma(self.gap, died as f64, GAP_WEIGHT));
            }
        }
        let now = self.clock;
        for s in items {
            if s.flags & SUINFO_DIRTY == 0 {
                self.seen.remove(&s.segnum);
                self.rate.remove(&s.segnum);
                continue;
            }
            let mut born = now;
            match self.seen.get(&s.segnum) {
                Some(prev) if prev.last_mod == s.last_mod && prev.nblocks == s.nblocks => {
                    born = prev.born;
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
                    born,
                },
            );
        }
        self.observed = true;
    }

    /// The observed death rate of `segnum` (dead blocks per block
    /// written), once it was seen unchanged twice with writes between.
    pub fn death_rate(&self, segnum: u64) -> Option<f64> {
        self.rate.get(&segnum).copied()
    }

    /// The mean blocks written between observations, once blocks were
    /// written between two.
    pub fn gap(&self) -> Option<f64> {
        self.gap
    }

    /// Blocks `c` loses per pass: its death rate times the gap. Before a
    /// rate is known, its reclaimable blocks over the blocks written since
    /// its contents were first seen (at least one gap), as if it had lost
    /// them at an even pace.
    pub fn deaths_per_pass(&self, c: &Candidate) -> f64 {
        let gap = self.gap.unwrap_or(1.0);
        match self.death_rate(c.segnum) {
            Some(r) => r * gap,
            None => {
                let age = self
                    .seen
                    .get(&c.segnum)
                    .map_or(0.0, |s| (self.clock - s.born) as f64);
                c.reclaimable() as f64 * gap / age.max(gap)
            }
        }
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
    fn history_counts_time_in_dead_blocks() {
        let mut h = History::default();
        h.observe(&[su(1, 900, 100), su(2, 0, 100), su(3, 5, 100)]);
        assert_eq!((h.death_rate(1), h.gap()), (None, None));
        // Segment 1 loses 40 blocks, the others none: the clock moves 40,
        // segment 1 lost one block per block that died, the others 0.
        h.observe(&[su(1, 900, 60), su(2, 0, 100), su(3, 5, 100)]);
        assert_eq!(h.death_rate(1), Some(1.0));
        assert_eq!(h.death_rate(2), Some(0.0));
        assert_eq!(h.gap(), Some(40.0));
        // Then 1 and 3 lose 10 each (0.5 per block each): the averages
        // move RATE_WEIGHT of the way, the gap a tenth of the way. A
        // rewritten segment (new last_mod) starts again, and its deaths
        // are not counted.
        h.observe(&[su(1, 900, 50), su(2, 1250, 10), su(3, 5, 90)]);
        let one = 1.0 - 0.5 * RATE_WEIGHT;
        assert!((h.death_rate(1).unwrap() - one).abs() < 1e-12);
        assert!((h.death_rate(3).unwrap() - 0.5 * RATE_WEIGHT).abs() < 1e-12);
        assert_eq!(h.death_rate(2), None);
        assert_eq!(h.gap(), Some(38.0));
        // Passes with no deaths between them (a burst) leave it alone.
        h.observe(&[su(1, 900, 50), su(2, 1250, 10), su(3, 5, 90)]);
        assert_eq!((h.death_rate(1), h.gap()), (Some(one), Some(38.0)));
        // A segment that became clean is forgotten.
        h.observe(&[Suinfo {
            flags: 0,
            ..su(1, 900, 0)
        }]);
        assert_eq!(h.death_rate(1), None);
        h.clear();
        assert_eq!(h.gap(), None);
    }

    #[test]
    fn deaths_per_pass_before_a_rate_is_known() {
        let mut h = History::default();
        // No history: all its reclaimable blocks in one pass.
        assert_eq!(h.deaths_per_pass(&c(1, 10, 60)), 40.0);
        h.observe(&[su(1, 900, 100), su(2, 0, 100)]);
        h.observe(&[su(1, 900, 20), su(2, 0, 100)]);
        // 80 died, one pass of 80: segment 4, first seen now with 30
        // reclaimable blocks, lost them in at most one pass...
        h.observe(&[su(1, 900, 20), su(2, 0, 100), su(4, 7, 70)]);
        assert_eq!(h.deaths_per_pass(&c(4, 10, 70)), 30.0);
        // ...and 160 dead blocks later, at half that pace a pass.
        h.observe(&[su(1, 900, 20), su(2, 0, 20), su(4, 7, 70)]);
        assert_eq!(h.gap(), Some(80.0));
        let mut h2 = h.clone();
        h2.rate.clear();
        assert!((h2.deaths_per_pass(&c(4, 10, 70)) - 30.0).abs() < 1e-9);
        // Segment 1 lost 80 of 80 dead blocks, then none of 80: its rate
        // fell RATE_WEIGHT of the way to 0.
        let want = (1.0 - RATE_WEIGHT) * 80.0;
        assert!((h.deaths_per_pass(&c(1, 10, 20)) - want).abs() < 1e-9);
    }

    #[test]
    fn declining_cost_without_history_ranks_as_greedy() {
        // No history: every segment lost its dead blocks in one pass; the
        // emptiest is still cheapest: 2 (0.05/0.95 + 32·95/100/0.95² ≈
        // 33.7), 3 (1 + 32·50/100/0.25 = 65), 1 (4 + 32·20/100/0.04 =
        // 164), 4 (9 + 32·10/100/0.01 = 329).
        let h = History::default();
        let x = declining_cost(&c(3, 2000, 50), CAP, &h);
        assert!((x - 65.0).abs() < 1e-9, "{x}");
        assert_eq!(order(Policy::DecliningCost, &mix(), &h), [2, 3, 1, 4]);
        assert_eq!(order(Policy::Greedy, &mix(), &h), [2, 3, 1, 4]);
        // A full segment has a finite cost.
        assert!(declining_cost(&c(9, 100, CAP), CAP, &h).is_finite());
    }

    #[test]
    fn declining_cost_leaves_segments_that_are_still_dying() {
        // Two segments with the same utilisation and age: 5 has been
        // losing blocks, 6 none; cost-benefit cannot tell them apart (it
        // prefers the lower number), declining-cost takes the stable one
        // first and keeps the dying one for later.
        let mut h = History::default();
        h.observe(&[su(5, NOW - 1000, 70), su(6, NOW - 1000, 50)]);
        h.observe(&[su(5, NOW - 1000, 50), su(6, NOW - 1000, 50)]);
        let cands = [c(5, 1000, 50), c(6, 1000, 50)];
        assert_eq!(order(Policy::CostBenefit, &cands, &h), [5, 6]);
        assert_eq!(order(Policy::DecliningCost, &cands, &h), [6, 5]);
        let picked: Vec<u64> = select(Policy::DecliningCost, &cands, NOW, CAP, &h, 1)
            .iter()
            .map(|c| c.segnum)
            .collect();
        assert_eq!(picked, [6]);
    }

    #[test]
    fn only_declining_cost_sends_hot_survivors_to_the_warm_head() {
        let mut h = History::default();
        h.observe(&[su(7, 1, 100), su(8, 2, 100), su(9, 3, 100)]);
        // 7 loses 40 blocks a pass: its 60 live ones would be dead within
        // HOT_HORIZON passes. 8 loses none; 9 was rewritten (no rate).
        h.observe(&[su(7, 1, 60), su(8, 2, 100), su(9, 4, 90)]);
        let cands = [c(7, 10, 60), c(8, 10, 100), c(9, 10, 90)];
        assert!(is_hot(&cands[0], &h));
        assert_eq!(warm_victims(Policy::DecliningCost, &cands, &h), [7]);
        for p in [Policy::Timestamp, Policy::Greedy, Policy::CostBenefit] {
            assert!(warm_victims(p, &cands, &h).is_empty());
        }
        // Dying at a 256th of that pace, it is not hot.
        let slow = Candidate {
            nlive: 60,
            ..cands[0]
        };
        let mut h2 = h.clone();
        h2.rate.insert(7, 1.0 / 256.0);
        assert!(!is_hot(&slow, &h2));
    }
}
