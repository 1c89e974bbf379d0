#!/usr/bin/env bash
# `make test` (USE_DIST_ARTIFACTS=1): puts what `make dist` built where the suites load it, so
# they test the shipped binaries and no suite builds its own optimized copy of the core.
#   use-in-tree.sh node           the stripped addon and the loader and types napi generated beside
#                                 it (not committed) into bindings-node/
#   use-in-tree.sh python PYTHON  the abi3 wheel, installed into PYTHON's environment
# Paths and names come from common.sh, as for build.sh.
source "$(dirname "$0")/common.sh"

case ${1:-} in
  node)
    for f in "sentinel-recovery.$NPM_PLATFORM.node" native.js native.d.ts; do
      [ -f "$stage/napi/$f" ] || die "$stage/napi/$f missing: run make dist first"
      # Copied beside and renamed over: a node process that has the old addon loaded keeps its
      # file (cp over it in place killed such a process with SIGBUS).
      cp "$stage/napi/$f" "$root/bindings-node/.$f.tmp"
      mv -f "$root/bindings-node/.$f.tmp" "$root/bindings-node/$f"
    done
    ;;
  python)
    python=${2:?usage: use-in-tree.sh python PYTHON}
    wheel=$(dist_wheel)
    "$python" -m pip install -q --force-reinstall --no-deps "$wheel"
    ;;
  *) die "usage: use-in-tree.sh node | python PYTHON" ;;
esac
