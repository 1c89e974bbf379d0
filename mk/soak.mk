# Chaos soak (issue 15): `make soak MINUTES=N [SEED=n]` runs tests/src/bin/sr-soak — 1 primary +
# 2 replicas + 3 sentinels on loopback behind the testkit's fault proxy, writers in Rust, Python,
# Node and C, a seeded random schedule of faults — then its history checker, which writes
# summary.json and timeline.svg into $(SOAK_OUT)/<MINUTES>m and fails naming the failed checks.
# The writers reuse what the other suites build: the Python venv (mk/python.mk), Node's addon
# (mk/node.mk) and the debug C library (ffi-c); `make test` runs a 3-minute soak. Servers are
# Debian's Valkey 8 by default: its sentinels count commands per connection (CLIENT LIST
# tot-cmds), which the checker needs to bound each writer process's sentinel traffic
# (SOAK_SERVER=redis works too, with a coarser whole-sentinel bound).
# SOAK_NET (auto|on|off, default auto: on as root with `ip`, as on CI) runs every node and writer
# on its own host of a netns LAN and adds issue 28's partitions A, B, C to the schedule;
# SOAK_URL_EXTRA (e.g. wait_replicas=2) is appended to every writer's URL, and the checker then
# allows no acknowledged write to be lost.
MINUTES ?= 30
SEED ?=
SOAK_NET ?= auto
SOAK_URL_EXTRA ?=
SOAK_SERVER ?= valkey8
SOAK_OUT ?= $(CARGO_TARGET_DIR)/soak
SOAK_C_WRITER := $(SOAK_OUT)/c-writer

TEST_TARGETS += test-soak

.PHONY: soak test-soak soak-writers

soak-writers: deps python-install node-build
	@if [ "$(SOAK_SERVER)" = valkey8 ]; then scripts/valkey8.sh; fi
	cargo build -q -p sentinel-recovery-ffi -p sentinel-recovery-testkit --lib --bin sr-soak
	@mkdir -p $(SOAK_OUT)
	cc -std=c11 -Wall -Wextra -Werror -pedantic -D_POSIX_C_SOURCE=200809L -Iffi-c/include \
	  tests/soak/writer.c -o $(SOAK_C_WRITER) \
	  -L$(CARGO_TARGET_DIR)/debug -lsentinel_recovery -Wl,-rpath,$(CARGO_TARGET_DIR)/debug -lpthread

soak_run = SR_SERVER=$(SOAK_SERVER) $(CARGO_TARGET_DIR)/debug/sr-soak run --minutes $(1) --seed "$(SEED)" \
	  --out $(SOAK_OUT)/$(1)m --python $(PY_VENV)/bin/python --node node \
	  --c-writer $(SOAK_C_WRITER) --net $(SOAK_NET) --url-extra "$(SOAK_URL_EXTRA)"

soak: soak-writers
	$(call soak_run,$(MINUTES))

test-soak: soak-writers
	$(call soak_run,3)
