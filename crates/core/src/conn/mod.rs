//! One managed connection: its own health view and its own reconnection,
//! to whichever topology the client was built for.
//!
//! redis-rs's `MultiplexedConnection` never reconnects, and its
//! `ConnectionManager` makes callers wait out a backoff while they get errors.
//! deadbolt keeps its own view instead: while the connection is known down,
//! new commands fail at once with [`Error::Unavailable`] (nothing was sent), a
//! background task reconnects, and waiters can await the moment it is up.
//!
//! Three targets ([`Target`]):
//! - one server: one multiplexed connection;
//! - a Sentinel set: the same, to the master the sentinels name, asked
//!   again at every (re)connection, so a reconnection after a failover
//!   reaches the new master; a `READONLY` reply (a demoted master whose
//!   connection survived) counts as a broken connection;
//! - a Redis Cluster: redis-rs's cluster connection, which keeps one
//!   connection per node, follows MOVED/ASK and reconnects nodes itself. It
//!   is never "known down" as a whole; a node's disconnection instead moves
//!   the epoch on (so that waiters try again, see `wait/`).

mod sentinel;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionInfo, Pipeline, PushInfo, PushKind, RedisFuture, Value,
};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::scripts::ScriptCall;
pub use sentinel::sentinel_master;
use sentinel::{resolve_master, watch_sentinels};

/// Called with every push message (Pub/Sub messages, subscribe confirmations).
pub(crate) type PushHandler = Arc<dyn Fn(PushInfo) + Send + Sync>;

/// Where a client's connections go.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    /// One server.
    Single(redis::Client),
    /// A Redis Cluster, reached through seed nodes (RESP3 is set on each).
    Cluster(Vec<ConnectionInfo>),
    /// The master that a Sentinel set names as `master`. The master is
    /// reached with `node`'s settings (credentials, database, protocol).
    Sentinel {
        sentinels: Vec<redis::Client>,
        master: String,
        node: ConnectionInfo,
    },
}

impl Target {
    /// The database of the target's connections; `None` on a Redis
    /// Cluster (no databases, and keyspace notifications not sharded).
    pub(crate) fn db(&self) -> Option<i64> {
        match self {
            Target::Single(c) => Some(c.get_connection_info().redis_settings().db()),
            Target::Sentinel { node, .. } => Some(node.redis_settings().db()),
            Target::Cluster(_) => None,
        }
    }

    /// Whether the server shards keys by hash slot.
    pub(crate) fn sharded(&self) -> bool {
        matches!(self, Target::Cluster(_))
    }

    /// The address a log line names.
    pub(crate) fn describe(&self) -> String {
        match self {
            Target::Single(c) => c.get_connection_info().addr().to_string(),
            Target::Cluster(seeds) => format!(
                "cluster [{}]",
                seeds
                    .iter()
                    .map(|s| s.addr().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Target::Sentinel { master, .. } => format!("sentinel master {master:?}"),
        }
    }
}

/// A live connection of either kind; clones share it.
#[derive(Clone)]
pub(crate) enum Connection {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }
}

impl Connection {
    /// Subscribe to channels: SUBSCRIBE on one server; on a cluster
    /// SSUBSCRIBE (to the node owning each channel's slot) for a key's
    /// channel (it has the key's hash tag), SUBSCRIBE for one without a
    /// tag (a client's own channel, published to every node).
    pub(crate) async fn subscribe(&mut self, channels: &[String]) -> redis::RedisResult<()> {
        match self {
            Connection::Single(c) => c.subscribe(channels).await,
            Connection::Cluster(c) => {
                let (keyed, classic) = by_tag(channels);
                if !classic.is_empty() {
                    c.subscribe(classic).await?;
                }
                if keyed.is_empty() {
                    return Ok(());
                }
                c.ssubscribe(keyed).await
            }
        }
    }

    /// The reverse of [`subscribe`](Connection::subscribe).
    pub(crate) async fn unsubscribe(&mut self, channels: &[String]) -> redis::RedisResult<()> {
        match self {
            Connection::Single(c) => c.unsubscribe(channels).await,
            Connection::Cluster(c) => {
                let (keyed, classic) = by_tag(channels);
                if !classic.is_empty() {
                    c.unsubscribe(classic).await?;
                }
                if keyed.is_empty() {
                    return Ok(());
                }
                c.sunsubscribe(keyed).await
            }
        }
    }
}

/// Channels with a hash tag (a key's: sharded on a cluster), and without.
fn by_tag(channels: &[String]) -> (Vec<&String>, Vec<&String>) {
    channels.iter().partition(|c| c.contains('{'))
}

/// Health as seen by waiters: `epoch` grows by one at every (re)connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Health {
    pub(crate) epoch: u64,
    pub(crate) up: bool,
}

