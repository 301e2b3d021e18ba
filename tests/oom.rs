//! Every primitive under `maxmemory` with noeviction: an acquire,
//! waiting or not, fails with the server's OOM error as
//! it is (not a `WrongType` or a timeout) and leaves nothing written; with
//! memory back, the same handle works.

use deadbolt::Acquire as _;
use deadbolt::HoldGuard as _;
use std::future::Future;
use std::time::Duration;

use deadbolt::{Client, Error};
use deadbolt_testkit::support::{cmd, until, within};
use deadbolt_testkit::RedisServer;

/// A server that refuses writes (noeviction) once `maxmemory` is set.
async fn noeviction_server() -> RedisServer {
    let srv = RedisServer::start().expect("redis-server");
    let _: () = cmd(&srv, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]).await;
    srv
}

/// Run `op` with memory full; it must fail with OOM and leave the keys as
/// they were. Memory is given back before returning.
async fn refused<T: std::fmt::Debug>(
    srv: &RedisServer,
    what: &str,
    op: impl Future<Output = deadbolt::Result<T>>,
) {
    let before: Vec<String> = cmd(srv, &["KEYS", "*"]).await;
    let _: () = cmd(srv, &["CONFIG", "SET", "maxmemory", "1"]).await;
    let r = tokio::time::timeout(Duration::from_secs(20), op)
        .await
        .unwrap_or_else(|_| panic!("{what}: hung under OOM"));
    let _: () = cmd(srv, &["CONFIG", "SET", "maxmemory", "0"]).await;
    match &r {
        Err(Error::Redis(e)) if e.code() == Some("OOM") => {}
        other => panic!("{what}: {other:?}"),
    }
    let mut after: Vec<String> = cmd(srv, &["KEYS", "*"]).await;
    let mut before = before;
    before.sort();
    after.sort();
    assert_eq!(before, after, "{what}: keys written under OOM");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_primitive_reports_out_of_memory_as_it_is() {
    let srv = noeviction_server().await;
    let c = Client::connect(&srv.url()).await.unwrap();
    let wait = Duration::from_secs(2);

    let fair = c.fair_lock("f");
    refused(&srv, "fair try_lock", fair.try_lock()).await;
    refused(&srv, "fair try_lock_for", fair.try_lock_for(wait)).await;
    fair.try_lock()
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();

    let rw = c.rw_lock("rw");
    refused(&srv, "try_read", rw.read_lock().try_lock()).await;
    refused(&srv, "try_read_for", rw.read_lock().try_lock_for(wait)).await;
    refused(&srv, "try_write", rw.write_lock().try_lock()).await;
    refused(&srv, "try_write_for", rw.write_lock().try_lock_for(wait)).await;
    rw.read_lock()
        .try_lock()
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();
    rw.write_lock()
        .try_lock()
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();

    let multi = c.multi_lock(&["m1", "m2"]);
    refused(&srv, "multi try_lock", multi.try_lock()).await;
    refused(&srv, "multi try_lock_for", multi.try_lock_for(wait)).await;
    multi
        .try_lock()
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();

    let sem = c.semaphore("s");
    refused(&srv, "try_set_permits", sem.try_set_permits(2)).await;
    assert!(sem.try_set_permits(2).await.unwrap());
    refused(&srv, "try_acquire", sem.try_acquire(1)).await;
    refused(&srv, "try_acquire_for", sem.try_acquire_for(1, wait)).await;
    sem.try_acquire(1)
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();

    let latch = c.count_down_latch("l");
    refused(&srv, "try_set_count", latch.try_set_count(1)).await;
    assert!(latch.try_set_count(1).await.unwrap());

    // Busy locks: a waiting acquire's enqueue is refused as well.
    let other = Client::connect(&srv.url()).await.unwrap();
    let held = other.fair_lock("f").lock().await.unwrap();
    refused(&srv, "fair try_lock_for (busy)", fair.try_lock_for(wait)).await;
    held.unlock().await.unwrap();
    let held = other.rw_lock("rw").write_lock().lock().await.unwrap();
    // (A reader behind a writer records nothing while it waits: its wait
    // simply runs out, as without OOM.)
    refused(
        &srv,
        "try_write_for (busy)",
        rw.write_lock().try_lock_for(wait),
    )
    .await;
    held.unlock().await.unwrap();
    let held = other.semaphore("s").acquire(2).await.unwrap();
    refused(&srv, "try_acquire_for (busy)", sem.try_acquire_for(1, wait)).await;
    held.release().await.unwrap();
    c.shutdown().await;
    other.shutdown().await;
}

/// With memory full, holders can still let go: every unlock and release
/// succeeds (they only delete), so a full Redis does not keep locks held
/// until their leases end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holders_let_go_under_out_of_memory() {
    let srv = noeviction_server().await;
    let c = Client::connect(&srv.url()).await.unwrap();
    let lock = c.lock("l").lock().await.unwrap();
    let fair = c.fair_lock("f").lock().await.unwrap();
    let read = c.rw_lock("r").read_lock().lock().await.unwrap();
    let write = c.rw_lock("w").write_lock().lock().await.unwrap();
    let multi = c.multi_lock(&["m1", "m2"]).lock().await.unwrap();
    let sem = c.semaphore("s");
    assert!(sem.try_set_permits(1).await.unwrap());
    let permit = sem.acquire(1).await.unwrap();
    let _: () = cmd(&srv, &["CONFIG", "SET", "maxmemory", "1"]).await;
    let r = (
        lock.unlock().await,
        fair.unlock().await,
        read.unlock().await,
        write.unlock().await,
        multi.unlock().await,
        permit.release().await,
    );
    let _: () = cmd(&srv, &["CONFIG", "SET", "maxmemory", "0"]).await;
    println!("{r:?}");
    assert!(
        r.0.is_ok() && r.1.is_ok() && r.2.is_ok() && r.3.is_ok() && r.4.is_ok() && r.5.is_ok(),
        "{r:?}"
    );
    c.shutdown().await;
}

