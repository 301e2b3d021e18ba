//! `redisson` and `redisson-fair`: Redisson's `RLock` and `RFairLock`, their
//! server side as Redisson runs it, driven by this bench's Rust client.
//!
//! The Lua (`lua/bench/redisson_*.lua`) is written here from the
//! description of Redisson's algorithm, not copied from it, and runs the
//! same commands: per uncontended lock+unlock 9 inside the `RLock`'s
//! scripts, 16 inside the `RFairLock`'s (`tests/redisson.rs` counts them).
//! What is Redisson's here:
//!
//! - the hold: a hash at the lock key, field `<client id>:<thread id>` (a
//!   UUID per client, a number per handle: a handle is one thread) → hold
//!   count, with a lease (`internalLockLeaseTime`, the bench's `--lease`,
//!   30 s by default) renewed by a watchdog every lease/3;
//! - the unlock: idempotent through an "unlock latch" key per request, kept
//!   (response timeout 3 s + retry interval 1.5 s) × 3 attempts = 13.5 s
//!   with Redisson's defaults, and deleted by a DEL sent without waiting
//!   once the script answered; it always PUBLISHes on a full release
//!   (`RFairLock`: only to the head waiter, on that waiter's own channel);
//! - the wait (`lock()`): a first try; on a TTL, SUBSCRIBE to the lock's
//!   channel (one subscriber connection per client, shared by its waiters
//!   with a count per channel, as Redisson's pub/sub entries are), then try
//!   again, and on each TTL wait for a message or the TTL, whichever comes
//!   first; each message lets one waiter of that client try (Redisson's
//!   entry latch is a semaphore released once per message). UNSUBSCRIBE
//!   goes out without waiting when the last waiter of the channel is done;
//! - `RFairLock`: the queue and the timeout ZSET, `threadWaitTime` of 5
//!   minutes (Redisson's default), times from the client's clock.
//!
//! What is not: Redisson's Java client (Netty, its codecs, its executor and
//! timer threads) — the client-side cost columns are this bench's Rust
//! client, the Redis-side ones Redisson's algorithm. The latch DEL is a
//! command the client sends, but the commandstats cannot tell it from the
//! DEL inside the unlock scripts, so it stays out of `cmds/acq` (one more
//! per release, not waited for).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context as _};
use futures::future::BoxFuture;
use futures::StreamExt as _;
use redis::aio::{MultiplexedConnection, PubSubSink, PubSubStream};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;

use super::{
    lease_millis, Contender, ContenderClient, ContenderKind, ContenderOptions, Held, LockHandle,
    PUBSUB_COMMANDS,
};

/// The message a full release publishes (Redisson's `UNLOCK_MESSAGE`).
const UNLOCK_MESSAGE: i64 = 0;

/// `RFairLock`'s default `threadWaitTime`: how long each waiter ahead in
/// the queue may take for its turn before the ones behind drop it.
const FAIR_THREAD_WAIT_MS: u64 = 5 * 60_000;

/// How long an unlock's latch is kept, ms: Redisson's (response timeout +
/// retry interval) × retry attempts with its defaults (3 s, 1.5 s, 3).
const UNLOCK_LATCH_MS: u64 = (3_000 + 1_500) * 3;

/// Commands the client sends itself and that its scripts do not run: the
/// scripts and the (un)subscriptions. The latch DEL is left out (see the
/// module doc).
const COMMANDS: &[&str] = &PUBSUB_COMMANDS;

deadbolt_core::primitive::lua_scripts! {
    /// The `RLock`'s try (`lua/redisson_lock.lua`).
    pub LOCK_LUA = "redisson_lock" with "redisson_lib";
    /// The `RLock`'s unlock (`lua/redisson_unlock.lua`).
    pub UNLOCK_LUA = "redisson_unlock" with "redisson_lib";
    /// The `RFairLock`'s try.
    FAIR_LOCK_LUA = "redisson_fair_lock" with "redisson_lib";
    /// The `RFairLock`'s unlock.
    FAIR_UNLOCK_LUA = "redisson_fair_unlock" with "redisson_lib";
    /// The watchdog's renewal, of both.
    RENEW_LUA = "redisson_renew";
}

static LOCK: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(LOCK_LUA.source()));
static UNLOCK: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(UNLOCK_LUA.source()));
static FAIR_LOCK: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(FAIR_LOCK_LUA.source()));
static FAIR_UNLOCK: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(FAIR_UNLOCK_LUA.source()));
static RENEW: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(RENEW_LUA.source()));

