//! `sync_replicas`: a grant that too few replicas acknowledged is reported
//! `Indeterminate` and given back; with the replicas it asks for, acquires
//! work as usual.

use deadbolt::Acquire as _;
use std::time::Duration;

use deadbolt::Error;
use deadbolt_testkit::support::{cmd, server, until, within};
use deadbolt_testkit::RedisServer;

#[tokio::test]
async fn a_grant_without_its_replica_is_indeterminate_and_given_back() {
    let srv = server();
    let client = deadbolt::Client::builder(&srv.url())
        .sync_replicas(1, Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    for (what, r) in [
        (
            "lock",
            client.lock("a").try_lock().await.map(|g| g.is_some()),
        ),
        (
            "fair",
            client.fair_lock("a").try_lock().await.map(|g| g.is_some()),
        ),
        (
            "multi",
            client
                .multi_lock(&["a", "b"])
                .try_lock()
                .await
                .map(|g| g.is_some()),
        ),
    ] {
        assert!(matches!(r, Err(Error::Indeterminate(_))), "{what}: {r:?}");
    }
    assert!(within("releases", client.releases_settled(Duration::from_secs(10))).await);
    let keys: Vec<String> = cmd(&srv, &["KEYS", "deadbolt:*"]).await;
    let held: Vec<&String> = keys
        .iter()
        .filter(|k| k.ends_with(":lock") || k.ends_with(":fair"))
        .collect();
    assert!(held.is_empty(), "left held: {held:?} (all keys: {keys:?})");
    client.shutdown().await;
}

/// A master and a replica of it, in sync.
async fn master_and_replica() -> (RedisServer, RedisServer) {
    let master = server();
    let replica = server();
    let port = master.port().to_string();
    let () = cmd(&replica, &["REPLICAOF", "127.0.0.1", &port]).await;
    until("replica in sync", || async {
        let info: String = cmd(&replica, &["INFO", "replication"]).await;
        info.contains("master_link_status:up")
    })
    .await;
    (master, replica)
}

#[tokio::test]
async fn with_a_replica_acquires_work() {
    let (master, replica) = master_and_replica().await;
    let client = deadbolt::Client::builder(&master.url())
        .sync_replicas(1, Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    let g = client.lock("a").lock().await.unwrap();
    let m = client.multi_lock(&["b", "c"]).lock().await.unwrap();
    // The grant is on the replica already (WAIT returned after it acked).
    let owner: Option<String> = cmd(&replica, &["HGET", "deadbolt:{a}:lock", "o"]).await;
    assert!(owner.is_some(), "grant not on the replica");
    g.unlock().await.unwrap();
    m.unlock().await.unwrap();
    // Off by the builder's rules: no replica count, or a timeout not under
    // command_timeout.
    for (n, t) in [(0, 10), (1, 1000), (1, 0)] {
        let r = deadbolt::Client::builder(&master.url())
            .sync_replicas(n, Duration::from_millis(t))
            .build()
            .await;
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "{n} {t}: {r:?}"
        );
    }
    client.shutdown().await;
}

/// A FairLock grant that another client's release made (the waiter learns
/// of it by message and sends nothing) is covered too: here the replica
/// stops between the waiter's enqueue (replicated and acknowledged) and
/// the hand-off (not), and the waiter must not report a hold the replica
/// never saw. WAIT is documented to count the caller's own writes only, of
/// which the enqueue is the last; core writes a marker first so that the
/// wait covers the grant. (Redis 7.0 in fact waits for the master's whole
/// offset, so on 7.0 this passes without the marker as well.)
#[tokio::test]
async fn a_grant_made_by_another_clients_release_is_covered() {
    let (master, replica) = master_and_replica().await;
    let holder = deadbolt::Client::connect(&master.url()).await.unwrap();
    let waiting = deadbolt::Client::builder(&master.url())
        .sync_replicas(1, Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    let g = holder.fair_lock("h").lock().await.unwrap();
    master.reset_stats().await;
    let lock = waiting.fair_lock("h");
    let w = tokio::spawn(async move { lock.lock().await.map(|g| g.fencing_token()) });
    // The waiter settled: its enqueue and its catch-up try after
    // subscribing (both write), then it sleeps.
    until("the waiter's two tries", || async {
        master.commandstats().await.get("evalsha").copied() == Some(2)
    })
    .await;
    // The replica acknowledges the enqueue's offset now (WAIT asks it to;
    // its own acknowledgements come once a second), so that a WAIT of the
    // waiter's own writes alone would pass from here on.
    let mut c = master.conn().await;
    let (acked,): (i64,) = redis::pipe()
        .cmd("SET")
        .arg("probe")
        .arg(1)
        .ignore()
        .cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(acked, 1);
    // Stopped but still connected: the master counts it, with the offset
    // it last acknowledged, so only a wait for a later offset fails.
    replica.pause();
    g.unlock().await.unwrap();
    let r = within("the waiter", w).await.unwrap();
    replica.resume();
    assert!(matches!(r, Err(Error::Indeterminate(_))), "{r:?}");
    holder.shutdown().await;
    waiting.shutdown().await;
}
