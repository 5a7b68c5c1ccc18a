# Build, install and test lfs.  GNU make.  See docs/TESTING.md.
#
#   make build                     cargo build --release --workspace
#   make install                   build, then install under $(PREFIX)
#   make install DESTDIR=/tmp/pkg  stage an install for packaging
#   make install NO_BUILD=1        install binaries built earlier (e.g. under
#                                  sudo, where cargo may not be on PATH)
#   make uninstall
#   make test                      the test command, scripts/test.sh

CARGO      ?= cargo
# Cargo profile to build and install.  Cargo writes the `dev` profile to
# debug/ and every other profile to a directory named after it.
PROFILE    ?= release
TARGET_DIR ?= $(if $(CARGO_TARGET_DIR),$(CARGO_TARGET_DIR),target)
BIN_DIR    ?= $(TARGET_DIR)/$(if $(filter dev test,$(PROFILE)),debug,$(PROFILE))

PREFIX     ?= /usr/local
DESTDIR    ?=
SBINDIR    ?= $(PREFIX)/sbin
MANDIR     ?= $(PREFIX)/share/man
# Configuration is system-wide whatever PREFIX is, as /etc is.
SYSCONFDIR ?= /etc/lfs
INSTALL    ?= install

# The installed commands, as CARGO-BIN:INSTALLED-NAME.  Cargo cannot name a
# binary mkfs.lfs, hence the mapping.  fsck.lfs is fsctl installed under
# that name (it checks as fsck(8)'s checker when started so).  Only commands
# that exist belong here; the e2e tests check that this list matches the
# workspace's binaries and that each one has man/INSTALLED-NAME.8.
BINS       = mkfs-lfs:mkfs.lfs fsctl:fsctl fsctl:fsck.lfs fsd:fsd cleanerd:cleanerd

# mount(8) runs /sbin/mount.TYPE for a filesystem of type TYPE (it looks
# nowhere else): fsd, linked as mount.fuse.lfs and mount.lfs, is that
# helper for the types fuse.lfs and lfs.  With PREFIX=/usr on a merged-/usr
# system (Debian 12) SBINDIR is /sbin; otherwise install with
# HELPERDIR=/sbin.  fsck(8) runs fsck.TYPE from PATH: fsck.fuse.lfs for
# the type fuse.lfs.
HELPERDIR  ?= $(SBINDIR)
# Symbolic links, as LINK:TARGET.
LINKS       = $(HELPERDIR)/mount.fuse.lfs:$(SBINDIR)/fsd \
              $(HELPERDIR)/mount.lfs:$(SBINDIR)/fsd \
              $(SBINDIR)/fsck.fuse.lfs:fsck.lfs

# systemd units (systemd/*.in, with @SBINDIR@ and @SYSCONFDIR@ filled in).
# systemd reads /usr/local/lib/systemd/system as well as /usr/lib/...
UNITDIR    ?= $(PREFIX)/lib/systemd/system
UNITS       = $(wildcard systemd/*.in)

# Shell completions, which each command prints (CMD --completions SHELL),
# where bash-completion, zsh and fish look for their packages' scripts.
# fsck.lfs, fsctl under another name, has none of its own.
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/vendor-completions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
COMPLETED   = $(filter-out fsctl:fsck.lfs,$(BINS))

# Every man page, installed into the man<section> directory its suffix names.
MANPAGES   = $(wildcard man/*.[1-8])

# Shipped configuration files.  Overridable so the tests can exercise the
# conffile handling on files of their own.
CONF_SRC   ?= conf
CONFS       = $(wildcard $(CONF_SRC)/*)

.PHONY: all build install install-bins install-links install-units \
	install-completions install-man install-conf uninstall test print-bins clean

all: build

build:
	$(CARGO) build --profile $(PROFILE) --workspace --target-dir $(TARGET_DIR)

install: install-bins install-links install-units install-completions install-man \
	install-conf

install-bins: $(if $(NO_BUILD),,build)
	@set -e; \
	$(INSTALL) -d '$(DESTDIR)$(SBINDIR)'; \
	for pair in $(BINS); do \
	    src="$(BIN_DIR)/$${pair%%:*}"; dst='$(DESTDIR)$(SBINDIR)/'"$${pair#*:}"; \
	    if [ ! -f "$$src" ]; then \
	        echo "error: $$src is not built; run 'make build' first" >&2; exit 1; \
	    fi; \
	    $(INSTALL) -m 0755 "$$src" "$$dst"; \
	    echo "installed $$dst"; \
	done

install-links: install-bins
	@set -e; \
	for pair in $(LINKS); do \
	    link='$(DESTDIR)'"$${pair%%:*}"; target="$${pair#*:}"; \
	    $(INSTALL) -d "$$(dirname "$$link")"; \
	    ln -sfn "$$target" "$$link"; \
	    echo "installed $$link -> $$target"; \
	done

install-units:
	@set -e; \
	$(INSTALL) -d '$(DESTDIR)$(UNITDIR)'; \
	for src in $(UNITS); do \
	    name="$${src##*/}"; dst='$(DESTDIR)$(UNITDIR)/'"$${name%.in}"; \
	    sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' "$$src" > "$$dst.tmp"; \
	    chmod 0644 "$$dst.tmp"; mv "$$dst.tmp" "$$dst"; \
	    echo "installed $$dst"; \
	done

