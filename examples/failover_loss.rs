//! How many holds a failover loses, with and without `sync_replicas`, and
//! what `sync_replicas(1)` costs an acquire. On a local 3+3 Redis Cluster
//! (deadbolt-testkit; needs redis-server and redis-cli):
//!
//! `cargo run --release --example failover_loss [-- ROUNDS]` (default 20)
//!
//! Each round takes a lock on a name whose master is about to fail, then
//! the master stops (SIGSTOP, as a crash looks to its peers) and its replica
//! takes over (`CLUSTER FAILOVER TAKEOVER`). A hold is *lost* when the
//! client was told it holds the lock and the new master does not know of
//! it. Two cases:
//! - **in sync**: the replica keeps up (loopback replication);
//! - **cut off**: the replica is stopped and the master drops its link
//!   (`CLIENT KILL TYPE replica`) before the lock is taken, so the replica
//!   never sees the grant: the window that asynchronous replication leaves
//!   open (a partition between master and replica).
//!
//! Then the p50 of lock+unlock with and without `sync_replicas(1, 100 ms)`,
//! interleaved on one name.

use deadbolt::Acquire as _;
use std::time::{Duration, Instant};

use deadbolt_testkit::RedisCluster;

#[derive(Default, Debug)]
struct Tally {
    held: u32,
    lost: u32,
    indeterminate: u32,
}

async fn client(cluster: &RedisCluster, sync: bool) -> deadbolt::Client {
    let b = deadbolt::Client::cluster(&cluster.urls());
    let b = if sync {
        b.sync_replicas(1, Duration::from_millis(100))
    } else {
        b
    };
    b.build().await.expect("cluster client")
}

async fn round(cluster: &RedisCluster, sync: bool, lagging: bool, n: u32, tally: &mut Tally) {
    cluster.wait_stable().await.unwrap();
    let c = client(cluster, sync).await;
    let master = cluster.masters().await.unwrap()[0];
    let name = cluster.key_on(master, &format!("loss{n}-")).await.unwrap();
    let replica = if lagging {
        cluster.cut_off_replica(master).await.unwrap()
    } else {
        cluster.replica_of(master).await.unwrap()
    };
    let got = c.lock(&name).lock_with_lease(Duration::from_secs(60)).await;
    cluster.pause_node(master);
    cluster.resume_node(replica);
    cluster.failover_takeover(master).await.unwrap();
    match got {
        Ok(g) => {
            tally.held += 1;
            let new = cluster
                .master_of_slot(RedisCluster::keyslot(&name))
                .await
                .unwrap();
            let mut raw = cluster.node(new).conn().await;
            let owner: Option<String> = redis::cmd("HGET")
                .arg(format!("deadbolt:{{{name}}}:lock"))
                .arg("o")
                .query_async(&mut raw)
                .await
                .unwrap();
            if owner.is_none() {
                tally.lost += 1;
            }
            drop(g);
        }
        Err(e) if e.is_indeterminate() => tally.indeterminate += 1,
        Err(e) => panic!("round {n}: {e}"),
    }
    cluster.resume_node(master);
    cluster.wait_stable().await.unwrap();
    c.shutdown().await;
}

async fn p50(cluster: &RedisCluster) -> (Duration, Duration) {
    let plain = client(cluster, false).await;
    let synced = client(cluster, true).await;
    let (a, b) = (plain.lock("cost"), synced.lock("cost"));
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for _ in 0..2000 {
        let t = Instant::now();
        a.lock().await.unwrap().unlock().await.unwrap();
        ta.push(t.elapsed());
        let t = Instant::now();
        b.lock().await.unwrap().unlock().await.unwrap();
        tb.push(t.elapsed());
    }
    ta.sort();
    tb.sort();
    plain.shutdown().await;
    synced.shutdown().await;
    (ta[ta.len() / 2], tb[tb.len() / 2])
}

#[tokio::main]
async fn main() {
    let rounds: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a local cluster");
    let (plain, synced) = p50(&cluster).await;
    println!(
        "lock+unlock p50 on a cluster: {plain:?} without sync_replicas, {synced:?} with \
         sync_replicas(1, 100ms) (+{:?})",
        synced.saturating_sub(plain)
    );
    for lagging in [false, true] {
        for sync in [false, true] {
            let mut tally = Tally::default();
            for n in 0..rounds {
                round(&cluster, sync, lagging, n, &mut tally).await;
            }
            println!(
                "{rounds} failovers, replica {}, sync_replicas {}: {} acquires reported held, \
                 {} of them lost; {} reported Indeterminate",
                if lagging { "cut off" } else { "in sync" },
                if sync { "on " } else { "off" },
                tally.held,
                tally.lost,
                tally.indeterminate
            );
        }
    }
}
