//! FairLock faults found from outside: late and forged grants,
//! shutdown, per-waiter claim leases, keys of another type. Real
//! redis-server processes; faults through deadbolt-testkit.

use deadbolt_core::Acquire as _;
use deadbolt_core::HoldGuard as _;
use std::time::{Duration, Instant};

use deadbolt_core::{Client, Error, LeaseState};
use deadbolt_fair::FairLock;
use deadbolt_testkit::support::{cmd, fill_memory, server, until, within};
use deadbolt_testkit::{FaultProxy, RedisServer};

async fn client(url: &str, wt: Duration) -> Client {
    deadbolt_testkit::client_with(url, |b| b.waiter_timeout(wt)).await
}

async fn queue(srv: &RedisServer, lock: &FairLock) -> Vec<String> {
    cmd(
        srv,
        &["ZRANGE", &format!("{}:q", lock.key().unwrap()), "0", "-1"],
    )
    .await
}

/// Wait until the server's queue has `n` entries (no event exists for this;
/// a short poll of the server's state).
async fn until_queued(srv: &RedisServer, lock: &FairLock, n: usize) {
    until("queue length", || async {
        queue(srv, lock).await.len() == n
    })
    .await;
}

/// A waiter whose subscriber connection is slow lost its claim
/// (the lease ran out, the next waiter took the lock) and re-enqueued; the
/// old hand-off message then arrives. It must not be taken as a grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_grant_for_a_lost_queue_entry_is_refused() {
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let h = client(&srv.url(), Duration::from_secs(5)).await;
    // X: claim lease 500 ms (its own waiter_timeout); its connections are
    // the proxy's 0 (commands) and 1 (subscriber).
    let x = client(&proxy.url(), Duration::from_millis(500)).await;
    // Y's client heart-beats every 100 ms, so it takes the lock soon after
    // X's claim runs out.
    let y = client(&srv.url(), Duration::from_millis(300)).await;
    let holder = FairLock::new(&h, "late");
    let xl = FairLock::new(&x, "late");
    let yl = FairLock::new(&y, "late");
    // H's lease ends 1.3 s from now: X's own timer retries then (unlock +
    // 1.2 s), after its claim has run out (unlock + 0.5 s) and shortly
    // before the late message lands (unlock + 1.5 s), so the message is
    // within a claim lease of X's new entry.
    let g = holder
        .lock_with_lease(Duration::from_millis(1300))
        .await
        .unwrap();
    let mut xt = tokio::spawn(async move { xl.lock().await.map(|g| (g.fencing_token(), g)) });
    until_queued(&srv, &holder, 1).await;
    let yt = tokio::spawn(async move { yl.lock().await });
    until_queued(&srv, &holder, 2).await;
    assert!(proxy.set_connection_reply_delay(1, Duration::from_millis(1500)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    g.unlock().await.unwrap();
    let yg = within("Y acquires after X's claim runs out", yt)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(yg.state(), LeaseState::Active);
    // The late grant lands 1.5 s after the unlock; X must still be waiting
    // for as long as Y holds (no event marks "a message was ignored": the
    // window is the assertion).
    let early = tokio::time::timeout(Duration::from_millis(2500), &mut xt).await;
    assert!(
        early.is_err(),
        "X returned a guard while Y holds: {:?}",
        early.map(|r| r.unwrap().map(|(t, _)| t))
    );
    assert!(yl_is_held(&srv, &holder, &y).await);
    proxy.set_connection_reply_delay(1, Duration::ZERO);
    let ytoken = yg.fencing_token();
    yg.unlock().await.unwrap();
    let (xtoken, xg) = within("X acquires after Y", xt).await.unwrap().unwrap();
    assert!(xtoken > ytoken);
    xg.unlock().await.unwrap();
}

async fn yl_is_held(srv: &RedisServer, lock: &FairLock, y: &Client) -> bool {
    let owner: Option<String> = cmd(srv, &["HGET", lock.key().unwrap(), "o"]).await;
    owner.is_some_and(|o| o.starts_with(y.id()))
}

/// A grant published by someone who cannot read the queue
/// (and so does not know the entry's secret) is not taken; a forged hint
/// with an absurd lease does not crash the client either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_grant_and_absurd_hint_are_ignored() {
    let srv = server();
    let h = client(&srv.url(), Duration::from_secs(5)).await;
    let w = client(&srv.url(), Duration::from_secs(5)).await;
    let holder = FairLock::new(&h, "forged");
    let g = holder.lock().await.unwrap();
    let wl = FairLock::new(&w, "forged");
    let wt = tokio::spawn(async move {
        let g = wl.lock().await.unwrap();
        (Instant::now(), g)
    });
    until_queued(&srv, &holder, 1).await;
    let attempt = queue(&srv, &holder).await.remove(0);
    let channel = format!("{}:ch:{}", holder.key().unwrap(), w.id());
    for msg in [
        format!("g:{attempt} 123 60000 1"),
        format!("g:{attempt} 123 60000"),
        format!("t:{attempt} 18446744073709551615"),
        format!("g:{attempt} 123 18446744073709551615 99"),
    ] {
        let n: i64 = cmd(&srv, &["PUBLISH", &channel, &msg]).await;
        assert_eq!(n, 1, "the waiter's client listens on {channel}");
    }
    // Still waiting: a real grant comes only with the unlock.
    let unlocked_at = Instant::now();
    let htoken = g.fencing_token();
    g.unlock().await.unwrap();
    let (got_at, wg) = within("waiter acquires after the unlock", wt)
        .await
        .unwrap();
    assert!(got_at >= unlocked_at, "took a forged grant");
    assert_ne!(wg.fencing_token(), 123);
    assert!(wg.fencing_token() > htoken);
    wg.unlock().await.unwrap();
}

