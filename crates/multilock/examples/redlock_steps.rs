//! Where a Redlock lock+unlock spends its time: one task locks and unlocks
//! distinct names on three throwaway servers, step by step, beside the
//! same steps done with plain commands (SET NX PX and a compare-and-delete
//! script, sent to the three servers at once, as rslock does) and beside a
//! single `Lock` on one server. Prints p50/p99 per step and the client CPU
//! per lock+unlock (this process's /proc utime+stime over the run).
//!
//! `cargo run --release -p deadbolt-multilock --example redlock_steps [N]`

use std::time::{Duration, Instant};

use deadbolt_core::{Acquire, Client, LeaseMode, WaitMode};
use deadbolt_multilock::Redlock;
use deadbolt_testkit::RedisServer;
use futures::future::join_all;
use redis::aio::MultiplexedConnection;

/// This process's CPU time so far, in clock ticks (1/100 s).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    f.get(11).and_then(|u| u.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Per-step samples of one contender, and its CPU ticks.
struct Steps {
    name: &'static str,
    lock: Vec<Duration>,
    unlock: Vec<Duration>,
    ticks: u64,
}

/// The `permille`-th sample in order, in µs.
fn pct(v: &mut [Duration], permille: usize) -> u128 {
    v.sort();
    v[(v.len() - 1) * permille / 1000].as_micros()
}

impl Steps {
    fn new(name: &'static str) -> Steps {
        Steps {
            name,
            lock: vec![],
            unlock: vec![],
            ticks: 0,
        }
    }

    fn print(mut self, n: usize) {
        let mut total: Vec<Duration> = self
            .lock
            .iter()
            .zip(&self.unlock)
            .map(|(a, b)| *a + *b)
            .collect();
        println!(
            "{:<22} lock p50 {:>6} p99 {:>6}  unlock p50 {:>6} p99 {:>6}  both p50 {:>6}  client CPU {:>5} µs/op",
            self.name,
            pct(&mut self.lock, 500),
            pct(&mut self.lock, 990),
            pct(&mut self.unlock, 500),
            pct(&mut self.unlock, 990),
            pct(&mut total, 500),
            self.ticks * 10_000 / n as u64,
        );
    }
}

/// SET `key` NX PX on every server at once (rslock's lock step); true when
/// all of them granted it.
async fn raw_lock(conns: &[MultiplexedConnection], key: &str) -> bool {
    let r: Vec<redis::RedisResult<Option<String>>> = join_all(conns.iter().map(|c| {
        let mut c = c.clone();
        async move {
            redis::cmd("SET")
                .arg(key)
                .arg("me")
                .arg("NX")
                .arg("PX")
                .arg(30_000)
                .query_async(&mut c)
                .await
        }
    }))
    .await;
    r.iter().all(|r| matches!(r, Ok(Some(_))))
}

/// The compare-and-delete of `key` on every server at once.
async fn raw_unlock(conns: &[MultiplexedConnection], script: &redis::Script, key: &str) {
    let _: Vec<redis::RedisResult<i64>> = join_all(conns.iter().map(|c| {
        let mut c = c.clone();
        let mut inv = script.key(key);
        inv.arg("me");
        async move { inv.invoke_async(&mut c).await }
    }))
    .await;
}

/// `n` sequential try-acquires (with `lease`) and unlocks of the handles
/// `make(i)` gives, timed step by step.
async fn time_acquires<A: Acquire>(
    name: &'static str,
    n: usize,
    lease: LeaseMode,
    make: impl Fn(usize) -> A,
    unlock: impl AsyncFn(A::Guard),
) -> Steps {
    let mut s = Steps::new(name);
    let t0 = cpu_ticks();
    for i in 0..n {
        let handle = make(i);
        let t = Instant::now();
        let g = handle
            .acquire_with(lease, WaitMode::Try)
            .await
            .unwrap()
            .unwrap();
        s.lock.push(t.elapsed());
        let t = Instant::now();
        unlock(g).await;
        s.unlock.push(t.elapsed());
    }
    s.ticks = cpu_ticks() - t0;
    s
}

