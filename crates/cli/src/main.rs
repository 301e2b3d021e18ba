//! The `deadbolt` command; everything but argument parsing lives in the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // `inspect` opens plain redis-rs connections too (the key-type check),
    // so rustls's provider is set before any connection, not only in
    // deadbolt-core's connect.
    #[cfg(feature = "tls")]
    deadbolt_core::ensure_crypto_provider();
    let cli = deadbolt_cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("deadbolt: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(deadbolt_cli::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("deadbolt: {e:#}");
            ExitCode::FAILURE
        }
    };
    // Async background tasks (client reconnects) are dropped at once; a
    // blocking task still running gets a bounded wait, not an endless one.
    runtime.shutdown_timeout(std::time::Duration::from_secs(15));
    code
}
