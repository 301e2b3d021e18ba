//! Cross-crate: every exclusive primitive, made through the facade, keeps a
//! read-modify-write counter exact under contention from separate clients.

use deadbolt::Acquire as _;
use std::time::Duration;

use deadbolt::primitive::{Exclusive, ExclusiveKind};
use deadbolt_testkit::RedisServer;

async fn count_exactly<K: ExclusiveKind>(clients: usize, rounds: usize) {
    let srv = RedisServer::start().expect("redis-server");
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let client = deadbolt::Client::connect(&srv.url()).await.unwrap();
        let mut raw = srv.conn().await;
        tasks.push(tokio::spawn(async move {
            let lock = Exclusive::<K>::new(client.as_core(), "count");
            for _ in 0..rounds {
                let g = lock.lock().await.unwrap();
                let v: Option<i64> = redis::cmd("GET")
                    .arg("counter")
                    .query_async(&mut raw)
                    .await
                    .unwrap();
                let () = redis::cmd("SET")
                    .arg("counter")
                    .arg(v.unwrap_or(0) + 1)
                    .query_async(&mut raw)
                    .await
                    .unwrap();
                g.unlock().await.unwrap();
            }
        }));
    }
    tokio::time::timeout(
        Duration::from_secs(60),
        futures::future::try_join_all(tasks),
    )
    .await
    .expect("hung")
    .unwrap();
    let mut raw = srv.conn().await;
    let v: i64 = redis::cmd("GET")
        .arg("counter")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(v, i64::try_from(clients * rounds).unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_counts_exactly_8_clients_x_200_rounds() {
    count_exactly::<deadbolt_lock::Reentrant>(8, 200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_lock_counts_exactly_8_clients_x_200_rounds() {
    count_exactly::<deadbolt_fair::Fifo>(8, 200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn facade_makes_both_kinds_apart() {
    let srv = RedisServer::start().expect("redis-server");
    let client = deadbolt::Client::connect(&srv.url()).await.unwrap();
    let a = client.lock("same-name");
    let b = client.fair_lock("same-name");
    let ga = a.try_lock().await.unwrap().expect("lock");
    let gb = b
        .try_lock()
        .await
        .unwrap()
        .expect("a Lock and a FairLock of one name are different locks");
    assert_ne!(a.key().unwrap(), b.key().unwrap());
    ga.unlock().await.unwrap();
    gb.unlock().await.unwrap();
    client.shutdown().await;
}
