//! Hot-path figures of deadbolt, each beside a PING baseline taken in the same
//! run, interleaved with the operations (PING latency on these machines is
//! bimodal, so a baseline from another moment would mislead).
//!
//! `cargo bench --bench hot_paths [-- redis://host:port/]` — with no URL a
//! throwaway redis-server is started.
//!
//! Figures: uncontended lock+unlock p50 (as × PING), release-to-next-holder
//! p50 with one waiter on another client, and contended throughput of
//! FairLock against Lock (32 waiters over 4 clients, no hold time).

use deadbolt::Acquire as _;
use std::time::{Duration, Instant};

use deadbolt::primitive::{Client, Exclusive, ExclusiveKind};
use deadbolt_fair::Fifo;
use deadbolt_lock::Reentrant;

fn p50(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn ping(conn: &mut redis::aio::MultiplexedConnection) -> Duration {
    let t = Instant::now();
    let _: String = redis::cmd("PING").query_async(conn).await.unwrap();
    t.elapsed()
}

async fn uncontended<K: ExclusiveKind>(
    c: &Client,
    raw: &mut redis::aio::MultiplexedConnection,
) -> (Duration, Duration) {
    let lock = Exclusive::<K>::new(c, "bench:uncontended");
    let (mut ops, mut pings) = (Vec::new(), Vec::new());
    for i in 0..3000 {
        let t = Instant::now();
        let g = lock.lock().await.unwrap();
        g.unlock().await.unwrap();
        if i >= 200 {
            ops.push(t.elapsed());
            pings.push(ping(raw).await);
        }
    }
    (p50(&mut ops), p50(&mut pings))
}

async fn handoff<K: ExclusiveKind>(
    c1: &Client,
    c2: &Client,
    raw: &mut redis::aio::MultiplexedConnection,
) -> (Duration, Duration) {
    let holder = Exclusive::<K>::new(c1, "bench:handoff");
    let (mut lat, mut pings) = (Vec::new(), Vec::new());
    for _ in 0..300 {
        let g = holder.lock().await.unwrap();
        let waiter = Exclusive::<K>::new(c2, "bench:handoff");
        let (tx, rx) = tokio::sync::oneshot::channel();
        let t = tokio::spawn(async move {
            let g = waiter.lock().await.unwrap();
            let at = Instant::now();
            g.unlock().await.unwrap();
            let _ = tx.send(at);
        });
        // Let the waiter subscribe and park: wait until its channel exists.
        loop {
            let n: Vec<redis::Value> = redis::cmd("PUBSUB")
                .arg("CHANNELS")
                .query_async(raw)
                .await
                .unwrap();
            if !n.is_empty() {
                break;
            }
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        let released = Instant::now();
        g.unlock().await.unwrap();
        let at = rx.await.unwrap();
        t.await.unwrap();
        lat.push(at - released);
        pings.push(ping(raw).await);
    }
    (p50(&mut lat), p50(&mut pings))
}

async fn contended<K: ExclusiveKind>(clients: &[Client], waiters: usize, for_: Duration) -> f64 {
    let stop = Instant::now() + for_;
    let mut tasks = Vec::new();
    for i in 0..waiters {
        let lock = Exclusive::<K>::new(&clients[i % clients.len()], "bench:contended");
        tasks.push(tokio::spawn(async move {
            let mut n = 0u32;
            while Instant::now() < stop {
                let g = lock.lock().await.unwrap();
                g.unlock().await.unwrap();
                n += 1;
            }
            n
        }));
    }
    let mut total = 0u32;
    for t in tasks {
        total += t.await.unwrap();
    }
    f64::from(total) / for_.as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut _srv = None;
    let url = match std::env::args().skip(1).find(|a| a.starts_with("redis://")) {
        Some(u) => u,
        None => {
            let s = deadbolt_testkit::RedisServer::start().expect("redis-server");
            let u = s.url();
            _srv = Some(s);
            u
        }
    };
    let c1 = Client::connect(&url).await.unwrap();
    let c2 = Client::connect(&url).await.unwrap();
    let mut raw = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for (name, (op, p)) in [
        (
            "Lock     uncontended lock+unlock",
            uncontended::<Reentrant>(&c1, &mut raw).await,
        ),
        (
            "FairLock uncontended lock+unlock",
            uncontended::<Fifo>(&c1, &mut raw).await,
        ),
    ] {
        println!(
            "{name}: p50 {:.3} ms = {:.2} x PING (PING p50 {:.3} ms)",
            ms(op),
            op.as_secs_f64() / p.as_secs_f64(),
            ms(p)
        );
    }
    for (name, (op, p)) in [
        (
            "Lock     hand-off (release -> next holder)",
            handoff::<Reentrant>(&c1, &c2, &mut raw).await,
        ),
        (
            "FairLock hand-off (release -> next holder)",
            handoff::<Fifo>(&c1, &c2, &mut raw).await,
        ),
    ] {
        println!(
            "{name}: p50 {:.3} ms = {:.2} x PING (PING p50 {:.3} ms)",
            ms(op),
            op.as_secs_f64() / p.as_secs_f64(),
            ms(p)
        );
    }
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(Client::connect(&url).await.unwrap());
    }
    let d = Duration::from_secs(3);
    let lock = contended::<Reentrant>(&clients, 32, d).await;
    let fair = contended::<Fifo>(&clients, 32, d).await;
    println!("contended, 32 waiters over 4 clients, no hold: Lock {lock:.0} acq/s, FairLock {fair:.0} acq/s (fair/unfair = {:.2})", fair / lock);
}
