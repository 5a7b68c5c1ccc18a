# Shared helpers for the scripts in this directory.  Sourced, not run.
# shellcheck shell=bash

# Print a message to stderr and exit 1.
die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

# Make `cargo` runnable and set CARGO to it.  rustup puts cargo in
# ~/.cargo/bin, which `sudo` drops from PATH (Debian's secure_path), so look
# there too: first the current user's, then the invoking user's under sudo.
# Returns 1 if no cargo is found.
find_cargo() {
    local dir home
    if [ -n "${CARGO:-}" ] && [ -x "${CARGO}" ]; then
        return 0
    fi
    if CARGO=$(command -v cargo); then
        export CARGO
        return 0
    fi
    for dir in "${CARGO_HOME:-${HOME:-/root}/.cargo}/bin" \
        "$(if [ -n "${SUDO_USER:-}" ]; then getent passwd "$SUDO_USER" | cut -d: -f6; fi)/.cargo/bin"; do
        if [ -x "$dir/cargo" ]; then
            PATH="$dir:$PATH"
            CARGO="$dir/cargo"
            export PATH CARGO
            # Under sudo, the toolchains belong to the invoking user.
            home=${dir%/.cargo/bin}
            if [ -z "${RUSTUP_HOME:-}" ] && [ ! -d "${HOME:-/root}/.rustup" ] && [ -d "$home/.rustup" ]; then
                export RUSTUP_HOME="$home/.rustup"
            fi
            return 0
        fi
    done
    return 1
}