/// Which of Redisson's locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Variant {
    /// `RLock`.
    Lock,
    /// `RFairLock`.
    Fair,
}

impl Variant {
    fn kind(self) -> ContenderKind {
        match self {
            Variant::Lock => ContenderKind::Redisson,
            Variant::Fair => ContenderKind::RedissonFair,
        }
    }
}

/// The lock's channel: `redisson_lock__channel:{<lock>}`. An `RFairLock`
/// waiter listens on it plus `:<its field>`.
fn channel(key: &str) -> String {
    format!("redisson_lock__channel:{{{key}}}")
}

/// The latch of one unlock request.
fn latch(key: &str, request: &str) -> String {
    format!("redisson_unlock_latch:{{{key}}}:{request}")
}

/// `RFairLock`'s queue of waiting fields.
fn queue(key: &str) -> String {
    format!("redisson_lock_queue:{{{key}}}")
}

/// `RFairLock`'s ZSET of waiters' timeouts.
fn timeouts(key: &str) -> String {
    format!("redisson_lock_timeout:{{{key}}}")
}

/// A random id in a UUID's shape (Redisson's client id and request ids are
/// UUIDs; the shape keeps keys and fields the same length).
fn uuid() -> String {
    let n = rand::random::<u128>();
    let hex = format!("{n:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The client's clock, ms since the epoch (what Redisson sends the fair
/// lock's scripts).
fn now_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// The `redisson` or `redisson-fair` contender.
pub(super) struct Redisson {
    variant: Variant,
    namespace: String,
    /// `internalLockLeaseTime`, ms.
    lease_ms: u64,
}

impl Redisson {
    /// The contender of `variant`, with the namespace and lease of `opts`.
    pub(super) fn new(variant: Variant, opts: &ContenderOptions) -> Redisson {
        Redisson {
            variant,
            namespace: opts.namespace.clone(),
            lease_ms: lease_millis(opts.lease),
        }
    }
}

impl Contender for Redisson {
    fn kind(&self) -> ContenderKind {
        self.variant.kind()
    }

    fn client_commands(&self) -> &'static [&'static str] {
        COMMANDS
    }

    fn connect<'a>(
        &'a self,
        urls: &'a [String],
    ) -> BoxFuture<'a, anyhow::Result<Box<dyn ContenderClient>>> {
        Box::pin(async move {
            let what = self.variant.kind().name();
            let client = redis::Client::open(urls[0].as_str())?;
            let mut conn = client
                .get_multiplexed_async_connection()
                .await
                .with_context(|| format!("connecting a {what} client"))?;
            // Loaded at connect, as every contender's scripts are, so no
            // SCRIPT LOAD shows in cmds/acq.
            let scripts: &[&redis::Script] = match self.variant {
                Variant::Lock => &[&LOCK, &UNLOCK, &RENEW],
                Variant::Fair => &[&FAIR_LOCK, &FAIR_UNLOCK, &RENEW],
            };
            for s in scripts {
                s.load_async(&mut conn)
                    .await
                    .with_context(|| format!("loading {what}'s scripts"))?;
            }
            // Redisson keeps a pub/sub connection open from the start.
            let (sink, stream) = client
                .get_async_pubsub()
                .await
                .with_context(|| format!("connecting {what}'s subscriber"))?
                .split();
            Ok(Box::new(RedissonClient {
                conn,
                subscriber: Arc::new(Subscriber::start(sink, stream)),
                id: uuid(),
                threads: AtomicU64::new(0),
                pending: Arc::default(),
                namespace: self.namespace.clone(),
                lease_ms: self.lease_ms,
                variant: self.variant,
            }) as Box<dyn ContenderClient>)
        })
    }
}

/// One client: a command connection and a subscriber connection.
struct RedissonClient {
    conn: MultiplexedConnection,
    subscriber: Arc<Subscriber>,
    /// The client's UUID, the first part of every field.
    id: String,
    /// Thread ids handed out: one per handle.
    threads: AtomicU64,
    /// Latch DELs on their way.
    pending: Arc<Pending>,
    namespace: String,
    lease_ms: u64,
    variant: Variant,
}

impl ContenderClient for RedissonClient {
    fn handle(&self, name: &str) -> Arc<dyn LockHandle> {
        let tag = self.variant.kind().name();
        let key = format!("{}:{tag}:{name}", self.namespace);
        let thread = self.threads.fetch_add(1, Ordering::Relaxed) + 1;
        let field = format!("{}:{thread}", self.id);
        let channel = match self.variant {
            Variant::Lock => channel(&key),
            Variant::Fair => format!("{}:{field}", channel(&key)),
        };
        Arc::new(RedissonHandle {
            lock: LockRef {
                conn: self.conn.clone(),
                key,
                field,
                lease_ms: self.lease_ms,
                variant: self.variant,
                pending: self.pending.clone(),
            },
            channel,
            subscriber: self.subscriber.clone(),
        })
    }

