//! One side of an RwLock at a time, against real redis-server processes:
//! `is_read_locked`, this handle's `read_hold_count` / `write_hold_count`,
//! and `force_unlock_write` / `force_unlock_read`, whose forced release
//! hands the lock on exactly as the matching normal release would.

use deadbolt_core::Acquire as _;
use deadbolt_core::HoldGuard as _;
use std::time::Duration;

use deadbolt_core::{Client, Error, LeaseState};
use deadbolt_rwlock::{rw_keys, RwLock, KIND, SCRIPTS};
use deadbolt_testkit::support::{
    self, cmd, fill_memory, plant_list, restore, server, until, within, KeyState,
};
use deadbolt_testkit::RedisServer;

/// A client whose scripts are loaded at connect (a first EVALSHA would
/// meet NOSCRIPT and count twice).
async fn client(srv: &RedisServer) -> Client {
    deadbolt_testkit::client_with(&srv.url(), |b| b.preload(SCRIPTS)).await
}

/// As [`client`], renewing every 200 ms: a forced-out guard learns it soon.
async fn watched(srv: &RedisServer) -> Client {
    deadbolt_testkit::client_with(&srv.url(), |b| {
        b.preload(SCRIPTS)
            .watchdog_timeout(Duration::from_millis(600))
    })
    .await
}

fn main_key(name: &str) -> String {
    format!("deadbolt:{{{name}}}:rw")
}

/// The readers registered in the writer's hold hash.
async fn registrations(srv: &RedisServer, name: &str) -> usize {
    let fields: Vec<String> = cmd(srv, &["HKEYS", &main_key(name)]).await;
    fields.iter().filter(|f| f.starts_with("q:")).count()
}

/// Every key of lock `name`, the slot's fencing counter included.
async fn snapshot(srv: &RedisServer, name: &str) -> Vec<KeyState> {
    let mut keys = support::snapshot(srv, &format!("deadbolt:{{{name}}}:")).await;
    let fence = deadbolt_core::Keys::new("deadbolt", KIND, name).unwrap();
    keys.extend(support::snapshot(srv, fence.fence()).await);
    keys
}

async fn keys(srv: &RedisServer) -> Vec<String> {
    cmd(srv, &["KEYS", "*"]).await
}

/// Both counts are this handle's (its clones share them), the write count
/// is the re-entry count, a downgraded writer's reads count as reads, and
/// a read hold whose lease ended counts no more, before any purge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_counts_are_the_handles_own_and_is_read_locked_sees_any_reader() {
    let srv = server();
    let c = client(&srv).await;
    let a = RwLock::new(&c, "counts");
    let clone = a.clone();
    let b = RwLock::new(&c, "counts");
    assert!(!a.is_read_locked().await.unwrap());
    assert_eq!(a.read_hold_count().await.unwrap(), 0);
    assert_eq!(a.write_hold_count().await.unwrap(), 0);

    let w1 = a.write_lock().lock().await.unwrap();
    let w2 = clone.write_lock().lock().await.unwrap();
    assert_eq!(a.write_hold_count().await.unwrap(), 2);
    assert_eq!(clone.write_hold_count().await.unwrap(), 2);
    assert_eq!(b.write_hold_count().await.unwrap(), 0, "not the writer");
    assert!(!b.is_read_locked().await.unwrap(), "a writer is no reader");
    // Downgrade: the writer's reads are reads.
    let r1 = a.read_lock().lock().await.unwrap();
    assert!(b.is_read_locked().await.unwrap());
    assert_eq!(a.read_hold_count().await.unwrap(), 1);
    assert_eq!(b.read_hold_count().await.unwrap(), 0);
    w2.unlock().await.unwrap();
    assert_eq!(a.write_hold_count().await.unwrap(), 1);
    w1.unlock().await.unwrap();
    assert_eq!(a.write_hold_count().await.unwrap(), 0);
    assert_eq!(a.read_hold_count().await.unwrap(), 1);

    // Re-entered reads, and another handle's.
    let r2 = clone.read_lock().lock().await.unwrap();
    let rb = b.read_lock().lock().await.unwrap();
    assert_eq!(a.read_hold_count().await.unwrap(), 2);
    assert_eq!(b.read_hold_count().await.unwrap(), 1);
    assert_eq!(a.reader_count().await.unwrap(), 3);
    // A fixed short lease that ends unreleased: no acquire purges it.
    let _short = b
        .read_lock()
        .lock_with_lease(Duration::from_millis(200))
        .await
        .unwrap();
    assert_eq!(b.read_hold_count().await.unwrap(), 2);
    until("the short lease ends", || async {
        b.read_hold_count().await.unwrap() == 1
    })
    .await;
    assert_eq!(a.read_hold_count().await.unwrap(), 2);
    for g in [r1, r2, rb] {
        g.unlock().await.unwrap();
    }
    assert!(!a.is_read_locked().await.unwrap());
    assert_eq!(a.read_hold_count().await.unwrap(), 0);
    assert_eq!(b.read_hold_count().await.unwrap(), 0);
}

