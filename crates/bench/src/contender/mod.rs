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

mod deadbolt;
mod lock_write;
mod poll;
mod redisson;
mod rslock;

use deadbolt::*;
pub(crate) use deadbolt::{connect_lock, DEADBOLT_TOPOLOGY_COMMANDS};
use poll::*;
use rslock::*;

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
