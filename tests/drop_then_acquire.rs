//! A guard dropped without `unlock().await` is released in the background;
//! the same owner's next acquire goes after that release, so it never
//! meets the dropped hold: no `UpgradeNotSupported` for a write lock taken
//! right after one's own read guard was dropped, and no re-entry of a
//! dropped Lock hold (which would hand out its old fencing token).

use deadbolt::Acquire as _;
use deadbolt::Client;
use deadbolt_testkit::support::within;
use deadbolt_testkit::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_lock_right_after_dropping_the_own_read_guard_waits_for_its_release() {
    let srv = RedisServer::start().unwrap();
    let c = Client::connect(&srv.url()).await.unwrap();
    let rw = c.rw_lock("drop");
    within("200 rounds", async {
        for i in 0..200 {
            let r = rw.read_lock().lock().await.unwrap();
            drop(r);
            let w = if i % 2 == 0 {
                rw.write_lock().lock().await
            } else {
                rw.write_lock()
                    .try_lock()
                    .await
                    .map(|w| w.expect("nobody else holds it"))
            };
            let w = w.unwrap_or_else(|e| panic!("round {i}: {e:?}"));
            drop(w);
        }
        // A one-shot try waits for the dropped hold's release too.
        for i in 0..200 {
            drop(rw.read_lock().lock().await.unwrap());
            let w = rw.write_lock().try_lock().await;
            let w = w.unwrap_or_else(|e| panic!("try round {i}: {e:?}"));
            drop(w.expect("nobody else holds it"));
        }
    })
    .await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_taken_right_after_dropping_the_own_guard_is_a_fresh_hold() {
    let srv = RedisServer::start().unwrap();
    let c = Client::connect(&srv.url()).await.unwrap();
    let lock = c.lock("drop");
    within("200 rounds", async {
        let mut last = 0;
        for i in 0..200 {
            let g = lock.lock().await.unwrap();
            assert!(g.fencing_token() > last, "round {i}: a re-entered token");
            last = g.fencing_token();
            drop(g);
        }
    })
    .await;
    assert!(lock.try_lock().await.unwrap().is_some());
    c.shutdown().await;
}

/// The dropped read hold's release cannot land for a while (a partition:
/// the client's connection black-holed, then reset): a write lock asked
/// for meanwhile by the same handle waits for that release and then takes
/// the lock; it never reports an upgrade (the torture test found it after
/// a partition, seed 698227158206926433 on Valkey).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_lock_waits_for_a_read_release_held_up_by_a_partition() {
    let srv = RedisServer::start().unwrap();
    let proxy = deadbolt_testkit::FaultProxy::start(srv.addr())
        .await
        .unwrap();
    let c = Client::builder(&proxy.url())
        .command_timeout(std::time::Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    let rw = c.rw_lock("partitioned");
    for round in 0..10 {
        let r = rw.read_lock().lock().await.unwrap();
        proxy.set_blackhole(true);
        drop(r);
        // The release has timed out a few times by now.
        tokio::time::sleep(std::time::Duration::from_millis(800)).await;
        let w = rw.write_lock();
        let take =
            tokio::spawn(async move { w.try_lock_for(std::time::Duration::from_secs(10)).await });
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        proxy.set_blackhole(false);
        let got = within("the write lock", take).await.unwrap();
        let g = got
            .unwrap_or_else(|e| panic!("round {round}: {e:?}"))
            .expect("nobody else holds it");
        g.unlock().await.unwrap();
    }
    c.shutdown().await;
}
