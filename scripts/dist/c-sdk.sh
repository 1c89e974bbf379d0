#!/usr/bin/env bash
# Lays out the C SDK (from the stripped libraries scripts/dist/build.sh left in
# target/dist-stage/c) under DEST:
#
#   include/sentinel_recovery.h
#   lib/libsentinel_recovery.so.<version>          SONAME libsentinel_recovery.so.<abi>
#   lib/libsentinel_recovery.so.<abi> -> libsentinel_recovery.so.<version>
#   lib/libsentinel_recovery.so -> libsentinel_recovery.so.<abi>
#   lib/libsentinel_recovery.a
#   lib/pkgconfig/sentinel_recovery.pc, sentinel_recovery_static.pc
#   lib/cmake/SentinelRecovery/SentinelRecoveryConfig.cmake, SentinelRecoveryConfigVersion.cmake
#   share/doc/sentinel-recovery/{CHANGELOG.md,examples/failover.c}
#
#   c-sdk.sh DEST PC_PREFIX
# PC_PREFIX is the prefix= of the .pc files: '${pcfiledir}/../..' for the relocatable tarball,
# the install prefix for `make install`. The CMake files are always relative to themselves.
source "$(dirname "$0")/common.sh"
dest=$1 pc_prefix=$2
ffi=$root/ffi-c
in=$stage/c
[ -f "$in/libsentinel_recovery.so.$version" ] && [ -f "$in/libsentinel_recovery.a" ] \
  || die "no C library in $in: run make dist first"

install -d "$dest/include" "$dest/lib/pkgconfig" "$dest/lib/cmake/SentinelRecovery" \
  "$dest/share/doc/sentinel-recovery/examples"
install -m 644 "$ffi/include/sentinel_recovery.h" "$dest/include/"
install -m 755 "$in/libsentinel_recovery.so.$version" "$dest/lib/"
ln -sfn "libsentinel_recovery.so.$version" "$dest/lib/$soname"
ln -sfn "$soname" "$dest/lib/libsentinel_recovery.so"
install -m 644 "$in/libsentinel_recovery.a" "$dest/lib/"

fill() {
  sed -e "s|@PREFIX@|$pc_prefix|g" -e 's|@LIBDIR@|${prefix}/lib|g' -e 's|@INCLUDEDIR@|${prefix}/include|g' \
      -e "s|@VERSION@|$version|g" -e "s|@SONAME@|$soname|g" -e "s|@ABI@|$abi|g" \
      -e "s|@MAJOR@|$major|g" -e "s|@MINOR@|$minor|g" "$1" > "$2"
  chmod 644 "$2"
}
fill "$ffi/sentinel_recovery.pc.in" "$dest/lib/pkgconfig/sentinel_recovery.pc"
fill "$ffi/sentinel_recovery_static.pc.in" "$dest/lib/pkgconfig/sentinel_recovery_static.pc"
fill "$ffi/cmake/SentinelRecoveryConfig.cmake.in" "$dest/lib/cmake/SentinelRecovery/SentinelRecoveryConfig.cmake"
fill "$ffi/cmake/SentinelRecoveryConfigVersion.cmake.in" "$dest/lib/cmake/SentinelRecovery/SentinelRecoveryConfigVersion.cmake"
install -m 644 "$root/CHANGELOG.md" "$dest/share/doc/sentinel-recovery/"
install -m 644 "$ffi/examples/failover.c" "$dest/share/doc/sentinel-recovery/examples/"
