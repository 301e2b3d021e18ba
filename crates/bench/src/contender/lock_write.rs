//! `lock-incr` and `lock-guarded`: deadbolt's `Lock` with one write to
//! Redis under each hold, to show what the guarded write's check costs
//! beside a plain write (uncontended scenario only).
//!
//! Both lock a `Lock` as the `lock` contender does, then at the start of
//! the release, still holding it, add 1 to a counter at the hold's own
//! `guarded().key("n")` (`<ns>:{<name>}:lock:data:n`, a key per name), and
//! then unlock:
//!
//! - `lock-incr`: a plain `INCRBY`, sent on a redis-rs multiplexed
//!   connection of its own that each contender client opens to the same
//!   server; nothing checks the hold. One command more per acquisition,
//!   counted in cmds/acq (`incrby` is among its client commands).
//! - `lock-guarded`: `guard.guarded().incr_by(key, 1)`, one EVALSHA of
//!   `guard_write.lua` that checks the hold and writes in one script. One
//!   command more per acquisition as well; the `INCRBY` inside the script
//!   is not counted, as no command inside a script is.
//!
//! The write is in the release, not the acquire, so `acquire` times the
//! same lock as the `lock` row and `lock+unlock` includes the write.

use std::sync::Arc;

use anyhow::Context as _;
use deadbolt_core::Acquire as _;
use futures::future::BoxFuture;
use redis::aio::MultiplexedConnection;

use super::{
    deadbolt_client, joined, Contender, ContenderClient, ContenderKind, ContenderOptions, Held,
    LockHandle, DEADBOLT_COMMANDS,
};

/// The suffix of the counter key: `guarded().key(COUNTER)`.
const COUNTER: &str = "n";

/// [`DEADBOLT_COMMANDS`] and the plain `INCRBY` `lock-incr` sends itself.
const INCR_COMMANDS: &[&str] = &joined::<7>(DEADBOLT_COMMANDS, &["incrby"]);

/// How the write under the hold is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Write {
    /// A plain `INCRBY` on a connection of its own (`lock-incr`).
    Plain,
    /// A guarded `incr_by` (`lock-guarded`).
    Guarded,
}

/// A `Lock` with one write under each hold.
pub(super) struct LockWrite {
    write: Write,
    /// The namespace and lease of its `Lock`s.
    opts: ContenderOptions,
}

impl LockWrite {
    /// The contender whose writes are made as `write`.
    pub(super) fn new(write: Write, opts: &ContenderOptions) -> LockWrite {
        LockWrite {
            write,
            opts: opts.clone(),
        }
    }
}

impl Contender for LockWrite {
    fn kind(&self) -> ContenderKind {
        match self.write {
            Write::Plain => ContenderKind::LockIncr,
            Write::Guarded => ContenderKind::LockGuarded,
        }
    }

    fn client_commands(&self) -> &'static [&'static str] {
        match self.write {
            Write::Plain => INCR_COMMANDS,
            Write::Guarded => DEADBOLT_COMMANDS,
        }
    }

    fn connect<'a>(
        &'a self,
        urls: &'a [String],
    ) -> BoxFuture<'a, anyhow::Result<Box<dyn ContenderClient>>> {
        Box::pin(async move {
            let url = urls[0].as_str();
            // The Lock's scripts loaded at connect (guard_write.lua is one
            // of the core scripts every client loads), so no SCRIPT LOAD
            // shows in cmds/acq.
            let builder = deadbolt_core::Client::builder(url);
            let scripts = [deadbolt_lock::SCRIPTS];
            let (namespace, lease) = (&self.opts.namespace, self.opts.lease);
            let client = deadbolt_client(builder, &scripts, namespace, lease).await?;
            let plain = match self.write {
                Write::Plain => Some(
                    redis::Client::open(url)?
                        .get_multiplexed_async_connection()
                        .await
                        .context("connecting lock-incr's plain connection")?,
                ),
                Write::Guarded => None,
            };
            Ok(Box::new(LockWriteClient { client, plain }) as Box<dyn ContenderClient>)
        })
    }
}

struct LockWriteClient {
    client: deadbolt_core::Client,
    /// `lock-incr`'s connection for its `INCRBY`; `None` for `lock-guarded`.
    plain: Option<MultiplexedConnection>,
}

