//! Faults against a real redis-server: cancellation, script flush, killed
//! subscriber connections, a dead server, dropped replies.

mod common;

use deadbolt_core::Acquire as _;
use std::time::{Duration, Instant};

use common::*;
use deadbolt_core::{Client, Error};
use deadbolt_lock::Lock;

async fn proxied(srv: &RedisServer) -> FaultProxy {
    FaultProxy::start(srv.addr()).await.expect("proxy")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_leave_nothing_held() {
    let srv = server();
    let proxy = proxied(&srv).await;
    let c = client(&proxy.url()).await;
    proxy.set_reply_delay(Duration::from_millis(2));
    let lock = Lock::new(&c, "cancel");

    // Free lock: every cancelled acquire that may have been granted is released.
    let mut micros = 0;
    while micros <= 6000 {
        if let Ok(g) = tokio::time::timeout(Duration::from_micros(micros), lock.lock()).await {
            g.unwrap().unlock().await.unwrap();
        }
        micros += 250;
    }
    assert!(c.releases_settled(HANG).await);
    assert!(
        !exists(&srv, lock.key().unwrap()).await,
        "a cancelled acquire stayed held"
    );

    // Held by this handle: cancelled re-entries never inflate the hold count.
    let outer = lock.lock().await.unwrap();
    let inner = lock.clone();
    let mut micros = 0;
    while micros <= 6000 {
        if let Ok(g) = tokio::time::timeout(Duration::from_micros(micros), inner.lock()).await {
            g.unwrap().unlock().await.unwrap();
        }
        micros += 250;
    }
    assert!(c.releases_settled(HANG).await);
    assert_eq!(lock.hold_count().await.unwrap(), 1, "hold count inflated");
    outer.unlock().await.unwrap();
    assert!(!exists(&srv, lock.key().unwrap()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_is_transparent() {
    let srv = server();
    let c = client(&srv.url()).await;
    let lock = Lock::new(&c, "flush");
    let mut raw = srv.conn().await;
    for _ in 0..3 {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut raw)
            .await
            .unwrap();
        let g = lock.lock().await.unwrap();
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut raw)
            .await
            .unwrap();
        assert!(lock.is_held().await.unwrap());
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut raw)
            .await
            .unwrap();
        g.unlock().await.unwrap();
    }
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_subscriber_connection_does_not_strand_waiters() {
    let srv = server();
    let c1 = client(&srv.url()).await;
    let c2 = client(&srv.url()).await;
    let holder = Lock::new(&c1, "kill");
    let g = holder.lock().await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let l = Lock::new(&c2, "kill");
        waiters.push(tokio::spawn(async move {
            let g = l.lock().await.unwrap();
            let at = Instant::now();
            g.unlock().await.unwrap();
            at
        }));
    }
    // Wait until the waiters' client is subscribed, then kill its subscriber connection.
    srv.wait_for_channels(1).await;
    let mut raw = srv.conn().await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(killed >= 1, "no pubsub client was killed");
    // Wait until the channel is back on the server (re-subscribed by core).
    srv.wait_for_channels(1).await;
    let unlocked = Instant::now();
    g.unlock().await.unwrap();
    let mut first = None;
    for w in waiters {
        let at = within("waiter", w).await.unwrap();
        first = Some(first.map_or(at, |f: Instant| f.min(at)));
    }
    let handoff = first.unwrap() - unlocked;
    assert!(
        handoff < Duration::from_millis(100),
        "first waiter got it {handoff:?} after unlock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_server_is_unavailable_promptly() {
    let mut srv = server();
    let c = fast_client(&srv.url(), 500).await;
    let lock = Lock::new(&c, "down");
    srv.stop();
    let started = Instant::now();
    // The first call may race the connection's own discovery of the close
    // (then it is Indeterminate); from then on the client knows.
    let mut last = None;
    for _ in 0..3 {
        match lock.try_lock().await {
            Err(e @ Error::Unavailable(_)) => {
                last = Some(e);
                break;
            }
            Err(e) if e.is_indeterminate() => last = Some(e),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(matches!(last, Some(Error::Unavailable(_))), "{last:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    let t = Instant::now();
    let r = lock.try_lock_for(Duration::from_millis(300)).await;
    assert!(matches!(r, Err(Error::Unavailable(_))), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(2));

    // When the server comes back, the client reconnects by itself.
    srv.restart().unwrap();
    let g = within("lock after restart", lock.lock()).await.unwrap();
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_reply_is_indeterminate_and_nothing_stays_held() {
    let srv = server();
    let proxy = proxied(&srv).await;
    let c = fast_client(&proxy.url(), 300).await;
    let lock = Lock::new(&c, "dropped");
    proxy.drop_reply_matching(
        lock.key().unwrap().as_bytes(),
        1,
        Duration::from_millis(800),
    );
    let r = lock.try_lock().await;
    assert!(matches!(r, Err(Error::Indeterminate(_))), "{r:?}");
    // The acquire ran on the server; the releaser takes it back once Redis answers again.
    assert!(c.releases_settled(HANG).await);
    assert!(
        !exists(&srv, lock.key().unwrap()).await,
        "the possible grant stayed held"
    );
    // And the lock works afterwards.
    let g = within("lock", lock.lock()).await.unwrap();
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_server_makes_waiting_lock_ride_it_out() {
    let srv = server();
    let c = fast_client(&srv.url(), 300).await;
    let lock = Lock::new(&c, "paused");
    srv.pause();
    let l2 = lock.clone();
    let task = tokio::spawn(async move { l2.lock().await });
    tokio::time::sleep(Duration::from_millis(800)).await; // several command timeouts pass
    srv.resume();
    let g = within("lock after resume", task).await.unwrap().unwrap();
    assert_eq!(
        lock.hold_count().await.unwrap(),
        1,
        "retries of one attempt count once"
    );
    g.unlock().await.unwrap();
    assert!(c.releases_settled(HANG).await);
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_renewals_mark_the_hold_lost_when_validity_runs_out() {
    let srv = server();
    let proxy = proxied(&srv).await;
    let c = Client::builder(&proxy.url())
        .watchdog_timeout(Duration::from_millis(600))
        .command_timeout(Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    let lock = Lock::new(&c, "silent");
    let g = lock.lock().await.unwrap();
    let lost = g.lost();
    let cut = Instant::now();
    proxy.set_blackhole(true);
    assert_eq!(
        within("lost()", lost).await,
        deadbolt_core::LeaseState::Lost
    );
    let after = cut.elapsed();
    assert!(
        after <= Duration::from_millis(1200),
        "lost() fired {after:?} after the cut"
    );
    assert_eq!(g.state(), deadbolt_core::LeaseState::Lost);
    assert_eq!(g.valid_for(), Duration::ZERO);
    proxy.set_blackhole(false);
    drop(g);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconfirmed_unlock_is_unknown_and_finished_by_the_releaser() {
    let srv = server();
    let proxy = proxied(&srv).await;
    let c = fast_client(&proxy.url(), 300).await;
    let lock = Lock::new(&c, "unknown");
    let g = lock.lock().await.unwrap();
    let lost = g.lost();
    let sha = deadbolt_lock::scripts::LOCK_RELEASE.sha().to_string();
    proxy.drop_reply_matching(sha.as_bytes(), 1, Duration::from_millis(600));
    let r = g.unlock().await;
    assert!(matches!(r, Err(Error::Indeterminate(_))), "{r:?}");
    assert_eq!(
        within("lost()", lost).await,
        deadbolt_core::LeaseState::Unknown
    );
    assert!(c.releases_settled(HANG).await);
    assert!(!exists(&srv, lock.key().unwrap()).await);
}

/// A waiter whose tries go unanswered past the command timeout (replies
/// slower than it, as from an overloaded server) backs off: its tries grow
/// apart. Each timed-out try still runs on the server, so a waiter that
/// retried every half second added to the queue that made it time out: a
/// flash sale of 100,000 buyers on 50 clients with a 1 s timeout sent
/// 215,599 commands a second while they waited (crates/failures).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tries_that_time_out_back_off() {
    let srv = server();
    let holder = client(&srv.url()).await;
    let g = Lock::new(&holder, "overloaded")
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let proxy = proxied(&srv).await;
    let c = fast_client(&proxy.url(), 200).await;
    let lock = Lock::new(&c, "overloaded");
    proxy.set_reply_delay(Duration::from_millis(300));
    let before = srv.evalsha_calls().await;
    let r = lock.try_lock_for(Duration::from_secs(8)).await;
    assert!(r.is_err(), "{r:?}");
    let tries = srv.evalsha_calls().await - before;
    // Tries at about 0.2, 0.6, 1.4, 3 and 6.2 s (each pause doubling
    // from the 200 ms the first one waited, with jitter), and the
    // releases of the attempt in doubt: 8 s of retrying every 0.2 to
    // 0.7 s were 12 tries or more.
    assert!(tries <= 9, "{tries} scripts in 8 s");
    proxy.set_reply_delay(Duration::ZERO);
    assert!(c.releases_settled(HANG).await);
    g.unlock().await.unwrap();
}
