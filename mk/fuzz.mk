# Fuzzing (fuzz/): cargo-fuzz targets (libFuzzer, nightly toolchain) for every parser of bytes from
# the network or the user: RESP frame scanner and decoder, the scanner against redis-protocol's
# decoder, sentinel reply parsers, sentinel event messages, URL and options, and the doctor's
# walker of TLS certificates (DER) for their expiry. Seeds are committed in
# fuzz/corpus/<target>; builds, working corpora and logs stay in fuzz/target (cargo-fuzz's own
# flags, so not the shared CARGO_TARGET_DIR), crash inputs in fuzz/artifacts.
#   make fuzz                    every target FUZZ_SECONDS (60) each
#   make fuzz FUZZ_TIME=3600     an hour of fuzzing in all, split evenly between the targets
#                                (half that on the clock: FUZZ_JOBS, 2, targets run at once)
#   make fuzz FUZZ_TARGETS=config_url FUZZ_SECONDS=600
# `make test` runs each target FUZZ_TEST_SECONDS (20) through test-fuzz.
FUZZ_TARGETS ?= resp_frames resp_differential sentinel_replies sentinel_events config_url tls_not_after proxy_requests
FUZZ_SECONDS ?= 60
FUZZ_TEST_SECONDS ?= 20
FUZZ_TOOLCHAIN ?= nightly
export FUZZ_TOOLCHAIN

ifdef FUZZ_TIME
FUZZ_EACH = $(shell echo $$(( $(FUZZ_TIME) / $(words $(FUZZ_TARGETS)) )))
else
FUZZ_EACH = $(FUZZ_SECONDS)
endif

TEST_TARGETS += test-fuzz

.PHONY: deps-fuzz fuzz test-fuzz

# Idempotent: the nightly toolchain and cargo-fuzz, each installed only when missing.
deps-fuzz:
	@rustup toolchain list | grep -q '^$(FUZZ_TOOLCHAIN)' \
	  || rustup toolchain install $(FUZZ_TOOLCHAIN) --profile minimal
	@cargo fuzz --version >/dev/null 2>&1 || cargo install cargo-fuzz --locked

fuzz: deps-fuzz
	fuzz/run.sh $(FUZZ_EACH) $(FUZZ_TARGETS)

test-fuzz: deps-fuzz
	fuzz/run.sh $(FUZZ_TEST_SECONDS) $(FUZZ_TARGETS)
