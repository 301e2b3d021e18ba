//! The floor under the Semaphore's cost at hold 0: the bench's semaphore
//! row (4 permits, 8 waiters over 4 clients taking one permit each, hold 0,
//! think 0) on one throwaway redis-server, three ways one after another,
//! `ROUNDS` times over:
//!
//! - `sem`: deadbolt's `Semaphore` (`acquire(1)` and `release()`);
//! - `floor`: the least a strict-FIFO semaphore with leased permits and
//!   grants inside the release runs (`deadbolt_bench::floor`'s
//!   `floor_sem_acquire.lua` and `floor_sem_release.lua`: a ZSET of holds
//!   with their lease deadlines, a LIST of waiters, a PUBLISH to the
//!   granted waiter's client), waited for as deadbolt waits: one subscriber
//!   connection per client, subscribed once, a grant taken from the
//!   message with no try of its own. Nothing a fault or a retry needs
//!   (each script's header lists what is left out), so it is a lower bound
//!   for any semaphore with those guarantees, not a usable one;
//! - `poll`: the bench's `sem-poll` (its script, a ZREM to release, a try
//!   every 100 ms, the bench's `--poll-interval`, while busy).
//!
//! For each: acquisitions per second, the least- over the most-served
//! waiter, the server's CPU per acquisition (INFO cpu: its event loop and
//! system calls included; the server is the bottleneck at hold 0, so
//! acq/s follows it), this process's CPU per acquisition, and the commands
//! per acquisition (sent and run inside scripts), and the share of
//! acquisitions that queued (floor only: the others cannot tell). With
//! `SEM_FLOOR_BREAKDOWN` set, each way's commands (calls and commandstats
//! µs per acquisition) are listed above its line.
//!
//! `cargo run --release -p deadbolt-bench --example sem_floor [SECONDS]`

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use deadbolt_bench::floor::first_arg;
use deadbolt_bench::floor::{
    commandstats, process_cpu_us, reset_stats, server_cpu_us, ADMIN_COMMANDS,
    FLOOR_SEM_ACQUIRE_LUA, FLOOR_SEM_RELEASE_LUA, SEM_POLL_ACQUIRE_LUA,
};
use deadbolt_core::Client;
use deadbolt_testkit::RedisServer;
use futures::StreamExt as _;
use redis::aio::MultiplexedConnection;
use tokio::sync::oneshot;

const PERMITS: u32 = 4;
const WAITERS: usize = 8;
const CLIENTS: usize = 4;
const ROUNDS: usize = 3;
const LEASE_MS: u64 = 30_000;
/// sem-poll's pause after a busy try (the bench's `--poll-interval`).
const POLL: Duration = Duration::from_millis(100);

static FLOOR_ACQUIRE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(FLOOR_SEM_ACQUIRE_LUA.source()));
static FLOOR_RELEASE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(FLOOR_SEM_RELEASE_LUA.source()));
static POLL_ACQUIRE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(SEM_POLL_ACQUIRE_LUA.source()));

#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Sem,
    Floor,
    Poll,
}

/// Waiters of one floor client, by attempt id, told when a release grants
/// them their permit.
type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<()>>>>;

/// One floor client: a command connection, and the subscriber that hands
/// each grant on its channel to the waiter of that attempt.
struct FloorClient {
    id: String,
    conn: MultiplexedConnection,
    pending: Pending,
    /// Dropped (and the subscriber closed) with the client.
    _listener: tokio::task::JoinHandle<()>,
}

impl FloorClient {
    async fn connect(url: &str, id: String, holds: &str) -> FloorClient {
        let client = redis::Client::open(url).expect("url");
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        for s in [&FLOOR_ACQUIRE, &FLOOR_RELEASE] {
            s.load_async(&mut conn).await.expect("script load");
        }
        let (mut sink, mut stream) = client.get_async_pubsub().await.expect("pubsub").split();
        sink.subscribe(format!("{holds}:ch:{id}"))
            .await
            .expect("subscribe");
        let pending: Pending = Arc::default();
        let seen = pending.clone();
        let listener = tokio::spawn(async move {
            let _sink = sink;
            while let Some(msg) = stream.next().await {
                let Ok(attempt) = msg.get_payload::<String>() else {
                    continue;
                };
                if let Some(tx) = seen.lock().expect("no panic").remove(&attempt) {
                    let _ = tx.send(());
                }
            }
        });
        FloorClient {
            id,
            conn,
            pending,
            _listener: listener,
        }
    }