const UNLOCK: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3000);
    let servers: Vec<RedisServer> = (0..3)
        .map(|_| RedisServer::start().expect("redis-server"))
        .collect();
    let mut clients = Vec::new();
    for s in &servers {
        clients.push(Client::connect(&s.url()).await.expect("connect"));
    }
    let mut conns = Vec::new();
    for s in &servers {
        conns.push(s.conn().await);
    }
    let script = redis::Script::new(UNLOCK);
    let rounds = if std::env::var_os("ONLY_CONCURRENT").is_some() {
        0
    } else {
        2
    };
    let (watchdog, fixed) = (
        LeaseMode::Watchdog,
        LeaseMode::Fixed(Duration::from_secs(30)),
    );
    for round in 0..rounds {
        // Raw: SET NX PX on all three at once, then the compare-and-delete.
        let mut raw = Steps::new("raw 3 servers");
        let t0 = cpu_ticks();
        for i in 0..n {
            let key = format!("raw:{round}:{i}");
            let t = Instant::now();
            assert!(raw_lock(&conns, &key).await);
            raw.lock.push(t.elapsed());
            let t = Instant::now();
            raw_unlock(&conns, &script, &key).await;
            raw.unlock.push(t.elapsed());
        }
        raw.ticks = cpu_ticks() - t0;
        raw.print(n);

        for (name, lease) in [
            ("lock, watchdog lease", watchdog),
            ("lock, fixed lease", fixed),
        ] {
            let c = &clients[0];
            let make = |i| deadbolt_lock::Lock::new(c, &format!("one:{round}:{name}:{i}"));
            time_acquires(name, n, lease, make, async |g| g.unlock().await.unwrap())
                .await
                .print(n);
        }
        for (name, lease) in [
            ("redlock, watchdog lease", watchdog),
            ("redlock, fixed lease", fixed),
        ] {
            let make = |i| Redlock::new(&clients, &format!("red:{round}:{name}:{i}")).unwrap();
            time_acquires(name, n, lease, make, async |g| g.unlock().await.unwrap())
                .await
                .print(n);
        }
        println!();
    }
    concurrent(&clients, &conns, n).await;
}

/// Four tasks at once, as the bench's multi row runs them: acq/s and the
/// lock+unlock p50, Redlock beside plain commands on the same servers.
async fn concurrent(clients: &[Client], conns: &[MultiplexedConnection], n: usize) {
    const TASKS: usize = 4;
    let script = redis::Script::new(UNLOCK);
    for which in ["raw 3 servers x4", "redlock lock() x4"] {
        let t0 = Instant::now();
        let c0 = cpu_ticks();
        let tasks = (0..TASKS).map(|t| {
            let clients = clients.to_vec();
            let conns = conns.to_vec();
            let script = script.clone();
            tokio::spawn(async move {
                let mut times = Vec::new();
                for i in 0..n / TASKS {
                    let name = format!("c:{which}:{t}:{i}");
                    let start = Instant::now();
                    if which.starts_with("raw") {
                        raw_lock(&conns, &name).await;
                        raw_unlock(&conns, &script, &name).await;
                    } else {
                        let rl = Redlock::new(&clients, &name).unwrap();
                        rl.lock().await.unwrap().unlock().await.unwrap();
                    }
                    times.push(start.elapsed());
                }
                times
            })
        });
        let mut all: Vec<Duration> = Vec::new();
        for t in join_all(tasks).await {
            all.extend(t.unwrap());
        }
        let t0_us = t0.elapsed().as_micros().max(1);
        let ticks = cpu_ticks() - c0;
        let count = all.len();
        println!(
            "{which:<22} {:>6} acq/s  lock+unlock p50 {:>6} µs  p99 {:>6} µs  client CPU {:>5} µs/op",
            (count as u128 * 1_000_000) / t0_us,
            pct(&mut all, 500),
            pct(&mut all, 990),
            ticks * 10_000 / count as u64
        );
    }
}