    /// Stop the subscriber and let the latch DELs on their way land (for
    /// a second at most), as a client that shuts down sends what it has
    /// queued: what a run leaves in Redis is then what Redisson leaves.
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.subscriber.stop();
            self.pending.settled(Duration::from_secs(1)).await;
        })
    }
}

/// Commands sent without waiting for them (the latch DELs), counted until
/// they are answered.
#[derive(Default)]
struct Pending {
    count: AtomicUsize,
    /// Told when `count` comes down to 0.
    settled: Notify,
}

impl Pending {
    /// Send `cmd` on `conn` in a task of its own.
    fn send(self: &Arc<Self>, mut conn: MultiplexedConnection, cmd: redis::Cmd) {
        self.count.fetch_add(1, Ordering::SeqCst);
        let me = self.clone();
        tokio::spawn(async move {
            let _: redis::RedisResult<redis::Value> = cmd.query_async(&mut conn).await;
            if me.count.fetch_sub(1, Ordering::SeqCst) == 1 {
                me.settled.notify_waiters();
            }
        });
    }

    /// Wait until nothing is on its way, or `bound` passed.
    async fn settled(&self, bound: Duration) {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let told = self.settled.notified();
            tokio::pin!(told);
            told.as_mut().enable();
            if self.count.load(Ordering::SeqCst) == 0
                || tokio::time::timeout_at(deadline, told).await.is_err()
            {
                return;
            }
        }
    }
}

/// One thread's view of one lock: what its scripts are called with.
#[derive(Clone)]
struct LockRef {
    conn: MultiplexedConnection,
    key: String,
    field: String,
    lease_ms: u64,
    variant: Variant,
    /// The client's commands on their way.
    pending: Arc<Pending>,
}

impl LockRef {
    /// A call of the `RFairLock`'s `script` with its first keys: the lock,
    /// its queue, its timeouts.
    fn fair_keys<'s>(&self, script: &'s redis::Script) -> redis::ScriptInvocation<'s> {
        let mut call = script.prepare_invoke();
        call.key(&self.key)
            .key(queue(&self.key))
            .key(timeouts(&self.key));
        call
    }

    /// One try: `None` when this thread holds the lock now, else how long
    /// to wait at most before the next try, ms (negative: until a message).
    async fn try_lock(&mut self) -> anyhow::Result<Option<i64>> {
        let ttl: Option<i64> = match self.variant {
            Variant::Lock => {
                LOCK.key(&self.key)
                    .arg(self.lease_ms)
                    .arg(&self.field)
                    .invoke_async(&mut self.conn)
                    .await?
            }
            Variant::Fair => {
                self.fair_keys(&FAIR_LOCK)
                    .arg(self.lease_ms)
                    .arg(&self.field)
                    .arg(FAIR_THREAD_WAIT_MS)
                    .arg(now_ms())
                    .invoke_async(&mut self.conn)
                    .await?
            }
        };
        Ok(ttl)
    }

    /// Give one hold back; then delete the request's latch without waiting,
    /// as Redisson does.
    async fn unlock(&mut self) -> anyhow::Result<()> {
        let request = uuid();
        let latch = latch(&self.key, &request);
        let reply: Option<i64> = match self.variant {
            Variant::Lock => {
                UNLOCK
                    .key(&self.key)
                    .key(channel(&self.key))
                    .key(&latch)
                    .arg(UNLOCK_MESSAGE)
                    .arg(self.lease_ms)
                    .arg(&self.field)
                    .arg(UNLOCK_LATCH_MS)
                    .invoke_async(&mut self.conn)
                    .await?
            }
            Variant::Fair => {
                self.fair_keys(&FAIR_UNLOCK)
                    .key(&latch)
                    .arg(UNLOCK_MESSAGE)
                    .arg(self.lease_ms)
                    .arg(&self.field)
                    .arg(now_ms())
                    .arg(channel(&self.key))
                    .arg(UNLOCK_LATCH_MS)
                    .invoke_async(&mut self.conn)
                    .await?
            }
        };
        let mut del = redis::cmd("DEL");
        del.arg(latch);
        self.pending.send(self.conn.clone(), del);
        match reply {
            Some(1) => Ok(()),
            Some(_) => bail!("{}: still held after the unlock (re-entered)", self.key),
            None => bail!("{}: not held by this thread at unlock", self.key),
        }
    }

    /// The watchdog of a hold: renew the lease every lease/3 until the
    /// thread holds it no more (or a renewal fails). Aborted at release.
    fn watchdog(&self) -> JoinHandle<()> {
        let mut me = self.clone();
        tokio::spawn(async move {
            let period = Duration::from_millis((me.lease_ms / 3).max(1));
            loop {
                tokio::time::sleep(period).await;
                let renewed: redis::RedisResult<i64> = RENEW
                    .key(&me.key)
                    .arg(me.lease_ms)
                    .arg(&me.field)
                    .invoke_async(&mut me.conn)
                    .await;
                if !matches!(renewed, Ok(1)) {
                    return;
                }
            }
        })
    }
}

