#!/usr/bin/env bash
# Install what building and testing lfs needs on Debian 12, idempotently:
# apt runs only if a package is missing.  Needs root (or sudo) only then.
#
#   scripts/setup-debian.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

# fuse3: FUSE mounts.  mandoc: man page lint.  man-db: `man -w` in the
# install test.  fio, e2fsprogs, xfsprogs, btrfs-progs, util-linux (losetup):
# workloads and the peer filesystems of the benchmarks.  python3, make: the
# harness and the Makefile.  gcc: the linker rustc drives; g++: libfuzzer-sys
# (fuzz/run-smoke.sh).  shellcheck: lints
# these scripts in the test command.  qemu-utils: qemu-nbd, the NBD server
# the NBD device tests and the lfs-nbd benchmark target run against.
# libaio1, liburing2: what fsx (../shared/tools/fsx, scripts/fsx.sh) links.
packages=(fuse3 mandoc fio e2fsprogs xfsprogs btrfs-progs util-linux man-db
    python3 make gcc g++ shellcheck qemu-utils libaio1 liburing2)

command -v dpkg-query >/dev/null || die "this script is for Debian (no dpkg-query)"

missing=()
for pkg in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done

if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null; then
    as_root=(sudo)
else
    as_root=(false)
fi

if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup-debian: installing ${missing[*]}"
    if [ "${as_root[0]:-}" = false ]; then
        die "missing packages (${missing[*]}) and not root, and sudo is not installed; run this script as root"
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${as_root[@]}" apt-get update
    "${as_root[@]}" apt-get install -y "${missing[@]}"
else
    echo "setup-debian: all packages present (${packages[*]})"
fi

# Debian's udev gives /dev/fuse mode 0666 (50-udev-default.rules), so
# that users mount FUSE filesystems: fusermount3 opens it with the user's
# own rights. A container without udev keeps the kernel's 0600 root, and
# the unprivileged-mount test (tests/tests/unprivileged.rs) fails there.
if [ -c /dev/fuse ] && [ "$(stat -c %a /dev/fuse)" != 666 ]; then
    if [ "${as_root[0]:-}" = false ]; then
        die "/dev/fuse is mode $(stat -c %a /dev/fuse), not Debian's 0666, and this script is not root"
    fi
    echo "setup-debian: giving /dev/fuse Debian's mode 0666"
    "${as_root[@]}" chmod 0666 /dev/fuse
fi

if ! find_cargo; then
    cat >&2 <<'MSG'
error: cargo not found.  Install the Rust toolchain with rustup
(https://rustup.rs), for example:
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y
then open a new shell (or `. ~/.cargo/env`) and run this script again.
rust-toolchain.toml selects the stable toolchain with rustfmt and clippy.
Debian's own cargo package is too old for this workspace.
MSG
    exit 1
fi
# rust-toolchain.toml makes rustup add rustfmt and clippy on first use; check
# here so a missing component is reported once, clearly.
cd "$here/.."
"$CARGO" --version
"$CARGO" fmt --version >/dev/null || die "cargo fmt is not available; run: rustup component add rustfmt"
"$CARGO" clippy --version >/dev/null || die "cargo clippy is not available; run: rustup component add clippy"
echo "setup-debian: ready"
