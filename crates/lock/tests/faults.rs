//! Faults against a real redis-server, and hostile input: cancellation,
//! script flush, killed subscriber connections, a dead or paused server,
//! dropped and late replies; OOM, bad fencing counters, hash tags,
//! overflowing durations, ACL refusals, shutdown and error messages.

mod common;

use deadbolt_core::Acquire as _;
use deadbolt_core::HoldGuard as _;
use std::time::{Duration, Instant};

use common::*;
use deadbolt_core::{Client, Error, Keys, LeaseState};
use deadbolt_lock::Lock;

async fn proxied(srv: &RedisServer) -> FaultProxy {
    FaultProxy::start(srv.addr()).await.expect("proxy")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_leave_nothing_held() {
    let srv = server();
    let proxy = proxied(&srv).await;
    let c = client(&proxy.url()).await;
    proxy.set_reply_delay(Duration::from_millis(2));
    let lock = Lock::new(&c, "cancel");

    // Free lock: every cancelled acquire that may have been granted is released.
    let mut micros = 0;
    while micros <= 6000 {
        if let Ok(g) = tokio::time::timeout(Duration::from_micros(micros), lock.lock()).await {
            g.unwrap().unlock().await.unwrap();
        }
        micros += 250;
    }
    assert!(c.releases_settled(HANG).await);
    assert!(
        !exists(&srv, lock.key().unwrap()).await,
        "a cancelled acquire stayed held"
    );

    // Held by this handle: cancelled re-entries never inflate the hold count.
    let outer = lock.lock().await.unwrap();
    let inner = lock.clone();
    let mut micros = 0;
    while micros <= 6000 {
        if let Ok(g) = tokio::time::timeout(Duration::from_micros(micros), inner.lock()).await {
            g.unwrap().unlock().await.unwrap();
        }
        micros += 250;
    }
    assert!(c.releases_settled(HANG).await);
    assert_eq!(lock.hold_count().await.unwrap(), 1, "hold count inflated");
    outer.unlock().await.unwrap();
    assert!(!exists(&srv, lock.key().unwrap()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_is_transparent() {
    let srv = server();
    let c = client(&srv.url()).await;
    let lock = Lock::new(&c, "flush");
    let mut raw = srv.conn().await;
    for _ in 0..3 {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut raw)
            .await
            .unwrap();
        let g = lock.lock().await.unwrap();
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut raw)
            .await
            .unwrap();
        assert!(lock.is_held().await.unwrap());
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut raw)
            .await
            .unwrap();
        g.unlock().await.unwrap();
    }
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_subscriber_connection_does_not_strand_waiters() {
    let srv = server();
    let c1 = client(&srv.url()).await;
    let c2 = client(&srv.url()).await;
    let holder = Lock::new(&c1, "kill");
    let g = holder.lock().await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let l = Lock::new(&c2, "kill");
        waiters.push(tokio::spawn(async move {
            let g = l.lock().await.unwrap();
            let at = Instant::now();
            g.unlock().await.unwrap();
            at
        }));
    }
    // Wait until the waiters' client is subscribed, then kill its subscriber connection.
    srv.wait_for_channels(1).await;
    let mut raw = srv.conn().await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(killed >= 1, "no pubsub client was killed");
    // Wait until the channel is back on the server (re-subscribed by core).
    srv.wait_for_channels(1).await;
    let unlocked = Instant::now();
    g.unlock().await.unwrap();
    let mut first = None;
    for w in waiters {
        let at = within("waiter", w).await.unwrap();
        first = Some(first.map_or(at, |f: Instant| f.min(at)));
    }
    let handoff = first.unwrap() - unlocked;
    assert!(
        handoff < Duration::from_millis(100),
        "first waiter got it {handoff:?} after unlock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_server_is_unavailable_promptly() {
    let mut srv = server();
    let c = fast_client(&srv.url(), 500).await;
    let lock = Lock::new(&c, "down");
    srv.stop();
    let started = Instant::now();
    // The first call may race the connection's own discovery of the close
    // (then it is Indeterminate); from then on the client knows.
    let mut last = None;
    for _ in 0..3 {
        match lock.try_lock().await {
            Err(e @ Error::Unavailable(_)) => {
                last = Some(e);
                break;
            }
            Err(e) if e.is_indeterminate() => last = Some(e),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(matches!(last, Some(Error::Unavailable(_))), "{last:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    let t = Instant::now();
    let r = lock.try_lock_for(Duration::from_millis(300)).await;
    assert!(matches!(r, Err(Error::Unavailable(_))), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(2));

    // When the server comes back, the client reconnects by itself.
    srv.restart().unwrap();
    let g = within("lock after restart", lock.lock()).await.unwrap();
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_reply_is_indeterminate_and_nothing_stays_held() {
    let srv = server();
    let proxy = proxied(&srv).await;
    let c = fast_client(&proxy.url(), 300).await;
    let lock = Lock::new(&c, "dropped");
    proxy.drop_reply_matching(
        lock.key().unwrap().as_bytes(),
        1,
        Duration::from_millis(800),
    );
    let r = lock.try_lock().await;
    assert!(matches!(r, Err(Error::Indeterminate(_))), "{r:?}");
    // The acquire ran on the server; the releaser takes it back once Redis answers again.
    assert!(c.releases_settled(HANG).await);
    assert!(
        !exists(&srv, lock.key().unwrap()).await,
        "the possible grant stayed held"
    );
    // And the lock works afterwards.
    let g = within("lock", lock.lock()).await.unwrap();
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_server_makes_waiting_lock_ride_it_out() {
    let srv = server();
    let c = fast_client(&srv.url(), 300).await;
    let lock = Lock::new(&c, "paused");
    srv.pause();
    let l2 = lock.clone();
    let task = tokio::spawn(async move { l2.lock().await });
    tokio::time::sleep(Duration::from_millis(800)).await; // several command timeouts pass
    srv.resume();
    let g = within("lock after resume", task).await.unwrap().unwrap();
    assert_eq!(
        lock.hold_count().await.unwrap(),
        1,
        "retries of one attempt count once"
    );
    g.unlock().await.unwrap();
    assert!(c.releases_settled(HANG).await);
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_renewals_mark_the_hold_lost_when_validity_runs_out() {
    let srv = server();
    let proxy = proxied(&srv).await;
    let c = deadbolt_testkit::client_with(&proxy.url(), |b| {
        b.watchdog_timeout(Duration::from_millis(600))
            .command_timeout(Duration::from_millis(200))
    })
    .await;
    let lock = Lock::new(&c, "silent");
    let g = lock.lock().await.unwrap();
    let lost = g.lost();
    let cut = Instant::now();
    proxy.set_blackhole(true);
    assert_eq!(
        within("lost()", lost).await,
        deadbolt_core::LeaseState::Lost
    );
    let after = cut.elapsed();
    assert!(
        after <= Duration::from_millis(1200),
        "lost() fired {after:?} after the cut"
    );
    assert_eq!(g.state(), deadbolt_core::LeaseState::Lost);
    assert_eq!(g.valid_for(), Duration::ZERO);
    proxy.set_blackhole(false);
    drop(g);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconfirmed_unlock_is_unknown_and_finished_by_the_releaser() {
    let srv = server();
    let proxy = proxied(&srv).await;
    let c = fast_client(&proxy.url(), 300).await;
    let lock = Lock::new(&c, "unknown");
    let g = lock.lock().await.unwrap();
    let lost = g.lost();
    let sha = deadbolt_lock::scripts::LOCK_RELEASE.sha().to_string();
    proxy.drop_reply_matching(sha.as_bytes(), 1, Duration::from_millis(600));
    let r = g.unlock().await;
    assert!(matches!(r, Err(Error::Indeterminate(_))), "{r:?}");
    assert_eq!(
        within("lost()", lost).await,
        deadbolt_core::LeaseState::Unknown
    );
    assert!(c.releases_settled(HANG).await);
    assert!(!exists(&srv, lock.key().unwrap()).await);
}

/// A waiter whose tries go unanswered past the command timeout (replies
/// slower than it, as from an overloaded server) backs off: its tries grow
/// apart. Each timed-out try still runs on the server, so a waiter that
/// retried every half second added to the queue that made it time out: a
/// flash sale of 100,000 buyers on 50 clients with a 1 s timeout sent
/// 215,599 commands a second while they waited (crates/failures).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tries_that_time_out_back_off() {
    let srv = server();
    let holder = client(&srv.url()).await;
    let g = Lock::new(&holder, "overloaded")
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let proxy = proxied(&srv).await;
    let c = fast_client(&proxy.url(), 200).await;
    let lock = Lock::new(&c, "overloaded");
    proxy.set_reply_delay(Duration::from_millis(300));
    let before = srv.evalsha_calls().await;
    let r = lock.try_lock_for(Duration::from_secs(8)).await;
    assert!(r.is_err(), "{r:?}");
    let tries = srv.evalsha_calls().await - before;
    // Tries at about 0.2, 0.6, 1.4, 3 and 6.2 s (each pause doubling
    // from the 200 ms the first one waited, with jitter), and the
    // releases of the attempt in doubt: 8 s of retrying every 0.2 to
    // 0.7 s were 12 tries or more.
    assert!(tries <= 9, "{tries} scripts in 8 s");
    proxy.set_reply_delay(Duration::ZERO);
    assert!(c.releases_settled(HANG).await);
    g.unlock().await.unwrap();
}

/// Under `maxmemory` with noeviction the acquire fails with the
/// server's OOM error, not a `WrongType` for the fencing key, and writes
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_memory_is_reported_as_it_is() {
    let srv = server();
    let c = client(&srv.url()).await;
    let _: () = cmd(&srv, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]).await;
    let _: () = cmd(&srv, &["CONFIG", "SET", "maxmemory", "1"]).await;
    let lock = Lock::new(&c, "oom");
    let err = lock.try_lock().await.unwrap_err();
    let _: () = cmd(&srv, &["CONFIG", "SET", "maxmemory", "0"]).await;
    assert!(
        matches!(&err, Error::Redis(e) if e.code() == Some("OOM")),
        "{err:?}"
    );
    assert!(err.to_string().contains("OOM"), "{err}");
    assert_eq!(dbsize(&srv).await, 0);
    // And it works once memory is there again.
    lock.try_lock()
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();
}

/// A fencing counter at or beyond 2^53, or not an integer, is
/// refused by name and left as it was; tokens never repeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_fencing_counter_is_refused() {
    let srv = server();
    let c = client(&srv.url()).await;
    let lock = Lock::new(&c, "fence");
    let fence = c.keys("lock", "fence").unwrap().fence().to_string();
    for v in [
        "9007199254740991",
        "9007199254740993",
        "1e300",
        "inf",
        "nan",
        "12abc",
        "",
    ] {
        let _: () = cmd(&srv, &["SET", &fence, v]).await;
        let err = lock.try_lock().await.unwrap_err();
        assert!(
            matches!(&err, Error::BadValue { key, .. } if *key == fence),
            "{v:?}: {err:?}"
        );
        let now: String = cmd(&srv, &["GET", &fence]).await;
        assert_eq!(now, v, "the counter was changed");
        assert!(!exists(&srv, lock.key().unwrap()).await);
        assert_eq!(lock.inspect().await.unwrap().fence, None);
    }
    // Near the top of the range tokens still rise by one.
    let _: () = cmd(&srv, &["SET", &fence, "9007199254740989"]).await;
    for want in [9007199254740990, 9007199254740991] {
        let g = lock.try_lock().await.unwrap().unwrap();
        assert_eq!(g.fencing_token(), want);
        g.unlock().await.unwrap();
    }
    // 2^53 - 1 was the last token a Lua number carries exactly.
    let err = lock.try_lock().await.unwrap_err();
    assert!(matches!(err, Error::BadValue { .. }), "{err:?}");
}

/// Whatever the name, every key and channel of one lock share
/// one hash tag (checked with CLUSTER KEYSLOT on a cluster-enabled server),
/// and such names work end to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_of_a_lock_shares_one_slot() {
    let cluster = RedisServer::builder()
        .arg("cluster-enabled", "yes")
        .arg("cluster-config-file", "nodes.conf")
        .start()
        .expect("start redis-server");
    let names = [
        "}", "}x", "x}", "a}b{c}", "{", "{x}", "%7D", "%", "plain", "{}", "}{",
    ];
    let mut seen = std::collections::HashSet::new();
    for name in names {
        for kind in ["lock", "fair"] {
            let k = Keys::new("deadbolt", kind, name).unwrap();
            assert!(seen.insert(k.main().to_string()), "{name}: keys collide");
            let all = [
                k.main().to_string(),
                k.fence().to_string(),
                k.sub("q"),
                k.sub("qo"),
                k.sub("alive"),
                k.sub("seq"),
                k.channel(),
                format!("{}:ch:0123abcd", k.main()),
            ];
            let mut slots: Vec<i64> = Vec::new();
            for key in &all {
                let slot: i64 = cmd(&cluster, &["CLUSTER", "KEYSLOT", key]).await;
                // Core's own slot function (batching per slot) agrees.
                assert_eq!(i64::from(deadbolt_core::hash_slot(key)), slot, "{key}");
                slots.push(slot);
            }
            assert!(
                slots.iter().all(|s| *s == slots[0]),
                "{name:?}/{kind}: slots {slots:?} for {all:?}"
            );
        }
    }
    let srv = server();
    let c = client(&srv.url()).await;
    for name in names {
        let a = Lock::new(&c, name);
        let g = a.lock().await.unwrap();
        assert!(Lock::new(&c, name).try_lock().await.unwrap().is_none());
        g.unlock().await.unwrap();
    }
}

/// Waits that overflow an `Instant` saturate instead of
/// panicking; leases beyond what Redis takes are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_durations_do_not_panic() {
    let srv = server();
    let c = deadbolt_testkit::client_with(&srv.url(), |b| {
        b.release_timeout(Duration::MAX)
            .command_timeout(Duration::MAX)
    })
    .await;
    let a = Lock::new(&c, "max");
    let g = a.try_lock_for(Duration::MAX).await.unwrap().unwrap();
    let b = Lock::new(&c, "max");
    let waiter = tokio::spawn(async move { b.try_lock_for(Duration::MAX).await });
    tokio::task::yield_now().await;
    g.unlock().await.unwrap();
    let g = within("waiter", waiter).await.unwrap().unwrap().unwrap();
    assert!(matches!(
        a.lock_with_lease(Duration::MAX).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        a.try_lock_with(Duration::MAX, Duration::MAX).await,
        Err(Error::InvalidArgument(_))
    ));
    drop(g); // the releaser's deadline saturates too
    assert!(c.releases_settled(HANG).await);
    c.shutdown().await;
}

/// An ACL user without permission for the lock's channel:
/// waiting calls fail at once with a typed error naming the channel (not
/// after their whole wait), and a release it may not publish is refused
/// with the hold untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_subscription_fails_waiters_promptly() {
    let srv = server();
    let _: () = cmd(
        &srv,
        &[
            "ACL",
            "SETUSER",
            "nochan",
            "on",
            ">pw",
            "~*",
            "resetchannels",
            "+@all",
        ],
    )
    .await;
    let url = format!("redis://nochan:pw@127.0.0.1:{}/", srv.port());
    let limited = client(&url).await;
    let full = client(&srv.url()).await;
    let holder = Lock::new(&full, "acl");
    let g = holder.lock().await.unwrap();
    let l = Lock::new(&limited, "acl");
    let started = std::time::Instant::now();
    let err = within("refused wait", l.try_lock_for(Duration::from_secs(20)))
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    let channel = format!("{}:ch", holder.key().unwrap());
    // The variant and the channel say it; the server's own words (Redis
    // and Valkey word the refusal differently) are passed on, not read.
    assert!(
        matches!(&err, Error::SubscribeRefused { channel: c, reason } if *c == channel && !reason.is_empty()),
        "{err:?}"
    );
    assert!(err.to_string().contains(&channel), "{err}");
    let err = within("refused lock()", l.lock()).await.unwrap_err();
    assert!(matches!(err, Error::SubscribeRefused { .. }), "{err:?}");
    g.unlock().await.unwrap();
    // try_lock needs no channel.
    let mine = l.try_lock().await.unwrap().unwrap();
    // A waiter (of the full client) marks the hold: its unlock must
    // publish, which is refused, and the hold stays as it was. (The refusal
    // is the server's error reply, whatever its wording.)
    let waiting = tokio::spawn({
        let holder = holder.clone();
        async move { holder.lock().await.map(drop) }
    });
    wait_for_waiters(&full, 1).await;
    let err = mine.unlock().await.unwrap_err();
    assert!(matches!(&err, Error::Redis(_)), "{err:?}");
    assert!(holder.is_locked().await.unwrap());
    assert!(!waiting.is_finished(), "the waiter was not woken");
    waiting.abort();
    // A hold nobody waited for sends no message at its release: the
    // limited user's unlock of it goes through.
    let alone = Lock::new(&limited, "acl-alone");
    alone
        .try_lock()
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();
    assert!(!alone.is_locked().await.unwrap());
}

/// Shutdown releases the holds a client still has, guards then
/// read `Released`, and guards dropped afterwards do nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_holds() {
    let srv = server();
    let c = client(&srv.url()).await;
    let a = Lock::new(&c, "s1").lock().await.unwrap();
    let b = Lock::new(&c, "s2")
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let other = client(&srv.url()).await;
    let waiter = Lock::new(&c, "s3");
    let g3 = Lock::new(&other, "s3").lock().await.unwrap();
    let w = tokio::spawn(async move { waiter.lock().await.map(|_| ()) });
    wait_for_waiters(&c, 1).await;
    c.shutdown().await;
    assert!(matches!(
        within("waiter", w).await.unwrap(),
        Err(Error::Shutdown)
    ));
    assert_eq!(a.state(), LeaseState::Released);
    assert_eq!(b.state(), LeaseState::Released);
    assert_eq!(
        dbsize_without_fences(&srv).await,
        1,
        "only s3's hold is left"
    );
    assert!(matches!(a.unlock().await, Err(Error::Shutdown)));
    drop(b);
    assert!(matches!(
        Lock::new(&c, "s4").try_lock().await,
        Err(Error::Shutdown)
    ));
    g3.unlock().await.unwrap();
}

async fn wait_for_waiters(c: &Client, n: usize) {
    within("waiters", async {
        while c.waiters() != n {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
}

/// Keys other than bookkeeping that outlives holds on purpose: the hash
/// slots' fencing counters (no TTL, one per slot) and, under a TTL, the
/// queue of waiting clients (the longest lease its waiters asked for).
async fn dbsize_without_fences(srv: &RedisServer) -> usize {
    let keys: Vec<String> = cmd(srv, &["KEYS", "*"]).await;
    keys.iter()
        .filter(|k| !k.ends_with(":fence") && !k.ends_with(":waiters"))
        .count()
}

/// Messages say what happened once, with the immediate cause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_messages_name_their_cause_once() {
    let srv = server();
    let c = client(&srv.url()).await;
    let err = Lock::new(&c, "").try_lock().await.unwrap_err();
    assert_eq!(err.to_string(), "invalid argument: name is empty");

    let port = deadbolt_testkit::free_port();
    let err = Client::connect(&format!("redis://127.0.0.1:{port}/"))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(err.is_unavailable(), "{err:?}");
    assert!(text.to_lowercase().contains("refused"), "{text}");

    let err = Client::connect("http://127.0.0.1/").await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(text.contains("redis://"), "{text}");

    // A timeout through a proxy that delays every reply.
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let slow = fast_client(&proxy.url(), 100).await;
    proxy.set_reply_delay(Duration::from_millis(400));
    let err = Lock::new(&slow, "t").try_lock().await.unwrap_err();
    let text = err.to_string();
    assert!(err.is_indeterminate(), "{err:?}");
    assert!(!has_repeat(&text), "{text}");
    assert_eq!(err.report(), text);
}

/// True when some `: `-separated part of `s` appears twice in a row.
fn has_repeat(s: &str) -> bool {
    let parts: Vec<&str> = s.split(": ").collect();
    parts.windows(2).any(|w| w[0].trim() == w[1].trim())
}

/// The lock's bookkeeping key, the queue of waiting clients, of another
/// type than deadbolt leaves it: the lock still works and waiters are
/// still woken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_odd_queue_key_does_not_block_the_lock() {
    let srv = server();
    let a = client(&srv.url()).await;
    let b = client(&srv.url()).await;
    let _: i64 = cmd(&srv, &["LPUSH", "deadbolt:{odd}:lock:waiters", "x"]).await;
    let g = Lock::new(&a, "odd").lock().await.unwrap();
    let lb = Lock::new(&b, "odd");
    let waiter = tokio::spawn(async move { lb.lock().await.map(|g| g.fencing_token()) });
    wait_for_waiters(&b, 1).await;
    g.unlock().await.unwrap();
    within("the waiter", waiter).await.unwrap().unwrap();
}

/// A grant whose reply was lost, and whose compensating release ran before
/// it (the request sat in a paused server's buffer on a connection the
/// client had given up: found by the torture test), leaves a hold recorded
/// for a handle that does not have it. The handle's next acquire must not
/// re-enter it: that would count on top of a hold nobody releases, every
/// later re-entry would keep it alive, and nobody else would ever get the
/// lock. The stale hold is replaced by a fresh grant; real re-entries are
/// unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_hold_of_the_own_handle_is_replaced_not_re_entered() {
    let srv = server();
    let c = client(&srv.url()).await;
    let other = client(&srv.url()).await;
    let lock = Lock::new(&c, "stale");
    let key = lock.key().unwrap().to_string();
    let owner = lock.owner().to_string();
    let _: () = cmd(
        &srv,
        &["HSET", &key, "o", &owner, "t", "5", "n", "1", "a:gone", "1"],
    )
    .await;
    let _: () = cmd(&srv, &["PEXPIRE", &key, "30000"]).await;
    for acquire in ["try_lock", "lock"] {
        let g = match acquire {
            "try_lock" => lock.try_lock().await.unwrap().expect("granted"),
            _ => lock.lock().await.unwrap(),
        };
        assert!(
            g.fencing_token() > 5,
            "{acquire}: re-entered the stale hold (token {})",
            g.fencing_token()
        );
        g.unlock().await.unwrap();
        assert!(!exists(&srv, &key).await, "{acquire}: a count was left");
        let og = Lock::new(&other, "stale").try_lock().await.unwrap();
        og.expect("free for another handle").unlock().await.unwrap();
        let _: () = cmd(
            &srv,
            &["HSET", &key, "o", &owner, "t", "5", "n", "1", "a:gone", "1"],
        )
        .await;
        let _: () = cmd(&srv, &["PEXPIRE", &key, "30000"]).await;
    }
    let _: () = cmd(&srv, &["DEL", &key]).await;
    // A real re-entry (the handle holds the lock) still counts on the hold.
    let g1 = lock.lock().await.unwrap();
    let g2 = lock.lock().await.unwrap();
    assert_eq!(g1.fencing_token(), g2.fencing_token());
    g2.unlock().await.unwrap();
    assert!(Lock::new(&other, "stale")
        .try_lock()
        .await
        .unwrap()
        .is_none());
    g1.unlock().await.unwrap();
    assert!(!exists(&srv, &key).await);
}

/// A hold of the handle's owner recorded for an attempt newer than the
/// acquire's is a clone's fresh hold that overtook this acquire on its way
/// to the server (its call sat behind a NOSCRIPT reload, say): it is
/// re-entered, not taken for a stale hold and replaced, even though the
/// handle knew of no hold and no other acquire when it sent the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_of_a_newer_attempt_of_the_own_handle_is_re_entered() {
    let srv = server();
    let c = client(&srv.url()).await;
    let lock = Lock::new(&c, "newer");
    let key = lock.key().unwrap().to_string();
    let owner = lock.owner().to_string();
    // The attempt numbers of this process are far below this one.
    let newer = "1000000000000";
    let field = format!("a:00000000000000000000000as{newer}");
    let _: () = cmd(
        &srv,
        &[
            "HSET", &key, "o", &owner, "t", "5", "n", "1", &field, "1", "s", newer,
        ],
    )
    .await;
    let _: () = cmd(&srv, &["PEXPIRE", &key, "30000"]).await;
    let g = lock.lock().await.unwrap();
    assert_eq!(g.fencing_token(), 5, "the newer hold was replaced");
    g.unlock().await.unwrap();
    let n: Option<String> = cmd(&srv, &["HGET", &key, "n"]).await;
    assert_eq!(n.as_deref(), Some("1"), "the newer hold's count changed");
    let _: () = cmd(&srv, &["DEL", &key]).await;
}

/// Clones of one handle are one owner: their acquires re-enter each other's
/// holds, also when they race (neither may take the other's fresh hold for
/// a stale one and replace it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_clones_of_one_handle_never_replace_each_others_holds() {
    let srv = server();
    let c = client(&srv.url()).await;
    let lock = Lock::new(&c, "clones");
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let lock = lock.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..300 {
                let g = lock.lock().await.unwrap();
                if let Err(e) = g.unlock().await {
                    panic!("round {i}: {e}");
                }
            }
        }));
    }
    for t in tasks {
        within("clones", t).await.unwrap();
    }
    assert!(!exists(&srv, lock.key().unwrap()).await);
}