/// A waiter woken by shutdown leaves the queue, so the next
/// release goes straight to the waiter behind it; holds still alive at
/// shutdown are released and read `Released`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_leaves_the_queue_and_releases_holds() {
    let srv = server();
    let a = client(&srv.url(), Duration::from_secs(5)).await;
    let b = client(&srv.url(), Duration::from_secs(5)).await;
    let c = client(&srv.url(), Duration::from_secs(5)).await;
    let al = FairLock::new(&a, "shut");
    let g = al.lock().await.unwrap();
    let bl = FairLock::new(&b, "shut");
    let bt = tokio::spawn(async move { bl.lock().await.map(|_| ()) });
    until_queued(&srv, &al, 1).await;
    let cl = FairLock::new(&c, "shut");
    let ct = tokio::spawn(async move { cl.lock().await });
    until_queued(&srv, &al, 2).await;

    // B also holds another fair lock and a fixed-lease one.
    let other = FairLock::new(&b, "shut-other").lock().await.unwrap();
    let fixed = FairLock::new(&b, "shut-fixed")
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let started = Instant::now();
    b.shutdown().await;
    let bound = b.config().command_timeout * 3 + Duration::from_secs(1);
    assert!(
        started.elapsed() <= bound,
        "shutdown took {:?}",
        started.elapsed()
    );
    assert!(matches!(
        within("B's waiter", bt).await.unwrap(),
        Err(Error::Shutdown)
    ));
    assert_eq!(queue(&srv, &al).await.len(), 1, "B's entry left the queue");
    assert_eq!(other.state(), LeaseState::Released);
    assert_eq!(fixed.state(), LeaseState::Released);
    let n: i64 = cmd(&srv, &["EXISTS", other_key(&al, "shut-other").as_str()]).await;
    assert_eq!(n, 0, "B's hold was released on the server");
    drop(other);
    drop(fixed);

    let unlocked = Instant::now();
    g.unlock().await.unwrap();
    let cg = within("C acquires", ct).await.unwrap().unwrap();
    // Without B's entry in the way the hand-off is immediate; with it, C
    // would wait out B's claim (waiter_timeout, 5 s).
    assert!(
        unlocked.elapsed() < Duration::from_secs(2),
        "C waited {:?}",
        unlocked.elapsed()
    );
    cg.unlock().await.unwrap();
}

fn other_key(lock: &FairLock, name: &str) -> String {
    lock.key()
        .unwrap()
        .replace("{shut}", &format!("{{{name}}}"))
}

