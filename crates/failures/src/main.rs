//! `deadbolt-failures`: see the library.
fn main() {}
