# JVM binding (bindings-uniffi/, Kotlin usable from Java): uniffi-bindgen's Kotlin plus the
# idiomatic layer compiled with the npm kotlin-compiler, JNA from Debian, a jar carrying the native
# library; the Kotlin suite and a plain-Java test against real topologies.
.PHONY: test-jvm build-jvm

TEST_TARGETS += test-jvm

build-jvm: deps
	bindings-uniffi/scripts/jvm.sh build

test-jvm: deps
	bindings-uniffi/scripts/jvm.sh test
