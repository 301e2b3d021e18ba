//! The lock implementations the bench compares, behind one small interface.
//!
//! A [`Contender`] connects [`ContenderClient`]s (one per simulated process:
//! its own connections); a client makes a [`LockHandle`] per lock name (one
//! owner); a handle's `acquire` waits until it holds the lock and returns a
//! [`Held`] whose `release` gives it back. `acquire_read` does the same for
//! a read: the read-write lock takes its read side, every other contender
//! its one exclusive lock. Futures are boxed so the scenarios can run any
//! contender through `dyn`.
//!
//! The semaphores fit the same mould: a handle's `acquire` takes one permit
//! and `release` gives it back. A client's `prepare` sets deadbolt's
//! semaphore's permits before a run (the polling one is told its capacity
//! with every try).
//!
//! deadbolt's `Lock` and `FairLock` are both `deadbolt_core::Exclusive<K>`;
//! one generic implementation serves every exclusive kind. The `RwLock`
//! serves `acquire` with its write side. The `MultiLock` takes three names at
//! once; the Redlock contenders (deadbolt's `Redlock` and rslock over three
//! servers) take one name on each of [`REDLOCK_SERVERS`] servers: a contender
//! says how many servers it spans ([`Contender::servers`]) and is handed the
//! run's servers at connect.
//!
//! `redisson` and `redisson-fair` run Redisson's `RLock` and `RFairLock`
//! algorithm (their Lua, written here) from this bench's client: see
//! [`redisson`].
//!
//! `lock-incr` and `lock-guarded` (uncontended scenario only) are the
//! `Lock` with one write under each hold, a plain `INCRBY` and a guarded
//! `incr_by`: see [`lock_write`].
//!
//! Everything else (scenarios, command counting, report, table, plot) takes
//! the new contender as it is.

use deadbolt_core::Acquire as _;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use anyhow::{bail, ensure, Context as _};
use futures::future::BoxFuture;
use redis::aio::MultiplexedConnection;

use crate::model::{ContenderKind, MULTI_PARTS, REDLOCK_SERVERS};

mod lock_write;
mod redisson;

pub use redisson::{LOCK_LUA as REDISSON_LOCK, UNLOCK_LUA as REDISSON_UNLOCK};

/// What every contender needs to know, taken from the bench's flags.
#[derive(Debug, Clone)]
pub(crate) struct ContenderOptions {
    /// Key prefix.
    pub(crate) namespace: String,
    /// Lease of every hold (TTL, or deadbolt's watchdog timeout).
    pub(crate) lease: Duration,
    /// raw-poll's and sem-poll's sleep between tries.
    pub(crate) poll_interval: Duration,
    /// The semaphores' permits.
    pub(crate) permits: u32,
    /// How many servers the run will have: 1, or [`REDLOCK_SERVERS`] when the
    /// Redlock contenders can run.
    pub(crate) servers: usize,
}

/// One lock implementation under test.
pub(crate) trait Contender: Send + Sync {
    /// Which one it is.
    fn kind(&self) -> ContenderKind;

    /// The `INFO commandstats` names of the commands this contender's clients
    /// send themselves. Commands run inside its Lua scripts are counted by
    /// Redis too, under their own names; leaving them out of this list keeps
    /// them out of the round-trip counts.
    fn client_commands(&self) -> &'static [&'static str];

    /// The sleep between tries of a polling contender; `None` (the default)
    /// for one that waits for an event. The hand-off scenario randomises the
    /// holder's hold over one period so the release falls at a random phase
    /// of the poll.
    fn poll_period(&self) -> Option<Duration> {
        None
    }

    /// Whether reads ([`LockHandle::acquire_read`]) may hold the lock
    /// together; false for the exclusive locks, whose reads exclude
    /// everyone.
    fn shared_reads(&self) -> bool {
        false
    }

    /// How many servers one of its locks spans: 1, or [`REDLOCK_SERVERS`] for
    /// the Redlock contenders.
    fn servers(&self) -> usize {
        1
    }

    /// Open one client (its own connections) on the first
    /// [`Contender::servers`] of `urls`, the run's servers, server 1 first
    /// (the caller gives at least that many).
    fn connect<'a>(
        &'a self,
        urls: &'a [String],
    ) -> BoxFuture<'a, anyhow::Result<Box<dyn ContenderClient>>>;
}

