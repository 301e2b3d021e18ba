//! What every test file of deadbolt-bench uses: the hang bound, parsed
//! bench flags, and temporary file paths.
#![allow(dead_code, reason = "each test file uses its own part of it")]

use std::path::PathBuf;
use std::time::Duration;

use deadbolt_bench::{BenchArgs, BenchCli};

/// Catches hangs, not speed.
pub(crate) const HANG: Duration = Duration::from_secs(60);

/// `args` parsed as `deadbolt-bench --quiet ARGS`.
pub(crate) fn bench_args(args: &[&str]) -> BenchArgs {
    let all = ["deadbolt-bench", "--quiet"];
    match BenchCli::try_parse_from(all.iter().chain(args)) {
        Ok(BenchCli { args: b }) => b,
        other => panic!("expected bench arguments, got {other:?}"),
    }
}

/// A fresh path in the temporary folder, ending in `name`.
pub(crate) fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "deadbolt-bench-test-{}-{}-{name}",
        std::process::id(),
        rand::random::<u32>()
    ))
}
