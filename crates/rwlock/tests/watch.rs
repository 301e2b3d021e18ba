//! Watching a read-write lock: the writer's holds and the number of read
//! holds, woken by keyspace notifications.

use deadbolt_core::Acquire as _;

use deadbolt_core::watch::HoldEvent;
use deadbolt_rwlock::RwLock;
use deadbolt_testkit::support::within;
use deadbolt_testkit::RedisServer;
use futures::StreamExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_sees_writers_and_the_number_of_readers() {
    let srv = RedisServer::builder()
        .arg("notify-keyspace-events", "Kghzx")
        .start()
        .unwrap();
    let c = deadbolt_testkit::client(&srv.url()).await;
    let mut seen = Box::pin(RwLock::new(&c, "rww").watch());
    let mut next = async || within("a change", seen.next()).await.unwrap().unwrap();
    assert_eq!(next().await, HoldEvent::Free);
    let rw = RwLock::new(&c, "rww");
    let w = rw.write_lock().lock().await.unwrap();
    let t = w.fencing_token();
    assert!(matches!(next().await, HoldEvent::Acquired(h) if h.token == t));
    w.unlock().await.unwrap();
    assert!(matches!(next().await, HoldEvent::Released(h) if h.token == t));
    let r1 = RwLock::new(&c, "rww").read_lock().lock().await.unwrap();
    assert_eq!(next().await, HoldEvent::Shared { holders: 1 });
    let r2 = RwLock::new(&c, "rww").read_lock().lock().await.unwrap();
    assert_eq!(next().await, HoldEvent::Shared { holders: 2 });
    r1.unlock().await.unwrap();
    r2.unlock().await.unwrap();
    // One or two changes, as the watch read them: it ends at none.
    loop {
        if next().await == (HoldEvent::Shared { holders: 0 }) {
            break;
        }
    }
    let w = rw.write_lock().lock().await.unwrap();
    let t = w.fencing_token();
    assert!(matches!(next().await, HoldEvent::Acquired(h) if h.token == t));
    assert!(RwLock::new(&c, "rww").force_unlock_write().await.unwrap());
    let e = next().await;
    assert!(
        matches!(&e, HoldEvent::ForceUnlocked(h) if h.token == t),
        "{e:?}"
    );
    drop(w);
}
