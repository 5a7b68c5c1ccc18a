#!/usr/bin/env bash
# Quick start: install the prerequisites, build lfs (release), format an
# image file and show its superblock.
#
#   scripts/quickstart.sh [IMAGE [SIZE]]
#
# IMAGE defaults to $LFS_IMAGE or ./lfs.img (relative to where you run
# this), SIZE to $LFS_SIZE or 1G.  An existing IMAGE is formatted afresh.
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

show_superblock() {
    step "fsctl super $image"
    "$bin/fsctl" super "$image"
}

prerequisites
build
format_image
show_superblock

printf '\n==> done: %s is an lfs image of %s\n' "$image" "$size"