    /// Take a permit (waiting in the queue when none is free), then give
    /// it back. Returns whether it queued.
    async fn cycle(&self, holds: &str, queue: &str, attempt: String) -> bool {
        let mut conn = self.conn.clone();
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .expect("no panic")
            .insert(attempt.clone(), tx);
        let granted: i64 = FLOOR_ACQUIRE
            .key(holds)
            .key(queue)
            .arg(&attempt)
            .arg(LEASE_MS)
            .arg(PERMITS)
            .arg(&self.id)
            .invoke_async(&mut conn)
            .await
            .expect("floor acquire");
        let queued = granted != 1;
        if queued {
            tokio::time::timeout(Duration::from_secs(10), rx)
                .await
                .expect("a grant within 10 s")
                .expect("the listener runs");
        } else {
            self.pending.lock().expect("no panic").remove(&attempt);
        }
        let released: i64 = FLOOR_RELEASE
            .key(holds)
            .key(queue)
            .arg(&attempt)
            .arg(LEASE_MS)
            .invoke_async(&mut conn)
            .await
            .expect("floor release");
        assert!(released > 0, "{attempt}: its permit was gone at release");
        queued
    }
}

/// One sem-poll acquire (a try every `POLL` while busy) and its ZREM.
async fn poll_cycle(conn: &mut MultiplexedConnection, key: &str, id: &str) {
    loop {
        let taken: i64 = POLL_ACQUIRE
            .key(key)
            .arg(id)
            .arg(PERMITS)
            .arg(LEASE_MS)
            .invoke_async(conn)
            .await
            .expect("poll acquire");
        if taken == 1 {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let removed: i64 = redis::cmd("ZREM")
        .arg(key)
        .arg(id)
        .query_async(conn)
        .await
        .expect("zrem");
    assert_eq!(removed, 1, "{id}: its permit was gone at release");
}

/// What one way's run counted: acquisitions per waiter, and how many queued.
struct Counts {
    per_waiter: Vec<u64>,
    queued: u64,
}

/// `WAITERS` tasks, each running `cycle(waiter, n)` for its n-th
/// acquisition until `until`; their acquisitions, in order.
async fn waiters<F, Fut>(until: Instant, cycle: F) -> Vec<u64>
where
    F: Fn(usize, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let tasks = (0..WAITERS).map(|w| {
        let cycle = cycle.clone();
        tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < until {
                cycle(w, n).await;
                n += 1;
            }
            n
        })
    });
    futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(|r| r.expect("a waiter panicked"))
        .collect()
}

/// deadbolt's `Semaphore`: `acquire(1)` and `release()`.
async fn run_sem(url: &str, name: &str, until: Instant) -> Counts {
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(Client::connect(url).await.expect("connect"));
    }
    let sem = deadbolt_semaphore::Semaphore::new(&clients[0], name);
    assert!(sem.try_set_permits(PERMITS.into()).await.expect("permits"));
    // A handle per waiter, as the bench's contender makes them.
    let sems: Arc<Vec<_>> = Arc::new(
        (0..WAITERS)
            .map(|w| deadbolt_semaphore::Semaphore::new(&clients[w % CLIENTS], name))
            .collect(),
    );
    let per_waiter = waiters(until, move |w, _| {
        let sem = sems[w].clone();
        async move {
            let p = sem.acquire(1).await.expect("acquire");
            p.release().await.expect("release");
        }
    })
    .await;
    for c in clients {
        c.shutdown().await;
    }
    Counts {
        per_waiter,
        queued: 0,
    }
}

