//! Every primitive on a real Redis Cluster (3 masters, 3 replicas), started
//! once for this binary: one test runs the steps in order, the destructive
//! ones (failovers, a node killed for good) last.
//!
//! - each primitive: acquire and release, a waiter of another client woken
//!   by the release (well before any lease ends), watchdog renewal, fencing;
//! - a force-unlock of a hold on each master reaches its holder's client
//!   at once (its own channel is a classic one, published to every node);
//! - contention while the lock's slot migrates between masters (ASK and
//!   MOVED on the way): a GET-then-SET counter ends exact, nobody hangs;
//! - a coordinated failover of the holder's master: the hold survives and
//!   later tokens are larger; a forced takeover by a replica that missed the
//!   last grants: the old holder's guard reports the loss, and the next
//!   token is still larger than every token before;
//! - a master and its replica killed for good: names on other slots keep
//!   working, names on the dead slots fail promptly.

use deadbolt::Acquire as _;
use deadbolt_core::HoldGuard as _;
use std::future::Future;
use std::time::Duration;

use deadbolt::{Error, LeaseState};
use deadbolt_testkit::support::within;
use deadbolt_testkit::RedisCluster;
use redis::AsyncCommands;

/// A lease is 30 s (the default watchdog timeout): a waiter that gets the
/// lock within this was woken by the release, not by a lease running out.
const WOKEN: Duration = Duration::from_secs(5);

async fn client(cluster: &RedisCluster) -> deadbolt::Client {
    deadbolt::Client::cluster(&cluster.urls())
        .build()
        .await
        .expect("cluster client")
}

/// A name whose slot master `master` serves (the hash tag of every key of a
/// name is the name itself when it has no `%` or `}`).
async fn name_on(cluster: &RedisCluster, master: usize, prefix: &str) -> String {
    cluster.key_on(master, prefix).await.unwrap()
}