impl ContenderClient for LockWriteClient {
    fn handle(&self, name: &str) -> Arc<dyn LockHandle> {
        Arc::new(LockWriteHandle {
            lock: deadbolt_lock::Lock::new(&self.client, name),
            plain: self.plain.clone(),
        })
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.client.shutdown())
    }
}

struct LockWriteHandle {
    lock: deadbolt_lock::Lock,
    plain: Option<MultiplexedConnection>,
}

impl LockHandle for LockWriteHandle {
    fn acquire(&self) -> BoxFuture<'_, anyhow::Result<Box<dyn Held>>> {
        Box::pin(async move {
            let guard = self.lock.lock().await?;
            Ok(Box::new(LockWriteHeld {
                guard,
                plain: self.plain.clone(),
            }) as Box<dyn Held>)
        })
    }
}

/// A hold whose release writes first.
struct LockWriteHeld {
    guard: deadbolt_core::ExclusiveGuard,
    plain: Option<MultiplexedConnection>,
}

impl Held for LockWriteHeld {
    /// The write, then the unlock (also after a failed write, so the hold
    /// does not wait out its lease); the write's error first.
    fn release(self: Box<Self>) -> BoxFuture<'static, anyhow::Result<()>> {
        let LockWriteHeld { guard, plain } = *self;
        Box::pin(async move {
            let written = write(&guard, plain).await;
            let unlocked = guard.unlock().await;
            written?;
            Ok(unlocked?)
        })
    }
}

/// Add 1 to the hold's counter: plainly on `plain`, or guarded.
async fn write(
    guard: &deadbolt_core::ExclusiveGuard,
    plain: Option<MultiplexedConnection>,
) -> anyhow::Result<i64> {
    let g = guard.guarded();
    let key = g.key(COUNTER);
    Ok(match plain {
        Some(mut conn) => {
            redis::cmd("INCRBY")
                .arg(&key)
                .arg(1)
                .query_async(&mut conn)
                .await?
        }
        None => g.incr_by(key, 1).await?,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::task::JoinSet;
    use tokio::time::Instant;

    use super::*;
    use crate::scenarios::distinct::lock_unlock;

    #[test]
    fn lock_incr_counts_its_incrby_and_the_deadbolt_commands() {
        assert_eq!(INCR_COMMANDS[..DEADBOLT_COMMANDS.len()], *DEADBOLT_COMMANDS);
        assert_eq!(INCR_COMMANDS.last(), Some(&"incrby"));
    }

    /// Both contenders, 4 tasks on names of their own for 300 ms as in the
    /// uncontended scenario, on a real redis-server: each name's counter
    /// ends at that task's acquisitions (the bench deletes a run's keys
    /// when it ends, so this runs the contenders directly;
    /// `tests/lock_write.rs` runs them through the bench).
    #[tokio::test]
    async fn each_acquisition_adds_one_to_its_names_counter() {
        let server = deadbolt_testkit::RedisServer::start()
            .expect("redis-server (apt-get install -y redis-server)");
        let urls = [server.url()];
        let mut conn = redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        for write in [Write::Plain, Write::Guarded] {
            let opts = ContenderOptions {
                namespace: "t".into(),
                lease: Duration::from_secs(30),
                poll_interval: Duration::from_millis(5),
                permits: 1,
                servers: 1,
            };
            let c = LockWrite::new(write, &opts);
            let what = c.kind().name();
            let client = c.connect(&urls).await.unwrap();
            let deadline = Instant::now() + Duration::from_millis(300);
            let mut tasks = JoinSet::new();
            for i in 0..4 {
                let name = format!("{what}:{i}");
                let handle = client.handle(&name);
                tasks.spawn(async move { (name, lock_unlock(vec![handle], deadline).await) });
            }
            while let Some(joined) = tasks.join_next().await {
                let (name, worker) = joined.unwrap();
                let tally = worker.unwrap().tally;
                assert_eq!(tally.errors, 0, "{name}: {:?}", tally.first_error);
                assert!(tally.acquisitions > 0, "{name}");
                let key = format!("t:{{{name}}}:lock:data:{COUNTER}");
                let n: Option<u64> = redis::cmd("GET")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert_eq!(n, Some(tally.acquisitions), "{key}");
            }
            client.shutdown().await;
        }
    }
}
