//! Operation sequences on the engine over a FaultDevice, crashed at a
//! device write the input chooses, then recovered and compared with what
//! was durable. The target and its model live with lfs's tests
//! (`lfs/tests/common/ops.rs`, `plan.rs`, `durable.rs`; `lfs/tests/ops_crash.rs`
//! runs the same code over the corpus) and are compiled in here.

#![no_main]

#[allow(dead_code)]
#[path = "../../lfs/tests/common/durable.rs"]
mod durable;
#[allow(dead_code)]
#[path = "../../lfs/tests/common/ops.rs"]
mod ops;
#[allow(dead_code)]
#[path = "../../lfs/tests/common/plan.rs"]
mod plan;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ops::ops_crash(data);
});