/// A writer (re-entered, downgraded: it also reads) with two readers
/// registered behind it: `force_unlock_write` removes the write hold only,
/// and admits the registered readers inside the call, one message for
/// both, as the writer's own release would; the writer keeps its read, its
/// write guards turn `Lost` and their unlocks are `NotHeld`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_write_keeps_the_readers_and_admits_the_registered_ones() {
    let srv = server();
    let c = client(&srv).await;
    let cs = [client(&srv).await, client(&srv).await];
    let a = RwLock::new(&c, "fw");
    let w1 = a.write_lock().lock().await.unwrap();
    let w2 = a.write_lock().lock().await.unwrap();
    let own = a.read_lock().lock().await.unwrap();
    let mut tasks = Vec::new();
    for (i, rc) in cs.iter().enumerate() {
        let l = RwLock::new(rc, "fw");
        tasks.push(tokio::spawn(async move { l.read_lock().lock().await }));
        until("the reader registers", || async {
            registrations(&srv, "fw").await == i + 1
        })
        .await;
    }

    srv.reset_stats().await;
    let admin = RwLock::new(&c, "fw");
    assert!(admin.force_unlock_write().await.unwrap());
    let mut guards = Vec::new();
    for t in tasks {
        guards.push(within("a registered reader", t).await.unwrap().unwrap());
    }
    let stats = srv.commandstats().await;
    // One message for the readers, one note for watches (the hold's
    // `:watch` channel: this write hold was force-unlocked), and the same
    // note to the holder's client on its own channel.
    assert_eq!(
        stats.get("publish").copied(),
        Some(3),
        "one message, the watch note and the holder's: {stats:?}"
    );
    assert_eq!(
        stats.get("evalsha").copied(),
        Some(1),
        "the readers got in without a try of their own: {stats:?}"
    );
    assert!(!admin.is_write_locked().await.unwrap());
    assert_eq!(a.write_hold_count().await.unwrap(), 0);
    assert_eq!(a.read_hold_count().await.unwrap(), 1, "the writer reads on");
    assert_eq!(admin.reader_count().await.unwrap(), 3);
    assert_eq!(registrations(&srv, "fw").await, 0);

    // Its next renewal finds the hold gone.
    assert!(matches!(
        w1.extend(Duration::from_secs(30)).await,
        Err(Error::NotHeld)
    ));
    assert_eq!(w1.state(), LeaseState::Lost);
    assert_eq!(own.state(), LeaseState::Active);
    assert!(matches!(w2.unlock().await, Err(Error::NotHeld)));
    assert!(matches!(w1.unlock().await, Err(Error::NotHeld)));
    assert!(!admin.force_unlock_write().await.unwrap(), "nothing left");
    own.unlock().await.unwrap();
    for g in guards {
        g.unlock().await.unwrap();
    }
    // Only the force-unlock's record for watches stays, for its 10 s.
    let left: Vec<String> = keys(&srv)
        .await
        .into_iter()
        .filter(|k| k.contains("{fw}"))
        .collect();
    assert!(left.len() == 1 && left[0].ends_with(":forced"), "{left:?}");
}

/// A writer, a waiting writer and a reader registered behind them:
/// `force_unlock_write` hands on as the writer's release would with a
/// writer waiting: the waiting writer gets in, and the registered reader
/// stays registered until that writer's release admits it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_write_lets_a_waiting_writer_in_before_the_registered_readers() {
    let srv = server();
    let c = watched(&srv).await;
    let d = client(&srv).await;
    let a = RwLock::new(&c, "fww");
    let w = a.write_lock().lock().await.unwrap();
    let lw = RwLock::new(&d, "fww");
    let writer = tokio::spawn(async move { lw.write_lock().lock().await });
    until("the writer waits", || async {
        a.inspect().await.unwrap().waiting_writers == 1
    })
    .await;
    let lr = RwLock::new(&d, "fww");
    let reader = tokio::spawn(async move { lr.read_lock().lock().await });
    until("the reader registers", || async {
        registrations(&srv, "fww").await == 1
    })
    .await;

    assert!(RwLock::new(&c, "fww").force_unlock_write().await.unwrap());
    let w2 = within("the waiting writer", writer).await.unwrap().unwrap();
    assert!(w2.fencing_token() > w.fencing_token());
    assert_eq!(
        registrations(&srv, "fww").await,
        1,
        "write preference: the reader waits for the next writer's release"
    );
    assert!(!reader.is_finished());
    within("the forced-out writer learns it", w.lost()).await;
    assert_eq!(w.state(), LeaseState::Lost);
    assert!(matches!(w.unlock().await, Err(Error::NotHeld)));
    srv.reset_stats().await;
    w2.unlock().await.unwrap();
    let r = within("the reader", reader).await.unwrap().unwrap();
    assert_eq!(srv.evalsha_calls().await, 1, "admitted by the release");
    r.unlock().await.unwrap();
}

