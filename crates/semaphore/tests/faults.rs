//! The Semaphore and the CountDownLatch tried as an adversary would, against
//! real redis-server processes: keys of another type, a server out of
//! memory, a paused server, killed Pub/Sub connections, SCRIPT FLUSH, a
//! restart without persistence, late replies with cancelled acquires, and
//! the latch's edges (past zero, forged messages, cancelled waits).

use deadbolt_core::HoldGuard as _;
use std::time::{Duration, Instant};

use deadbolt_core::{Client, ClientBuilder, Error, LeaseState};
use deadbolt_semaphore::{
    semaphore_keys, CountDownLatch, Semaphore, LATCH_KIND, SCRIPTS, SEMAPHORE_KIND,
};
use deadbolt_testkit::support::{
    self, cmd, fill_memory, plant_list, restore, server, subscribers, until, within, KeyState, HANG,
};
use deadbolt_testkit::{FaultProxy, RedisServer};
use futures::StreamExt;

fn preloaded(b: ClientBuilder) -> ClientBuilder {
    b.preload(SCRIPTS)
}

async fn client(url: &str) -> Client {
    deadbolt_testkit::client_with(url, preloaded).await
}

/// The six keys of semaphore `name`, in the scripts' order: s, h, hn, q,
/// qo, alive.
fn sem_keys(c: &Client, name: &str) -> Vec<String> {
    semaphore_keys(&c.keys(SEMAPHORE_KIND, name).unwrap())
}

/// Every key of primitive `name` (all share `deadbolt:{name}:`): see
/// [`support::snapshot`].
async fn snapshot(srv: &RedisServer, name: &str) -> Vec<KeyState> {
    support::snapshot(srv, &format!("deadbolt:{{{name}}}:")).await
}

#[track_caller]
fn assert_wrong_type<T: std::fmt::Debug>(what: &str, r: Result<T, Error>, key: &str) {
    match r {
        Err(Error::WrongType { key: k }) if k == key => {}
        other => panic!("{what}: expected WrongType naming {key}, got {other:?}"),
    }
}

#[track_caller]
fn assert_oom<T: std::fmt::Debug>(what: &str, r: Result<T, Error>) {
    match &r {
        Err(e @ Error::Redis(inner)) if inner.code() == Some("OOM") => {
            assert!(e.to_string().contains("OOM"), "{what}: {e}");
        }
        other => panic!("{what}: expected the server's OOM error, got {other:?}"),
    }
}

/// Run `$call` (bounded by `within`): it must fail with `WrongType` naming
/// `$bad`, and the keys of `$name` must be as in `$before`.
macro_rules! refused {
    ($srv:expr, $name:expr, $before:expr, $bad:expr, $what:literal, $call:expr) => {{
        let r = within($what, $call).await;
        assert_wrong_type(&format!("{}: {}", $bad, $what), r, $bad);
        assert!(
            snapshot($srv, $name).await == *$before,
            "{}: {} wrote",
            $bad,
            $what
        );
    }};
}

/// Keys without a TTL, other than a semaphore's configuration hash (which
/// outlives its holders on purpose) and the latch's armed count.
async fn persistent_keys(srv: &RedisServer) -> Vec<String> {
    support::persistent_keys(srv)
        .await
        .into_iter()
        .filter(|k| !k.ends_with(":sem") && !k.ends_with(":latch"))
        .collect()
}