/// One simulated process: the connections its handles share.
pub(crate) trait ContenderClient: Send + Sync {
    /// A new owner of the lock `name`.
    fn handle(&self, name: &str) -> Arc<dyn LockHandle>;

    /// Make `name` ready for its first acquire, before a run: deadbolt's
    /// semaphore sets its permits. Nothing for the others.
    fn prepare<'a>(&'a self, _name: &'a str) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }

    /// Close the client's connections and background tasks.
    fn shutdown(&self) -> BoxFuture<'_, ()>;
}

/// One owner of one lock name.
pub(crate) trait LockHandle: Send + Sync {
    /// Wait until this handle holds the lock (a read-write lock: for
    /// writing; a semaphore: one permit).
    fn acquire(&self) -> BoxFuture<'_, anyhow::Result<Box<dyn Held>>>;

    /// Wait until this handle holds the lock for reading; an exclusive lock
    /// takes it as [`LockHandle::acquire`] does.
    fn acquire_read(&self) -> BoxFuture<'_, anyhow::Result<Box<dyn Held>>> {
        self.acquire()
    }
}

/// One hold, released by [`Held::release`].
pub(crate) trait Held: Send {
    /// Give the lock back and wait for the answer.
    fn release(self: Box<Self>) -> BoxFuture<'static, anyhow::Result<()>>;
}

/// Build the contender of `kind`, or say why this build does not have it.
pub(crate) fn make(
    kind: ContenderKind,
    opts: &ContenderOptions,
) -> Result<Box<dyn Contender>, String> {
    use lock_write::{LockWrite, Write};
    use redisson::{Redisson, Variant};
    let lease_ms = lease_millis(opts.lease);
    let contender: Box<dyn Contender> = match kind {
        ContenderKind::Lock => Box::new(Deadbolt::new(kind, opts, |c, n| {
            Arc::new(deadbolt_lock::Lock::new(&c[0], n))
        })),
        ContenderKind::LockIncr => Box::new(LockWrite::new(Write::Plain, opts)),
        ContenderKind::LockGuarded => Box::new(LockWrite::new(Write::Guarded, opts)),
        ContenderKind::Fair => Box::new(Deadbolt::new(kind, opts, |c, n| {
            Arc::new(deadbolt_fair::FairLock::new(&c[0], n))
        })),
        ContenderKind::Rw => Box::new(Deadbolt::new(kind, opts, |c, n| {
            Arc::new(deadbolt_rwlock::RwLock::new(&c[0], n))
        })),
        ContenderKind::Sem => Box::new(Deadbolt::new(kind, opts, |c, n| {
            Arc::new(deadbolt_semaphore::Semaphore::new(&c[0], n))
        })),
        ContenderKind::Multi => Box::new(Deadbolt::new(kind, opts, |c, n| {
            let names: Vec<String> = (1..=MULTI_PARTS).map(|i| format!("{n}:{i}")).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            Arc::new(deadbolt_multilock::MultiLock::of_locks(&c[0], &names))
        })),
        ContenderKind::Redlock => {
            needs_redlock_servers(opts)?;
            Box::new(Deadbolt::new(kind, opts, |c, n| {
                Arc::new(
                    deadbolt_multilock::Redlock::new(c, n)
                        .expect("connect gives the Redlock contender its 3 servers"),
                )
            }))
        }
        ContenderKind::SemPoll => {
            let permits = opts.permits;
            Box::new(Poll::new(opts, SemPoll { lease_ms, permits }))
        }
        ContenderKind::RawPoll => Box::new(Poll::new(opts, RawPoll { lease_ms })),
        ContenderKind::Rslock => rslock_contender(opts, 1)?,
        ContenderKind::Redisson => Box::new(Redisson::new(Variant::Lock, opts)),
        ContenderKind::RedissonFair => Box::new(Redisson::new(Variant::Fair, opts)),
        ContenderKind::Rslock3 => {
            needs_redlock_servers(opts)?;
            rslock_contender(opts, REDLOCK_SERVERS)?
        }
    };
    Ok(contender)
}

