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
