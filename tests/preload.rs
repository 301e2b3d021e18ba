//! The facade loads every primitive's scripts when it connects: on a fresh
//! server (no script cached) one call of each primitive's scripts is
//! answered without a single NOSCRIPT (the election's were once missed).

use deadbolt::Acquire as _;
use deadbolt::Client;
use deadbolt_testkit::support::{cmd, within};
use deadbolt_testkit::RedisServer;
use futures::StreamExt;

/// `errorstat_NOSCRIPT` from INFO errorstats: 0 when absent.
async fn noscript_errors(srv: &RedisServer) -> u64 {
    let info: String = cmd(srv, &["INFO", "errorstats"]).await;
    info.lines()
        .find_map(|l| l.strip_prefix("errorstat_NOSCRIPT:count="))
        .map_or(0, |n| n.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_server_answers_no_script_call_with_noscript() {
    let srv = RedisServer::start().unwrap();
    let c = Client::connect(&srv.url()).await.unwrap();
    within("every primitive once", async {
        c.lock("l").lock().await.unwrap().unlock().await.unwrap();
        c.fair_lock("f")
            .lock()
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
        let rw = c.rw_lock("rw");
        rw.read_lock().lock().await.unwrap().unlock().await.unwrap();
        rw.write_lock()
            .lock()
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
        let s = c.semaphore("s");
        s.try_set_permits(2).await.unwrap();
        s.acquire(1).await.unwrap().release().await.unwrap();
        let latch = c.count_down_latch("d");
        latch.try_set_count(1).await.unwrap();
        latch.count_down().await.unwrap();
        latch.wait().await.unwrap();
        let m = c.multi_lock(&["m1", "m2"]);
        m.lock().await.unwrap().unlock().await.unwrap();
        let e = c.election("e");
        let mut seen = Box::pin(e.observe());
        assert_eq!(seen.next().await.unwrap().unwrap(), None);
        let l = e.campaign("me").await.unwrap();
        assert!(e.leader().await.unwrap().is_some());
        assert!(seen.next().await.unwrap().unwrap().is_some());
        l.resign().await.unwrap();
    })
    .await;
    assert_eq!(noscript_errors(&srv).await, 0);
    c.shutdown().await;
}
