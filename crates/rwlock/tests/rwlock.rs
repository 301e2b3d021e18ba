//! RwLock against real redis-server processes.

use deadbolt_core::Acquire as _;
use deadbolt_core::HoldGuard as _;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadbolt_core::{Client, Error, LeaseState};
use deadbolt_rwlock::RwLock;
use deadbolt_testkit::support::{cmd, pttls, server, until, within, HANG};
use deadbolt_testkit::{FaultProxy, RedisServer};

async fn client(url: &str) -> Client {
    deadbolt_testkit::client_with(url, |b| b.preload(deadbolt_rwlock::SCRIPTS)).await
}

async fn client_with(url: &str, watchdog: Duration, wt: Duration) -> Client {
    deadbolt_testkit::client_with(url, |b| b.watchdog_timeout(watchdog).waiter_timeout(wt)).await
}

async fn keys(srv: &RedisServer) -> Vec<String> {
    cmd(srv, &["KEYS", "*"]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_readers_behind_a_writer_all_get_in_together() {
    let srv = server();
    let cs = [client(&srv.url()).await, client(&srv.url()).await];
    let w = RwLock::new(&cs[0], "twenty")
        .write_lock()
        .lock()
        .await
        .unwrap();
    let got = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..20 {
        let l = RwLock::new(&cs[i % 2], "twenty");
        let got = got.clone();
        tasks.push(tokio::spawn(async move {
            let g = l.read_lock().lock().await.unwrap();
            got.lock().push(Instant::now());
            g
        }));
    }
    until("20 waiters", || async {
        cs[0].waiters() + cs[1].waiters() == 20
    })
    .await;
    let released = Instant::now();
    w.unlock().await.unwrap();
    let mut guards = Vec::new();
    for t in tasks {
        guards.push(within("reader", t).await.unwrap());
    }
    let last = got.lock().iter().max().copied().unwrap();
    // One release message wakes all of them; each takes one round trip.
    assert!(
        last.duration_since(released) < Duration::from_millis(500),
        "last reader got in {:?} after the unlock",
        last.duration_since(released)
    );
    let probe = RwLock::new(&cs[0], "twenty");
    assert_eq!(probe.reader_count().await.unwrap(), 20);
    for g in guards {
        g.unlock().await.unwrap();
    }
    assert!(!probe.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_gets_in_when_the_longest_read_lease_ends() {
    let srv = server();
    let c = client(&srv.url()).await;
    let a = RwLock::new(&c, "leases")
        .read_lock()
        .lock_with_lease(Duration::from_millis(1500))
        .await
        .unwrap();
    let b = RwLock::new(&c, "leases")
        .read_lock()
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    let probe = RwLock::new(&c, "leases");
    let ttl = probe.remaining_ttl().await.unwrap().unwrap();
    assert!(
        ttl > Duration::from_millis(1000),
        "key lives as the longest reader: {ttl:?}"
    );
    let start = Instant::now();
    let w = within("writer", RwLock::new(&c, "leases").write_lock().lock())
        .await
        .unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(1300),
        "writer got in after {waited:?}, before A's lease ended"
    );
    assert_eq!(a.state(), LeaseState::Lost);
    assert_eq!(b.state(), LeaseState::Lost);
    w.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_clients_reader_expires_while_others_keep_reading() {
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let wd = Duration::from_millis(600);
    let doomed = client_with(&proxy.url(), wd, Duration::from_secs(1)).await;
    let alive = client_with(&srv.url(), wd, Duration::from_secs(1)).await;
    let _dead = RwLock::new(&doomed, "zombie")
        .read_lock()
        .lock()
        .await
        .unwrap();
    let live = RwLock::new(&alive, "zombie")
        .read_lock()
        .lock()
        .await
        .unwrap();
    proxy.set_blackhole(true);
    let start = Instant::now();
    let probe = RwLock::new(&alive, "zombie");
    until("the dead reader's lease ends", || async {
        probe.reader_count().await.unwrap() == 1
    })
    .await;
    assert!(start.elapsed() < Duration::from_secs(5));
    // The live reader keeps reading past the dead one's lease (renewed by
    // its own watchdog only), and the writer waits for it.
    assert_eq!(
        live.state(),
        LeaseState::Active,
        "the live reader was renewed"
    );
    assert!(RwLock::new(&alive, "zombie")
        .write_lock()
        .try_lock()
        .await
        .unwrap()
        .is_none());
    let writer = RwLock::new(&alive, "zombie");
    let wt = tokio::spawn(async move { writer.write_lock().lock().await });
    until("writer waiting", || async {
        probe.inspect().await.unwrap().waiting_writers == 1
    })
    .await;
    live.unlock().await.unwrap();
    let w = within("writer after the live reader", wt)
        .await
        .unwrap()
        .unwrap();
    w.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writer_preference_stops_readers_looping() {
    let srv = server();
    let c = client(&srv.url()).await;
    let stop = Arc::new(AtomicBool::new(false));
    let lease = Duration::from_secs(2);
    let mut loops = Vec::new();
    for _ in 0..4 {
        let l = RwLock::new(&c, "pref");
        let stop = stop.clone();
        loops.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let g = l.read_lock().lock_with_lease(lease).await.unwrap();
                tokio::task::yield_now().await;
                g.unlock().await.unwrap();
                n += 1;
            }
            n
        }));
    }
    let probe = RwLock::new(&c, "pref");
    until("readers looping", || async {
        probe.reader_count().await.unwrap() > 0
    })
    .await;
    let start = Instant::now();
    let w = within("writer", RwLock::new(&c, "pref").write_lock().lock())
        .await
        .unwrap();
    assert!(
        start.elapsed() < lease,
        "writer waited {:?}, more than one read lease",
        start.elapsed()
    );
    assert_eq!(probe.reader_count().await.unwrap(), 0);
    w.unlock().await.unwrap();
    stop.store(true, Ordering::SeqCst);
    for l in loops {
        assert!(within("reader loop", l).await.unwrap() > 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_gives_up_lets_readers_in_at_once() {
    let srv = server();
    let c = client(&srv.url()).await;
    let r = RwLock::new(&c, "giveup").read_lock().lock().await.unwrap();
    let w = RwLock::new(&c, "giveup");
    let wt = tokio::spawn(async move {
        w.write_lock()
            .try_lock_for(Duration::from_millis(300))
            .await
    });
    let probe = RwLock::new(&c, "giveup");
    until("writer waiting", || async {
        probe.inspect().await.unwrap().waiting_writers == 1
    })
    .await;
    // A new reader waits behind the writer...
    let reader = RwLock::new(&c, "giveup");
    let rt = tokio::spawn(async move {
        let g = reader.read_lock().lock().await.unwrap();
        (Instant::now(), g)
    });
    assert!(within("writer gives up", wt)
        .await
        .unwrap()
        .unwrap()
        .is_none());
    let gave_up = Instant::now();
    // ...and gets in as soon as the writer's mark is gone.
    let (at, g) = within("reader", rt).await.unwrap();
    assert!(at.duration_since(gave_up) < Duration::from_millis(500));
    assert_eq!(probe.inspect().await.unwrap().waiting_writers, 0);
    g.unlock().await.unwrap();
    r.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrade_refused_upgrade_reentrancy_and_counts() {
    let srv = server();
    let c = client(&srv.url()).await;
    let rw = RwLock::new(&c, "modes");
    // Re-entrant writes, one token.
    let w1 = rw.write_lock().lock().await.unwrap();
    let w2 = rw.write_lock().try_lock().await.unwrap().unwrap();
    assert_eq!(w1.fencing_token(), w2.fencing_token());
    let info = rw.inspect().await.unwrap();
    assert_eq!(info.write_holds, 2);
    assert_eq!(info.writer.as_deref(), Some(rw.owner()));
    // Another handle can neither read nor write.
    let other = RwLock::new(&c, "modes");
    assert!(other.read_lock().try_lock().await.unwrap().is_none());
    assert!(other.write_lock().try_lock().await.unwrap().is_none());
    // Downgrade: the writer reads, releases the write holds, still reads.
    let r1 = rw.read_lock().lock().await.unwrap();
    w2.unlock().await.unwrap();
    w1.unlock().await.unwrap();
    assert!(!rw.is_write_locked().await.unwrap());
    assert_eq!(rw.reader_count().await.unwrap(), 1);
    // Others may read now too.
    let r2 = other.read_lock().try_lock().await.unwrap().unwrap();
    // Upgrade is refused at once, for a plain wait too.
    let start = Instant::now();
    assert!(matches!(
        rw.write_lock().lock().await,
        Err(Error::UpgradeNotSupported)
    ));
    assert!(matches!(
        rw.write_lock().try_lock_for(Duration::from_secs(10)).await,
        Err(Error::UpgradeNotSupported)
    ));
    assert!(start.elapsed() < Duration::from_secs(2));
    // Re-entrant reads.
    let r3 = rw.read_lock().lock().await.unwrap();
    assert_eq!(rw.reader_count().await.unwrap(), 3);
    for g in [r1, r2, r3] {
        g.unlock().await.unwrap();
    }
    assert!(!rw.is_locked().await.unwrap());
    // Unlocking twice: the second time is NotHeld.
    let w = rw.write_lock().lock().await.unwrap();
    w.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_frees_only_what_it_says() {
    let srv = server();
    let c = client(&srv.url()).await;
    let a = RwLock::new(&c, "force");
    let r1 = a.read_lock().lock().await.unwrap();
    let r2 = RwLock::new(&c, "force").read_lock().lock().await.unwrap();
    let writer = RwLock::new(&c, "force");
    let wt = tokio::spawn(async move { writer.write_lock().lock().await });
    until("writer waiting", || async {
        a.inspect().await.unwrap().waiting_writers == 1
    })
    .await;
    let freed = a.force_unlock().await.unwrap();
    assert!(!freed.writer);
    assert_eq!(freed.readers, 2);
    // The waiting writer was kept and gets the lock now.
    let w = within("writer", wt).await.unwrap().unwrap();
    assert!(matches!(r1.unlock().await, Err(Error::NotHeld)));
    let again = a.force_unlock().await.unwrap();
    assert!(again.writer);
    assert_eq!(again.readers, 0);
    assert!(matches!(w.unlock().await, Err(Error::NotHeld)));
    drop(r2);
    assert_eq!(a.force_unlock().await.unwrap().readers, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_leave_nothing_behind() {
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let c = client(&proxy.url()).await;
    proxy.set_reply_delay(Duration::from_millis(2));
    let holder = RwLock::new(&c, "cancel");
    for round in 0..60u64 {
        // Alternate who holds, and cancel waiters at varied points.
        let g = if round % 2 == 0 {
            Some(holder.read_lock().lock().await.unwrap())
        } else {
            None
        };
        let w = if round % 3 == 0 {
            Some(
                holder
                    .write_lock()
                    .lock_with_lease(Duration::from_secs(5))
                    .await,
            )
        } else {
            None
        };
        let r = RwLock::new(&c, "cancel");
        let wr = RwLock::new(&c, "cancel");
        let cut = Duration::from_micros(300 * (round % 17));
        let _ = tokio::time::timeout(cut, r.read_lock().lock()).await;
        let _ = tokio::time::timeout(cut, wr.write_lock().lock()).await;
        drop(g);
        if let Some(Ok(w)) = w {
            w.unlock().await.unwrap();
        }
    }
    proxy.set_reply_delay(Duration::ZERO);
    assert!(c.releases_settled(HANG).await);
    let left: Vec<String> = keys(&srv)
        .await
        .into_iter()
        .filter(|k| !k.ends_with(":fence") && !k.ends_with(":alive") && !k.ends_with(":ww"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let probe = RwLock::new(&c, "cancel");
    let info = probe.inspect().await.unwrap();
    assert_eq!(info.waiting_writers, 0, "{info:?}");
    assert!(!probe.is_locked().await.unwrap());
}

/// Writers exclusive against everyone, readers concurrent with each other:
/// a shared counter of readers and writers inside the lock, checked at each
/// step (a fenced write log for the writers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_writers_exclusive_readers_shared() {
    let srv = server();
    let cs = [client(&srv.url()).await, client(&srv.url()).await];
    let readers = Arc::new(AtomicI64::new(0));
    let writers = Arc::new(AtomicI64::new(0));
    let max_readers = Arc::new(AtomicI64::new(0));
    let last_token = Arc::new(AtomicI64::new(0));
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut tasks = Vec::new();
    for i in 0..8 {
        let l = RwLock::new(&cs[i % 2], "history");
        let (readers, writers, max_readers, last_token) = (
            readers.clone(),
            writers.clone(),
            max_readers.clone(),
            last_token.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while Instant::now() < deadline {
                if n % 4 == (i % 4) {
                    let g = l.write_lock().lock().await.unwrap();
                    assert_eq!(writers.fetch_add(1, Ordering::SeqCst), 0, "two writers");
                    assert_eq!(readers.load(Ordering::SeqCst), 0, "writer with readers");
                    let t = i64::try_from(g.fencing_token()).unwrap();
                    assert!(t > last_token.swap(t, Ordering::SeqCst), "token went back");
                    tokio::task::yield_now().await;
                    writers.fetch_sub(1, Ordering::SeqCst);
                    g.unlock().await.unwrap();
                } else {
                    let g = l.read_lock().lock().await.unwrap();
                    let now = readers.fetch_add(1, Ordering::SeqCst) + 1;
                    max_readers.fetch_max(now, Ordering::SeqCst);
                    assert_eq!(writers.load(Ordering::SeqCst), 0, "reader with a writer");
                    tokio::task::yield_now().await;
                    readers.fetch_sub(1, Ordering::SeqCst);
                    g.unlock().await.unwrap();
                }
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += within("task", t).await.unwrap();
    }
    assert!(total > 8, "progress: {total}");
    assert!(
        max_readers.load(Ordering::SeqCst) > 1,
        "readers never shared the lock"
    );
    let left: Vec<String> = keys(&srv)
        .await
        .into_iter()
        .filter(|k| !k.ends_with(":fence") && !k.ends_with(":alive") && !k.ends_with(":ww"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_type_keys_and_bad_names() {
    let srv = server();
    let c = client(&srv.url()).await;
    let rw = RwLock::new(&c, "wt");
    let r = format!("{}:r", rw.key().unwrap());
    let mut conn = srv.conn().await;
    let _: () = redis::cmd("SET")
        .arg(&r)
        .arg("x")
        .query_async(&mut conn)
        .await
        .unwrap();
    let err = rw.read_lock().try_lock().await.unwrap_err();
    assert!(
        matches!(&err, Error::WrongType { key } if *key == r),
        "{err:?}"
    );
    let err = rw.write_lock().try_lock().await.unwrap_err();
    assert!(
        matches!(&err, Error::WrongType { key } if *key == r),
        "{err:?}"
    );
    let err = rw.force_unlock().await.unwrap_err();
    assert!(matches!(&err, Error::WrongType { .. }), "{err:?}");
    let err = RwLock::new(&c, "").read_lock().lock().await.unwrap_err();
    assert_eq!(err.to_string(), "invalid argument: name is empty");
}

/// Found while benchmarking: force_unlock counted read holds whose lease had
/// already ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_counts_only_live_readers() {
    let srv = server();
    let c = client(&srv.url()).await;
    let rw = RwLock::new(&c, "ended");
    let _short = RwLock::new(&c, "ended")
        .read_lock()
        .lock_with_lease(Duration::from_millis(100))
        .await
        .unwrap();
    let _long = RwLock::new(&c, "ended")
        .read_lock()
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    until("the short lease ends", || async {
        rw.reader_count().await.unwrap() == 1
    })
    .await;
    let freed = rw.force_unlock().await.unwrap();
    assert_eq!(freed.readers, 1);
    assert!(keys(&srv).await.iter().all(|k| k.ends_with(":fence")));
}

/// A stale write hold of the own handle (a late grant; see the lock's test
/// of the same name) is not re-entered: the write side is taken afresh and
/// is free for others after the unlock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_write_hold_of_the_own_handle_is_replaced_not_re_entered() {
    let srv = server();
    let c = client(&srv.url()).await;
    let other = client(&srv.url()).await;
    let rw = RwLock::new(&c, "stale");
    let key = rw.key().unwrap().to_string();
    let owner = rw.owner().to_string();
    let _: () = cmd(
        &srv,
        &["HSET", &key, "o", &owner, "t", "5", "n", "1", "a:gone", "1"],
    )
    .await;
    let _: () = cmd(&srv, &["PEXPIRE", &key, "30000"]).await;
    let g = rw.write_lock().try_lock().await.unwrap().expect("granted");
    assert!(g.fencing_token() > 5, "re-entered the stale write hold");
    g.unlock().await.unwrap();
    let og = RwLock::new(&other, "stale")
        .write_lock()
        .try_lock()
        .await
        .unwrap();
    og.expect("free for another handle").unlock().await.unwrap();
    // A real re-entry still counts on the hold.
    let g1 = rw.write_lock().lock().await.unwrap();
    let g2 = rw.write_lock().lock().await.unwrap();
    assert_eq!(g1.fencing_token(), g2.fencing_token());
    g2.unlock().await.unwrap();
    assert!(RwLock::new(&other, "stale")
        .write_lock()
        .try_lock()
        .await
        .unwrap()
        .is_none());
    g1.unlock().await.unwrap();
}

/// The read holds' keys expire no earlier than the longest read lease, and
/// never earlier than before: the first reader of a free lock gives them
/// their TTL, a longer lease pushes it out, a shorter one or a release
/// leaves it, and the last reader's release deletes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_holds_keys_outlast_the_longest_read_lease() {
    let srv = server();
    let c = client(&srv.url()).await;
    let rw = RwLock::new(&c, "ttl");
    let held = ["deadbolt:{ttl}:rw:r", "deadbolt:{ttl}:rw:ro"];
    let ttls = || pttls(&srv, &held);
    let secs = |s: u64| Duration::from_secs(s);
    let within_ms = |ttl: i64, lease: i64| ttl > (lease - 5) * 1000 && ttl <= lease * 1000;
    let a = rw.read_lock().lock_with_lease(secs(60)).await.unwrap();
    for t in ttls().await {
        assert!(within_ms(t, 60), "first reader: TTL {t} ms, not about 60 s");
    }
    let b = rw.read_lock().lock_with_lease(secs(120)).await.unwrap();
    let shorter = rw.read_lock().lock_with_lease(secs(30)).await.unwrap();
    b.unlock().await.unwrap();
    shorter.unlock().await.unwrap();
    for t in ttls().await {
        assert!(
            within_ms(t, 120),
            "after releases: TTL {t} ms, not about 120 s"
        );
    }
    a.unlock().await.unwrap();
    for t in ttls().await {
        assert_eq!(t, -2, "the last reader's release leaves its keys behind");
    }
    let again = rw.read_lock().lock_with_lease(secs(10)).await.unwrap();
    for t in ttls().await {
        assert!(
            within_ms(t, 10),
            "a new first reader: TTL {t} ms, not about 10 s"
        );
    }
    again.unlock().await.unwrap();
    assert!(keys(&srv).await.is_empty(), "{:?}", keys(&srv).await);
}

/// A heartbeat for a lock without waiting writers writes nothing: a round
/// sent before the client's last writer was served would otherwise make the
/// liveness key anew. With a writer waiting it refreshes the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_without_waiting_writers_writes_nothing() {
    use deadbolt_core::primitive::ScriptCall;
    let srv = server();
    let c = client(&srv.url()).await;
    let keys = deadbolt_rwlock::rw_keys(&c.keys(deadbolt_rwlock::KIND, "hb").unwrap());
    let beat = ScriptCall::new(
        &deadbolt_rwlock::scripts::RW_HEARTBEAT,
        keys.clone(),
        vec![c.id().to_string(), "5000".into()],
    );
    assert_eq!(c.run::<i64>(&beat).await.unwrap(), 0);
    let dbsize = || async { cmd::<i64>(&srv, &["DBSIZE"]).await };
    assert_eq!(dbsize().await, 0, "a heartbeat of a free lock wrote");
    let rw = RwLock::new(&c, "hb");
    let r = rw.read_lock().lock().await.unwrap();
    let before = dbsize().await;
    assert_eq!(c.run::<i64>(&beat).await.unwrap(), 0);
    assert_eq!(
        dbsize().await,
        before,
        "a heartbeat with no writer waiting wrote"
    );
    let w = client(&srv.url()).await;
    let ww = RwLock::new(&w, "hb");
    let waiting = tokio::spawn(async move { ww.write_lock().lock().await.map(|g| (ww, g)) });
    until("a writer waits", || async {
        cmd::<i64>(&srv, &["ZCARD", &keys[4]]).await == 1
    })
    .await;
    assert_eq!(c.run::<i64>(&beat).await.unwrap(), 1);
    r.unlock().await.unwrap();
    let (_ww, wg) = within("the writer", waiting).await.unwrap().unwrap();
    wg.unlock().await.unwrap();
}
