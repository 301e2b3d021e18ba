//! The client: the [`Client`] handle and what it carries (connection,
//! waiting engine, watchdog, releaser, heartbeat, the registry of live
//! holds), with the calls holds and acquires make of it. `build.rs` makes
//! one (connect, preload) and shuts it down; the acquire calls live with
//! the acquire (`acquire/mod.rs`). This file imports neither, so every
//! layer below may import it.

mod build;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use redis::FromRedisValue;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::conn::{run_on, Conn};
use crate::error::{Error, Result};
use crate::heartbeat::Heartbeat;
use crate::hold::lease::{HoldInner, LeaseState};
use crate::hold::release::Releaser;
use crate::hold::renew::Watchdog;
use crate::keys::Keys;
use crate::scripts::ScriptCall;
use crate::wait::Engine;

pub use build::ClientBuilder;

/// A connection to Redis shared by every primitive made from it.
///
/// `Client` is cheap to clone (an `Arc` inside); clones share connections,
/// the watchdog and the releaser. Each client has a random id; every primitive
/// handle made from it gets a handle id, and the pair is the owner id
/// `<client id>:<handle id>`.
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
    /// Acquire calls running now (shutdown waits for woken waiters to leave).
    /// Acquires running (one token each, `acquiring.token()`): shutdown
    /// closes it and waits for them (`TaskTracker`'s tokens count as tasks).
    pub(crate) acquiring: TaskTracker,
    /// Every hold not yet released or dropped, for shutdown to release.
    pub(crate) holds: Mutex<HashMap<u64, Weak<HoldInner>>>,
    pub(crate) next_handle: AtomicU64,
    pub(crate) shutdown: AtomicBool,
    /// The database keyspace notifications name (`None` on a Redis
    /// Cluster, whose notifications are node-local and not sharded).
    pub(crate) keyspace_db: Option<i64>,
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

impl Client {
    /// This client's id, `<encoded client name>@<random id>`: the first half of
    /// every owner id it makes (`<id>:<handle>`).
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// This client's name ([`ClientBuilder::client_name`](crate::ClientBuilder::client_name)).
    pub fn name(&self) -> &str {
        &self.inner.config.client_name
    }

    /// The settings in force.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// A fresh owner id `<client id>:<handle id>` for a new primitive handle.
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

    /// Whether one script call may touch every key of `keys`: always on a
    /// single server; on a Redis Cluster only when they share a hash slot
    /// (keys of one primitive always do; keys of different names seldom).
    pub fn one_call_for(&self, keys: &[&str]) -> bool {
        let conn = &self.inner.conn;
        keys.split_first().is_none_or(|(first, rest)| {
            let g = conn.batch_group(first);
            rest.iter().all(|k| conn.batch_group(k) == g)
        })
    }

    /// Number of local acquires currently waiting on a channel.
    pub fn waiters(&self) -> usize {
        self.inner.engine.waiter_count()
    }

    /// Number of releases the background releaser has not finished yet.
    pub fn pending_releases(&self) -> usize {
        self.inner.releaser.pending()
    }

    /// Hand a release-by-attempt call to the background releaser: it runs
    /// until Redis answers (retrying after faults), bounded by the release
    /// timeout (default: the watchdog timeout). For composites that send
    /// acquire scripts of their own and must undo a call that may have run
    /// (cancelled, `Indeterminate`). The call must be idempotent.
    pub fn release_in_background(&self, call: ScriptCall) {
        self.release_in_background_then(call, || {});
    }

    /// [`Client::release_in_background`], then `then` once the release ran
    /// (or its bound passed).
    pub(crate) fn release_in_background_then(
        &self,
        call: ScriptCall,
        then: impl FnOnce() + Send + 'static,
    ) {
        self.inner.releaser.submit_then(
            call,
            crate::hold::release::deadline(self.config(), None),
            then,
        );
    }

    /// Number of holds the watchdog currently renews.
    pub fn renewed_holds(&self) -> usize {
        self.inner.watchdog.len()
    }

