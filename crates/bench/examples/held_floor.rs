//! Where the Redis memory of a held `Lock` name with one waiter goes, and
//! the floor under it: on one throwaway redis-server, `N` names (10,000 by
//! default, as the bench's held-names scenario) are built up with plain
//! commands, one part of the layout at a time, and `used_memory` is read
//! after each part:
//!
//! - deadbolt's layout, as the `Lock`'s scripts write it for a hold with a
//!   waiter of another client: the hold hash (owner, token, count, the
//!   attempt's field, its sequence number; a TTL), then the waiter's marks
//!   and its registration (`d:<client>`: a line of about 120 bytes, over
//!   `hash-max-listpack-value`, so the hash leaves its listpack encoding),
//!   the waiting clients' ZSET (with a TTL), the slot's fencing counter
//!   (one per name here: the names fall in distinct slots), the unlock
//!   channel and the client's grant channel, both subscribed by the
//!   waiter's client (one connection for every name, as a deadbolt client
//!   has);
//! - the floor: what a lock whose waiters are woken by Pub/Sub and granted
//!   inside the release cannot do without: the hold hash with owner, token
//!   and count and a registration that fits the listpack (the same fields
//!   written compactly: 60 bytes), and one channel.
//!
//! Key and channel names are deadbolt's (`deadbolt:{<name>}:lock`, ...), and
//! the ids are as long as deadbolt's (UUID client ids, attempt ids).
//!
//! `cargo run --release -p deadbolt-bench --example held_floor [N]`

use std::time::Duration;

use deadbolt_bench::floor::first_arg;
use deadbolt_testkit::RedisServer;
use redis::aio::MultiplexedConnection;

const CLIENT: &str = "9b2d6c1e-58cc-4372-a567-0e02b2c3d479";
const HOLDER: &str = "f47ac10b-58cc-4372-a567-0e02b2c3d479:12";
/// A registration as the Lock writes it (hold_lib.lua's reg_entry: owner,
/// attempt, lease, claim, secret, server ms).
const REGISTRATION: &str =
    "9b2d6c1e-58cc-4372-a567-0e02b2c3d479:7 3f9c2a77e1d04b5as18 30000 5000 4503599627370495 1796612043546";
/// The same fields written compactly (the client is in the field's name,
/// numbers in base 36): under the listpack's 64 bytes.
const COMPACT: &str = "7 3f9c2a77e1d04b5as18 n5c 3uw 2gosa7pa2gv 2ko0xqkq3";

/// `used_memory`, bytes.
async fn used(conn: &mut MultiplexedConnection) -> f64 {
    let text = deadbolt_bench::floor::info(conn, "memory")
        .await
        .expect("INFO memory");
    text.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory")
}

/// Run `cmd(i)` for every name, pipelined in batches.
async fn each(conn: &mut MultiplexedConnection, n: usize, cmd: impl Fn(usize) -> redis::Cmd) {
    for start in (0..n).step_by(500) {
        let mut p = redis::pipe();
        for i in start..(start + 500).min(n) {
            p.add_command(cmd(i)).ignore();
        }
        let () = p.query_async(conn).await.expect("pipeline");
    }
}

/// Subscribe one connection to `channel(i)` for every name; the connection
/// is returned, to be kept open while memory is read.
async fn subscribe(url: &str, n: usize, channel: impl Fn(usize) -> String) -> redis::aio::PubSub {
    let mut sub = redis::Client::open(url)
        .expect("url")
        .get_async_pubsub()
        .await
        .expect("pubsub");
    for i in 0..n {
        sub.subscribe(channel(i)).await.expect("subscribe");
    }
    sub
}

/// A hold hash for every name, as the Lock writes one (owner, token, count)
/// with the fields `more`, and its TTL.
async fn holds(conn: &mut MultiplexedConnection, n: usize, more: &[&str]) {
    each(conn, n, |i| {
        let mut c = redis::cmd("HSET");
        c.arg(key(i))
            .arg(&["o", HOLDER, "t", "1796612043546653", "n", "1"])
            .arg(more);
        c
    })
    .await;
    each(conn, n, |i| {
        redis::cmd("PEXPIRE").arg(key(i)).arg(30_000).clone()
    })
    .await;
}