/// A key of another type in place of each of the semaphore's six keys:
/// every operation (the permit counts, reads, every kind of acquire, the
/// release of a hold) fails with `WrongType` naming that key and writes
/// nothing; a waiter that was already queued fails the same way at its next
/// try; once the key is repaired the semaphore works again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_keys_of_another_type_are_refused_by_name_and_nothing_is_written() {
    let srv = server();
    let c = client(&srv.url()).await;
    // The waiter's client: its liveness record lapses 1 s after its waiter
    // ended, so the queue entry the failed waiter leaves (its release is
    // refused too while the key is bad) reserves nothing for long.
    let w = deadbolt_testkit::client_with(&srv.url(), |b| {
        preloaded(b).waiter_timeout(Duration::from_secs(1))
    })
    .await;
    for (i, suffix) in ["s", "h", "hn", "q", "qo", "alive"].iter().enumerate() {
        let name = format!("wrong-{suffix}");
        let keys = sem_keys(&c, &name);
        let bad = keys[i].clone();
        let s = Semaphore::new(&c, &name);
        assert!(s.try_set_permits(5).await.unwrap());
        // A hold of 2 (a fixed lease: no renewal writes meanwhile) and a
        // waiter for 4 (3 are free): all six keys exist.
        let hold = s
            .acquire_with_lease(2, Duration::from_secs(120))
            .await
            .unwrap();
        let ws = Semaphore::new(&w, &name);
        let waiter = tokio::spawn(async move { ws.acquire(4).await });
        let channel = format!("{}:ch:{}", keys[0], w.id());
        until("the waiter is queued and listening", || async {
            s.inspect().await.unwrap().waiting == 1 && subscribers(&srv, &channel).await == 1
        })
        .await;
        assert_eq!(snapshot(&srv, &name).await.len(), 6, "{suffix}");

        let saved = plant_list(&srv, &bad).await;
        let before = snapshot(&srv, &name).await;
        let sn = name.as_str();
        refused!(
            &srv,
            sn,
            &before,
            &bad,
            "try_set_permits",
            s.try_set_permits(1)
        );
        refused!(&srv, sn, &before, &bad, "add_permits", s.add_permits(1));
        refused!(
            &srv,
            sn,
            &before,
            &bad,
            "reduce_permits",
            s.reduce_permits(1)
        );
        refused!(&srv, sn, &before, &bad, "drain_permits", s.drain_permits());
        refused!(&srv, sn, &before, &bad, "available", s.available_permits());
        refused!(&srv, sn, &before, &bad, "inspect", s.inspect());
        refused!(&srv, sn, &before, &bad, "try_acquire", s.try_acquire(1));
        refused!(
            &srv,
            sn,
            &before,
            &bad,
            "try_acquire_for",
            s.try_acquire_for(1, Duration::from_secs(5))
        );
        refused!(
            &srv,
            sn,
            &before,
            &bad,
            "try_acquire_with",
            s.try_acquire_with(1, Duration::from_secs(5), Duration::from_secs(10))
        );
        refused!(&srv, sn, &before, &bad, "acquire", s.acquire(1));
        refused!(
            &srv,
            sn,
            &before,
            &bad,
            "acquire_with_lease",
            s.acquire_with_lease(1, Duration::from_secs(10))
        );
        // A fresh handle of another client: the same.
        let other = Semaphore::new(&w, &name);
        refused!(&srv, sn, &before, &bad, "acquire (other)", other.acquire(1));
        refused!(&srv, sn, &before, &bad, "release", hold.release());
        // The queued waiter's next try (a wake-up of the client's waiters:
        // `*`, as a delete sends) fails the same way; its queue entry cannot
        // be released while the key is bad.
        let _: i64 = cmd(&srv, &["PUBLISH", &channel, "*"]).await;
        let r = within("the queued waiter", waiter).await.unwrap();
        assert_wrong_type(&format!("{bad}: queued waiter"), r, &bad);
        assert!(w.releases_settled(HANG).await);
        assert!(
            snapshot(&srv, &name).await == before,
            "{bad}: the failed waiter wrote"
        );

        // Repaired: the hold whose release was refused is still counted,
        // and the semaphore serves again.
        restore(&srv, &bad, saved).await;
        let info = s.inspect().await.unwrap();
        assert_eq!((info.permits, info.available, info.holds), (Some(5), 3, 1));
        let three = within("an acquire after the repair", s.acquire(3))
            .await
            .unwrap();
        three.release().await.unwrap();
        assert_eq!(s.available_permits().await.unwrap(), 3);
    }
}

/// `Permits::extend` with a key of another type among those it renews
/// (h, hn) should say so, as every other call does. The renewal never
/// touches s (a call refuses the keys it touches), so with s of
/// another type it renews the hold and leaves s alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_with_a_key_of_another_type_reports_wrong_type() {
    let srv = server();
    let c = client(&srv.url()).await;
    {
        let name = "wrong-extend-s";
        let bad = sem_keys(&c, name)[0].clone();
        let s = Semaphore::new(&c, name);
        s.try_set_permits(2).await.unwrap();
        let p = s
            .acquire_with_lease(1, Duration::from_secs(60))
            .await
            .unwrap();
        let saved = plant_list(&srv, &bad).await;
        let state = || async {
            let dump: Vec<u8> = cmd(&srv, &["DUMP", &bad]).await;
            let at: i64 = cmd(&srv, &["PEXPIRETIME", &bad]).await;
            (dump, at)
        };
        let planted = state().await;
        within("extend", p.extend(Duration::from_secs(90)))
            .await
            .unwrap();
        assert!(state().await == planted, "{bad}: extend wrote");
        restore(&srv, &bad, saved).await;
        p.release().await.unwrap();
    }
    for (i, suffix) in [(1, "h"), (2, "hn")] {
        let name = format!("wrong-extend-{suffix}");
        let bad = sem_keys(&c, &name)[i].clone();
        let s = Semaphore::new(&c, &name);
        s.try_set_permits(2).await.unwrap();
        let p = s
            .acquire_with_lease(1, Duration::from_secs(60))
            .await
            .unwrap();
        let saved = plant_list(&srv, &bad).await;
        let before = snapshot(&srv, &name).await;
        let r = within("extend", p.extend(Duration::from_secs(90))).await;
        assert!(snapshot(&srv, &name).await == before, "{bad}: extend wrote");
        assert_wrong_type(&format!("{bad}: extend"), r, &bad);
        assert_eq!(p.state(), LeaseState::Active, "{bad}");
        restore(&srv, &bad, saved).await;
        p.release().await.unwrap();
    }
}

