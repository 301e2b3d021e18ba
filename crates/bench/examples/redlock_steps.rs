//! Where a Redlock lock+unlock spends its time: one task locks and unlocks
//! distinct names on three throwaway servers, step by step, beside the
//! same steps done with plain commands (SET NX PX and a compare-and-delete
//! script, sent to the three servers at once, as rslock does), beside the
//! fenced lock's floor sent to the three at once (`deadbolt_bench::floor`'s
//! `floor_lock.lua` and `floor_unlock.lua`: what a Redlock whose parts are
//! reentrant and fenced cannot do without) and beside a single `Lock` on
//! one server. Prints p50/p99 per step and the client CPU per lock+unlock
//! (this process's rusage over the run); then four tasks at once, as the
//! bench's multi row runs them, with the servers' CPU (INFO cpu, summed
//! over the three) per lock+unlock too.
//!
//! `cargo run --release -p deadbolt-bench --example redlock_steps [N]`

use std::time::{Duration, Instant};

use deadbolt_bench::floor::first_arg;
use deadbolt_bench::floor::{process_cpu_us, server_cpu_us, FLOOR_LOCK_LUA, FLOOR_UNLOCK_LUA};
use deadbolt_core::{Acquire, Client, LeaseMode, WaitMode};
use deadbolt_multilock::Redlock;
use deadbolt_testkit::RedisServer;
use futures::future::join_all;
use redis::aio::MultiplexedConnection;

/// This process's CPU time so far, µs.
fn cpu_us() -> u64 {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a process's CPU µs, positive and far below 2^64"
    )]
    let us = process_cpu_us() as u64;
    us
}

/// Per-step samples of one contender, and its CPU µs.
struct Steps {
    name: &'static str,
    lock: Vec<Duration>,
    unlock: Vec<Duration>,
    cpu: u64,
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
            cpu: 0,
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
            "{:<24} lock p50 {:>6} p99 {:>6}  unlock p50 {:>6} p99 {:>6}  both p50 {:>6}  client CPU {:>5} µs/op",
            self.name,
            pct(&mut self.lock, 500),
            pct(&mut self.lock, 990),
            pct(&mut self.unlock, 500),
            pct(&mut self.unlock, 990),
            pct(&mut total, 500),
            self.cpu / n as u64,
        );
    }
}

/// A lock taken with plain commands on every server at once.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plain {
    /// rslock's steps: SET NX PX, and the compare-and-delete script.
    Raw,
    /// The fenced lock's floor: `floor_lock.lua` and `floor_unlock.lua`
    /// (the fencing counter beside the key, in its hash slot).
    Floor,
}

/// The scripts a [`Plain`] way runs.
struct Scripts {
    unlock: redis::Script,
    floor_lock: redis::Script,
    floor_unlock: redis::Script,
}

impl Scripts {
    fn new() -> Scripts {
        Scripts {
            unlock: redis::Script::new(UNLOCK),
            floor_lock: redis::Script::new(FLOOR_LOCK_LUA.source()),
            floor_unlock: redis::Script::new(FLOOR_UNLOCK_LUA.source()),
        }
    }
}

/// Take `key` on every server at once; true when all of them granted it.
async fn plain_lock(
    way: Plain,
    conns: &[MultiplexedConnection],
    scripts: &Scripts,
    key: &str,
) -> bool {
    let r: Vec<redis::RedisResult<i64>> = join_all(conns.iter().map(|c| {
        let mut c = c.clone();
        async move {
            match way {
                Plain::Raw => redis::cmd("SET")
                    .arg(key)
                    .arg("me")
                    .arg("NX")
                    .arg("PX")
                    .arg(30_000)
                    .query_async::<Option<String>>(&mut c)
                    .await
                    .map(|v| i64::from(v.is_some())),
                Plain::Floor => {
                    scripts
                        .floor_lock
                        .key(format!("{{{key}}}:h"))
                        .key(format!("{{{key}}}:fence"))
                        .arg("me")
                        .arg(30_000)
                        .invoke_async(&mut c)
                        .await
                }
            }
        }
    }))
    .await;
    r.iter().all(|r| matches!(r, Ok(v) if *v > 0))
}

