//! Watching a semaphore: the permits in use, woken by keyspace
//! notifications.

use deadbolt_core::watch::HoldEvent;
use deadbolt_core::Client;
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
    let c = Client::builder(&srv.url()).build().await.unwrap();
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
