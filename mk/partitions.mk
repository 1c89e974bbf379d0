# Real network partitions (issue 28): the netns layer's tests and scenarios A-E
# (tests/tests/partitions.rs, short form: D's fault lasts PARTITIONS_D_SECS, issue 28's full form
# is 60) one at a time, with sentinel-recovery's Rust client in default mode, and A, B, C again
# with wait_replicas=2 (no acknowledged write may be lost). The tests are #[ignore]d so that
# test-rust's `cargo test --workspace` does not run them a second time. Needs root (CI runs
# as root); without it every test prints SKIPPED and passes. About 2 minutes.
# `bench/partitions/run.sh` measures A, B, C beside redis-py's Sentinel client.
PARTITIONS_D_SECS ?= 20

TEST_TARGETS += test-partitions

.PHONY: test-partitions

test-partitions: deps
	SR_PARTITIONS_D_SECS=$(PARTITIONS_D_SECS) cargo test -p sentinel-recovery-testkit \
	  --test netns --test partitions -- --ignored --test-threads=1
