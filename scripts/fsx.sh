#!/usr/bin/env bash
# fsx (fstests' file exerciser) on an lfs mount, checked after a remount.
#
#   scripts/fsx.sh [--bin DIR] [--ops N] [--mmap-ops N] [--seeds "S ..."]
#                  [--modes "buffered direct mmap"] [--interval SECONDS]
#                  [--nogc] [--size SIZE] [--work DIR] [--report FILE]
#
# --ops sets the operations of every run, --mmap-ops those of the mmap
# runs (each mapped operation is a few page faults, several times slower
# through FUSE).  Formats a fresh image, mounts it with fsd (an fsd.toml holding
# checkpoint_interval = SECONDS if --interval is given, else fsd's
# defaults) as the engine runs by default, fsd starting and supervising
# cleanerd, here on the shipped conf/cleanerd.conf (-o gcconf, so that
# the machine's /etc plays no part; --nogc mounts with -o nogc instead,
# fsd then making room by itself), and runs fsx once per mode and seed,
# each on a file
# of its own.  Every run is replayed by the same fsx, same seed and
# flags, on a reference directory of the local disk: fsx's operation
# sequence depends only on them, so the reference file is what the lfs
# file must hold at the end (fsx writes its own FILE.fsxgood only when it
# fails).  Then the filesystem is unmounted, checked by fsctl fsck,
# mounted again, and every file compared with its reference, in place
# and as FILE.fsxgood beside it.
#
# fsx comes from ../shared/tools/fsx/fsx (or $LFS_FSX); a missing fsx is
# a failure, never a skip.  Exit 0 only if every run and every comparison
# passed.  Modes: buffered (-R -W), direct (-Z -R -W -r 4096 -w 4096),
# mmap (mapped reads and writes on).  The operations lfs does not offer
# yet (zero, collapse and insert range; clone, dedupe and exchange range;
# unshare) are disabled explicitly, on both sides, so that both run the
# same sequence.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

bin="$root/target/release"
ops=100000
mmap_ops=""
seeds="1"
modes="buffered direct mmap"
interval=""
gc=1
size=4G
work=""
report=""

while [ $# -gt 0 ]; do
    case $1 in
    --bin) bin=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --mmap-ops) mmap_ops=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --nogc) gc=0; shift ;;
    --size) size=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --report) report=$2; shift 2 ;;
    -h | --help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "fsx.sh: unknown argument '$1' (see --help)" ;;
    esac
done

fsx=${LFS_FSX:-$root/../shared/tools/fsx/fsx}
[ -x "$fsx" ] || die "fsx.sh: fsx not found at $fsx (set LFS_FSX, or see ../shared/tools/fsx/README.md)"
for b in fsd mkfs-lfs fsctl cleanerd; do
    [ -x "$bin/$b" ] || die "fsx.sh: $bin/$b is missing: build it first (cargo build --release)"
done
[ -w /dev/fuse ] || die "fsx.sh: /dev/fuse is not usable: fsx needs a FUSE mount (run as root)"

if [ -z "$work" ]; then
    work=$(mktemp -d "${TMPDIR:-/tmp}/lfs-fsx.XXXXXX")
    remove_work=1
else
    mkdir -p "$work"
    remove_work=0
fi
img=$work/lfs.img
mnt=$work/mnt
ref=$work/reference
mkdir -p "$mnt" "$ref"
fsd_pid=""

cleanup() {
    if mountpoint -q "$mnt"; then umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true; fi
    if [ -n "$fsd_pid" ]; then kill "$fsd_pid" 2>/dev/null || true; fi
    if [ "$remove_work" = 1 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

# mount_lfs: starts fsd on the image and waits until it serves the mount.
mount_lfs() {
    : >"$work/fsd.toml"
    [ -n "$interval" ] && echo "checkpoint_interval = $interval" >"$work/fsd.toml"
    local gcopt="gcconf=$root/conf/cleanerd.conf"
    [ "$gc" = 1 ] || gcopt=nogc
    "$bin/fsd" -c "$work/fsd.toml" -o "$gcopt" --socket "$work/fsd.sock" "$img" "$mnt" >>"$work/fsd.log" 2>&1 &
    fsd_pid=$!
    for _ in $(seq 600); do
        mountpoint -q "$mnt" && return 0
        kill -0 "$fsd_pid" 2>/dev/null || { tail -5 "$work/fsd.log" >&2; die "fsx.sh: fsd exited before mounting"; }
        sleep 0.1
    done
    die "fsx.sh: fsd did not mount within 60 s"
}

# unmount_lfs: unmounts (fsd stops its cleanerd), waits for fsd's clean exit.
unmount_lfs() {
    umount "$mnt"
    local rc=0
    wait "$fsd_pid" || rc=$?
    fsd_pid=""
    [ "$rc" -eq 0 ] || die "fsx.sh: fsd exited with status $rc after the unmount (log: $work/fsd.log)"
}

mode_flags() {
    case $1 in
    buffered) echo "-R -W" ;;
    direct) echo "-Z -R -W -r 4096 -w 4096" ;;
    mmap) echo "" ;;
    *) die "fsx.sh: unknown mode '$1' (buffered, direct, mmap)" ;;
    esac
}