/// The claim lease of a handed-off lock is the waiter's own
/// waiter_timeout, not the releasing client's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_lease_follows_the_waiters_own_waiter_timeout() {
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let h = client(&srv.url(), Duration::from_secs(5)).await;
    let k = client(&proxy.url(), Duration::from_secs(1)).await;
    let w = client(&srv.url(), Duration::from_secs(1)).await;
    let hl = FairLock::new(&h, "claim");
    let g = hl.lock().await.unwrap();
    let kl = FairLock::new(&k, "claim");
    let _kt = tokio::spawn(async move { kl.lock().await.map(|_| ()) });
    until_queued(&srv, &hl, 1).await;
    let wl = FairLock::new(&w, "claim");
    let wt = tokio::spawn(async move { wl.lock().await });
    until_queued(&srv, &hl, 2).await;
    // K dies (its liveness record still runs for up to 1 s): the hand-off
    // goes to K, which never picks it up.
    proxy.set_blackhole(true);
    let unlocked = Instant::now();
    g.unlock().await.unwrap();
    let wg = within("W acquires", wt).await.unwrap().unwrap();
    let waited = unlocked.elapsed();
    // K's claim is 1 s; with the releaser's 5 s it would be over 5 s.
    assert!(waited < Duration::from_millis(3500), "W waited {waited:?}");
    wg.unlock().await.unwrap();
}

/// Keys of another type are reported by name before anything
/// is written, by the acquire and by the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_type_queue_keys_write_nothing() {
    let srv = server();
    let a = client(&srv.url(), Duration::from_secs(5)).await;
    let b = client(&srv.url(), Duration::from_secs(5)).await;
    let al = FairLock::new(&a, "wt");
    let key = al.key().unwrap().to_string();
    let g = al.lock().await.unwrap();
    for suffix in ["qo", "alive", "seq", "q"] {
        let bad = format!("{key}:{suffix}");
        let _: () = cmd(&srv, &["RPUSH", &bad, "x"]).await;
        let bl = FairLock::new(&b, "wt");
        let err = bl
            .try_lock_for(Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::WrongType { key } if *key == bad),
            "{suffix}: {err:?}"
        );
        for other in ["q", "qo", "alive", "seq"] {
            let k = format!("{key}:{other}");
            if k != bad {
                let n: i64 = cmd(&srv, &["EXISTS", &k]).await;
                assert_eq!(n, 0, "{suffix}: {k} was written");
            }
        }
        let _: () = cmd(&srv, &["DEL", &bad]).await;
    }
    // A counter that is a string but no integer: refused by name.
    let seq = format!("{key}:seq");
    let _: () = cmd(&srv, &["SET", &seq, "x"]).await;
    let err = FairLock::new(&b, "wt")
        .try_lock_for(Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::BadValue { key, .. } if *key == seq),
        "{err:?}"
    );
    let _: () = cmd(&srv, &["DEL", &seq]).await;
    // The holder's release with a bad key: refused, the hold untouched.
    let bad = format!("{key}:alive");
    let _: () = cmd(&srv, &["RPUSH", &bad, "x"]).await;
    let err = al.force_unlock().await.unwrap_err();
    assert!(
        matches!(&err, Error::WrongType { key } if *key == bad),
        "{err:?}"
    );
    // A release with nobody queued never touches the liveness records (it
    // reads the queue and the hold, with no TYPE call): it is refused by a
    // bad key it does touch, the queue, by name and with the hold untouched.
    let _: () = cmd(&srv, &["DEL", &bad]).await;
    let bad = format!("{key}:q");
    let _: () = cmd(&srv, &["RPUSH", &bad, "x"]).await;
    let err = g.unlock().await.unwrap_err();
    assert!(
        matches!(&err, Error::WrongType { key } if *key == bad),
        "{err:?}"
    );
    let n: i64 = cmd(&srv, &["EXISTS", &key]).await;
    assert_eq!(n, 1, "the hold was not deleted by a refused release");
}

