# Release artifacts (scripts/dist/): what users install without a Rust toolchain.
#   make dist                    dist/: abi3 manylinux2014 wheel + sdist, npm main + linux-x64-gnu
#                                packages, nupkg, C SDK tarball, CLI tarball, debug info, SHA256SUMS
#                                (release build in the `dist` cargo profile, linked by zig for
#                                glibc 2.17; packaging tools pinned in $(CARGO_TARGET_DIR)/dist-tools)
#   make install PREFIX=/usr/local [DESTDIR=]   the C SDK's layout + bin/sentinel-recovery
#   make test-dist               installs each artifact in a clean environment (env -i, no cargo)
#                                and runs it through a kill -9 failover; version, glibc-symbol,
#                                auditwheel, SONAME and export checks
#   make check-versions          the one-version check of the sources alone
PREFIX ?= /usr/local
DESTDIR ?=

TEST_TARGETS += test-dist

.PHONY: dist install test-dist check-versions

dist: deps
	scripts/dist/build.sh

install: dist
	PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" scripts/dist/install.sh

test-dist: dist
	cargo build -q -p sentinel-recovery-testkit --bins
	scripts/dist/test.sh

check-versions:
	scripts/dist/check-versions.sh sources
