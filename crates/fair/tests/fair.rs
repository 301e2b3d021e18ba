//! FairLock against a real redis-server.

use deadbolt_core::Acquire as _;
use deadbolt_core::HoldGuard as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadbolt_core::{Client, Error};
use deadbolt_fair::FairLock;
use deadbolt_testkit::support::{server, until, within, HANG};
use deadbolt_testkit::{FaultProxy, RedisServer};
use parking_lot::Mutex;

async fn client(url: &str, wt: Duration) -> Client {
    deadbolt_testkit::client_with(url, |b| b.waiter_timeout(wt)).await
}

async fn queue_len(srv: &RedisServer, lock: &FairLock) -> i64 {
    let mut c = srv.conn().await;
    redis::cmd("ZCARD")
        .arg(format!("{}:q", lock.key().unwrap()))
        .query_async(&mut c)
        .await
        .unwrap()
}

/// Wait until the server's queue has `n` entries (no event exists for this;
/// a short poll of the server's state).
async fn until_queued(srv: &RedisServer, lock: &FairLock, n: i64) {
    until("queue length", || async { queue_len(srv, lock).await == n }).await;
}

async fn fifo_order(clients: usize) {
    let srv = server();
    let mut cs = Vec::new();
    for _ in 0..clients {
        cs.push(client(&srv.url(), Duration::from_secs(5)).await);
    }
    let holder = FairLock::new(&cs[0], "fifo");
    let g = holder.lock().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..16 {
        let l = FairLock::new(&cs[i % clients], "fifo");
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let g = l.lock().await.unwrap();
            order.lock().push(i);
            g.unlock().await.unwrap();
        }));
        until_queued(&srv, &holder, i64::try_from(i).unwrap() + 1).await;
    }
    g.unlock().await.unwrap();
    for t in tasks {
        within("waiter", t).await.unwrap();
    }
    assert_eq!(*order.lock(), (0..16).collect::<Vec<_>>());
    assert_eq!(queue_len(&srv, &holder).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_waiters_acquire_in_enqueue_order() {
    fifo_order(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_holds_across_three_clients() {
    fifo_order(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiring_leases_serve_arrivals_in_order() {
    let srv = server();
    let c = client(&srv.url(), Duration::from_secs(5)).await;
    let start = Instant::now();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..8u32 {
        let l = FairLock::new(&c, "arrivals");
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100) * i).await; // arrival schedule
            let g = l
                .try_lock_with(Duration::from_secs(10), Duration::from_secs(1))
                .await
                .unwrap()
                .expect("acquired within the wait");
            order.lock().push(i);
            std::mem::forget(g); // never unlocks: the lease must run out
        }));
    }
    for t in tasks {
        within("arrival", t).await.unwrap();
    }
    assert_eq!(*order.lock(), (0..8).collect::<Vec<_>>());
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(9) + Duration::from_millis(500),
        "took {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_waiter_in_the_middle_delays_the_rest_by_at_most_waiter_timeout() {
    let srv = server();
    let wt = Duration::from_secs(1);
    let c = client(&srv.url(), wt).await;
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let doomed = client(&proxy.url(), wt).await;
    let holder = FairLock::new(&c, "dead");
    let g = holder.lock().await.unwrap();

    let w1 = FairLock::new(&c, "dead");
    let t1 = tokio::spawn(async move { w1.lock().await.unwrap() });
    until_queued(&srv, &holder, 1).await;
    let w2 = FairLock::new(&doomed, "dead");
    let t2 = tokio::spawn(async move { w2.lock().await });
    until_queued(&srv, &holder, 2).await;
    let w3 = FairLock::new(&c, "dead");
    let t3 = tokio::spawn(async move {
        let g = w3.lock().await.unwrap();
        (Instant::now(), g)
    });
    until_queued(&srv, &holder, 3).await;

    // The middle waiter's process "dies": its connections go silent.
    proxy.set_blackhole(true);
    g.unlock().await.unwrap();
    let g1 = within("w1", t1).await.unwrap();
    let released = Instant::now();
    g1.unlock().await.unwrap();
    let (at, g3) = within("w3", t3).await.unwrap();
    let delay = at - released;
    assert!(
        delay < wt + Duration::from_millis(800),
        "the waiter behind a dead one waited {delay:?} (waiter_timeout {wt:?})"
    );
    g3.unlock().await.unwrap();
    t2.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_out_head_does_not_block_the_next() {
    let srv = server();
    let c = client(&srv.url(), Duration::from_secs(5)).await;
    let holder = FairLock::new(&c, "head");
    let g = holder.lock().await.unwrap();
    let w1 = FairLock::new(&c, "head");
    let t1 = tokio::spawn(async move { w1.try_lock_for(Duration::from_millis(200)).await });
    until_queued(&srv, &holder, 1).await;
    let w2 = FairLock::new(&c, "head");
    let t2 = tokio::spawn(async move {
        let g = w2.lock().await.unwrap();
        (Instant::now(), g)
    });
    until_queued(&srv, &holder, 2).await;
    assert!(within("w1", t1).await.unwrap().unwrap().is_none());
    assert_eq!(
        queue_len(&srv, &holder).await,
        1,
        "the timed-out waiter left the queue"
    );
    let unlocked = Instant::now();
    g.unlock().await.unwrap();
    let (at, g2) = within("w2", t2).await.unwrap();
    assert!(
        at - unlocked < Duration::from_millis(100),
        "hand-off took {:?}",
        at - unlocked
    );
    g2.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_never_jumps_the_queue_and_force_unlock_passes_on() {
    let srv = server();
    let c = client(&srv.url(), Duration::from_secs(5)).await;
    let holder = FairLock::new(&c, "jump");
    let g = holder.lock().await.unwrap();
    let w = FairLock::new(&c, "jump");
    let t = tokio::spawn(async move { w.lock().await.unwrap() });
    until_queued(&srv, &holder, 1).await;
    let jumper = FairLock::new(&c, "jump");
    assert!(jumper.try_lock().await.unwrap().is_none());
    assert!(holder.force_unlock().await.unwrap());
    // The queue's head got the lock, not the jumper.
    assert!(jumper.try_lock().await.unwrap().is_none());
    let gw = within("waiter", t).await.unwrap();
    assert!(gw.fencing_token() > g.fencing_token());
    assert!(matches!(g.unlock().await, Err(Error::NotHeld)));
    // Reentrancy as for Lock.
    let w2 = gw;
    assert_eq!(queue_len(&srv, &holder).await, 0);
    w2.unlock().await.unwrap();
    let a = FairLock::new(&c, "jump");
    let g1 = a.lock().await.unwrap();
    let g2 = a.clone().try_lock().await.unwrap().unwrap();
    assert_eq!(a.hold_count().await.unwrap(), 2);
    g2.unlock().await.unwrap();
    g1.unlock().await.unwrap();
    assert!(!a.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_waiters_leave_no_queue_entries_or_holds() {
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let c = client(&proxy.url(), Duration::from_secs(5)).await;
    proxy.set_reply_delay(Duration::from_millis(2));
    let holder = FairLock::new(&c, "cancel");
    let waiter = FairLock::new(&c, "cancel");
    // Free lock, then a held one (cancelled waiters are queued).
    for held in [false, true] {
        let g = if held {
            Some(holder.lock().await.unwrap())
        } else {
            None
        };
        let mut micros = 0;
        while micros <= 6000 {
            if let Ok(g) = tokio::time::timeout(Duration::from_micros(micros), waiter.lock()).await
            {
                g.unwrap().unlock().await.unwrap();
            }
            micros += 250;
        }
        assert!(c.releases_settled(HANG).await);
        assert_eq!(
            queue_len(&srv, &holder).await,
            0,
            "queue entries left behind"
        );
        if let Some(g) = g {
            assert_eq!(holder.hold_count().await.unwrap(), 1);
            g.unlock().await.unwrap();
        }
        assert!(!holder.is_locked().await.unwrap(), "a hold was left behind");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handed_off_hold_outlives_its_claim_lease() {
    let srv = server();
    // A short waiter timeout makes the claim lease short.
    let wt = Duration::from_millis(300);
    let c = client(&srv.url(), wt).await;
    let holder = FairLock::new(&c, "claim");
    let g = holder.lock().await.unwrap();
    let w = FairLock::new(&c, "claim");
    let w2 = w.clone();
    let t = tokio::spawn(async move { w2.lock().await.unwrap() });
    until_queued(&srv, &holder, 1).await;
    g.unlock().await.unwrap();
    let gw = within("hand-off", t).await.unwrap();
    tokio::time::sleep(wt * 4).await; // several claim leases pass
    assert!(
        w.is_held().await.unwrap(),
        "the claim was not extended to the watchdog lease"
    );
    assert_eq!(gw.state(), deadbolt_core::LeaseState::Active);
    assert!(gw.valid_for() > wt, "local validity {:?}", gw.valid_for());
    gw.unlock().await.unwrap();
    assert!(!holder.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_ride_out_a_restart_that_lost_the_queue() {
    let mut srv = server();
    let c = client(&srv.url(), Duration::from_secs(5)).await;
    let holder = FairLock::new(&c, "restart");
    let g = holder.lock().await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..3 {
        let l = FairLock::new(&c, "restart");
        tasks.push(tokio::spawn(async move {
            let g = l.lock().await.unwrap();
            g.unlock().await.unwrap();
        }));
        until_queued(&srv, &holder, i + 1).await;
    }
    // A restart without persistence: the hold and the queue are gone.
    srv.restart().unwrap();
    for t in tasks {
        within("waiter after restart", t).await.unwrap();
    }
    assert!(matches!(g.unlock().await, Err(Error::NotHeld)));
    assert_eq!(queue_len(&srv, &holder).await, 0);
    assert!(!holder.is_locked().await.unwrap());
}

/// The fair lock reads its own queue: the waiters in order, with their
/// owners, leases and liveness; `inspect` counts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_is_listed_in_order() {
    let srv = server();
    let c = client(&srv.url(), Duration::from_secs(5)).await;
    let holder = FairLock::new(&c, "q");
    let g = holder.lock().await.unwrap();
    let (w1, w2) = (FairLock::new(&c, "q"), FairLock::new(&c, "q"));
    let t1 = tokio::spawn({
        let w1 = w1.clone();
        async move { w1.lock().await.unwrap().unlock().await }
    });
    until_queued(&srv, &holder, 1).await;
    let t2 = tokio::spawn({
        let w2 = w2.clone();
        async move {
            w2.lock_with_lease(Duration::from_secs(9))
                .await
                .unwrap()
                .unlock()
                .await
        }
    });
    until_queued(&srv, &holder, 2).await;
    let q = holder.queue(10).await.unwrap();
    let owners: Vec<&str> = q.iter().map(|w| w.owner.as_str()).collect();
    assert_eq!(owners, [w1.owner(), w2.owner()], "queue order");
    assert_eq!(q[1].lease, Some(Duration::from_secs(9)));
    assert!(q.iter().all(|w| w.alive_for.is_some()), "{q:?}");
    assert_eq!(holder.queue(1).await.unwrap().len(), 1, "limit");
    assert_eq!(holder.inspect().await.unwrap().queued, 2);
    g.unlock().await.unwrap();
    within("first waiter", t1).await.unwrap().unwrap();
    within("second waiter", t2).await.unwrap().unwrap();
    assert!(holder.queue(10).await.unwrap().is_empty());
}

/// The heartbeat keeps every queued waiter of a client alive however many
/// names it waits on and however slow each call is: its calls (one per
/// hash slot and batch of 64 names) are in flight together, and its rounds
/// start every `waiter_timeout / 3` whatever a round took. Awaited one
/// after another (as once), 12 batches at 60 ms a reply took 720 ms, more
/// than the 600 ms a liveness record lasts: every waiter was dead for part
/// of each round, and a release skipped it (seen on a 3-master cluster with
/// 10,000 waiting names, where every name is a call of its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_keeps_many_waiters_alive_over_a_slow_connection() {
    const NAMES: usize = 64 * 12;
    let wt = Duration::from_millis(600);
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let holder = client(&srv.url(), wt).await;
    let waiter = client(&proxy.url(), wt).await;
    let names: Vec<String> = (0..NAMES).map(|i| format!("hb:{i}")).collect();
    let guards = futures::future::join_all(
        names
            .iter()
            .map(|n| async { FairLock::new(&holder, n).lock().await.unwrap() }),
    )
    .await;
    let tasks: Vec<_> = names
        .iter()
        .map(|n| {
            let l = FairLock::new(&waiter, n);
            tokio::spawn(async move { l.lock().await.unwrap().unlock().await.unwrap() })
        })
        .collect();
    let alive: Vec<String> = names
        .iter()
        .map(|n| format!("{}:alive", FairLock::new(&holder, n).key().unwrap()))
        .collect();
    let mut admin = srv.conn().await;
    // Every waiter queued, and each name's liveness record written.
    until("every waiter queued", || {
        let mut admin = admin.clone();
        let alive = alive.clone();
        let id = waiter.id().to_string();
        async move {
            let mut p = redis::pipe();
            alive.iter().for_each(|k| {
                p.cmd("ZSCORE").arg(k).arg(&id);
            });
            let scores: Vec<Option<f64>> = p.query_async(&mut admin).await.unwrap();
            scores.iter().all(Option::is_some)
        }
    })
    .await;
    proxy.set_reply_delay(Duration::from_millis(60));
    // Four liveness windows: a record refreshed too late is seen lapsed.
    let mut lapsed = 0;
    let end = Instant::now() + wt * 4;
    while Instant::now() < end {
        // The server's clock first: a record that lapses between the two
        // reads is not counted, so nothing is counted that did not lapse.
        let time: (String, String) = redis::cmd("TIME").query_async(&mut admin).await.unwrap();
        let mut p = redis::pipe();
        alive.iter().for_each(|k| {
            p.cmd("ZSCORE").arg(k).arg(waiter.id());
        });
        let scores: Vec<Option<f64>> = p.query_async(&mut admin).await.unwrap();
        let now_ms =
            time.0.parse::<f64>().unwrap() * 1000.0 + time.1.parse::<f64>().unwrap() / 1000.0;
        lapsed += scores
            .iter()
            .filter(|s| s.is_none_or(|d| d < now_ms))
            .count();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        lapsed, 0,
        "waiters' liveness records lapsed while they waited"
    );
    proxy.set_reply_delay(Duration::ZERO);
    for g in guards {
        g.unlock().await.unwrap();
    }
    for t in tasks {
        within("waiter", t).await.unwrap();
    }
}