/// Readers of two handles and a waiting writer: `force_unlock_read`
/// removes every read hold and wakes the writer as the last reader's
/// release would; the readers' guards turn `Lost`, their unlocks are
/// `NotHeld`. With a writer that also reads (a downgrade) and a reader
/// registered behind it, only the reads go: the writer keeps its holds,
/// the registration stays, and the writer's release admits it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_read_keeps_the_writer_and_wakes_the_waiting_writers() {
    let srv = server();
    let c = watched(&srv).await;
    let d = client(&srv).await;
    let a = RwLock::new(&c, "fr");
    let r1 = a.read_lock().lock().await.unwrap();
    let r2 = a.read_lock().lock().await.unwrap();
    let r3 = RwLock::new(&d, "fr").read_lock().lock().await.unwrap();
    let lw = RwLock::new(&d, "fr");
    let writer = tokio::spawn(async move { lw.write_lock().lock().await });
    until("the writer waits", || async {
        a.inspect().await.unwrap().waiting_writers == 1
    })
    .await;
    assert!(a.force_unlock_read().await.unwrap());
    let w = within("the waiting writer", writer).await.unwrap().unwrap();
    assert!(!a.is_read_locked().await.unwrap());
    assert_eq!(a.read_hold_count().await.unwrap(), 0);
    within("a forced-out reader learns it", r1.lost()).await;
    assert_eq!(r1.state(), LeaseState::Lost);
    for g in [r1, r2, r3] {
        assert!(matches!(g.unlock().await, Err(Error::NotHeld)));
    }
    assert!(!a.force_unlock_read().await.unwrap(), "nothing left");
    w.unlock().await.unwrap();

    // A downgraded writer and a reader registered behind it.
    let ww = a.write_lock().lock().await.unwrap();
    let own = a.read_lock().lock().await.unwrap();
    let lr = RwLock::new(&d, "fr");
    let reader = tokio::spawn(async move { lr.read_lock().lock().await });
    until("the reader registers", || async {
        registrations(&srv, "fr").await == 1
    })
    .await;
    assert!(a.force_unlock_read().await.unwrap());
    assert_eq!(a.write_hold_count().await.unwrap(), 1, "the writer stays");
    assert_eq!(ww.state(), LeaseState::Active);
    assert_eq!(registrations(&srv, "fr").await, 1);
    assert!(!reader.is_finished());
    assert!(matches!(own.unlock().await, Err(Error::NotHeld)));
    ww.unlock().await.unwrap();
    let r = within("the registered reader", reader)
        .await
        .unwrap()
        .unwrap();
    r.unlock().await.unwrap();
    assert!(keys(&srv)
        .await
        .iter()
        .all(|k| !k.contains("{fr}") || k.ends_with(":ww") || k.ends_with(":alive")));
}

/// On a free lock both calls report false and write nothing; read holds
/// whose lease ended count as nothing (their records go); one side forced
/// leaves the other side's holds alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forcing_a_free_side_releases_nothing() {
    let srv = server();
    let c = client(&srv).await;
    let a = RwLock::new(&c, "free");
    assert!(!a.force_unlock_write().await.unwrap());
    assert!(!a.force_unlock_read().await.unwrap());
    assert!(keys(&srv).await.is_empty(), "nothing written");

    let _ended = a
        .read_lock()
        .lock_with_lease(Duration::from_millis(100))
        .await
        .unwrap();
    until("the lease ends", || async {
        !a.is_read_locked().await.unwrap()
    })
    .await;
    assert!(!a.force_unlock_read().await.unwrap());
    assert!(keys(&srv).await.is_empty(), "the ended record went");

    // Readers only: forcing the write side leaves them.
    let r = a.read_lock().lock().await.unwrap();
    assert!(!a.force_unlock_write().await.unwrap());
    assert_eq!(a.read_hold_count().await.unwrap(), 1);
    r.unlock().await.unwrap();
    // A writer only: forcing the read side leaves it.
    let w = a.write_lock().lock().await.unwrap();
    assert!(!a.force_unlock_read().await.unwrap());
    assert_eq!(a.write_hold_count().await.unwrap(), 1);
    w.unlock().await.unwrap();
}

