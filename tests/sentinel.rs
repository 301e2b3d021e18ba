//! A Sentinel set (1 master, 1 replica, 3 sentinels): the client finds the
//! master through the sentinels, and after a failover its waiters reconnect
//! through them and get the lock.

use deadbolt::Acquire as _;
use deadbolt::HoldGuard as _;
use std::time::Duration;

use deadbolt::LeaseState;
use deadbolt_testkit::support::within;
use deadbolt_testkit::RedisSentinelSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_follow_a_failover() {
    let set = tokio::task::spawn_blocking(RedisSentinelSet::start)
        .await
        .unwrap()
        .expect("start a sentinel set");
    let connect = || async {
        // A lease with room for a failover under load (a 2 s one ran out
        // once while the whole suite ran: the hold read Lost afterwards).
        deadbolt::Client::sentinel(&set.sentinel_urls(), set.master_name())
            .watchdog_timeout(Duration::from_secs(5))
            .build()
            .await
            .expect("sentinel client")
    };
    let holder = connect().await;
    let g = holder.lock("s").lock().await.unwrap();
    let before = g.fencing_token();
    let mut waiters = Vec::new();
    for _ in 0..2 {
        let c = connect().await;
        let lock = c.lock("s");
        waiters.push(tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            let token = g.fencing_token();
            g.unlock().await.unwrap();
            c.shutdown().await;
            token
        }));
    }
    set.wait_replicated().await.unwrap();
    let old = set.master().await.unwrap();
    let new = set.failover().await.unwrap();
    assert_ne!(old, new);
    // The hold was replicated before the failover: the holder, reconnected
    // through the sentinels, still has it and releases it on the new master.
    assert_eq!(g.state(), LeaseState::Active);
    within("unlock after the failover", g.unlock())
        .await
        .unwrap();
    let tokens = within(
        "waiters after the failover",
        futures::future::try_join_all(waiters),
    )
    .await
    .unwrap();
    for t in tokens {
        assert!(t > before, "token {t} after the failover, {before} before");
    }
    // New work goes to the new master.
    let mut c = set.node(new).conn().await;
    let owner: Option<String> = redis::cmd("HGET")
        .arg("deadbolt:{s}:lock")
        .arg("o")
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(owner.is_none(), "left held: {owner:?}");
    let g = holder.lock("s").lock().await.unwrap();
    g.unlock().await.unwrap();
    holder.shutdown().await;
}
