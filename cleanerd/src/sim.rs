//! A deterministic model of a log-structured device, to compare the
//! selection policies' write amplification. **A model, not a
//! measurement**: no fsd, no metadata, no checkpoints; the real
//! measurement through fsd is bench/'s job.
//!
//! The model: `nsegs` segments of `bps` blocks; a logical space of
//! `utilisation · nsegs · bps` blocks, first written in order, then
//! overwritten one block at a time by a workload (uniform, hot/cold
//! 80/20 or 90/10, Zipf). User writes go to one log head, the cleaner's
//! copies to another (the cold log, as fsd does); with the policy's
//! placement ([`policy::warm_victims`], [`policy::warms_young`],
//! [`policy::separates_writes`]) as fsd follows it, survivors of hot
//! victims and moved blocks younger than the running mean lifespan to a
//! third (the warm head), and user writes whose previous version lived
//! longer than that mean to a fourth (the long head). Time is the count of
//! user writes; a segment's `last_mod` is the time of its last write.
//! When fewer than [`SimConfig::reserve`] segments are clean, passes run
//! — each one observed by the policy's [`History`] and choosing with the
//! real [`policy::select`] — until `reserve + nsegments` are. Write
//! amplification is (user + copied blocks) / user blocks over the
//! measured phase, after a warm-up that reaches the steady state.

use lfs_proto::msg::{Suinfo, SUINFO_ACTIVE, SUINFO_DIRTY};

use crate::policy::{self, History, Policy};

/// Which blocks get overwritten.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Workload {
    /// Every block equally often.
    Uniform,
    /// `access` of the writes go to `data` of the blocks (0.8, 0.2 for
    /// 80/20).
    HotCold {
        /// Fraction of writes to the hot blocks.
        access: f64,
        /// Fraction of blocks that are hot.
        data: f64,
    },
    /// Block of rank k written with probability ∝ 1/k^s.
    Zipf(f64),
}

impl Workload {
    /// A short name for tables.
    pub fn name(&self) -> String {
        match self {
            Workload::Uniform => "uniform".into(),
            Workload::HotCold { access, data } => {
                format!("{:.0}/{:.0}", access * 100.0, data * 100.0)
            }
            Workload::Zipf(s) => format!("zipf {s}"),
        }
    }

    /// The workloads the report covers.
    pub fn all() -> [Workload; 4] {
        [
            Workload::Uniform,
            Workload::HotCold {
                access: 0.8,
                data: 0.2,
            },
            Workload::HotCold {
                access: 0.9,
                data: 0.1,
            },
            Workload::Zipf(1.0),
        ]
    }
}

/// One run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimConfig {
    /// Segments.
    pub nsegs: usize,
    /// Blocks per segment.
    pub bps: usize,
    /// Logical blocks over physical blocks.
    pub utilisation: f64,
    /// The overwrites.
    pub workload: Workload,
    /// The policy.
    pub policy: Policy,
    /// Segments chosen per pass.
    pub nsegments: usize,
    /// Clean segments below which cleaning starts.
    pub reserve: usize,
    /// Overwrites before measuring, in multiples of the logical space.
    pub warmup: f64,
    /// Overwrites measured, in multiples of the logical space.
    pub measured: f64,
    /// PRNG seed.
    pub seed: u64,
}

