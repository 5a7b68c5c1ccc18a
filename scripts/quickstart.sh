#!/usr/bin/env bash
# Quick start: install the prerequisites, build lfs (release), format an
# image file, mount it with fsd (which starts cleanerd, the segment
# cleaner), write, snapshot and overwrite files, show what fsctl sees
# (checkpoints, segments, space, the cleaner), run a cleaning pass,
# unmount, and show the superblock and a consistency check.
#
#   scripts/quickstart.sh [IMAGE [SIZE]]
#
# IMAGE defaults to $LFS_IMAGE or ./lfs.img (relative to where you run
# this), SIZE to $LFS_SIZE or 1G.  An existing IMAGE is formatted afresh.
# The mount point is a temporary directory, removed at the end.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

image=${1:-${LFS_IMAGE:-./lfs.img}}
size=${2:-${LFS_SIZE:-1G}}
case $image in
    /*) ;;
    *) image="$PWD/${image#./}" ;;
esac

target_dir=${CARGO_TARGET_DIR:-$root/target}
case $target_dir in
    /*) ;;
    *) target_dir="$PWD/$target_dir" ;;
esac
bin="$target_dir/release"

step() {
    printf '\n==> %s\n' "$*"
}

prerequisites() {
    step "prerequisites (scripts/setup-debian.sh)"
    bash "$root/scripts/setup-debian.sh"
    find_cargo || die "cargo not found"
}

build() {
    step "build (release)"
    (cd "$root" && "$CARGO" build --release --workspace)
}

format_image() {
    step "format $image ($size)"
    if [ -e "$image" ] && [ ! -f "$image" ]; then
        die "$image exists and is not a regular file; quickstart formats image files only"
    fi
    rm -f "$image"
    "$bin/mkfs-lfs" --size "$size" "$image"
}

mnt=
fsd_pid=
cleanup() {
    if [ -n "$fsd_pid" ] && kill -0 "$fsd_pid" 2>/dev/null; then
        kill -TERM "$fsd_pid" 2>/dev/null || true
        wait "$fsd_pid" 2>/dev/null || true
    fi
    if [ -n "$mnt" ]; then
        umount "$mnt" 2>/dev/null || true
        rmdir "$mnt" 2>/dev/null || true
    fi
}
trap cleanup EXIT

mount_and_use() {
    mnt=$(mktemp -d /tmp/lfs-quickstart.XXXXXX)
    step "fsd $image $mnt (it starts cleanerd, the segment cleaner; see fsd(8), CLEANING)"
    "$bin/fsd" "$image" "$mnt" &
    fsd_pid=$!
    for _ in $(seq 100); do
        grep -q " $mnt fuse" /proc/self/mounts && break
        kill -0 "$fsd_pid" 2>/dev/null || die "fsd exited before mounting"
        sleep 0.1
    done
    grep -q " $mnt fuse" /proc/self/mounts || die "fsd did not mount $mnt"
    step "write, overwrite and read files"
    echo "hello from lfs" > "$mnt/hello.txt"
    mkdir "$mnt/dir"
    cp "$root/README.md" "$mnt/dir/"
    sync "$mnt/hello.txt"   # fsync(2) of the file: a checkpoint
    step "fsctl mkcp -s -p $mnt (a snapshot; prints its number)"
    "$bin/fsctl" mkcp -s -p "$mnt"
    for i in 1 2 3; do
        dd if=/dev/urandom of="$mnt/dir/blob" bs=1M count=16 conv=fsync status=none
        echo "overwrote dir/blob ($i)"
    done
    cat "$mnt/hello.txt"
    ls -la "$mnt" "$mnt/dir"
    df -h "$mnt"
    step "fsctl lscp $mnt (checkpoints; the snapshot is ss)"
    "$bin/fsctl" lscp "$mnt"
    step "fsctl lssu -l $mnt (segment usage, first lines)"
    "$bin/fsctl" lssu -l -n 12 "$mnt"
    step "fsctl df $mnt (before cleaning)"
    "$bin/fsctl" df "$mnt"
    step "fsctl clean --once --protection-period 0 $mnt (one pass by cleanerd)"
    # fsd started cleanerd a moment ago; its control socket may not be up
    # yet.
    for _ in $(seq 50); do
        "$bin/fsctl" clean "$mnt" --status >/dev/null 2>&1 && break
        sleep 0.1
    done
    "$bin/fsctl" clean "$mnt" --once --protection-period 0
    step "fsctl df $mnt (after cleaning: the old copies of dir/blob are free)"
    "$bin/fsctl" df "$mnt"
    step "fsctl clean --status $mnt"
    "$bin/fsctl" clean "$mnt" --status
    step "fsctl stat $mnt"
    "$bin/fsctl" stat "$mnt"
    step "unmount (SIGTERM to fsd: it stops cleanerd, writes a final checkpoint, marks the filesystem clean)"
    kill -TERM "$fsd_pid"
    wait "$fsd_pid"
    fsd_pid=
    rmdir "$mnt"
    mnt=
}

show_superblock() {
    step "fsctl super $image"
    "$bin/fsctl" super "$image"
    step "fsctl fsck $image"
    "$bin/fsctl" fsck "$image"
}

prerequisites
build
format_image
mount_and_use
show_superblock

printf '\n==> done: %s is an lfs image of %s\n' "$image" "$size"
