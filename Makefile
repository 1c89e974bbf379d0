# The two commands of the README: `make demo` and `make test`. Both install what they need.
SHELL := /bin/bash
export CARGO_TARGET_DIR ?= $(CURDIR)/target
# Incremental caches (about 3 GiB after `make test`) only pay off when the same crate is rebuilt
# after a small edit; a make run on a fresh clone builds each crate once. Set it to 1 to keep them.
export CARGO_INCREMENTAL ?= 0
# Servers started by tests are real processes; keep test binaries from starting too many at once
# on small machines.
E2E_THREADS ?= 2
# `make test` runs the Node and Python suites (and the soak's writers) on the release artifacts its
# dist step builds (mk/dist.mk: the stripped Node addon, the abi3 wheel), so every optimized build
# happens once; before, each suite built its own release copy of the core (about 4 minutes of
# the run). Alone, `make test-node` or `make test-python` still builds from the source tree.
ifneq ($(filter test test-all,$(MAKECMDGOALS)),)
USE_DIST_ARTIFACTS ?= 1
endif

.PHONY: deps build test test-all test-rust test-c lint demo

deps:
	@scripts/deps.sh

build: deps
	cargo build --workspace --bins

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	@# The bindings' error-code and event-kind tables are generated from the core's one table.
	cargo run -q -p xtask -- tables --check
	@# No import circles between modules (xtask/src/circles.rs says what counts), in any crate.
	cargo run -q -p xtask -- circles core ffi-c bindings-python bindings-uniffi bindings-node cli fuzz tests
	@# The .NET wrapper's P/Invoke signatures and struct layouts match the committed C header.
	cargo run -q -p xtask -- pinvoke

# One cargo invocation, so every crate is built once with one feature set.
test-rust: deps
	cargo test --workspace --all-targets -- --test-threads=$(E2E_THREADS)

# C ABI (ffi-c/): committed header up to date (cbindgen 0.29.4), header compiles as C11 and C++17,
# C tests against a real topology plainly, under valgrind and under AddressSanitizer, and the
# example through a kill -9 failover.
test-c: deps
	ffi-c/tests/run.sh

# Each binding adds its suite in mk/<binding>.mk with `TEST_TARGETS += test-<binding>`.
TEST_TARGETS :=
-include mk/*.mk

# Every stage runs in one make (`test-all`), so what several stages need (the release build)
# is made once; `make test` prints how long each stage took, also after a failure.
STAGES := lint test-rust test-c $(TEST_TARGETS)

test:
	@scripts/stage-times.sh $(MAKE) --no-print-directory test-all

test-all: stage-mark-deps deps $(foreach stage,$(STAGES),stage-mark-$(stage) $(stage))

stage-mark-%:
	@scripts/stage-times.sh mark $*

demo: build
	@scripts/demo.sh
