# .NET binding (bindings-dotnet/): C# 7.2 wrapper built with Debian's Mono (mcs), its NUnit 2.6
# suite run by nunit-console on Mono against real topologies, then the .nupkg assembled and loaded
# from its unpacked layout by a consumer program.
.PHONY: deps-dotnet build-dotnet test-dotnet pack-dotnet bench-dotnet bench-dotnet-completions

TEST_TARGETS += test-dotnet

deps-dotnet:
	@bindings-dotnet/scripts/deps.sh

# The suite calls sr_client_panic_for_test, an export of the `test-hooks` feature only; make dist
# packs a library built without it (scripts/dist/build.sh).
build-dotnet: deps-dotnet
	cargo build -p sentinel-recovery-ffi --features test-hooks
	cargo build -p sentinel-recovery-testkit --bins
	bindings-dotnet/scripts/build.sh

pack-dotnet: build-dotnet
	bindings-dotnet/scripts/pack.sh

test-dotnet: build-dotnet
	bindings-dotnet/scripts/test.sh
	bindings-dotnet/scripts/pack.sh
	bindings-dotnet/scripts/consumer-test.sh

# The thread-pool probe of the original incident (not part of `make test`; ~4 minutes).
bench-dotnet: build-dotnet
	bench/dotnet/run.sh

# How fast completions reach awaiting code: sequential latency, 64 in flight, a starved pool
# (bench/dotnet/CompletionBench.cs; about a minute per round; uses the release library if built).
bench-dotnet-completions: build-dotnet
	bench/dotnet/completions.sh