/// Why a Redlock contender cannot run, when the run has too few servers.
fn needs_redlock_servers(opts: &ContenderOptions) -> Result<(), String> {
    if opts.servers >= REDLOCK_SERVERS {
        return Ok(());
    }
    Err(format!(
        "needs {REDLOCK_SERVERS} servers: --redis was given without {} --redlock-redis URLs \
         (without --redis the bench starts all {REDLOCK_SERVERS} itself)",
        REDLOCK_SERVERS - 1
    ))
}

fn lease_millis(lease: Duration) -> u64 {
    u64::try_from(lease.as_millis()).unwrap_or(u64::MAX)
}

// ---------------------------------------------------------------------------
// deadbolt's primitives
// ---------------------------------------------------------------------------

/// `head` then `tail` as one list of `N` command names (`N`, the two
/// lengths added up, is checked when the constant is built).
const fn joined<const N: usize>(head: &[&'static str], tail: &[&'static str]) -> [&'static str; N] {
    assert!(
        head.len() + tail.len() == N,
        "N must be the two lengths added up"
    );
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = if i < head.len() {
            head[i]
        } else {
            tail[i - head.len()]
        };
        i += 1;
    }
    out
}

/// The commands a client sends to run scripts: EVALSHA, and EVAL/SCRIPT
/// LOAD after a NOSCRIPT.
const SCRIPT_COMMANDS: [&str; 3] = ["evalsha", "eval", "script|load"];

/// [`SCRIPT_COMMANDS`] and the Pub/Sub (un)subscriptions of a client that
/// waits for messages.
const PUBSUB_COMMANDS: [&str; 5] = joined(&SCRIPT_COMMANDS, &["subscribe", "unsubscribe"]);

/// Commands a deadbolt client sends itself: scripts and Pub/Sub
/// ([`PUBSUB_COMMANDS`]). PING is listed so that a health check, if one were
/// added, would show; the bench's own PINGs are subtracted. PUBLISH, DEL,
/// SET… run inside deadbolt's scripts only.
const DEADBOLT_COMMANDS: &[&str] = &joined::<6>(&PUBSUB_COMMANDS, &["ping"]);

/// A handle of the lock `name` over a contender client's deadbolt clients
/// (one per server; every kind but the Redlock uses the first only).
type MakeHandle = fn(&[deadbolt_core::Client], &str) -> Arc<dyn LockHandle>;

/// A deadbolt primitive: one `deadbolt_core::Client` per server per contender
/// client.
struct Deadbolt {
    kind: ContenderKind,
    namespace: String,
    lease: Duration,
    make: MakeHandle,
    /// The permits a semaphore is set to before a run; `None` for the locks.
    permits: Option<u64>,
    /// Servers it spans: [`REDLOCK_SERVERS`] for the Redlock, else 1.
    servers: usize,
}

impl Deadbolt {
    fn new(kind: ContenderKind, opts: &ContenderOptions, make: MakeHandle) -> Deadbolt {
        Deadbolt {
            kind,
            namespace: opts.namespace.clone(),
            lease: opts.lease,
            make,
            permits: (kind == ContenderKind::Sem).then_some(u64::from(opts.permits)),
            servers: if kind == ContenderKind::Redlock {
                REDLOCK_SERVERS
            } else {
                1
            },
        }
    }
}

impl Contender for Deadbolt {
    fn kind(&self) -> ContenderKind {
        self.kind
    }

