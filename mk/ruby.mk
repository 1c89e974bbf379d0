# Ruby binding (bindings-uniffi/): uniffi-bindgen's Ruby (ruby-ffi) plus a small Client, packed
# with `gem build`, installed into the target dir, its minitest suite run against real topologies.
.PHONY: test-ruby build-ruby

TEST_TARGETS += test-ruby

build-ruby: deps
	bindings-uniffi/scripts/ruby.sh build

test-ruby: deps
	bindings-uniffi/scripts/ruby.sh test
