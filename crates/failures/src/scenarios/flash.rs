//! Scenario 3: a flash sale.
//!
//! Thousands of buyers (tasks over a few dozen clients, each its own
//! connections) want 100 seats, buyer `i` seat `i mod 100`. Before the
//! sale opens, a seller holds every seat's lock, and every buyer waits on
//! its seat's. Then:
//!
//! 1. while they all wait: the Redis commands per second they cost
//!    (`INFO commandstats`, over a measured window, once the rate has
//!    settled), Redis's memory and this process's memory per waiting
//!    buyer;
//! 2. the seller releases every seat: each buyer in turn holds its seat,
//!    checks in PostgreSQL whether it is sold, and when it is not, holds
//!    it a few ms (the payment) and inserts the sale; the sales table's
//!    primary key is the seat, so a seat sold twice would be refused and
//!    counted. Measured: time until every seat is sold, the hand-off from
//!    one buyer's release to the next holder's grant (p50, p99), and the
//!    time until every buyer is done.
//!
//! textbook: [`PollLock`], a `SET NX` every 100 ms per waiting buyer.
//! deadbolt: `Lock`; a waiting buyer waits on its seat's Pub/Sub channel.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use deadbolt::prelude::*;
use deadbolt_testkit::RedisServer;
use tokio::sync::Notify;

use crate::report::{dur, num, Row};
use crate::textbook::PollLock;
use crate::Postgres;

/// Sizes of the run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Waiting buyers.
    pub buyers: usize,
    /// Clients they are spread over (each its own connections).
    pub clients: usize,
    /// Seats for sale.
    pub seats: usize,
    /// How long a sale holds its seat (the payment).
    pub hold: Duration,
    /// The textbook lock's sleep between tries.
    pub poll: Duration,
    /// The window over which the waiting buyers' commands are counted.
    pub window: Duration,
    /// Test only: deadbolt's buyers poll (`try_lock` and a sleep of
    /// `poll`) instead of waiting, to show what the commands count catches.
    pub polling: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            buyers: 10_000,
            clients: 20,
            seats: 100,
            hold: Duration::from_millis(5),
            poll: Duration::from_millis(100),
            window: Duration::from_secs(2),
            polling: false,
        }
    }
}

/// What one side's run counted.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// Redis commands per second while every buyer waited.
    pub waiting_cmds_per_sec: u64,
    /// The same per waiting buyer.
    pub cmds_per_buyer_per_sec: f64,
    /// Redis `used_memory` growth per waiting buyer, bytes.
    pub redis_bytes_per_buyer: f64,
    /// This process's resident memory growth per waiting buyer, bytes.
    pub client_bytes_per_buyer: f64,
    /// Sale rows (one per seat when nothing went wrong).
    pub sold: u64,
    /// Sales the unique seat key refused (a seat sold twice).
    pub double_sales_refused: u64,
    /// From the opening to the last seat's sale.
    pub sell_out: Duration,
    /// Release to the next holder's grant, median.
    pub handoff_p50: Duration,
    /// The same, 99th percentile.
    pub handoff_p99: Duration,
    /// From the opening until every buyer had its turn.
    pub drained: Duration,
}

/// Both sides' counts.
pub type Counts = crate::report::Sides<Config, Side>;