# What lfs does not offer yet, disabled on both sides (see the header).
common="-q -u -z -C -I -J -B -0"

"$bin/mkfs-lfs" -q --size "$size" "$img"
mount_lfs

failures=0
files=()
echo "fsx.sh: $ops operations a run (mmap: ${mmap_ops:-$ops}), seeds $seeds, modes $modes, checkpoint_interval ${interval:-default}, cleanerd $([ "$gc" = 1 ] && echo on || echo off), image $size"
for mode in $modes; do
    flags=$(mode_flags "$mode")
    n=$ops
    if [ "$mode" = mmap ] && [ -n "$mmap_ops" ]; then n=$mmap_ops; fi
    for seed in $seeds; do
        name="fsx-$mode-$seed"
        start=$SECONDS
        rc=0
        # shellcheck disable=SC2086
        "$fsx" $common $flags -N "$n" -S "$seed" "$mnt/$name" >"$work/$name.log" 2>&1 || rc=$?
        took=$((SECONDS - start))
        if [ "$rc" -ne 0 ]; then
            failures=$((failures + 1))
            echo "FAIL  $mode seed $seed: fsx exited $rc after ${took}s; its report:" >&2
            grep -m 20 -E 'BAD|bad|expected|error|failed|SIZE' "$work/$name.log" >&2 || tail -20 "$work/$name.log" >&2
            cp "$work/$name.log" "${TMPDIR:-/tmp}/lfs-$name.log" 2>/dev/null && echo "      full log: ${TMPDIR:-/tmp}/lfs-$name.log" >&2
            [ -n "$report" ] && echo "| $mode | $seed | $n | ${interval:-default} | $gc | FAIL (fsx $rc) | ${took} s |" >>"$report"
            continue
        fi
        # shellcheck disable=SC2086
        "$fsx" $common $flags -N "$n" -S "$seed" "$ref/$name" >"$work/$name.ref.log" 2>&1 ||
            die "fsx.sh: the reference run of $mode seed $seed failed on $ref (see $work/$name.ref.log)"
        if ! cmp -s "$mnt/$name" "$ref/$name"; then
            failures=$((failures + 1))
            echo "FAIL  $mode seed $seed: passed, but the file differs from the reference run: $(cmp "$mnt/$name" "$ref/$name" 2>&1 | head -1)" >&2
            continue
        fi
        echo "PASS  $mode seed $seed: $n operations in ${took}s"
        [ -n "$report" ] && echo "| $mode | $seed | $n | ${interval:-default} | $gc | pass | ${took} s |" >>"$report"
        files+=("$name")
    done
done

unmount_lfs
"$bin/fsctl" fsck "$img" >"$work/fsck.log" 2>&1 || { cat "$work/fsck.log" >&2; die "fsx.sh: fsck after the runs failed"; }
mount_lfs
for name in "${files[@]}"; do
    cp "$ref/$name" "$mnt/$name.fsxgood"
    if ! cmp -s "$mnt/$name" "$mnt/$name.fsxgood"; then
        failures=$((failures + 1))
        echo "FAIL  $name after remount: $(cmp "$mnt/$name" "$mnt/$name.fsxgood" 2>&1 | head -1)" >&2
    fi
done
unmount_lfs
"$bin/fsctl" fsck "$img" >"$work/fsck.log" 2>&1 || { cat "$work/fsck.log" >&2; die "fsx.sh: fsck after the remount failed"; }
echo "fsx.sh: after remount, ${#files[@]} file(s) compared with their .fsxgood; fsck clean"

if [ "$failures" -gt 0 ]; then
    echo "fsx.sh: FAILED, $failures failure(s)" >&2
    exit 1
fi
echo "fsx.sh: OK"