/// A fencing counter out of range, or of another type, is refused by
/// name, with nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_fencing_counter_is_refused() {
    let srv = server();
    let a = client(&srv.url(), Duration::from_secs(5)).await;
    let l = FairLock::new(&a, "fence");
    let fence = a.keys("fair", "fence").unwrap().fence().to_string();
    for v in ["9007199254740991", "1e300", "inf", "abc", "-5"] {
        let _: () = cmd(&srv, &["SET", &fence, v]).await;
        let err = l.try_lock().await.unwrap_err();
        assert!(
            matches!(&err, Error::BadValue { key, .. } if *key == fence),
            "{v}: {err:?}"
        );
        let now: String = cmd(&srv, &["GET", &fence]).await;
        assert_eq!(now, v);
        let n: i64 = cmd(&srv, &["EXISTS", l.key().unwrap()]).await;
        assert_eq!(n, 0);
    }
    // A counter of another type: refused by name, nothing written.
    let _: () = cmd(&srv, &["DEL", &fence]).await;
    let _: () = cmd(&srv, &["RPUSH", &fence, "x"]).await;
    let err = l.try_lock().await.unwrap_err();
    assert!(
        matches!(&err, Error::WrongType { key } if *key == fence),
        "{err:?}"
    );
    let n: i64 = cmd(&srv, &["EXISTS", l.key().unwrap()]).await;
    assert_eq!(n, 0);
    let kind: String = cmd(&srv, &["TYPE", &fence]).await;
    assert_eq!(kind, "list");
    let _: () = cmd(&srv, &["DEL", &fence]).await;
    let _: () = cmd(&srv, &["SET", &fence, "9007199254740000"]).await;
    let g = l.try_lock().await.unwrap().unwrap();
    assert_eq!(g.fencing_token(), 9007199254740001);
    g.unlock().await.unwrap();
}

/// Found by the torture test: a waiter queued for almost its
/// waiter_timeout got a hand-off whose local validity (counted from when it
/// queued) was nearly gone, and a guard that turned `Lost` at once while the
/// server still gave it the lock. It must get a guard worth having.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_hand_off_still_gives_a_useful_guard() {
    let srv = server();
    let wt = Duration::from_secs(1);
    let h = client(&srv.url(), wt).await;
    let w = client(&srv.url(), wt).await;
    let hl = FairLock::new(&h, "late-claim");
    let g = hl.lock().await.unwrap();
    let wl = FairLock::new(&w, "late-claim");
    let queued = Instant::now();
    let t = tokio::spawn(async move { wl.lock().await });
    until_queued(&srv, &hl, 1).await;
    // Hold for 90 % of the waiter's claim lease (its waiter_timeout).
    tokio::time::sleep_until((queued + wt * 9 / 10).into()).await;
    g.unlock().await.unwrap();
    let wg = within("waiter", t).await.unwrap().unwrap();
    assert!(
        wg.valid_for() > Duration::from_millis(250),
        "a guard with {:?} left",
        wg.valid_for()
    );
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(wg.state(), LeaseState::Active);
    wg.unlock().await.unwrap();
}

/// Found by the torture test: shutdown released a hold and only then marked
/// its guard; in between, the next waiter already held the lock while the
/// old guard still read `Active`. The guard must stop reading `Active`
/// before the release is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_retires_guards_before_releasing() {
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let a = client(&proxy.url(), Duration::from_secs(5)).await;
    let b = client(&srv.url(), Duration::from_secs(5)).await;
    let al = FairLock::new(&a, "retire");
    let g = al.lock().await.unwrap();
    let bl = FairLock::new(&b, "retire");
    let bt = tokio::spawn(async move { bl.lock().await });
    until_queued(&srv, &al, 1).await;
    // A's replies come late: its release runs on the server at once, the
    // hand-off reaches B, and A hears back only later.
    proxy.set_reply_delay(Duration::from_millis(300));
    let shut = tokio::spawn(async move { a.shutdown().await });
    let bg = within("B acquires", bt).await.unwrap().unwrap();
    assert_ne!(
        g.state(),
        LeaseState::Active,
        "the old guard still reads Active while B holds the lock"
    );
    within("shutdown", shut).await.unwrap();
    bg.unlock().await.unwrap();
}

