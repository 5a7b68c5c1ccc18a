#!/usr/bin/env bash
# The benchmark harness (issue 7; see docs/BENCHMARKS.md).  As root:
#
#   bench/run.sh [--quick|--full] [--out FILE] [options]
#
# Builds the binaries, then in one work directory on one disk: measures the
# raw sequential O_DIRECT write bandwidth of a plain file, formats equal-sized
# image files for lfs (mkfs-lfs, mounted by fsd, which runs cleanerd) and the kernel peers (loop
# devices), runs the seed workloads W1-W4 (../shared/bench/seed-workloads.sh,
# unchanged) on each in the order given (on lfs twice in a row on the same
# mount: labels lfs and lfs-again), plus lfs-only measurements, and
# writes FILE (default bench/RESULTS.md) with its plots and a JSON of every
# figure beside it.  Everything it created is removed at the end, also on
# failure or Ctrl-C.
#
# Options:
#   --quick            3 GiB images, RT=2 s per timed run (default)
#   --full             4 GiB images, RT=10 s
#   --out FILE         report path; plots FILE-*.svg and FILE.json beside it
#   --workdir DIR      where images and mounts go (default $LFS_BENCH_DIR or
#                      /var/tmp/lfs-bench); must be on the disk to measure
#   --fs "LIST"        filesystems, in run order (default "lfs lfs-nbd ext4 xfs
#                      btrfs"); lfs-nbd is lfs on an NBD export: qemu-nbd
#                      serving an image file in the work directory on a Unix
#                      socket, mkfs-lfs and fsd given its nbd+unix:// name
#   --size SIZE        image size (overrides the mode's)
#   --rt SECONDS       seconds per timed run (overrides the mode's)
#   --debug            build and run the debug (dev profile) binaries
#   --no-build         use the binaries already built
#   --workloads FILE   workload script (default ../shared/bench/seed-workloads.sh)
#   --no-trace         do not trace fsd's device writes with perf
#   --fsd-config FILE  fsd configuration (default: built-in defaults)
#   --small            shrink the harness's own runs (raw limit file, W4x4,
#                      W1 extent run) for bench/smoke.sh
#
# Exit status: 0 report written (workloads may still have FAILED lines: see
# the report), 1 error, 2 bad usage.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

usage() {
    sed -n '2,/^# Exit status/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit "${1:-2}"
}

# Progress goes to stderr, with the time since the start.
say() {
    printf '[bench %4ds] %s\n' "$SECONDS" "$*" >&2
}

mode=quick
out=$here/RESULTS.md
workdir=${LFS_BENCH_DIR:-/var/tmp/lfs-bench}
fslist="lfs lfs-nbd ext4 xfs btrfs"
size=
rt=
profile=release
build=1
workloads=
trace=1
fsd_config=
small=0
cmdline="bench/run.sh $*"
while [ $# -gt 0 ]; do
    case $1 in
        --quick) mode=quick ;;
        --full) mode=full ;;
        --out) out=${2:?--out needs a file}; shift ;;
        --workdir) workdir=${2:?--workdir needs a directory}; shift ;;
        --fs) fslist=${2:?--fs needs a list}; shift ;;
        --size) size=${2:?--size needs a size}; shift ;;
        --rt) rt=${2:?--rt needs seconds}; shift ;;
        --debug) profile=dev ;;
        --no-build) build=0 ;;
        --workloads) workloads=${2:?--workloads needs a file}; shift ;;
        --no-trace) trace=0 ;;
        --fsd-config) fsd_config=${2:?--fsd-config needs a file}; shift ;;
        --small) small=1 ;;
        -h | --help) usage 0 ;;
        *) echo "bench/run.sh: unknown argument: $1" >&2; usage 2 ;;
    esac
    shift
done

# Mode defaults.  Quick images are 3 GiB, not 2: W1 fallocates ten 256 MiB
# files (2.5 GiB), which fails with ENOSPC on a 2 GiB ext4, xfs or btrfs.
case $mode in
    quick) size=${size:-3G}; rt=${rt:-2}; raw_size=1G ;;
    full) size=${size:-4G}; rt=${rt:-10}; raw_size=2G ;;
