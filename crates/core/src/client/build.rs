//! Making a [`Client`]: the builder and its settings, connecting and
//! preloading the scripts; and ending one ([`Client::shutdown`]).

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio_util::task::TaskTracker;

use super::{Client, ClientInner};
use crate::config::Config;
use crate::conn::{resp3_info, run_on, with_resp3, Conn, Target};
use crate::error::{Error, Result};
use crate::heartbeat::Heartbeat;
use crate::hold::release::Releaser;
use crate::hold::renew::Watchdog;
use crate::hold::{HoldInner, LeaseState};
use crate::scripts::{LuaScript, ALL};
use crate::wait::Engine;

/// Builds a [`Client`] with settings other than the defaults.
pub struct ClientBuilder<C = Client> {
    target: Result<Target>,
    config: Config,
    preload: Vec<&'static LuaScript>,
    out: PhantomData<fn() -> C>,
}

impl<C> std::fmt::Debug for ClientBuilder<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("target", &self.target.as_ref().map(Target::describe))
            .field("config", &self.config)
            .finish()
    }
}

impl<C: From<Client>> ClientBuilder<C> {
    /// A builder for the server at `url`: a redis-rs URL
    /// (`redis://[user:pass@]host[:port][/db]`, `rediss://` with the `tls`
    /// feature, `unix:///path`). A bad URL is reported by
    /// [`build`](ClientBuilder::build).
    pub fn new(url: &str) -> Self {
        ClientBuilder::to(open_url(url).map(Target::Single))
    }

    /// A builder over a redis-rs client configured by the caller (TLS with
    /// a private CA, ACL); deadbolt switches it to RESP3.
    pub fn from_redis(client: redis::Client) -> Self {
        ClientBuilder::to(Ok(Target::Single(client)))
    }

    /// A builder for a Redis Cluster reached through `seeds`, URLs of some
    /// of its nodes (one that answers is enough; the rest of the cluster is
    /// discovered). Each primitive keeps its keys and channel in one hash
    /// slot; unlock messages go through sharded Pub/Sub (SPUBLISH and
    /// SSUBSCRIBE, Redis 7), delivered by the node that owns the slot.
    /// See `docs/topologies.md`.
    pub fn cluster<S: AsRef<str>>(seeds: &[S]) -> Self {
        let target = if seeds.is_empty() {
            Err(Error::InvalidArgument("no cluster seed node given".into()))
        } else {
            seeds
                .iter()
                .map(|u| open_url(u.as_ref()).map(|c| c.get_connection_info().clone()))
                .collect::<Result<Vec<_>>>()
                .map(Target::Cluster)
        };
        ClientBuilder::to(target)
    }

    /// A builder for the master that the Sentinel set at `sentinels` (URLs
    /// of sentinels) monitors as `master`. The master is asked of the
    /// sentinels at every connection and reconnection, so after a failover
    /// the client reconnects to the new master. The master is reached
    /// without credentials on database 0 unless
    /// [`sentinel_master_settings`](ClientBuilder::sentinel_master_settings)
    /// says otherwise. See `docs/topologies.md`.
    pub fn sentinel<S: AsRef<str>>(sentinels: &[S], master: &str) -> Self {
        let target = if sentinels.is_empty() {
            Err(Error::InvalidArgument("no sentinel given".into()))
        } else if master.is_empty() {
            Err(Error::InvalidArgument("the master name is empty".into()))
        } else {
            sentinels
                .iter()
                .map(|u| open_url(u.as_ref()))
                .collect::<Result<Vec<_>>>()
                .map(|clients| {
                    let mut node = clients[0].get_connection_info().clone();
                    node = node.set_redis_settings(redis::RedisConnectionInfo::default());
                    Target::Sentinel {
                        sentinels: clients,
                        master: master.to_string(),
                        node,
                    }
                })
        };
        ClientBuilder::to(target)
    }

