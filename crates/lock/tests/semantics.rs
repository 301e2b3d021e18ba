//! Lock semantics against a real redis-server.

mod common;

use deadbolt_core::Acquire as _;
use deadbolt_core::HoldGuard as _;
use std::time::{Duration, Instant};

use common::*;
use deadbolt_core::{Error, LeaseState};
use deadbolt_lock::Lock;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrancy_counts_and_exclusion() {
    let srv = server();
    let c = client(&srv.url()).await;
    let a = Lock::new(&c, "re");
    let a2 = a.clone();
    let b = Lock::new(&c, "re");

    let g1 = a.lock_with_lease(Duration::from_secs(10)).await.unwrap();
    let g2 = a2
        .try_lock_with(Duration::ZERO, Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        g1.fencing_token(),
        g2.fencing_token(),
        "re-entry keeps the token"
    );
    assert_eq!(a.hold_count().await.unwrap(), 2);
    assert!(a.is_held().await.unwrap());
    assert!(!b.is_held().await.unwrap());
    assert_eq!(b.hold_count().await.unwrap(), 0);
    assert!(
        b.try_lock().await.unwrap().is_none(),
        "another owner is excluded"
    );

    // A shorter re-entry lease does not shorten the TTL, and the inner unlock leaves it alone.
    let ttl = a.remaining_ttl().await.unwrap().unwrap();
    assert!(ttl > Duration::from_secs(8), "ttl {ttl:?}");
    g2.unlock().await.unwrap();
    assert_eq!(a.hold_count().await.unwrap(), 1);
    let ttl = a.remaining_ttl().await.unwrap().unwrap();
    assert!(
        ttl > Duration::from_secs(8),
        "inner unlock must not reset the ttl: {ttl:?}"
    );

    g1.unlock().await.unwrap();
    assert!(!a.is_locked().await.unwrap());
    assert_eq!(a.remaining_ttl().await.unwrap(), None);
    let g = b
        .try_lock()
        .await
        .unwrap()
        .expect("free after the last unlock");
    assert!(g.fencing_token() > g1_token_floor(&g));
    g.unlock().await.unwrap();
    assert_eq!(dbsize(&srv).await, 1, "only the fencing counter remains");
}