impl SimConfig {
    /// A small configuration that runs in well under a second.
    pub fn small(workload: Workload, utilisation: f64, policy: Policy) -> SimConfig {
        SimConfig {
            nsegs: 128,
            bps: 64,
            utilisation,
            workload,
            policy,
            nsegments: 2,
            reserve: 4,
            warmup: 2.0,
            measured: 4.0,
            seed: 0x5eed,
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimResult {
    /// User blocks written in the measured phase.
    pub user: u64,
    /// Blocks the cleaner copied in the measured phase.
    pub copied: u64,
    /// Passes in the measured phase.
    pub passes: u64,
}

impl SimResult {
    /// (user + copied) / user.
    pub fn write_amplification(&self) -> f64 {
        if self.user == 0 {
            1.0
        } else {
            (self.user + self.copied) as f64 / self.user as f64
        }
    }
}

/// splitmix64: small, fast, and the same everywhere.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Draws the logical block of the next overwrite.
#[derive(Debug)]
struct Picker {
    workload: Workload,
    nblocks: usize,
    /// Rank → logical block, so hot blocks are spread over the space.
    perm: Vec<usize>,
    /// Zipf's cumulative distribution over ranks.
    cdf: Vec<f64>,
}

impl Picker {
    fn new(workload: Workload, nblocks: usize, rng: &mut Rng) -> Picker {
        let mut perm: Vec<usize> = (0..nblocks).collect();
        for i in (1..nblocks).rev() {
            perm.swap(i, rng.below(i + 1));
        }
        let cdf = match workload {
            Workload::Zipf(s) => {
                let mut acc = 0.0;
                let mut v: Vec<f64> = (1..=nblocks)
                    .map(|k| {
                        acc += 1.0 / (k as f64).powf(s);
                        acc
                    })
                    .collect();
                for x in &mut v {
                    *x /= acc;
                }
                v
            }
            _ => Vec::new(),
        };
        Picker {
            workload,
            nblocks,
            perm,
            cdf,
        }
    }

    fn pick(&self, rng: &mut Rng) -> usize {
        let rank = match self.workload {
            Workload::Uniform => rng.below(self.nblocks),
            Workload::HotCold { access, data } => {
                // At least one hot and one cold block (nblocks > 1).
                let hot = ((self.nblocks as f64 * data) as usize).clamp(1, self.nblocks - 1);
                if rng.unit() < access {
                    rng.below(hot)
                } else {
                    hot + rng.below(self.nblocks - hot)
                }
            }
            Workload::Zipf(_) => {
                let u = rng.unit();
                self.cdf.partition_point(|&c| c < u).min(self.nblocks - 1)
            }
        };
        self.perm.get(rank).copied().unwrap_or(0)
    }
}

/// The modelled device.
#[derive(Debug)]
struct Device {
    bps: usize,
    /// Per segment: the logical blocks written into it, in order.
    contents: Vec<Vec<usize>>,
    nlive: Vec<u32>,
    last_mod: Vec<u64>,
    /// Logical block → (segment, index), or none before its first write.
    loc: Vec<Option<(usize, usize)>>,
    free: Vec<usize>,
    heads: [usize; 4],
    /// Logical block → time of its last write.
    written_at: Vec<u64>,
    /// Running mean lifespan of overwritten blocks (fsd's
    /// `State::lifespan`, in user writes rather than checkpoints).
    lifespan: f64,
    time: u64,
    copied: u64,
}

const USER: usize = 0;
const GC: usize = 1;
/// The cleaner's second head, for survivors of victims the policy finds
/// hot ([`policy::warm_victims`]).
const WARM: usize = 2;
/// User writes predicted long-lived ([`policy::separates_writes`]).
const LONG: usize = 3;
/// fsd's weight of each lifespan in the running mean.
const LIFESPAN_WEIGHT: f64 = 1.0 / 1024.0;

impl Device {
    fn new(nsegs: usize, bps: usize, nblocks: usize) -> Device {
        let mut free: Vec<usize> = (4..nsegs).rev().collect();
        free.shrink_to_fit();
        Device {
            bps,
            contents: vec![Vec::with_capacity(bps); nsegs],
            nlive: vec![0; nsegs],
            last_mod: vec![0; nsegs],
            loc: vec![None; nblocks],
            free,
            heads: [0, 1, 2, 3],
            written_at: vec![0; nblocks],
            lifespan: 0.0,
            time: 0,
            copied: 0,
        }
    }

    /// Appends `block` to log `head`, opening a new segment when full.
    fn append(&mut self, head: usize, block: usize) -> Result<(), String> {
        let mut seg = self.heads[head];
        if self.contents[seg].len() == self.bps {
            seg = self
                .free
                .pop()
                .ok_or("the model ran out of clean segments")?;
            self.heads[head] = seg;
        }
        if let Some((old, _)) = self.loc[block] {
            self.nlive[old] -= 1;
        }
        self.loc[block] = Some((seg, self.contents[seg].len()));
        self.contents[seg].push(block);
        self.nlive[seg] += 1;
        self.last_mod[seg] = self.time;
        Ok(())
    }

    /// Writes `block` for the user, at the long head if `separate` and
    /// its previous version lived longer than the running mean.
    fn write(&mut self, block: usize, separate: bool) -> Result<(), String> {
        let lived = (self.time - self.written_at[block]) as f64;
        self.written_at[block] = self.time;
        if self.lifespan == 0.0 {
            self.lifespan = lived;
        } else {
            self.lifespan += (lived - self.lifespan) * LIFESPAN_WEIGHT;
        }
        let head = if separate && lived > self.lifespan {
            LONG
        } else {
            USER
        };
        self.append(head, block)
    }

    fn suinfo(&self) -> Vec<Suinfo> {
        (0..self.contents.len())
            .map(|s| {
                let written = !self.contents[s].is_empty();
                let active = self.heads.contains(&s);
                Suinfo {
                    segnum: s as u64,
                    last_mod: self.last_mod[s],
                    nblocks: self.contents[s].len() as u32,
                    nlive: self.nlive[s],
                    flags: if written || active { SUINFO_DIRTY } else { 0 }
                        | if active { SUINFO_ACTIVE } else { 0 },
                }
            })
            .collect()
    }

    /// Copies the live blocks of `seg` to the cleaner's log `head` and
    /// frees it; with `warm_young`, blocks written more recently than the
    /// mean lifespan go to the warm head whatever `head` is (fsd's
    /// `Placement::warm_young`).
    fn clean(&mut self, seg: usize, head: usize, warm_young: bool) -> Result<(), String> {
        let blocks = std::mem::take(&mut self.contents[seg]);
        for (i, &b) in blocks.iter().enumerate() {
            if self.loc[b] == Some((seg, i)) {
                let young = ((self.time - self.written_at[b]) as f64) < self.lifespan;
                let to = if warm_young && young { WARM } else { head };
                self.append(to, b)?;
                self.copied += 1;
            }
        }
        self.nlive[seg] = 0;
        self.free.push(seg);
        Ok(())
    }
}

/// Runs one configuration.
pub fn simulate(cfg: &SimConfig) -> Result<SimResult, String> {
    let physical = cfg.nsegs * cfg.bps;
    let nblocks = ((physical as f64) * cfg.utilisation) as usize;
    if nblocks < 2 || cfg.nsegs < cfg.reserve + 4 {
        return Err("the model needs blocks and more segments than its reserve".into());
    }
    let mut rng = Rng(cfg.seed);
    let picker = Picker::new(cfg.workload, nblocks, &mut rng);
    let mut dev = Device::new(cfg.nsegs, cfg.bps, nblocks);
    let mut history = History::default();
    let warm = (nblocks as f64 * cfg.warmup) as u64;
    let total = warm + (nblocks as f64 * cfg.measured) as u64;
    let (mut copied_at_warm, mut passes, mut passes_at_warm) = (0, 0u64, 0u64);
    for b in 0..nblocks {
        dev.time += 1;
        dev.written_at[b] = dev.time;
        dev.append(USER, b)?;
    }
    let separate = policy::separates_writes(cfg.policy);
    let warm_young = policy::warms_young(cfg.policy);
    for i in 0..total {
        if i == warm {
            copied_at_warm = dev.copied;
            passes_at_warm = passes;
        }
        if dev.free.len() < cfg.reserve {
            while dev.free.len() < cfg.reserve + cfg.nsegments {
                let items = dev.suinfo();
                history.observe(&items);
                let cands = policy::candidates(&items);
                let chosen = policy::select(
                    cfg.policy,
                    &cands,
                    dev.time,
                    cfg.bps as u32,
                    &history,
                    cfg.nsegments,
                );
                if chosen.is_empty() {
                    return Err("no segment to clean: the model is full".into());
                }
                let warm = policy::warm_victims(cfg.policy, &chosen, &history);
                for c in chosen {
                    let head = if warm.contains(&c.segnum) { WARM } else { GC };
                    dev.clean(c.segnum as usize, head, warm_young)?;
                }
                passes += 1;
            }
        }
        dev.time += 1;
        let b = picker.pick(&mut rng);
        dev.write(b, separate)?;
    }
    Ok(SimResult {
        user: total - warm,
        copied: dev.copied - copied_at_warm,
        passes: passes - passes_at_warm,
    })
}

/// The utilisations the report covers.
pub const UTILISATIONS: [f64; 3] = [0.7, 0.8, 0.9];

/// Every workload × utilisation × policy with `base`'s geometry, as a
/// markdown table of write amplification.
pub fn report(base: &SimConfig) -> Result<String, String> {
    let mut out = String::from(
        "Write amplification in the cleaner model (cleanerd/src/sim.rs): a model, not a measurement.\n\n",
    );
    out.push_str(&format!(
        "{} segments x {} blocks, {} segments per pass, reserve {}, {}x warm-up, {}x measured.\n\n",
        base.nsegs, base.bps, base.nsegments, base.reserve, base.warmup, base.measured
    ));
    out.push_str("| workload | utilisation |");
    for p in Policy::ALL {
        out.push_str(&format!(" {} |", p.name()));
    }
    out.push_str("\n|---|---|");
    for _ in Policy::ALL {
        out.push_str("---|");
    }
    out.push('\n');
    for w in Workload::all() {
        for u in UTILISATIONS {
            out.push_str(&format!("| {} | {:.0}% |", w.name(), u * 100.0));
            for p in Policy::ALL {
                let r = simulate(&SimConfig {
                    workload: w,
                    utilisation: u,
                    policy: p,
                    ..*base
                })?;
                out.push_str(&format!(" {:.2} |", r.write_amplification()));
            }
            out.push('\n');
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wa(w: Workload, u: f64, p: Policy) -> f64 {
        simulate(&SimConfig::small(w, u, p))
            .unwrap()
            .write_amplification()
    }

    #[test]
    fn runs_are_deterministic() {
        let cfg = SimConfig::small(Workload::Zipf(1.0), 0.8, Policy::DecliningCost);
        assert_eq!(simulate(&cfg), simulate(&cfg));
        let other = SimConfig { seed: 1, ..cfg };
        assert_ne!(simulate(&cfg), simulate(&other));
    }

    #[test]
    fn amplification_grows_with_utilisation() {
        for p in Policy::ALL {
            let (a, b, c) = (
                wa(Workload::Uniform, 0.7, p),
                wa(Workload::Uniform, 0.8, p),
                wa(Workload::Uniform, 0.9, p),
            );
            assert!(1.0 < a && a < b && b < c, "{}: {a} {b} {c}", p.name());
        }
    }

    #[test]
    fn greedy_beats_timestamp_on_uniform_overwrites() {
        // With uniform overwrites, the segment with the most dead blocks
        // is the best choice; the oldest is not.
        assert!(
            wa(Workload::Uniform, 0.9, Policy::Greedy)
                < wa(Workload::Uniform, 0.9, Policy::Timestamp)
        );
    }

    #[test]
    fn the_model_accounts_every_block() {
        let cfg = SimConfig::small(Workload::Uniform, 0.7, Policy::Greedy);
        let r = simulate(&cfg).unwrap();
        let logical = (cfg.nsegs * cfg.bps) as f64 * cfg.utilisation;
        assert_eq!(r.user, (logical as u64 as f64 * cfg.measured) as u64);
        assert!(r.passes > 0 && r.copied > 0, "{r:?}");
    }

    #[test]
    fn the_report_has_a_row_per_workload_and_utilisation() {
        let base = SimConfig {
            nsegs: 128,
            bps: 8,
            warmup: 0.5,
            measured: 0.5,
            ..SimConfig::small(Workload::Uniform, 0.7, Policy::Greedy)
        };
        let t = report(&base).unwrap();
        assert!(t.contains("a model, not a measurement"), "{t}");
        let rows = t
            .lines()
            .filter(|l| l.starts_with("| ") && l.contains('%'))
            .count();
        assert_eq!(rows, Workload::all().len() * UTILISATIONS.len(), "{t}");
        assert!(t.contains("| zipf 1 | 90% |"), "{t}");
    }
}
