//! The `deadbolt-bench` command; everything but argument parsing lives in the library.

use std::process::ExitCode;

fn main() -> ExitCode {
    // The bench opens plain redis-rs connections too (statistics, the
    // polling peers), so rustls's provider is set before any connection,
    // not only in deadbolt-core's connect.
    #[cfg(feature = "tls")]
    deadbolt_core::ensure_crypto_provider();
    let cli = deadbolt_bench::BenchCli::parse_args();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("deadbolt-bench: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(deadbolt_bench::run(&cli.args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("deadbolt-bench: {e:#}");
            ExitCode::FAILURE
        }
    };
    // Async background tasks (client reconnects to a stopped server) are
    // dropped at once. The wait only matters for a blocking task still
    // starting redis-server when Ctrl-C came: once it finishes, the server
    // handle it returns is dropped, which kills the server instead of
    // orphaning it. Its own readiness bound is about 10 s.
    runtime.shutdown_timeout(std::time::Duration::from_secs(15));
    code
}
