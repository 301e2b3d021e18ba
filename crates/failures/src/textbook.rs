//! The textbook Redis locks the scenarios run beside deadbolt's.
//!
//! * [`PollLock`]: `SET key value NX PX ttl`, retried after a sleep while
//!   the key exists, released by a compare-and-delete script (the bench's
//!   `raw-poll`, as the Redis documentation describes it).
//! * [`TextbookRedlock`]: the same `SET NX PX` on every one of N servers
//!   at once, each bounded by a short timeout; a majority within
//!   `ttl − elapsed − drift` is a grant (the algorithm as redis.io
//!   describes it, and as the `rslock` crate implements it).
//!
//! Neither has a fencing token: the holder writes as it pleases.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

static UNLOCK: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
    )
});

fn random_value() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// The textbook single-server lock: `SET NX PX` and a sleep between tries.
#[derive(Debug, Clone)]
pub struct PollLock {
    conn: MultiplexedConnection,
    key: String,
    poll: Duration,
}

/// A [`PollLock`] hold: the random value that only its holder knows.
#[derive(Debug)]
pub struct PollHold {
    value: String,
}

impl PollLock {
    /// The lock `key` over `conn`, trying again every `poll` while held.
    pub fn new(conn: MultiplexedConnection, key: impl Into<String>, poll: Duration) -> PollLock {
        PollLock {
            conn,
            key: key.into(),
            poll,
        }
    }

    /// One `SET NX PX`.
    ///
    /// # Errors
    /// A Redis error.
    pub async fn try_lock(&self, ttl: Duration) -> redis::RedisResult<Option<PollHold>> {
        let value = random_value();
        let ok: Option<String> = redis::cmd("SET")
            .arg(&self.key)
            .arg(&value)
            .arg("NX")
            .arg("PX")
            .arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(ok.map(|_| PollHold { value }))
    }

    /// Tries until it gets the lock, sleeping `poll` between tries.
    ///
    /// # Errors
    /// A Redis error.
    pub async fn lock(&self, ttl: Duration) -> redis::RedisResult<PollHold> {
        loop {
            if let Some(h) = self.try_lock(ttl).await? {
                return Ok(h);
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    /// Compare-and-delete: true when the key still held this hold's value.
    ///
    /// # Errors
    /// A Redis error.
    pub async fn unlock(&self, hold: PollHold) -> redis::RedisResult<bool> {
        let n: i64 = UNLOCK
            .key(&self.key)
            .arg(&hold.value)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(n == 1)
    }
}

/// The textbook Redlock over N independent servers.
#[derive(Debug, Clone)]
pub struct TextbookRedlock {
    conns: Vec<MultiplexedConnection>,
}

/// A [`TextbookRedlock`] grant: its value and until when it counts.
#[derive(Debug)]
pub struct RedlockHold {
    value: String,
    /// `start + ttl − elapsed-at-grant − drift`: past this, the holder must
    /// stop (a rule the holder cannot keep while it is paused).
    pub valid_until: Instant,
}

impl TextbookRedlock {
    /// One connection per server (N odd).
    pub fn new(conns: Vec<MultiplexedConnection>) -> TextbookRedlock {
        TextbookRedlock { conns }
    }

    /// One round: `SET NX PX` everywhere at once, each bounded by
    /// `ttl / 10`; a majority within validity is a grant, anything less is
    /// released everywhere.
    pub async fn try_lock(&self, key: &str, ttl: Duration) -> Option<RedlockHold> {
        let value = random_value();
        let per_server = (ttl / 10).clamp(Duration::from_millis(5), Duration::from_secs(1));
        let start = Instant::now();
        let px = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let tries = self.conns.iter().map(|c| {
            let mut c = c.clone();
            let value = value.clone();
            async move {
                let mut cmd = redis::cmd("SET");
                cmd.arg(key).arg(&value).arg("NX").arg("PX").arg(px);
                let set = cmd.query_async::<Option<String>>(&mut c);
                matches!(tokio::time::timeout(per_server, set).await, Ok(Ok(Some(_))))
            }
        });
        let won = futures::future::join_all(tries)
            .await
            .into_iter()
            .filter(|ok| *ok)
            .count();
        // Drift allowance as redis.io gives it: 1% of the TTL plus 2 ms.
        let drift = ttl / 100 + Duration::from_millis(2);
        let valid_until = start + ttl.saturating_sub(drift);
        let hold = RedlockHold { value, valid_until };
        if won > self.conns.len() / 2 && Instant::now() < valid_until {
            return Some(hold);
        }
        self.unlock(key, hold).await;
        None
    }

    /// Compare-and-delete on every server (errors ignored, each bounded by
    /// 100 ms: a server that cannot be reached lets the key expire).
    pub async fn unlock(&self, key: &str, hold: RedlockHold) {
        let dels = self.conns.iter().map(|c| {
            let mut c = c.clone();
            let value = hold.value.clone();
            async move {
                let mut inv = UNLOCK.key(key);
                inv.arg(value);
                let del = inv.invoke_async::<i64>(&mut c);
                let _ = tokio::time::timeout(Duration::from_millis(100), del).await;
            }
        });
        futures::future::join_all(dels).await;
    }
}