impl Counts {
    /// The table rows.
    pub fn rows(&self) -> Vec<Row> {
        const S: &str = "3. flash sale";
        let (t, d, c) = (&self.textbook, &self.deadbolt, &self.config);
        let per = |s: &Side| {
            format!(
                "{} · {:.2}",
                num(s.waiting_cmds_per_sec),
                s.cmds_per_buyer_per_sec
            )
        };
        let kb = |b: f64| {
            if b < 1024.0 {
                format!("{b:.0} B")
            } else {
                format!("{:.1} KB", b / 1024.0)
            }
        };
        vec![
            Row::new(
                S,
                format!(
                    "{} buyers over {} clients wait for {} seats: Redis commands/s · per buyer",
                    num(c.buyers as u64),
                    c.clients,
                    c.seats
                ),
                per(t),
                per(d),
            ),
            Row::new(
                S,
                "seats sold · sold twice (refused by the unique key)",
                format!("{} · {}", t.sold, t.double_sales_refused),
                format!("{} · {}", d.sold, d.double_sales_refused),
            ),
            Row::new(S, "time to sell out", dur(t.sell_out), dur(d.sell_out)),
            Row::new(
                S,
                "hand-off, release → next holder, p50 · p99",
                format!("{} · {}", dur(t.handoff_p50), dur(t.handoff_p99)),
                format!("{} · {}", dur(d.handoff_p50), dur(d.handoff_p99)),
            ),
            Row::new(
                S,
                "until every buyer had its turn",
                dur(t.drained),
                dur(d.drained),
            ),
            Row::new(
                S,
                "memory per waiting buyer: Redis · client",
                format!(
                    "{} · {}",
                    kb(t.redis_bytes_per_buyer),
                    kb(t.client_bytes_per_buyer)
                ),
                format!(
                    "{} · {}",
                    kb(d.redis_bytes_per_buyer),
                    kb(d.client_bytes_per_buyer)
                ),
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

/// One buyer's turn.
struct Turn {
    seat: usize,
    granted: Instant,
    released: Instant,
    sold_at: Option<Instant>,
    refused: bool,
}

/// The seat lock of either side.
enum SeatLock {
    Textbook(PollLock),
    Deadbolt(deadbolt::Lock, Duration, bool),
}

/// A hold of either side.
enum SeatHold {
    Textbook(PollLock, crate::textbook::PollHold),
    Deadbolt(deadbolt::LockGuard),
}

impl SeatLock {
    async fn lock(self) -> anyhow::Result<SeatHold> {
        Ok(match self {
            SeatLock::Textbook(l) => {
                let h = l.lock(Duration::from_secs(60)).await?;
                SeatHold::Textbook(l, h)
            }
            SeatLock::Deadbolt(l, _, false) => SeatHold::Deadbolt(l.lock().await?),
            SeatLock::Deadbolt(l, poll, true) => loop {
                if let Some(g) = l.try_lock().await? {
                    break SeatHold::Deadbolt(g);
                }
                tokio::time::sleep(poll).await;
            },
        })
    }
}

impl SeatHold {
    async fn unlock(self) {
        match self {
            SeatHold::Textbook(l, h) => {
                let _ = l.unlock(h).await;
            }
            SeatHold::Deadbolt(g) => {
                let _ = g.unlock().await;
            }
        }
    }
}

/// Total calls in `INFO commandstats`, less the INFO calls themselves.
async fn commands(conn: &mut redis::aio::MultiplexedConnection) -> anyhow::Result<u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    Ok(deadbolt_testkit::parse_commandstats(&info)
        .into_iter()
        .filter(|(c, _)| c != "info")
        .map(|(_, n)| n)
        .sum())
}

/// A connection without a response timeout: with 100,000 pollers a
/// reply can take longer than redis-rs's default allows.
async fn patient(redis: &RedisServer) -> anyhow::Result<redis::aio::MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    Ok(redis
        .client()
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

async fn used_memory(conn: &mut redis::aio::MultiplexedConnection) -> anyhow::Result<u64> {
    let info: String = redis::cmd("INFO").arg("memory").query_async(conn).await?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .context("INFO memory has no used_memory")
}

/// This process's resident set, bytes (`/proc/self/status`).
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[allow(clippy::cast_precision_loss)]
fn per(total: u64, n: usize) -> f64 {
    total as f64 / n as f64
}

/// Waits until the buyers' first tries are over and what is left is their
/// steady waiting cost: at least one command per buyer since `since`
/// (every buyer has tried once), then two 250 ms samples of the rate that
/// agree within a quarter (pollers poll on at a steady rate), or, with
/// `quiet` (deadbolt's waiters, which send nothing once asleep), two
/// samples of at most 5 commands. A saturated server runs the first tries
/// at a steady rate too: with 100,000 buyers the first rule opened the
/// window in the middle of deadbolt's first tries, and counted them as
/// waiting. Bounded at 30 s, or at 120 s with `quiet`: a window that
/// opens at the bound counts what the waiters still send then.
async fn settle(
    conn: &mut redis::aio::MultiplexedConnection,
    since: u64,
    buyers: usize,
    quiet: bool,
) -> anyhow::Result<()> {
    let buyers = u64::try_from(buyers)?;
    let mut last = commands(conn).await?;
    let mut prev_delta: Option<u64> = None;
    for _ in 0..if quiet { 480 } else { 120 } {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = commands(conn).await?;
        let delta = now - last;
        last = now;
        if now - since < buyers {
            continue;
        }
        if let Some(p) = prev_delta {
            let idle = delta <= 5 && p <= 5;
            if idle || (!quiet && delta * 4 <= p * 5 && p * 4 <= delta * 5) {
                return Ok(());
            }
        }
        prev_delta = Some(delta);
    }
    Ok(())
}

/// One side's servers, tables and clients, with every seat held by the
/// seller until the sale opens.
struct Sale {
    /// deadbolt's side (else the textbook lock's).
    deadbolt: bool,
    redis: RedisServer,
    table: &'static str,
    db: tokio_postgres::Client,
    pool: Vec<Arc<tokio_postgres::Client>>,
    stats: redis::aio::MultiplexedConnection,
    clients: Vec<deadbolt::Client>,
    conns: Vec<redis::aio::MultiplexedConnection>,
    seller: deadbolt::Client,
    closed: Vec<SeatHold>,
}

fn seat_name(s: usize) -> String {
    format!("seat:{s}")
}

impl Sale {
    /// A fresh Redis and sales table, the buyers' clients (deadbolt's, or
    /// connections for the textbook lock) and the seller holding every seat.
    async fn open(config: &Config, pg: &Postgres, deadbolt: bool) -> anyhow::Result<Sale> {
        let redis = tokio::task::spawn_blocking(RedisServer::start).await??;
        let table = if deadbolt {
            "s3_sales_deadbolt"
        } else {
            "s3_sales_textbook"
        };
        let db = pg.connect().await?;
        db.batch_execute(&format!(
            "DROP TABLE IF EXISTS {table};
             CREATE TABLE {table} (seat int PRIMARY KEY, buyer int NOT NULL);"
        ))
        .await?;
        let mut pool = Vec::new();
        for _ in 0..4 {
            pool.push(Arc::new(pg.connect().await?));
        }
        let stats = patient(&redis).await?;
        let mut clients = Vec::new();
        let mut conns = Vec::new();
        for _ in 0..config.clients {
            if deadbolt {
                clients.push(deadbolt::Client::connect(&redis.url()).await?);
            } else {
                conns.push(patient(&redis).await?);
            }
        }
        let seller = deadbolt::Client::connect(&redis.url()).await?;
        let seller_conn = patient(&redis).await?;
        let mut closed = Vec::new();
        for s in 0..config.seats {
            closed.push(if deadbolt {
                SeatHold::Deadbolt(seller.lock(&seat_name(s)).lock().await?)
            } else {
                let l = PollLock::new(seller_conn.clone(), seat_name(s), config.poll);
                let h = l
                    .try_lock(Duration::from_secs(300))
                    .await?
                    .context("seat free")?;
                SeatHold::Textbook(l, h)
            });
        }
        Ok(Sale {
            deadbolt,
            redis,
            table,
            db,
            pool,
            stats,
            clients,
            conns,
            seller,
            closed,
        })
    }

    /// Buyer `i`'s task: wait for its seat, buy it if nobody has (holding
    /// it `config.hold`), give it back; notifies `all_started` when the last
    /// buyer has started.
    fn buyer(
        &self,
        config: &Config,
        i: usize,
        started: &Arc<AtomicUsize>,
        all_started: &Arc<Notify>,
    ) -> tokio::task::JoinHandle<anyhow::Result<Turn>> {
        let seat = i % config.seats;
        let lock = if self.deadbolt {
            SeatLock::Deadbolt(
                self.clients[i % config.clients].lock(&seat_name(seat)),
                config.poll,
                config.polling,
            )
        } else {
            SeatLock::Textbook(PollLock::new(
                self.conns[i % config.clients].clone(),
                seat_name(seat),
                config.poll,
            ))
        };
        let db = Arc::clone(&self.pool[i % self.pool.len()]);
        let (started, all_started) = (Arc::clone(started), Arc::clone(all_started));
        let (n, hold, table) = (config.buyers, config.hold, self.table);
        tokio::spawn(async move {
            if started.fetch_add(1, Ordering::SeqCst) + 1 == n {
                all_started.notify_one();
            }
            let h = lock.lock().await?;
            let granted = Instant::now();
            let seat_i = i32::try_from(seat)?;
            let free = db
                .query_opt(
                    &format!("SELECT 1 FROM {table} WHERE seat = $1"),
                    &[&seat_i],
                )
                .await?
                .is_none();
            let (mut sold_at, mut refused) = (None, false);
            if free {
                tokio::time::sleep(hold).await;
                let n = db
                    .execute(
                        &format!("INSERT INTO {table} VALUES ($1, $2) ON CONFLICT DO NOTHING"),
                        &[&seat_i, &i32::try_from(i)?],
                    )
                    .await?;
                sold_at = Some(Instant::now());
                refused = n == 0;
            }
            let released = Instant::now();
            h.unlock().await;
            anyhow::Ok(Turn {
                seat,
                granted,
                released,
                sold_at,
                refused,
            })
        })
    }
}

/// The hand-off gaps of every seat's turns, in order: from one buyer's
/// release to the next buyer's grant.
fn handoff_gaps(turns: &[Turn], seats: usize) -> Vec<Duration> {
    let mut by_seat = vec![Vec::new(); seats];
    for t in turns {
        by_seat[t.seat].push((t.granted, t.released));
    }
    let mut handoffs = Vec::new();
    for mut v in by_seat {
        v.sort();
        handoffs.extend(
            v.windows(2)
                .map(|w| w[1].0.saturating_duration_since(w[0].1)),
        );
    }
    handoffs.sort();
    handoffs
}

/// One side of the sale: every buyer waits while the seller holds the
/// seats (the window measures what waiting costs), then the sale opens and
/// runs until every buyer had its turn.
async fn side(config: &Config, pg: &Postgres, deadbolt: bool) -> anyhow::Result<Side> {
    let mut sale = Sale::open(config, pg, deadbolt).await?;
    let mem0 = used_memory(&mut sale.stats).await?;
    let rss0 = rss();
    let c_start = commands(&mut sale.stats).await?;
    let started = Arc::new(AtomicUsize::new(0));
    let all_started = Arc::new(Notify::new());
    let buyers: Vec<_> = (0..config.buyers)
        .map(|i| sale.buyer(config, i, &started, &all_started))
        .collect();
    all_started.notified().await;
    settle(&mut sale.stats, c_start, config.buyers, deadbolt).await?;
    let c0 = commands(&mut sale.stats).await?;
    let t0 = Instant::now();
    tokio::time::sleep(config.window).await;
    let c1 = commands(&mut sale.stats).await?;
    let window = t0.elapsed();
    let mem1 = used_memory(&mut sale.stats).await?;
    let rss1 = rss();

    let mut out = Side {
        waiting_cmds_per_sec: (c1 - c0) * 1000 / u64::try_from(window.as_millis().max(1))?,
        redis_bytes_per_buyer: per(mem1.saturating_sub(mem0), config.buyers),
        client_bytes_per_buyer: per(rss1.saturating_sub(rss0), config.buyers),
        ..Side::default()
    };
    out.cmds_per_buyer_per_sec = per(c1 - c0, config.buyers) / window.as_secs_f64();

    let open = Instant::now();
    futures::future::join_all(
        std::mem::take(&mut sale.closed)
            .into_iter()
            .map(SeatHold::unlock),
    )
    .await;
    let mut turns = Vec::with_capacity(config.buyers);
    for b in buyers {
        turns.push(b.await??);
    }
    out.drained = open.elapsed();
    out.sell_out = turns
        .iter()
        .filter_map(|t| t.sold_at)
        .max()
        .map_or(Duration::ZERO, |t| t - open);
    out.double_sales_refused = turns.iter().filter(|t| t.refused).count() as u64;
    let sold: i64 = sale
        .db
        .query_one(&format!("SELECT count(*) FROM {}", sale.table), &[])
        .await?
        .get(0);
    out.sold = u64::try_from(sold)?;
    let handoffs = handoff_gaps(&turns, config.seats);
    let pct = |p: usize| {
        handoffs
            .get(handoffs.len() * p / 100)
            .copied()
            .unwrap_or_default()
    };
    out.handoff_p50 = pct(50);
    out.handoff_p99 = pct(99);
    for c in sale.clients {
        c.shutdown().await;
    }
    sale.seller.shutdown().await;
    drop(sale.redis);
    Ok(out)
}