/// Give `key` back on every server at once.
async fn plain_unlock(way: Plain, conns: &[MultiplexedConnection], scripts: &Scripts, key: &str) {
    let _: Vec<redis::RedisResult<i64>> = join_all(conns.iter().map(|c| {
        let mut c = c.clone();
        let mut inv = match way {
            Plain::Raw => scripts.unlock.key(key),
            Plain::Floor => scripts.floor_unlock.key(format!("{{{key}}}:h")),
        };
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
    let t0 = cpu_us();
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
    s.cpu = cpu_us() - t0;
    s
}

/// `n` sequential lock+unlocks of a [`Plain`] way, timed step by step.
async fn time_plain(
    name: &'static str,
    way: Plain,
    n: usize,
    round: usize,
    conns: &[MultiplexedConnection],
    scripts: &Scripts,
) -> Steps {
    let mut s = Steps::new(name);
    let t0 = cpu_us();
    for i in 0..n {
        let key = format!("{name}:{round}:{i}");
        let t = Instant::now();
        assert!(plain_lock(way, conns, scripts, &key).await);
        s.lock.push(t.elapsed());
        let t = Instant::now();
        plain_unlock(way, conns, scripts, &key).await;
        s.unlock.push(t.elapsed());
    }
    s.cpu = cpu_us() - t0;
    s
}

const UNLOCK: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = first_arg(3000);
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
    let scripts = Scripts::new();
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
        for (name, way) in [
            ("raw 3 servers", Plain::Raw),
            ("floor 3 servers", Plain::Floor),
        ] {
            time_plain(name, way, n, round, &conns, &scripts)
                .await
                .print(n);
        }
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

/// The servers' CPU so far, µs, summed.
async fn servers_cpu(conns: &[MultiplexedConnection]) -> f64 {
    let mut sum = 0.0;
    for c in conns {
        sum += server_cpu_us(&mut c.clone()).await.expect("INFO cpu");
    }
    sum
}

/// Four tasks at once, as the bench's multi row runs them: acq/s, the
/// lock+unlock p50, and the client's and the servers' CPU per lock+unlock;
/// Redlock beside plain commands and the fenced floor on the same servers.
async fn concurrent(clients: &[Client], conns: &[MultiplexedConnection], n: usize) {
    const TASKS: usize = 4;
    let scripts = std::sync::Arc::new(Scripts::new());
    for (which, way) in [
        ("raw 3 servers x4", Some(Plain::Raw)),
        ("floor 3 servers x4", Some(Plain::Floor)),
        ("redlock lock() x4", None),
    ] {
        let t0 = Instant::now();
        let c0 = cpu_us();
        let s0 = servers_cpu(conns).await;
        let tasks = (0..TASKS).map(|t| {
            let clients = clients.to_vec();
            let conns = conns.to_vec();
            let scripts = scripts.clone();
            tokio::spawn(async move {
                let mut times = Vec::new();
                for i in 0..n / TASKS {
                    let name = format!("c:{which}:{t}:{i}");
                    let start = Instant::now();
                    if let Some(way) = way {
                        plain_lock(way, &conns, &scripts, &name).await;
                        plain_unlock(way, &conns, &scripts, &name).await;
                    } else {
                        let rl = Redlock::new(&clients, &name).unwrap();
                        rl.lock().await.unwrap().unlock().await.unwrap();
                    }
                    times.push(start.elapsed());
                }
                times
            })
        });
        let mut all: Vec<Duration> = join_all(tasks)
            .await
            .into_iter()
            .flat_map(|t| t.expect("a task panicked"))
            .collect();
        let t0_us = t0.elapsed().as_micros().max(1);
        let cpu = cpu_us() - c0;
        let server = servers_cpu(conns).await - s0;
        let count = all.len();
        println!(
            "{which:<22} {:>6} acq/s  lock+unlock p50 {:>6} µs  p99 {:>6} µs  client CPU {:>5} µs/op  servers' CPU {:>6.1} µs/op",
            (count as u128 * 1_000_000) / t0_us,
            pct(&mut all, 500),
            pct(&mut all, 990),
            cpu / count as u64,
            server / f64::from(u32::try_from(count).unwrap_or(u32::MAX)),
        );
    }
}
