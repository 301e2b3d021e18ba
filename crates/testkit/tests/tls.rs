//! `RedisServerBuilder::tls`: a real redis-server with a TLS listener and
//! certificates generated at start. Runs with the `tls` feature, which the
//! workspace's test build turns on (deadbolt's dev-dependencies).
#![cfg(feature = "tls")]

use std::time::Duration;

use deadbolt_testkit::RedisServer;

/// Generous bound that only catches hangs.
const HANG: Duration = Duration::from_secs(30);

async fn ping(client: &redis::Client) -> redis::RedisResult<String> {
    let mut conn = tokio::time::timeout(HANG, client.get_multiplexed_async_connection())
        .await
        .expect("connect hung")?;
    redis::cmd("PING").query_async(&mut conn).await
}

#[tokio::test]
async fn tls_listener_with_generated_certificates() {
    let mut server = RedisServer::builder().tls(true).start().expect("start");
    let tls_port = server.tls_port().expect("a TLS port");
    assert_ne!(tls_port, server.port());
    assert_eq!(server.tls_url(), format!("rediss://127.0.0.1:{tls_port}/"));
    let certs = server.tls_certs();
    assert!(certs
        .ca_cert_pem()
        .starts_with("-----BEGIN CERTIFICATE-----"));
    assert_eq!(
        std::fs::read_to_string(certs.ca_cert_path()).unwrap(),
        certs.ca_cert_pem()
    );
    assert!(certs.ca_cert_path().starts_with(server.dir()));

    assert_eq!(ping(&server.tls_client()).await.unwrap(), "PONG");
    // The plain port stays open for the helpers.
    assert_eq!(ping(&server.client()).await.unwrap(), "PONG");
    // Plain RESP on the TLS port gets no answer it can read.
    let plain_on_tls = redis::Client::open(format!("redis://127.0.0.1:{tls_port}/")).unwrap();
    assert!(ping(&plain_on_tls).await.is_err());

    // Same port and certificates after a restart.
    server.restart().expect("restart");
    assert_eq!(server.tls_port(), Some(tls_port));
    assert_eq!(ping(&server.tls_client()).await.unwrap(), "PONG");
}

#[tokio::test]
async fn client_certificates_can_be_required() {
    let server = RedisServer::builder()
        .tls_auth_clients(true)
        .start()
        .expect("start");
    assert!(server.tls_port().is_some(), "tls_auth_clients implies tls");
    let without = redis::Client::build_with_tls(
        server.tls_url(),
        server.tls_certs().redis_certificates(false),
    )
    .unwrap();
    assert!(ping(&without).await.is_err());
    assert_eq!(ping(&server.tls_client()).await.unwrap(), "PONG");
}

#[test]
fn a_plain_server_has_no_tls_port() {
    let server = RedisServer::start().expect("start");
    assert_eq!(server.tls_port(), None);
}
