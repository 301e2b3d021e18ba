//! Scenario 1: a holder paused past its lease.
//!
//! Workers sell units from one stock row in PostgreSQL under one lock:
//! read the stock, work a little, write `stock − 1`, insert a sale row, and
//! keep a mirror of the stock in Redis the same way. One worker is a
//! process of its own (this binary, `--paused-worker`): on its first hold
//! it says so between its read and its write, and is stopped with SIGSTOP
//! for longer than the lease (a stop-the-world GC pause): the lease runs
//! out, the others carry on selling, then it is continued (SIGCONT) and
//! writes what it read before. Without the binary's path
//! ([`Config::worker_exe`]) that worker is a task that sleeps instead.
//!
//! Both sides hold with a fixed lease. A stopped process stops its
//! renewals as well, so a watchdog would not save it either.
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
    /// The `deadbolt-failures` binary, run with `--paused-worker` as the
    /// worker that is stopped; `None`: that worker is a task that sleeps.
    pub worker_exe: Option<std::path::PathBuf>,
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
            worker_exe: None,
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

/// Where a worker's hold stops between its read and its write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pause {
    /// It works `config.work`: every hold but the paused worker's first.
    Work,
    /// It sleeps `config.pause`: the paused worker as a task.
    Sleep,
    /// The paused worker as a process: it says so on stdout and waits for
    /// a line on stdin, which its parent writes after stopping it with
    /// SIGSTOP; it reads the line once the parent continues it.
    Stopped,
}

/// The line the paused worker prints when it has read and waits.
const READ_LINE: &str = "paused-worker: read";

/// Stop between the read and the write as `pause` says.
async fn pause_point(config: &Config, pause: Pause) -> anyhow::Result<()> {
    use tokio::io::AsyncBufReadExt as _;
    match pause {
        Pause::Work => tokio::time::sleep(config.work).await,
        Pause::Sleep => tokio::time::sleep(config.pause).await,
        Pause::Stopped => {
            println!("{READ_LINE}");
            let mut line = String::new();
            tokio::io::BufReader::new(tokio::io::stdin())
                .read_line(&mut line)
                .await?;
        }
    }
    Ok(())
}

/// The stock and sales tables of one side.
struct Tables {
    stock: String,
    sales: String,
}

