//! One cleaning pass over a connection to fsd: the code both cleanerd and
//! `fsctl clean --once` (without a cleanerd) run.
//!
//! 1. CLEAN_SEGMENTS with no segments: fsd deletes the plain checkpoints
//!    older than the protection period, so the `nlive` read next counts
//!    only blocks something still needs (ENOSPC, no room even for that:
//!    the pass goes on, since cleaning segments can make room).
//! 2. GET_SUINFO of every segment; [`History::observe`] records it.
//! 3. The policy chooses up to `nsegments` candidates.
//! 4. If they have fewer reclaimable blocks than `min_reclaimable` per
//!    segment chosen, the pass is deferred: nothing is cleaned, and with
//!    `use_set_suinfo` the chosen segments are marked young (SET_SUINFO,
//!    `last_mod` = now) so the next pass looks at others.
//! 5. Otherwise CLEAN_SEGMENTS with the chosen segments. If fsd answers
//!    EAGAIN (one of them cannot be cleaned now, or the batch would not
//!    fit or not pay), each half is sent alone, and so on; single
//!    segments answered EAGAIN are skipped this pass. Other candidates
//!    are then tried in greedy order (most reclaimable first; at most
//!    [`EXTRA_TRIES`] per segment wanted), in batches of what is still
//!    wanted, until `nsegments` were cleaned, so that a policy whose
//!    favourites fsd refuses still makes room.

use lfs_proto::msg::{
    CleanReply, CleanSegments, GetSuinfo, SetSuinfo, SuUpdate, Suinfo, Sustat,
    CLEAN_SEPARATE_WRITES, CLEAN_STRICT_PROTECTION, CLEAN_WARM_YOUNG,
};
use lfs_proto::{Client, ClientError};
use serde::{Deserialize, Serialize};

use crate::policy::{self, History, Policy};
use crate::schedule::Effort;

/// The errno fsd answers for a segment it cannot clean now.
const EAGAIN: i32 = nix::libc::EAGAIN;

/// After refusals, how many more candidates a pass tries per segment it
/// was asked to clean.
pub const EXTRA_TRIES: usize = 4;

/// What a pass is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassSpec {
    /// Protection period, seconds.
    pub protection_s: u32,
    /// Keep it even when space runs short (`CLEAN_STRICT_PROTECTION`).
    pub strict_protection: bool,
    /// Victim selection.
    pub policy: Policy,
    /// How many segments and how much to reclaim.
    pub effort: Effort,
    /// Mark deferred segments young.
    pub use_set_suinfo: bool,
}

/// How a pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Segments were cleaned (or all chosen were skipped with EAGAIN).
    Cleaned,
    /// Too little to reclaim: nothing cleaned.
    Deferred,
    /// No segment could be chosen.
    NoCandidates,
}

/// What a pass did, for the log, `--status` and `--once`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassReport {
    /// How it ended.
    pub outcome: Outcome,
    /// The policy used.
    pub policy: String,
    /// Candidates there were.
    pub candidates: usize,
    /// Segments chosen.
    pub chosen: Vec<u64>,
    /// Their reclaimable blocks.
    pub reclaimable: u64,
    /// Reclaimable blocks the pass needed to go ahead.
    pub needed: u64,
    /// Segments fsd cleaned.
    pub cleaned: Vec<u64>,
    /// Chosen segments whose survivors the policy sent to the warm head.
    #[serde(default)]
    pub warm: Vec<u64>,
    /// Segments skipped because fsd answered EAGAIN.
    pub skipped: Vec<u64>,
    /// Whether deferred segments were marked young.
    pub marked_young: bool,
    /// Whether SET_SUINFO turned out unsupported (ENOTTY).
    pub set_suinfo_unsupported: bool,
    /// Sums of fsd's replies.
    pub segments_freed: u64,
    /// Live blocks copied.
    pub blocks_moved: u64,
    /// Bytes fsd wrote.
    pub bytes_written: u64,
    /// Checkpoints deleted as older than the protection period.
    pub checkpoints_deleted: u64,
    /// Blocks freed by those deletions.
    pub blocks_freed: u64,
}

impl PassReport {
    fn add(&mut self, r: &CleanReply) {
        self.segments_freed += r.segments_freed;
        self.blocks_moved += r.blocks_moved;
        self.bytes_written += r.bytes_written;
        self.checkpoints_deleted += r.checkpoints_deleted;
        self.blocks_freed += r.blocks_freed;
    }