    fn client_commands(&self) -> &'static [&'static str] {
        DEADBOLT_COMMANDS
    }

    fn shared_reads(&self) -> bool {
        self.kind == ContenderKind::Rw
    }

    fn servers(&self) -> usize {
        self.servers
    }

    fn connect<'a>(
        &'a self,
        urls: &'a [String],
    ) -> BoxFuture<'a, anyhow::Result<Box<dyn ContenderClient>>> {
        Box::pin(async move {
            let mut clients = Vec::with_capacity(self.servers);
            for url in &urls[..self.servers] {
                // Scripts loaded at connect, before any run counts commands,
                // so no SCRIPT LOAD shows in cmds/acq. The MultiLock and the
                // Redlock run the Lock's scripts.
                let scripts = [
                    deadbolt_lock::SCRIPTS,
                    deadbolt_fair::SCRIPTS,
                    deadbolt_rwlock::SCRIPTS,
                    deadbolt_semaphore::SCRIPTS,
                    deadbolt_multilock::SCRIPTS,
                ];
                let builder = deadbolt_core::Client::builder(url);
                clients
                    .push(deadbolt_client(builder, &scripts, &self.namespace, self.lease).await?);
            }
            Ok(Box::new(DeadboltClient {
                clients,
                make: self.make,
                permits: self.permits,
            }) as Box<dyn ContenderClient>)
        })
    }
}

struct DeadboltClient {
    /// One per server the contender spans, server 1 first.
    clients: Vec<deadbolt_core::Client>,
    make: MakeHandle,
    permits: Option<u64>,
}

impl ContenderClient for DeadboltClient {
    fn handle(&self, name: &str) -> Arc<dyn LockHandle> {
        (self.make)(&self.clients, name)
    }

    fn prepare<'a>(&'a self, name: &'a str) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let Some(permits) = self.permits else {
                return Ok(());
            };
            let sem = deadbolt_semaphore::Semaphore::new(&self.clients[0], name);
            // Names are new for every run: permits set before would be a
            // leftover with perhaps another count.
            if !sem.try_set_permits(permits).await? {
                bail!("the semaphore {name} had its permits set already");
            }
            Ok(())
        })
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {
            for c in &self.clients {
                c.shutdown().await;
            }
        })
    }
}

/// [`DEADBOLT_COMMANDS`] and, for a cluster's sharded Pub/Sub, SSUBSCRIBE
/// and SUNSUBSCRIBE: what a deadbolt client sends itself on any topology.
pub(crate) const DEADBOLT_TOPOLOGY_COMMANDS: &[&str] =
    &joined::<8>(&PUBSUB_COMMANDS, &["ssubscribe", "sunsubscribe", "ping"]);

