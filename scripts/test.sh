#!/usr/bin/env bash
# The test command.  Runs every layer of lfs's tests and exits non-zero if
# any fails; see docs/TESTING.md.  Works as root (CI) or as a user with sudo.
#
#   scripts/test.sh
#
# Steps, in order (after setup, each runs even if an earlier one failed, so
# one run reports every problem): shellcheck, cargo fmt --check, clippy,
# cargo test --workspace, the fuzz smoke run when the fuzz workspace
# exists, a short fsx run on a real mount, and the benchmark smoke run.

# The step functions are called through run_step, which shellcheck cannot
# follow (SC2317, "unreachable").
# shellcheck disable=SC2317
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

if ! bash scripts/setup-debian.sh; then
    echo "test.sh: FAILED: scripts/setup-debian.sh failed, nothing was tested" >&2
    exit 1
fi
find_cargo || die "cargo not found after setup"

results=()
failures=0

# run_step NAME COMMAND...: run a step, record PASS or FAIL with its time.
run_step() {
    local name=$1 start rc
    shift
    printf '\n==> %s: %s\n' "$name" "$*"
    start=$SECONDS
    "$@"
    rc=$?
    if [ "$rc" -eq 0 ]; then
        results+=("PASS  $name ($((SECONDS - start))s)")
    else
        results+=("FAIL  $name (exit $rc, $((SECONDS - start))s)")
        failures=$((failures + 1))
    fi
}

test_log=$(mktemp)
trap 'rm -f "$test_log"' EXIT

# cargo test, running every test binary even after one fails, and failing
# also when it ran no test at all (a broken harness would otherwise pass).
cargo_test() {
    "$CARGO" test --workspace --no-fail-fast 2>&1 | tee "$test_log"
    local rc=$?
    [ "$rc" -eq 0 ] || return "$rc"
    local ran
    ran=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($(i) ~ /^passed;?$/) n += $(i - 1) } END { print n + 0 }' "$test_log")
    echo "cargo test: $ran tests passed in total"
    if [ "$ran" -eq 0 ]; then
        echo "error: cargo test ran no test" >&2
        return 1
    fi
}

# The fuzz workspace (fuzz/, excluded from the main one) owns its smoke run.
# Once fuzz/Cargo.toml exists, fuzz/run-smoke.sh is required.
fuzz_smoke() {
    if [ ! -f fuzz/run-smoke.sh ]; then
        echo "error: fuzz/Cargo.toml exists but fuzz/run-smoke.sh does not" >&2
        return 1
    fi
    bash fuzz/run-smoke.sh
}

run_step shellcheck shellcheck -x scripts/*.sh .ci/run fuzz/run-smoke.sh bench/*.sh
run_step fmt "$CARGO" fmt --all -- --check
run_step clippy "$CARGO" clippy --workspace --all-targets -- -D warnings
run_step test cargo_test
if [ -f fuzz/Cargo.toml ]; then
    run_step fuzz-smoke fuzz_smoke
else
    results+=("SKIP  fuzz-smoke (no fuzz workspace yet: fuzz/Cargo.toml does not exist)")
fi

# fsx on a real mount with checkpoints every 0.1 s, all three modes
# (docs/TESTING.md): the debug binaries cargo test built.
fsx_short() {
    "$CARGO" build --bins 2>&1 | tail -1 &&
        bash scripts/fsx.sh --bin target/debug --interval 0.1 --size 1G \
            --ops 100000 --mmap-ops 30000 --seeds 7
}
run_step fsx fsx_short

# A seconds-long run of the benchmark harness, so it cannot rot (no timing
# is checked).
run_step bench-smoke bash bench/smoke.sh

printf '\n==> summary\n'
printf '  %s\n' "${results[@]}"
if [ "$failures" -eq 0 ]; then
    echo "test.sh: OK, every step passed"
    exit 0
fi
echo "test.sh: FAILED, $failures step(s) failed"
exit 1
