//! TLS (`rediss://`): whether this build has it, and the rustls crypto
//! provider it needs.
//!
//! TLS sits behind the `tls` feature. Without it a TLS target is refused with
//! [`Error::InvalidArgument`] before anything is sent — decided by this
//! crate's feature, not by whether redis-rs happens to have TLS compiled in
//! through another crate, so the answer does not depend on feature
//! unification. With it, redis-rs connects through rustls, which needs a
//! process-wide crypto provider: `ensure_crypto_provider` installs ring's
//! when none is installed, before the first TLS connection, so a missing
//! provider can never panic inside redis-rs.

use redis::ConnectionAddr;

use crate::error::{Error, Result};

/// Whether this build connects over TLS (the `tls` feature).
const ENABLED: bool = cfg!(feature = "tls");

/// Whether `url` asks for TLS: `rediss://` or `valkeys://` (case-insensitive,
/// as redis-rs reads schemes).
pub(crate) fn is_tls_url(url: &str) -> bool {
    url.split_once("://").is_some_and(|(scheme, _)| {
        scheme.eq_ignore_ascii_case("rediss") || scheme.eq_ignore_ascii_case("valkeys")
    })
}

/// Refuse a TLS target in a build without TLS. `enabled` is a parameter so
/// that both answers are unit-tested whatever features the test build has.
fn check(tls_target: bool, enabled: bool) -> Result<()> {
    if tls_target && !enabled {
        return Err(Error::InvalidArgument(
            "rediss:// needs TLS support: enable the `tls` feature of deadbolt \
             (or deadbolt-core), which is off in this build"
                .into(),
        ));
    }
    Ok(())
}

/// Check a URL before redis-rs parses it (whose own message for a build
/// without TLS says nothing of deadbolt's feature).
pub(crate) fn check_url(url: &str) -> Result<()> {
    check(is_tls_url(url), ENABLED)
}

/// Get ready to connect to `addr`: refuse TLS in a build without it, and
/// make sure rustls has a crypto provider when the target is TLS.
pub(crate) fn prepare(addr: &ConnectionAddr) -> Result<()> {
    let tls_target = matches!(addr, ConnectionAddr::TcpTls { .. });
    check(tls_target, ENABLED)?;
    #[cfg(feature = "tls")]
    if tls_target {
        ensure_crypto_provider();
    }
    Ok(())
}

/// Make sure rustls has a process-wide default crypto provider: install
/// ring's unless one is installed already.
///
/// redis-rs builds its rustls configuration from the process default, and
/// rustls panics when there is none it can pick on its own (no provider
/// feature, or both ring and aws-lc-rs compiled in). deadbolt calls this
/// before its first TLS connection; call it yourself before opening TLS
/// connections with redis-rs directly, as the `deadbolt` command does. If
/// your application prefers another provider (aws-lc-rs, a FIPS build),
/// install it before the first connection: this function then leaves it in
/// place. Idempotent and cheap after the first call.
///
/// # Examples
/// ```
/// deadbolt_core::ensure_crypto_provider();
/// assert!(rustls::crypto::CryptoProvider::get_default().is_some());
/// ```
#[cfg(feature = "tls")]
pub fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // An `Err` means another thread installed one first: that one stands.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_schemes() {
        assert!(is_tls_url("rediss://cache.example:6380/0"));
        assert!(is_tls_url("REDISS://h/"));
        assert!(is_tls_url("valkeys://h/"));
        assert!(!is_tls_url("redis://h/"));
        assert!(!is_tls_url("redis+unix:///tmp/redis.sock"));
        assert!(!is_tls_url("not a url"));
    }

    /// Runs in every build: the refusal a build without the feature gives.
    #[test]
    fn without_the_feature_tls_is_refused_with_a_hint() {
        let err = check(true, false).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
        assert!(err.to_string().contains("`tls` feature"), "{err}");
        assert!(check(false, false).is_ok());
        assert!(check(true, true).is_ok());
    }

    /// The same through the public entry point, in a build without the
    /// feature (`cargo test -p deadbolt-core`; a workspace build has it on
    /// through the CLI). Refused before any connection is tried.
    #[cfg(not(feature = "tls"))]
    #[tokio::test]
    async fn rediss_url_is_refused_without_the_feature() {
        let err = crate::Client::connect("rediss://127.0.0.1:1/")
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
        assert!(err.to_string().contains("`tls` feature"), "{err}");
    }

    #[cfg(feature = "tls")]
    #[test]
    fn provider_is_installed_once() {
        ensure_crypto_provider();
        let first = rustls::crypto::CryptoProvider::get_default().unwrap();
        ensure_crypto_provider();
        let again = rustls::crypto::CryptoProvider::get_default().unwrap();
        assert!(std::sync::Arc::ptr_eq(first, again));
    }
}
