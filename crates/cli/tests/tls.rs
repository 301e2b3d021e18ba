//! The `deadbolt` binary against `rediss://`: a redis-server listening for TLS
//! with a CA generated at start, trusted through `SSL_CERT_FILE` (read by
//! rustls-native-certs in place of the system's store). Without that trust
//! the command fails with a message, not a panic.
#![cfg(feature = "tls")]

use std::process::{Command, Output};
use std::time::Duration;

use deadbolt_testkit::RedisServer;

fn tls_server() -> RedisServer {
    RedisServer::builder()
        .tls(true)
        .start()
        .expect("redis-server with TLS (apt-get install -y redis-server)")
}

/// Run the binary; `ca` is put in `SSL_CERT_FILE` when given.
fn deadbolt(args: &[&str], ca: Option<&std::path::Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_deadbolt"));
    cmd.args(args)
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR")
        .env("RUST_BACKTRACE", "0");
    if let Some(ca) = ca {
        cmd.env("SSL_CERT_FILE", ca);
    }
    cmd.output().expect("run deadbolt")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn inspect_over_tls() {
    let server = tls_server();
    let client = deadbolt_core::Client::from_redis(server.tls_client())
        .build()
        .await
        .unwrap();
    let lock = deadbolt_lock::Lock::new(&client, "orders:42");
    let guard = lock.lock().await.unwrap();

    let url = server.tls_url();
    let ca = server.tls_certs().ca_cert_path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        deadbolt(&["inspect", "orders:42", "--redis", &url], Some(&ca))
    })
    .await
    .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("held"), "{stdout}");
    assert!(stdout.contains(lock.owner()), "{stdout}");

    guard.unlock().await.unwrap();
    client.shutdown().await;
}

#[test]
fn bench_over_tls() {
    let server = tls_server();
    let json = std::env::temp_dir().join(format!(
        "deadbolt-cli-tls-{}-{}.json",
        std::process::id(),
        server.tls_port().unwrap()
    ));
    let contenders = if cfg!(feature = "peers") {
        "lock,fair,raw-poll,rslock"
    } else {
        "lock,fair,raw-poll"
    };
    let url = server.tls_url();
    let out = deadbolt(
        &[
            "bench",
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
    assert_eq!(runs.len(), 2 * contenders.split(',').count(), "{runs:?}");
}

/// The server's CA is not trusted: a one-line error and exit code 1, within
/// the connect timeout, and no panic.
#[test]
fn an_untrusted_server_is_an_error_not_a_panic() {
    let server = tls_server();
    let url = server.tls_url();
    for args in [
        &["inspect", "x", "--redis", url.as_str()][..],
        &[
            "bench",
            "--quiet",
            "--redis",
            url.as_str(),
            "--scenario",
            "uncontended",
            "--contender",
            "lock",
            "--duration",
            "100ms",
        ][..],
    ] {
        let started = std::time::Instant::now();
        let out = deadbolt(args, None);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(stderr.contains("certificate"), "{args:?}: {stderr}");
        assert!(started.elapsed() < Duration::from_secs(30), "{args:?}");
    }
}
