# Node binding (bindings-node/): builds the napi-rs addon with the napi CLI (`npm ci` runs the
# package's `prepare` script, release build in the shared target dir) and runs the node:test suite
# against real topologies started by the testkit's sr-topology.
TEST_TARGETS += test-node

.PHONY: test-node

test-node: deps
	cargo build -p sentinel-recovery-testkit --bins
	@command -v node >/dev/null 2>&1 || { echo "test-node: node (>= 18) and npm are required" >&2; exit 1; }
	cd bindings-node && if [ -d node_modules/@napi-rs/cli ]; then npm run build; else npm ci; fi
	cd bindings-node && npm test