/// Under maxmemory (every write that adds memory refused), a forced write
/// release still admits the registered readers, and every admitted reader
/// holds a read hold that a writer cannot pass; a forced read release
/// works too (it only deletes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_releases_under_maxmemory_hand_on_what_is_recorded() {
    let srv = server();
    let h = client(&srv).await;
    let cs = [client(&srv).await, client(&srv).await];
    let _w = RwLock::new(&h, "oom").write_lock().lock().await.unwrap();
    let mut tasks = Vec::new();
    for (i, c) in cs.iter().enumerate() {
        let l = RwLock::new(c, "oom");
        tasks.push(tokio::spawn(async move { l.read_lock().lock().await }));
        until("the reader registers", || async {
            registrations(&srv, "oom").await == i + 1
        })
        .await;
    }
    fill_memory(&srv).await;
    let probe = RwLock::new(&h, "oom");
    assert!(probe.force_unlock_write().await.unwrap());
    let mut guards = Vec::new();
    for t in tasks {
        guards.push(within("a reader", t).await.unwrap().unwrap());
    }
    assert_eq!(probe.reader_count().await.unwrap(), 2, "both recorded");
    assert!(
        probe.write_lock().try_lock().await.unwrap().is_none(),
        "a writer cannot pass the readers"
    );
    assert!(probe.force_unlock_read().await.unwrap());
    assert!(!probe.is_locked().await.unwrap());
    let () = cmd(&srv, &["CONFIG", "SET", "maxmemory", "0"]).await;
    for g in guards {
        assert!(matches!(g.unlock().await, Err(Error::NotHeld)));
    }
}

/// A key of another type in place of each of the lock's six keys, with
/// both sides held: every new call fails with `WrongType` naming it and
/// writes nothing; restored, the holds are all there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_is_refused_by_name_and_nothing_is_written() {
    let srv = server();
    let c = client(&srv).await;
    let lease = Duration::from_secs(120);
    for (i, suffix) in ["w", "fence", "r", "ro", "ww", "alive"].iter().enumerate() {
        let name = format!("wrong-{suffix}");
        let bad = rw_keys(&c.keys(KIND, &name).unwrap())[i].clone();
        let a = RwLock::new(&c, &name);
        let w = a.write_lock().lock_with_lease(lease).await.unwrap();
        let r = a.read_lock().lock_with_lease(lease).await.unwrap();
        // The waiting writers' keys (ww, alive) exist too: a mark of a
        // client long silent (ignored, as a dead writer's is).
        for k in ["ww", "alive"] {
            let key = format!("{}:{k}", main_key(&name));
            let _: i64 = cmd(&srv, &["ZADD", &key, "1", "x"]).await;
        }
        let saved = plant_list(&srv, &bad).await;
        let before = snapshot(&srv, &name).await;
        let e = RwLock::new(&c, &name);
        macro_rules! refused {
            ($what:literal, $call:expr) => {{
                match within($what, $call).await {
                    Err(Error::WrongType { key }) if key == bad => {}
                    other => panic!("{bad}: {}: {other:?}", $what),
                }
                assert!(
                    snapshot(&srv, &name).await == before,
                    "{bad}: {} wrote",
                    $what
                );
            }};
        }
        refused!("is_read_locked", e.is_read_locked());
        refused!("read_hold_count", a.read_hold_count());
        refused!("write_hold_count", a.write_hold_count());
        refused!("force_unlock_write", e.force_unlock_write());
        refused!("force_unlock_read", e.force_unlock_read());
        restore(&srv, &bad, saved).await;
        assert_eq!(a.read_hold_count().await.unwrap(), 1, "{bad}");
        assert_eq!(a.write_hold_count().await.unwrap(), 1, "{bad}");
        w.unlock().await.unwrap();
        r.unlock().await.unwrap();
    }
}

/// The new futures can cross threads.
#[allow(dead_code)]
fn send_sync(l: RwLock) {
    fn is_send<T: Send>(_: &T) {}
    is_send(&l.is_read_locked());
    is_send(&l.read_hold_count());
    is_send(&l.write_hold_count());
    is_send(&l.force_unlock_write());
    is_send(&l.force_unlock_read());
}
