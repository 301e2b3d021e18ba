//! The ACL that docs/safety.md gives deadbolt's users is enough for every
//! primitive: taking, waiting (a release wakes a waiter of another client),
//! renewing, releasing, inspecting. (A user without the channels is refused
//! by name: `refused_subscription_fails_waiters_promptly` in deadbolt-lock.)

use deadbolt::Acquire as _;
use deadbolt::HoldGuard as _;
use std::time::Duration;

use deadbolt::Client;
use deadbolt_testkit::support::within;
use deadbolt_testkit::RedisServer;

/// The example `ACL SETUSER` line of docs/safety.md, read from the file so
/// that the test checks what users are told.
fn documented_acl() -> Vec<String> {
    let doc = include_str!("../docs/safety.md");
    let start = doc.find("`ACL SETUSER app").expect("the ACL example") + 1;
    let end = start + doc[start..].find('`').unwrap();
    doc[start..end]
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

async fn setup(srv: &RedisServer) -> String {
    let mut c = srv.conn().await;
    let args = documented_acl();
    let mut q = redis::cmd(&args[0]);
    for a in &args[1..] {
        q.arg(a);
    }
    let () = q.query_async(&mut c).await.expect("the documented ACL");
    // No default user for anything else.
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg("off")
        .query_async(&mut c)
        .await
        .unwrap();
    format!("redis://app:secret@127.0.0.1:{}/", srv.port())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_serves_every_primitive() {
    let srv = RedisServer::start().expect("redis-server");
    let url = setup(&srv).await;
    let cfg = |url: &str| {
        Client::builder(url)
            .watchdog_timeout(Duration::from_millis(600))
            .build()
    };
    let a = cfg(&url).await.expect("connect as app");
    let b = cfg(&url).await.expect("connect as app");
    let wait = Duration::from_secs(10);

    // Every kind: A holds across a few renewals (the watchdog renews every
    // 200 ms: the sleep is that window), B waits, A's release wakes B.
    macro_rules! hand_over {
        ($what:expr, $held:expr, $l:ident => $wait:expr, $release:ident) => {{
            let held = $held;
            let w = tokio::spawn(async move { $wait.await });
            tokio::time::sleep(Duration::from_millis(700)).await;
            assert_eq!(held.state(), deadbolt::LeaseState::Active, $what);
            held.$release().await.unwrap();
            let got = within($what, w).await.unwrap().unwrap();
            got.expect("woken").$release().await.unwrap();
        }};
    }
    let l = b.lock("l");
    hand_over!("lock", a.lock("l").lock().await.unwrap(), l => l.try_lock_for(wait), unlock);
    let l = b.fair_lock("f");
    hand_over!("fair", a.fair_lock("f").lock().await.unwrap(), l => l.try_lock_for(wait), unlock);
    let l = b.rw_lock("rw");
    hand_over!("rw", a.rw_lock("rw").write_lock().lock().await.unwrap(), l => l.read_lock().try_lock_for(wait), unlock);
    let l = b.multi_lock(&["m2", "m1"]);
    let m = a.multi_lock(&["m1", "m2"]);
    hand_over!("multi", m.lock().await.unwrap(), l => l.try_lock_for(wait), unlock);
    let s = a.semaphore("s");
    assert!(s.try_set_permits(1).await.unwrap());
    let l = b.semaphore("s");
    hand_over!("semaphore", s.acquire(1).await.unwrap(), l => l.try_acquire_for(1, wait), release);

    a.lock("l").inspect().await.unwrap();
    a.fair_lock("f").inspect().await.unwrap();
    a.rw_lock("rw").inspect().await.unwrap();
    s.inspect().await.unwrap();

    let latch = a.count_down_latch("d");
    assert!(latch.try_set_count(1).await.unwrap());
    let l = b.count_down_latch("d");
    let w = tokio::spawn(async move { l.wait_for(wait).await });
    latch.count_down().await.unwrap();
    assert!(within("latch waiter", w).await.unwrap().unwrap());

    a.shutdown().await;
    b.shutdown().await;
}