esac
# The harness's own runs: W4x4 (files per writer, 4 writers) and the W1
# extent run (the W1 job of seed-workloads.sh).
w4x4_files=50
w1keep_filesize=256m
w1keep_size=16m
if [ "$small" -eq 1 ]; then
    raw_size=64M
    w4x4_files=5
    w1keep_filesize=8m
    w1keep_size=2m
fi
case $rt in '' | *[!0-9]*) echo "bench/run.sh: --rt must be whole seconds" >&2; exit 2 ;; esac
for fs in $fslist; do
    case $fs in lfs | lfs-nbd | ext4 | xfs | btrfs) ;; *) echo "bench/run.sh: unknown filesystem $fs (lfs, lfs-nbd, ext4, xfs, btrfs)" >&2; exit 2 ;; esac
done
case $out in /*) ;; *) out="$PWD/$out" ;; esac
case $workdir in /*) ;; *) workdir="$PWD/$workdir" ;; esac
case $workdir in *[[:space:]]*) echo "bench/run.sh: the work directory must not contain white space" >&2; exit 2 ;; esac

[ "$(id -u)" -eq 0 ] || die "bench/run.sh needs root (loop devices, mounts, /proc/PID/io of fsd)"
for tool in fio python3 losetup mount umount truncate setsid flock; do
    command -v "$tool" >/dev/null || die "$tool is not installed"
done
for fs in $fslist; do
    case $fs in
        lfs) [ -e /dev/fuse ] || die "/dev/fuse is missing (lfs needs FUSE)" ;;
        lfs-nbd)
            [ -e /dev/fuse ] || die "/dev/fuse is missing (lfs needs FUSE)"
            command -v qemu-nbd >/dev/null || die "qemu-nbd is not installed (Debian: qemu-utils; scripts/setup-debian.sh)"
            ;;
        *) command -v "mkfs.$fs" >/dev/null || die "mkfs.$fs is not installed" ;;
    esac
done

# The seed workloads: the shared script, called in place and unchanged.
if [ -z "$workloads" ]; then
    workloads=$root/../shared/bench/seed-workloads.sh
    if [ ! -f "$workloads" ] && [ -f "$here/seed-workloads.sh" ]; then
        say "$workloads is missing; using the copy bench/seed-workloads.sh"
        workloads=$here/seed-workloads.sh
    fi
fi
[ -f "$workloads" ] || die "workload script $workloads not found"
workloads=$(cd "$(dirname "$workloads")" && pwd)/$(basename "$workloads")

# ---- state the cleanup needs ------------------------------------------------
fsd_pid=
wl_pid=
sampler_pid=
perf_pid=
qemu_pid=
mounts=()
loops=()
files=()
lockfd=

alive() {
    [ -n "$1" ] && [ -r "/proc/$1/stat" ] && [ "$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

is_mounted() {
    awk -v m="$1" '$2 == m { f = 1 } END { exit !f }' /proc/self/mounts
}

# Stop fsd with SIGTERM and wait for it to exit (it writes a final
# checkpoint).  A second SIGTERM after 120 s forces the unmount; after 60 s
# more it is killed.  Sets fsd_rc to fsd's exit status.  Must run in the
# shell that started fsd (not in a subshell), or `wait` cannot reap it.
fsd_rc=
stop_fsd() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null
    for i in $(seq 1200); do
        alive "$pid" || break
        if [ "$i" -eq 1200 ]; then
            say "fsd $pid still running 120 s after SIGTERM; forcing the unmount"
            kill -TERM "$pid" 2>/dev/null
        fi
        sleep 0.1
    done
    for _ in $(seq 600); do
        alive "$pid" || break
        sleep 0.1
    done
    if alive "$pid"; then
        say "fsd $pid did not exit; killing it"
        kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
    fsd_rc=$?
}

# The process $1 and all its descendants, by walking /proc's parent links.
# (fio puts each job process in a session of its own, so a process group
# does not hold them.)
tree() {
    python3 -c '
import os, sys
kids = {}
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            with open(f"/proc/{p}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(p))
todo, seen = [int(sys.argv[1])], []
while todo:
    p = todo.pop()
    seen.append(p)
    todo.extend(kids.get(p, []))
print(*seen)' "$1"
}

# Stop a helper started with setsid (the workload script and its fio
# processes, the sampler, perf) and wait until it and every descendant has
# gone, so that nothing still holds a mount: SIGTERM, then SIGKILL after
# 10 s.
stop_group() {
    local pid=$1 p left i
    local -a procs
    read -r -a procs <<<"$(tree "$pid")"
    kill -TERM -- "-$pid" "${procs[@]}" 2>/dev/null
    for i in $(seq 150); do
        left=
        for p in "${procs[@]}"; do
            alive "$p" && left+=" $p"
        done
        [ -z "$left" ] && break
        # shellcheck disable=SC2086 # a list of pids
        [ "$i" -eq 100 ] && kill -KILL $left 2>/dev/null
        sleep 0.1
    done
    wait "$pid" 2>/dev/null
    return 0
}

cleanup() {
    local rc=$? m d f
    trap - EXIT INT TERM HUP
    [ -n "$wl_pid" ] && stop_group "$wl_pid"
    [ -n "$sampler_pid" ] && stop_group "$sampler_pid"
    if [ -n "$perf_pid" ] && alive "$perf_pid"; then
        kill -INT "$perf_pid" 2>/dev/null
        wait "$perf_pid" 2>/dev/null
    fi
    if [ -n "$fsd_pid" ] && alive "$fsd_pid"; then
        say "cleanup: stopping fsd $fsd_pid"
        stop_fsd "$fsd_pid"
    fi
    # After fsd: its final checkpoint goes through the NBD server.
    [ -n "$qemu_pid" ] && stop_qemu_nbd
    for m in "${mounts[@]}"; do
        for _ in $(seq 50); do
            is_mounted "$m" || break
            umount "$m" 2>/dev/null && break
            sleep 0.2
        done
        if is_mounted "$m"; then
            say "cleanup: $m still busy after 10 s, lazy unmount"
            umount -l "$m"
        fi
    done
    for d in "${loops[@]}"; do
        losetup -d "$d" 2>/dev/null
    done
    for f in "${files[@]}"; do
        rm -f "$f"
    done
    if [ "$rc" -ne 0 ]; then
        say "FAILED (exit $rc); partial results in $workdir/results"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM HUP

# ---- work directory -----------------------------------------------------------
mkdir -p "$(dirname "$out")" || die "cannot create $(dirname "$out")"
[ -w "$(dirname "$out")" ] || die "cannot write to $(dirname "$out")"
mkdir -p "$workdir" || die "cannot create $workdir"
exec {lockfd}>"$workdir/.lock"
flock -n "$lockfd" || { lockfd=; die "another bench run holds $workdir/.lock"; }
while read -r _ m _; do
    case $m in "$workdir"/*) die "$m is mounted inside the work directory: an earlier run left it; unmount it first" ;; esac
done </proc/self/mounts
R=$workdir/results
rm -rf "${R:?}"
# Mount points of an earlier run: empty directories (nothing is mounted
# there, checked above); rmdir never deletes data.
for d in "$workdir"/mnt/*; do [ -d "$d" ] && rmdir "$d"; done
mkdir -p "$R" "$workdir/mnt"
start_epoch=$(date +%s)

{
    echo "command=$cmdline"
    echo "mode=$mode"
    echo "size=$size"
    echo "rt=$rt"
    echo "raw_size=$raw_size"
    echo "small=$small"
    echo "fslist=$fslist"
    echo "workdir=$workdir"
    echo "workloads=$workloads"
    echo "profile=$profile"
    echo "start=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "git_head=$(git -C "$root" rev-parse HEAD 2>/dev/null)"
    echo "git_dirty_files=$(git -C "$root" status --porcelain 2>/dev/null | wc -l)"
} >"$R/meta.env"

# ---- 1. build -----------------------------------------------------------------
target_dir=${CARGO_TARGET_DIR:-$root/target}
case $target_dir in /*) ;; *) target_dir="$root/$target_dir" ;; esac
if [ "$profile" = dev ]; then bin=$target_dir/debug; else bin=$target_dir/$profile; fi
if [ "$build" -eq 1 ]; then
    find_cargo || die "cargo not found"
    say "building ($profile): cargo build --profile $profile -p fsd -p mkfs -p fsctl -p cleanerd"
    (cd "$root" && "$CARGO" build --profile "$profile" -p fsd -p mkfs -p fsctl -p cleanerd) ||
        die "cargo build failed"
    echo "rustc=$(cd "$root" && rustc --version 2>/dev/null)" >>"$R/meta.env"
fi
for b in fsd mkfs-lfs fsctl cleanerd; do
    [ -x "$bin/$b" ] || die "$bin/$b is missing (build it, or drop --no-build)"
done
echo "fsd_version=$("$bin/fsd" --version)" >>"$R/meta.env"

if [ -z "$fsd_config" ]; then
    fsd_config=$workdir/fsd.toml
    # Built-in defaults, so an installed /etc/lfs/fsd.toml cannot change them.
    printf '# bench/run.sh: fsd built-in defaults\n' >"$fsd_config"
    files+=("$fsd_config")
fi
cp "$fsd_config" "$R/fsd.toml"
# lfs runs as a user runs it, on the shipped defaults: fsd starts cleanerd
# itself with the shipped conf/cleanerd.conf (named, so that an installed
# /etc/lfs/cleanerd.conf cannot change it), and keeps space itself when
# cleanerd falls behind (fsd(8), CLEANING).
cleanerd_config=$root/conf/cleanerd.conf
cp "$cleanerd_config" "$R/cleanerd.conf"

if [ "$trace" -eq 1 ]; then
    if ! command -v perf >/dev/null; then
        trace=0
        echo "not installed" >"$R/trace-unavailable"
    elif ! perf record -q -k mono -e syscalls:sys_enter_pwritev2 -o "$R/perf-probe.data" -- true >/dev/null 2>"$R/perf-probe.err"; then
        trace=0
        { echo "perf record of syscall tracepoints failed:"; head -3 "$R/perf-probe.err"; } >"$R/trace-unavailable"
    fi
    rm -f "$R/perf-probe.data" "$R/perf-probe.err"
else
    echo "disabled with --no-trace" >"$R/trace-unavailable"
fi

# ---- 3. raw limit ---------------------------------------------------------------
raw=$workdir/raw.img
files+=("$raw")
for qd in 1 16; do
    say "raw limit: fio 1 MiB sequential O_DIRECT writes, QD$qd, ${rt}s, onto $raw"
    rm -f "$raw"
    fio --output-format=json --name=raw --filename="$raw" --rw=write --bs=1m --direct=1 \
        --ioengine=libaio --iodepth="$qd" --size="$raw_size" --time_based --runtime="$rt" \
        --end_fsync=1 >"$R/raw-qd$qd.json" 2>&1 || say "raw QD$qd: fio failed (see $R/raw-qd$qd.json)"
done
rm -f "$raw"

# ---- 2./4. the filesystems ------------------------------------------------------
# run_workloads LABEL MNT: the workload script, then four concurrent fsync
# writers (W4x4), each fio run through the shim; its lines go to LABEL.lines.
run_workloads() {
    local label=$1 mnt=$2
    local -a env=(env "PATH=$here/shim:$PATH" "BENCH_FIO_LOG=$R/fio-runs.jsonl" "BENCH_LABEL=$label" "RT=$rt")
    say "$label: $(basename "$workloads") $mnt $label (RT=$rt)"
    setsid "${env[@]}" BENCH_TAG= bash "$workloads" "$mnt" "$label" >"$R/$label.lines" 2>"$R/$label.stderr" &
    wl_pid=$!
    wait "$wl_pid"
    wl_pid=
    sed 's/^/    /' "$R/$label.lines" >&2
    say "$label: W4x4, 4 writers x $w4x4_files files of 64 KiB, fsync on close"
    mkdir -p "$mnt/w4x4"
    "${env[@]}" BENCH_TAG=W4x4 fio --output-format=json --name=fsync4 --ioengine=sync --rw=write --bs=4k \
        --directory="$mnt/w4x4" --nrfiles="$w4x4_files" --filesize=64k --size=$((w4x4_files * 64))k --fsync_on_close=1 \
        --file_service_type=sequential --openfiles=1 --create_on_open=1 --numjobs=4 \
        >"$R/$label-w4x4.json" 2>&1
    rm -rf "$mnt/w4x4"
}

snapshot() { # snapshot PID IMAGE NAME
    python3 "$here/probe.py" snapshot "$1" "$2" >"$R/$3.json" || say "snapshot $3 failed"
}

# start_fsd DEVICE MNT SOCKET LOG: fsd in the background (fsd_pid), waiting
# until MNT is a fuse.lfs mount; dies if fsd exits first or takes 30 s.
start_fsd() {
    local dev=$1 mnt=$2 sock=$3 log=$4 rc
    mounts+=("$mnt")
    setsid "$bin/fsd" --config "$fsd_config" --socket "$sock" -o "gcconf=$cleanerd_config" "$dev" "$mnt" 2>"$log" &
    fsd_pid=$!
    local deadline=$((SECONDS + 30))
    until awk -v m="$mnt" '$2 == m && $3 == "fuse.lfs" { f = 1 } END { exit !f }' /proc/self/mounts; do
        if ! alive "$fsd_pid"; then
            wait "$fsd_pid"
            rc=$?
            fsd_pid=
            tail -5 "$log" >&2
            die "fsd exited with status $rc before mounting $mnt (log: $log)"
        fi
        [ "$SECONDS" -lt "$deadline" ] || die "fsd did not mount $mnt within 30 s (log: $log)"
        sleep 0.1
    done
}

# The qemu-nbd of lfs-nbd: SIGTERM, then SIGKILL after 10 s.
stop_qemu_nbd() {
    local i
    kill -TERM "$qemu_pid" 2>/dev/null
    for i in $(seq 100); do
        alive "$qemu_pid" || break
        [ "$i" -eq 100 ] && kill -KILL "$qemu_pid" 2>/dev/null
        sleep 0.1
    done
    qemu_pid=
}

# lfs on an NBD export, to show what the network block layer costs: the
# same image size on the same disk, served by qemu-nbd on a Unix socket
# (writeback cache, like the buffered image fsd opens itself); mkfs-lfs
# and fsd get its nbd+unix:// name. Device bytes are qemu-nbd's writes
# into the image (BENCH_FSD_PID is qemu-nbd for the shim).
bench_lfs_nbd() {
    local img=$workdir/lfs-nbd.img mnt=$workdir/mnt/lfs-nbd sock=$workdir/lfs-nbd.nbd
    local name="nbd+unix:///lfs?socket=$sock"
    files+=("$img" "$sock" "$workdir/lfs-nbd.qemu.pid")
    mkdir -p "$mnt"
    rm -f "$img" "$sock"
    truncate -s "$size" "$img" || die "cannot create $img"
    say "lfs-nbd: qemu-nbd serving $img on $sock"
    qemu-nbd -f raw --persistent --cache=writeback --discard=unmap -x lfs -k "$sock" \
        --fork --pid-file "$workdir/lfs-nbd.qemu.pid" "$img" >"$R/lfs-nbd-qemu.log" 2>&1 ||
        { cat "$R/lfs-nbd-qemu.log" >&2; die "qemu-nbd failed to start"; }
    qemu_pid=$(cat "$workdir/lfs-nbd.qemu.pid") || die "qemu-nbd wrote no pid file"
    say "lfs-nbd: mkfs-lfs $name"
    "$bin/mkfs-lfs" "$name" >"$R/lfs-nbd-mkfs.txt" 2>&1 || { cat "$R/lfs-nbd-mkfs.txt" >&2; die "mkfs-lfs $name failed"; }
    say "lfs-nbd: fsd $name $mnt"
    start_fsd "$name" "$mnt" "$workdir/lfs-nbd.sock" "$R/fsd-nbd.log"
    say "lfs-nbd: mounted (fsd pid $fsd_pid, qemu-nbd pid $qemu_pid; fsd runs cleanerd)"
    python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644); os.fsync(fd)' "$mnt/.bench-fsync"
    BENCH_FSD_PID=$qemu_pid BENCH_IMAGE=$img BENCH_FLUSH=fsync:$mnt/.bench-fsync run_workloads lfs-nbd "$mnt"
    say "lfs-nbd: SIGTERM to fsd $fsd_pid"
    stop_fsd "$fsd_pid"
    fsd_pid=
    echo "$fsd_rc" >"$R/fsd-nbd.exit"
    say "lfs-nbd: fsd exited with status $fsd_rc; fsctl fsck $name"
    "$bin/fsctl" fsck "$name" >"$R/lfs-nbd-fsck.txt" 2>&1
    echo "$?" >"$R/lfs-nbd-fsck.exit"
    stop_qemu_nbd
    rm -f "$img" "$sock"
}

bench_lfs() {
    local img=$workdir/lfs.img mnt=$workdir/mnt/lfs
    files+=("$img")
    mkdir -p "$mnt"
    rm -f "$img"
    say "lfs: mkfs-lfs --size $size $img"
    "$bin/mkfs-lfs" --size "$size" "$img" >"$R/lfs-mkfs.txt" 2>&1 || { cat "$R/lfs-mkfs.txt" >&2; die "mkfs-lfs failed"; }
    "$bin/fsctl" super "$img" >"$R/lfs-super.txt" 2>&1 || die "fsctl super $img failed"
    say "lfs: fsd $img $mnt"
    start_fsd "$img" "$mnt" "$workdir/lfs.sock" "$R/fsd.log"
    say "lfs: mounted (fsd pid $fsd_pid; fsd runs cleanerd)"
    # The file the shim fsyncs to checkpoint everything, created before the
    # first sample so that it is not counted.
    python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644); os.fsync(fd)' "$mnt/.bench-fsync"
    if [ "$trace" -eq 1 ]; then
        setsid perf record -q -k mono -p "$fsd_pid" -o "$R/fsd-writes.perf.data" \
            -e syscalls:sys_enter_pwrite64,syscalls:sys_exit_pwrite64 \
            -e syscalls:sys_enter_pwritev,syscalls:sys_exit_pwritev \
            -e syscalls:sys_enter_pwritev2,syscalls:sys_exit_pwritev2 \
            >/dev/null 2>"$R/perf.err" &
        perf_pid=$!
        sleep 1
        alive "$perf_pid" || { trace=0; { echo "perf record exited at start:"; head -3 "$R/perf.err"; } >"$R/trace-unavailable"; perf_pid=; }
    fi
    setsid python3 "$here/probe.py" timeline "$fsd_pid" "$img" "$R/lfs-timeline.csv" &
    sampler_pid=$!
    snapshot "$fsd_pid" "$img" lfs-start
    BENCH_FSD_PID=$fsd_pid BENCH_IMAGE=$img BENCH_FLUSH=fsync:$mnt/.bench-fsync run_workloads lfs "$mnt"
    # Twice in a row on the same mount (issue 23): the second pass finds
    # the image as the first left it, its history and all, with nothing
    # but fsd (and the cleanerd it started) to give space back.
    BENCH_FSD_PID=$fsd_pid BENCH_IMAGE=$img BENCH_FLUSH=fsync:$mnt/.bench-fsync run_workloads lfs-again "$mnt"
    snapshot "$fsd_pid" "$img" lfs-end
    say "lfs: W1 again with the files kept, for their extents"
    mkdir -p "$mnt/w1keep"
    local since_ns
    since_ns=$(date +%s%N)
    env "PATH=$here/shim:$PATH" "BENCH_FIO_LOG=$R/fio-runs.jsonl" BENCH_LABEL=lfs BENCH_TAG=W1-extents \
        "BENCH_FSD_PID=$fsd_pid" "BENCH_IMAGE=$img" "BENCH_FLUSH=fsync:$mnt/.bench-fsync" \
        fio --output-format=json --name=seqw --ioengine=sync --invalidate=1 --rw=write \
        --directory="$mnt/w1keep" --filesize="$w1keep_filesize" --size="$w1keep_size" --bs=2m --direct=1 --numjobs=10 \
        --group_reporting >"$R/lfs-w1keep.json" 2>&1
    (cd "$mnt/w1keep" && stat -c '%i %s %n' -- *) >"$R/lfs-w1keep.inodes" 2>&1
    stop_group "$sampler_pid"
    sampler_pid=
    if [ -n "$perf_pid" ]; then
        kill -INT "$perf_pid" 2>/dev/null
        wait "$perf_pid" 2>/dev/null
        perf_pid=
    fi
    say "lfs: SIGTERM to fsd $fsd_pid"
    stop_fsd "$fsd_pid"
    fsd_pid=
    echo "$fsd_rc" >"$R/fsd.exit"
    say "lfs: fsd exited with status $fsd_rc"
    python3 -c 'import os, sys; print(os.stat(sys.argv[1]).st_blocks * 512)' "$img" >"$R/lfs-image-final-alloc"
    say "lfs: fsctl fsck"
    "$bin/fsctl" fsck "$img" >"$R/lfs-fsck.txt" 2>&1
    echo "$?" >"$R/lfs-fsck.exit"
    if [ "$trace" -eq 1 ] && [ -s "$R/fsd-writes.perf.data" ]; then
        perf script -i "$R/fsd-writes.perf.data" -F tid,time,event,trace 2>/dev/null |
            python3 "$here/probe.py" writes >"$R/lfs-writes.json" || say "lfs: parsing the perf trace failed"
        rm -f "$R/fsd-writes.perf.data"
    fi
    say "lfs: extents of the kept W1 files (fsctl dumpseg of every segment)"
    python3 "$here/probe.py" extents "$bin/fsctl" "$img" "$R/lfs-w1keep.inodes" "$since_ns" >"$R/lfs-extents.json" ||
        say "lfs: extent count failed"
    rm -f "$img"
}

bench_kernel() { # bench_kernel FS
    local fs=$1 img=$workdir/$1.img mnt=$workdir/mnt/$1 dev
    files+=("$img")
    mkdir -p "$mnt"
    rm -f "$img"
    truncate -s "$size" "$img" || die "cannot create $img"
    say "$fs: mkfs.$fs $img"
    case $fs in
        ext4) mkfs.ext4 -q -F "$img" ;;
        xfs) mkfs.xfs -q -f "$img" ;;
        btrfs) mkfs.btrfs -q -f "$img" ;;
    esac >"$R/$fs-mkfs.txt" 2>&1 || { cat "$R/$fs-mkfs.txt" >&2; die "mkfs.$fs failed"; }
    dev=$(losetup --find --show "$img") || die "losetup $img failed"
    loops+=("$dev")
    mounts+=("$mnt")
    mount "$dev" "$mnt" || die "mount $dev $mnt failed"
    say "$fs: mounted $dev on $mnt"
    BENCH_DEVSTAT=/sys/block/${dev#/dev/}/stat BENCH_IMAGE=$img BENCH_FLUSH=syncfs:$mnt run_workloads "$fs" "$mnt"
    umount "$mnt" || die "umount $mnt failed"
    losetup -d "$dev"
    rm -f "$img"
}

for fs in $fslist; do
    case $fs in
        lfs) bench_lfs ;;
        lfs-nbd) bench_lfs_nbd ;;
        *) bench_kernel "$fs" ;;
    esac
done

echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$R/meta.env"
echo "elapsed_s=$(($(date +%s) - start_epoch))" >>"$R/meta.env"

# ---- 5. the report ----------------------------------------------------------------
say "writing $out"
python3 "$here/report.py" "$R" "$out" || die "report.py failed"
say "done: $out"
