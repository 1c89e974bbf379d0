#!/usr/bin/env bash
# `make install PREFIX=/usr/local [DESTDIR=]`: installs what `make dist` built, in the C SDK's
# layout, under $DESTDIR$PREFIX:
#   bin/sentinel-recovery                 the CLI
#   include/sentinel_recovery.h
#   lib/libsentinel_recovery.so.<version>, .so.<abi> and .so symlinks, lib/libsentinel_recovery.a
#   lib/pkgconfig/sentinel_recovery{,_static}.pc      (prefix=$PREFIX)
#   lib/cmake/SentinelRecovery/SentinelRecovery{Config,ConfigVersion}.cmake
#   share/doc/sentinel-recovery/
# Runs ldconfig (as root, without DESTDIR) so a prefix the loader searches finds the new library.
source "$(dirname "$0")/common.sh"
prefix=${PREFIX:-/usr/local}
destdir=${DESTDIR:-}
case $prefix in /*) ;; *) die "PREFIX must be an absolute path (got '$prefix')" ;; esac
dest=$destdir$prefix
cli=$stage/cli/sentinel-recovery-cli-$version-$PLATFORM/bin/sentinel-recovery
[ -x "$cli" ] || die "no CLI in $stage: run make dist first"
"$dist_scripts/c-sdk.sh" "$dest" "$prefix"
install -d "$dest/bin"
install -m 755 "$cli" "$dest/bin/sentinel-recovery"
echo "installed sentinel-recovery $version under $dest"
if [ -z "$destdir" ] && [ "$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null 2>&1; then
  ldconfig || true
fi
