#!/usr/bin/env bash
# Stands in for cargo when scripts/dist/common.sh runs `cargo-zigbuild zigbuild`: prints, as
# shell exports, the environment cargo-zigbuild prepared for cargo (its zig wrappers), and builds
# nothing.
env | grep -E '^(CC|CXX|AR|RANLIB)_x86_64_unknown_linux_gnu=|^CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=|^CARGO_ZIGBUILD_[A-Za-z0-9_]*=|^BINDGEN_EXTRA_CLANG_ARGS_x86_64_unknown_linux_gnu=' \
  | while IFS='=' read -r name value; do printf 'export %s=%q\n' "$name" "$value"; done
