#!/usr/bin/env bash
# Runs the NUnit suite on Mono (Debian's nunit-console 2.6) against real topologies started by
# the testkit's sr-topology. Extra arguments go to nunit-console (e.g. -run=SentinelRecovery.Tests.ClientTests).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
out=$target/dotnet
export SR_TOPOLOGY_BIN=${SR_TOPOLOGY_BIN:-$target/debug/sr-topology}
# The shared cases every binding's suite reads (DeadlineCasesTests.cs, TimeoutCasesTests.cs, ClientTests.cs).
export SR_CASES_FILE=${SR_CASES_FILE:-$root/tests/cases/deadlines.tsv}
export SR_TIMEOUT_CASES_FILE=${SR_TIMEOUT_CASES_FILE:-$root/tests/cases/timeouts.tsv}
export SR_ARGUMENT_CASES_FILE=${SR_ARGUMENT_CASES_FILE:-$root/tests/cases/arguments.tsv}
export SR_DOCTOR_OPTION_CASES_FILE=${SR_DOCTOR_OPTION_CASES_FILE:-$root/tests/cases/doctor_options.tsv}
export LD_LIBRARY_PATH=$out${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# -noshadow: the assembly must load from $out, where libsentinel_recovery.so is.
# -domain=None: no test AppDomain. Unloading one would wait forever for the core threads that
# called into it (Mono tries to abort every thread that ran code of the domain; those sit in
# epoll_wait in Rust and never return to managed code).
cd "$out"
exec timeout 300 nunit-console -nologo -noshadow -domain=None -labels -xml="$out/TestResult.xml" "$@" "$out/SentinelRecovery.Tests.dll"
