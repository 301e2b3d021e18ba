//! The `deadbolt-bench` binary against `rediss://`: a redis-server listening for TLS
//! with a CA generated at start, trusted through `SSL_CERT_FILE` (read by
//! rustls-native-certs in place of the system's store). Without that trust
//! the command fails with a message, not a panic.
#![cfg(feature = "tls")]

use std::process::{Command, Output};
use std::time::Duration;

use deadbolt_testkit::support::{output_trusting, tls_server};

/// Run the binary; `ca` is put in `SSL_CERT_FILE` when given.
fn deadbolt_bench(args: &[&str], ca: Option<&std::path::Path>) -> Output {
    output_trusting(
        Command::new(env!("CARGO_BIN_EXE_deadbolt-bench")).args(args),
        ca,
    )
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn bench_over_tls() {
    let server = tls_server();
    let json = std::env::temp_dir().join(format!(
        "deadbolt-bench-tls-{}-{}.json",
        std::process::id(),
        server.tls_port().unwrap()
    ));
    let contenders = if cfg!(feature = "peers") {
        "lock,fair,raw-poll,rslock"
    } else {
        "lock,fair,raw-poll"
    };
    let url = server.tls_url();
    let out = deadbolt_bench(
        &[
            "--quiet",
            "--redis",
            &url,
            "--scenario",
            "uncontended,contended",
            "--contender",
            contenders,
            "--duration",
            "150ms",
            "--tasks",
            "2",
            "--clients",
            "2",
            "--json",
            json.to_str().unwrap(),
        ],
        Some(server.tls_certs().ca_cert_path()),
    );
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).ok();
    assert_eq!(report["redis"]["embedded"], false);
    assert!(report["redis"]["url"]
        .as_str()
        .unwrap()
        .starts_with("rediss://"));
    let runs = report["results"].as_array().unwrap();
    // Uncontended, then contended at --hold and in the service rows.
    assert_eq!(runs.len(), 3 * contenders.split(',').count(), "{runs:?}");
    for r in runs {
        // A server given with --redis: its Redis CPU comes from
        // commandstats.
        assert_eq!(r["commands"]["redis_cpu_source"], "commandstats", "{r}");
        assert!(
            r["commands"]["redis_cpu_us_per_acquisition"]
                .as_f64()
                .unwrap()
                > 0.0
        );
    }
}

/// The server's CA is not trusted: a one-line error and exit code 1, within
/// the connect timeout, and no panic.
#[test]
fn an_untrusted_server_is_an_error_not_a_panic() {
    let server = tls_server();
    let url = server.tls_url();
    let args = &[
        "--quiet",
        "--redis",
        url.as_str(),
        "--scenario",
        "uncontended",
        "--contender",
        "lock",
        "--duration",
        "100ms",
    ][..];
    let started = std::time::Instant::now();
    let out = deadbolt_bench(args, None);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    assert!(stderr.contains("certificate"), "{args:?}: {stderr}");
    assert!(started.elapsed() < Duration::from_secs(30), "{args:?}");
}
