#!/usr/bin/env bash
# The seed workloads of ../shared/bench/seed-workloads.sh shrunk to a few
# MiB each, for bench/smoke.sh only: the same fio jobs, metric names and
# output lines (LABEL Wn metric values..., or "... FAILED: reason"), so the
# smoke run exercises every path of the harness in seconds.  Its figures
# mean nothing.  RT sets the seconds of each time-based run (default 1).
#
#   bench/smoke-workloads.sh DIR LABEL
set -uo pipefail
DIR=$1
LABEL=$2
RT=${RT:-1}
run() { # run NAME METRIC PYEXPR fio-args...
    local w=$1 m=$2 py=$3
    shift 3
    local out
    out=$(fio --output-format=json "$@" 2>&1)
    if ! printf '%s' "$out" | python3 -c "import json,sys; d=json.load(sys.stdin); $py" "$LABEL $w $m" 2>/dev/null; then
        echo "$LABEL $w $m FAILED: $(printf '%s' "$out" | grep -m1 -iE 'error|fio:' | cut -c1-120)"
    fi
}
mkdir -p "$DIR/w1" "$DIR/w2" "$DIR/w3" "$DIR/w4"
run W1 seqw10_MiBps "print(sys.argv[1], round(d['jobs'][0]['write']['bw']/1024,1))" \
    --name=seqw --ioengine=sync --invalidate=1 --rw=write --directory="$DIR/w1" --filesize=8m --size=2m --bs=2m --direct=1 --numjobs=10 --group_reporting
rm -rf "${DIR:?}/w1"/*
for bs in 512 4k; do
    run W2 "randrw_${bs}_qd32_iops" "w=d['jobs'][0]; print(sys.argv[1], round(w['read']['iops']+w['write']['iops']))" \
        --name=rrw --ioengine=libaio --iodepth=32 --rw=randrw --bs=$bs --direct=1 --directory="$DIR/w2" --size=8m --runtime="$RT" --time_based
done
rm -rf "${DIR:?}/w2"/*
for qd in 1 16; do
    run W3 "randwrite64k_qd${qd}_lat_us" "w=d['jobs'][0]['write']; l=w['lat_ns']; p=w['clat_ns']['percentile']; print(sys.argv[1], 'avg', round(l['mean']/1e3,1), 'p99', round(p['99.000000']/1e3,1), 'max', round(l['max']/1e3,1))" \
        --name=rw64 --ioengine=libaio --iodepth=$qd --rw=randwrite --bs=64k --directory="$DIR/w3" --size=16m --runtime="$RT" --time_based
done
rm -rf "${DIR:?}/w3"/*
run W4 fsync64k_files_per_s "w=d['jobs'][0]; print(sys.argv[1], round(20/(w['job_runtime']/1000),1))" \
    --name=fsync --ioengine=sync --rw=write --bs=4k --directory="$DIR/w4" --nrfiles=20 --filesize=64k --size=1280k --fsync_on_close=1 --file_service_type=sequential --openfiles=1 --create_on_open=1
rm -rf "${DIR:?}/w4"
