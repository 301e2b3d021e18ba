//! The `deadbolt` binary against `rediss://`: a redis-server listening for TLS
//! with a CA generated at start, trusted through `SSL_CERT_FILE` (read by
//! rustls-native-certs in place of the system's store). Without that trust
//! the command fails with a message, not a panic.
#![cfg(feature = "tls")]

use deadbolt_core::Acquire as _;
use std::process::{Command, Output};
use std::time::Duration;

use deadbolt_testkit::support::{output_trusting, tls_server};

/// Run the binary; `ca` is put in `SSL_CERT_FILE` when given.
fn deadbolt(args: &[&str], ca: Option<&std::path::Path>) -> Output {
    output_trusting(Command::new(env!("CARGO_BIN_EXE_deadbolt")).args(args), ca)
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

/// The server's CA is not trusted: a one-line error and exit code 1, within
/// the connect timeout, and no panic.
#[test]
fn an_untrusted_server_is_an_error_not_a_panic() {
    let server = tls_server();
    let url = server.tls_url();
    let args = &["inspect", "x", "--redis", url.as_str()][..];
    let started = std::time::Instant::now();
    let out = deadbolt(args, None);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    assert!(stderr.contains("certificate"), "{args:?}: {stderr}");
    assert!(started.elapsed() < Duration::from_secs(30), "{args:?}");
}
