//! Scenario 1: a holder paused past its lease.
//!
//! Workers sell units from one stock row in PostgreSQL under one lock:
//! read the stock, work a little, write `stock − 1`, insert a sale row, and
//! keep a mirror of the stock in Redis the same way. One worker, on its
//! first hold, stops between its read and its write for longer than the
//! lease (a stop-the-world GC pause, a SIGSTOP): the lease runs out, the
//! others carry on selling, then it wakes up and writes what it read
//! before.
//!
//! Both sides hold with a fixed lease. A process that is paused pauses its
//! renewals as well, so a watchdog would not save it; a fixed lease shows
//! the same thing from one process.
//!
//! * textbook ([`PollLock`]): the stale write lands: the sold units come
//!   back into stock and are sold again (oversold), the sales made during
//!   the pause vanish from the stock (lost updates).
//! * deadbolt: the UPDATE carries the guard's fencing token
//!   (`WHERE id = 1 AND last_token <= $token`), and the Redis mirror is
//!   written with a guarded write: both refuse the stale holder.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use deadbolt::prelude::*;
use deadbolt_testkit::RedisServer;

use crate::report::{dur, Row};
use crate::textbook::PollLock;
use crate::Postgres;

/// Sizes of the run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Concurrent workers (each its own Redis connection or client).
    pub workers: usize,
    /// Units in stock at the start.
    pub stock: i64,
    /// The lease of every hold.
    pub lease: Duration,
    /// How long the paused worker stops (longer than `lease`).
    pub pause: Duration,
    /// Work between a worker's read and its write.
    pub work: Duration,
    /// The textbook lock's sleep between tries.
    pub poll: Duration,
    /// Test only: deadbolt's UPDATE without its token check and its Redis
    /// write unguarded, to show what the checks catch.
    pub unfenced: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            workers: 4,
            stock: 40,
            lease: Duration::from_secs(1),
            pause: Duration::from_millis(1500),
            work: Duration::from_millis(5),
            poll: Duration::from_millis(20),
            unfenced: false,
        }
    }
}

/// What one side's run counted.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// Sale rows inserted.
    pub sold: i64,
    /// Sales beyond the stock: `sold − stock` when positive.
    pub oversold: i64,
    /// Sales the PostgreSQL stock row does not show: `sold − (stock − final)`.
    pub lost_updates: i64,
    /// Sales the Redis mirror of the stock does not show.
    pub redis_lost_updates: i64,
    /// Writes to PostgreSQL refused by the token check.
    pub stale_refused: u64,
    /// Writes to Redis refused by the guarded write (`NotHeld`).
    pub redis_stale_refused: u64,
    /// Wall time of the run.
    pub elapsed: Duration,
}

/// Both sides' counts.
pub type Counts = crate::report::Sides<Config, Side>;

impl Counts {
    /// The table rows.
    pub fn rows(&self) -> Vec<Row> {
        const S: &str = "1. holder paused past its lease";
        let (t, d, c) = (&self.textbook, &self.deadbolt, &self.config);
        vec![
            Row::new(
                S,
                format!(
                    "{} workers, stock {}, lease {}, one paused {}: units sold",
                    c.workers,
                    c.stock,
                    dur(c.lease),
                    dur(c.pause)
                ),
                t.sold,
                d.sold,
            ),
            Row::new(S, "oversold (PostgreSQL)", t.oversold, d.oversold),
            Row::new(
                S,
                "lost updates (PostgreSQL stock row · Redis counter)",
                format!("{} · {}", t.lost_updates, t.redis_lost_updates),
                format!("{} · {}", d.lost_updates, d.redis_lost_updates),
            ),
            Row::new(
                S,
                "stale writes refused (token in UPDATE · guarded write)",
                "— (no token)",
                format!("{} · {}", d.stale_refused, d.redis_stale_refused),
            ),
        ]
    }
}

