//! The example primitive of docs/architecture.md (examples/simple_lock,
//! built on `deadbolt::primitive` alone), tested like the others: mutual
//! exclusion with rising fencing tokens, a wait woken by the unlock, no
//! re-entry, renewal by the watchdog, cancellation that leaves nothing
//! behind, and a key of another type reported by name.

#[path = "../examples/simple_lock/lock.rs"]
#[allow(dead_code)]
mod lock;

use deadbolt::HoldGuard as _;
use std::time::Duration;

use deadbolt::primitive::Acquire as _;
use deadbolt::{Error, LeaseState};
use deadbolt_testkit::support::{cmd, server, until, within};
use lock::SimpleLock;

async fn client(url: &str) -> deadbolt::Client {
    deadbolt::Client::builder(url)
        .watchdog_timeout(Duration::from_millis(600))
        .build()
        .await
        .expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_holder_at_a_time_and_a_wait_woken_by_the_unlock() {
    let srv = server();
    let (c1, c2) = (client(&srv.url()).await, client(&srv.url()).await);
    let (a, b) = (SimpleLock::new(&c1, "job"), SimpleLock::new(&c2, "job"));
    // A lease far longer than the test's hang bound: only the unlock's
    // message can wake the waiter in time.
    let g = a.lock_with_lease(Duration::from_secs(120)).await.unwrap();
    assert!(b.try_lock().await.unwrap().is_none(), "held by a");
    // Not reentrant: the holder's own handle waits like any other.
    assert!(a.try_lock().await.unwrap().is_none(), "no re-entry");
    let waiter = tokio::spawn(async move { b.lock().await.map(|g| (g.fencing_token(), g)) });
    until("b waits on the channel", || async {
        c2.as_core().waiters() == 1
    })
    .await;
    let first = g.fencing_token();
    g.unlock().await.unwrap();
    let (second, g2) = within("b is woken", waiter).await.unwrap().unwrap();
    assert!(second > first, "tokens rise: {first} then {second}");
    g2.unlock().await.unwrap();
    let left: Vec<String> = cmd(&srv, &["KEYS", "deadbolt:{job}:simple"]).await;
    assert!(left.is_empty(), "released: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_a_hold_past_its_lease() {
    let srv = server();
    let c = client(&srv.url()).await;
    let g = SimpleLock::new(&c, "long").lock().await.unwrap();
    // Three leases of 600 ms: only renewals keep it.
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert_eq!(g.state(), LeaseState::Active);
    let holder: Option<String> = cmd(&srv, &["GET", "deadbolt:{long}:simple"]).await;
    assert!(holder.is_some(), "still held in Redis");
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_and_dropped_guards_leave_nothing_held() {
    let srv = server();
    let c = client(&srv.url()).await;
    let holder = SimpleLock::new(&c, "c").lock().await.unwrap();
    let other = SimpleLock::new(&c, "c");
    for ms in [0, 1, 3] {
        let _ = tokio::time::timeout(Duration::from_millis(ms), other.lock()).await;
    }
    holder.unlock().await.unwrap();
    // Acquires cancelled while the lock is free may have been granted.
    for ms in [0, 1, 3] {
        let _ = tokio::time::timeout(Duration::from_millis(ms), other.lock()).await;
    }
    drop(other.lock().await.unwrap());
    assert!(c.releases_settled(Duration::from_secs(5)).await);
    let v: Option<String> = cmd(&srv, &["GET", "deadbolt:{c}:simple"]).await;
    assert_eq!(
        v, None,
        "nothing held after cancellations and a dropped guard"
    );
    assert!(SimpleLock::new(&c, "c").try_lock().await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_is_named_and_a_bad_name_refused() {
    let srv = server();
    let c = client(&srv.url()).await;
    let _: () = cmd(&srv, &["RPUSH", "deadbolt:{w}:simple", "x"]).await;
    match SimpleLock::new(&c, "w").try_lock().await {
        Err(Error::WrongType { key }) => assert_eq!(key, "deadbolt:{w}:simple"),
        other => panic!("expected WrongType, got {other:?}"),
    }
    assert!(matches!(
        SimpleLock::new(&c, "").try_lock().await,
        Err(Error::InvalidArgument(_))
    ));
}
