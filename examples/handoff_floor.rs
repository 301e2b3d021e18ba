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

use std::time::{Duration, Instant};

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
        let rate =
            deadbolt_testkit::floor::relay(&client, "handoff_floor", clients, script, RUN).await?;
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

/// `n` events over `d`, per second (counts of a few seconds fit in a u32).
fn per_second(n: u64, d: Duration) -> f64 {
    f64::from(u32::try_from(n).unwrap_or(u32::MAX)) / d.as_secs_f64()
}