/// One worker: sells until the stock is gone, each sale under one hold.
/// Its first hold stops as `first` says, every other works
/// `config.work`. Returns the writes refused in PostgreSQL and in Redis.
async fn worker(
    config: &Config,
    redis_url: &str,
    db: &tokio_postgres::Client,
    t: &Tables,
    w: usize,
    deadbolt: bool,
    mut first: Pause,
) -> anyhow::Result<(u64, u64)> {
    let mut tally = (0u64, 0u64);
    let raw = redis::Client::open(redis_url)?
        .get_multiplexed_async_connection()
        .await?;
    if deadbolt {
        let client = deadbolt::Client::connect(redis_url).await?;
        let lock = client.lock("stock:1");
        loop {
            let guard = lock.lock_with_lease(config.lease).await?;
            let pause = std::mem::replace(&mut first, Pause::Work);
            let sale = fenced_sale(config, db, &guard, t, &raw, w, pause).await?;
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
        return Ok(tally);
    }
    let lock = PollLock::new(raw.clone(), "stock:1", config.poll);
    let mut conn = raw;
    loop {
        let hold = lock.lock(config.lease).await?;
        let row = db
            .query_one(&format!("SELECT n FROM {} WHERE id = 1", t.stock), &[])
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
        pause_point(config, std::mem::replace(&mut first, Pause::Work)).await?;
        db.execute(
            &format!("UPDATE {} SET n = $1 WHERE id = 1", t.stock),
            &[&(n - 1)],
        )
        .await?;
        db.execute(
            &format!("INSERT INTO {} (worker) VALUES ($1)", t.sales),
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
    Ok(tally)
}

/// The arguments of `--paused-worker` for one side: side, Redis URL,
/// PostgreSQL connection string, the two tables, stock, lease, work and
/// poll (ms), and whether deadbolt's checks are off.
fn worker_args(
    config: &Config,
    redis_url: &str,
    pg: &Postgres,
    t: &Tables,
    deadbolt: bool,
) -> Vec<String> {
    let ms = |d: Duration| d.as_millis().to_string();
    vec![
        if deadbolt { "deadbolt" } else { "textbook" }.to_string(),
        redis_url.to_string(),
        pg.conn_str(),
        t.stock.clone(),
        t.sales.clone(),
        config.stock.to_string(),
        ms(config.lease),
        ms(config.work),
        ms(config.poll),
        config.unfenced.to_string(),
    ]
}

/// How many values `--paused-worker` takes.
pub const WORKER_ARGS: usize = 10;

/// The paused worker as a process (`deadbolt-failures --paused-worker
/// ...`, started by [`run`]): worker 0 of one side, stopped on its first
/// hold; prints `paused-worker: done <pg refused> <redis refused>` at the
/// end.
///
/// # Errors
/// Arguments that do not parse, a server that cannot be reached.
pub async fn paused_worker(args: &[String]) -> anyhow::Result<()> {
    let [side, redis_url, pg, stock_t, sales_t, stock, lease, work, poll, unfenced] = args else {
        anyhow::bail!("--paused-worker takes {WORKER_ARGS} values");
    };
    let ms = |v: &String| -> anyhow::Result<Duration> { Ok(Duration::from_millis(v.parse()?)) };
    let config = Config {
        stock: stock.parse()?,
        lease: ms(lease)?,
        work: ms(work)?,
        poll: ms(poll)?,
        unfenced: unfenced.parse()?,
        ..Config::default()
    };
    let (db, conn) = tokio_postgres::connect(pg, tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let t = Tables {
        stock: stock_t.clone(),
        sales: sales_t.clone(),
    };
    let deadbolt = side == "deadbolt";
    let (a, b) = worker(&config, redis_url, &db, &t, 0, deadbolt, Pause::Stopped).await?;
    println!("paused-worker: done {a} {b}");
    Ok(())
}

/// Run worker 0 as a process of `exe`: stop it (SIGSTOP) once it has read
/// on its first hold, say so on `stopped`, continue it (SIGCONT) `pause`
/// later. Returns its tally.
async fn stopped_worker(
    exe: &std::path::Path,
    args: Vec<String>,
    pause: Duration,
    stopped: tokio::sync::oneshot::Sender<()>,
) -> anyhow::Result<(u64, u64)> {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let mut child = tokio::process::Command::new(exe)
        .arg("--paused-worker")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("start {}", exe.display()))?;
    let pid = Pid::from_raw(i32::try_from(child.id().context("the worker's pid")?)?);
    let mut stdin = child.stdin.take().context("the worker's stdin")?;
    let mut lines =
        tokio::io::BufReader::new(child.stdout.take().context("the worker's stdout")?).lines();
    let mut tally = None;
    let mut stopped = Some(stopped);
    while let Some(line) = lines.next_line().await? {
        if line == READ_LINE {
            kill(pid, Signal::SIGSTOP)?;
            if let Some(tx) = stopped.take() {
                let _ = tx.send(());
            }
            stdin.write_all(b"go\n").await?;
            stdin.flush().await?;
            tokio::time::sleep(pause).await;
            kill(pid, Signal::SIGCONT)?;
        } else if let Some(rest) = line.strip_prefix("paused-worker: done ") {
            let mut n = rest.split(' ').map(str::parse::<u64>);
            tally = Some((n.next().context("tally")??, n.next().context("tally")??));
        }
    }
    let status = child.wait().await?;
    anyhow::ensure!(status.success(), "the paused worker failed: {status}");
    tally.context("the paused worker printed no tally")
}

async fn side(config: &Config, pg: &Postgres, deadbolt: bool) -> anyhow::Result<Side> {
    let redis = tokio::task::spawn_blocking(RedisServer::start).await??;
    let tag = if deadbolt { "deadbolt" } else { "textbook" };
    let t = Tables {
        stock: format!("s1_stock_{tag}"),
        sales: format!("s1_sales_{tag}"),
    };
    let db = pg.connect().await?;
    db.batch_execute(&format!(
        "DROP TABLE IF EXISTS {stock}, {sales};
         CREATE TABLE {stock} (id int PRIMARY KEY, n bigint NOT NULL, last_token bigint NOT NULL);
         INSERT INTO {stock} VALUES (1, {}, 0);
         CREATE TABLE {sales} (id bigserial PRIMARY KEY, worker int NOT NULL, token bigint);",
        config.stock,
        stock = t.stock,
        sales = t.sales,
    ))
    .await?;
    let start = Instant::now();
    let t = Arc::new(t);
    let mut workers = Vec::new();
    for w in 0..config.workers {
        let (config, t, url) = (config.clone(), Arc::clone(&t), redis.url());
        if w == 0 {
            if let Some(exe) = &config.worker_exe {
                // The process holds the lock first: the others start once
                // it is stopped between its read and its write.
                let args = worker_args(&config, &url, pg, &t, deadbolt);
                let (exe, pause) = (exe.clone(), config.pause);
                let (tx, rx) = tokio::sync::oneshot::channel();
                let task = tokio::spawn(async move { stopped_worker(&exe, args, pause, tx).await });
                if rx.await.is_err() {
                    task.await??;
                    anyhow::bail!("the paused worker ended before its first read");
                }
                workers.push(task);
                continue;
            }
        }
        let db = pg.connect().await?;
        let first = if w == 0 { Pause::Sleep } else { Pause::Work };
        workers.push(tokio::spawn(async move {
            worker(&config, &url, &db, &t, w, deadbolt, first).await
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
        .query_one(&format!("SELECT count(*) FROM {}", t.sales), &[])
        .await?
        .get(0);
    let left: i64 = db
        .query_one(&format!("SELECT n FROM {} WHERE id = 1", t.stock), &[])
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
    t: &Tables,
    raw: &redis::aio::MultiplexedConnection,
    w: usize,
    pause: Pause,
) -> anyhow::Result<Sale> {
    let (stock_t, sales_t) = (t.stock.as_str(), t.sales.as_str());
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
    pause_point(config, pause).await?;
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
