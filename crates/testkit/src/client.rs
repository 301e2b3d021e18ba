//! deadbolt clients for tests, made one way: a builder for the server's URL
//! with the test's settings applied, connected, or the test fails there.

use deadbolt_core::{Client, ClientBuilder};

/// A connected client of `url` with the defaults.
///
/// # Panics
/// When the client cannot connect: the test fails at its set-up.
///
/// # Cancel safety
/// Cancel safe: a client dropped half-made leaves nothing behind.
pub async fn client(url: &str) -> Client {
    client_with(url, |b| b).await
}

/// A connected client of `url`, its builder changed by `settings` first
/// (timeouts, scripts to preload, a client name).
///
/// # Panics
/// When the client cannot connect.
///
/// # Cancel safety
/// Cancel safe, as [`client`].
pub async fn client_with(
    url: &str,
    settings: impl FnOnce(ClientBuilder) -> ClientBuilder,
) -> Client {
    settings(Client::builder(url))
        .build()
        .await
        .expect("connect a test client")
}