/// The latch's one key of another type: every call fails with `WrongType`
/// naming it, writes nothing, and a waiter already waiting when the key
/// went bad fails the same way at its next check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_key_of_another_type_is_refused_by_name_and_nothing_is_written() {
    let srv = server();
    let c = client(&srv.url()).await;
    let w = client(&srv.url()).await;
    let k = c.keys(LATCH_KIND, "wrong").unwrap();
    let key = k.main().to_string();
    let l = CountDownLatch::new(&c, "wrong");
    assert!(l.try_set_count(2).await.unwrap());
    let wl = CountDownLatch::new(&w, "wrong");
    let waiter = tokio::spawn(async move { wl.wait().await });
    until("the waiter listens", || async {
        subscribers(&srv, &k.channel()).await == 1
    })
    .await;
    let _ = plant_list(&srv, &key).await;
    let before = snapshot(&srv, "wrong").await;
    assert_eq!(before.len(), 1);
    refused!(
        &srv,
        "wrong",
        &before,
        &key,
        "try_set_count",
        l.try_set_count(3)
    );
    refused!(&srv, "wrong", &before, &key, "count_down", l.count_down());
    refused!(&srv, "wrong", &before, &key, "count", l.count());
    refused!(&srv, "wrong", &before, &key, "wait", l.wait());
    refused!(
        &srv,
        "wrong",
        &before,
        &key,
        "wait_for",
        l.wait_for(Duration::from_secs(5))
    );
    // The waiter checks again on a `*` message and finds the LIST.
    let _: i64 = cmd(&srv, &["PUBLISH", &k.channel(), "*"]).await;
    let r = within("the waiting waiter", waiter).await.unwrap();
    assert_wrong_type("waiting waiter", r, &key);
    assert!(snapshot(&srv, "wrong").await == before, "the waiter wrote");
}

/// A latch key holding a string that is no count: `count` and `count_down`
/// refuse it as `BadValue`; a wait must not take it for an open latch (nor
/// wait for a count nobody can ever count down).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_wait_refuses_an_unusable_count_as_count_does() {
    let srv = server();
    let c = client(&srv.url()).await;
    let key = c.keys(LATCH_KIND, "garbled").unwrap().main().to_string();
    let l = CountDownLatch::new(&c, "garbled");
    for v in ["abc", "-1", "1.5", " 3", "1e3"] {
        let () = cmd(&srv, &["SET", &key, v]).await;
        let r = l.count().await;
        assert!(
            matches!(&r, Err(Error::BadValue { key: k, .. }) if *k == key),
            "{v:?}: count: {r:?}"
        );
        let r = l.count_down().await;
        assert!(
            matches!(&r, Err(Error::BadValue { .. })),
            "{v:?}: count_down: {r:?}"
        );
        let r = within("wait_for", l.wait_for(Duration::from_millis(300))).await;
        assert!(
            matches!(&r, Err(Error::BadValue { key: k, .. }) if *k == key),
            "{v:?}: wait_for: {r:?}"
        );
        let now: String = cmd(&srv, &["GET", &key]).await;
        assert_eq!(now, v);
    }
}

/// Under `maxmemory` with noeviction, once memory is full: every call that
/// must write fails with the server's own `OOM` error (not `WrongType`) and
/// writes nothing; reads still answer, and a release still gives permits
/// back (deleting is allowed, and Redis lets a script that began deleting
/// finish). Once memory is there again everything works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_memory_is_reported_as_it_is_and_nothing_is_half_written() {
    let srv = RedisServer::builder()
        .arg("maxmemory-policy", "noeviction")
        .start()
        .expect("start redis-server");
    let c = client(&srv.url()).await;
    let s = Semaphore::new(&c, "oom");
    assert!(s.try_set_permits(3).await.unwrap());
    let held = s
        .acquire_with_lease(1, Duration::from_secs(60))
        .await
        .unwrap();
    let l = CountDownLatch::new(&c, "oom-latch");
    assert!(l.try_set_count(2).await.unwrap());

    fill_memory(&srv).await;

    let before = snapshot(&srv, "oom").await;
    let latch_before = snapshot(&srv, "oom-latch").await;
    assert_oom("try_acquire", s.try_acquire(1).await);
    assert_oom(
        "try_acquire_for (grant)",
        within(
            "try_acquire_for",
            s.try_acquire_for(1, Duration::from_secs(5)),
        )
        .await,
    );
    assert_oom(
        "try_acquire_for (queue)",
        within(
            "try_acquire_for",
            s.try_acquire_for(3, Duration::from_secs(5)),
        )
        .await,
    );
    assert_oom("acquire", within("acquire", s.acquire(1)).await);
    assert_oom(
        "acquire_with_lease",
        within(
            "acquire_with_lease",
            s.acquire_with_lease(1, Duration::from_secs(5)),
        )
        .await,
    );
    assert_oom("add_permits", s.add_permits(1).await);
    assert_oom("reduce_permits", s.reduce_permits(1).await);
    assert_oom("drain_permits", s.drain_permits().await);
    assert!(
        snapshot(&srv, "oom").await == before,
        "a refused call wrote"
    );
    let fresh = Semaphore::new(&c, "oom-fresh");
    assert_oom("try_set_permits", fresh.try_set_permits(1).await);
    assert_oom("acquire (fresh)", within("acquire", fresh.acquire(1)).await);
    assert!(snapshot(&srv, "oom-fresh").await.is_empty());
    assert_oom("count_down", l.count_down().await);
    assert_oom(
        "try_set_count",
        CountDownLatch::new(&c, "oom-fresh-latch")
            .try_set_count(1)
            .await,
    );
    assert!(snapshot(&srv, "oom-latch").await == latch_before);
    assert!(snapshot(&srv, "oom-fresh-latch").await.is_empty());
    // Reads answer.
    assert_eq!(s.available_permits().await.unwrap(), 2);
    assert_eq!(s.inspect().await.unwrap().holds, 1);
    assert_eq!(l.count().await.unwrap(), 2);
    // Giving back works under OOM.
    held.release().await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 3);

    let () = cmd(&srv, &["CONFIG", "SET", "maxmemory", "0"]).await;
    let all = within("acquire after OOM", s.acquire(3)).await.unwrap();
    all.release().await.unwrap();
    assert_eq!(l.count_down().await.unwrap(), 1);
}