    /// For a [`sentinel`](ClientBuilder::sentinel) builder: the settings of
    /// the connection to the master, as a URL whose host and port are
    /// ignored (`redis://user:password@master/2` for credentials and database 2;
    /// `rediss://` for TLS). Elsewhere it is an `InvalidArgument`.
    pub fn sentinel_master_settings(mut self, url: &str) -> Self {
        self.target = match (self.target, open_url(url)) {
            (
                Ok(Target::Sentinel {
                    sentinels, master, ..
                }),
                Ok(c),
            ) => Ok(Target::Sentinel {
                sentinels,
                master,
                node: c.get_connection_info().clone(),
            }),
            (Ok(_), Ok(_)) => Err(Error::InvalidArgument(
                "sentinel_master_settings applies to a Sentinel target only".into(),
            )),
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        self
    }

    fn to(target: Result<Target>) -> Self {
        ClientBuilder {
            target,
            config: Config::default(),
            preload: Vec::new(),
            out: PhantomData,
        }
    }

    /// Scripts to load at connect besides core's (a primitive crate's
    /// scripts), so that their first call needs no SCRIPT LOAD.
    pub fn preload(mut self, scripts: &[&'static LuaScript]) -> Self {
        self.preload.extend_from_slice(scripts);
        self
    }

    /// The name of this client (default `<hostname>:<pid>`): every hold,
    /// queue entry, reader and permit it takes carries it in its owner id
    /// (`<name>@<random id>:<handle>`, the name encoded by
    /// [`encode_client_name`](crate::encode_client_name)), at no cost in
    /// round trips, so `deadbolt inspect` and [`LockInfo`](crate::LockInfo)
    /// tell who holds a lock; and its connections to a single server (or a
    /// Sentinel-managed master) send `CLIENT SETNAME` with it, so `CLIENT
    /// LIST` shows it too (best effort: a user the ACL denies `CLIENT
    /// SETNAME` connects all the same). 1 to 64 bytes, no control characters;
    /// [`build`](ClientBuilder::build) refuses others.
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.config.client_name = name.into();
        self
    }

    /// Prefix of every key and channel (default `deadbolt`); no braces.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.config.namespace = namespace.into();
        self
    }

    /// Lease of watchdog-renewed holds (default 30 s), renewed every third.
    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.config.watchdog_timeout = timeout;
        self
    }

    /// Bound on one command's round trip (default 1 s).
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.config.command_timeout = timeout;
        self
    }

    /// How long a queued waiter whose client stopped sending heartbeats
    /// keeps its place in a server-side queue (default 5 s).
    ///
    /// `build` refuses ([`Error::InvalidArgument`]) a timeout under 30 ms
    /// or over [`MAX_LEASE_MS`](crate::MAX_LEASE_MS)` / 3` ms (about 95
    /// years): the queue's keys live three waiter timeouts.
    pub fn waiter_timeout(mut self, timeout: Duration) -> Self {
        self.config.waiter_timeout = timeout;
        self
    }

    /// Bound on the releaser's retries of one release (default: watchdog timeout).
    pub fn release_timeout(mut self, timeout: Duration) -> Self {
        self.config.release_timeout = Some(timeout);
        self
    }

    /// How many local hand-offs in a row an unlock may make while waiters
    /// of other clients wait (default 8; 0 turns local hand-off off).
    ///
    /// Off, a client's waiters on one `Lock` are served in no order among
    /// themselves: a release grants to one registered waiter per client,
    /// and a task that locks again at once after its unlock registers
    /// before its client's other waiters wake. Under saturation (8 waiters
    /// over 4 clients, no work between holds) half the waiters then got
    /// nothing for seconds, where the default serves all of them alike.
    pub fn local_handoffs(mut self, n: u32) -> Self {
        self.config.local_handoffs = n;
        self
    }

    /// Wait for `n` replicas to acknowledge every grant, up to `timeout`
    /// (under `command_timeout`): each successful acquire is followed by
    /// `WAIT n timeout` on the same connection (on a cluster, to the node
    /// that owns the primitive's slot). When fewer replicas acknowledge in
    /// time, the acquire fails with [`Error::Indeterminate`] and its grant
    /// is released in the background: a failover then cannot silently lose
    /// a hold that was reported taken, beyond what the replicas that
    /// acknowledged lose. Off by default.
    ///
    /// A WAIT holds back the commands queued behind it on the shared
    /// connection until it returns: about one replica round trip when the
    /// replicas keep up, `timeout` when they do not. docs/topologies.md has
    /// the measured cost.
    pub fn sync_replicas(mut self, n: u32, timeout: Duration) -> Self {
        self.config.sync_replicas = Some((n, timeout));
        self
    }

    /// Connect, open the subscriber connection and preload every script.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad URL or setting, and for a TLS
    /// target (`rediss://`) in a build without the `tls` feature;
    /// [`Error::Unavailable`] when the server cannot be reached, including a
    /// TLS handshake that fails (a certificate the client does not trust).
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is written to Redis but script bodies (SCRIPT LOAD).
    pub async fn build(self) -> Result<C> {
        self.build_core().await.map(C::from)
    }

    async fn build_core(self) -> Result<Client> {
        let target = prepare(self.target?)?;
        self.config.validate()?;
        let keyspace_db = target.db();
        let timeout = self.config.command_timeout;
        let name = crate::encode_client_name(&self.config.client_name);
        let conn = Conn::connect("command", target.clone(), timeout, None, &name).await?;
        // 64 random bits: unique among live clients, and short enough that
        // owner ids and registrations stay in Redis's compact encodings
        // (values of at most 64 bytes) for names up to about 40 bytes.
        let id = format!("{name}@{:016x}", rand::random::<u64>());
        let engine = Engine::start(target, timeout, &name).await?;
        conn.set_peer(engine.conn());
        let (mut c, epoch) = conn.get()?;
        let sharded = conn.sharded();
        let sources = ALL
            .iter()
            .chain(&self.preload)
            .map(|s| s.source_for(sharded));
        if sharded {
            // One SCRIPT LOAD at a time: redis-rs sends each to every master.
            for src in sources {
                redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(src)
                    .exec_async(&mut c)
                    .await
                    .map_err(|e| conn.sent_error(epoch, e))?;
            }
        } else {
            let mut pipe = redis::pipe();
            for src in sources {
                pipe.cmd("SCRIPT").arg("LOAD").arg(src).ignore();
            }
            pipe.query_async::<()>(&mut c)
                .await
                .map_err(|e| conn.sent_error(epoch, e))?;
        }
        let watchdog = Watchdog::start(conn.clone(), self.config.watchdog_timeout);
        let heartbeat = Heartbeat::start(conn.clone(), id.clone(), self.config.waiter_timeout);
        let inner = Arc::new(ClientInner {
            id,
            heartbeat,
            releaser: Releaser::new(conn.clone()),
            acquiring: TaskTracker::new(),
            holds: Mutex::new(HashMap::new()),
            config: self.config,
            conn,
            engine,
            watchdog,
            next_handle: AtomicU64::new(1),
            shutdown: AtomicBool::new(false),
            keyspace_db,
        });
        let client = Client { inner };
        client.listen_for_force_unlocks();
        Ok(client)
    }
}

