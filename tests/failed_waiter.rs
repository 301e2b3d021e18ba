//! A waiter that fails gives back what the server recorded for it at once:
//! its queue entry, and a grant a release made to that entry. Here the
//! failure is a refusal in the middle of the waiter's first script (its
//! user may not set TTLs: the queue entry is written, then PEXPIRE is
//! refused), so the acquire ends with an error while the server holds its
//! entry. The entry used to stay: the next release granted the primitive
//! to it, and everyone waited out the failed client's lease (30 s).

use deadbolt::Acquire as _;

use deadbolt::Client;
use deadbolt_testkit::support::{cmd, server, until, within};
use deadbolt_testkit::RedisServer;

/// A client whose user may do everything but set a TTL.
async fn client_without_pexpire(srv: &RedisServer) -> Client {
    let () = cmd(
        srv,
        &[
            "ACL", "SETUSER", "nottl", "on", "nopass", "~*", "&*", "+@all", "-pexpire",
        ],
    )
    .await;
    let url = format!("redis://nottl:x@127.0.0.1:{}/", srv.port());
    Client::connect(&url).await.expect("connect as nottl")
}

async fn queue_len(srv: &RedisServer, key: &str) -> i64 {
    cmd(srv, &["ZCARD", key]).await
}

/// The waiter failed, and its entry leaves the queue `q` without anyone
/// else's call.
async fn left_at_once<T: std::fmt::Debug>(srv: &RedisServer, q: &str, failed: deadbolt::Result<T>) {
    assert!(
        failed.is_err(),
        "the waiter's script was refused: {failed:?}"
    );
    until("the failed waiter's entry is gone", || async {
        queue_len(srv, q).await == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_waiter_that_fails_leaves_the_queue_at_once() {
    let srv = server();
    let h = Client::connect(&srv.url()).await.unwrap();
    let w = client_without_pexpire(&srv).await;
    let held = h.fair_lock("failed").lock().await.unwrap();
    let q = "deadbolt:{failed}:fair:q";
    let failed = w.fair_lock("failed").lock().await;
    left_at_once(&srv, q, failed).await;
    held.unlock().await.unwrap();
    let other = Client::connect(&srv.url()).await.unwrap();
    let got = within(
        "the lock, free since the unlock",
        other.fair_lock("failed").try_lock(),
    )
    .await
    .unwrap();
    assert!(got.is_some(), "nobody holds the lock after its unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_waiter_that_fails_leaves_the_queue_at_once() {
    let srv = server();
    let h = Client::connect(&srv.url()).await.unwrap();
    let w = client_without_pexpire(&srv).await;
    let sem = h.semaphore("failed");
    sem.set_permits(1).await.unwrap();
    let held = sem.acquire(1).await.unwrap();
    let q = "deadbolt:{failed}:sem:q";
    let failed = w.semaphore("failed").acquire(1).await;
    left_at_once(&srv, q, failed).await;
    held.release().await.unwrap();
    let other = Client::connect(&srv.url()).await.unwrap();
    let got = within(
        "the permit, free since the release",
        other.semaphore("failed").try_acquire(1),
    )
    .await
    .unwrap();
    assert!(got.is_some(), "the permit is free after its release");
}

/// `waiter_timeout(Duration::MAX)` is refused when the client is built,
/// and the largest accepted one serves a FairLock and a Semaphore wait
/// (a larger one made every queued wait fail in Lua).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_accepted_waiter_timeout_serves_queued_waits() {
    let srv = server();
    let refused = Client::builder(&srv.url())
        .waiter_timeout(std::time::Duration::MAX)
        .build()
        .await;
    assert!(
        matches!(refused, Err(deadbolt::Error::InvalidArgument(_))),
        "{:?}",
        refused.err()
    );
    let largest = std::time::Duration::from_millis(deadbolt::MAX_LEASE_MS / 3);
    let w = Client::builder(&srv.url())
        .waiter_timeout(largest)
        .build()
        .await
        .unwrap();
    let h = Client::connect(&srv.url()).await.unwrap();
    let held = h.fair_lock("largest").lock().await.unwrap();
    let lock = w.fair_lock("largest");
    let waiter = tokio::spawn(async move { lock.lock().await });
    until("the fair waiter queues", || async {
        queue_len(&srv, "deadbolt:{largest}:fair:q").await == 1
    })
    .await;
    held.unlock().await.unwrap();
    within("the fair waiter", waiter)
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();

    let sem = h.semaphore("largest");
    sem.set_permits(1).await.unwrap();
    let held = sem.acquire(1).await.unwrap();
    let other = w.semaphore("largest");
    let waiter = tokio::spawn(async move { other.acquire(1).await });
    until("the semaphore waiter queues", || async {
        queue_len(&srv, "deadbolt:{largest}:sem:q").await == 1
    })
    .await;
    held.release().await.unwrap();
    within("the semaphore waiter", waiter)
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
}