/// The server is frozen (SIGSTOP) for less than the holder's lease while a
/// waiter of another client waits: the holder keeps its permit, and after
/// the resume its release wakes the waiter at once (not at the waiter's
/// own sleep bound, the holder's lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_shorter_than_the_lease_leaves_holder_and_waiter_intact() {
    let srv = server();
    let hc = deadbolt_testkit::client_with(&srv.url(), |b| {
        preloaded(b).watchdog_timeout(Duration::from_secs(9))
    })
    .await;
    let wc = client(&srv.url()).await;
    let hs = Semaphore::new(&hc, "pause");
    assert!(hs.try_set_permits(1).await.unwrap());
    let held = hs.acquire(1).await.unwrap();
    let ws = Semaphore::new(&wc, "pause");
    let waiter = tokio::spawn(async move {
        let p = ws.acquire(1).await;
        (Instant::now(), p)
    });
    until("the waiter is queued", || async {
        hs.inspect().await.unwrap().waiting == 1
    })
    .await;
    srv.pause();
    // The fault window: longer than the command timeout (1 s), so the
    // watchdog's and the heartbeat's calls time out meanwhile.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    srv.resume();
    assert_eq!(held.state(), LeaseState::Active);
    assert!(
        !waiter.is_finished(),
        "the waiter got a permit that is held"
    );
    let released = Instant::now();
    within("release after resume", held.release())
        .await
        .unwrap();
    let (at, p) = within("the waiter", waiter).await.unwrap();
    let p = p.unwrap();
    let after = at.duration_since(released);
    // Its own sleep bound is the holder's lease (about 9 s): a lost wake-up
    // would show as a wait that long.
    assert!(
        after < Duration::from_secs(4),
        "waiter got it {after:?} after the release"
    );
    assert_eq!(hs.available_permits().await.unwrap(), 0);
    p.release().await.unwrap();
    let info = hs.inspect().await.unwrap();
    assert_eq!((info.available, info.holds, info.waiting), (1, 0, 0));
}

/// CLIENT KILL TYPE pubsub while waiters of another client wait: the client
/// subscribes again, and a release afterwards wakes every waiter it serves
/// promptly (their own bound is the holder's 30 s lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_pubsub_connection_does_not_strand_waiters() {
    let srv = server();
    let hc = client(&srv.url()).await;
    let wc = client(&srv.url()).await;
    let hs = Semaphore::new(&hc, "kill");
    assert!(hs.try_set_permits(2).await.unwrap());
    let held = hs.acquire(2).await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..2 {
        let ws = Semaphore::new(&wc, "kill");
        waiters.push(tokio::spawn(async move {
            let p = ws.acquire(1).await;
            (Instant::now(), p)
        }));
    }
    let channel = format!("{}:ch:{}", sem_keys(&wc, "kill")[0], wc.id());
    until("both queued and listening", || async {
        hs.inspect().await.unwrap().waiting == 2 && subscribers(&srv, &channel).await == 1
    })
    .await;
    let killed: i64 = cmd(&srv, &["CLIENT", "KILL", "TYPE", "pubsub"]).await;
    assert!(killed >= 1, "no pubsub connection was killed");
    until("subscribed again", || async {
        subscribers(&srv, &channel).await == 1
    })
    .await;
    let released = Instant::now();
    held.release().await.unwrap();
    let mut held_again = Vec::new();
    for w in waiters {
        let (at, p) = within("a waiter", w).await.unwrap();
        let after = at.duration_since(released);
        assert!(
            after < Duration::from_secs(2),
            "waiter got it {after:?} after the release"
        );
        held_again.push(p.unwrap());
    }
    assert_eq!(hs.available_permits().await.unwrap(), 0);
    drop(held_again);
    assert!(wc.releases_settled(HANG).await);
    assert_eq!(hs.available_permits().await.unwrap(), 2);
}