/// One handle: one thread of one client on one lock.
struct RedissonHandle {
    lock: LockRef,
    /// The channel its wake-ups come on (the lock's; `RFairLock`: its own).
    channel: String,
    subscriber: Arc<Subscriber>,
}

impl LockHandle for RedissonHandle {
    /// Redisson's `lock()`: try; subscribe; try, wait, try again.
    fn acquire(&self) -> BoxFuture<'_, anyhow::Result<Box<dyn Held>>> {
        Box::pin(async move {
            let mut lock = self.lock.clone();
            if lock.try_lock().await?.is_some() {
                let subscription = self.subscriber.subscribe(&self.channel).await?;
                // Dropping the subscription (here, or if this future is
                // dropped) unsubscribes without waiting.
                while let Some(ttl) = lock.try_lock().await? {
                    subscription.wait(ttl).await;
                }
            }
            let watchdog = lock.watchdog();
            Ok(Box::new(RedissonHeld {
                lock,
                watchdog: Some(watchdog),
            }) as Box<dyn Held>)
        })
    }
}

/// A hold, with its watchdog.
struct RedissonHeld {
    lock: LockRef,
    /// `None` once the release stopped it.
    watchdog: Option<JoinHandle<()>>,
}

impl Held for RedissonHeld {
    fn release(mut self: Box<Self>) -> BoxFuture<'static, anyhow::Result<()>> {
        if let Some(w) = self.watchdog.take() {
            w.abort();
        }
        let mut lock = self.lock.clone();
        Box::pin(async move { lock.unlock().await })
    }
}

impl Drop for RedissonHeld {
    fn drop(&mut self) {
        // A hold dropped without a release: its lease runs out (the
        // watchdog stops renewing it).
        if let Some(w) = self.watchdog.take() {
            w.abort();
        }
    }
}

/// A channel some of the client's waiters listen on.
struct Channel {
    /// Waiters subscribed: the last one out unsubscribes.
    waiters: usize,
    /// One permit per message heard: each lets one waiter try again.
    latch: Arc<Semaphore>,
}

/// A client's one subscriber connection, shared by all its waiters.
struct Subscriber {
    /// Held across each SUBSCRIBE and UNSUBSCRIBE with the change to
    /// `channels` it goes with, so the two never disagree about whether
    /// the connection listens on a channel.
    sink: tokio::sync::Mutex<PubSubSink>,
    /// Channels with waiters. Changed under `sink`; read by the dispatcher
    /// on every message.
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    /// Hands each unlock message to its channel's latch. Aborted by
    /// [`Subscriber::stop`] and on drop (which closes the connection).
    dispatcher: JoinHandle<()>,
}

impl Subscriber {
    fn start(sink: PubSubSink, mut stream: PubSubStream) -> Subscriber {
        let channels: Arc<Mutex<HashMap<String, Channel>>> = Arc::default();
        let seen = channels.clone();
        let dispatcher = tokio::spawn(async move {
            while let Some(msg) = stream.next().await {
                if msg.get_payload::<i64>().ok() != Some(UNLOCK_MESSAGE) {
                    continue;
                }
                let latch = seen
                    .lock()
                    .expect("no panic under the lock")
                    .get(msg.get_channel_name())
                    .map(|c| c.latch.clone());
                if let Some(latch) = latch {
                    latch.add_permits(1);
                }
            }
        });
        Subscriber {
            sink: tokio::sync::Mutex::new(sink),
            channels,
            dispatcher,
        }
    }