    /// One line for the log and for `--once`.
    pub fn summary(&self) -> String {
        let head = match self.outcome {
            Outcome::Cleaned => format!(
                "cleaned {} segment(s) {:?} ({}): {} freed, {} live blocks moved, {} bytes written",
                self.cleaned.len(),
                self.cleaned,
                self.policy,
                self.segments_freed,
                self.blocks_moved,
                self.bytes_written
            ),
            Outcome::Deferred => format!(
                "deferred: segments {:?} ({}) have {} reclaimable blocks, {} needed{}",
                self.chosen,
                self.policy,
                self.reclaimable,
                self.needed,
                if self.marked_young {
                    "; marked young"
                } else {
                    ""
                }
            ),
            Outcome::NoCandidates => {
                format!("no segment to clean ({} candidates)", self.candidates)
            }
        };
        let mut s = head;
        if !self.warm.is_empty() {
            s.push_str(&format!("; survivors of {:?} to the warm head", self.warm));
        }
        if !self.skipped.is_empty() {
            s.push_str(&format!(
                "; skipped {:?} (EAGAIN: not cleanable now)",
                self.skipped
            ));
        }
        if self.checkpoints_deleted > 0 {
            s.push_str(&format!(
                "; {} old checkpoint(s) deleted, {} blocks freed",
                self.checkpoints_deleted, self.blocks_freed
            ));
        }
        s
    }
}

/// A request of the pass that failed.
#[derive(Debug, thiserror::Error)]
#[error("{request}: {error}")]
pub struct PassError {
    /// Which request ("CLEAN_SEGMENTS [3, 4]").
    pub request: String,
    /// Why.
    pub error: ClientError,
}

fn call<R: lfs_proto::Request>(
    c: &mut Client,
    req: &R,
    what: impl FnOnce() -> String,
) -> Result<R::Reply, PassError> {
    c.call(req).map_err(|error| PassError {
        request: what(),
        error,
    })
}

/// Every segment's usage.
pub fn read_suinfo(c: &mut Client, nsegs: u64) -> Result<Vec<Suinfo>, PassError> {
    let mut items = Vec::new();
    let mut start = 0;
    while start < nsegs {
        let count = (nsegs - start).min(u64::from(GetSuinfo::MAX_COUNT)) as u32;
        let batch = call(c, &GetSuinfo { start, count }, || {
            format!("GET_SUINFO from segment {start}")
        })?
        .items;
        let Some(last) = batch.last() else { break };
        start = last.segnum + 1;
        items.extend(batch);
    }
    Ok(items)
}