/// The release's message falls while the waiters' subscriber connection is
/// down (killed just before): it is lost, and the wake-up that follows the
/// new subscription must make the waiters ask, promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_while_the_subscriber_is_down_still_wakes_waiters() {
    let srv = server();
    let hc = client(&srv.url()).await;
    let wc = client(&srv.url()).await;
    let hs = Semaphore::new(&hc, "gap");
    assert!(hs.try_set_permits(2).await.unwrap());
    for round in 0..5 {
        let held = hs.acquire(2).await.unwrap();
        let mut waiters = Vec::new();
        for _ in 0..2 {
            let ws = Semaphore::new(&wc, "gap");
            waiters.push(tokio::spawn(async move {
                let p = ws.acquire(1).await;
                (Instant::now(), p)
            }));
        }
        let channel = format!("{}:ch:{}", sem_keys(&wc, "gap")[0], wc.id());
        until("both queued and listening", || async {
            hs.inspect().await.unwrap().waiting == 2 && subscribers(&srv, &channel).await == 1
        })
        .await;
        let killed: i64 = cmd(&srv, &["CLIENT", "KILL", "TYPE", "pubsub"]).await;
        assert!(
            killed >= 1,
            "round {round}: no pubsub connection was killed"
        );
        let released = Instant::now();
        held.release().await.unwrap();
        for w in waiters {
            let (at, p) = within("a waiter", w).await.unwrap();
            let after = at.duration_since(released);
            // Without the wake-up after the new subscription, the waiters
            // would sleep for the watchdog timeout (30 s: no lease is left
            // to bound their sleep).
            assert!(
                after < Duration::from_secs(3),
                "round {round}: waiter got it {after:?} after the release"
            );
            p.unwrap().release().await.unwrap();
        }
        assert_eq!(hs.available_permits().await.unwrap(), 2);
    }
}

async fn script_flush(srv: &RedisServer) {
    let () = cmd(srv, &["SCRIPT", "FLUSH"]).await;
}

/// SCRIPT FLUSH between any two calls (and under a waiter's heartbeat) is
/// transparent; flushes racing the calls cost at most an `Unavailable`
/// release that the background releaser finishes, and no permit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_is_transparent() {
    let srv = server();
    let c = client(&srv.url()).await;
    let w = deadbolt_testkit::client_with(&srv.url(), |b| {
        preloaded(b).waiter_timeout(Duration::from_millis(600))
    })
    .await;
    let s = Semaphore::new(&c, "flush");
    let l = CountDownLatch::new(&c, "flush");
    let alive = sem_keys(&c, "flush")[5].clone();
    for round in 0..3 {
        script_flush(&srv).await;
        assert_eq!(s.try_set_permits(2).await.unwrap(), round == 0);
        script_flush(&srv).await;
        let p = s.acquire(2).await.unwrap();
        script_flush(&srv).await;
        assert_eq!(s.available_permits().await.unwrap(), 0);
        script_flush(&srv).await;
        p.extend(Duration::from_secs(40)).await.unwrap();
        script_flush(&srv).await;
        let ws = Semaphore::new(&w, "flush");
        let waiter = tokio::spawn(async move { ws.acquire(1).await });
        until("queued", || async {
            s.inspect().await.unwrap().waiting == 1
        })
        .await;
        // The waiter's heartbeat (every 200 ms) runs after a flush too: its
        // liveness deadline moves on.
        let seen: f64 = cmd(&srv, &["ZSCORE", &alive, w.id()]).await;
        script_flush(&srv).await;
        until("a heartbeat after the flush", || async {
            let now: f64 = cmd(&srv, &["ZSCORE", &alive, w.id()]).await;
            now > seen
        })
        .await;
        script_flush(&srv).await;
        p.release().await.unwrap();
        let got = within("the waiter", waiter).await.unwrap().unwrap();
        script_flush(&srv).await;
        got.release().await.unwrap();
        script_flush(&srv).await;
        assert_eq!(s.add_permits(1).await.unwrap(), 3);
        script_flush(&srv).await;
        assert_eq!(s.reduce_permits(1).await.unwrap(), 2);
        script_flush(&srv).await;
        assert_eq!(s.drain_permits().await.unwrap(), 2);
        script_flush(&srv).await;
        assert_eq!(s.add_permits(2).await.unwrap(), 2);
        script_flush(&srv).await;
        let info = s.inspect().await.unwrap();
        assert_eq!((info.permits, info.holds, info.waiting), (Some(2), 0, 0));
        // The latch.
        script_flush(&srv).await;
        assert!(l.try_set_count(1).await.unwrap());
        script_flush(&srv).await;
        let wl = CountDownLatch::new(&w, "flush");
        let latch_waiter = tokio::spawn(async move { wl.wait().await });
        until("the latch waiter waits", || async { w.waiters() == 1 }).await;
        script_flush(&srv).await;
        assert_eq!(l.count().await.unwrap(), 1);
        script_flush(&srv).await;
        assert_eq!(l.count_down().await.unwrap(), 0);
        within("the latch waiter", latch_waiter)
            .await
            .unwrap()
            .unwrap();
    }

    // Flushes racing the calls, with one permit for two clients.
    assert_eq!(s.reduce_permits(1).await.unwrap(), 1);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flusher = {
        let stop = stop.clone();
        let mut raw = srv.conn().await;
        tokio::spawn(async move {
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let () = redis::cmd("SCRIPT")
                    .arg("FLUSH")
                    .query_async(&mut raw)
                    .await
                    .unwrap();
                n += 1;
                // The fault itself: a flush every millisecond.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            n
        })
    };
    let mut tasks = Vec::new();
    for cl in [&c, &w] {
        let sem = Semaphore::new(cl, "flush");
        tasks.push(tokio::spawn(async move {
            for _ in 0..30 {
                let p = sem.acquire(1).await.unwrap();
                // A flush between the script's load and its call: refused
                // unrun (NOSCRIPT), and the releaser finishes it.
                match p.release().await {
                    Ok(()) | Err(Error::Unavailable(_)) => {}
                    Err(e) => panic!("release: {e:?}"),
                }
            }
        }));
    }
    for t in tasks {
        within("acquire/release under flushes", t).await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(within("the flusher", flusher).await.unwrap() > 0);
    assert!(c.releases_settled(HANG).await && w.releases_settled(HANG).await);
    let info = s.inspect().await.unwrap();
    assert_eq!(
        (info.available, info.holds, info.waiting),
        (1, 0, 0),
        "{info:?}"
    );
}