/// Runs both sides, each on its own redis-server, against `pg`.
///
/// # Errors
/// A server that cannot be started or reached.
pub async fn run(config: &Config, pg: &Postgres) -> anyhow::Result<Counts> {
    let textbook = side(config, pg, false).await.context("textbook side")?;
    let deadbolt = side(config, pg, true).await.context("deadbolt side")?;
    Ok(Counts {
        config: config.clone(),
        textbook,
        deadbolt,
    })
}

/// What one worker's hold did.
enum Sale {
    Sold,
    SoldOut,
    Refused { pg: bool, redis: bool },
}

async fn side(config: &Config, pg: &Postgres, deadbolt: bool) -> anyhow::Result<Side> {
    let redis = Arc::new(tokio::task::spawn_blocking(RedisServer::start).await??);
    let tag = if deadbolt { "deadbolt" } else { "textbook" };
    let (stock_t, sales_t) = (format!("s1_stock_{tag}"), format!("s1_sales_{tag}"));
    let db = pg.connect().await?;
    db.batch_execute(&format!(
        "DROP TABLE IF EXISTS {stock_t}, {sales_t};
         CREATE TABLE {stock_t} (id int PRIMARY KEY, n bigint NOT NULL, last_token bigint NOT NULL);
         INSERT INTO {stock_t} VALUES (1, {}, 0);
         CREATE TABLE {sales_t} (id bigserial PRIMARY KEY, worker int NOT NULL, token bigint);",
        config.stock
    ))
    .await?;
    let start = Instant::now();
    let mut workers = Vec::new();
    for w in 0..config.workers {
        let redis = Arc::clone(&redis);
        let config = config.clone();
        let db = pg.connect().await?;
        let (stock_t, sales_t) = (stock_t.clone(), sales_t.clone());
        workers.push(tokio::spawn(async move {
            let mut tally = (0u64, 0u64);
            let mut paused = false;
            if deadbolt {
                let client = deadbolt::Client::connect(&redis.url()).await?;
                let lock = client.lock("stock:1");
                let raw = redis.conn().await;
                loop {
                    let guard = lock.lock_with_lease(config.lease).await?;
                    let pause = w == 0 && !std::mem::replace(&mut paused, true);
                    let sale =
                        fenced_sale(&config, &db, &guard, (&stock_t, &sales_t), &raw, w, pause)
                            .await?;
                    let _ = guard.unlock().await;
                    match sale {
                        Sale::SoldOut => break,
                        Sale::Sold => {}
                        Sale::Refused { pg, redis } => {
                            tally.0 += u64::from(pg);
                            tally.1 += u64::from(redis);
                        }
                    }
                }
                client.shutdown().await;
            } else {
                let lock = PollLock::new(redis.conn().await, "stock:1", config.poll);
                let mut conn = redis.conn().await;
                loop {
                    let hold = lock.lock(config.lease).await?;
                    let row = db
                        .query_one(&format!("SELECT n FROM {stock_t} WHERE id = 1"), &[])
                        .await?;
                    let n: i64 = row.get(0);
                    let r: i64 = redis::cmd("GET")
                        .arg("mirror")
                        .query_async::<Option<i64>>(&mut conn)
                        .await?
                        .unwrap_or(config.stock);
                    if n <= 0 {
                        let _ = lock.unlock(hold).await;
                        break;
                    }
                    if w == 0 && !std::mem::replace(&mut paused, true) {
                        tokio::time::sleep(config.pause).await;
                    } else {
                        tokio::time::sleep(config.work).await;
                    }
                    db.execute(
                        &format!("UPDATE {stock_t} SET n = $1 WHERE id = 1"),
                        &[&(n - 1)],
                    )
                    .await?;
                    db.execute(
                        &format!("INSERT INTO {sales_t} (worker) VALUES ($1)"),
                        &[&i32::try_from(w)?],
                    )
                    .await?;
                    let _: () = redis::cmd("SET")
                        .arg("mirror")
                        .arg(r - 1)
                        .query_async(&mut conn)
                        .await?;
                    let _ = lock.unlock(hold).await;
                }
            }
            anyhow::Ok(tally)
        }));
    }
    let mut out = Side::default();
    for w in workers {
        let (pg_refused, redis_refused) = w.await??;
        out.stale_refused += pg_refused;
        out.redis_stale_refused += redis_refused;
    }
    out.elapsed = start.elapsed();
    let sold: i64 = db
        .query_one(&format!("SELECT count(*) FROM {sales_t}"), &[])
        .await?
        .get(0);
    let left: i64 = db
        .query_one(&format!("SELECT n FROM {stock_t} WHERE id = 1"), &[])
        .await?
        .get(0);
    let mirror = mirror_left(&redis, deadbolt).await?.unwrap_or(config.stock);
    out.sold = sold;
    out.oversold = (sold - config.stock).max(0);
    out.lost_updates = sold - (config.stock - left);
    out.redis_lost_updates = sold - (config.stock - mirror);
    Ok(out)
}

