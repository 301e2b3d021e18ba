//! The floor under a hand-off between clients: a token relayed round robin
//! between clients by PUBLISH, without any lock.
//!
//! One hop is one command and one pushed message, which is the least a
//! hand-off to another client costs (the release is a command; the next
//! holder hears of it by a message). `examples/handoff_floor` prints it;
//! `deadbolt-bench` measures it at the start of a run to put a ceiling over
//! its throughput rows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use tokio::time::Instant;

/// How long the token goes round before hops are counted.
const WARM_UP: Duration = Duration::from_millis(200);

/// Hops per second of one token passed round robin between `clients`
/// clients of `client` (each with a command connection and a subscriber
/// connection: on a message a client PUBLISHes to the next client's
/// channel), counted over `run` after a short warm-up. With `script`, each
/// PUBLISH runs inside a one-line EVAL (the fixed cost of a script per
/// hop). Channels are named `<prefix>:<s|p>:<i>`.
///
/// # Errors
/// Connecting, subscribing or the first PUBLISH failing.
///
/// # Cancel safety
/// Cancel safe: the relay's tasks are aborted when the future is dropped
/// (they hold no state on the server but their subscriptions, which go
/// with their connections).
pub async fn relay(
    client: &redis::Client,
    prefix: &str,
    clients: usize,
    script: bool,
    run: Duration,
) -> redis::RedisResult<f64> {
    let n = clients.max(2);
    let hops = Arc::new(AtomicU64::new(0));
    let tag = if script { "s" } else { "p" };
    let mut tasks = Aborting(Vec::new());
    let mut first = None;
    for i in 0..n {
        let mut sub = client.get_async_pubsub().await?;
        sub.subscribe(format!("{prefix}:{tag}:{i}")).await?;
        let mut cmd = client.get_multiplexed_async_connection().await?;
        if i == 0 {
            first = Some(cmd.clone());
        }
        let next = format!("{prefix}:{tag}:{}", (i + 1) % n);
        let hops = hops.clone();
        tasks.0.push(tokio::spawn(async move {
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
    let Some(mut first) = first else {
        return Ok(0.0);
    };
    let _: i64 = redis::cmd("PUBLISH")
        .arg(format!("{prefix}:{tag}:0"))
        .arg("x")
        .query_async(&mut first)
        .await?;
    tokio::time::sleep(WARM_UP).await;
    let started = Instant::now();
    let before = hops.load(Ordering::Relaxed);
    tokio::time::sleep(run).await;
    let done = hops.load(Ordering::Relaxed) - before;
    Ok(f64::from(u32::try_from(done).unwrap_or(u32::MAX)) / started.elapsed().as_secs_f64())
}

/// Tasks aborted when dropped.
struct Aborting(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Aborting {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}
