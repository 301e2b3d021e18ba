//! Semaphore and CountDownLatch against real redis-server processes.

use deadbolt_core::HoldGuard as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadbolt_core::{Acquire as _, Client, Error, LeaseState};
use deadbolt_semaphore::{CountDownLatch, Semaphore, MAX_PERMITS};
use deadbolt_testkit::support::{cmd, pttls, server, until, within, HANG};
use deadbolt_testkit::{FaultProxy, RedisServer};

async fn client(url: &str) -> Client {
    deadbolt_testkit::client_with(url, |b| b.preload(deadbolt_semaphore::SCRIPTS)).await
}

async fn client_with(url: &str, watchdog: Duration) -> Client {
    deadbolt_testkit::client_with(url, |b| {
        b.preload(deadbolt_semaphore::SCRIPTS)
            .watchdog_timeout(watchdog)
            .waiter_timeout(Duration::from_secs(1))
    })
    .await
}

async fn keys_left(srv: &RedisServer) -> Vec<String> {
    let keys: Vec<String> = cmd(srv, &["KEYS", "*"]).await;
    // The permit count itself stays (it is configuration, not a hold);
    // queue companions expire on their own TTL.
    let mut left = Vec::new();
    for k in keys {
        let ttl: i64 = cmd(srv, &["PTTL", &k]).await;
        if ttl == -1 && !k.ends_with(":sem") {
            left.push(k);
        }
    }
    left
}

