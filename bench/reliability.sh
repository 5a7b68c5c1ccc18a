#!/usr/bin/env bash
# The long versions of lfs's reliability tests (docs/RELIABILITY.md), one
# after the other, and a report of their figures.  From the repository
# root, as root (the whole-system steps mount with FUSE):
#
#   bench/reliability.sh                  # every step, long mode
#   bench/reliability.sh --bounded        # the test command's bounded versions
#   bench/reliability.sh crash fuzz       # some steps
#   bench/reliability.sh --list           # the steps and their commands
#
# Each step is a test (or the fuzz run) that prints one or more summary
# lines of its figures, e.g. "crash matrix, tear the last write: 72 modes,
# 2016 crash images, 0 lost"; a test fails when anything is lost, so a
# step's exit status is its verdict.  The report, bench/RESULTS-reliability.md
# (or --out FILE), has per step: PASS/FAIL, its time, its command and its
# summary lines; a run of some steps updates theirs in an existing report
# of the same mode and keeps the others.  docs/RELIABILITY.md quotes the figures of the last real
# run.
#
# Environment (long mode; each has the default shown; the bounded mode
# leaves them to the tests' own defaults unless set):
#   LFS_CRASH_SEEDS=1000    random crash modes of the crash matrix
#   LFS_CORRUPT_CASES=20000 corruptions of metadata tried
#   FUZZ_SECONDS=300        seconds of libFuzzer per fuzz target
#   LFS_FULL_ROUNDS=10      fill / delete / clean / refill rounds
#                           (LFS_LONG=1 also makes the deep tree of the
#                           limits test 10,000 levels instead of 2,500)
#   LFS_KILL_CYCLES=100     kill -9 cycles of fsd and cleanerd
#   LFS_SOAK_OPS=500000     operations per worker of the concurrent model
#                           test (2 workers, 3 seeds)
#   LFS_FSX_OPS=1000000     fsx operations per mode and seed (3 seeds),
#                           with default and with 0.1 s checkpoints, and
#                           cleanerd running
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

usage() {
    sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

long=1
out=$root/bench/RESULTS-reliability.md
list=0
only=()
while [ $# -gt 0 ]; do
    case $1 in
        --bounded) long=0 ;;
        --out)
            [ $# -ge 2 ] || die "--out needs a file name"
            out=$2
            shift
            ;;
        --list) list=1 ;;
        -h | --help)
            usage
            exit 0
            ;;
        -*) die "unknown option '$1' (see --help)" ;;
        *) only+=("$1") ;;
    esac
    shift
done

find_cargo || die "cargo not found"

# The long mode's sizes; the bounded mode runs what the test command
# runs (each test's own defaults), unless the environment says otherwise.
if [ "$long" -eq 1 ]; then
    export LFS_LONG=1
    export LFS_CRASH_SEEDS=${LFS_CRASH_SEEDS:-1000}
    export LFS_CORRUPT_CASES=${LFS_CORRUPT_CASES:-20000}
    export LFS_FULL_ROUNDS=${LFS_FULL_ROUNDS:-10}
    export LFS_KILL_CYCLES=${LFS_KILL_CYCLES:-100}
    export LFS_SOAK_OPS=${LFS_SOAK_OPS:-500000}
    fsx_ops=${LFS_FSX_OPS:-1000000}
    fuzz_seconds=${FUZZ_SECONDS:-300}
    profile=(--release)
    fsx_cmd="cargo build --release --bins && rc=0 && for i in default 0.1; do bash scripts/fsx.sh --bin target/release --ops $fsx_ops --seeds '1 2 3' \$([ \$i = default ] || echo --interval \$i) || rc=1; done; exit \$rc"
else
    unset LFS_LONG
    fuzz_seconds=${FUZZ_SECONDS:-20}
    profile=()
    fsx_cmd="cargo build --bins && bash scripts/fsx.sh --bin target/debug --interval 0.1 --size 1G --ops ${LFS_FSX_OPS:-100000} --mmap-ops 30000 --seeds 7"
fi

# The steps: NAME, the pattern of its summary lines, its command.
names=()
patterns=()
commands=()
step() {
    names+=("$1")
    patterns+=("$2")
    commands+=("$3")
}
t="cargo test ${profile[*]}"
step crash '^crash matrix' "$t -p lfs --test crash -- --nocapture && $t -p lfs --test crash_space -- --nocapture"
step soak '^concurrent model' "$t -p lfs --test concurrent -- --nocapture"
step fsx '^(PASS|FAIL)  |^fsx.sh: ' "$fsx_cmd"
step ioerrors '^io errors' "$t -p lfs --test ioerrors -- --nocapture && $t -p lfs-e2e --test fsd_ioerror -- --nocapture"
step corrupt '^corrupt (images|fixtures)' "$t -p lfs --test corrupt -- --nocapture && $t -p lfs --test corrupt_fixtures -- --nocapture"
step full '^full disk|^limits' "$t -p lfs-e2e --test full_disk -- --nocapture && $t -p lfs --test limits -- --nocapture && $t -p lfs-e2e --test limits -- --nocapture"
step kill '^process faults' "$t -p lfs-e2e --test process_faults -- --nocapture"
step access '^access control' "$t -p lfs-e2e --test access -- --nocapture"
# One fuzzer at a time: the figures are per target, not per machine.
step fuzz '^  (ok|FAIL) |^==> fuzz smoke run' "FUZZ_SECONDS=$fuzz_seconds FUZZ_JOBS=1 bash fuzz/run-smoke.sh"

