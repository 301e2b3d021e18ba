//! # deadbolt
//!
//! Redisson-style distributed synchronisation primitives kept in Redis, for
//! async Rust: a reentrant [`Lock`], a strict-FIFO [`FairLock`] (and, as they land, a
//! read-write lock, a semaphore, a latch, a multi-lock and Redlock).
//!
//! Every wait really waits on a Pub/Sub channel (no polling), every hold has a
//! lease renewed by a watchdog or fixed, every exclusive hold carries a
//! fencing token, and every uncertain outcome says so
//! ([`Error::Indeterminate`]).
//!
//! ```no_run
//! # async fn write_with_fence(_t: u64) -> deadbolt::Result<()> { Ok(()) }
//! # async fn f() -> deadbolt::Result<()> {
//! let client = deadbolt::Client::connect("redis://127.0.0.1/").await?;
//! let lock = client.lock("orders:42");
//! let guard = lock.lock().await?;              // waits, watchdog lease
//! write_with_fence(guard.fencing_token()).await?;
//! guard.unlock().await?;
//! # Ok(()) }
//! ```
//!
//! Ownership is per handle, never per thread: clones of a [`Lock`] handle are
//! the same owner and may re-enter; tasks that must exclude each other each
//! call `client.lock(name)`. See `docs/safety.md` for what a Redis lock can
//! and cannot promise.
//!
//! # TLS
//! Managed Redis services speak TLS: turn on the `tls` feature
//! (`deadbolt = { version = "0.1", features = ["tls"] }`) and connect to a
//! `rediss://` URL, verified against the system's trust store. For a private
//! CA or a client certificate, build the redis-rs client yourself and hand
//! it to [`Client::from_redis`]. Without the feature a `rediss://` URL is
//! refused with [`Error::InvalidArgument`]. See `docs/tls.md`.

use std::ops::Deref;

pub use deadbolt_core::{
    ClientBuilder as CoreClientBuilder, Config, Error, LeaseMode, LeaseState, Result, MAX_LEASE_MS,
};
pub use deadbolt_core::{Exclusive, ExclusiveGuard};
pub use deadbolt_fair::{FairLock, FairLockGuard};
pub use deadbolt_lock::{Lock, LockGuard};

/// The core crate, for building primitives of your own.
pub use deadbolt_core as core;

#[cfg(feature = "tls")]
pub use deadbolt_core::ensure_crypto_provider;

/// A connection to Redis from which every deadbolt primitive is made.
///
/// Cheap to clone; clones share connections, the watchdog and the releaser.
/// Dereferences to [`deadbolt_core::Client`] for `shutdown` and settings.
#[derive(Debug, Clone)]
pub struct Client {
    core: deadbolt_core::Client,
}

/// Builds a [`Client`] with non-default settings.
#[derive(Debug)]
pub struct ClientBuilder {
    core: deadbolt_core::ClientBuilder,
}

impl ClientBuilder {
    /// Prefix of every key and channel (default `deadbolt`); no braces.
    pub fn namespace(self, ns: impl Into<String>) -> Self {
        ClientBuilder {
            core: self.core.namespace(ns),
        }
    }

    /// Lease of watchdog-renewed holds (default 30 s).
    pub fn watchdog_timeout(self, d: std::time::Duration) -> Self {
        ClientBuilder {
            core: self.core.watchdog_timeout(d),
        }
    }

    /// Bound on one command's round trip (default 1 s).
    pub fn command_timeout(self, d: std::time::Duration) -> Self {
        ClientBuilder {
            core: self.core.command_timeout(d),
        }
    }

    /// How long a silent fair-lock waiter keeps its place (default 5 s).
    pub fn waiter_timeout(self, d: std::time::Duration) -> Self {
        ClientBuilder {
            core: self.core.waiter_timeout(d),
        }
    }

    /// Connect.
    ///
    /// # Errors
    /// `InvalidArgument` for bad settings, `Unavailable` when Redis cannot be reached.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing but script bodies is written.
    pub async fn build(self) -> Result<Client> {
        Ok(Client {
            core: self.core.build().await?,
        })
    }
}

impl Client {
    /// Connect with default settings (namespace `deadbolt`, watchdog 30 s,
    /// command timeout 1 s).
    ///
    /// `rediss://` (TLS) needs the `tls` feature.
    ///
    /// # Errors
    /// `InvalidArgument` for a bad URL, or `rediss://` without the `tls`
    /// feature; `Unavailable` when Redis cannot be reached or the TLS
    /// handshake fails.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing but script bodies is written.
    pub async fn connect(url: &str) -> Result<Client> {
        Ok(Client {
            core: deadbolt_core::Client::connect(url).await?,
        })
    }

    /// A builder for non-default settings.
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder {
            core: deadbolt_core::Client::builder(url),
        }
    }

    /// A builder over a redis-rs client configured by the caller (TLS, ACL).
    ///
    /// With the `tls` feature, this is how to trust a private CA or present a
    /// client certificate:
    ///
    /// ```no_run
    /// # #[cfg(feature = "tls")]
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let certs = redis::TlsCertificates {
    ///     root_cert: Some(std::fs::read("ca.pem")?),
    ///     client_tls: None, // or Some(redis::ClientTlsConfig { client_cert, client_key })
    /// };
    /// let redis = redis::Client::build_with_tls("rediss://redis.internal:6380/", certs)?;
    /// let client = deadbolt::Client::from_redis(redis).build().await?;
    /// # Ok(()) }
    /// ```
    pub fn from_redis(client: redis::Client) -> ClientBuilder {
        ClientBuilder {
            core: deadbolt_core::Client::from_redis(client),
        }
    }

    /// A new handle (a new owner) on the reentrant lock `name`.
    pub fn lock(&self, name: &str) -> Lock {
        Lock::new(&self.core, name)
    }

    /// A new handle (a new owner) on the strict-FIFO lock `name`.
    pub fn fair_lock(&self, name: &str) -> FairLock {
        FairLock::new(&self.core, name)
    }

    /// The core client.
    pub fn core(&self) -> &deadbolt_core::Client {
        &self.core
    }
}

impl Deref for Client {
    type Target = deadbolt_core::Client;
    fn deref(&self) -> &Self::Target {
        &self.core
    }
}

impl From<deadbolt_core::Client> for Client {
    fn from(core: deadbolt_core::Client) -> Self {
        Client { core }
    }
}
