//! # deadbolt
//!
//! Redisson-style distributed synchronisation primitives kept in Redis, for
//! async Rust: a reentrant [`Lock`], a strict-FIFO [`FairLock`], a read-write
//! [`RwLock`], a leased [`Semaphore`] and a [`CountDownLatch`], a
//! [`MultiLock`] over many locks and [`Redlock`] over independent servers.
//!
//! Every wait really waits on a Pub/Sub channel (no polling), every hold has a
//! lease renewed by a watchdog or fixed, every exclusive hold carries a
//! fencing token, and every uncertain outcome says so
//! ([`Error::Indeterminate`]).
//!
//! ```no_run
//! use deadbolt::prelude::*; // the acquire calls (`Acquire`)
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

use std::time::Duration;

/// The resource side of fencing for a value kept apart from the lock
/// ([`fence::Fenced`]).
pub use deadbolt_core::fence;
/// Guarded writes: data in Redis written only while the hold that guards
/// it is live (`guard.guarded()`; see the module).
pub use deadbolt_core::guarded;
/// Watching a primitive: a stream of its holder changes (`lock.watch()`;
/// see the module).
pub use deadbolt_core::watch;
pub use deadbolt_core::{
    hash_slot, holder_name, Cause, Config, Error, LeaseMode, LeaseState, LockInfo, QueuedWaiter,
    Result, WaitMode, MAX_LEASE_MS,
};
pub use deadbolt_core::{Exclusive, ExclusiveGuard, HoldGuard};
pub use deadbolt_election::{Election, Leader, Leadership};
pub use deadbolt_fair::{FairLock, FairLockGuard};
pub use deadbolt_lock::{Lock, LockGuard};
pub use deadbolt_multilock::{MultiGuard, MultiLock, Redlock, RedlockGuard};
pub use deadbolt_rwlock::{
    ForceUnlocked, ReadGuard, ReadLock, ReaderInfo, RwInfo, RwLock, WriteGuard, WriteLock,
};
pub use deadbolt_semaphore::{
    CountDownLatch, HolderInfo, PermitRequest, Permits, Semaphore, SemaphoreInfo, WaiterInfo,
};

/// What a primitive of your own builds on: an acquire description, the
/// [`Acquire`] trait that gives it the five acquire calls, holds, keys,
/// scripts and wake-up policies (see docs/architecture.md, "How to add a
/// primitive", and `examples/simple_lock`). The rest of the engine stays
/// inside.
pub use deadbolt_core::primitive;
pub use deadbolt_core::{Acquire, Lockable};

/// What most users import: the [`Acquire`] trait, whose methods are the
/// five acquire calls of every lock (`lock`, `try_lock`, `try_lock_for`,
/// `lock_with_lease`, `try_lock_with`), and [`HoldGuard`], what every
/// guard tells of its lease (`state`, `valid_for`, `lost`, `run`).
///
/// ```
/// use deadbolt::prelude::*;
/// ```
pub mod prelude {
    pub use crate::{Acquire, HoldGuard};
}

#[cfg(feature = "tls")]
pub use deadbolt_core::ensure_crypto_provider;
/// The redis-rs crate deadbolt is built on, for [`Client::from_redis`]
/// (TLS with a private CA, ACL users, other connection settings).
pub use redis;

/// A connection to Redis from which every deadbolt primitive is made.
///
/// Cheap to clone (an `Arc` inside); clones share the connections, the
/// watchdog and the background releaser. Make one per process (or per
/// Redis server) and hand out clones.
///
/// ```no_run
/// # async fn f() -> deadbolt::Result<()> {
/// use deadbolt::prelude::*;
/// use std::time::Duration;
/// let client = deadbolt::Client::builder("redis://127.0.0.1/")
///     .namespace("billing")
///     .watchdog_timeout(Duration::from_secs(10))
///     .build()
///     .await?;
/// let guard = client.lock("invoice:7").lock().await?;
/// guard.unlock().await?;
/// client.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    core: deadbolt_core::Client,
}

/// Builds a [`Client`] with non-default settings: core's builder
/// ([`deadbolt_core::ClientBuilder`], where each setting is documented;
/// [`Config`] documents the defaults), made by [`Client::builder`],
/// [`Client::from_redis`], [`Client::cluster`] or [`Client::sentinel`].
///
/// Its settings: [`namespace`](deadbolt_core::ClientBuilder::namespace),
/// [`client_name`](deadbolt_core::ClientBuilder::client_name),
/// [`watchdog_timeout`](deadbolt_core::ClientBuilder::watchdog_timeout),
/// [`command_timeout`](deadbolt_core::ClientBuilder::command_timeout),
/// [`waiter_timeout`](deadbolt_core::ClientBuilder::waiter_timeout),
/// [`release_timeout`](deadbolt_core::ClientBuilder::release_timeout),
/// [`local_handoffs`](deadbolt_core::ClientBuilder::local_handoffs),
/// [`sync_replicas`](deadbolt_core::ClientBuilder::sync_replicas),
/// [`preload`](deadbolt_core::ClientBuilder::preload),
/// [`sentinel_master_settings`](deadbolt_core::ClientBuilder::sentinel_master_settings);
/// then [`build`](deadbolt_core::ClientBuilder::build).
pub type ClientBuilder = deadbolt_core::ClientBuilder<Client>;