/// A request for permits is an `Acquire`: generic code over primitives
/// takes a semaphore's permits with the same five calls as a lock.
async fn take_twice<A: deadbolt_core::Acquire>(a: &A) -> (Option<A::Guard>, Option<A::Guard>) {
    let first = a.try_lock().await.unwrap();
    let second = a.try_lock_for(Duration::from_millis(50)).await.unwrap();
    (first, second)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_request_has_the_five_acquire_calls() {
    let srv = server();
    let c = client(&srv.url()).await;
    let s = Semaphore::new(&c, "request");
    s.try_set_permits(3).await.unwrap();
    let (two, none) = take_twice(&s.permits(2)).await;
    let two = two.expect("3 free: 2 taken");
    assert_eq!(two.count(), 2);
    assert!(none.is_none(), "1 left: a second 2 does not fit");
    let lease = Duration::from_secs(5);
    let one = within(
        "one permit with a lease",
        s.permits(1).lock_with_lease(lease),
    )
    .await
    .unwrap();
    assert!(one.valid_for() <= lease);
    assert_eq!(s.available_permits().await.unwrap(), 0);
    two.release().await.unwrap();
    let again = within("two permits", s.permits(2).lock()).await.unwrap();
    assert_eq!(again.count(), 2);
    assert!(matches!(
        s.permits(0).try_lock().await,
        Err(Error::InvalidArgument(_))
    ));
    again.release().await.unwrap();
    one.release().await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counting() {
    let srv = server();
    let c = client(&srv.url()).await;
    let s = Semaphore::new(&c, "count");
    assert_eq!(s.available_permits().await.unwrap(), 0);
    assert!(
        s.try_acquire(1).await.unwrap().is_none(),
        "never set: no permits"
    );
    assert!(s.try_set_permits(10).await.unwrap());
    assert!(!s.try_set_permits(3).await.unwrap());
    let ten = s.acquire(10).await.unwrap();
    assert_eq!(ten.count(), 10);
    assert_eq!(s.available_permits().await.unwrap(), 0);
    assert_eq!(s.add_permits(4).await.unwrap(), 4);
    ten.release().await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 14);
    let five = s.acquire(5).await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 9);
    assert_eq!(s.drain_permits().await.unwrap(), 9);
    assert_eq!(s.available_permits().await.unwrap(), 0);
    five.release().await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 5);
    let info = s.inspect().await.unwrap();
    assert_eq!(info.permits, Some(5));
    assert_eq!(info.holds, 0);
    // Reduce: below what is held goes negative; below zero is refused.
    let three = s.acquire(3).await.unwrap();
    assert_eq!(s.reduce_permits(4).await.unwrap(), -2);
    assert!(matches!(
        s.reduce_permits(2).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(s.inspect().await.unwrap().permits, Some(1));
    three.release().await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 1);
    // Releasing twice, or after the semaphore was deleted: NotHeld.
    let one = s.acquire(1).await.unwrap();
    let _: () = cmd(&srv, &["DEL", "deadbolt:{count}:sem:h"]).await;
    assert!(matches!(one.release().await, Err(Error::NotHeld)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_writes_nothing() {
    let srv = server();
    let c = client(&srv.url()).await;
    let s = Semaphore::new(&c, "bad");
    assert!(matches!(s.acquire(0).await, Err(Error::InvalidArgument(_))));
    assert!(matches!(
        s.try_acquire(MAX_PERMITS + 1).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.add_permits(0).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.try_set_permits(u64::MAX).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.reduce_permits(1).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(s.try_set_permits(MAX_PERMITS - 1).await.unwrap());
    assert!(matches!(
        s.add_permits(2).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(s.inspect().await.unwrap().permits, Some(MAX_PERMITS - 1));
    let _: () = cmd(&srv, &["DEL", "deadbolt:{bad}:sem"]).await;
    let hk = "deadbolt:{bad}:sem:h";
    let _: () = cmd(&srv, &["SET", hk, "x"]).await;
    let err = s.try_acquire(1).await.unwrap_err();
    assert!(
        matches!(&err, Error::WrongType { key } if key == hk),
        "{err:?}"
    );
    assert!(matches!(
        s.add_permits(1).await,
        Err(Error::WrongType { .. })
    ));
    let n: i64 = cmd(&srv, &["DBSIZE"]).await;
    assert_eq!(n, 1, "only the wrong-type key");
    let err = Semaphore::new(&c, "").acquire(1).await.unwrap_err();
    assert_eq!(err.to_string(), "invalid argument: name is empty");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_request_returns_after_two_single_releases() {
    let srv = server();
    let c = client(&srv.url()).await;
    let s = Semaphore::new(&c, "four");
    s.try_set_permits(4).await.unwrap();
    let a = s.acquire(1).await.unwrap();
    let b = s.acquire(1).await.unwrap();
    // acquire(4) with 2 free.
    let s2 = s.clone();
    let big = tokio::spawn(async move { s2.acquire(4).await });
    until("queued", || async {
        s.inspect().await.unwrap().waiting == 1
    })
    .await;
    // A stream of single requests may use nothing of the big one's share.
    assert!(s.try_acquire(1).await.unwrap().is_none());
    a.release().await.unwrap();
    assert!(!big.is_finished());
    b.release().await.unwrap();
    let four = within("acquire(4)", big).await.unwrap().unwrap();
    assert_eq!(four.count(), 4);
    // try_acquire_for(4, 2 s) returns at the second release, not at the deadline.
    four.release().await.unwrap();
    let x = within("x", s.acquire(1)).await.unwrap();
    let y = within("y", s.acquire(1)).await.unwrap();
    let s3 = s.clone();
    let t = tokio::spawn(async move {
        let r = s3.try_acquire_for(4, Duration::from_secs(2)).await;
        (Instant::now(), r)
    });
    until("queued", || async {
        s.inspect().await.unwrap().waiting == 1
    })
    .await;
    x.release().await.unwrap();
    let second = Instant::now();
    y.release().await.unwrap();
    let (at, r) = within("try_acquire_for", t).await.unwrap();
    let got = r.unwrap().expect("four permits");
    assert!(
        at.duration_since(second) < Duration::from_millis(500),
        "returned {:?} after the second release",
        at.duration_since(second)
    );
    got.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_holders_permits_come_back_after_its_lease() {
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let wd = Duration::from_millis(600);
    let doomed = client_with(&proxy.url(), wd).await;
    let alive = client_with(&srv.url(), wd).await;
    let s = Semaphore::new(&alive, "dead");
    s.try_set_permits(5).await.unwrap();
    let _dead = Semaphore::new(&doomed, "dead").acquire(3).await.unwrap();
    let mine = s.acquire(2).await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 0);
    proxy.set_blackhole(true);
    let start = Instant::now();
    // A waiter for 3 gets them once the dead lease ends (its sleep bound).
    let got = within("the dead holder's permits", s.acquire(3))
        .await
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
    // The live holder kept renewing past the dead lease.
    assert_eq!(mine.state(), LeaseState::Active);
    assert_eq!(s.inspect().await.unwrap().holds, 2);
    got.release().await.unwrap();
    mine.release().await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_permit_is_mutual_exclusion() {
    let srv = server();
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(client(&srv.url()).await);
    }
    Semaphore::new(&clients[0], "mutex")
        .try_set_permits(1)
        .await
        .unwrap();
    let _: () = cmd(&srv, &["SET", "counter", "0"]).await;
    let mut tasks = Vec::new();
    for c in &clients {
        let s = Semaphore::new(c, "mutex");
        let url = srv.url();
        tasks.push(tokio::spawn(async move {
            let raw = redis::Client::open(url).unwrap();
            let mut conn = raw.get_multiplexed_async_connection().await.unwrap();
            for _ in 0..100 {
                let p = s.acquire(1).await.unwrap();
                let v: i64 = redis::cmd("GET")
                    .arg("counter")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                let _: () = redis::cmd("SET")
                    .arg("counter")
                    .arg(v + 1)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                p.release().await.unwrap();
            }
        }));
    }
    for t in tasks {
        within("task", t).await.unwrap();
    }
    let v: i64 = cmd(&srv, &["GET", "counter"]).await;
    assert_eq!(v, 800);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_permits_wake_exactly_the_waiters_they_serve() {
    let srv = server();
    let c = client(&srv.url()).await;
    let s = Semaphore::new(&c, "herd");
    s.try_set_permits(0).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let s = Semaphore::new(&c, "herd");
        tasks.push(tokio::spawn(async move {
            let p = s.acquire(1).await.unwrap();
            (Instant::now(), p)
        }));
    }
    until("50 queued", || async {
        s.inspect().await.unwrap().waiting == 50
    })
    .await;
    srv.reset_stats().await;
    let added = Instant::now();
    s.add_permits(50).await.unwrap();
    let mut last = added;
    let mut held = Vec::new();
    for t in tasks {
        let (at, p) = within("waiter", t).await.unwrap();
        last = last.max(at);
        held.push(p);
    }
    let took = last.duration_since(added);
    let stats = srv.commandstats().await;
    let scripts = stats.get("evalsha").copied().unwrap_or(0);
    assert!(took < Duration::from_millis(1000), "all 50 took {took:?}");
    // add_permits + one acquire per waiter (+ a heartbeat or two): no
    // burst of failed retries.
    assert!(scripts <= 50 + 6, "{scripts} scripts for 50 waiters");
    assert_eq!(s.available_permits().await.unwrap(), 0);
    for p in held {
        p.release().await.unwrap();
    }
    assert_eq!(s.available_permits().await.unwrap(), 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_no_more_than_can_proceed() {
    let srv = server();
    let c = client(&srv.url()).await;
    let s = Semaphore::new(&c, "few");
    s.try_set_permits(2).await.unwrap();
    let two = s.acquire(2).await.unwrap();
    let done = Arc::new(parking_lot::Mutex::new(0usize));
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let s = Semaphore::new(&c, "few");
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            let p = s.acquire(1).await.unwrap();
            *done.lock() += 1;
            p
        }));
    }
    until("10 queued", || async {
        s.inspect().await.unwrap().waiting == 10
    })
    .await;
    srv.reset_stats().await;
    two.release().await.unwrap();
    until("two served", || async { *done.lock() == 2 }).await;
    let info = s.inspect().await.unwrap();
    assert_eq!(info.waiting, 8);
    let scripts = srv.evalsha_calls().await;
    // The release, two acquires, this inspect (+ maybe a heartbeat).
    assert!(scripts <= 6, "{scripts} scripts");
    for t in tasks.iter() {
        t.abort();
    }
    assert!(c.releases_settled(HANG).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_leave_no_permit_taken() {
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let c = client(&proxy.url()).await;
    proxy.set_reply_delay(Duration::from_millis(2));
    let s = Semaphore::new(&c, "cancel");
    s.try_set_permits(3).await.unwrap();
    for round in 0..60u64 {
        let held = if round % 2 == 0 {
            Some(s.acquire(2).await.unwrap())
        } else {
            None
        };
        let w = Semaphore::new(&c, "cancel");
        let cut = Duration::from_micros(300 * (round % 17));
        let _ = tokio::time::timeout(cut, w.acquire(1 + round % 3)).await;
        drop(held);
    }
    proxy.set_reply_delay(Duration::ZERO);
    assert!(c.releases_settled(HANG).await);
    assert_eq!(s.available_permits().await.unwrap(), 3);
    let info = s.inspect().await.unwrap();
    assert_eq!((info.holds, info.waiting), (0, 0), "{info:?}");
    assert!(
        keys_left(&srv).await.is_empty(),
        "{:?}",
        keys_left(&srv).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_releases_every_waiter_at_zero_and_rearms() {
    let srv = server();
    let cs = [client(&srv.url()).await, client(&srv.url()).await];
    let l = CountDownLatch::new(&cs[0], "go");
    assert!(l.wait_for(Duration::ZERO).await.unwrap(), "never set: open");
    assert!(matches!(
        l.try_set_count(0).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(l.try_set_count(3).await.unwrap());
    assert!(!l.try_set_count(5).await.unwrap());
    assert_eq!(l.count().await.unwrap(), 3);
    let mut tasks = Vec::new();
    for i in 0..20 {
        let w = CountDownLatch::new(&cs[i % 2], "go");
        tasks.push(tokio::spawn(async move {
            w.wait().await.unwrap();
            Instant::now()
        }));
    }
    until("20 waiting", || async {
        cs[0].waiters() + cs[1].waiters() == 20
    })
    .await;
    // wait_for times out while the count is above zero.
    let t = Instant::now();
    assert!(!l.wait_for(Duration::from_millis(200)).await.unwrap());
    assert!(t.elapsed() >= Duration::from_millis(200));
    assert_eq!(l.count_down().await.unwrap(), 2);
    assert_eq!(l.count_down().await.unwrap(), 1);
    let zero = Instant::now();
    assert_eq!(l.count_down().await.unwrap(), 0);
    for t in tasks {
        let at = within("waiter", t).await.unwrap();
        assert!(at.duration_since(zero) < Duration::from_millis(500));
    }
    let n: i64 = cmd(&srv, &["EXISTS", "deadbolt:{go}:latch"]).await;
    assert_eq!(n, 0, "a latch at zero leaves no key");
    assert_eq!(l.count_down().await.unwrap(), 0);
    // Re-arm.
    assert!(l.try_set_count(1).await.unwrap());
    let w = CountDownLatch::new(&cs[1], "go");
    let t = tokio::spawn(async move { w.wait_for(HANG).await });
    l.count_down().await.unwrap();
    assert!(within("re-armed waiter", t).await.unwrap().unwrap());
    let _: () = cmd(&srv, &["SET", "deadbolt:{go}:latch", "abc"]).await;
    assert!(matches!(l.count().await, Err(Error::BadValue { .. })));
}

/// Found by the torture test: when the last lease ended, Redis expired the
/// holds' keys together, and a count of taken permits kept elsewhere was
/// never given back: the permits leaked for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_come_back_when_every_lease_ended() {
    let srv = server();
    let c = client(&srv.url()).await;
    let s = Semaphore::new(&c, "expire");
    s.try_set_permits(3).await.unwrap();
    let p = s
        .acquire_with_lease(3, Duration::from_millis(100))
        .await
        .unwrap();
    until("the hold keys expire", || async {
        let n: i64 = cmd(&srv, &["EXISTS", "deadbolt:{expire}:sem:h"]).await;
        n == 0
    })
    .await;
    assert_eq!(s.available_permits().await.unwrap(), 3);
    assert!(matches!(p.release().await, Err(Error::NotHeld)));
    let again = within("all three", s.acquire(3)).await.unwrap();
    again.release().await.unwrap();
}

/// A release hands its permits to the head waiters that fit,
/// inside the release (one hop): the waiters of another client get them
/// without a try of their own, and keep them past their claim (extended to
/// the lease in the background).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_hands_its_permits_to_the_waiters_that_fit_in_one_hop() {
    let srv = server();

    let h = client(&srv.url()).await;
    // A waiter_timeout of 300 ms: the claim of a grant to its waiters.
    let w = deadbolt_testkit::client_with(&srv.url(), |b| {
        b.preload(deadbolt_semaphore::SCRIPTS)
            .waiter_timeout(Duration::from_millis(300))
    })
    .await;
    let s = Semaphore::new(&h, "hop");
    s.try_set_permits(3).await.unwrap();
    let three = s.acquire(3).await.unwrap();
    let mut tasks = Vec::new();
    // Queued in this order: 2, 1, 1.
    for (i, n) in [(1u64, 2), (2, 1), (3, 1)] {
        let sw = Semaphore::new(&w, "hop");
        tasks.push(tokio::spawn(async move { sw.acquire(n).await }));
        until("queued", || async {
            s.inspect().await.unwrap().waiting == i
        })
        .await;
    }
    // Every waiter's second try (after subscribing) has been answered too:
    // nothing but the release runs from here on.
    srv.reset_stats().await;
    until("the waiters sleep", || async {
        let calls = srv.evalsha_calls().await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        calls == srv.evalsha_calls().await
    })
    .await;
    srv.reset_stats().await;
    three.release().await.unwrap();
    let two = within("the head waiter", tasks.remove(0))
        .await
        .unwrap()
        .unwrap();
    let one = within("the next waiter", tasks.remove(0))
        .await
        .unwrap()
        .unwrap();
    let scripts = srv.evalsha_calls().await;
    assert_eq!(scripts, 1, "the waiters took their permits without a try");
    let info = s.inspect().await.unwrap();
    assert_eq!((info.available, info.holds, info.waiting), (0, 2, 1));
    // Past the 300 ms claim: extended, still held.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(two.state(), LeaseState::Active);
    assert_eq!(s.inspect().await.unwrap().holds, 2);
    two.release().await.unwrap();
    one.release().await.unwrap();
    let last = within("the last waiter", tasks.remove(0))
        .await
        .unwrap()
        .unwrap();
    last.release().await.unwrap();
    assert!(w.releases_settled(HANG).await);
}

/// The holds' keys expire no earlier than the longest lease they hold, and
/// never earlier than before (a shorter lease does not cut a longer one's):
/// on a fresh semaphore the first hold gives them their TTL (NX), later
/// holds push it out (GT), releases leave it, and the last release deletes
/// them, so the next first hold starts afresh with its own lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holds_keys_outlast_the_longest_lease() {
    let srv = server();
    let c = client(&srv.url()).await;
    let s = Semaphore::new(&c, "ttl");
    assert!(s.try_set_permits(5).await.unwrap());
    let keys = ["deadbolt:{ttl}:sem:h", "deadbolt:{ttl}:sem:hn"];
    let ttls = || pttls(&srv, &keys);
    let secs = |s: u64| Duration::from_secs(s);
    let within_ms = |ttl: i64, lease: i64| ttl > (lease - 5) * 1000 && ttl <= lease * 1000;
    let a = s.acquire_with_lease(1, secs(60)).await.unwrap();
    for t in ttls().await {
        assert!(within_ms(t, 60), "first hold: TTL {t} ms, not about 60 s");
    }
    let b = s.acquire_with_lease(1, secs(120)).await.unwrap();
    for t in ttls().await {
        assert!(
            within_ms(t, 120),
            "longer hold: TTL {t} ms, not about 120 s"
        );
    }
    let shorter = s.acquire_with_lease(1, secs(30)).await.unwrap();
    b.release().await.unwrap();
    shorter.release().await.unwrap();
    for t in ttls().await {
        assert!(
            within_ms(t, 120),
            "after releases: TTL {t} ms, cut from 120 s"
        );
    }
    a.release().await.unwrap();
    for t in ttls().await {
        assert_eq!(t, -2, "the last release leaves the holds' keys behind");
    }
    let again = s.acquire_with_lease(1, secs(10)).await.unwrap();
    for t in ttls().await {
        assert!(
            within_ms(t, 10),
            "a new first hold: TTL {t} ms, not about 10 s"
        );
    }
    again.release().await.unwrap();
    assert!(keys_left(&srv).await.is_empty());
}

/// The queue's keys always carry a TTL, though a waiter's touch is skipped
/// while the queue has half its life left (queue_touch_due): when the
/// queue empties and is created again beside the older `alive`; a waiter
/// with a longer waiter timeout lengthens their life (never a shorter
/// one's: a touch that is due pushes every key out to its own three
/// windows); and once nobody waits they all expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_keys_always_expire() {
    let srv = server();
    let short = Duration::from_millis(400);
    let url = srv.url();
    let connect = |wt: Duration| {
        Client::builder(&url)
            .preload(deadbolt_semaphore::SCRIPTS)
            .waiter_timeout(wt)
            .build()
    };
    let a = connect(short).await.unwrap();
    let b = connect(short).await.unwrap();
    let long = connect(Duration::from_secs(20)).await.unwrap();
    let (sa, sb) = (Semaphore::new(&a, "qttl"), Semaphore::new(&b, "qttl"));
    assert!(sa.try_set_permits(1).await.unwrap());
    let keys = [
        "deadbolt:{qttl}:sem:q",
        "deadbolt:{qttl}:sem:qo",
        "deadbolt:{qttl}:sem:alive",
    ];
    let queued = |n: i64| {
        let srv = &srv;
        async move {
            until("the queue's length", || async {
                cmd::<i64>(srv, &["ZCARD", keys[0]]).await == n
            })
            .await;
        }
    };
    let all_expire = || async {
        for (k, t) in keys.iter().zip(pttls(&srv, &keys).await) {
            assert!(t > 0, "{k} has PTTL {t}");
        }
    };
    let held = sa.acquire(1).await.unwrap();
    let bt = tokio::spawn(async move { sb.acquire(1).await.map(|p| (sb, p)) });
    queued(1).await;
    all_expire().await;
    // The release grants B and empties the queue (q and qo go, alive
    // stays)...
    held.release().await.unwrap();
    let (sb, bp) = within("B acquires", bt).await.unwrap().unwrap();
    assert_eq!(pttls(&srv, &keys[..2]).await, [-2, -2]);
    // ...and A queues again: q and qo are created afresh.
    let at = tokio::spawn(async move { sa.acquire(1).await.map(|p| (sa, p)) });
    queued(1).await;
    all_expire().await;
    // A waiter of a client with a longer waiter timeout finds the queue
    // with less than half of its three windows left: every key lives for
    // its three windows (60 s) from then on.
    let sl = Semaphore::new(&long, "qttl");
    let lt = tokio::spawn(async move { sl.acquire(1).await.map(|p| (sl, p)) });
    queued(2).await;
    for (k, t) in keys.iter().zip(pttls(&srv, &keys).await) {
        assert!(t > 55_000, "{k}: PTTL {t} ms after a 20 s waiter queued");
    }
    bp.release().await.unwrap();
    let (sa, ap) = within("A acquires", at).await.unwrap().unwrap();
    ap.release().await.unwrap();
    let (sl, lp) = within("the long waiter acquires", lt)
        .await
        .unwrap()
        .unwrap();
    lp.release().await.unwrap();
    drop((sa, sb, sl));
    // Nobody waits: the queue's keys go with their TTL (the long client's
    // record keeps `alive` for its 60 s; the short ones' queue is empty).
    until("q and qo are gone", || async {
        cmd::<i64>(&srv, &["EXISTS", keys[0], keys[1]]).await == 0
    })
    .await;
    let t: i64 = cmd(&srv, &["PTTL", keys[2]]).await;
    assert!(t > 0, "alive has PTTL {t}");
    for c in [a, b, long] {
        c.shutdown().await;
    }
}
