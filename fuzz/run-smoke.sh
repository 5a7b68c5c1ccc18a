#!/usr/bin/env bash
# The fuzz smoke run of the test command (scripts/test.sh): every cargo-fuzz
# target for FUZZ_SECONDS seconds of libFuzzer, starting from a scratch copy
# of its committed corpus fuzz/corpus/<target>/ (which it never modifies).
# Exits non-zero if a target crashes, times out or fails to build, printing
# the crashing input's path (under fuzz/artifacts/<target>/).
#
#   fuzz/run-smoke.sh                  # every target, 20 s each
#   FUZZ_SECONDS=5 fuzz/run-smoke.sh   # shorter
#   fuzz/run-smoke.sh inode dir_entry  # some targets
#
# Environment:
#   FUZZ_SECONDS  seconds of fuzzing per target (default 20)
#   FUZZ_JOBS     targets fuzzed at once (default: the number of CPUs)
#   FUZZ_KEEP     if set, keep the scratch directory (corpora and logs)
#
# Toolchain: `cargo +nightly` if rustup has a nightly, else the default
# toolchain with RUSTC_BOOTSTRAP=1 (cargo-fuzz needs -Zsanitizer).
# cargo-fuzz is installed with `cargo install cargo-fuzz --locked` if
# missing. See docs/FUZZING.md.

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

seconds=${FUZZ_SECONDS:-20}
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
# libFuzzer's per-input timeout: a decoder taking this long is a bug.
input_timeout=10

die() {
    echo "run-smoke.sh: $*" >&2
    exit 1
}

case $seconds in '' | *[!0-9]*) die "FUZZ_SECONDS must be a number of seconds, not '$seconds'" ;; esac
case $jobs in '' | *[!0-9]* | 0) die "FUZZ_JOBS must be a positive number, not '$jobs'" ;; esac

command -v cargo >/dev/null || die "cargo not found"
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "==> installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

toolchain=()
if command -v rustup >/dev/null && rustup toolchain list | grep -q '^nightly'; then
    toolchain=(+nightly)
    echo "==> toolchain: nightly ($(rustc +nightly --version))"
else
    export RUSTC_BOOTSTRAP=1
    echo "==> toolchain: $(rustc --version) with RUSTC_BOOTSTRAP=1"
fi
fuzz() {
    cargo "${toolchain[@]}" fuzz "$@"
}

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(fuzz list)
fi
[ "${#targets[@]}" -gt 0 ] || die "no fuzz targets"
for t in "${targets[@]}"; do
    [ -f "fuzz_targets/$t.rs" ] || die "no fuzz target '$t' (see 'cargo fuzz list')"
    [ -n "$(ls -A "corpus/$t" 2>/dev/null)" ] || die "corpus/$t is missing or empty"
done

scratch=$(mktemp -d "${TMPDIR:-/tmp}/lfs-fuzz-smoke.XXXXXX")
cleanup() {
    if [ -n "${FUZZ_KEEP:-}" ]; then
        echo "run-smoke.sh: kept $scratch"
    else
        rm -rf "$scratch"
    fi
}
trap cleanup EXIT

# -a: debug assertions and overflow checks, as in `cargo test`.
build_flags=(-a)
start=$SECONDS
echo "==> building the fuzz targets"
fuzz build "${build_flags[@]}" || die "building the fuzz targets failed"
echo "==> built in $((SECONDS - start))s; fuzzing each target ${seconds}s, $jobs at a time"

# fuzz_one TARGET: one libFuzzer run; writes its log and exit status.
fuzz_one() {
    local t=$1 rc=0
    mkdir -p "$scratch/corpus/$t" "$here/artifacts/$t"
    cp -R "corpus/$t/." "$scratch/corpus/$t/"
    fuzz run "${build_flags[@]}" "$t" "$scratch/corpus/$t" -- \
        -max_total_time="$seconds" -timeout="$input_timeout" \
        -artifact_prefix="$here/artifacts/$t/" -print_final_stats=1 \
        >"$scratch/$t.log" 2>&1 || rc=$?
    echo "$rc" >"$scratch/$t.rc"
}

running=0
for t in "${targets[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    fuzz_one "$t" &
    running=$((running + 1))
done
wait

failed=0
for t in "${targets[@]}"; do
    rc=$(cat "$scratch/$t.rc" 2>/dev/null || echo "missing")
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$t.log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]*' "$scratch/$t.log" | tail -n 1 || true)
    if [ "$rc" = 0 ]; then
        printf '  ok    %-18s %s runs, %s\n' "$t" "${execs:-?}" "${cov:-cov: ?}"
        continue
    fi
    failed=$((failed + 1))
    printf '  FAIL  %-18s exit %s\n' "$t" "$rc"
    sed 's/^/        /' "$scratch/$t.log" | tail -n 40 >&2
    # libFuzzer: "Test unit written to <path>" names the crashing input.
    sed -n 's/.*Test unit written to //p' "$scratch/$t.log" | while read -r input; do
        echo "  crashing input of $t: $input" >&2
        echo "  reproduce: (cd fuzz && cargo ${toolchain[*]} fuzz run -a $t $input)" >&2
    done
done

echo "==> fuzz smoke run: ${#targets[@]} targets, $failed failed, $((SECONDS - start))s"
[ "$failed" -eq 0 ]