/// A deadbolt client from `builder` in the bench's `namespace`, with `lease`
/// as its watchdog timeout and every list of `preload` loaded at connect.
async fn deadbolt_client(
    builder: deadbolt_core::ClientBuilder,
    preload: &[&[&'static deadbolt_core::scripts::LuaScript]],
    namespace: &str,
    lease: Duration,
) -> anyhow::Result<deadbolt_core::Client> {
    preload
        .iter()
        .fold(builder, |b, scripts| b.preload(scripts))
        .namespace(namespace)
        .watchdog_timeout(lease)
        .build()
        .await
        .context("connecting a deadbolt client")
}

/// One client of deadbolt `Lock`s from `builder` (the `lock` contender's
/// handles, on any topology), with the Lock's scripts loaded at connect.
pub(crate) async fn connect_lock(
    builder: deadbolt_core::ClientBuilder,
    namespace: &str,
    lease: Duration,
) -> anyhow::Result<Box<dyn ContenderClient>> {
    let client = deadbolt_client(builder, &[deadbolt_lock::SCRIPTS], namespace, lease).await?;
    Ok(Box::new(DeadboltClient {
        clients: vec![client],
        make: |c, n| Arc::new(deadbolt_lock::Lock::new(&c[0], n)),
        permits: None,
    }))
}

/// [`LockHandle`] for deadbolt's handles: `acquire` waits on `self.$acquire`
/// with a watchdog lease (`acquire_read` on `self.$read`, where given), the
/// guard it gets boxed as the [`Held`].
macro_rules! deadbolt_handles {
    ($(
        $(#[$doc:meta])*
        $handle:ty $(where $g:ident: $bound:path)? => [$($acquire:tt)*] $(read [$($read:tt)*])?;
    )*) => {$(
        $(#[$doc])*
        impl$(<$g: $bound>)? LockHandle for $handle {
            fn acquire(&self) -> BoxFuture<'_, anyhow::Result<Box<dyn Held>>> {
                Box::pin(async move { Ok(Box::new(self.$($acquire)*.await?) as Box<dyn Held>) })
            }
            $(
                fn acquire_read(&self) -> BoxFuture<'_, anyhow::Result<Box<dyn Held>>> {
                    Box::pin(async move { Ok(Box::new(self.$($read)*.await?) as Box<dyn Held>) })
                }
            )?
        }
    )*};
}

deadbolt_handles! {
    /// Every deadbolt exclusive lock (`Lock`, `FairLock`): `lock()`.
    deadbolt_core::Exclusive<K> where K: deadbolt_core::ExclusiveKind => [lock()];
    /// deadbolt's `RwLock`: `read()` for a read, `write()` for anything else.
    deadbolt_rwlock::RwLock => [write_lock().lock()] read [read_lock().lock()];
    /// deadbolt's `Semaphore`: `acquire(1)`.
    deadbolt_semaphore::Semaphore => [acquire(1)];
    /// deadbolt's `MultiLock`: `lock()` takes every part.
    deadbolt_multilock::MultiLock => [lock()];
    /// deadbolt's `Redlock`: `lock()` waits for a majority, renewed while held.
    deadbolt_multilock::Redlock => [lock()];
}

/// [`Held`] for deadbolt's guards, each given back by its own `$release()`.
macro_rules! deadbolt_guards {
    ($($guard:ty => $release:ident;)*) => {$(
        impl Held for $guard {
            fn release(self: Box<Self>) -> BoxFuture<'static, anyhow::Result<()>> {
                Box::pin(async move { Ok((*self).$release().await?) })
            }
        }
    )*};
}

deadbolt_guards! {
    deadbolt_core::ExclusiveGuard => unlock;
    deadbolt_rwlock::ReadGuard => unlock;
    deadbolt_semaphore::Permits => release;
    deadbolt_multilock::MultiGuard => unlock;
    deadbolt_multilock::RedlockGuard => unlock;
}

// ---------------------------------------------------------------------------
// raw-poll and sem-poll: the textbook locks that poll
// ---------------------------------------------------------------------------

/// What the two polling contenders each do their own way: one try at the key
/// and the release. The rest (a connection per client, a key per name, a
/// random id per acquire, a try every `--poll-interval` until one takes) is
/// [`Poll`]'s.
trait PollScheme: Copy + Send + Sync + 'static {
    /// The contender it is.
    const KIND: ContenderKind;
    /// Its part of the key: `{namespace}:{TAG}:{name}`.
    const TAG: &'static str;
    /// The commands it sends itself.
    const COMMANDS: &'static [&'static str];

    /// Anything to do on a client's connection before its first try.
    fn connected(conn: &mut MultiplexedConnection) -> BoxFuture<'_, anyhow::Result<()>> {
        let _ = conn;
        Box::pin(async { Ok(()) })
    }

    /// One try: whether `id` now holds `key`.
    fn try_take<'a>(
        self,
        conn: &'a mut MultiplexedConnection,
        key: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, anyhow::Result<bool>>;

    /// Give back what `id` holds of `key`.
    fn release(
        self,
        conn: MultiplexedConnection,
        key: String,
        id: String,
    ) -> BoxFuture<'static, anyhow::Result<()>>;
}

