# Sequential latency benchmark (issue 16; bench/latency/), NOT part of `make test`:
#   make bench-latency    [BENCH_ARGS='-n 5000 --rounds 7'] [BENCH_JSON=path]
#   make bench-callgrind  [CALLGRIND_N1=1000 CALLGRIND_N2=6000]
# bench-latency installs what it needs where it is missing (redis + hiredis into the Python venv
# of mk/python.mk, ioredis into bench/node/node_modules, Debian's libhiredis-dev), builds the
# release C library, the Python binding (release: maturin's PEP 517 build) and the Node addon
# (release), compiles the C loops into $(BENCH_OUT) and runs bench/latency/run.py.
BENCH_OUT := $(CARGO_TARGET_DIR)/bench-latency
BENCH_ARGS ?=
BENCH_JSON ?= $(BENCH_OUT)/latency.json
BENCH_PY_DEPS := redis==8.1.0 hiredis==3.4.2
BENCH_CFLAGS := -std=c11 -O2 -g -Wall -Wextra -Werror -pedantic
BENCH_LIB := $(CARGO_TARGET_DIR)/release

.PHONY: bench-latency bench-latency-deps bench-latency-build bench-callgrind

# $(call bench_apt,header-or-command,package): apt-get install only when it is missing.
bench_apt = @if ! { [ -e "$(1)" ] || command -v "$(1)" >/dev/null 2>&1; }; then \
	  echo "bench: installing $(2)"; s=; [ "$$(id -u)" -eq 0 ] || s=sudo; \
	  DEBIAN_FRONTEND=noninteractive $$s apt-get install -y --no-install-recommends $(2) >/dev/null 2>&1 \
	  || { $$s apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive $$s apt-get install -y --no-install-recommends $(2) >/dev/null; }; fi

bench-latency-deps: deps python-install node-build
	$(call bench_apt,/usr/include/hiredis/hiredis.h,libhiredis-dev)
	@$(PY_VENV)/bin/python -c "import redis, hiredis" 2>/dev/null || $(PY_VENV)/bin/python -m pip install -q $(BENCH_PY_DEPS)
	@cd bench/node && { [ -d node_modules/ioredis ] || npm ci --no-audit --no-fund; }

# The release C library, sr-topology, and the two C loops (linked to the release .so, rpath set).
bench-latency-build: deps
	$(call bench_apt,/usr/include/hiredis/hiredis.h,libhiredis-dev)
	cargo build --release -p sentinel-recovery-ffi
	cargo build -p sentinel-recovery-testkit --bin sr-topology
	@mkdir -p $(BENCH_OUT)
	cc $(BENCH_CFLAGS) -Iffi-c/include bench/latency/c_loop.c -o $(BENCH_OUT)/c_loop \
	  -L$(BENCH_LIB) -lsentinel_recovery -Wl,-rpath,$(BENCH_LIB) -lpthread
	cc $(BENCH_CFLAGS) bench/latency/hiredis_loop.c -o $(BENCH_OUT)/hiredis_loop -lhiredis

bench-latency: bench-latency-deps bench-latency-build
	$(PY_VENV)/bin/python bench/latency/run.py $(BENCH_ARGS) --json $(BENCH_JSON)

bench-callgrind: bench-latency-build
	$(call bench_apt,valgrind,valgrind)
	bench/latency/callgrind.sh $(CALLGRIND_N1) $(CALLGRIND_N2)

# Node at 64 in flight (issue 30), NOT part of `make test`: one client of ours against ioredis
# direct to the primary, GET and SET, 16 B and 4 KiB values, interleaved over X64_ROUNDS rounds of
# X64_OPS commands, beside redis-benchmark `-c 1 -P 64` and `-c 64` in the same rounds. Prints one
# table (bench/node/throughput.js says what each column is):
#   make bench-node-x64   [X64_ROUNDS=5] [X64_OPS=100000]
X64_ROUNDS ?= 5
X64_OPS ?= 100000

.PHONY: bench-node-x64

bench-node-x64: deps node-build
	cargo build -p sentinel-recovery-testkit --bin sr-topology
	@cd bench/node && { [ -d node_modules/ioredis ] || npm ci --no-audit --no-fund; }
	cd bench/node && node throughput.js x64 $(X64_ROUNDS) $(X64_OPS)

# The fencing proxy beside direct and HAProxy's Sentinel pattern (issue 37, point 4; bench/proxy/),
# NOT part of `make test`: sequential latency, throughput, writes lost in a planned failover and a
# kill -9, the write gap, memory per idle session, CPU per command, in one run (2–3 minutes after
# the builds).
# bench/proxy/run.sh installs haproxy and redis-py where missing and builds what it runs; it
# prints the markdown report to paste into bench/proxy/results.md:
#   make bench-proxy   [BENCH_PROXY_ARGS='--rounds 3 --idle 2000']
BENCH_PROXY_ARGS ?=

.PHONY: bench-proxy

bench-proxy: deps
	bench/proxy/run.sh $(BENCH_PROXY_ARGS)
