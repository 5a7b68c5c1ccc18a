#!/usr/bin/env bash
# A seconds-long smoke run of the benchmark harness, so that it cannot rot
# (issue 7).  As root:
#
#   bench/smoke.sh
#
# Runs bench/run.sh on lfs, lfs-nbd (lfs on a qemu-nbd export) and ext4
# with 512 MiB images, RT=1, the debug
# binaries (`cargo build -p fsd -p mkfs -p fsctl`, which the test command
# has mostly built already), the shrunk workloads of bench/smoke-workloads.sh
# and --small, into a temporary work directory under /var/tmp, and checks
# that it exits 0, that each filesystem printed a line for every workload,
# that the report has a table per workload metric, the targets table and
# its plots and the NBD cost section, then bench/cleaning.py --smoke (one
# write-amplification cell and seed 004), and that nothing it mounted,
# attached, started or created is left.
# No figure is checked: the machine is shared and noisy.  ext4's lines must
# all be figures (a FAILED line there means the harness broke); an lfs or
# lfs-nbd FAILED line is shown but allowed (that is what the engine's tests
# are for).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d /var/tmp/lfs-bench-smoke.XXXXXX) || exit 1
out=$work/report/RESULTS.md
mkdir -p "$work/report"
failures=0

check() { # check DESCRIPTION COMMAND...
    local what=$1
    shift
    if ! "$@"; then
        echo "smoke: FAIL $what" >&2
        failures=$((failures + 1))
    fi
}

# mounted_under and finish run from the EXIT trap, which this shellcheck
# does not follow (SC2317, "unreachable").
# shellcheck disable=SC2317
mounted_under() {
    awk -v d="$work/" 'index($2, d) == 1 { f = 1 } END { exit !f }' /proc/self/mounts
}

# shellcheck disable=SC2317
finish() {
    if mounted_under; then
        echo "smoke: FAIL something is still mounted under $work; not removing it" >&2
        exit 1
    fi
    rm -rf "$work"
}
trap finish EXIT

start=$SECONDS
bash "$here/run.sh" --quick --rt 1 --size 512M --fs "lfs lfs-nbd ext4" --debug --small \
    --workloads "$here/smoke-workloads.sh" --workdir "$work/w" --out "$out"
rc=$?
echo "smoke: bench/run.sh exited $rc after $((SECONDS - start)) s"
[ "$rc" -eq 0 ] || failures=$((failures + 1))