fn g1_token_floor(_g: &deadbolt_lock::LockGuard) -> u64 {
    0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_lease_expiry_admits_a_waiter_without_a_message() {
    let srv = server();
    let c = client(&srv.url()).await;
    let holder = Lock::new(&c, "exp");
    let waiter = Lock::new(&c, "exp");
    let lease = Duration::from_millis(600);
    let sent = Instant::now();
    let g = holder.lock_with_lease(lease).await.unwrap();
    let w = tokio::spawn(async move {
        let g = waiter.lock().await.unwrap();
        (Instant::now(), g)
    });
    let (got_at, g2) = within("waiter", w).await.unwrap();
    let expiry = sent + lease;
    assert!(
        got_at + Duration::from_millis(5) >= expiry,
        "acquired before the lease ended"
    );
    assert!(
        got_at < expiry + Duration::from_millis(150),
        "waiter took {:?} after the expiry (a poller would take ~100 ms)",
        got_at - expiry
    );
    // The expired guard no longer holds: its unlock says so.
    assert!(matches!(g.unlock().await, Err(Error::NotHeld)));
    g2.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_for_gives_up_after_the_wait() {
    let srv = server();
    let c = client(&srv.url()).await;
    let holder = Lock::new(&c, "busy");
    let other = Lock::new(&c, "busy");
    let g = holder.lock().await.unwrap();
    let t = Instant::now();
    let r = within(
        "try_lock_for",
        other.try_lock_for(Duration::from_millis(400)),
    )
    .await;
    assert!(r.unwrap().is_none());
    assert!(t.elapsed() >= Duration::from_millis(400));
    assert_eq!(c.waiters(), 0, "the waiter left its channel");
    assert_eq!(
        c.subscribed_channels(),
        1,
        "the channel lingers for the next wait"
    );
    // ... and is unsubscribed a moment later, on the server too (no event
    // exists for this; look every 50 ms).
    let mut raw = srv.conn().await;
    within("unsubscribe after linger", async {
        loop {
            let chans: Vec<String> = redis::cmd("PUBSUB")
                .arg("CHANNELS")
                .query_async(&mut raw)
                .await
                .unwrap();
            // Every client listens on its own channel (no hash tag) for
            // its life: the key channels are the ones that come and go.
            if !chans.iter().any(|c| c.contains('{')) && c.subscribed_channels() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_really_waits_and_wakes_on_unlock() {
    let srv = server();
    let c1 = client(&srv.url()).await;
    let c2 = client(&srv.url()).await;
    let holder = Lock::new(&c1, "ww");
    let waiter = Lock::new(&c2, "ww");
    let g = holder.lock().await.unwrap();
    srv.reset_stats().await;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let w = tokio::spawn(async move {
        let g = waiter.lock().await.unwrap();
        let _ = tx.send(Instant::now());
        g
    });
    tokio::time::sleep(Duration::from_secs(2)).await; // time passing is the point here
    let stats = srv.commandstats().await;
    // Round trips only: commands run inside scripts are counted by Redis too.
    let total: u64 = [
        "evalsha",
        "eval",
        "subscribe",
        "unsubscribe",
        "ping",
        "script|load",
    ]
    .iter()
    .map(|k| stats.get(*k).copied().unwrap_or(0))
    .sum();
    assert!(
        total <= 8,
        "a waiter blocked 2 s sent {total} commands: {stats:?}"
    );
    let unlocked_at = Instant::now();
    g.unlock().await.unwrap();
    let got_at = within("waiter", rx).await.unwrap();
    let handoff = got_at.saturating_duration_since(unlocked_at);
    assert!(
        handoff < Duration::from_millis(50),
        "hand-off took {handoff:?}"
    );
    w.await.unwrap().unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keeps_the_hold_and_stops_after_unlock() {
    let srv = server();
    let c = client_with(&srv.url(), Duration::from_secs(1)).await;
    let lock = Lock::new(&c, "wd");
    let g = lock.lock().await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await; // five leases pass
    assert!(lock.is_held().await.unwrap());
    assert_eq!(g.state(), LeaseState::Active);
    assert!(g.valid_for() > Duration::ZERO);
    g.unlock().await.unwrap();
    assert_eq!(c.renewed_holds(), 0);
    let before = evalsha_calls(&srv).await;
    tokio::time::sleep(Duration::from_millis(1500)).await; // several renewal periods
    assert_eq!(
        evalsha_calls(&srv).await,
        before,
        "a renewal was sent after unlock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_when_the_key_is_deleted() {
    let srv = server();
    let c = client_with(&srv.url(), Duration::from_millis(600)).await;
    let lock = Lock::new(&c, "gone");
    let g = lock.lock().await.unwrap();
    let lost = g.lost();
    let mut raw = srv.conn().await;
    let _: i64 = redis::cmd("DEL")
        .arg(lock.key().unwrap())
        .query_async(&mut raw)
        .await
        .unwrap();
    let state = within("lost()", lost).await;
    assert_eq!(state, LeaseState::Lost);
    assert_eq!(g.state(), LeaseState::Lost);
    assert!(matches!(g.unlock().await, Err(Error::NotHeld)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_increase_across_owners_and_restarts() {
    let mut srv = server();
    let c = client(&srv.url()).await;
    let mut last = 0;
    for i in 0..5 {
        let g = Lock::new(&c, "fence").lock().await.unwrap();
        assert!(g.fencing_token() > last, "round {i}");
        last = g.fencing_token();
        g.unlock().await.unwrap();
    }
    srv.restart().unwrap();
    // The client rides out the restart: lock() waits for the reconnection.
    let g = within("lock after restart", Lock::new(&c, "fence").lock())
        .await
        .unwrap();
    assert!(g.fencing_token() > last, "{} <= {last}", g.fencing_token());
    assert!(g.fencing_token() < (1 << 53));
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_and_writes_nothing() {
    let srv = server();
    let c = client(&srv.url()).await;
    let empty = Lock::new(&c, "");
    assert!(matches!(
        empty.try_lock().await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        empty.is_locked().await,
        Err(Error::InvalidArgument(_))
    ));
    let l = Lock::new(&c, "bad");
    for lease in [
        Duration::ZERO,
        Duration::from_micros(500),
        Duration::MAX,
        Duration::from_millis(deadbolt_core::MAX_LEASE_MS + 1),
    ] {
        assert!(
            matches!(
                l.try_lock_with(Duration::ZERO, lease).await,
                Err(Error::InvalidArgument(_))
            ),
            "{lease:?}"
        );
        assert!(
            matches!(
                l.lock_with_lease(lease).await,
                Err(Error::InvalidArgument(_))
            ),
            "{lease:?}"
        );
    }
    assert_eq!(dbsize(&srv).await, 0, "refused calls wrote something");
    assert!(Lock::new(&c, "bad")
        .try_lock_with(
            Duration::ZERO,
            Duration::from_millis(deadbolt_core::MAX_LEASE_MS)
        )
        .await
        .unwrap()
        .is_some());

    // A key of another type in the way.
    let w = Lock::new(&c, "typed");
    let key = w.key().unwrap().to_string();
    let mut raw = srv.conn().await;
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("x")
        .query_async(&mut raw)
        .await
        .unwrap();
    match w.try_lock().await {
        Err(Error::WrongType { key: k }) => assert_eq!(k, key),
        other => panic!("expected WrongType, got {other:?}"),
    }
    match w.try_lock_for(Duration::from_millis(200)).await {
        Err(Error::WrongType { .. }) => {}
        other => panic!("expected WrongType, got {other:?}"),
    }
    let v: String = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(v, "x");
    assert!(
        !exists(&srv, c.keys("lock", w.name()).unwrap().fence()).await,
        "nothing written"
    );
    assert!(matches!(w.is_locked().await, Err(Error::WrongType { .. })));

    // The fencing counter's key holding another type: refused before the hold is written.
    let f = Lock::new(&c, "fenced");
    let hold = f.key().unwrap().to_string();
    let fence = c.keys("lock", "fenced").unwrap().fence().to_string();
    let _: () = redis::cmd("HSET")
        .arg(&fence)
        .arg("x")
        .arg(1)
        .query_async(&mut raw)
        .await
        .unwrap();
    match f.try_lock().await {
        Err(Error::WrongType { key }) => assert_eq!(key, fence),
        other => panic!("expected WrongType, got {other:?}"),
    }
    assert!(!exists(&srv, &hold).await, "the hold was written");
    assert!(matches!(
        deadbolt_core::Client::builder(&srv.url())
            .namespace("a{b")
            .build()
            .await,
        Err(Error::InvalidArgument(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_helper_unlocks_and_dropped_guards_are_released() {
    let srv = server();
    let c = client(&srv.url()).await;
    let lock = Lock::new(&c, "run");
    let token = lock.run(|t| async move { t }).await.unwrap();
    assert!(token > 0);
    assert!(!lock.is_locked().await.unwrap());
    let g = lock.lock().await.unwrap();
    drop(g);
    assert!(c.releases_settled(HANG).await);
    assert!(
        !lock.is_locked().await.unwrap(),
        "the releaser released the dropped guard"
    );
    c.shutdown().await;
    assert!(matches!(lock.try_lock().await, Err(Error::Shutdown)));
}

/// Guards and futures can cross threads.
#[allow(dead_code)]
fn send_sync(c: deadbolt_core::Client, g: deadbolt_lock::LockGuard) {
    fn is_send_sync<T: Send + Sync>(_: &T) {}
    fn is_send<T: Send>(_: &T) {}
    let l = Lock::new(&c, "x");
    is_send_sync(&l);
    is_send(&l.lock());
    is_send(&l.try_lock_for(Duration::ZERO));
    is_send(&l.is_locked());
    is_send(&l.run(|t| async move { t }));
    is_send_sync(&g);
    is_send(&g.lost());
    is_send(&g.unlock());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_client_still_releases_in_the_background() {
    let srv = server();
    let c = client(&srv.url()).await;
    let lock = Lock::new(&c, "orphan");
    let key = lock.key().unwrap().to_string();
    let g = lock.lock().await.unwrap();
    assert!(exists(&srv, &key).await);
    drop(g);
    drop(lock);
    drop(c);
    // The releaser keeps its own connection until the release is answered.
    let mut raw = srv.conn().await;
    within("background release", async {
        loop {
            let n: i64 = redis::cmd("EXISTS")
                .arg(&key)
                .query_async(&mut raw)
                .await
                .unwrap();
            if n == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_waits_at_once() {
    let srv = server();
    let c1 = client(&srv.url()).await;
    let c2 = client(&srv.url()).await;
    let g = Lock::new(&c1, "closing").lock().await.unwrap();
    let waiter = Lock::new(&c2, "closing");
    let t = tokio::spawn(async move { waiter.lock().await });
    srv.wait_for_channels(1).await;
    let started = Instant::now();
    c2.shutdown().await;
    let r = within("waiter after shutdown", t).await.unwrap();
    assert!(matches!(r, Err(Error::Shutdown)), "{r:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_renews_many_holds_per_round_trip() {
    let srv = server();
    let c = client_with(&srv.url(), Duration::from_millis(900)).await;
    let mut guards = Vec::new();
    for i in 0..300 {
        guards.push(Lock::new(&c, &format!("many:{i}")).lock().await.unwrap());
    }
    assert_eq!(c.renewed_holds(), 300);
    srv.reset_stats().await;
    tokio::time::sleep(Duration::from_millis(1000)).await; // about three renewal rounds
    let calls = evalsha_calls(&srv).await;
    // 300 holds in batches of 256: two calls a round, never one per hold.
    assert!(
        (2..=8).contains(&calls),
        "{calls} renewal calls for 300 holds"
    );
    for g in guards {
        assert_eq!(g.state(), LeaseState::Active);
        g.unlock().await.unwrap();
    }
}

/// A `Lock` keeps no queue on the server: its queue lists nobody, also
/// while a waiter waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_lists_no_queue() {
    let srv = server();
    let c = client(&srv.url()).await;
    let (a, b) = (Lock::new(&c, "nq"), Lock::new(&c, "nq"));
    let g = a.lock().await.unwrap();
    let waiter = tokio::spawn(async move { b.lock().await.unwrap().unlock().await });
    until("the waiter waits", || async { c.waiters() == 1 }).await;
    assert!(a.queue(10).await.unwrap().is_empty());
    g.unlock().await.unwrap();
    within("waiter", waiter).await.unwrap().unwrap();
}
