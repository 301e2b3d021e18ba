//! The floor under a hand-off between clients on this machine, without any
//! lock: what `FairLock` (and `Lock` with one client per waiter) could reach
//! at best, beside what a polling lock's releasing task gets by re-taking
//! its own lock.
//!
//! `cargo run --release --example handoff_floor [-- redis://host:port/ [clients]]`:
//! with no URL a throwaway redis-server is started on a free loopback port
//! and stopped at the end. Each row runs 3 s on one tokio runtime, as the
//! bench does:
//!
//! - *relay*: `clients` clients (default 4), each with a command connection
//!   and a subscriber connection, pass one token round robin: on a message
//!   a client PUBLISHes to the next client's channel. One hop is one command
//!   and one pushed message, as a hand-off to another client is at least.
//! - *relay through a script*: the same PUBLISH inside a one-line EVAL (the
//!   fixed cost of running a script per hop).
//! - *one task re-taking*: a single task runs `SET NX PX` and `DEL` back to
//!   back, two round trips per cycle: a polling lock whose releasing task
//!   takes the lock again before anyone else polls.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;

const RUN: Duration = Duration::from_secs(3);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = deadbolt_testkit::RedisServer::given_or_started(std::env::args().nth(1))?;
    let clients: usize = match std::env::args().nth(2) {
        Some(n) => n.parse()?,
        None => 4,
    };
    let client = redis::Client::open(url.as_str())?;
    for script in [false, true] {
        let rate = relay(&client, clients, script).await?;
        let what = if script {
            "relay through a script"
        } else {
            "relay"
        };
        println!(
            "{what}, {clients} clients: {rate:.0} hops/s ({:.0} µs a hop)",
            1e6 / rate
        );
    }
    let mut c = client.get_multiplexed_async_connection().await?;
    let started = Instant::now();
    let mut cycles = 0u64;
    while started.elapsed() < RUN {
        let _: Option<String> = redis::cmd("SET")
            .arg("handoff_floor:k")
            .arg("v")
            .arg("NX")
            .arg("PX")
            .arg(1000)
            .query_async(&mut c)
            .await?;
        let _: i64 = redis::cmd("DEL")
            .arg("handoff_floor:k")
            .query_async(&mut c)
            .await?;
        cycles += 1;
    }
    let rate = per_second(cycles, started.elapsed());
    println!(
        "one task re-taking (SET NX PX + DEL): {rate:.0} cycles/s ({:.0} µs a cycle)",
        1e6 / rate
    );
    Ok(())
}

/// Hops per second of one token passed round robin between `n` clients.
async fn relay(client: &redis::Client, n: usize, script: bool) -> redis::RedisResult<f64> {
    let hops = Arc::new(AtomicU64::new(0));
    let tag = if script { "s" } else { "p" };
    let mut tasks = Vec::new();
    let mut first = None;
    for i in 0..n {
        let mut sub = client.get_async_pubsub().await?;
        sub.subscribe(format!("handoff_floor:{tag}:{i}")).await?;
        let mut cmd = client.get_multiplexed_async_connection().await?;
        if i == 0 {
            first = Some(cmd.clone());
        }
        let next = format!("handoff_floor:{tag}:{}", (i + 1) % n);
        let hops = hops.clone();
        tasks.push(tokio::spawn(async move {
            let mut messages = sub.into_on_message();
            while messages.next().await.is_some() {
                hops.fetch_add(1, Ordering::Relaxed);
                let sent: redis::RedisResult<i64> = if script {
                    redis::cmd("EVAL")
                        .arg("return redis.call('PUBLISH', ARGV[1], 'x')")
                        .arg(0)
                        .arg(&next)
                        .query_async(&mut cmd)
                        .await
                } else {
                    redis::cmd("PUBLISH")
                        .arg(&next)
                        .arg("x")
                        .query_async(&mut cmd)
                        .await
                };
                if sent.is_err() {
                    break;
                }
            }
        }));
    }
    let mut first = first.expect("at least one client");
    let _: i64 = redis::cmd("PUBLISH")
        .arg(format!("handoff_floor:{tag}:0"))
        .arg("x")
        .query_async(&mut first)
        .await?;
    // Let the token go round for a while before counting.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let before = hops.load(Ordering::Relaxed);
    tokio::time::sleep(RUN).await;
    let done = hops.load(Ordering::Relaxed) - before;
    for t in tasks {
        t.abort();
    }
    Ok(per_second(done, started.elapsed()))
}

/// `n` events over `d`, per second (counts of a few seconds fit in a u32).
fn per_second(n: u64, d: Duration) -> f64 {
    f64::from(u32::try_from(n).unwrap_or(u32::MAX)) / d.as_secs_f64()
}
