//! Watching a semaphore: the permits in use, woken by keyspace
//! notifications.

use deadbolt_core::watch::HoldEvent;
use deadbolt_semaphore::Semaphore;
use deadbolt_testkit::support::within;
use deadbolt_testkit::RedisServer;
use futures::StreamExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_sees_the_permits_in_use() {
    let srv = RedisServer::builder()
        .arg("notify-keyspace-events", "Kghzx")
        .start()
        .unwrap();
    let c = deadbolt_testkit::client(&srv.url()).await;
    let s = Semaphore::new(&c, "sw");
    assert!(s.try_set_permits(5).await.unwrap());
    let mut seen = Box::pin(Semaphore::new(&c, "sw").watch());
    let mut next = async || within("a change", seen.next()).await.unwrap().unwrap();
    assert_eq!(next().await, HoldEvent::Free);
    let p = s.acquire(3).await.unwrap();
    assert_eq!(next().await, HoldEvent::Shared { holders: 3 });
    p.release().await.unwrap();
    assert_eq!(next().await, HoldEvent::Shared { holders: 0 });
}

/// A lease that ends stops counting at its end, with nobody calling and
/// with or without keyspace notifications: the watch goes from 3 permits
/// in use to 1 when the 1.5 s lease of two of them ends (it stayed at 3
/// until some other call purged the lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_lease_stops_counting_at_its_end() {
    for notify in ["Kghzx", ""] {
        let srv = RedisServer::builder()
            .arg("notify-keyspace-events", notify)
            .start()
            .unwrap();
        let c = deadbolt_testkit::client(&srv.url()).await;
        let s = Semaphore::new(&c, "ended");
        assert!(s.try_set_permits(5).await.unwrap());
        let mut seen = Box::pin(Semaphore::new(&c, "ended").watch());
        let mut next = async || within("a change", seen.next()).await.unwrap().unwrap();
        assert_eq!(next().await, HoldEvent::Free);
        let kept = s.acquire(1).await.unwrap();
        assert_eq!(next().await, HoldEvent::Shared { holders: 1 });
        let lease = std::time::Duration::from_millis(1500);
        let _leased = s.acquire_with_lease(2, lease).await.unwrap();
        let taken = tokio::time::Instant::now();
        // Without notifications the catch-up read may see 1 and 3 as one
        // change, or both.
        let mut change = next().await;
        if change == (HoldEvent::Shared { holders: 1 }) {
            change = next().await;
        }
        assert_eq!(change, HoldEvent::Shared { holders: 3 }, "{notify}");
        assert_eq!(next().await, HoldEvent::Shared { holders: 1 }, "{notify}");
        assert!(taken.elapsed() >= lease - std::time::Duration::from_millis(100));
        kept.release().await.unwrap();
    }
}