/// A restart of a server without persistence while a holder holds every
/// permit and two waiters wait. What happens: the server forgets the
/// permits, the holds and the queue. The holder's guard learns it lost its
/// hold (its next renewal: gone); the bounded waiter ends cleanly within its
/// bound; the unbounded waiter queues again on the empty server and waits
/// (a semaphore whose permits were never set has none); once the permits
/// are set again it is served. Nobody panics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_without_persistence_forgets_the_permits_and_waiters_survive_it() {
    let mut srv = server();
    let hc = deadbolt_testkit::client_with(&srv.url(), |b| {
        preloaded(b).watchdog_timeout(Duration::from_secs(3))
    })
    .await;
    let wc = client(&srv.url()).await;
    let hs = Semaphore::new(&hc, "restart");
    assert!(hs.try_set_permits(2).await.unwrap());
    let held = hs.acquire(2).await.unwrap();
    let lost = held.lost();
    let bound = Duration::from_secs(4);
    let bs = Semaphore::new(&wc, "restart");
    let bounded = tokio::spawn(async move {
        let t = Instant::now();
        let r = bs.try_acquire_for(1, bound).await;
        (t.elapsed(), r)
    });
    let us = Semaphore::new(&wc, "restart");
    let unbounded = tokio::spawn(async move { us.acquire(1).await });
    until("both queued", || async {
        hs.inspect().await.unwrap().waiting == 2
    })
    .await;

    tokio::task::block_in_place(|| srv.restart()).expect("restart redis-server");

    assert_eq!(within("the holder's lost()", lost).await, LeaseState::Lost);
    let (took, r) = within("the bounded waiter", bounded).await.unwrap();
    match r {
        Ok(None) => {}
        Err(e) if e.is_retryable() => {}
        other => panic!("the bounded waiter: {other:?}"),
    }
    // Its bound, plus a command timeout for the last try and its give-up.
    assert!(
        took < bound + Duration::from_secs(3),
        "the bounded waiter took {took:?}"
    );
    until("the unbounded waiter queued again", || async {
        let info = hs.inspect().await.unwrap();
        info.permits.is_none() && info.waiting == 1
    })
    .await;
    assert!(!unbounded.is_finished());
    assert_eq!(hs.available_permits().await.unwrap(), 0);
    // The restart lost the permits: they can be set again, and that serves
    // the waiter.
    assert!(hs.try_set_permits(2).await.unwrap());
    let p = within("the unbounded waiter", unbounded)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(hs.available_permits().await.unwrap(), 1);
    assert!(matches!(held.release().await, Err(Error::NotHeld)));
    assert_eq!(hs.available_permits().await.unwrap(), 1);
    p.release().await.unwrap();
    let info = hs.inspect().await.unwrap();
    assert_eq!(
        (info.available, info.holds, info.waiting),
        (2, 0, 0),
        "{info:?}"
    );
    assert!(wc.releases_settled(HANG).await);
}