/// A client is its own core client: APIs that take `AsRef<Client>` (a
/// composite over several servers' clients, say) accept core clients and
/// wrappers around them alike.
impl AsRef<Client> for Client {
    fn as_ref(&self) -> &Client {
        self
    }
}

impl Client {
    /// Connect with default settings. The URL is a redis-rs URL
    /// (`redis://[user:pass@]host[:port][/db]`); RESP3 is always used.
    /// `rediss://` connects over TLS, verifying the server against the
    /// system's trust store, in a build with the `tls` feature (docs/tls.md);
    /// for a private CA or client certificates use [`Client::from_redis`].
    ///
    /// # Errors
    /// As [`ClientBuilder::build`].
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is written but script bodies.
    pub async fn connect(url: &str) -> Result<Client> {
        Client::builder(url).build().await
    }

    /// A builder for non-default settings.
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder::new(url)
    }

    /// A builder over a redis-rs client you configured yourself (TLS, ACL);
    /// deadbolt switches it to RESP3.
    ///
    /// With the `tls` feature, this is how to trust a private CA or present
    /// a client certificate:
    ///
    /// ```no_run
    /// # #[cfg(feature = "tls")]
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let certs = redis::TlsCertificates {
    ///     root_cert: Some(std::fs::read("ca.pem")?),
    ///     client_tls: None, // or Some(redis::ClientTlsConfig { client_cert, client_key })
    /// };
    /// let redis = redis::Client::build_with_tls("rediss://redis.internal:6380/", certs)?;
    /// let client = deadbolt_core::Client::from_redis(redis).build().await?;
    /// # Ok(()) }
    /// ```
    pub fn from_redis(client: redis::Client) -> ClientBuilder {
        ClientBuilder::from_redis(client)
    }

    /// A builder for a Redis Cluster; see [`ClientBuilder::cluster`].
    pub fn cluster<S: AsRef<str>>(seeds: &[S]) -> ClientBuilder {
        ClientBuilder::cluster(seeds)
    }

    /// A builder for a Sentinel-monitored master; see
    /// [`ClientBuilder::sentinel`].
    pub fn sentinel<S: AsRef<str>>(sentinels: &[S], master: &str) -> ClientBuilder {
        ClientBuilder::sentinel(sentinels, master)
    }

    /// Release what this client holds, leave every queue, and close.
    ///
    /// In order: new calls fail with [`Error::Shutdown`] from now on;
    /// renewals and waiter heartbeats stop; every waiting acquire is woken,
    /// returns `Shutdown` and hands its queue entry (or possible grant) to
    /// the releaser (awaited up to `command_timeout`); every hold still
    /// active is released (up to `command_timeout`) and its guard then
    /// reads [`LeaseState::Released`], or [`LeaseState::Lost`] if the
    /// release could not be confirmed (its lease's TTL frees it); the
    /// releaser finishes what it has (up to `command_timeout` + 1 s); the
    /// connections close. So shutdown returns within
    /// 3 × `command_timeout` + 1 s (3 s + 1 s by default), and afterwards
    /// this client has nothing in Redis but what a fault kept it from
    /// removing, which expires with its lease or `waiter_timeout`.
    ///
    /// # Cancel safety
    /// If dropped, the shutdown still took effect (new calls fail) but the
    /// steps not reached are skipped: holds then end with their leases,
    /// queue entries within `waiter_timeout`.
    pub async fn shutdown(&self) {
        if self.inner.shutdown.swap(true, Ordering::SeqCst) {
            return;
        }
        let inner = &self.inner;
        let step = inner.config.command_timeout;
        inner.watchdog.stop();
        inner.heartbeat.stop();
        inner.engine.wake_all();
        // Running acquires end (woken above, each finds the client closing);
        // bounded, as every step of shutdown.
        inner.acquiring.close();
        let _ = tokio::time::timeout(step, inner.acquiring.wait()).await;
        let holds: Vec<Arc<HoldInner>> = inner
            .holds
            .lock()
            .drain()
            .filter_map(|(_, w)| w.upgrade())
            .filter(|h| *h.state.borrow() == LeaseState::Active)
            .collect();
        let releases = holds.iter().map(|h| async move {
            // The guard stops reading `Active` *before* the release is sent:
            // once the server has it, the lock may pass to someone else at
            // once, while the guard is still in its holder's hands (found by
            // the torture test: a write under an `Active` guard after the
            // hand-off).
            h.finish(LeaseState::Released);
            let done = tokio::time::timeout(step, run_on::<i64>(&inner.conn, &h.spec.release))
                .await
                .ok()
                .and_then(|r| r.ok());
            if done.is_none_or(|n| n <= 0) {
                // Not confirmed: the hold ends with its lease.
                h.state.send_replace(LeaseState::Lost);
            }
        });
        futures::future::join_all(releases).await;
        inner
            .releaser
            .drain(crate::config::after(
                step.saturating_add(Duration::from_secs(1)),
            ))
            .await;
        inner.releaser.close();
        inner.engine.close();
        inner.conn.close();
    }
}