/// A polling contender: `scheme`'s tries, one every `interval`.
struct Poll<S> {
    namespace: String,
    interval: Duration,
    scheme: S,
}

impl<S> Poll<S> {
    /// `scheme` tried every `--poll-interval`, in the bench's namespace.
    fn new(opts: &ContenderOptions, scheme: S) -> Poll<S> {
        Poll {
            namespace: opts.namespace.clone(),
            interval: opts.poll_interval,
            scheme,
        }
    }
}

impl<S: PollScheme> Contender for Poll<S> {
    fn kind(&self) -> ContenderKind {
        S::KIND
    }

    fn client_commands(&self) -> &'static [&'static str] {
        S::COMMANDS
    }

    fn poll_period(&self) -> Option<Duration> {
        Some(self.interval)
    }

    fn connect<'a>(
        &'a self,
        urls: &'a [String],
    ) -> BoxFuture<'a, anyhow::Result<Box<dyn ContenderClient>>> {
        Box::pin(async move {
            let mut conn = redis::Client::open(urls[0].as_str())?
                .get_multiplexed_async_connection()
                .await
                .with_context(|| format!("connecting a {} client", S::KIND.name()))?;
            S::connected(&mut conn).await?;
            Ok(Box::new(PollClient {
                conn,
                namespace: self.namespace.clone(),
                interval: self.interval,
                scheme: self.scheme,
            }) as Box<dyn ContenderClient>)
        })
    }
}

struct PollClient<S> {
    conn: MultiplexedConnection,
    namespace: String,
    interval: Duration,
    scheme: S,
}

impl<S: PollScheme> ContenderClient for PollClient<S> {
    fn handle(&self, name: &str) -> Arc<dyn LockHandle> {
        Arc::new(PollHandle {
            conn: self.conn.clone(),
            key: format!("{}:{}:{name}", self.namespace, S::TAG),
            interval: self.interval,
            scheme: self.scheme,
        })
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

struct PollHandle<S> {
    conn: MultiplexedConnection,
    key: String,
    interval: Duration,
    scheme: S,
}

impl<S: PollScheme> LockHandle for PollHandle<S> {
    fn acquire(&self) -> BoxFuture<'_, anyhow::Result<Box<dyn Held>>> {
        Box::pin(async move {
            let id = format!("{:032x}", rand::random::<u128>());
            let mut conn = self.conn.clone();
            loop {
                if self.scheme.try_take(&mut conn, &self.key, &id).await? {
                    return Ok(Box::new(PollHeld {
                        conn,
                        key: self.key.clone(),
                        id,
                        scheme: self.scheme,
                    }) as Box<dyn Held>);
                }
                tokio::time::sleep(self.interval).await;
            }
        })
    }
}

struct PollHeld<S> {
    conn: MultiplexedConnection,
    key: String,
    id: String,
    scheme: S,
}

impl<S: PollScheme> Held for PollHeld<S> {
    fn release(self: Box<Self>) -> BoxFuture<'static, anyhow::Result<()>> {
        self.scheme.release(self.conn, self.key, self.id)
    }
}

// ---------------------------------------------------------------------------
// raw-poll: the textbook SET NX PX lock
// ---------------------------------------------------------------------------

/// Commands raw-poll and rslock send themselves. GET and DEL run inside their
/// compare-and-delete scripts and are left out.
const SET_NX_COMMANDS: &[&str] = &joined::<4>(&["set"], &SCRIPT_COMMANDS);

/// Delete the key only if it still holds our token.
static COMPARE_AND_DELETE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0",
    )
});

/// raw-poll: `SET key token NX PX lease` to take, compare-and-delete to give
/// back.
#[derive(Clone, Copy)]
struct RawPoll {
    lease_ms: u64,
}