impl Client {
    /// Connect with default settings (namespace `deadbolt`, watchdog 30 s,
    /// command timeout 1 s, waiter timeout 5 s).
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
        Client::builder(url).build().await
    }

    /// A builder for non-default settings.
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder::new(url).preload(&primitive_scripts())
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
        ClientBuilder::from_redis(client).preload(&primitive_scripts())
    }

    /// A builder for a Redis Cluster reached through `seeds` (URLs of some
    /// of its nodes). Every primitive works there: its keys and channel
    /// share one hash slot, and unlock messages go by sharded Pub/Sub.
    /// See `docs/topologies.md`.
    ///
    /// ```no_run
    /// # async fn f() -> deadbolt::Result<()> {
    /// let client = deadbolt::Client::cluster(&["redis://10.0.0.1:7000/", "redis://10.0.0.2:7000/"])
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn cluster<S: AsRef<str>>(seeds: &[S]) -> ClientBuilder {
        ClientBuilder::cluster(seeds).preload(&primitive_scripts())
    }

    /// A builder for the master that the sentinels at `sentinels` monitor
    /// as `master`; after a failover the client reconnects to the new
    /// master. See `docs/topologies.md`.
    ///
    /// ```no_run
    /// # async fn f() -> deadbolt::Result<()> {
    /// let client = deadbolt::Client::sentinel(&["redis://10.0.0.1:26379/"], "mymaster")
    ///     .sentinel_master_settings("redis://:secret@master/0")
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn sentinel<S: AsRef<str>>(sentinels: &[S], master: &str) -> ClientBuilder {
        ClientBuilder::sentinel(sentinels, master).preload(&primitive_scripts())
    }

    /// A new handle (a new owner) on the reentrant lock `name`.
    pub fn lock(&self, name: &str) -> Lock {
        Lock::new(&self.core, name)
    }

    /// A new handle (a new owner) on the strict-FIFO lock `name`.
    pub fn fair_lock(&self, name: &str) -> FairLock {
        FairLock::new(&self.core, name)
    }

    /// A handle on the election `name` (leader election: see
    /// [`Election`]).
    pub fn election(&self, name: &str) -> Election {
        Election::new(&self.core, name)
    }

    /// A new handle (a new owner) on the read-write lock `name`.
    pub fn rw_lock(&self, name: &str) -> RwLock {
        RwLock::new(&self.core, name)
    }

    /// A new handle on the semaphore `name` (leased permits).
    pub fn semaphore(&self, name: &str) -> Semaphore {
        Semaphore::new(&self.core, name)
    }

    /// A multi-lock over the plain `Lock`s `names` (all of them or none);
    /// [`MultiLock::new`] mixes kinds and clients.
    pub fn multi_lock(&self, names: &[&str]) -> MultiLock {
        MultiLock::of_locks(&self.core, names)
    }

    /// A new handle on the count-down latch `name`.
    pub fn count_down_latch(&self, name: &str) -> CountDownLatch {
        CountDownLatch::new(&self.core, name)
    }

    /// Release what this client holds, leave every queue and close; see
    /// [`deadbolt_core::Client::shutdown`] for the steps and the bound
    /// (3 × `command_timeout` + 1 s).
    ///
    /// # Cancel safety
    /// If dropped, new calls still fail with `Shutdown`; holds not yet
    /// released end with their leases.
    pub async fn shutdown(&self) {
        self.core.shutdown().await;
    }

    /// True once [`shutdown`](Client::shutdown) was called.
    pub fn is_shutdown(&self) -> bool {
        self.core.is_shutdown()
    }

    /// This client's id, `<encoded client name>@<random id>` (16 hex digits): the
    /// first half of the owner id of every handle made from it.
    pub fn id(&self) -> &str {
        self.core.id()
    }

    /// This client's name (`ClientBuilder::client_name`, default
    /// `<hostname>:<pid>`): carried by every hold, queue entry, reader and
    /// permit it takes, and shown by `deadbolt inspect`.
    pub fn name(&self) -> &str {
        self.core.name()
    }

    /// The settings in force.
    pub fn config(&self) -> &Config {
        self.core.config()
    }

    /// Releases handed to the background releaser (dropped guards, cancelled
    /// acquires) and not finished yet.
    pub fn pending_releases(&self) -> usize {
        self.core.pending_releases()
    }

    /// Wait until the background releaser has nothing left, or `timeout`;
    /// returns whether it is idle.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    pub async fn releases_settled(&self, timeout: Duration) -> bool {
        self.core.releases_settled(timeout).await
    }

    /// The core client, for primitives built on [`deadbolt::primitive`](crate::primitive).
    pub fn as_core(&self) -> &deadbolt_core::Client {
        &self.core
    }
}