    /// Listen on `channel`: the first waiter of a channel SUBSCRIBEs (and
    /// waits for the answer), later ones join it.
    async fn subscribe(self: &Arc<Self>, channel: &str) -> anyhow::Result<Subscription> {
        let mut sink = self.sink.lock().await;
        let joined = {
            let mut channels = self.channels.lock().expect("no panic under the lock");
            if let Some(c) = channels.get_mut(channel) {
                c.waiters += 1;
                Some(c.latch.clone())
            } else {
                None
            }
        };
        let latch = match joined {
            Some(latch) => latch,
            None => {
                let latch = Arc::new(Semaphore::new(0));
                self.channels
                    .lock()
                    .expect("no panic under the lock")
                    .insert(
                        channel.to_string(),
                        Channel {
                            waiters: 1,
                            latch: latch.clone(),
                        },
                    );
                if let Err(e) = sink.subscribe(channel).await {
                    self.channels
                        .lock()
                        .expect("no panic under the lock")
                        .remove(channel);
                    return Err(e).context("subscribing to the lock's channel");
                }
                latch
            }
        };
        Ok(Subscription {
            subscriber: self.clone(),
            channel: channel.to_string(),
            latch,
        })
    }

    /// One waiter of `channel` is done; the last UNSUBSCRIBEs.
    async fn unsubscribe(&self, channel: &str) {
        let mut sink = self.sink.lock().await;
        let last = {
            let mut channels = self.channels.lock().expect("no panic under the lock");
            match channels.get_mut(channel) {
                Some(c) if c.waiters > 1 => {
                    c.waiters -= 1;
                    false
                }
                Some(_) => {
                    channels.remove(channel);
                    true
                }
                None => false,
            }
        };
        if last {
            // A failure leaves the connection subscribed; a later waiter
            // subscribes again, which Redis takes as a no-op.
            let _ = sink.unsubscribe(channel).await;
        }
    }

    fn stop(&self) {
        self.dispatcher.abort();
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.dispatcher.abort();
    }
}

/// One waiter's share of a channel; unsubscribes (without waiting) on drop.
struct Subscription {
    subscriber: Arc<Subscriber>,
    channel: String,
    latch: Arc<Semaphore>,
}

impl Subscription {
    /// Wait for a message on the channel, or `ttl_ms` (negative: for a
    /// message only).
    async fn wait(&self, ttl_ms: i64) {
        let heard = self.latch.acquire();
        let permit = match u64::try_from(ttl_ms) {
            Ok(ms) => tokio::time::timeout(Duration::from_millis(ms), heard)
                .await
                .ok(),
            Err(_) => Some(heard.await),
        };
        if let Some(Ok(p)) = permit {
            p.forget();
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let subscriber = self.subscriber.clone();
        let channel = std::mem::take(&mut self.channel);
        tokio::spawn(async move { subscriber.unsubscribe(&channel).await });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_channels_are_redissons() {
        let key = "ns:redisson:run:1";
        assert_eq!(channel(key), "redisson_lock__channel:{ns:redisson:run:1}");
        assert_eq!(
            latch(key, "r1"),
            "redisson_unlock_latch:{ns:redisson:run:1}:r1"
        );
        assert_eq!(queue(key), "redisson_lock_queue:{ns:redisson:run:1}");
        assert_eq!(timeouts(key), "redisson_lock_timeout:{ns:redisson:run:1}");
    }

    #[test]
    fn ids_have_a_uuids_shape() {
        let id = uuid();
        let parts: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "{id}");
        assert_ne!(uuid(), id);
    }

    #[test]
    fn the_latch_outlives_redissons_retries() {
        assert_eq!(UNLOCK_LATCH_MS, 13_500);
        assert_eq!(FAIR_THREAD_WAIT_MS, 300_000);
    }

    #[test]
    fn every_script_opens_with_its_contract() {
        for s in [
            include_str!("../../lua/redisson_lock.lua"),
            include_str!("../../lua/redisson_unlock.lua"),
            include_str!("../../lua/redisson_fair_lock.lua"),
            include_str!("../../lua/redisson_fair_unlock.lua"),
            include_str!("../../lua/redisson_renew.lua"),
        ] {
            for part in ["-- KEYS[1]", "-- ARGV[1]", "-- Reply:", "-- Branches:"] {
                assert!(s.contains(part), "a script lacks {part}");
            }
        }
        for s in [
            &LOCK_LUA,
            &UNLOCK_LUA,
            &FAIR_LOCK_LUA,
            &FAIR_UNLOCK_LUA,
            &RENEW_LUA,
        ] {
            deadbolt_core::scripts::check_header(s);
        }
    }
}