/// A release that must hand the lock on to a waiter of another client
/// while memory is full: whatever each side is told, the two never both
/// believe they hold the lock, and a waiter told it holds it really does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_offs_under_out_of_memory_stay_consistent() {
    let srv = noeviction_server().await;
    let a = Client::connect(&srv.url()).await.unwrap();
    let b = Client::connect(&srv.url()).await.unwrap();
    let g = a.fair_lock("f").lock().await.unwrap();
    let key = a.fair_lock("f").key().unwrap().to_string();
    let l = b.fair_lock("f");
    let waiter = tokio::spawn(async move { l.try_lock_for(Duration::from_secs(4)).await });
    until("queued", || async {
        cmd::<i64>(&srv, &["ZCARD", &format!("{key}:q")]).await == 1
    })
    .await;
    let _: () = cmd(&srv, &["CONFIG", "SET", "maxmemory", "1"]).await;
    let released = g.unlock().await;
    let got = within("waiter", waiter).await.unwrap();
    let _: () = cmd(&srv, &["CONFIG", "SET", "maxmemory", "0"]).await;
    println!("release: {released:?}; waiter: {got:?}");
    if let Ok(Some(w)) = &got {
        assert_eq!(w.state(), deadbolt::LeaseState::Active);
        let o: Option<String> = cmd(&srv, &["HGET", &key, "o"]).await;
        assert!(
            o.is_some_and(|o| o.starts_with(b.id())),
            "granted without a hold"
        );
    }
    a.shutdown().await;
    b.shutdown().await;
}

/// Set memory full, run `release` (the holder's unlock), wait for the
/// waiter, give memory back, and hand the waiter's outcome to `check`,
/// which asserts that a waiter told it holds really does on the server.
async fn release_under_oom<G: std::fmt::Debug, R: std::fmt::Debug>(
    srv: &RedisServer,
    release: impl Future<Output = R>,
    waiter: tokio::task::JoinHandle<deadbolt::Result<Option<G>>>,
) -> deadbolt::Result<Option<G>> {
    let _: () = cmd(srv, &["CONFIG", "SET", "maxmemory", "1"]).await;
    let released = release.await;
    let got = within("waiter", waiter).await.unwrap();
    let _: () = cmd(srv, &["CONFIG", "SET", "maxmemory", "0"]).await;
    println!("release: {released:?}; waiter: {got:?}");
    got
}