/// The queue's keys always carry a TTL (a waiter's touch is skipped while
/// the queue has half its life left): also when the queue empties and is
/// created again beside the older `alive` and `seq`; and once nobody waits
/// they all expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_keys_always_expire() {
    let srv = server();
    let wt = Duration::from_millis(400);
    let a = client(&srv.url(), wt).await;
    let b = client(&srv.url(), wt).await;
    let al = FairLock::new(&a, "ttl");
    let bl = FairLock::new(&b, "ttl");
    let key = al.key().unwrap().to_string();
    let keys: Vec<String> = ["q", "qo", "alive", "seq"]
        .iter()
        .map(|s| format!("{key}:{s}"))
        .collect();
    let all_expire = || async {
        for k in &keys {
            let pttl: i64 = cmd(&srv, &["PTTL", k]).await;
            assert!(pttl > 0, "{k} has PTTL {pttl}");
        }
    };
    let g = al.lock().await.unwrap();
    let bt = tokio::spawn(async move {
        let g = bl.lock().await.unwrap();
        (bl, g)
    });
    until_queued(&srv, &al, 1).await;
    all_expire().await;
    // The hand-off empties the queue (q and qo go, alive and seq stay)...
    g.unlock().await.unwrap();
    let (bl, bg) = within("B acquires", bt).await.unwrap();
    assert!(queue(&srv, &al).await.is_empty());
    // ...and A queues again: q and qo are created afresh.
    let at = tokio::spawn(async move { al.lock().await.map(|g| (al, g)) });
    until_queued(&srv, &bl, 1).await;
    all_expire().await;
    bg.unlock().await.unwrap();
    let (al, ag) = within("A acquires", at).await.unwrap().unwrap();
    ag.unlock().await.unwrap();
    drop((al, bl));
    // Nobody waits: every queue key is gone within 3 waiter timeouts.
    until("queue keys expire", || async {
        let n: i64 = cmd(&srv, &["EXISTS", &keys[0], &keys[1], &keys[2], &keys[3]]).await;
        n == 0
    })
    .await;
}

/// A stale hold of the own handle (see the lock's test of the same name)
/// is not re-entered: it is dropped, the lock goes to the head of the
/// queue, and the handle waits behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_hold_of_the_own_handle_is_replaced_not_re_entered() {
    let srv = server();
    let a = client(&srv.url(), Duration::from_secs(5)).await;
    let b = client(&srv.url(), Duration::from_secs(5)).await;
    let al = FairLock::new(&a, "stale");
    let key = al.key().unwrap().to_string();
    let owner = al.owner().to_string();
    let _: () = cmd(
        &srv,
        &["HSET", &key, "o", &owner, "t", "5", "n", "1", "a:gone", "1"],
    )
    .await;
    let _: () = cmd(&srv, &["PEXPIRE", &key, "30000"]).await;
    // B waits: the stale hold looks held.
    let bl = FairLock::new(&b, "stale");
    let bt = tokio::spawn(async move { bl.lock().await });
    until_queued(&srv, &al, 1).await;
    // A's acquire drops the stale hold; B, first in line, gets the lock.
    let at = tokio::spawn(async move { al.lock().await.map(|g| (al, g)) });
    let bg = within("B acquires", bt).await.unwrap().unwrap();
    assert!(bg.fencing_token() > 5);
    bg.unlock().await.unwrap();
    let (al, ag) = within("A acquires", at).await.unwrap().unwrap();
    assert!(ag.fencing_token() > 5);
    ag.unlock().await.unwrap();
    let n: i64 = cmd(&srv, &["EXISTS", al.key().unwrap()]).await;
    assert_eq!(n, 0, "a count was left");
}

/// A hand-off arrives under a short claim and is extended in the
/// background a third into the claim. Holds unlocked before then (most,
/// under contention) must not leave a task per grant sleeping until that
/// time: a busy lock would pile up thousands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_handed_off_holds_leave_no_tasks_behind() {
    let srv = server();
    let a = client(&srv.url(), Duration::from_secs(6)).await;
    let b = client(&srv.url(), Duration::from_secs(6)).await;
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    let mut tasks = Vec::new();
    for c in [&a, &b] {
        let lock = FairLock::new(c, "claims");
        tasks.push(tokio::spawn(async move {
            for _ in 0..100 {
                lock.lock().await.unwrap().unlock().await.unwrap();
            }
        }));
    }
    for t in tasks {
        within("lock loops", t).await.unwrap();
    }
    // The claim is 6 s (the waiters' waiter_timeout, under the 30 s
    // watchdog lease they asked for): a task sleeping until a third into it
    // would still be alive.
    let left = metrics.num_alive_tasks().saturating_sub(before);
    assert!(left < 20, "{left} tasks left behind by 200 short holds");
}