/// Replies come later than the client's command timeout (a proxy delays
/// them): every acquire ends `Indeterminate` or is cancelled, though the
/// server ran it and granted or queued it. The releaser's releases-by-
/// attempt still run on the server: every permit comes back, nobody stays
/// queued, and nothing is left without a TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_cancelled_under_late_replies_leave_no_permit_taken() {
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let direct = client(&srv.url()).await;
    // Leases (and queue entries) far longer than any bound here: only the
    // releases can give the permits back in time.
    let slow = deadbolt_testkit::client_with(&proxy.url(), |b| {
        preloaded(b)
            .command_timeout(Duration::from_millis(200))
            .watchdog_timeout(Duration::from_secs(120))
            .waiter_timeout(Duration::from_secs(60))
    })
    .await;
    let s = Semaphore::new(&direct, "late");
    assert!(s.try_set_permits(3).await.unwrap());
    proxy.set_reply_delay(Duration::from_millis(500));

    // Free permits: each try is granted on the server; its reply is late.
    let mut tasks = Vec::new();
    for i in 0..9u64 {
        let sem = Semaphore::new(&slow, "late");
        tasks.push(tokio::spawn(async move {
            match i % 3 {
                0 => {
                    let cut = Duration::from_millis(100 + 150 * i);
                    let r = tokio::time::timeout(cut, sem.acquire(1 + i % 2)).await;
                    assert!(r.is_err(), "acquire {i}: {r:?}");
                }
                1 => {
                    let r = sem.try_acquire(1).await;
                    assert!(matches!(r, Err(Error::Indeterminate(_))), "try {i}: {r:?}");
                }
                _ => {
                    let r = sem.try_acquire_for(2, Duration::from_millis(300)).await;
                    assert!(
                        matches!(r, Err(Error::Indeterminate(_))),
                        "try_for {i}: {r:?}"
                    );
                }
            }
        }));
    }
    for t in tasks {
        within("a late acquire", t).await.unwrap();
    }
    until("every permit back while replies are still late", || async {
        let info = s.inspect().await.unwrap();
        info.available == 3 && info.holds == 0 && info.waiting == 0
    })
    .await;

    // Contended: the slow client's waiters queue on the server; some are
    // cancelled while queued, the others after their wake-up made the
    // server grant them permits they never heard of.
    let all = s.acquire(3).await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..6 {
        let sem = Semaphore::new(&slow, "late");
        waiters.push(tokio::spawn(async move { sem.acquire(1).await }));
    }
    until("six queued", || async {
        s.inspect().await.unwrap().waiting == 6
    })
    .await;
    for w in waiters.drain(..2) {
        w.abort();
        assert!(w.await.unwrap_err().is_cancelled());
    }
    until("two left the queue", || async {
        s.inspect().await.unwrap().waiting == 4
    })
    .await;
    all.release().await.unwrap();
    until("three granted on the server", || async {
        let info = s.inspect().await.unwrap();
        info.holds == 3 && info.waiting == 1
    })
    .await;
    for w in waiters {
        assert!(!w.is_finished(), "a reply came in time");
        w.abort();
        assert!(w.await.unwrap_err().is_cancelled());
    }
    until("every permit back", || async {
        let info = s.inspect().await.unwrap();
        info.available == 3 && info.holds == 0 && info.waiting == 0
    })
    .await;

    // Replies on time again: the releaser settles, and the slow client
    // works.
    proxy.set_reply_delay(Duration::ZERO);
    assert!(slow.releases_settled(HANG).await);
    let info = s.inspect().await.unwrap();
    assert_eq!(
        (info.available, info.holds, info.waiting),
        (3, 0, 0),
        "{info:?}"
    );
    let p = within("acquire on time", Semaphore::new(&slow, "late").acquire(3))
        .await
        .unwrap();
    p.release().await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 3);
    let left = persistent_keys(&srv).await;
    assert!(left.is_empty(), "{left:?}");
}

/// `count_down` past zero stays at zero, publishes `*` once (at the step to
/// zero) and leaves no key; counting down a latch never set does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_count_down_past_zero_stays_at_zero_and_publishes_once() {
    let srv = server();
    let c = client(&srv.url()).await;
    let k = c.keys(LATCH_KIND, "past").unwrap();
    let (key, channel) = (k.main().to_string(), k.channel());
    let mut ps = srv.client().get_async_pubsub().await.unwrap();
    ps.subscribe(&channel).await.unwrap();
    let l = CountDownLatch::new(&c, "past");
    assert_eq!(l.count_down().await.unwrap(), 0, "never set");
    assert!(snapshot(&srv, "past").await.is_empty());
    assert!(l.try_set_count(2).await.unwrap());
    assert_eq!(l.count_down().await.unwrap(), 1);
    assert_eq!(l.count_down().await.unwrap(), 0);
    for _ in 0..3 {
        assert_eq!(l.count_down().await.unwrap(), 0);
    }
    assert_eq!(l.count().await.unwrap(), 0);
    assert!(snapshot(&srv, "past").await.is_empty(), "{key} left");
    assert!(within("wait at zero", l.wait_for(Duration::ZERO))
        .await
        .unwrap());
    // Messages on one channel arrive in order: everything published before
    // the marker has arrived with it.
    let n: i64 = cmd(&srv, &["PUBLISH", &channel, "marker"]).await;
    assert_eq!(n, 1);
    let mut seen = Vec::new();
    {
        let mut stream = ps.on_message();
        loop {
            let msg = within("the marker", stream.next()).await.unwrap();
            let payload: String = msg.get_payload().unwrap();
            if payload == "marker" {
                break;
            }
            seen.push(payload);
        }
    }
    assert_eq!(seen, ["*"], "messages on {channel}");
    // Armed again from zero.
    assert!(l.try_set_count(1).await.unwrap());
    assert_eq!(l.count().await.unwrap(), 1);
}

