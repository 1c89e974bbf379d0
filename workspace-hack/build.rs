// Cargo resolves a crate's build-dependencies (the host side of the unification) only when the
// crate has a build script.
fn main() {}
