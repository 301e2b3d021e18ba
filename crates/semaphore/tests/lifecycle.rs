//! What a Redisson user expects beyond acquire and release, against real
//! redis-server processes: `set_permits` (Redisson `setPermits`), giving
//! back part of a multi-permit hold (`Permits::release_permits`), and
//! deleting a semaphore or a latch with holders and waiters about.

use deadbolt_core::HoldGuard as _;
use std::time::{Duration, Instant};

use deadbolt_core::primitive::ScriptCall;
use deadbolt_core::{Client, Error, LeaseState};
use deadbolt_semaphore::scripts::{SEM_HEARTBEAT, SEM_RELEASE_PART};
use deadbolt_semaphore::{
    semaphore_keys, CountDownLatch, Permits, Semaphore, MAX_PERMITS, SEMAPHORE_KIND,
};
use deadbolt_testkit::support::{cmd, server, subscribers, until, within, HANG};
use deadbolt_testkit::RedisServer;

/// A client with a 600 ms watchdog (renewals every 200 ms) and a 1 s
/// waiter timeout.
async fn client(url: &str) -> Client {
    deadbolt_testkit::client_with(url, |b| {
        b.preload(deadbolt_semaphore::SCRIPTS)
            .watchdog_timeout(Duration::from_millis(600))
            .waiter_timeout(Duration::from_secs(1))
    })
    .await
}

/// A client with the default timers (watchdog rounds every 10 s,
/// heartbeats every 1.7 s): for counting the scripts a call runs.
async fn quiet_client(url: &str) -> Client {
    deadbolt_testkit::client_with(url, |b| b.preload(deadbolt_semaphore::SCRIPTS)).await
}

async fn dbsize(srv: &RedisServer) -> i64 {
    cmd(srv, &["DBSIZE"]).await
}

/// `n` tasks, each waiting for one permit of `name` on `c`; they report
/// when they got it.
fn waiters(c: &Client, name: &str, n: usize) -> Vec<tokio::task::JoinHandle<(Instant, Permits)>> {
    (0..n)
        .map(|_| {
            let s = Semaphore::new(c, name);
            tokio::spawn(async move {
                let p = s.acquire(1).await.unwrap();
                (Instant::now(), p)
            })
        })
        .collect()
}

