# Node binding (bindings-node/): builds the napi-rs addon with the napi CLI (`npm ci` runs the
# package's `prepare` script, release build in the shared target dir) and runs the node:test suite
# against real topologies started by the testkit's sr-topology.
TEST_TARGETS += test-node

.PHONY: test-node node-build

# The addon alone (also used by the soak's Node writer, mk/soak.mk).
# With USE_DIST_ARTIFACTS=1 (set by `make test`) it is the addon `make dist` built.
ifeq ($(USE_DIST_ARTIFACTS),1)
node-build: dist
	scripts/dist/use-in-tree.sh node
else
node-build: deps
	@command -v node >/dev/null 2>&1 || { echo "node-build: node (>= 18) and npm are required" >&2; exit 1; }
	cd bindings-node && if [ -d node_modules/@napi-rs/cli ] && [ -d node_modules/typescript ] && [ -d node_modules/@types/node ]; then npm run build; else npm ci; fi
endif

test-node: deps node-build
	cargo build -p sentinel-recovery-testkit --bins
	cd bindings-node && npm test