/// A `force_unlock` that hands the lock to the queued waiter while Redis is
/// out of memory (maxmemory, every write that adds memory refused) either
/// makes the whole hand-off or none of it: the waiter is never told it
/// holds the lock while the holder's hold stays (before the fix the grant's
/// message went out, then its first write was refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_under_maxmemory_is_made_in_full_or_not_at_all() {
    let srv = server();
    let h = client(&srv.url(), Duration::from_secs(3)).await;
    let w = client(&srv.url(), Duration::from_secs(3)).await;
    let lock = FairLock::new(&h, "oom-force");
    let g = lock.lock().await.unwrap();
    let lw = FairLock::new(&w, "oom-force");
    let waiter = tokio::spawn(async move {
        let got = lw.lock().await;
        (Instant::now(), got)
    });
    until_queued(&srv, &lock, 1).await;
    fill_memory(&srv).await;
    let forced = FairLock::new(&h, "oom-force").force_unlock().await;
    let () = cmd(&srv, &["CONFIG", "SET", "maxmemory", "0"]).await;
    match forced {
        Ok(_) => {
            // Handed on: the waiter holds, under the hold's token, and the
            // old holder holds nothing.
            let (_, got) = within("the waiter", waiter).await.unwrap();
            let wg = got.unwrap();
            let token: String = cmd(&srv, &["HGET", lock.key().unwrap(), "t"]).await;
            assert_eq!(token, wg.fencing_token().to_string());
            assert!(matches!(g.unlock().await, Err(Error::NotHeld)));
            wg.unlock().await.unwrap();
        }
        Err(_) => {
            assert!(lock.is_held().await.unwrap(), "the holder still holds it");
            let unlocked = Instant::now();
            g.unlock().await.unwrap();
            let (got_at, got) = within("the waiter", waiter).await.unwrap();
            assert!(
                got_at > unlocked,
                "the waiter held the lock before the holder let it go"
            );
            got.unwrap().unlock().await.unwrap();
        }
    }
}

/// A heartbeat for a lock nobody queues on writes nothing: a round sent
/// before the client's last waiter was served, or before a force-unlock,
/// would otherwise make the liveness key anew. With a waiter queued it
/// refreshes the client, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_for_an_empty_queue_writes_nothing() {
    use deadbolt_core::primitive::ScriptCall;
    let srv = server();
    let c = client(&srv.url(), Duration::from_secs(5)).await;
    let keys = deadbolt_fair::fair_keys(&c.keys(deadbolt_fair::KIND, "hb").unwrap());
    let beat = ScriptCall::new(
        &deadbolt_fair::scripts::FAIR_HEARTBEAT,
        keys.clone(),
        vec![c.id().to_string(), "5000".into()],
    );
    assert_eq!(c.run::<i64>(&beat).await.unwrap(), 0);
    let dbsize = || async { cmd::<i64>(&srv, &["DBSIZE"]).await };
    assert_eq!(dbsize().await, 0, "a heartbeat of a free lock wrote");
    let l = FairLock::new(&c, "hb");
    let g = l.lock().await.unwrap();
    let before = dbsize().await;
    assert_eq!(c.run::<i64>(&beat).await.unwrap(), 0);
    assert_eq!(
        dbsize().await,
        before,
        "a heartbeat with nobody queued wrote"
    );
    let w = client(&srv.url(), Duration::from_secs(5)).await;
    let lw = FairLock::new(&w, "hb");
    let waiting = tokio::spawn(async move { lw.lock().await.map(|g| (lw, g)) });
    until("queued", || async { !queue(&srv, &l).await.is_empty() }).await;
    assert_eq!(c.run::<i64>(&beat).await.unwrap(), 1);
    g.unlock().await.unwrap();
    let (_lw, wg) = within("the waiter", waiting).await.unwrap().unwrap();
    wg.unlock().await.unwrap();
}