    /// Wait until the background releaser has nothing left, or `timeout`.
    /// Returns whether it is idle.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    pub async fn releases_settled(&self, timeout: Duration) -> bool {
        self.inner
            .releaser
            .drain(crate::config::after(timeout))
            .await
    }

    /// With [`ClientBuilder::sync_replicas`](crate::ClientBuilder::sync_replicas) set: wait until that many
    /// replicas acknowledged this client's writes so far, which include a
    /// grant just made on `key` (on a cluster: on the node owning `key`'s
    /// slot). Returns at once when the option is off. For composites that
    /// grant with scripts of their own; [`Client::acquire`] calls it itself.
    ///
    /// # Errors
    /// [`Error::Indeterminate`] when fewer replicas acknowledged in time
    /// (the caller must release what it was granted), or the command's
    /// own error.
    ///
    /// # Cancel safety
    /// Cancel safe: WAIT writes nothing.
    pub async fn await_replicas(&self, key: &str) -> Result<()> {
        let Some((n, timeout)) = self.inner.config.sync_replicas else {
            return Ok(());
        };
        let acked = self.inner.conn.wait_replicas(key, n, timeout).await?;
        if acked < i64::from(n) {
            return Err(Error::Indeterminate(crate::error::Cause::msg(format!(
                "{acked} of {n} replicas acknowledged the grant on {key} within {timeout:?}"
            ))));
        }
        Ok(())
    }

    /// Listen on the client's own channel
    /// ([`client_channel`](crate::keys::client_channel)) for force-unlocks of
    /// its holds: the hold that was removed (its key and token) turns
    /// `Lost` at once (`lost()` fires), instead of at its next renewal (a
    /// third of the watchdog timeout away) or, with a fixed lease, never
    /// before the lease ends.
    pub(crate) fn listen_for_force_unlocks(&self) {
        let channel = crate::keys::client_channel(&self.inner.config.namespace, &self.inner.id);
        let weak = Arc::downgrade(&self.inner);
        self.inner.engine.pin(
            channel,
            Box::new(move |payload| {
                let (Some(inner), crate::message::Message::Forced { key, token }) =
                    (weak.upgrade(), crate::message::Message::parse(payload))
                else {
                    return;
                };
                let hit: Vec<Arc<HoldInner>> = inner
                    .holds
                    .lock()
                    .values()
                    .filter_map(Weak::upgrade)
                    .filter(|h| h.spec.key == key && h.token == token)
                    .collect();
                for h in hit {
                    if h.finish(LeaseState::Lost) {
                        inner.watchdog.unregister(&h);
                    }
                }
            }),
        );
    }

    /// Whether a hold of this client on `key` is live here (not released,
    /// not lost): a script's "upgrade" refusal is real only then.
    pub(crate) fn has_live_hold(&self, key: &str) -> bool {
        self.inner.holds.lock().values().any(|w| {
            w.upgrade()
                .is_some_and(|h| h.spec.key == key && *h.state.borrow() == LeaseState::Active)
        })
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.is_shutdown() {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }

    /// The keyspace-notification channel of `key` (`__keyspace@<db>__:<key>`),
    /// on which Redis announces every change of the key when
    /// `notify-keyspace-events` asks for it; `None` on a Redis Cluster,
    /// where those notifications are node-local (not sharded).
    pub fn keyspace_channel(&self, key: &str) -> Option<String> {
        self.inner
            .keyspace_db
            .map(|db| format!("__keyspace@{db}__:{key}"))
    }

    /// Whether the server sends every keyspace notification a watch needs
    /// (`notify-keyspace-events` with `K` and `g`, `h`, `x`, `z`, or `K`
    /// and `A`), asked with one `CONFIG GET`; false where it cannot tell
    /// (an ACL user without CONFIG, an error, a Redis Cluster, whose
    /// notifications are node-local).
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub(crate) async fn notifies_keyspace(&self) -> bool {
        if self.inner.keyspace_db.is_none() {
            return false;
        }
        let Ok((mut c, _)) = self.inner.conn.get() else {
            return false;
        };
        // A map under RESP3 (a flat list under RESP2): read as a map.
        let reply: redis::RedisResult<HashMap<String, String>> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("notify-keyspace-events")
            .query_async(&mut c)
            .await;
        let Some(flags) = reply.ok().and_then(|m| m.into_values().next()) else {
            return false;
        };
        flags.contains('K') && (flags.contains('A') || "ghxz".chars().all(|f| flags.contains(f)))
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

/// What the layers below the client reach of it: its parts, one accessor
/// each, so that no module below `client.rs` needs to know how a client is
/// built or to import it.
impl Client {
    /// The command connection.
    pub(crate) fn conn(&self) -> &Arc<Conn> {
        &self.inner.conn
    }

    /// The waiting engine (subscriptions, wake-ups, local hand-off).
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.inner.engine
    }

    /// The watchdog that renews watchdog-leased holds.
    pub(crate) fn watchdog(&self) -> &Watchdog {
        &self.inner.watchdog
    }

    /// The background releaser.
    pub(crate) fn releaser(&self) -> &Releaser {
        &self.inner.releaser
    }

    /// The waiter heartbeat of queued entries.
    pub(crate) fn heartbeat(&self) -> &Arc<Heartbeat> {
        &self.inner.heartbeat
    }

    /// One token while an acquire runs (shutdown waits for them).
    pub(crate) fn acquire_token(&self) -> tokio_util::task::task_tracker::TaskTrackerToken {
        self.inner.acquiring.token()
    }

    /// Record a hold not yet released, for shutdown to release.
    pub(crate) fn remember_hold(&self, hold: &Arc<HoldInner>) {
        self.inner
            .holds
            .lock()
            .insert(hold.id, Arc::downgrade(hold));
    }

    /// Forget hold `id` (dropped).
    pub(crate) fn forget_hold(&self, id: u64) {
        self.inner.holds.lock().remove(&id);
    }
}
