//! The core client: connections, waiting engine, watchdog and releaser of one
//! process's view of a Redis server.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::FromRedisValue;
use tokio::time::Instant;

use crate::config::Config;
use crate::conn::{with_resp3, Conn};
use crate::error::{Error, Result};
use crate::heartbeat::Heartbeat;
use crate::keys::Keys;
use crate::releaser::Releaser;
use crate::scripts::{ScriptCall, ALL};
use crate::wait::Engine;
use crate::watchdog::Watchdog;

/// A connection to Redis shared by every primitive made from it.
///
/// `Client` is cheap to clone (an `Arc` inside); clones share connections,
/// the watchdog and the releaser. Each client has a uuid; every primitive
/// handle made from it gets a handle id, and the pair is the owner id
/// `<client uuid>:<handle id>`.
///
/// # Examples
/// ```no_run
/// # async fn f() -> deadbolt_core::Result<()> {
/// let client = deadbolt_core::Client::builder("redis://127.0.0.1/")
///     .namespace("billing")
///     .watchdog_timeout(std::time::Duration::from_secs(10))
///     .build()
///     .await?;
/// client.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

#[derive(Debug)]
pub(crate) struct ClientInner {
    pub(crate) id: String,
    pub(crate) config: Config,
    pub(crate) conn: Arc<Conn>,
    pub(crate) engine: Arc<Engine>,
    pub(crate) watchdog: Arc<Watchdog>,
    pub(crate) heartbeat: Arc<Heartbeat>,
    pub(crate) releaser: Releaser,
    next_handle: AtomicU64,
    shutdown: AtomicBool,
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        self.watchdog.stop();
        self.heartbeat.stop();
        self.engine.close();
        // The command connection closes when the releaser's last pending
        // release (which holds its own reference) is done.
    }
}

/// Builds a [`Client`] with settings other than the defaults.
#[derive(Debug)]
pub struct ClientBuilder {
    target: Result<redis::Client>,
    config: Config,
}

impl ClientBuilder {
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

    /// How long a silent fair-lock waiter keeps its place (default 5 s).
    pub fn waiter_timeout(mut self, timeout: Duration) -> Self {
        self.config.waiter_timeout = timeout;
        self
    }

