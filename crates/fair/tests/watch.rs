//! Watching a fair lock: a force-unlock hands the lock to the queue's head,
//! and a watch reports both halves (the old hold force-unlocked, the head's
//! hold acquired), woken by keyspace notifications.

use deadbolt_core::Acquire as _;
use std::time::Duration;

use deadbolt_core::watch::HoldEvent;
use deadbolt_fair::FairLock;
use deadbolt_testkit::support::within;
use deadbolt_testkit::RedisServer;
use futures::StreamExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_sees_a_force_unlock_hand_the_lock_to_the_head() {
    let srv = RedisServer::builder()
        .arg("notify-keyspace-events", "Kghx")
        .start()
        .unwrap();
    let a = deadbolt_testkit::client(&srv.url()).await;
    let b = deadbolt_testkit::client(&srv.url()).await;
    let mut seen = Box::pin(FairLock::new(&a, "fw").watch());
    assert_eq!(
        within("first", seen.next()).await.unwrap().unwrap(),
        HoldEvent::Free
    );
    let g = FairLock::new(&a, "fw").lock().await.unwrap();
    let t = g.fencing_token();
    let e = within("acquired", seen.next()).await.unwrap().unwrap();
    assert!(
        matches!(&e, HoldEvent::Acquired(h) if h.token == t),
        "{e:?}"
    );
    let fb = FairLock::new(&b, "fw");
    let waiter = tokio::spawn(async move { fb.lock().await });
    within("b queues", async {
        while FairLock::new(&a, "fw").inspect().await.unwrap().queued == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    assert!(FairLock::new(&a, "fw").force_unlock().await.unwrap());
    let e = within("forced", seen.next()).await.unwrap().unwrap();
    assert!(
        matches!(&e, HoldEvent::ForceUnlocked(h) if h.token == t),
        "{e:?}"
    );
    let e = within("the head's hold", seen.next())
        .await
        .unwrap()
        .unwrap();
    let HoldEvent::Acquired(h) = e else {
        panic!("{e:?}")
    };
    assert!(h.owner.starts_with(b.id()));
    let gb = within("b holds", waiter).await.unwrap().unwrap();
    assert_eq!(gb.fencing_token(), h.token);
    drop(g);
    gb.unlock().await.unwrap();
}
