//! Link settings of libsentinel_recovery.so (the cdylib; the staticlib is not linked).
//!
//! - Always: the version script `sentinel_recovery.map`, so only `sr_*` symbols are exported.
//! - With `SR_FFI_SONAME=1` (set by `make dist` / `make install`): the SONAME
//!   `libsentinel_recovery.so.<ABI>` (ABI = MAJOR, or 0.MINOR while MAJOR is 0), so programs
//!   linked against the installed library record the ABI they were built for. It is off for
//!   the development builds, whose output directory has no `.so.<ABI>` symlink for a program
//!   linked against them to find at run time.

use std::env;

fn main() {
    let dir = env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let map = format!("{dir}/sentinel_recovery.map");
    println!("cargo:rerun-if-changed=sentinel_recovery.map");
    println!("cargo:rerun-if-env-changed=SR_FFI_SONAME");
    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os != "linux" {
        return;
    }
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={map}");
    if env::var("SR_FFI_SONAME").is_ok_and(|v| v == "1") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{}", soname());
    }
}

/// `libsentinel_recovery.so.1` for 1.x.y, `libsentinel_recovery.so.0.3` for 0.3.y.
fn soname() -> String {
    let major = env::var("CARGO_PKG_VERSION_MAJOR").expect("CARGO_PKG_VERSION_MAJOR");
    let minor = env::var("CARGO_PKG_VERSION_MINOR").expect("CARGO_PKG_VERSION_MINOR");
    if major == "0" {
        format!("libsentinel_recovery.so.0.{minor}")
    } else {
        format!("libsentinel_recovery.so.{major}")
    }
}
