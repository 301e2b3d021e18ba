//! Builds `clockjump/clockjump.c` into a shared object that a redis-server
//! can be started with (`LD_PRELOAD`) so that its wall clock can be made
//! to jump (scenario 2). Its path reaches the crate as `CLOCKJUMP_SO`.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=clockjump/clockjump.c");
    println!("cargo:rerun-if-env-changed=CC");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let so = out.join("libclockjump.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&so)
        .arg("clockjump/clockjump.c")
        .status()
        .unwrap_or_else(|e| panic!("could not run the C compiler `{cc}` for clockjump: {e}"));
    assert!(
        status.success(),
        "`{cc}` failed to build clockjump/clockjump.c"
    );
    println!("cargo:rustc-env=CLOCKJUMP_SO={}", so.display());
}