known=" ${names[*]} "
for n in "${only[@]}"; do
    case $known in *" $n "*) ;; *) die "unknown step '$n' (steps: ${names[*]})" ;; esac
done

if [ "$list" -eq 1 ]; then
    for i in "${!names[@]}"; do
        printf '%-10s %s\n' "${names[$i]}" "${commands[$i]}"
    done
    exit 0
fi

selected() {
    [ ${#only[@]} -eq 0 ] && return 0
    local n
    for n in "${only[@]}"; do [ "$n" = "$1" ] && return 0; done
    return 1
}

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
start_all=$SECONDS
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
failures=0
report=()
declare -A sections
for i in "${!names[@]}"; do
    name=${names[$i]}
    selected "$name" || continue
    printf '\n==> %s: %s\n' "$name" "${commands[$i]}"
    start=$SECONDS
    bash -c "${commands[$i]}" 2>&1 | tee "$logs/$name.log"
    rc=${PIPESTATUS[0]}
    took=$((SECONDS - start))
    verdict=PASS
    if [ "$rc" -ne 0 ]; then
        verdict="FAIL (exit $rc)"
        failures=$((failures + 1))
    fi
    lines=$(grep -E "${patterns[$i]}" "$logs/$name.log" | sed 's/^/    /')
    if [ -z "$lines" ]; then
        lines="    (no summary line: the step printed no figures)"
        [ "$rc" -eq 0 ] && verdict="FAIL (no figures)" && failures=$((failures + 1))
    fi
    report+=("### $name: $verdict, ${took} s" "" "\`${commands[$i]}\`" "" "$lines" "")
    sections[$name]=$(printf '%s\n' "### $name: $verdict, ${took} s" "" "\`${commands[$i]}\`" "" "$lines" "")
done

git_rev=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain 2>/dev/null | wc -l)
mode=long
[ "$long" -eq 1 ] || mode=bounded
# A run of some steps updates their sections of an earlier report of the
# same mode and keeps the others (a partial run used to replace the whole
# report with its few steps).
if [ ${#only[@]} -gt 0 ] && [ -f "$out" ] && grep -q "($mode mode)" "$out"; then
    merged=$(mktemp)
    {
        # The earlier header, with a row for this run.
        awk '/^### /{exit} {print}' "$out" | awk -v row="| re-run (UTC) | $started: ${only[*]}, $((SECONDS - start_all)) s, git $git_rev ($dirty uncommitted), $([ "$failures" -eq 0 ] && echo "passed, nothing lost" || echo "$failures step(s) FAILED") |" '
            /^\|/ { table = 1 }
            table && !/^\|/ && !done { print row; done = 1 }
            { print }'
        for name in "${names[@]}"; do
            if [ -n "${sections[$name]+set}" ]; then
                printf '%s\n\n' "${sections[$name]}"
            else
                awk -v h="### $name:" 'index($0, "### ") == 1 { p = (index($0, h) == 1) } p' "$out"
            fi
        done
    } >"$merged"
    mv "$merged" "$out"
    echo
    echo "reliability.sh: the steps run are updated in $out"
    [ "$failures" -eq 0 ] || die "$failures step(s) failed"
    exit 0
fi
{
    echo "# lfs reliability run"
    echo
    echo "Generated by \`bench/reliability.sh\` ($mode mode); see [docs/RELIABILITY.md](../docs/RELIABILITY.md) for what each test covers."
    echo
    echo "| | |"
    echo "|---|---|"
    echo "| started (UTC) | $started, $((SECONDS - start_all)) s in all |"
    echo "| git | $git_rev, $dirty uncommitted file(s) |"
    echo "| machine | $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r) |"
    echo "| settings | LFS_CRASH_SEEDS=${LFS_CRASH_SEEDS:-default} LFS_CORRUPT_CASES=${LFS_CORRUPT_CASES:-default} FUZZ_SECONDS=$fuzz_seconds LFS_FULL_ROUNDS=${LFS_FULL_ROUNDS:-default} LFS_KILL_CYCLES=${LFS_KILL_CYCLES:-default} LFS_SOAK_OPS=${LFS_SOAK_OPS:-default} LFS_FSX_OPS=${LFS_FSX_OPS:-default} |"
    echo "| verdict | $([ "$failures" -eq 0 ] && echo "every step passed, nothing lost" || echo "$failures step(s) FAILED") |"
    echo
    printf '%s\n' "${report[@]}"
} >"$out"
echo
echo "reliability.sh: report in $out"
[ "$failures" -eq 0 ] || die "$failures step(s) failed"