/// The floor: its scripts, waited for on one subscriber per client.
async fn run_floor(url: &str, name: &str, until: Instant) -> Counts {
    let holds = format!("{{{name}}}:h");
    let queue = format!("{{{name}}}:q");
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        clients.push(FloorClient::connect(url, format!("c{c}"), &holds).await);
    }
    let clients = Arc::new(clients);
    let queued = Arc::new(AtomicU64::new(0));
    let count = queued.clone();
    let per_waiter = waiters(until, move |w, n| {
        let (clients, queued) = (clients.clone(), count.clone());
        let (holds, queue) = (holds.clone(), queue.clone());
        async move {
            let client = &clients[w % CLIENTS];
            if client.cycle(&holds, &queue, format!("w{w}n{n}")).await {
                queued.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await;
    Counts {
        per_waiter,
        queued: queued.load(Ordering::Relaxed),
    }
}

/// sem-poll: its script, a try every `POLL` while busy, ZREM to release.
async fn run_poll(url: &str, name: &str, until: Instant) -> Counts {
    let key = format!("{{{name}}}:poll");
    let mut conns = Vec::new();
    for _ in 0..CLIENTS {
        let mut c = redis::Client::open(url)
            .expect("url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        POLL_ACQUIRE.load_async(&mut c).await.expect("script load");
        conns.push(c);
    }
    let conns = Arc::new(conns);
    let per_waiter = waiters(until, move |w, n| {
        let (mut conn, key) = (conns[w % CLIENTS].clone(), key.clone());
        async move { poll_cycle(&mut conn, &key, &format!("w{w}n{n}")).await }
    })
    .await;
    Counts {
        per_waiter,
        queued: 0,
    }
}

async fn run(way: Way, url: &str, round: usize, until: Instant) -> Counts {
    let name = format!("semfloor:{round}");
    match way {
        Way::Sem => run_sem(url, &name, until).await,
        Way::Floor => run_floor(url, &name, until).await,
        Way::Poll => run_poll(url, &name, until).await,
    }
}

#[allow(clippy::cast_precision_loss, reason = "counts stay far below 2^53")]
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let secs: f64 = first_arg(2.0);
    let srv = RedisServer::start().expect("redis-server");
    let url = srv.url();
    let mut admin = srv.conn().await;
    println!("{PERMITS} permits, {WAITERS} waiters over {CLIENTS} clients, hold 0, {secs} s a way");
    println!(
        "way      acq/s  least/most  server CPU µs/acq  client CPU µs/acq  commands/acq  queued"
    );
    for round in 0..ROUNDS {
        for (label, way) in [
            ("sem", Way::Sem),
            ("floor", Way::Floor),
            ("poll", Way::Poll),
        ] {
            let cpu0 = reset_stats(&mut admin).await.expect("CONFIG RESETSTAT");
            let client0 = process_cpu_us();
            let t0 = Instant::now();
            let counts = run(way, &url, round, t0 + Duration::from_secs_f64(secs)).await;
            let elapsed = t0.elapsed().as_secs_f64();
            let client = process_cpu_us() - client0;
            let cpu = server_cpu_us(&mut admin).await.expect("info") - cpu0;
            let stats = commandstats(&mut admin).await.expect("info");
            let commands: f64 = stats
                .iter()
                .filter(|(c, _)| !ADMIN_COMMANDS.contains(&c.as_str()))
                .map(|(_, s)| s.0)
                .sum();
            let total: u64 = counts.per_waiter.iter().sum();
            let n = total.max(1) as f64;
            let least = counts.per_waiter.iter().min().copied().unwrap_or(0) as f64;
            let most = counts.per_waiter.iter().max().copied().unwrap_or(0).max(1) as f64;
            let queued = if way == Way::Floor {
                format!("{:.0} %", counts.queued as f64 * 100.0 / n)
            } else {
                "-".into()
            };
            if std::env::var_os("SEM_FLOOR_BREAKDOWN").is_some() {
                for (c, (calls, us)) in &stats {
                    println!("    {c:<18} {:>5.2}/acq {:>6.2} µs/acq", calls / n, us / n);
                }
            }
            println!(
                "{label:<6} {:>7.0}  {:>10.2}  {:>17.1}  {:>17.1}  {:>12.1}  {queued:>6}",
                n / elapsed,
                least / most,
                cpu / n,
                client / n,
                commands / n,
            );
        }
    }
}