impl PollScheme for RawPoll {
    const KIND: ContenderKind = ContenderKind::RawPoll;
    const TAG: &'static str = "raw";
    const COMMANDS: &'static [&'static str] = SET_NX_COMMANDS;

    fn try_take<'a>(
        self,
        conn: &'a mut MultiplexedConnection,
        key: &'a str,
        token: &'a str,
    ) -> BoxFuture<'a, anyhow::Result<bool>> {
        Box::pin(async move {
            let set: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg(token)
                .arg("NX")
                .arg("PX")
                .arg(self.lease_ms)
                .query_async(conn)
                .await?;
            Ok(set.is_some())
        })
    }

    fn release(
        self,
        mut conn: MultiplexedConnection,
        key: String,
        token: String,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            let deleted: i64 = COMPARE_AND_DELETE
                .key(&key)
                .arg(&token)
                .invoke_async(&mut conn)
                .await?;
            ensure!(deleted == 1, "raw-poll release: {key} was no longer ours");
            Ok(())
        })
    }
}

// ---------------------------------------------------------------------------
// sem-poll: the textbook ZSET semaphore
// ---------------------------------------------------------------------------

/// Commands sem-poll sends itself: its acquire script and ZREM to release.
/// ZREMRANGEBYSCORE, ZCARD and ZADD run inside the script and are left out.
const SEM_POLL_COMMANDS: &[&str] = &joined::<4>(&SCRIPT_COMMANDS, &["zrem"]);

/// sem-poll's try ([`SEM_POLL_ACQUIRE_LUA`](crate::floor::SEM_POLL_ACQUIRE_LUA)).
static SEM_POLL_ACQUIRE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(crate::floor::SEM_POLL_ACQUIRE_LUA.source()));

/// sem-poll: its acquire script to take a permit, ZREM to give it back.
#[derive(Clone, Copy)]
struct SemPoll {
    lease_ms: u64,
    permits: u32,
}

impl PollScheme for SemPoll {
    const KIND: ContenderKind = ContenderKind::SemPoll;
    const TAG: &'static str = "sem-poll";
    const COMMANDS: &'static [&'static str] = SEM_POLL_COMMANDS;

    fn connected(conn: &mut MultiplexedConnection) -> BoxFuture<'_, anyhow::Result<()>> {
        // Loaded at connect, as deadbolt's scripts are, so no SCRIPT LOAD
        // shows in cmds/acq.
        Box::pin(async move {
            SEM_POLL_ACQUIRE
                .load_async(conn)
                .await
                .context("loading sem-poll's acquire script")?;
            Ok(())
        })
    }

    fn try_take<'a>(
        self,
        conn: &'a mut MultiplexedConnection,
        key: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, anyhow::Result<bool>> {
        Box::pin(async move {
            let taken: i64 = SEM_POLL_ACQUIRE
                .key(key)
                .arg(id)
                .arg(self.permits)
                .arg(self.lease_ms)
                .invoke_async(conn)
                .await?;
            Ok(taken == 1)
        })
    }

    fn release(
        self,
        mut conn: MultiplexedConnection,
        key: String,
        id: String,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            let removed: i64 = redis::cmd("ZREM")
                .arg(&key)
                .arg(&id)
                .query_async(&mut conn)
                .await?;
            ensure!(
                removed == 1,
                "sem-poll release: {key} no longer listed {id}"
            );
            Ok(())
        })
    }
}

// ---------------------------------------------------------------------------
// rslock 0.10
// ---------------------------------------------------------------------------

/// rslock over the first `servers` servers of the run.
#[cfg(feature = "peers")]
fn rslock_contender(opts: &ContenderOptions, servers: usize) -> Result<Box<dyn Contender>, String> {
    Ok(Box::new(peers::Rslock {
        namespace: opts.namespace.clone(),
        lease: opts.lease,
        servers,
    }))
}

#[cfg(not(feature = "peers"))]
fn rslock_contender(
    _opts: &ContenderOptions,
    _servers: usize,
) -> Result<Box<dyn Contender>, String> {
    Err("built without the `peers` feature".into())
}

#[cfg(feature = "peers")]
mod peers {
    use std::sync::Arc;
    use std::time::Duration;

    use futures::future::BoxFuture;

