//! One managed connection: its own health view and its own reconnection.
//!
//! redis-rs's `MultiplexedConnection` never reconnects, and its
//! `ConnectionManager` makes callers wait out a backoff while they get errors.
//! deadbolt keeps its own view instead: while the connection is known down,
//! new commands fail at once with [`Error::Unavailable`] (nothing was sent), a
//! background task reconnects, and waiters can await the moment it is up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, PushInfo, PushKind};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::{Error, Result};

/// Called with every push message (Pub/Sub messages, subscribe confirmations).
pub(crate) type PushHandler = Arc<dyn Fn(PushInfo) + Send + Sync>;

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
        conn: MultiplexedConnection,
        epoch: u64,
    },
    /// Known down; a reconnect task is running.
    Down,
    Closed,
}

pub(crate) struct Conn {
    label: &'static str,
    client: redis::Client,
    command_timeout: Duration,
    push: Option<PushHandler>,
    state: Mutex<State>,
    health: watch::Sender<Health>,
    closed: AtomicBool,
    /// The server shards keys by hash slot (Redis Cluster): batched work is
    /// grouped per slot. False for a standalone server, the only topology
    /// so far.
    sharded: bool,
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
        client: redis::Client,
        command_timeout: Duration,
        push: Option<PushHandler>,
    ) -> Result<Arc<Conn>> {
        let (health, _) = watch::channel(Health {
            epoch: 0,
            up: false,
        });
        let conn = Arc::new(Conn {
            label,
            client,
            command_timeout,
            push,
            state: Mutex::new(State::Down),
            health,
            closed: AtomicBool::new(false),
            sharded: false,
            rt: tokio::runtime::Handle::current(),
        });
        let c = Conn::open(&conn, 1).await?;
        conn.set_up(c, 1);
        Ok(conn)
    }

    async fn open(this: &Arc<Conn>, epoch: u64) -> Result<MultiplexedConnection> {
        let weak = Arc::downgrade(this);
        let push = this.push.clone();
        let sender = move |info: PushInfo| -> std::result::Result<(), std::convert::Infallible> {
            if info.kind == PushKind::Disconnection {
                if let Some(conn) = weak.upgrade() {
                    conn.mark_down(epoch);
                }
            } else if let Some(handler) = &push {
                handler(info);
            }
            Ok(())
        };
        let cfg = AsyncConnectionConfig::new()
            .set_response_timeout(Some(this.command_timeout.min(crate::config::FAR)))
            .set_connection_timeout(Some(this.command_timeout.min(crate::config::FAR)))
            .set_push_sender(sender);
        this.client
            .get_multiplexed_async_connection_with_config(&cfg)
            .await
            .map_err(|e| Error::unavailable(format!("{} connection: {e}", this.label)))
    }

    fn set_up(&self, conn: MultiplexedConnection, epoch: u64) {
        let mut st = self.state.lock();
        if matches!(*st, State::Closed) {
            return;
        }
        *st = State::Up { conn, epoch };
        drop(st);
        self.health.send_replace(Health { epoch, up: true });
    }

    /// A handle to the live connection and its epoch.
    ///
    /// # Errors
    /// `Unavailable` while known down (nothing is sent), `Shutdown` once closed.
    pub(crate) fn get(&self) -> Result<(MultiplexedConnection, u64)> {
        match &*self.state.lock() {
            State::Up { conn, epoch } => Ok((conn.clone(), *epoch)),
            State::Down => Err(Error::unavailable(format!(
                "{} connection is down; reconnecting",
                self.label
            ))),
            State::Closed => Err(Error::Shutdown),
        }
    }

    /// The connection of `epoch` broke: stop handing it out and reconnect.
    pub(crate) fn mark_down(self: &Arc<Self>, epoch: u64) {
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
        let weak = Arc::downgrade(self);
        self.rt.spawn(reconnect(weak, epoch + 1));
    }

    /// Classify a redis-rs error of a command sent on the connection of
    /// `epoch`, marking the connection down when the error says it broke.
    pub(crate) fn sent_error(self: &Arc<Self>, epoch: u64, err: redis::RedisError) -> Error {
        if err.is_connection_dropped() || (err.is_io_error() && !err.is_timeout()) {
            self.mark_down(epoch);
        }
        Error::from_sent(err)
    }

    pub(crate) fn health(&self) -> watch::Receiver<Health> {
        self.health.subscribe()
    }

    /// The group a key falls in when core batches work for many keys into
    /// one script call: its hash slot where the server shards by slot (a
    /// call must not span slots there), one group on a standalone server.
    pub(crate) fn batch_group(&self, key: &str) -> u16 {
        if self.sharded {
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
async fn reconnect(weak: Weak<Conn>, epoch: u64) {
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

/// Make sure the client speaks RESP3 (Pub/Sub on a multiplexed connection needs it).
pub(crate) fn with_resp3(client: redis::Client) -> Result<redis::Client> {
    let info = client.get_connection_info().clone();
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(redis::ProtocolVersion::RESP3);
    redis::Client::open(info.set_redis_settings(settings))
        .map_err(|e| Error::InvalidArgument(format!("connection info: {e}")))
}