/// Who changes it: `connect`/the reconnect task move Down → Up, the push
/// handler or a broken command move Up → Down, `close` moves anything to Closed.
enum State {
    Up {
        conn: Connection,
        epoch: u64,
    },
    /// Known down; a reconnect task is running.
    Down,
    Closed,
}

pub(crate) struct Conn {
    label: &'static str,
    /// The client's encoded name, sent with `CLIENT SETNAME` on every
    /// (re)connection to a single server.
    name: String,
    target: Target,
    command_timeout: Duration,
    push: Option<PushHandler>,
    state: Mutex<State>,
    health: watch::Sender<Health>,
    closed: AtomicBool,
    /// A cluster connection being rebuilt (see [`Conn::rebuild`]).
    rebuilding: AtomicBool,
    /// When the connection last came up, and the pause before the next
    /// reconnect: a connection that breaks soon after it came up (a proxy
    /// that closes on the first command, a server that kills the client)
    /// reconnects after a pause that doubles from 5 ms to 250 ms, instead
    /// of at once every time.
    flap: Mutex<(Option<std::time::Instant>, Duration)>,
    /// Another connection to rebuild with this one (the command
    /// connection's is the subscriber's: both follow the same topology).
    peer: std::sync::OnceLock<Weak<Conn>>,
    rt: tokio::runtime::Handle,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("label", &self.label)
            .field("health", &*self.health.borrow())
            .finish()
    }
}

impl Conn {
    /// Connect once; fails with `Unavailable` when the server cannot be reached.
    pub(crate) async fn connect(
        label: &'static str,
        target: Target,
        command_timeout: Duration,
        push: Option<PushHandler>,
        name: &str,
    ) -> Result<Arc<Conn>> {
        let (health, _) = watch::channel(Health {
            epoch: 0,
            up: false,
        });
        let conn = Arc::new(Conn {
            label,
            name: name.to_string(),
            target,
            command_timeout,
            push,
            state: Mutex::new(State::Down),
            health,
            closed: AtomicBool::new(false),
            rebuilding: AtomicBool::new(false),
            flap: Mutex::new((None, Duration::ZERO)),
            peer: std::sync::OnceLock::new(),
            rt: tokio::runtime::Handle::current(),
        });
        let c = Conn::open(&conn, 1).await?;
        conn.set_up(c, 1);
        if let Target::Sentinel {
            sentinels, master, ..
        } = &conn.target
        {
            conn.rt.spawn(watch_sentinels(
                Arc::downgrade(&conn),
                sentinels.clone(),
                master.clone(),
            ));
        }
        Ok(conn)
    }