/// Runs one pass (see the module doc). `st` is a GET_SUSTAT reply of the
/// filesystem, `now` the wall clock in seconds since the epoch.
pub fn run_pass(
    c: &mut Client,
    st: &Sustat,
    spec: &PassSpec,
    history: &mut History,
    now: u64,
) -> Result<PassReport, PassError> {
    let mut report = PassReport {
        outcome: Outcome::NoCandidates,
        policy: spec.policy.name().to_owned(),
        candidates: 0,
        chosen: Vec::new(),
        reclaimable: 0,
        needed: 0,
        cleaned: Vec::new(),
        warm: Vec::new(),
        skipped: Vec::new(),
        marked_young: false,
        set_suinfo_unsupported: false,
        segments_freed: 0,
        blocks_moved: 0,
        bytes_written: 0,
        checkpoints_deleted: 0,
        blocks_freed: 0,
    };
    let protection_s = spec.protection_s;
    // The policy's placement of file data holds from this request on.
    let mut flags = 0;
    if policy::separates_writes(spec.policy) {
        flags |= CLEAN_SEPARATE_WRITES;
    }
    if policy::warms_young(spec.policy) {
        flags |= CLEAN_WARM_YOUNG;
    }
    if spec.strict_protection {
        flags |= CLEAN_STRICT_PROTECTION;
    }
    let expire = CleanSegments {
        protection_s,
        segments: Vec::new(),
        warm: Vec::new(),
        flags,
    };
    match c.call(&expire) {
        Ok(r) => report.add(&r),
        // No room to delete checkpoints: cleaning segments may make some
        // (fsd then deletes what fits with them).
        Err(e) if e.errno() == Some(nix::libc::ENOSPC) => {}
        Err(error) => {
            return Err(PassError {
                request: format!(
                    "CLEAN_SEGMENTS (deleting checkpoints older than {protection_s} s)"
                ),
                error,
            })
        }
    }

    let items = read_suinfo(c, st.nsegs)?;
    history.observe(&items);
    let cands = policy::candidates(&items);
    report.candidates = cands.len();
    let chosen = policy::select(
        spec.policy,
        &cands,
        now,
        st.blocks_per_segment,
        history,
        spec.effort.nsegments,
    );
    if chosen.is_empty() {
        return Ok(report);
    }
    report.chosen = chosen.iter().map(|c| c.segnum).collect();
    report.reclaimable = chosen.iter().map(|c| c.reclaimable()).sum();
    report.needed = spec.effort.min_reclaimable * chosen.len() as u64;
    if report.reclaimable < report.needed {
        report.outcome = Outcome::Deferred;
        if spec.use_set_suinfo {
            let req = SetSuinfo {
                items: report
                    .chosen
                    .iter()
                    .map(|&segnum| SuUpdate {
                        segnum,
                        last_mod: now,
                    })
                    .collect(),
            };
            match c.call(&req) {
                Ok(_) => report.marked_young = true,
                Err(e) if e.errno() == Some(nix::libc::ENOTTY) => {
                    report.set_suinfo_unsupported = true
                }
                Err(error) => {
                    return Err(PassError {
                        request: format!("SET_SUINFO {:?}", report.chosen),
                        error,
                    })
                }
            }
        }
        return Ok(report);
    }

    report.outcome = Outcome::Cleaned;
    // Hot survivors apart from cold ones, where the policy separates them.
    let warm = policy::warm_victims(spec.policy, &cands, history);
    report.warm = chosen
        .iter()
        .map(|c| c.segnum)
        .filter(|s| warm.contains(s))
        .collect();
    let chosen = report.chosen.clone();
    let place = Place { warm: &warm, flags };
    clean_batch(c, protection_s, &chosen, &place, &mut report)?;
    let want = spec.effort.nsegments;
    if report.cleaned.len() < want && !report.skipped.is_empty() {
        // In greedy order: the segments most likely to free more than
        // cleaning them writes, in batches of what is still wanted.
        let ranked = policy::rank(Policy::Greedy, &cands, now, st.blocks_per_segment, history);
        let extra: Vec<u64> = ranked
            .iter()
            .map(|c| c.segnum)
            .filter(|s| !chosen.contains(s))
            .take(EXTRA_TRIES * want)
            .collect();
        let mut rest = extra.as_slice();
        while report.cleaned.len() < want && !rest.is_empty() {
            let (batch, tail) = rest.split_at((want - report.cleaned.len()).min(rest.len()));
            clean_batch(c, protection_s, batch, &place, &mut report)?;
            rest = tail;
        }
    }
    Ok(report)
}

/// CLEAN_SEGMENTS of `segs`; on EAGAIN each half alone (fsd refuses a
/// batch whose copies would not fit, or would not pay, and one segment it
/// cannot clean refuses the batch), down to single segments, which are
/// skipped. Larger batches share their DAT and checkpoint blocks, so
/// halving beats sending every segment alone.
/// The policy's placement for the requests of a pass.
struct Place<'a> {
    warm: &'a [u64],
    flags: u32,
}

fn clean_batch(
    c: &mut Client,
    protection_s: u32,
    segs: &[u64],
    place: &Place<'_>,
    report: &mut PassReport,
) -> Result<(), PassError> {
    if segs.is_empty() {
        return Ok(());
    }
    let req = CleanSegments {
        protection_s,
        segments: segs.to_vec(),
        warm: segs
            .iter()
            .copied()
            .filter(|s| place.warm.contains(s))
            .collect(),
        flags: place.flags,
    };
    match c.call(&req) {
        Ok(r) => {
            report.add(&r);
            report.cleaned.extend_from_slice(segs);
            Ok(())
        }
        Err(e) if e.errno() == Some(EAGAIN) && segs.len() > 1 => {
            let (a, b) = segs.split_at(segs.len() / 2);
            clean_batch(c, protection_s, a, place, report)?;
            clean_batch(c, protection_s, b, place, report)
        }
        Err(e) if e.errno() == Some(EAGAIN) => {
            report.skipped.push(segs[0]);
            Ok(())
        }
        Err(error) => Err(PassError {
            request: format!("CLEAN_SEGMENTS {segs:?}"),
            error,
        }),
    }
}