/// A redis-rs client for `url`, or why the URL is not usable.
fn open_url(url: &str) -> Result<redis::Client> {
    crate::tls::check_url(url)?;
    redis::Client::open(url).map_err(|e| Error::InvalidArgument(url_error(url, &e)))
}

/// Refuse TLS targets in a build without TLS, and switch every connection
/// to RESP3 (Pub/Sub on a multiplexed connection needs it).
fn prepare(target: Target) -> Result<Target> {
    Ok(match target {
        Target::Single(client) => {
            crate::tls::prepare(client.get_connection_info().addr())?;
            Target::Single(with_resp3(client)?)
        }
        Target::Cluster(seeds) => Target::Cluster(
            seeds
                .into_iter()
                .map(|s| crate::tls::prepare(s.addr()).map(|()| resp3_info(s)))
                .collect::<Result<_>>()?,
        ),
        Target::Sentinel {
            sentinels,
            master,
            node,
        } => {
            for s in &sentinels {
                crate::tls::prepare(s.get_connection_info().addr())?;
            }
            crate::tls::prepare(node.addr())?;
            Target::Sentinel {
                sentinels,
                master,
                node,
            }
        }
    })
}

/// The error for a URL redis-rs cannot parse, with a hint.
fn url_error(url: &str, e: &redis::RedisError) -> String {
    let scheme = url.split("://").next().unwrap_or("");
    let hint = match scheme {
        "redis" | "unix" | "redis+unix" => String::new(),
        "rediss" => " (rediss:// needs deadbolt's `tls` feature)".to_string(),
        _ => " (expected redis://host:port/, rediss://... or unix:///path)".to_string(),
    };
    let text = e.detail().map_or_else(|| e.to_string(), str::to_string);
    format!("redis URL {url:?} is not usable: {text}{hint}")
}