    async fn open(this: &Arc<Conn>, epoch: u64) -> Result<Connection> {
        let weak = Arc::downgrade(this);
        let push = this.push.clone();
        let sender = move |info: PushInfo| -> std::result::Result<(), std::convert::Infallible> {
            if info.kind == PushKind::Disconnection {
                if let Some(conn) = weak.upgrade() {
                    conn.disconnected(epoch);
                }
            } else if let Some(handler) = &push {
                handler(info);
            }
            Ok(())
        };
        let timeout = this.command_timeout.min(crate::config::FAR);
        let unavailable = |e: &dyn std::fmt::Display| {
            Error::unavailable(format!(
                "{} connection to {}: {e}",
                this.label,
                this.target.describe()
            ))
        };
        let (client, sentinel) = match &this.target {
            Target::Single(client) => (client.clone(), None),
            Target::Sentinel {
                sentinels,
                master,
                node,
            } => {
                let client = resolve_master(sentinels, master, node, timeout)
                    .await
                    .map_err(|e| unavailable(&e))?;
                (client, Some(master))
            }
            Target::Cluster(seeds) => {
                let client = redis::cluster::ClusterClientBuilder::new(seeds.clone())
                    .use_protocol(redis::ProtocolVersion::RESP3)
                    .tcp_settings(tcp_settings(Default::default()))
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    // Redirections (MOVED, ASK, TRYAGAIN while a slot's keys
                    // are half moved) are retried within one command
                    // timeout (the overall bound); a dead node fails in it.
                    .retries(16)
                    .min_retry_wait(2)
                    .max_retry_wait(50)
                    .push_sender(sender)
                    .build()
                    .map_err(|e| Error::InvalidArgument(format!("cluster seeds: {e}")))?;
                return client
                    .get_async_connection()
                    .await
                    .map(Connection::Cluster)
                    .map_err(|e| unavailable(&e));
            }
        };
        let cfg = AsyncConnectionConfig::new()
            .set_response_timeout(Some(timeout))
            .set_connection_timeout(Some(timeout))
            .set_push_sender(sender);
        let mut c = client
            .get_multiplexed_async_connection_with_config(&cfg)
            .await
            .map_err(|e| unavailable(&e))?;
        if let Some(master) = sentinel {
            // A sentinel's answer may be stale for a moment around a
            // failover: connect only to a server that says it is a master.
            let role: Vec<Value> = redis::cmd("ROLE")
                .query_async(&mut c)
                .await
                .map_err(|e| unavailable(&e))?;
            let is_master = match role.first() {
                Some(Value::BulkString(r)) => r == b"master",
                Some(Value::SimpleString(r)) => r == "master",
                _ => false,
            };
            if !is_master {
                return Err(unavailable(&format!(
                    "the server named master of {master:?} is not a master (yet)"
                )));
            }
        }
        // Best effort: CLIENT LIST shows whose connection this is. A user
        // the ACL denies CLIENT SETNAME connects all the same.
        let named: redis::RedisResult<()> = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(&this.name)
            .query_async(&mut c)
            .await;
        if let Err(e) = named {
            if e.is_io_error() || e.is_timeout() {
                return Err(unavailable(&e));
            }
            tracing::debug!(error = %e, "CLIENT SETNAME refused");
        }
        Ok(Connection::Single(c))
    }

    fn set_up(&self, conn: Connection, epoch: u64) {
        let mut st = self.state.lock();
        if matches!(*st, State::Closed) {
            return;
        }
        *st = State::Up { conn, epoch };
        drop(st);
        self.flap.lock().0 = Some(std::time::Instant::now());
        self.health.send_replace(Health { epoch, up: true });
    }

    /// A handle to the live connection and its epoch.
    ///
    /// # Errors
    /// `Unavailable` while known down (nothing is sent), `Shutdown` once closed.
    pub(crate) fn get(&self) -> Result<(Connection, u64)> {
        match &*self.state.lock() {
            State::Up { conn, epoch } => Ok((conn.clone(), *epoch)),
            State::Down => Err(Error::unavailable(format!(
                "{} connection is down; reconnecting",
                self.label
            ))),
            State::Closed => Err(Error::Shutdown),
        }
    }

    /// A connection of `epoch` reported a disconnection. One server's
    /// connection is then down (reconnect); a cluster connection reconnects
    /// the node itself, and the epoch moves on so that the engine
    /// subscribes again and wakes every waiter (a message may have been
    /// lost with the node).
    fn disconnected(self: &Arc<Self>, epoch: u64) {
        if !self.target.sharded() {
            self.mark_down(epoch);
            return;
        }
        let mut st = self.state.lock();
        let State::Up { epoch: e, .. } = &mut *st else {
            return;
        };
        *e += 1;
        let epoch = *e;
        drop(st);
        tracing::info!(connection = self.label, "a cluster node disconnected");
        self.health.send_replace(Health { epoch, up: true });
    }

    /// The connection of `epoch` broke: stop handing it out and reconnect.
    pub(crate) fn mark_down(self: &Arc<Self>, epoch: u64) {
        if self.target.sharded() {
            // redis-rs reconnects a cluster's nodes itself.
            return;
        }
        let mut st = self.state.lock();
        match &*st {
            State::Up { epoch: e, .. } if *e == epoch => {}
            _ => return,
        }
        *st = State::Down;
        drop(st);
        tracing::warn!(
            connection = self.label,
            "redis connection lost; reconnecting"
        );
        self.health.send_replace(Health { epoch, up: false });
        let pause = {
            let mut f = self.flap.lock();
            let brief = f.0.is_some_and(|t| t.elapsed() < Duration::from_secs(1));
            f.1 = if brief {
                (f.1 * 2).clamp(Duration::from_millis(5), Duration::from_millis(250))
            } else {
                Duration::ZERO
            };
            f.1
        };
        let weak = Arc::downgrade(self);
        self.rt.spawn(reconnect(weak, epoch + 1, pause));
    }