/// The Lock's release grants to another client's registered waiter inside
/// the release: under OOM either nothing changes (the release is refused)
/// or the grant is recorded before the waiter is told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_grants_under_out_of_memory_stay_consistent() {
    let srv = noeviction_server().await;
    let a = Client::connect(&srv.url()).await.unwrap();
    let b = Client::connect(&srv.url()).await.unwrap();
    let g = a.lock("l").lock().await.unwrap();
    let l = b.lock("l");
    let probe = b.lock("l");
    let waiter = tokio::spawn(async move { l.try_lock_for(Duration::from_secs(4)).await });
    // The waiter's failed try registers it before it sleeps.
    until("registration", || async {
        let fields: Vec<String> = cmd(&srv, &["HKEYS", "deadbolt:{l}:lock"]).await;
        fields.iter().any(|f| f.starts_with("d:"))
    })
    .await;
    if let Ok(Some(w)) = release_under_oom(&srv, g.unlock(), waiter).await {
        assert_eq!(w.state(), deadbolt::LeaseState::Active);
        let info = probe.inspect().await.unwrap();
        assert!(
            info.holder.is_some_and(|o| o.starts_with(b.id())),
            "granted without a hold"
        );
    }
    a.shutdown().await;
    b.shutdown().await;
}

/// The Semaphore's release grants the freed permit to the head of its
/// queue inside the release: a waiter told it holds it must be recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_grants_under_out_of_memory_stay_consistent() {
    let srv = noeviction_server().await;
    let a = Client::connect(&srv.url()).await.unwrap();
    let b = Client::connect(&srv.url()).await.unwrap();
    let sem = a.semaphore("s");
    sem.set_permits(1).await.unwrap();
    let p = sem.acquire(1).await.unwrap();
    let s = b.semaphore("s");
    let waiter = tokio::spawn(async move { s.try_acquire_for(1, Duration::from_secs(4)).await });
    until("queued", || async {
        a.semaphore("s").inspect().await.unwrap().waiting == 1
    })
    .await;
    if let Ok(Some(w)) = release_under_oom(&srv, p.release(), waiter).await {
        assert_eq!(w.state(), deadbolt::LeaseState::Active);
        let info = sem.inspect().await.unwrap();
        assert!(
            info.holders.iter().any(|h| h.owner.starts_with(b.id())),
            "granted without a hold: {info:?}"
        );
    }
    a.shutdown().await;
    b.shutdown().await;
}

/// The RwLock's write release admits the registered readers inside the
/// release: a reader told it holds must be recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rwlock_grants_under_out_of_memory_stay_consistent() {
    let srv = noeviction_server().await;
    let a = Client::connect(&srv.url()).await.unwrap();
    let b = Client::connect(&srv.url()).await.unwrap();
    let rw = a.rw_lock("rw");
    let w = rw.write_lock().lock().await.unwrap();
    let r = b.rw_lock("rw").read_lock();
    let waiter = tokio::spawn(async move { r.try_lock_for(Duration::from_secs(4)).await });
    until("registration", || async {
        let fields: Vec<String> = cmd(&srv, &["HKEYS", "deadbolt:{rw}:rw"]).await;
        fields.iter().any(|f| f.starts_with("q:"))
    })
    .await;
    if let Ok(Some(g)) = release_under_oom(&srv, w.unlock(), waiter).await {
        assert_eq!(g.state(), deadbolt::LeaseState::Active);
        let info = rw.inspect().await.unwrap();
        assert!(
            info.reader_list.iter().any(|h| h.owner.starts_with(b.id())),
            "granted without a hold: {info:?}"
        );
    }
    a.shutdown().await;
    b.shutdown().await;
}