/// The facade's client is a core client for every API that takes
/// `AsRef<deadbolt_core::Client>`: `Redlock::new(&[c1, c2, c3], "jobs")`
/// over `deadbolt::Client`s, as docs/multilock.md shows.
///
/// ```no_run
/// # async fn f() -> deadbolt::Result<()> {
/// use deadbolt::prelude::*;
/// let mut clients = Vec::new();
/// for port in [7001, 7002, 7003] {
///     clients.push(deadbolt::Client::connect(&format!("redis://127.0.0.1:{port}/")).await?);
/// }
/// let r = deadbolt::Redlock::new(&clients, "jobs")?;
/// let g = r.lock().await?;
/// g.unlock().await?;
/// # Ok(()) }
/// ```
impl AsRef<deadbolt_core::Client> for Client {
    fn as_ref(&self) -> &deadbolt_core::Client {
        &self.core
    }
}

/// Every primitive of the facade with its scripts: the one list the facade
/// keeps (each crate it re-exports is here once). Every script is loaded
/// when a client connects; the test `every_script_in_lua_is_preloaded`
/// fails when a script of a crate's `lua/` is not.
const PRIMITIVES: &[(&str, &[&deadbolt_core::scripts::LuaScript])] = &[
    ("lock", deadbolt_lock::SCRIPTS),
    ("fair", deadbolt_fair::SCRIPTS),
    ("rwlock", deadbolt_rwlock::SCRIPTS),
    ("semaphore", deadbolt_semaphore::SCRIPTS),
    ("multilock", deadbolt_multilock::SCRIPTS),
    ("election", deadbolt_election::SCRIPTS),
];

/// Every primitive's scripts, loaded at connect.
fn primitive_scripts() -> Vec<&'static deadbolt_core::scripts::LuaScript> {
    PRIMITIVES
        .iter()
        .flat_map(|(_, s)| s.iter().copied())
        .collect()
}

impl From<deadbolt_core::Client> for Client {
    fn from(core: deadbolt_core::Client) -> Self {
        Client { core }
    }
}

#[cfg(test)]
mod tests {
    /// Every script file of every crate's `lua/` folder (all but the
    /// libraries, `*_lib.lua`, which are joined before scripts, the bench's
    /// comparison scripts, which are not deadbolt's, and those of the
    /// example primitive in `examples/`, a crate of its own in spirit) is
    /// preloaded by the facade or by core: a primitive whose scripts the
    /// facade forgot fails here.
    #[test]
    fn every_script_in_lua_is_preloaded() {
        let crates = concat!(env!("CARGO_MANIFEST_DIR"), "/crates");
        fn text_under(dir: &std::path::Path, out: &mut String) {
            for e in std::fs::read_dir(dir).expect("a folder") {
                let path = e.unwrap().path();
                if path.is_dir() {
                    text_under(&path, out);
                } else if let Ok(t) = std::fs::read_to_string(&path) {
                    out.push_str(&t);
                }
            }
        }
        let mut examples = String::new();
        text_under(
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/examples")),
            &mut examples,
        );
        let mut loaded: Vec<&str> = super::primitive_scripts()
            .iter()
            .chain(deadbolt_core::scripts::ALL)
            .map(|s| s.name())
            .collect();
        loaded.sort_unstable();
        let mut missing = Vec::new();
        let mut seen = 0;
        for c in std::fs::read_dir(crates).expect("crates/") {
            let c = c.unwrap().path();
            let dir = c.join("lua");
            if c.ends_with("bench") || !dir.is_dir() {
                continue;
            }
            for e in std::fs::read_dir(&dir).expect("a crate's lua/") {
                let name = e.unwrap().file_name().into_string().unwrap();
                let Some(stem) = name.strip_suffix(".lua") else {
                    continue;
                };
                seen += 1;
                let example = examples.contains(&format!("\"{stem}\""));
                if !stem.ends_with("_lib") && !example && loaded.binary_search(&stem).is_err() {
                    missing.push(stem.to_string());
                }
            }
        }
        assert!(seen >= loaded.len(), "only {seen} Lua files found");
        assert!(missing.is_empty(), "scripts never preloaded: {missing:?}");
    }
}
