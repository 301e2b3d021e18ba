//! `raw-poll` and `sem-poll`: the textbook locks that poll, a SET NX PX
//! lock and a ZSET semaphore, over one [`Poll`] loop.

use super::*;

/// What the two polling contenders each do their own way: one try at the key
/// and the release. The rest (a connection per client, a key per name, a
/// random id per acquire, a try every `--poll-interval` until one takes) is
/// [`Poll`]'s.
pub(super) trait PollScheme: Copy + Send + Sync + 'static {
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
pub(super) struct Poll<S> {
    namespace: String,
    interval: Duration,
    scheme: S,
}

impl<S> Poll<S> {
    /// `scheme` tried every `--poll-interval`, in the bench's namespace.
    pub(super) fn new(opts: &ContenderOptions, scheme: S) -> Poll<S> {
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

pub(super) struct PollClient<S> {
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

pub(super) struct PollHandle<S> {
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

pub(super) struct PollHeld<S> {
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
pub(super) const SET_NX_COMMANDS: &[&str] = &joined::<4>(&["set"], &SCRIPT_COMMANDS);

/// Delete the key only if it still holds our token.
pub(super) static COMPARE_AND_DELETE: LazyLock<redis::Script> = LazyLock::new(|| {
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
pub(super) struct RawPoll {
    pub(super) lease_ms: u64,
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
pub(super) const SEM_POLL_COMMANDS: &[&str] = &joined::<4>(&SCRIPT_COMMANDS, &["zrem"]);

/// sem-poll's try ([`SEM_POLL_ACQUIRE_LUA`](crate::floor::SEM_POLL_ACQUIRE_LUA)).
pub(super) static SEM_POLL_ACQUIRE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(crate::floor::SEM_POLL_ACQUIRE_LUA.source()));

/// sem-poll: its acquire script to take a permit, ZREM to give it back.
#[derive(Clone, Copy)]
pub(super) struct SemPoll {
    pub(super) lease_ms: u64,
    pub(super) permits: u32,
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