    /// Bound on the releaser's retries of one release (default: watchdog timeout).
    pub fn release_timeout(mut self, timeout: Duration) -> Self {
        self.config.release_timeout = Some(timeout);
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
    pub async fn build(self) -> Result<Client> {
        let client = self.target?;
        self.config.validate()?;
        crate::tls::prepare(&client)?;
        let client = with_resp3(client)?;
        let timeout = self.config.command_timeout;
        let conn = Conn::connect("command", client.clone(), timeout, None).await?;
        let engine = Engine::start(client, timeout).await?;
        let (mut c, epoch) = conn.get()?;
        let mut pipe = redis::pipe();
        for s in ALL {
            pipe.cmd("SCRIPT").arg("LOAD").arg(s.source()).ignore();
        }
        pipe.query_async::<()>(&mut c)
            .await
            .map_err(|e| conn.sent_error(epoch, e))?;
        let watchdog = Watchdog::start(conn.clone(), self.config.watchdog_timeout);
        let id = uuid::Uuid::new_v4().simple().to_string();
        let heartbeat = Heartbeat::start(conn.clone(), id.clone(), self.config.waiter_timeout);
        let inner = Arc::new(ClientInner {
            id,
            heartbeat,
            releaser: Releaser::new(conn.clone()),
            config: self.config,
            conn,
            engine,
            watchdog,
            next_handle: AtomicU64::new(1),
            shutdown: AtomicBool::new(false),
        });
        Ok(Client { inner })
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
        let target = crate::tls::check_url(url).and_then(|()| {
            redis::Client::open(url).map_err(|e| Error::InvalidArgument(format!("redis url: {e}")))
        });
        ClientBuilder {
            target,
            config: Config::default(),
        }
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
        ClientBuilder {
            target: Ok(client),
            config: Config::default(),
        }
    }

    /// This client's uuid (the first half of every owner id it makes).
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The settings in force.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// A fresh owner id `<client uuid>:<handle id>` for a new primitive handle.
    pub fn new_owner(&self) -> String {
        let h = self.inner.next_handle.fetch_add(1, Ordering::Relaxed);
        format!("{}:{h}", self.inner.id)
    }

    /// Key names of primitive `kind` called `name` in this client's namespace.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty name.
    pub fn keys(&self, kind: &str, name: &str) -> Result<Keys> {
        Keys::new(&self.inner.config.namespace, kind, name)
    }

    /// Stop renewals, let the releaser finish (bounded by the command timeout
    /// plus one second), and close the connections. Later calls fail with
    /// [`Error::Shutdown`].
    ///
    /// # Cancel safety
    /// Cancel safe: if dropped, the shutdown still took effect; pending
    /// releases go on in the background until their bound.
    pub async fn shutdown(&self) {
        if self.inner.shutdown.swap(true, Ordering::SeqCst) {
            return;
        }
        self.inner.watchdog.stop();
        self.inner.heartbeat.stop();
        let bound = self.inner.config.command_timeout + Duration::from_secs(1);
        self.inner.releaser.drain(Instant::now() + bound).await;
        self.inner.engine.close();
        self.inner.conn.close();
    }

    /// True once [`shutdown`](Client::shutdown) was called.
    pub fn is_shutdown(&self) -> bool {
        self.inner.shutdown.load(Ordering::SeqCst)
    }

    /// Number of Pub/Sub channels this client is subscribed to (or
    /// subscribing), including channels lingering for a moment after their
    /// last waiter left.
    pub fn subscribed_channels(&self) -> usize {
        self.inner.engine.channel_count()
    }

    /// Number of local acquires currently waiting on a channel.
    pub fn waiters(&self) -> usize {
        self.inner.engine.waiter_count()
    }

    /// Number of releases the background releaser has not finished yet.
    pub fn pending_releases(&self) -> usize {
        self.inner.releaser.pending()
    }

    /// Wait until the background releaser has nothing left, or `timeout`.
    /// Returns whether it is idle.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    pub async fn releases_settled(&self, timeout: Duration) -> bool {
        self.inner.releaser.drain(Instant::now() + timeout).await
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.is_shutdown() {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }

    /// Run one script call and decode its reply.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when nothing was sent (connection known down),
    /// [`Error::Indeterminate`] when it may have run, [`Error::WrongType`] or
    /// [`Error::Redis`] for error replies, [`Error::Shutdown`] after shutdown.
    ///
    /// # Cancel safety
    /// Not cancel safe in general: a dropped call may still run on the server.
    /// Callers that write hand the matching release to the releaser.
    pub async fn run<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T> {
        self.check_open()?;
        run_on(&self.inner.conn, call).await
    }
}

/// Run `call` on `conn` (shared by the client and the releaser).
pub(crate) async fn run_on<T: FromRedisValue>(conn: &Arc<Conn>, call: &ScriptCall) -> Result<T> {
    let (mut c, epoch) = conn.get()?;
    let mut inv = call.script.script().prepare_invoke();
    for k in &call.keys {
        inv.key(k);
    }
    for a in &call.args {
        inv.arg(a);
    }
    match inv.invoke_async::<T>(&mut c).await {
        Ok(v) => Ok(v),
        Err(e) => match conn.sent_error(epoch, e) {
            // A script's own `WRONGTYPE <key>` names the key; Redis's message
            // does not: name the primitive's main key then.
            Error::WrongType { key } if key.is_empty() || key.contains(' ') => {
                Err(Error::WrongType {
                    key: call.main_key().to_string(),
                })
            }
            other => Err(other),
        },
    }
}