/// The Redis mirror's value at the end: a plain key for the textbook side,
/// the guarded key (in the lock's slot) for deadbolt's.
async fn mirror_left(redis: &RedisServer, deadbolt: bool) -> anyhow::Result<Option<i64>> {
    let key = if deadbolt {
        "deadbolt:{stock:1}:lock:data:mirror"
    } else {
        "mirror"
    };
    let mut conn = redis.conn().await;
    Ok(redis::cmd("GET").arg(key).query_async(&mut conn).await?)
}

/// One hold of a deadbolt worker: the read, the work (or the pause), the
/// fenced UPDATE and, only when it applied, the sale row; the Redis mirror
/// through guarded writes.
async fn fenced_sale(
    config: &Config,
    db: &tokio_postgres::Client,
    guard: &deadbolt::LockGuard,
    (stock_t, sales_t): (&str, &str),
    raw: &redis::aio::MultiplexedConnection,
    w: usize,
    pause: bool,
) -> anyhow::Result<Sale> {
    let token = i64::try_from(guard.fencing_token()).context("tokens are below 2^53")?;
    let g = guard.guarded();
    let mirror_key = g.key("mirror");
    let n: i64 = db
        .query_one(&format!("SELECT n FROM {stock_t} WHERE id = 1"), &[])
        .await?
        .get(0);
    let r: i64 = match g.get(&mirror_key).await {
        Ok(v) => v.and_then(|v| v.parse().ok()).unwrap_or(config.stock),
        // The lease ran out before the read: nothing read, nothing to write.
        Err(e) if e.is_lost() => {
            return Ok(Sale::Refused {
                pg: false,
                redis: false,
            })
        }
        Err(e) => return Err(e.into()),
    };
    if n <= 0 {
        return Ok(Sale::SoldOut);
    }
    tokio::time::sleep(if pause { config.pause } else { config.work }).await;
    let update = if config.unfenced {
        format!("UPDATE {stock_t} SET n = $1, last_token = $2 WHERE id = 1")
    } else {
        format!("UPDATE {stock_t} SET n = $1, last_token = $2 WHERE id = 1 AND last_token <= $2")
    };
    let applied = db.execute(&update, &[&(n - 1), &token]).await? == 1;
    if applied {
        db.execute(
            &format!("INSERT INTO {sales_t} (worker, token) VALUES ($1, $2)"),
            &[&i32::try_from(w)?, &token],
        )
        .await?;
    }
    let redis_ok = if config.unfenced {
        let _: () = redis::cmd("SET")
            .arg(&mirror_key)
            .arg(r - 1)
            .query_async(&mut raw.clone())
            .await?;
        true
    } else {
        match g.set(&mirror_key, (r - 1).to_string()).await {
            Ok(()) => true,
            Err(e) if e.is_lost() => false,
            Err(e) => return Err(e.into()),
        }
    };
    Ok(if applied && redis_ok {
        Sale::Sold
    } else {
        Sale::Refused {
            pg: !applied,
            redis: !redis_ok,
        }
    })
}