/// Until every waiter of `s` has had its second try (after subscribing)
/// answered: from then on only what the test does runs scripts.
async fn quiet(srv: &RedisServer) {
    until("the waiters sleep", || async {
        srv.reset_stats().await;
        tokio::time::sleep(Duration::from_millis(60)).await;
        srv.evalsha_calls().await == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_permits_sets_the_total_whatever_it_was_and_holders_keep_theirs() {
    let srv = server();
    let c = client(&srv.url()).await;
    let s = Semaphore::new(&c, "set");
    // Never set: set_permits sets it, and try_set_permits then finds it set.
    assert_eq!(s.set_permits(3).await.unwrap(), 3);
    assert!(!s.try_set_permits(7).await.unwrap());
    assert_eq!(s.inspect().await.unwrap().permits, Some(3));
    // Up and down, unconditionally.
    assert_eq!(s.set_permits(5).await.unwrap(), 5);
    let four = s.acquire(4).await.unwrap();
    assert_eq!(s.set_permits(6).await.unwrap(), 2);
    // Below what is held: the holder keeps its permits, available is
    // negative until it gives enough back.
    assert_eq!(s.set_permits(2).await.unwrap(), -2);
    assert_eq!(s.available_permits().await.unwrap(), -2);
    assert!(s.try_acquire(1).await.unwrap().is_none());
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(four.state(), LeaseState::Active, "renewed past its lease");
    let info = s.inspect().await.unwrap();
    assert_eq!((info.permits, info.holds), (Some(2), 1));
    four.release().await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 2);
    // Zero is a setting (nothing free), not "unset".
    assert_eq!(s.set_permits(0).await.unwrap(), 0);
    assert_eq!(s.inspect().await.unwrap().permits, Some(0));
    // Beyond the largest: refused, nothing sent.
    srv.reset_stats().await;
    assert!(matches!(
        s.set_permits(MAX_PERMITS + 1).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(srv.evalsha_calls().await, 0);
    assert_eq!(s.set_permits(MAX_PERMITS).await.unwrap(), 9007199254740991);
    // A key of another type: WrongType, nothing written.
    let _: () = cmd(&srv, &["DEL", "deadbolt:{set}:sem"]).await;
    let _: () = cmd(&srv, &["SET", "deadbolt:{set}:sem:q", "x"]).await;
    assert!(matches!(
        s.set_permits(1).await,
        Err(Error::WrongType { key }) if key == "deadbolt:{set}:sem:q"
    ));
    assert_eq!(dbsize(&srv).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_permits_grants_exactly_the_waiters_that_now_fit() {
    let srv = server();
    let c = quiet_client(&srv.url()).await;
    let s = Semaphore::new(&c, "grow");
    s.set_permits(0).await.unwrap();
    let tasks = waiters(&c, "grow", 10);
    until("10 queued", || async {
        s.inspect().await.unwrap().waiting == 10
    })
    .await;
    quiet(&srv).await;
    let set = Instant::now();
    assert_eq!(s.set_permits(3).await.unwrap(), 3);
    until("three granted", || async {
        tasks.iter().filter(|t| t.is_finished()).count() == 3
    })
    .await;
    assert!(set.elapsed() < Duration::from_millis(500));
    // Granted inside set_permits: no try of their own, and the others
    // were not woken.
    let info = s.inspect().await.unwrap();
    assert_eq!((info.available, info.holds, info.waiting), (0, 3, 7));
    // set_permits, this inspect (+ maybe a heartbeat and a renewal
    // round); a try per waiter would be 7 more.
    let scripts = srv.evalsha_calls().await;
    assert!(scripts <= 4, "{scripts} scripts");
    // Setting the total below what is held grants nobody.
    s.set_permits(1).await.unwrap();
    assert_eq!(s.inspect().await.unwrap().waiting, 7);
    s.set_permits(10).await.unwrap();
    let mut held = Vec::new();
    for t in tasks {
        held.push(within("waiter", t).await.unwrap().1);
    }
    assert_eq!(s.available_permits().await.unwrap(), 0);
    for p in held {
        p.release().await.unwrap();
    }
    assert_eq!(s.available_permits().await.unwrap(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_permits_gives_back_part_and_grants_the_waiters_that_fit() {
    let srv = server();
    let c = quiet_client(&srv.url()).await;
    let s = Semaphore::new(&c, "part");
    s.set_permits(5).await.unwrap();
    let mut five = s.acquire(5).await.unwrap();
    // A waiter for 2 and one for 1 behind it, of another client (the
    // grants go through its channel).
    let w = quiet_client(&srv.url()).await;
    let (s2, s1) = (Semaphore::new(&w, "part"), Semaphore::new(&w, "part"));
    let two = tokio::spawn(async move { s2.acquire(2).await.unwrap() });
    until("queued", || async {
        s.inspect().await.unwrap().waiting == 1
    })
    .await;
    let one = tokio::spawn(async move { s1.acquire(1).await.unwrap() });
    until("queued", || async {
        s.inspect().await.unwrap().waiting == 2
    })
    .await;
    quiet(&srv).await;
    // Bad counts: refused, nothing written, the guard as it was.
    let before = s.inspect().await.unwrap();
    assert!(matches!(
        five.release_permits(0).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        five.release_permits(6).await,
        Err(Error::InvalidArgument(_))
    ));
    let after = s.inspect().await.unwrap();
    assert_eq!(
        (after.available, after.holds, after.holders[0].permits),
        (before.available, before.holds, 5)
    );
    assert_eq!(after.waiters, before.waiters);
    assert_eq!((five.count(), five.state()), (5, LeaseState::Active));
    srv.reset_stats().await;
    // Give back 2: exactly the head waiter (2) fits, granted in the call.
    five.release_permits(2).await.unwrap();
    assert_eq!(five.count(), 3);
    let two = within("the waiter for 2", two).await.unwrap();
    // The partial release (+ maybe a heartbeat or a renewal round); a try
    // of the waiter's own would be one more, and so would a woken waiter.
    let scripts = srv.evalsha_calls().await;
    assert!(scripts <= 3, "{scripts} scripts");
    let info = s.inspect().await.unwrap();
    assert_eq!((info.available, info.holds, info.waiting), (0, 2, 1));
    assert!(info.holders.iter().any(|h| h.permits == 3), "{info:?}");
    // Give back 1 more: the waiter for 1.
    five.release_permits(1).await.unwrap();
    let one = within("the waiter for 1", one).await.unwrap();
    assert_eq!(five.count(), 2);
    assert_eq!(s.available_permits().await.unwrap(), 0);
    // n == count: as release; the guard holds nothing then.
    five.release_permits(2).await.unwrap();
    assert_eq!(five.count(), 0);
    assert_eq!(five.state(), LeaseState::Released);
    assert_eq!(five.valid_for(), Duration::ZERO);
    assert_eq!(five.lost().await, LeaseState::Released);
    assert!(matches!(
        five.release_permits(1).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        five.extend(Duration::from_secs(1)).await,
        Err(Error::NotHeld)
    ));
    assert_eq!(s.available_permits().await.unwrap(), 2);
    assert!(matches!(five.release().await, Err(Error::NotHeld)));
    two.release().await.unwrap();
    one.release().await.unwrap();
    assert!(c.releases_settled(HANG).await && w.releases_settled(HANG).await);
    assert_eq!(s.available_permits().await.unwrap(), 5);
    let info = s.inspect().await.unwrap();
    assert_eq!((info.holds, info.waiting), (0, 0));
}

/// What a partial release keeps stays leased: the watchdog renews it past
/// its lease, and it is given back in full by release or by a drop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_permits_a_partial_release_keeps_stay_renewed() {
    let srv = server();
    let c = client(&srv.url()).await;
    let s = Semaphore::new(&c, "kept");
    s.set_permits(4).await.unwrap();
    let mut p = s.acquire(4).await.unwrap();
    p.release_permits(3).await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 3);
    // Twice the 600 ms watchdog timeout.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(p.state(), LeaseState::Active);
    let info = s.inspect().await.unwrap();
    assert_eq!((info.holds, info.available), (1, 3));
    assert_eq!(info.holders[0].permits, 1);
    assert!(info.holders[0].ttl > Duration::from_millis(100));
    p.extend(Duration::from_secs(5)).await.unwrap();
    drop(p);
    assert!(c.releases_settled(HANG).await);
    assert_eq!(s.available_permits().await.unwrap(), 4);
    assert_eq!(s.inspect().await.unwrap().holds, 0);
}

/// The partial release states what the hold keeps: a retry of a call
/// whose reply was lost (or whose future was dropped) gives back nothing
/// more, and the guard's count follows what the server holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_release_is_idempotent_and_the_guard_learns_what_is_held() {
    let srv = server();
    let c = client(&srv.url()).await;
    let s = Semaphore::new(&c, "again");
    s.set_permits(5).await.unwrap();
    let mut p = s.acquire(5).await.unwrap();
    let attempt = s.inspect().await.unwrap().holders[0].attempt.clone();
    let keys = semaphore_keys(&c.keys(SEMAPHORE_KIND, "again").unwrap());
    let keep3 = ScriptCall::new(&SEM_RELEASE_PART, keys.clone(), vec![attempt, "3".into()]);
    // As a call whose future was dropped after sending, then its retry.
    assert_eq!(c.run::<i64>(&keep3).await.unwrap(), 3);
    assert_eq!(c.run::<i64>(&keep3).await.unwrap(), 3);
    assert_eq!(s.available_permits().await.unwrap(), 2);
    // The guard still counts 5; asking to keep 4 gives back nothing and
    // tells it that 3 are held.
    assert_eq!(p.count(), 5);
    p.release_permits(1).await.unwrap();
    assert_eq!(p.count(), 3);
    assert_eq!(s.available_permits().await.unwrap(), 2);
    p.release_permits(1).await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 3);
    p.release().await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 5);
    // keep 0 is refused by the script too (the client never sends it).
    let bad = ScriptCall::new(&SEM_RELEASE_PART, keys, vec!["x".into(), "0".into()]);
    assert!(matches!(
        c.run::<i64>(&bad).await,
        Err(Error::InvalidArgument(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_release_of_a_hold_that_is_gone_turns_the_guard_lost() {
    let srv = server();
    let c = client(&srv.url()).await;
    let s = Semaphore::new(&c, "gone");
    s.set_permits(4).await.unwrap();
    // The hold removed behind the guard's back (as an operator's DEL).
    let mut p = s.acquire(3).await.unwrap();
    let _: () = cmd(&srv, &["DEL", "deadbolt:{gone}:sem:h"]).await;
    assert!(matches!(p.release_permits(1).await, Err(Error::NotHeld)));
    assert_eq!((p.count(), p.state()), (0, LeaseState::Lost));
    assert_eq!(p.lost().await, LeaseState::Lost);
    assert!(matches!(p.release().await, Err(Error::NotHeld)));
    // A fixed lease that ended: the guard knows before asking.
    let mut q = s
        .acquire_with_lease(2, Duration::from_millis(100))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(matches!(q.release_permits(1).await, Err(Error::NotHeld)));
    assert_eq!(q.state(), LeaseState::Lost);
    drop(q);
    assert!(c.releases_settled(HANG).await);
}

/// Deleting a semaphore removes every key; holders learn it at their next
/// renewal or release; waiters of every client are told at once, queue
/// anew and are served once the permits are set again; a bounded wait
/// ends at its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_semaphore_leaves_holders_lost_and_waiters_waiting_for_a_new_setting() {
    let srv = server();
    // Holds with a 6 s watchdog lease (renewed every 2 s) and a fixed
    // 60 s one: a waiter's sleep bound (the earliest lease end) is 6 s, so
    // only the delete's message wakes them sooner.
    let c = deadbolt_testkit::client_with(&srv.url(), |b| {
        b.preload(deadbolt_semaphore::SCRIPTS)
            .watchdog_timeout(Duration::from_secs(6))
            .waiter_timeout(Duration::from_secs(1))
    })
    .await;
    let w = client(&srv.url()).await;
    let s = Semaphore::new(&c, "del");
    assert!(!s.delete().await.unwrap(), "nothing there");
    s.set_permits(3).await.unwrap();
    let renewed = s.acquire(1).await.unwrap();
    let fixed = s
        .acquire_with_lease(2, Duration::from_secs(60))
        .await
        .unwrap();
    let sw = Semaphore::new(&w, "del");
    let big = tokio::spawn(async move { sw.acquire(2).await });
    until("queued", || async {
        s.inspect().await.unwrap().waiting == 1
    })
    .await;
    let sb = Semaphore::new(&c, "del");
    let bounded = tokio::spawn(async move {
        let start = Instant::now();
        let r = sb.try_acquire_for(1, Duration::from_millis(1500)).await;
        (start.elapsed(), r)
    });
    let main = semaphore_keys(&c.keys(SEMAPHORE_KIND, "del").unwrap())[0].clone();
    until("both queued and listening", || async {
        s.inspect().await.unwrap().waiting == 2
            && subscribers(&srv, &format!("{main}:ch:{}", c.id())).await == 1
            && subscribers(&srv, &format!("{main}:ch:{}", w.id())).await == 1
    })
    .await;
    // Their catch-up tries (after subscribing) are answered.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let deleted = Instant::now();
    assert!(s.delete().await.unwrap());
    // Both waiters (two clients) tried again at once and queued anew.
    until("the waiters queue anew", || async {
        s.inspect().await.unwrap().waiting == 2
    })
    .await;
    assert!(
        deleted.elapsed() < Duration::from_millis(800),
        "{:?}",
        deleted.elapsed()
    );
    let info = s.inspect().await.unwrap();
    assert_eq!((info.permits, info.holds, info.available), (None, 0, 0));
    // The watchdog hold turns Lost at its next renewal.
    let state = within("the renewed hold is lost", renewed.lost()).await;
    assert_eq!(state, LeaseState::Lost);
    assert!(
        deleted.elapsed() < Duration::from_secs(4),
        "{:?}",
        deleted.elapsed()
    );
    assert!(matches!(renewed.release().await, Err(Error::NotHeld)));
    // The fixed one learns it when it releases.
    assert!(matches!(fixed.release().await, Err(Error::NotHeld)));
    // The bounded waiter ends at its bound, without permits.
    let (took, r) = within("the bounded waiter", bounded).await.unwrap();
    assert!(r.unwrap().is_none());
    assert!(took >= Duration::from_millis(1500), "{took:?}");
    assert!(!big.is_finished());
    // Setting the permits again serves the waiter that still waits.
    s.set_permits(2).await.unwrap();
    let two = within("the waiter for 2", big).await.unwrap().unwrap();
    assert_eq!(two.count(), 2);
    assert!(s.delete().await.unwrap());
    assert_eq!(dbsize(&srv).await, 0, "every key deleted");
    assert!(matches!(two.release().await, Err(Error::NotHeld)));
    assert!(c.releases_settled(HANG).await && w.releases_settled(HANG).await);
    assert!(!s.delete().await.unwrap());
    // Usable again from scratch.
    assert!(s.try_set_permits(1).await.unwrap());
    s.acquire(1).await.unwrap().release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_semaphore_with_a_key_of_another_type_deletes_nothing() {
    let srv = server();
    let c = client(&srv.url()).await;
    let s = Semaphore::new(&c, "odd");
    s.set_permits(2).await.unwrap();
    let _: () = cmd(&srv, &["SET", "deadbolt:{odd}:sem:alive", "x"]).await;
    assert!(matches!(
        s.delete().await,
        Err(Error::WrongType { key }) if key == "deadbolt:{odd}:sem:alive"
    ));
    assert_eq!(dbsize(&srv).await, 2);
    assert!(matches!(
        Semaphore::new(&c, "").delete().await,
        Err(Error::InvalidArgument(_))
    ));
}

/// A deleted latch reads 0, which every wait takes for open: its waiters
/// of every client go at once, as at zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_latch_releases_every_waiter() {
    let srv = server();
    let cs = [client(&srv.url()).await, client(&srv.url()).await];
    let l = CountDownLatch::new(&cs[0], "abandon");
    assert!(!l.delete().await.unwrap(), "nothing there");
    assert!(l.try_set_count(3).await.unwrap());
    let mut tasks = Vec::new();
    for i in 0..10 {
        let w = CountDownLatch::new(&cs[i % 2], "abandon");
        tasks.push(tokio::spawn(async move {
            w.wait().await.unwrap();
            Instant::now()
        }));
    }
    until("10 waiting", || async {
        cs[0].waiters() + cs[1].waiters() == 10
    })
    .await;
    let deleted = Instant::now();
    assert!(l.delete().await.unwrap());
    for t in tasks {
        let at = within("waiter", t).await.unwrap();
        assert!(at.duration_since(deleted) < Duration::from_millis(500));
    }
    assert_eq!(l.count().await.unwrap(), 0);
    assert_eq!(dbsize(&srv).await, 0);
    assert!(!l.delete().await.unwrap());
    // Armed again after the delete.
    assert!(l.try_set_count(1).await.unwrap());
    assert_eq!(l.count_down().await.unwrap(), 0);
    // A key that is no count: refused, not deleted.
    let _: () = cmd(&srv, &["SET", "deadbolt:{abandon}:latch", "abc"]).await;
    assert!(matches!(l.delete().await, Err(Error::BadValue { .. })));
    assert_eq!(dbsize(&srv).await, 1);
}

/// The guard and the new futures can cross threads.
#[allow(dead_code)]
fn send_sync(c: Client, mut p: Permits) {
    fn is_send_sync<T: Send + Sync>(_: &T) {}
    fn is_send<T: Send>(_: &T) {}
    let s = Semaphore::new(&c, "x");
    let l = CountDownLatch::new(&c, "x");
    is_send_sync(&p);
    is_send(&s.set_permits(1));
    is_send(&s.delete());
    is_send(&l.delete());
    is_send(&p.lost());
    is_send(&p.release_permits(1));
    is_send(&p.release());
}

/// A heartbeat for a semaphore whose queue is empty writes nothing: a round
/// sent before the client's last waiter there was granted, or before the
/// semaphore was deleted, would otherwise make the liveness key anew after
/// the delete (`delete` then finds a key where nothing should be). One
/// with a waiter refreshes the waiter's client, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_for_an_empty_queue_writes_nothing() {
    let srv = server();
    let c = quiet_client(&srv.url()).await;
    let keys = semaphore_keys(&c.keys(SEMAPHORE_KIND, "hb").unwrap());
    let beat = ScriptCall::new(
        &SEM_HEARTBEAT,
        keys.clone(),
        vec![c.id().to_string(), "1000".into()],
    );
    // Deleted (nothing there), then set with holders but nobody queued.
    assert_eq!(c.run::<i64>(&beat).await.unwrap(), 0);
    assert_eq!(
        dbsize(&srv).await,
        0,
        "a heartbeat of a deleted semaphore wrote"
    );
    let s = Semaphore::new(&c, "hb");
    s.set_permits(1).await.unwrap();
    let held = s.acquire(1).await.unwrap();
    let before = dbsize(&srv).await;
    assert_eq!(c.run::<i64>(&beat).await.unwrap(), 0);
    assert_eq!(
        dbsize(&srv).await,
        before,
        "a heartbeat with nobody queued wrote"
    );
    // A waiter of another client queued: the heartbeat refreshes this one.
    let w = quiet_client(&srv.url()).await;
    let sw = Semaphore::new(&w, "hb");
    let waiting = tokio::spawn(async move { sw.acquire(1).await });
    until("queued", || async {
        s.inspect().await.unwrap().waiting == 1
    })
    .await;
    assert_eq!(c.run::<i64>(&beat).await.unwrap(), 1);
    let rec: Option<f64> = cmd(&srv, &["ZSCORE", &keys[5], c.id()]).await;
    assert!(rec.is_some(), "the heartbeat did not refresh its client");
    held.release().await.unwrap();
    within("the waiter", waiting)
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
}