/// `waiter` (of another client) must wait while the hold lasts and finish
/// within [`WOKEN`] once `release` ran.
async fn woken_by_release<W, R>(what: &str, other: &deadbolt::Client, waiter: W, release: R)
where
    W: Future<Output = ()> + Send + 'static,
    R: Future<Output = ()>,
{
    let before = other.as_core().waiters();
    let task = tokio::spawn(waiter);
    within(what, async {
        while other.as_core().waiters() == before {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    assert!(!task.is_finished(), "{what}: did not wait");
    release.await;
    tokio::time::timeout(WOKEN, task)
        .await
        .unwrap_or_else(|_| panic!("{what}: not woken by the release"))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primitives_on_a_cluster() {
    let mut cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a 3+3 cluster (redis-server and redis-cli installed?)");
    one_slot_per_primitive(&cluster).await;
    basics(&cluster).await;
    force_unlock_notice(&cluster).await;
    migration_under_contention(&cluster).await;
    failovers(&cluster).await;
    killed_for_good(&mut cluster).await;
}

/// Every key and channel of a primitive hashes to one slot, by the
/// server's own CLUSTER KEYSLOT, whatever the name (braces included).
async fn one_slot_per_primitive(cluster: &RedisCluster) {
    let c = client(cluster).await;
    let mut node = cluster.node(0).conn().await;
    for kind in [
        deadbolt_lock::KIND,
        deadbolt_fair::KIND,
        "rw",
        "sem",
        "latch",
    ] {
        for name in ["orders:42", "a}b{c", "{x}", "", "%7D"] {
            let Ok(k) = c.as_core().keys(kind, name) else {
                assert!(name.is_empty(), "{kind} {name:?} refused");
                continue;
            };
            let names = [
                k.main().to_string(),
                k.fence().to_string(),
                k.sub("waiters"),
                k.sub("ch:client-id"),
                k.channel(),
            ];
            let mut slots = Vec::new();
            for n in &names {
                let s: u16 = redis::cmd("CLUSTER")
                    .arg("KEYSLOT")
                    .arg(n)
                    .query_async(&mut node)
                    .await
                    .unwrap();
                slots.push(s);
            }
            assert!(
                slots.iter().all(|s| *s == slots[0]),
                "{kind} {name:?}: {names:?} in slots {slots:?}"
            );
        }
    }
    c.shutdown().await;
}

/// Each primitive, on names spread over the three masters.
/// A holder force-unlocked by another client turns `Lost` within a round
/// trip, whichever master serves the name (its next renewal is 10 s away).
async fn force_unlock_notice(cluster: &RedisCluster) {
    let holder = client(cluster).await;
    let admin = client(cluster).await;
    // The client subscribes to its own channel as it starts, without
    // waiting: until a first notice arrives, force-unlock again.
    for m in 0..3 {
        let name = name_on(cluster, m, "forced").await;
        let mut heard = false;
        for _ in 0..50 {
            let g = holder.lock(&name).lock().await.unwrap();
            assert!(admin.lock(&name).force_unlock().await.unwrap());
            if tokio::time::timeout(Duration::from_secs(1), g.lost())
                .await
                .is_ok()
            {
                heard = true;
                break;
            }
        }
        assert!(heard, "master {m}: the holder never heard its force-unlock");
    }
    holder.shutdown().await;
    admin.shutdown().await;
}

async fn basics(cluster: &RedisCluster) {
    let a = client(cluster).await;
    let b = client(cluster).await;
    for m in 0..3 {
        let name = name_on(cluster, m, "basic").await;
        // Lock: wake-up, fencing, reentrancy.
        let g = a.lock(&name).lock().await.unwrap();
        let t1 = g.fencing_token();
        let lb = b.lock(&name);
        woken_by_release(
            "lock",
            &b,
            async move {
                let g = lb.lock().await.unwrap();
                g.unlock().await.unwrap();
            },
            async { g.unlock().await.unwrap() },
        )
        .await;
        let g = a.lock(&name).lock().await.unwrap();
        assert!(g.fencing_token() > t1, "tokens rise on {name}");
        g.unlock().await.unwrap();

        // FairLock.
        let g = a.fair_lock(&name).lock().await.unwrap();
        let fb = b.fair_lock(&name);
        woken_by_release(
            "fair",
            &b,
            async move {
                let g = fb.lock().await.unwrap();
                g.unlock().await.unwrap();
            },
            async { g.unlock().await.unwrap() },
        )
        .await;

        // RwLock: a writer waits for a reader.
        let r = a.rw_lock(&name).read_lock().lock().await.unwrap();
        let wb = b.rw_lock(&name);
        woken_by_release(
            "rwlock",
            &b,
            async move {
                let w = wb.write_lock().lock().await.unwrap();
                w.unlock().await.unwrap();
            },
            async { r.unlock().await.unwrap() },
        )
        .await;

        // Semaphore: the second permit waits for the first.
        let s = a.semaphore(&name);
        assert!(s.try_set_permits(1).await.unwrap());
        let p = s.acquire(1).await.unwrap();
        let sb = b.semaphore(&name);
        woken_by_release(
            "semaphore",
            &b,
            async move {
                let p = sb.acquire(1).await.unwrap();
                p.release().await.unwrap();
            },
            async { p.release().await.unwrap() },
        )
        .await;

        // CountDownLatch.
        let l = a.count_down_latch(&name);
        assert!(l.try_set_count(1).await.unwrap());
        let lb = b.count_down_latch(&name);
        woken_by_release(
            "latch",
            &b,
            async move { lb.wait().await.unwrap() },
            async {
                l.count_down().await.unwrap();
            },
        )
        .await;
    }

    // MultiLock over names on three masters (three slots: part by part).
    let names = [
        name_on(cluster, 0, "multi").await,
        name_on(cluster, 1, "multi").await,
        name_on(cluster, 2, "multi").await,
    ];
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let g = a.multi_lock(&refs).lock().await.unwrap();
    assert!(b.lock(&names[1]).try_lock().await.unwrap().is_none());
    let mb = b.multi_lock(&refs);
    woken_by_release(
        "multilock",
        &b,
        async move {
            let g = mb.lock().await.unwrap();
            g.unlock().await.unwrap();
        },
        async { g.unlock().await.unwrap() },
    )
    .await;

    // Watchdog: a hold outlives several of its leases.
    let short = deadbolt::Client::cluster(&cluster.urls())
        .watchdog_timeout(Duration::from_millis(300))
        .build()
        .await
        .unwrap();
    let name = name_on(cluster, 2, "watchdog").await;
    let g = short.lock(&name).lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(g.state(), LeaseState::Active);
    assert!(b.lock(&name).try_lock().await.unwrap().is_none());
    g.unlock().await.unwrap();

    for c in [a, b, short] {
        c.shutdown().await;
    }
}

/// Four clients count through the lock while its slot moves to another
/// master and back.
async fn migration_under_contention(cluster: &RedisCluster) {
    const CLIENTS: usize = 4;
    const ROUNDS: u64 = 150;
    let name = name_on(cluster, 0, "migrate").await;
    let slot = RedisCluster::keyslot(&name);
    // The counter lives on another master, which does not move.
    let counter = format!("{{{}}}:counter", name_on(cluster, 1, "counter").await);
    let raw = redis::cluster::ClusterClient::new(cluster.urls()).unwrap();
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let c = client(cluster).await;
        let mut conn = raw.get_async_connection().await.unwrap();
        let (name, counter) = (name.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            let lock = c.lock(&name);
            for _ in 0..ROUNDS {
                let g = lock.lock().await.unwrap();
                let v: Option<u64> = conn.get(&counter).await.unwrap();
                let () = conn.set(&counter, v.unwrap_or(0) + 1).await.unwrap();
                // While the slot's keys are split between the two nodes,
                // Redis answers a script over several keys TRYAGAIN; past the
                // command timeout the unlock says Unavailable and leaves the
                // release to the background releaser (the next holder waits
                // for it, so the count stays exact).
                match g.unlock().await {
                    Ok(()) | Err(Error::Unavailable(_)) => {}
                    Err(e) => panic!("unlock during a migration: {e}"),
                }
            }
            assert!(c.releases_settled(Duration::from_secs(30)).await);
            c.shutdown().await;
        }));
    }
    for to in [1, 0] {
        let m = cluster.begin_migration(slot, to).await.unwrap();
        // Keys stay split between the two nodes for a while (ASK, TRYAGAIN).
        tokio::time::sleep(Duration::from_millis(100)).await;
        m.move_keys().await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        m.finish().await.unwrap();
    }
    within(
        "contention across migrations",
        futures::future::try_join_all(tasks),
    )
    .await
    .unwrap();
    let mut conn = raw.get_async_connection().await.unwrap();
    let v: u64 = conn.get(&counter).await.unwrap();
    assert_eq!(v, CLIENTS as u64 * ROUNDS, "lost or doubled increments");
}

/// A coordinated failover keeps the hold; a takeover by a replica that
/// missed the last grants loses it, and says so.
async fn failovers(cluster: &RedisCluster) {
    let holder = deadbolt::Client::cluster(&cluster.urls())
        .watchdog_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    let other = client(cluster).await;

    // Coordinated: the replica caught up before it took over.
    let name = name_on(cluster, 1, "failover").await;
    let master = cluster
        .master_of_slot(RedisCluster::keyslot(&name))
        .await
        .unwrap();
    let g = holder.lock(&name).lock().await.unwrap();
    let before = g.fencing_token();
    cluster.failover(master).await.unwrap();
    // Several renewals later the hold is still there, and still exclusive.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        g.state(),
        LeaseState::Active,
        "hold lost in a coordinated failover"
    );
    assert!(other.lock(&name).try_lock().await.unwrap().is_none());
    g.unlock().await.unwrap();
    let g = other.lock(&name).lock().await.unwrap();
    assert!(g.fencing_token() > before);
    g.unlock().await.unwrap();

    // Takeover by a replica that missed the last grants.
    let name = name_on(cluster, 2, "takeover").await;
    let master = cluster
        .master_of_slot(RedisCluster::keyslot(&name))
        .await
        .unwrap();
    let lock = holder.lock(&name);
    for _ in 0..3 {
        lock.lock().await.unwrap().unlock().await.unwrap();
    }
    cluster.wait_replicated(master).await.unwrap();
    let replica = cluster.cut_off_replica(master).await.unwrap();
    let mut highest = 0;
    for _ in 0..5 {
        let g = lock.lock().await.unwrap();
        highest = highest.max(g.fencing_token());
        g.unlock().await.unwrap();
    }
    let g = lock.lock().await.unwrap();
    highest = highest.max(g.fencing_token());
    // The master "dies" (paused); the stale replica takes its slots.
    cluster.pause_node(master);
    cluster.resume_node(replica);
    cluster.failover_takeover(master).await.unwrap();
    let lost = within("the old holder hears of the loss", g.lost()).await;
    assert_eq!(lost, LeaseState::Lost);
    // The new master really missed the last grants: its counter is behind.
    let new_master = cluster
        .master_of_slot(RedisCluster::keyslot(&name))
        .await
        .unwrap();
    let mut raw = cluster.node(new_master).conn().await;
    let counter: Option<u64> = raw
        .get(
            deadbolt_core::Keys::new("deadbolt", "lock", &name)
                .unwrap()
                .fence(),
        )
        .await
        .unwrap();
    assert!(
        counter.is_some_and(|c| c < highest),
        "the replica was not behind: counter {counter:?}, highest token {highest}"
    );
    let g2 = within("the lock on the new master", other.lock(&name).lock())
        .await
        .unwrap();
    assert!(
        g2.fencing_token() > highest,
        "token {} after the failover, {highest} before",
        g2.fencing_token()
    );
    g2.unlock().await.unwrap();
    cluster.resume_node(master);
    cluster.wait_stable().await.unwrap();
    holder.shutdown().await;
    other.shutdown().await;
}

/// A master and its replica gone for good.
async fn killed_for_good(cluster: &mut RedisCluster) {
    // Serve the slots that are left rather than refuse every query.
    for i in 0..6 {
        let mut c = cluster.node(i).conn().await;
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("cluster-require-full-coverage")
            .arg("no")
            .query_async(&mut c)
            .await
            .unwrap();
    }
    let c = client(cluster).await;
    let masters = cluster.masters().await.unwrap();
    let (dead, alive) = (masters[0], masters[1]);
    let dead_name = name_on(cluster, dead, "dead").await;
    let live_name = name_on(cluster, alive, "alive").await;
    let replica = cluster.replica_of(dead).await.unwrap();
    cluster.kill_node(replica);
    cluster.kill_node(dead);
    let started = std::time::Instant::now();
    let r = within("a lock on a dead slot", c.lock(&dead_name).try_lock()).await;
    assert!(
        matches!(r, Err(Error::Unavailable(_) | Error::Indeterminate(_))),
        "dead slot: {r:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "not prompt");
    let g = within("a lock elsewhere", c.lock(&live_name).lock())
        .await
        .unwrap();
    g.unlock().await.unwrap();
    c.shutdown().await;
}