fn key(i: usize) -> String {
    format!("deadbolt:{{held{i}}}:lock")
}

/// The parts, one after another: what each adds per name, and the total.
struct Tally {
    n: f64,
    start: f64,
    last: f64,
}

impl Tally {
    /// Start counting from the server's memory now.
    async fn start(conn: &mut MultiplexedConnection, n: f64) -> Tally {
        let start = used(conn).await;
        Tally {
            n,
            start,
            last: start,
        }
    }

    async fn part(&mut self, conn: &mut MultiplexedConnection, what: &str) {
        // Let the server settle lazy frees and client buffers.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = used(conn).await;
        println!(
            "  {what:<52} {:>7.0} B a name  ({:>6.0} B so far)",
            (now - self.last) / self.n,
            (now - self.start) / self.n
        );
        self.last = now;
    }
}

/// deadbolt's layout, part by part.
async fn deadbolt_layout(conn: &mut MultiplexedConnection, url: &str, n: usize, nf: f64) {
    println!("deadbolt's layout, {n} held names with a waiter each:");
    let mut t = Tally::start(conn, nf).await;
    holds(conn, n, &["a:3f9c2a77e1d04b5as17", "1", "s", "17"]).await;
    t.part(conn, "hold hash (listpack) with its TTL").await;
    each(conn, n, |i| {
        redis::cmd("HSET")
            .arg(key(i))
            .arg("x")
            .arg(1)
            .arg(format!("d:{CLIENT}"))
            .arg(REGISTRATION)
            .clone()
    })
    .await;
    t.part(conn, "+ mark and registration (hash leaves the listpack)")
        .await;
    let waiters = |i| format!("{}:waiters", key(i));
    each(conn, n, |i| {
        let mut p = redis::cmd("ZADD");
        p.arg(waiters(i)).arg(1_796_612_043_546_653u64).arg(CLIENT);
        p
    })
    .await;
    each(conn, n, |i| {
        redis::cmd("PEXPIRE").arg(waiters(i)).arg(30_000).clone()
    })
    .await;
    t.part(conn, "+ waiting clients' ZSET with its TTL").await;
    each(conn, n, |i| {
        redis::cmd("SET")
            .arg(format!("deadbolt:{{{i}}}:fence"))
            .arg("1796612043546653")
            .clone()
    })
    .await;
    t.part(conn, "+ fencing counter (one per slot)").await;
    let unlock = subscribe(url, n, |i| format!("{}:ch", key(i))).await;
    t.part(conn, "+ unlock channel, subscribed").await;
    let grant = subscribe(url, n, |i| format!("{}:ch:{CLIENT}", key(i))).await;
    t.part(conn, "+ the client's grant channel, subscribed")
        .await;
    drop((unlock, grant));
}

/// The floor, part by part.
async fn floor_layout(conn: &mut MultiplexedConnection, url: &str, n: usize, nf: f64) {
    println!("the floor: a hold hash with a registration that fits the listpack, one channel:");
    let mut t = Tally::start(conn, nf).await;
    holds(conn, n, &[&format!("d:{CLIENT}"), COMPACT]).await;
    t.part(conn, "hold hash with a compact registration, TTL")
        .await;
    let one = subscribe(url, n, |i| format!("{}:ch:{CLIENT}", key(i))).await;
    t.part(conn, "+ one channel, subscribed").await;
    drop(one);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = first_arg(10_000);
    let srv = RedisServer::start().expect("redis-server");
    let url = srv.url();
    let mut conn = srv.conn().await;
    #[allow(clippy::cast_precision_loss, reason = "n stays far below 2^53")]
    let nf = n as f64;
    deadbolt_layout(&mut conn, &url, n, nf).await;
    let () = redis::cmd("FLUSHALL")
        .query_async(&mut conn)
        .await
        .expect("FLUSHALL");
    // The subscriber connections closed: let the server free them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    floor_layout(&mut conn, &url, n, nf).await;
}