install-completions: install-bins
	@set -e; \
	$(INSTALL) -d '$(DESTDIR)$(BASHCOMPDIR)' '$(DESTDIR)$(ZSHCOMPDIR)' '$(DESTDIR)$(FISHCOMPDIR)'; \
	for pair in $(COMPLETED); do \
	    bin="$(BIN_DIR)/$${pair%%:*}"; name="$${pair#*:}"; \
	    for spec in 'bash:$(DESTDIR)$(BASHCOMPDIR)/%s' 'zsh:$(DESTDIR)$(ZSHCOMPDIR)/_%s' \
	                'fish:$(DESTDIR)$(FISHCOMPDIR)/%s.fish'; do \
	        dst="$$(printf "$${spec#*:}" "$$name")"; \
	        "$$bin" --completions "$${spec%%:*}" > "$$dst.tmp"; \
	        chmod 0644 "$$dst.tmp"; mv "$$dst.tmp" "$$dst"; \
	        echo "installed $$dst"; \
	    done; \
	done

install-man:
	@set -e; \
	for page in $(MANPAGES); do \
	    dir='$(DESTDIR)$(MANDIR)/man'"$${page##*.}"; \
	    $(INSTALL) -d "$$dir"; \
	    $(INSTALL) -m 0644 "$$page" "$$dir/"; \
	    echo "installed $$dir/$${page##*/}"; \
	done

# Like dpkg's conffiles: a file the administrator changed is never
# overwritten; the shipped version goes next to it as NAME.new.
install-conf:
	@set -e; \
	for src in $(CONFS); do \
	    if [ ! -f "$$src" ]; then \
	        echo "error: $$src is not a regular file; $(CONF_SRC)/ must be flat" >&2; exit 1; \
	    fi; \
	    dst='$(DESTDIR)$(SYSCONFDIR)/'"$${src##*/}"; \
	    $(INSTALL) -d '$(DESTDIR)$(SYSCONFDIR)'; \
	    if [ ! -e "$$dst" ]; then \
	        $(INSTALL) -m 0644 "$$src" "$$dst"; \
	        echo "installed $$dst"; \
	    elif cmp -s "$$src" "$$dst"; then \
	        echo "unchanged $$dst"; \
	    else \
	        $(INSTALL) -m 0644 "$$src" "$$dst.new"; \
	        echo "notice: $$dst differs from the shipped version; kept it and installed the shipped version as $$dst.new"; \
	    fi; \
	done

# Removes what install put there, except configuration the administrator
# changed (as dpkg keeps modified conffiles on remove).
uninstall:
	@set -e; \
	for pair in $(BINS); do \
	    rm -f '$(DESTDIR)$(SBINDIR)/'"$${pair#*:}"; \
	done; \
	for pair in $(LINKS); do \
	    link='$(DESTDIR)'"$${pair%%:*}"; \
	    if [ -L "$$link" ]; then rm -f "$$link"; fi; \
	done; \
	for src in $(UNITS); do \
	    name="$${src##*/}"; rm -f '$(DESTDIR)$(UNITDIR)/'"$${name%.in}"; \
	done; \
	for pair in $(COMPLETED); do \
	    name="$${pair#*:}"; \
	    rm -f '$(DESTDIR)$(BASHCOMPDIR)/'"$$name" '$(DESTDIR)$(ZSHCOMPDIR)/_'"$$name" \
	          '$(DESTDIR)$(FISHCOMPDIR)/'"$$name.fish"; \
	done; \
	for page in $(MANPAGES); do \
	    rm -f '$(DESTDIR)$(MANDIR)/man'"$${page##*.}/$${page##*/}"; \
	done; \
	for src in $(CONFS); do \
	    dst='$(DESTDIR)$(SYSCONFDIR)/'"$${src##*/}"; \
	    if [ -f "$$dst.new" ] && cmp -s "$$src" "$$dst.new"; then rm -f "$$dst.new"; fi; \
	    if [ ! -e "$$dst" ]; then :; \
	    elif cmp -s "$$src" "$$dst"; then rm -f "$$dst"; \
	    else echo "notice: kept $$dst, which differs from the shipped version"; fi; \
	done; \
	if [ -d '$(DESTDIR)$(SYSCONFDIR)' ]; then rmdir '$(DESTDIR)$(SYSCONFDIR)' 2>/dev/null || true; fi

test:
	bash scripts/test.sh

# For the tests and scripts: the BINS list, one line.
print-bins:
	@echo $(BINS)

clean:
	$(CARGO) clean --target-dir $(TARGET_DIR)