    /// Classify a redis-rs error of a command sent on the connection of
    /// `epoch`, marking the connection down when the error says it broke
    /// (or, behind Sentinel, that the server is no longer the master).
    pub(crate) fn sent_error(self: &Arc<Self>, epoch: u64, err: redis::RedisError) -> Error {
        let demoted = matches!(self.target, Target::Sentinel { .. })
            && err.code().is_some_and(|c| c == "READONLY");
        if demoted || err.is_connection_dropped() || (err.is_io_error() && !err.is_timeout()) {
            self.mark_down(epoch);
        }
        if self.sharded() && err.is_timeout() {
            self.rebuild();
        }
        Error::from_sent(err)
    }

    /// Set the connection rebuilt together with this one.
    pub(crate) fn set_peer(&self, peer: &Arc<Conn>) {
        let _ = self.peer.set(Arc::downgrade(peer));
    }

    /// A cluster node timed out. redis-rs learns of a new slot owner only
    /// from a redirection or a broken connection; a node that hangs (paused,
    /// cut off) gives neither, and commands for its slots would go to it
    /// forever, even after its replica took over. So build a new cluster
    /// connection in the background, which reads the slot map afresh, and
    /// swap it in (the old one serves meanwhile). The new epoch makes the
    /// engine subscribe again and wake its waiters. One rebuild at a time.
    fn rebuild(self: &Arc<Self>) {
        if self.rebuilding.swap(true, Ordering::SeqCst) || self.is_closed() {
            return;
        }
        if let Some(peer) = self.peer.get().and_then(Weak::upgrade) {
            peer.rebuild();
        }
        let weak = Arc::downgrade(self);
        self.rt.spawn(async move {
            let Some(conn) = weak.upgrade() else { return };
            // The epoch is for the push handler, which on a cluster ignores it.
            match Conn::open(&conn, conn.epoch() + 1).await {
                Ok(c) => {
                    tracing::info!(connection = conn.label, "cluster connection rebuilt");
                    let mut st = conn.state.lock();
                    if let State::Up { epoch, .. } = &*st {
                        let epoch = *epoch + 1;
                        *st = State::Up { conn: c, epoch };
                        drop(st);
                        conn.health.send_replace(Health { epoch, up: true });
                    }
                }
                Err(e) => {
                    tracing::debug!(connection = conn.label, error = %e.report(), "rebuild failed");
                }
            }
            // Not again at once: a hung node keeps timing out until its
            // replica takes over.
            tokio::time::sleep(Duration::from_millis(250)).await;
            conn.rebuilding.store(false, Ordering::SeqCst);
        });
    }