/// Waiters of two clients all go when a third client counts down to zero,
/// not before: a forged `*` while the count is above zero makes each of
/// them check (and wait on), nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_releases_waiters_of_two_clients_at_zero_and_not_on_a_forged_message() {
    let srv = server();
    let cs = [client(&srv.url()).await, client(&srv.url()).await];
    let counter = client(&srv.url()).await;
    let l = CountDownLatch::new(&counter, "zero");
    assert!(l.try_set_count(2).await.unwrap());
    let mut tasks = Vec::new();
    for i in 0..6 {
        let w = CountDownLatch::new(&cs[i % 2], "zero");
        tasks.push(tokio::spawn(async move {
            let r = if i < 3 {
                w.wait().await.map(|()| true)
            } else {
                w.wait_for(HANG).await
            };
            (Instant::now(), r)
        }));
    }
    until("six waiting", || async {
        cs[0].waiters() + cs[1].waiters() == 6
    })
    .await;
    let channel = latch_channel(&counter, "zero");
    until("both clients listen", || async {
        subscribers(&srv, &channel).await == 2
    })
    .await;
    srv.reset_stats().await;
    let n: i64 = cmd(&srv, &["PUBLISH", &channel, "*"]).await;
    assert_eq!(n, 2);
    until("each waiter checked the latch", || async {
        srv.evalsha_calls().await >= 6
    })
    .await;
    assert_eq!(l.count_down().await.unwrap(), 1);
    let zero = Instant::now();
    assert_eq!(l.count_down().await.unwrap(), 0);
    for t in tasks {
        let (at, r) = within("a waiter", t).await.unwrap();
        assert!(r.unwrap(), "a waiter timed out");
        assert!(at >= zero, "a waiter went before the count reached zero");
        let after = at.duration_since(zero);
        // Without the message they would check again only after the
        // watchdog timeout (30 s).
        assert!(
            after < Duration::from_secs(3),
            "a waiter went {after:?} after zero"
        );
    }
    assert!(snapshot(&srv, "zero").await.is_empty());
}

fn latch_channel(c: &Client, name: &str) -> String {
    c.keys(LATCH_KIND, name).unwrap().channel()
}

/// A latch wait records nothing: waits cancelled at any point (through a
/// proxy that delays replies a little, so some are cut mid-call) leave the
/// count and the keys as they were and no release behind, a sibling waiter
/// of the same client still goes at zero, and the subscription goes once
/// the last waiter is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_latch_wait_leaves_nothing_behind() {
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let c = client(&proxy.url()).await;
    let counter = client(&srv.url()).await;
    let l = CountDownLatch::new(&counter, "cancel");
    assert!(l.try_set_count(1).await.unwrap());
    let before = snapshot(&srv, "cancel").await;
    let sibling = {
        let w = CountDownLatch::new(&c, "cancel");
        tokio::spawn(async move { w.wait().await })
    };
    until("the sibling waits", || async { c.waiters() == 1 }).await;
    proxy.set_reply_delay(Duration::from_millis(2));
    let w = CountDownLatch::new(&c, "cancel");
    let mut micros = 0;
    while micros <= 6000 {
        let r = tokio::time::timeout(Duration::from_micros(micros), w.wait()).await;
        assert!(r.is_err(), "a wait ended at {micros} µs: {r:?}");
        micros += 250;
    }
    // One waiter cancelled while asleep on the channel.
    let asleep = {
        let w = w.clone();
        tokio::spawn(async move { w.wait().await })
    };
    until("two waiting", || async { c.waiters() == 2 }).await;
    asleep.abort();
    assert!(asleep.await.unwrap_err().is_cancelled());
    proxy.set_reply_delay(Duration::ZERO);
    assert_eq!(c.waiters(), 1, "only the sibling waits");
    assert_eq!(c.pending_releases(), 0, "a wait handed over a release");
    assert!(snapshot(&srv, "cancel").await == before, "a wait wrote");
    assert!(!sibling.is_finished());
    assert_eq!(l.count_down().await.unwrap(), 0);
    within("the sibling", sibling).await.unwrap().unwrap();
    let channel = latch_channel(&c, "cancel");
    until("the subscription ends", || async {
        subscribers(&srv, &channel).await == 0
    })
    .await;
    assert!(snapshot(&srv, "cancel").await.is_empty());
}
