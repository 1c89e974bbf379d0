//! uniffi's generator, built against the same uniffi version as the library it reads.
fn main() {
    uniffi::uniffi_bindgen_main()
}