metrics="W1:seqw10_MiBps W2:randrw_512_qd32_iops W2:randrw_4k_qd32_iops W3:randwrite64k_qd1_lat_us W3:randwrite64k_qd16_lat_us W4:fsync64k_files_per_s"
number='[0-9]+(\.[0-9]+)?'
for fs in lfs lfs-nbd ext4; do
    lines=$work/w/results/$fs.lines
    for wm in $metrics; do
        w=${wm%%:*}
        m=${wm#*:}
        if ! grep -Eq "^$fs $w $m ($number|avg $number p99 $number max $number|FAILED: .*)\$" "$lines" 2>/dev/null; then
            echo "smoke: FAIL $fs printed no line for $w $m" >&2
            failures=$((failures + 1))
        elif grep -q "^$fs $w $m FAILED" "$lines"; then
            if [ "$fs" = ext4 ]; then
                echo "smoke: FAIL ext4 $w $m FAILED (the harness, not lfs): $(grep "^$fs $w $m" "$lines")" >&2
                failures=$((failures + 1))
            else
                echo "smoke: note: $(grep "^$fs $w $m" "$lines")" >&2
            fi
        fi
        check "table for $m" grep -q "^### $w \`$m\`" "$out"
        check "rows for $fs in $m" grep -q "^| $fs | " "$out"
    done
done
check "W4x4 table" grep -q "^### W4x4 \`W4x4_files_per_s\`" "$out"
check "raw limit" grep -q '^## Raw limit' "$out"
check "summary table" grep -q '^| W1 seqw10_MiBps | higher | ' "$out"
# 10 from the first issues' targets, 3 from issue 23's section.
targets=$(grep -cE '^\| .* \| \*\*(MET|NOT MET|NOT MEASURED)\*\* \|$' "$out" 2>/dev/null)
check "13 targets marked (found ${targets:-0})" [ "${targets:-0}" -eq 13 ]
check "issue 23 section" grep -q '^## Issue 23 targets' "$out"
for svg in ratios latency lfs-timeline; do
    check "plot $svg" grep -q '^<svg ' "$work/report/RESULTS-$svg.svg"
done
check "NBD cost section" grep -q '^## lfs over NBD against lfs on a local file' "$out"
check "lfs-nbd fsck clean" grep -qx 0 "$work/w/results/lfs-nbd-fsck.exit"
check "figures JSON" python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$work/report/RESULTS.json"

# The cleaning harness (bench/cleaning.py, issue 6): one WA cell and seed
# 004 with and without cleanerd, debug binaries, figures unchecked. A
# FAILED cell is shown but allowed (the engine's tests judge lfs); a broken
# harness fails here.
cstart=$SECONDS
# shellcheck source=scripts/lib.sh
. "$here/../scripts/lib.sh"
if find_cargo && (cd "$here/.." && "$CARGO" build -q -p fsd -p mkfs -p fsctl -p cleanerd); then :; else
    echo "smoke: FAIL building the debug binaries for bench/cleaning.py" >&2
    failures=$((failures + 1))
fi
python3 "$here/cleaning.py" --smoke --debug --no-build --policies greedy \
    --workloads 90/10 --utils 70 --workdir "$work/cleaning" --out "$work/report/RESULTS-cleaning.md"
rc=$?
echo "smoke: bench/cleaning.py exited $rc after $((SECONDS - cstart)) s"
[ "$rc" -eq 0 ] || failures=$((failures + 1))
cout=$work/report/RESULTS-cleaning.md
check "cleaning WA table" grep -q '^| 90/10 | 70 % | ' "$cout"
check "cleaning seed 004 table" grep -q '^## Seed 004' "$cout"
for svg in wa seed004; do
    check "cleaning plot $svg" grep -q '^<svg ' "$work/report/RESULTS-cleaning-$svg.svg"
done
check "cleaning JSON" python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$work/report/RESULTS-cleaning.json"
grep -h 'FAILED' "$cout" | sed 's/^/smoke: note: /' >&2

# W5 (bench/sustained.py, issue 23): one tiny cell, debug binaries,
# figures unchecked; a broken harness fails here.
sstart=$SECONDS
python3 "$here/sustained.py" --smoke --debug --no-build --workdir "$work/sustained" \
    --out "$work/report/RESULTS-sustained.md"
rc=$?
echo "smoke: bench/sustained.py exited $rc after $((SECONDS - sstart)) s"
[ "$rc" -eq 0 ] || failures=$((failures + 1))
check "sustained table" grep -q '^| 128.0 MiB | 60 % | 90/10 | ' "$work/report/RESULTS-sustained.md"
check "sustained JSON" python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$work/report/RESULTS-sustained.md.json"

# Nothing left behind: mounts, loop devices, image files.
check "no mount left under $work" bash -c "! awk -v d='$work/' 'index(\$2, d) == 1 { f = 1 } END { exit !f }' /proc/self/mounts"
check "no loop device left on $work" bash -c "! losetup -a | grep -qF '$work/'"
check "no image left" bash -c "! ls '$work'/w/*.img >/dev/null 2>&1"
check "no qemu-nbd left on $work" bash -c "! pgrep -f '[q]emu-nbd.*$work/' >/dev/null"

if [ "$failures" -eq 0 ]; then
    echo "smoke: OK in $((SECONDS - start)) s"
    exit 0
fi
echo "smoke: FAILED, $failures check(s)" >&2
exit 1