    use super::{Contender, ContenderClient, ContenderKind, Held, LockHandle, SET_NX_COMMANDS};

    /// rslock with one server (`rslock`: one `SET NX PX` per try) or three
    /// (`rslock-3`: rslock is Redlock, one `SET NX PX` on every server at
    /// once per try); its default retry policy (3 tries 0–200 ms apart, then
    /// `Unavailable`), called again until it gets the lock, as its own
    /// `acquire` does.
    pub(super) struct Rslock {
        pub(super) namespace: String,
        pub(super) lease: Duration,
        /// 1, or [`REDLOCK_SERVERS`](super::REDLOCK_SERVERS).
        pub(super) servers: usize,
    }

    /// rslock's mean sleep between tries (uniform 0–200 ms).
    const RETRY_MEAN: Duration = Duration::from_millis(100);

    impl Contender for Rslock {
        fn kind(&self) -> ContenderKind {
            if self.servers == 1 {
                ContenderKind::Rslock
            } else {
                ContenderKind::Rslock3
            }
        }

        fn servers(&self) -> usize {
            self.servers
        }

        fn client_commands(&self) -> &'static [&'static str] {
            SET_NX_COMMANDS
        }

        fn poll_period(&self) -> Option<Duration> {
            Some(RETRY_MEAN)
        }

        fn connect<'a>(
            &'a self,
            urls: &'a [String],
        ) -> BoxFuture<'a, anyhow::Result<Box<dyn ContenderClient>>> {
            Box::pin(async move {
                // LockManager::new panics on a bad URL: check them first.
                let clients = urls[..self.servers]
                    .iter()
                    .map(|u| redis::Client::open(u.as_str()))
                    .collect::<Result<Vec<_>, _>>()?;
                let manager = rslock::LockManager::from_clients(clients);
                // rslock connects lazily; connect now (every server: it asks
                // them all at once) so the first acquire is not timed with
                // the connection set-up.
                manager
                    .query_redis_for_key_value(b"deadbolt-bench:warm-up")
                    .await
                    .map_err(|e| anyhow::anyhow!("connecting an rslock client: {e}"))?;
                Ok(Box::new(RslockClient {
                    manager,
                    namespace: self.namespace.clone(),
                    lease: self.lease,
                }) as Box<dyn ContenderClient>)
            })
        }
    }

    struct RslockClient {
        manager: rslock::LockManager,
        namespace: String,
        lease: Duration,
    }

    impl ContenderClient for RslockClient {
        fn handle(&self, name: &str) -> Arc<dyn LockHandle> {
            Arc::new(RslockHandle {
                manager: self.manager.clone(),
                resource: format!("{}:rslock:{name}", self.namespace).into_bytes(),
                lease: self.lease,
            })
        }

        fn shutdown(&self) -> BoxFuture<'_, ()> {
            Box::pin(async {})
        }
    }

    struct RslockHandle {
        manager: rslock::LockManager,
        resource: Vec<u8>,
        lease: Duration,
    }

    impl LockHandle for RslockHandle {
        fn acquire(&self) -> BoxFuture<'_, anyhow::Result<Box<dyn Held>>> {
            Box::pin(async move {
                loop {
                    match self
                        .manager
                        .lock(self.resource.as_slice(), self.lease)
                        .await
                    {
                        Ok(lock) => return Ok(Box::new(RslockHeld(lock)) as Box<dyn Held>),
                        // Its three tries all found the lock taken.
                        Err(rslock::LockError::Unavailable) => {}
                        Err(e) => return Err(anyhow::anyhow!("rslock: {e}")),
                    }
                }
            })
        }
    }

    struct RslockHeld(rslock::Lock);

    impl Held for RslockHeld {
        fn release(self: Box<Self>) -> BoxFuture<'static, anyhow::Result<()>> {
            // rslock's unlock is best effort and reports nothing.
            Box::pin(async move {
                self.0.release().await;
                Ok(())
            })
        }
    }
}