    /// How many replicas acknowledged everything the server holding `key`
    /// had done when this was called: a marker write (`SET <key>:sync 1
    /// PX 1`, in `key`'s slot) and `WAIT n timeout`, pipelined on this
    /// connection (for a cluster, to the master of `key`'s slot). WAIT
    /// counts the writes of its own connection only; the marker, written
    /// after a grant that another client's release made (a hand-off by
    /// message), makes the wait cover that grant too, since a replica
    /// applies the master's writes in order.
    pub(crate) async fn wait_replicas(
        self: &Arc<Self>,
        key: &str,
        n: u32,
        timeout: Duration,
    ) -> Result<i64> {
        let (c, epoch) = self.get()?;
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(format!("{key}:sync"))
            .arg(1)
            .arg("PX")
            .arg(1)
            .ignore()
            .cmd("WAIT")
            .arg(n)
            .arg(ms);
        let r = match c {
            Connection::Single(mut m) => pipe.query_async::<(i64,)>(&mut m).await,
            Connection::Cluster(mut cc) => {
                use redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};
                let route = SingleNodeRoutingInfo::SpecificNode(Route::new(
                    crate::keys::hash_slot(key),
                    SlotAddr::Master,
                ));
                cc.route_pipeline(pipe, 0, 2, route).await.and_then(|v| {
                    let acked = v.into_iter().nth(1).unwrap_or(Value::Nil);
                    redis::from_redis_value::<i64>(acked)
                        .map(|a| (a,))
                        .map_err(Into::into)
                })
            }
        };
        r.map(|(acked,)| acked)
            .map_err(|e| self.sent_error(epoch, e))
    }

    pub(crate) fn health(&self) -> watch::Receiver<Health> {
        self.health.subscribe()
    }

    /// Whether the server shards keys by hash slot (Redis Cluster).
    pub(crate) fn sharded(&self) -> bool {
        self.target.sharded()
    }

    /// The group a key falls in when core batches work for many keys into
    /// one script call: its hash slot where the server shards by slot (a
    /// call must not span slots there), one group on a single server.
    pub(crate) fn batch_group(&self, key: &str) -> u16 {
        if self.sharded() {
            crate::keys::hash_slot(key)
        } else {
            0
        }
    }

    /// The current connection epoch (grows at every reconnection).
    pub(crate) fn epoch(&self) -> u64 {
        self.health.borrow().epoch
    }

    pub(crate) fn is_up(&self) -> bool {
        self.health.borrow().up
    }

    /// Wait until the connection is up, closed, or `deadline` passes.
    /// Returns whether it is up.
    pub(crate) async fn wait_up(&self, deadline: Option<Instant>) -> bool {
        let mut rx = self.health.subscribe();
        let fut = rx.wait_for(|h| h.up || self.is_closed());
        let woke = match deadline {
            Some(d) => matches!(tokio::time::timeout_at(d, fut).await, Ok(Ok(_))),
            None => fut.await.is_ok(),
        };
        woke && self.is_up()
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        *self.state.lock() = State::Closed;
        self.health.send_modify(|h| h.up = false);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

/// Reconnect with a short capped backoff. This is the connection layer, not
/// the waiting path: waiters never poll, they await [`Conn::wait_up`].
async fn reconnect(weak: Weak<Conn>, epoch: u64, pause: Duration) {
    if !pause.is_zero() {
        tokio::time::sleep(pause).await;
    }
    let mut backoff = Duration::from_millis(5);
    loop {
        let Some(conn) = weak.upgrade() else { return };
        if conn.is_closed() {
            return;
        }
        match Conn::open(&conn, epoch).await {
            Ok(c) => {
                tracing::info!(
                    connection = conn.label,
                    epoch,
                    "redis connection re-established"
                );
                conn.set_up(c, epoch);
                return;
            }
            Err(e) => {
                tracing::debug!(connection = conn.label, error = %e.report(), "reconnect failed");
            }
        }
        drop(conn);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_millis(250));
    }
}

/// Make sure the client speaks RESP3 (Pub/Sub on a multiplexed connection
/// needs it) over sockets without Nagle's delay ([`resp3_info`]).
pub(crate) fn with_resp3(client: redis::Client) -> Result<redis::Client> {
    redis::Client::open(resp3_info(client.get_connection_info().clone()))
        .map_err(|e| Error::InvalidArgument(format!("connection info: {e}")))
}

/// `info` with RESP3 set, and TCP_NODELAY ([`tcp_settings`]).
pub(crate) fn resp3_info(info: ConnectionInfo) -> ConnectionInfo {
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(redis::ProtocolVersion::RESP3);
    let tcp = tcp_settings(info.tcp_settings().clone());
    info.set_redis_settings(settings).set_tcp_settings(tcp)
}

/// `tcp` with TCP_NODELAY on. redis-rs leaves Nagle's algorithm on by
/// default: on a multiplexed connection, a request written while an
/// earlier one is unacknowledged then waits for that ACK (or a full
/// segment) before it leaves, which a lock's hand-off pays on every hop.
pub(crate) fn tcp_settings(tcp: redis::io::tcp::TcpSettings) -> redis::io::tcp::TcpSettings {
    tcp.set_nodelay(true)
}

/// Run one script call on `conn` and decode its reply: what every part of
/// core (client, releaser, watchdog, heartbeat) sends through.
pub(crate) async fn run_on<T: redis::FromRedisValue>(
    conn: &Arc<Conn>,
    call: &ScriptCall,
) -> Result<T> {
    let (mut c, epoch) = conn.get()?;
    let mut inv = call.script.script_for(conn.sharded()).prepare_invoke();
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
