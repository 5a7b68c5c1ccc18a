//! The `ops_crash` fuzz target (`common/ops.rs` and `common/plan.rs`,
//! docs/FUZZING.md) as an
//! ordinary test: every plan in the committed corpus
//! `fuzz/corpus/ops_crash/`, random inputs and mutated copies of the
//! corpus, from a fixed seed. Each run crashes the engine on a
//! `FaultDevice` and checks the recovered filesystem against what was
//! durable; a violation panics, and the failure names the input and
//! saves it. Also checked here: that the corpus reaches every operation,
//! crash mode and geometry, and that the target's budgets keep even the
//! costliest plan far from a full filesystem (which the model relies on).

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::ops;
use common::plan::{At, Op, Plan, GEOMETRIES, MAX_OPS, OP_NAMES};
use lfs::blockdev::{BlockDevice, CrashMode, MemDevice};
use lfs::fs::Fs;
use lfs_e2e::fuzz_corpus::{assert_none, corpus, mutations, random_inputs, run};

const TARGET: &str = "ops_crash";
/// Random inputs (each a whole run: mount, operations, crash, fsck,
/// recovery, a change, a remount).
const RANDOM_INPUTS: usize = 200;
/// Mutated copies per corpus file.
const MUTATIONS_PER_FILE: usize = 20;

#[test]
fn every_corpus_plan_recovers_what_was_durable() {
    let mut failures = Vec::new();
    for (file, data) in corpus(TARGET) {
        if !file.starts_with("seq-") {
            failures.push(format!("{TARGET}/{file}: not named seq-<what>"));
        }
        if let Err(e) = run(
            TARGET,
            &data,
            &format!("corpus file {file}"),
            ops::ops_crash,
        ) {
            failures.push(e);
        }
    }
    assert_none(&failures);
}

#[test]
fn the_corpus_reaches_every_operation_crash_mode_and_geometry() {
    let plans: Vec<Plan> = corpus(TARGET)
        .iter()
        .map(|(_, d)| Plan::decode(d))
        .collect();
    let codes: BTreeSet<u8> = plans
        .iter()
        .flat_map(|p| p.ops.iter().map(Op::code))
        .collect();
    for (code, name) in OP_NAMES.iter().enumerate() {
        assert!(codes.contains(&(code as u8)), "no corpus plan runs {name}");
    }
    let modes: BTreeSet<u8> = plans
        .iter()
        .map(|p| match p.mode {
            CrashMode::DropAll => 0,
            CrashMode::KeepAll => 1,
            CrashMode::KeepPrefix(_) => 2,
            CrashMode::TearLast { .. } => 3,
            CrashMode::Random { .. } => 4,
        })
        .collect();
    assert_eq!(modes.len(), 5, "crash modes reached: {modes:?}");
    let geometries: BTreeSet<usize> = plans
        .iter()
        .map(|p| usize::from(p.geometry) % GEOMETRIES.len())
        .collect();
    assert_eq!(
        geometries.len(),
        GEOMETRIES.len(),
        "geometries: {geometries:?}"
    );
    assert!(
        plans.iter().any(|p| p.crash_at == 0) && plans.iter().any(|p| p.crash_at > 0),
        "the corpus needs plans that crash mid-way and after the last operation"
    );
}

#[test]
fn plans_encode_to_what_they_decode_from() {
    for (file, data) in corpus(TARGET) {
        let plan = Plan::decode(&data);
        assert_eq!(Plan::decode(&plan.encode()), plan, "{file}");
    }
}

#[test]
fn random_inputs_never_violate_the_model() {
    random_inputs(TARGET, RANDOM_INPUTS, ops::ops_crash).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn mutated_plans_never_violate_the_model() {
    mutations(TARGET, MUTATIONS_PER_FILE, ops::ops_crash).unwrap_or_else(|e| panic!("{e}"));
}

/// The costliest plan the budgets allow: distinct data up to the write
/// budget in the largest files the size budget allows, a checkpoint after
/// every write, on every geometry. The model needs the filesystem never
/// to be near full (see `common/ops.rs`): at least a quarter must stay
/// free.
#[test]
fn the_budgets_keep_every_run_far_from_full() {
    let mut ops = Vec::new();
    for i in 0..MAX_OPS as u8 / 3 {
        let at = At {
            dir: 0,
            name: i % 4 + 4 * (i / 4 % 2),
        };
        ops.push(Op::Create { at, perm: 0 });
        ops.push(Op::Write {
            at,
            offset: u32::from(i) * 40_000,
            len: u16::MAX,
            seed: i,
        });
        ops.push(Op::MakeCheckpoint { snapshot: true });
    }
    for g in 0..GEOMETRIES.len() {
        let plan = Plan {
            geometry: g as u8,
            mode: CrashMode::DropAll,
            crash_at: 0,
            ops: ops.clone(),
        };
        let (free, total) = ops::free_after(&plan);
        assert!(
            free * 4 >= total,
            "geometry {g}: {free} of {total} blocks free after the costliest plan"
        );
    }
}

/// The check can fail: a crash image without a file the journal says was
/// made durable (a sync that lied) is a violation.
#[test]
fn a_lost_durable_file_is_a_violation() {
    let at = At::root(0);
    let plan = Plan {
        geometry: 0,
        mode: CrashMode::KeepAll,
        crash_at: 0,
        ops: vec![
            Op::Create { at, perm: 0 },
            Op::Write {
                at,
                offset: 0,
                len: 5000,
                seed: 1,
            },
            Op::Sync,
        ],
    };
    let (image, j) = ops::crash(&plan);
    ops::check_recovery(&plan, image.clone(), &j);
    let mut lying = j.acked.last().unwrap().clone();
    let mut ghost = lying["/a"].clone();
    ghost.ino += 1;
    lying.insert("/ghost".into(), ghost);
    let lying = common::Journal {
        acked: vec![lying],
        in_flight: None,
        in_flight_alt: None,
    };
    let r = std::panic::catch_unwind(|| ops::check_recovery(&plan, image, &lying));
    let cause = r.expect_err("a file lost after its sync passed the check");
    let msg = cause.downcast_ref::<String>().map_or("", String::as_str);
    assert!(msg.contains("/ghost: recovered absent"), "{msg}");
}

/// A mount of the fresh image of every geometry passes fsck and shows an
/// empty root: the target's starting point.
#[test]
fn every_geometry_formats_and_mounts() {
    for g in 0..GEOMETRIES.len() {
        let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::from_vec(ops::image(g).to_vec()));
        let report = lfs::fsck::fsck(dev.clone()).unwrap();
        assert!(report.is_clean(), "geometry {g}: {:?}", report.errors);
        let fs = Fs::mount(dev, ops::mount_options()).unwrap();
        assert_eq!(common::tree(&fs).unwrap().len(), 1, "geometry {g}");
    }
}
