//! The RwLock tried as an adversary would, against real redis-server
//! processes: keys of another type under every call (waiters, heartbeats
//! and renewals included), a paused server, killed Pub/Sub connections and
//! messages that fall while they are down, SCRIPT FLUSH, a restart without
//! persistence, late replies with cancelled acquires, a downgraded writer
//! whose write lease runs out, holders and waiting writers whose process
//! dies, leases that run out unreleased, and releases whose reply is lost.

use deadbolt_core::Acquire as _;
use deadbolt_core::HoldGuard as _;
use std::time::{Duration, Instant};

use deadbolt_core::{Client, ClientBuilder, Error, LeaseState};
use deadbolt_rwlock::{rw_keys, ReadGuard, RwLock, WriteGuard, KIND, SCRIPTS};
use deadbolt_testkit::support::{
    self, cmd, persistent_keys, plant_list, restore, server, subscribers, until, within, KeyState,
    HANG,
};
use deadbolt_testkit::{FaultProxy, RedisServer};

fn preloaded(b: ClientBuilder) -> ClientBuilder {
    b.preload(SCRIPTS)
}

async fn client(url: &str) -> Client {
    deadbolt_testkit::client_with(url, preloaded).await
}

/// The six keys of read-write lock `name`, in the scripts' order: w, fence,
/// r, ro, ww, alive.
fn keys_of(c: &Client, name: &str) -> Vec<String> {
    rw_keys(&c.keys(KIND, name).unwrap())
}

fn channel_of(c: &Client, name: &str) -> String {
    c.keys(KIND, name).unwrap().channel()
}

/// Every key of primitive `name` (all share `deadbolt:{name}:`, but for the
/// fencing counter of its hash slot): see [`support::snapshot`].
async fn snapshot(srv: &RedisServer, name: &str) -> Vec<KeyState> {
    let mut keys = support::snapshot(srv, &format!("deadbolt:{{{name}}}:")).await;
    // The fencing counter of the name's hash slot.
    let fence = deadbolt_core::Keys::new("deadbolt", KIND, name).unwrap();
    keys.extend(support::snapshot(srv, fence.fence()).await);
    keys
}

#[track_caller]
fn assert_wrong_type<T: std::fmt::Debug>(what: &str, r: Result<T, Error>, key: &str) {
    match r {
        Err(Error::WrongType { key: k }) if k == key => {}
        other => panic!("{what}: expected WrongType naming {key}, got {other:?}"),
    }
}

/// Run `$call` (bounded by `within`): it must fail with `WrongType` naming
/// `$bad`, and the keys of `$name` must be as in `$before` (as [`seen`]
/// shows them). A call refuses the keys it touches: when
/// `$suffix`, the bad key's kind, is not among `$touches`, the keys the
/// call touches in the test's state, the call is not made.
macro_rules! refused {
    ($srv:expr, $name:expr, $before:expr, $bad:expr, $suffix:expr;
     $($touches:expr, $what:literal => $call:expr;)+) => {{
        $(
            if $touches.contains(&$suffix) {
                let r = within($what, $call).await;
                assert_wrong_type(&format!("{}: {}", $bad, $what), r, $bad);
                assert!(
                    seen($srv, $name, $bad).await == *$before,
                    "{}: {} wrote",
                    $bad,
                    $what
                );
            }
        )+
    }};
}

/// The keys a heartbeat of a waiting writer's client touches (it reads ww
/// and refreshes alive): a lock with one of them bad is skipped.
const HEARTBEAT: &[&str] = &["ww", "alive"];

/// [`snapshot`] of `name` while `bad` is of another type: when the
/// heartbeat does not touch `bad`, it goes on refreshing this lock's
/// liveness record (alive), whose content is left out then.
async fn seen(srv: &RedisServer, name: &str, bad: &str) -> Vec<KeyState> {
    let mut keys = snapshot(srv, name).await;
    if !HEARTBEAT.iter().any(|k| bad.ends_with(&format!(":rw:{k}"))) {
        for k in &mut keys {
            if k.key.ends_with(":rw:alive") {
                k.dump = None;
            }
        }
    }
    keys
}

/// The server's clock in ms (what the scripts compare leases with).
async fn server_ms(srv: &RedisServer) -> u64 {
    let (secs, micros): (u64, u64) = cmd(srv, &["TIME"]).await;
    secs * 1000 + micros / 1000
}

async fn kill_pubsub(srv: &RedisServer) -> i64 {
    cmd(srv, &["CLIENT", "KILL", "TYPE", "pubsub"]).await
}

/// A waiting acquire in a task: when it ended, and how.
type Timed<T> = tokio::task::JoinHandle<(Instant, deadbolt_core::Result<T>)>;

fn reading(l: RwLock) -> Timed<ReadGuard> {
    tokio::spawn(async move {
        let r = l.read_lock().lock().await;
        (Instant::now(), r)
    })
}

fn writing(l: RwLock) -> Timed<WriteGuard> {
    tokio::spawn(async move {
        let r = l.write_lock().lock().await;
        (Instant::now(), r)
    })
}

/// A waiter that takes the lock (`write` or read), notes when, and lets go.
fn taken(l: RwLock, write: bool) -> tokio::task::JoinHandle<Instant> {
    tokio::spawn(async move {
        if write {
            let g = l.write_lock().lock().await.unwrap();
            let at = Instant::now();
            g.unlock().await.unwrap();
            at
        } else {
            let g = l.read_lock().lock().await.unwrap();
            let at = Instant::now();
            g.unlock().await.unwrap();
            at
        }
    })
}

/// A writer that takes the lock and lets go, and tells its fencing token.
fn tokened(l: RwLock) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let g = l.write_lock().lock().await.unwrap();
        let t = g.fencing_token();
        g.unlock().await.unwrap();
        t
    })
}

/// Await a waiter's task: it must have been served less than `bound` after
/// `since` (its own sleep bound is far longer: a lost wake-up shows).
async fn served<T>(what: &str, task: Timed<T>, since: Instant, bound: Duration) -> T {
    let (at, r) = within(what, task).await.expect("the waiter's task");
    let g = r.unwrap_or_else(|e| panic!("{what}: {e:?}"));
    let after = at.saturating_duration_since(since);
    assert!(
        after < bound,
        "{what}: served {after:?} after the release (bound {bound:?})"
    );
    g
}

/// A key of another type in place of each of the lock's six keys, while
/// the lock is held on both sides (a writer that also reads) and a writer
/// and a reader of another client wait: every call of a fresh handle and of
/// the holder (every acquire method, re-entries, inspection, force_unlock,
/// unlocks) fails with `WrongType` naming that key and writes nothing; the
/// waiters' client's heartbeat skips the lock and still refreshes its other
/// lock in the same call; the waiters already waiting fail the same way at
/// their next try; once the key is restored the lock works again, and the
/// holds whose unlocks were refused are still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_is_refused_by_name_by_every_call_and_nothing_is_written() {
    let srv = server();
    let c = client(&srv.url()).await;
    // The waiters' client: a heartbeat every 100 ms.
    let w = deadbolt_testkit::client_with(&srv.url(), |b| {
        preloaded(b).waiter_timeout(Duration::from_millis(300))
    })
    .await;
    // Fixed leases: nothing renews them while the key is bad.
    let lease = Duration::from_secs(120);
    for (i, suffix) in ["w", "fence", "r", "ro", "ww", "alive"].iter().enumerate() {
        let name = format!("wrong-{suffix}");
        let keys = keys_of(&c, &name);
        let bad = keys[i].clone();
        let channel = channel_of(&c, &name);
        let a = RwLock::new(&c, &name);
        let aw1 = a.write_lock().lock_with_lease(lease).await.unwrap();
        let ar1 = a.read_lock().lock_with_lease(lease).await.unwrap();
        let ar2 = a.read_lock().lock_with_lease(lease).await.unwrap();
        let aw2 = a.write_lock().lock_with_lease(lease).await.unwrap();
        let writer = writing(RwLock::new(&w, &name));
        let reader = reading(RwLock::new(&w, &name));
        // Another lock the same client's writer waits on.
        let other = format!("{name}-ok");
        let oa = RwLock::new(&c, &other);
        let og = oa.write_lock().lock_with_lease(lease).await.unwrap();
        let other_writer = writing(RwLock::new(&w, &other));
        until("the waiters wait", || async {
            a.inspect().await.unwrap().waiting_writers == 1
                && oa.inspect().await.unwrap().waiting_writers == 1
                && w.waiters() == 3
                && subscribers(&srv, &channel).await == 1
        })
        .await;
        // The marks' keys live 3 × 300 ms past the last heartbeat: keep
        // them from expiring during the checks below.
        for k in &keys[4..] {
            let _: i64 = cmd(&srv, &["PEXPIRE", k, "120000"]).await;
        }
        assert_eq!(snapshot(&srv, &name).await.len(), 6, "{suffix}");

        let saved = plant_list(&srv, &bad).await;
        let before = seen(&srv, &name, &bad).await;
        let sn = name.as_str();
        // The keys each call touches in this state (a holds both sides; a
        // writer and a reader of w wait): a call that never
        // touches a key does not refuse it, so each refuses those it touches.
        // Another owner's read meets the writer first and is refused or
        // registers on w alone; its try_write is refused after w, its
        // waiting writes mark ww and alive; the holder's reads re-enter
        // through r and ro, its writes through ww; inspection and
        // force_unlock check every key; a write unlock reads ww and w, a
        // read unlock r and ro.
        const ALL: &[&str] = &["w", "fence", "r", "ro", "ww", "alive"];
        const D_READ: &[&str] = &["w"];
        const D_TRY_WRITE: &[&str] = &["w"];
        const D_WRITE: &[&str] = &["w", "ww", "alive"];
        const A_READ: &[&str] = &["w", "r", "ro"];
        const A_WRITE: &[&str] = &["w", "ww"];
        const UNLOCK_WRITE: &[&str] = &["w", "ww"];
        const UNLOCK_READ: &[&str] = &["r", "ro"];
        // The waiters' next tries: the writer's as D_WRITE, the reader's
        // as D_READ; a waiter whose try never touches the key waits on.
        let writer_fails = D_WRITE.contains(suffix);
        let reader_fails = D_READ.contains(suffix);
        let d = RwLock::new(&c, &name);
        let (wait, l) = (Duration::from_secs(5), Duration::from_secs(10));
        refused!(&srv, sn, &before, &bad, *suffix;
            D_READ, "try_read" => d.read_lock().try_lock();
            D_READ, "try_read_for" => d.read_lock().try_lock_for(wait);
            D_READ, "try_read_with" => d.read_lock().try_lock_with(wait, l);
            D_READ, "read" => d.read_lock().lock();
            D_READ, "read_with_lease" => d.read_lock().lock_with_lease(l);
            D_TRY_WRITE, "try_write" => d.write_lock().try_lock();
            D_WRITE, "try_write_for" => d.write_lock().try_lock_for(wait);
            D_WRITE, "try_write_with" => d.write_lock().try_lock_with(wait, l);
            D_WRITE, "write" => d.write_lock().lock();
            D_WRITE, "write_with_lease" => d.write_lock().lock_with_lease(l);
            // The holder's re-entries on both sides.
            A_READ, "try_read (holder)" => a.read_lock().try_lock();
            A_READ, "read (holder)" => a.read_lock().lock();
            A_WRITE, "try_write (holder)" => a.write_lock().try_lock();
            A_WRITE, "write (holder)" => a.write_lock().lock();
            // Inspection and force.
            ALL, "inspect" => d.inspect();
            ALL, "is_locked" => d.is_locked();
            ALL, "is_write_locked" => d.is_write_locked();
            ALL, "reader_count" => d.reader_count();
            ALL, "remaining_ttl" => d.remaining_ttl();
            ALL, "force_unlock" => d.force_unlock();
        );

        // Heartbeats: the waiters' client refreshes its other lock (in the
        // same script call) and skips this one.
        let alive_other = keys_of(&w, &other)[5].clone();
        for _ in 0..2 {
            let seen: Option<f64> = cmd(&srv, &["ZSCORE", &alive_other, w.id()]).await;
            until("a heartbeat of the other lock", || async {
                let now: Option<f64> = cmd(&srv, &["ZSCORE", &alive_other, w.id()]).await;
                now > seen
            })
            .await;
        }
        if HEARTBEAT.contains(suffix) {
            assert!(
                snapshot(&srv, &name).await == before,
                "{bad}: a heartbeat wrote"
            );
        } else {
            // A heartbeat never touches this key: it refreshes this lock too.
            let seen_here: Option<f64> = cmd(&srv, &["ZSCORE", &keys[5], w.id()]).await;
            until("a heartbeat of this lock", || async {
                let now: Option<f64> = cmd(&srv, &["ZSCORE", &keys[5], w.id()]).await;
                now > seen_here
            })
            .await;
            assert!(
                seen(&srv, &name, &bad).await == before,
                "{bad}: a heartbeat wrote beyond alive"
            );
        }

        // The waiters already waiting try again on a message and fail the
        // same way when their try touches the key; the waiting writer's
        // release of its mark is refused too.
        let n: i64 = cmd(&srv, &["PUBLISH", &channel, "*"]).await;
        assert_eq!(n, 1);
        let writer = if writer_fails {
            let (_, r) = within("the waiting writer", writer).await.unwrap();
            assert_wrong_type(&format!("{bad}: the waiting writer"), r, &bad);
            None
        } else {
            Some(writer)
        };
        let reader = if reader_fails {
            let (_, r) = within("the waiting reader", reader).await.unwrap();
            assert_wrong_type(&format!("{bad}: the waiting reader"), r, &bad);
            None
        } else {
            Some(reader)
        };
        if writer.is_none() && reader.is_none() {
            assert!(w.releases_settled(HANG).await);
        }
        assert!(
            seen(&srv, &name, &bad).await == before,
            "{bad}: the failed waiters wrote"
        );

        // Unlocks of one hold of each side.
        refused!(&srv, sn, &before, &bad, *suffix;
            UNLOCK_WRITE, "unlock (write)" => aw2.unlock();
            UNLOCK_READ, "unlock (read)" => ar2.unlock();
        );

        // Restored: the refused unlocks left their holds, the others
        // release as usual, and the lock serves again.
        restore(&srv, &bad, saved).await;
        // The waiters that wait on end (restored: their releases go through).
        if let Some(t) = writer {
            t.abort();
        }
        if let Some(t) = reader {
            t.abort();
        }
        assert!(w.releases_settled(HANG).await);
        // Each unlock was refused or, for a key it never touches, not made:
        // both holds it names are there.
        let info = d.inspect().await.unwrap();
        assert_eq!(
            (info.writer.as_deref(), info.write_holds, info.readers),
            (Some(a.owner()), 2, 2),
            "{bad}: {info:?}"
        );
        aw1.unlock().await.unwrap();
        ar1.unlock().await.unwrap();
        let freed = d.force_unlock().await.unwrap();
        assert!(freed.writer && freed.readers == 1, "{bad}: {freed:?}");
        // The failed writer's mark stays behind (its release was refused)
        // and lapses with its client's liveness on the server clock.
        until("the failed writer's liveness lapsed", || async {
            let alive: Option<u64> = cmd(&srv, &["ZSCORE", &keys[5], w.id()]).await;
            let now = server_ms(&srv).await;
            alive.is_some_and(|a| a < now)
        })
        .await;
        let g = within("read after the repair", d.read_lock().lock())
            .await
            .unwrap();
        g.unlock().await.unwrap();
        let g = within("write after the repair", d.write_lock().lock())
            .await
            .unwrap();
        g.unlock().await.unwrap();
        assert!(!d.is_locked().await.unwrap());
        og.unlock().await.unwrap();
        let g = served(
            "the other lock's writer",
            other_writer,
            Instant::now(),
            HANG,
        )
        .await;
        g.unlock().await.unwrap();
    }
}

/// `extend` of a read hold whose lock has a key of another type among the
/// ones it renews (r, ro) says so, writes nothing and keeps the guard
/// `Active`; a watchdog renewal that meets it counts as failed for that hold
/// alone: the hold stays `Active` while its validity lasts, and a read hold
/// of another lock renewed in the same call goes on being renewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extending_a_read_hold_over_a_key_of_another_type_says_so_and_keeps_the_hold() {
    let srv = server();
    let c = client(&srv.url()).await;
    for (i, suffix) in [(2, "r"), (3, "ro")] {
        let name = format!("wrong-extend-{suffix}");
        let bad = keys_of(&c, &name)[i].clone();
        let rw = RwLock::new(&c, &name);
        let g = rw
            .read_lock()
            .lock_with_lease(Duration::from_secs(60))
            .await
            .unwrap();
        let saved = plant_list(&srv, &bad).await;
        let before = snapshot(&srv, &name).await;
        let r = within("extend", g.extend(Duration::from_secs(90))).await;
        assert!(snapshot(&srv, &name).await == before, "{bad}: extend wrote");
        assert_wrong_type(&format!("{bad}: extend"), r, &bad);
        assert_eq!(g.state(), LeaseState::Active, "{bad}");
        restore(&srv, &bad, saved).await;
        g.extend(Duration::from_secs(90)).await.unwrap();
        let ttl = rw.remaining_ttl().await.unwrap().unwrap();
        assert!(
            ttl > Duration::from_secs(80),
            "{bad}: not extended: {ttl:?}"
        );
        g.unlock().await.unwrap();
    }

    let wd = deadbolt_testkit::client_with(&srv.url(), |b| {
        preloaded(b).watchdog_timeout(Duration::from_millis(900))
    })
    .await;
    let gx = RwLock::new(&wd, "renew-x")
        .read_lock()
        .lock()
        .await
        .unwrap();
    let gy = RwLock::new(&wd, "renew-y")
        .read_lock()
        .lock()
        .await
        .unwrap();
    let bad = keys_of(&wd, "renew-x")[2].clone();
    let lost = gx.lost();
    let _ = plant_list(&srv, &bad).await;
    let planted = Instant::now();
    let valid = gx.valid_for();
    assert_eq!(within("x's lost()", lost).await, LeaseState::Lost);
    let after = planted.elapsed();
    assert!(
        after + Duration::from_millis(50) >= valid,
        "lost {after:?} after the key went bad, while still valid for {valid:?}"
    );
    assert_eq!(gy.state(), LeaseState::Active);
    until("y renewed after x was lost", || async {
        gy.valid_for() > Duration::from_millis(700)
    })
    .await;
    gy.unlock().await.unwrap();
}

/// The same for a write hold, whose renewal (`hold_renew.lua`) has one key,
/// the hold hash: `extend` says `WrongType` naming it and keeps the guard
/// `Active`, and the watchdog keeps the hold while its validity lasts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extending_a_write_hold_over_a_key_of_another_type_says_so_and_keeps_the_hold() {
    let srv = server();
    let c = client(&srv.url()).await;
    let name = "wrong-extend-w";
    let bad = keys_of(&c, name)[0].clone();
    let rw = RwLock::new(&c, name);
    let g = rw
        .write_lock()
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let saved = plant_list(&srv, &bad).await;
    let before = snapshot(&srv, name).await;
    let r = within("extend", g.extend(Duration::from_secs(90))).await;
    assert!(snapshot(&srv, name).await == before, "extend wrote");
    assert_wrong_type("extend of a write hold", r, &bad);
    assert_eq!(g.state(), LeaseState::Active);
    restore(&srv, &bad, saved).await;
    g.extend(Duration::from_secs(90)).await.unwrap();
    g.unlock().await.unwrap();

    let wd = deadbolt_testkit::client_with(&srv.url(), |b| {
        preloaded(b).watchdog_timeout(Duration::from_millis(900))
    })
    .await;
    let gx = RwLock::new(&wd, "renew-wx")
        .write_lock()
        .lock()
        .await
        .unwrap();
    let gy = RwLock::new(&wd, "renew-wy")
        .write_lock()
        .lock()
        .await
        .unwrap();
    let bad = keys_of(&wd, "renew-wx")[0].clone();
    let lost = gx.lost();
    let _ = plant_list(&srv, &bad).await;
    let planted = Instant::now();
    let valid = gx.valid_for();
    assert_eq!(within("x's lost()", lost).await, LeaseState::Lost);
    let after = planted.elapsed();
    assert!(
        after + Duration::from_millis(50) >= valid,
        "lost {after:?} after the key went bad, while still valid for {valid:?}"
    );
    assert_eq!(gy.state(), LeaseState::Active);
    gy.unlock().await.unwrap();
}

fn fast(b: ClientBuilder) -> ClientBuilder {
    preloaded(b).command_timeout(Duration::from_millis(300))
}

/// The server is frozen (SIGSTOP) for longer than the command timeout and a
/// renewal interval, shorter than every lease, while a writer holds, a
/// writer waits and readers of two clients wait behind it (one more reader
/// arrives during the pause). After the resume: the holds are intact and
/// renewed again; the holder's release goes to the waiting writer first
/// (write preference), promptly; the readers all get in together at the
/// next release, promptly. Their own sleep bounds are the 30 s leases and
/// the waiting writer's 20 s liveness.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_longer_than_the_command_timeout_loses_no_hold_no_preference_and_no_wake_up() {
    let srv = server();
    let hc = deadbolt_testkit::client_with(&srv.url(), |b| {
        fast(b).watchdog_timeout(Duration::from_secs(6))
    })
    .await;
    // Readers behind its waiting writer sleep up to that writer's liveness.
    let wc = deadbolt_testkit::client_with(&srv.url(), |b| {
        fast(b).waiter_timeout(Duration::from_secs(20))
    })
    .await;
    let rc = deadbolt_testkit::client_with(&srv.url(), fast).await;
    let name = "pause";
    let holder = RwLock::new(&hc, name);
    let w1 = holder
        .write_lock()
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    // Renewed every 2 s: the pause spans a renewal.
    let renewed = RwLock::new(&hc, "pause-renewed")
        .read_lock()
        .lock()
        .await
        .unwrap();
    let wl = RwLock::new(&wc, name);
    let writer_owner = wl.owner().to_string();
    let writer = writing(wl);
    until("the writer waits", || async {
        holder.inspect().await.unwrap().waiting_writers == 1
    })
    .await;
    let mut readers = Vec::new();
    for i in 0..4 {
        readers.push(reading(RwLock::new(
            if i % 2 == 0 { &wc } else { &rc },
            name,
        )));
    }
    until("everyone waits", || async {
        wc.waiters() + rc.waiters() == 5
    })
    .await;

    srv.pause();
    readers.push(reading(RwLock::new(&rc, name)));
    // The fault window: several command timeouts and a renewal interval.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    srv.resume();

    assert_eq!(w1.state(), LeaseState::Active);
    assert_eq!(renewed.state(), LeaseState::Active);
    until("the read hold renewed after the pause", || async {
        renewed.valid_for() > Duration::from_millis(4500)
    })
    .await;
    assert!(!writer.is_finished(), "the writer got a held lock");
    assert!(readers.iter().all(|r| !r.is_finished()));
    let released = Instant::now();
    within("the holder's unlock", w1.unlock()).await.unwrap();
    let wg = served(
        "the waiting writer",
        writer,
        released,
        Duration::from_secs(3),
    )
    .await;
    let info = holder.inspect().await.unwrap();
    assert_eq!(info.writer.as_deref(), Some(writer_owner.as_str()));
    assert_eq!(info.write_holds, 1, "tries of one attempt counted twice");
    assert_eq!(info.readers, 0);
    assert!(
        readers.iter().all(|r| !r.is_finished()),
        "a reader got in past the waiting writer"
    );
    let released = Instant::now();
    wg.unlock().await.unwrap();
    let mut guards = Vec::new();
    for r in readers {
        guards.push(served("a reader", r, released, Duration::from_secs(3)).await);
    }
    assert_eq!(holder.reader_count().await.unwrap(), 5);
    for g in guards {
        g.unlock().await.unwrap();
    }
    renewed.unlock().await.unwrap();
    assert!(!holder.is_locked().await.unwrap());
}

/// CLIENT KILL TYPE pubsub while readers of two clients wait behind a
/// writer: they subscribe again, and the writer's release wakes all of them
/// promptly. Then, while they read, a writer waits; the kill again; the last
/// reader's release wakes it promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_pubsub_connections_do_not_strand_readers_or_writers() {
    let srv = server();
    let hc = client(&srv.url()).await;
    let wc = client(&srv.url()).await;
    let rc = client(&srv.url()).await;
    let name = "kill";
    let channel = channel_of(&hc, name);
    let holder = RwLock::new(&hc, name);
    let w1 = holder.write_lock().lock().await.unwrap();
    let mut readers = Vec::new();
    for i in 0..4 {
        readers.push(reading(RwLock::new(
            if i % 2 == 0 { &wc } else { &rc },
            name,
        )));
    }
    until("the readers wait and listen", || async {
        wc.waiters() + rc.waiters() == 4 && subscribers(&srv, &channel).await == 2
    })
    .await;
    assert!(kill_pubsub(&srv).await >= 2, "no pubsub connection killed");
    until("subscribed again", || async {
        subscribers(&srv, &channel).await == 2
    })
    .await;
    let released = Instant::now();
    w1.unlock().await.unwrap();
    let mut guards = Vec::new();
    for r in readers {
        guards.push(served("a reader", r, released, Duration::from_secs(2)).await);
    }

    let writer = writing(RwLock::new(&wc, name));
    until("the writer waits", || async {
        holder.inspect().await.unwrap().waiting_writers == 1 && wc.waiters() == 1
    })
    .await;
    assert!(kill_pubsub(&srv).await >= 1, "no pubsub connection killed");
    until("subscribed again", || async {
        subscribers(&srv, &channel).await >= 1
    })
    .await;
    let released = Instant::now();
    for g in guards {
        g.unlock().await.unwrap();
    }
    let g = served("the writer", writer, released, Duration::from_secs(2)).await;
    g.unlock().await.unwrap();
    assert!(!holder.is_locked().await.unwrap());
}

/// Each of the lock's three messages falls while the waiters' subscriber
/// connection is down: `w` (a writer's release), `r` (the last reader's
/// release) and `m` (the last waiting writer gave up). The waiters' client
/// goes through a proxy that refuses new connections while its subscriber
/// connection is killed and the message is published, so the message is
/// certainly lost; once the proxy lets it reconnect, the wake-up that
/// follows the new subscription must make every waiter ask, promptly
/// (their own bounds are 20 s or more).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_falls_while_the_subscriber_is_down_still_wakes_the_waiters() {
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let hc = client(&srv.url()).await;
    let wc = deadbolt_testkit::client_with(&proxy.url(), |b| {
        preloaded(b).waiter_timeout(Duration::from_secs(20))
    })
    .await;
    let bound = Duration::from_secs(3);
    for round in 0..6 {
        let name = format!("gap-{round}");
        let channel = channel_of(&wc, &name);
        let held = RwLock::new(&hc, &name);
        // Cut the waiters' subscriber connection and keep it down.
        let cut = || async {
            proxy.set_refuse(true);
            assert!(kill_pubsub(&srv).await >= 1, "round {round}: none killed");
            assert_eq!(subscribers(&srv, &channel).await, 0);
        };
        let (waiters, released) = match round % 3 {
            0 => {
                let g = held.write_lock().lock().await.unwrap();
                let waiters = vec![
                    taken(RwLock::new(&wc, &name), false),
                    taken(RwLock::new(&wc, &name), true),
                    taken(RwLock::new(&wc, &name), false),
                ];
                until("three wait and listen", || async {
                    wc.waiters() == 3 && subscribers(&srv, &channel).await == 1
                })
                .await;
                cut().await;
                let released = Instant::now();
                g.unlock().await.unwrap();
                (waiters, released)
            }
            1 => {
                let g = held.read_lock().lock().await.unwrap();
                let waiters = vec![taken(RwLock::new(&wc, &name), true)];
                until("the writer waits and listens", || async {
                    wc.waiters() == 1 && subscribers(&srv, &channel).await == 1
                })
                .await;
                cut().await;
                let released = Instant::now();
                g.unlock().await.unwrap();
                (waiters, released)
            }
            _ => {
                let g = held.read_lock().lock().await.unwrap();
                let wl = RwLock::new(&wc, &name);
                let writer = tokio::spawn(async move { wl.write_lock().lock().await });
                until("the writer waits", || async {
                    held.inspect().await.unwrap().waiting_writers == 1
                })
                .await;
                let readers = vec![
                    taken(RwLock::new(&wc, &name), false),
                    taken(RwLock::new(&wc, &name), false),
                ];
                until("the readers wait behind it and listen", || async {
                    wc.waiters() == 3 && subscribers(&srv, &channel).await == 1
                })
                .await;
                cut().await;
                let released = Instant::now();
                writer.abort();
                assert!(writer.await.unwrap_err().is_cancelled());
                // The releaser removes the mark (on the command connection,
                // still up) and publishes `m` to nobody.
                until("the mark is gone", || async {
                    held.inspect().await.unwrap().waiting_writers == 0
                })
                .await;
                g.unlock().await.unwrap();
                (readers, released)
            }
        };
        assert!(
            waiters.iter().all(|w| !w.is_finished()),
            "round {round}: a waiter heard the message"
        );
        proxy.set_refuse(false);
        for w in waiters {
            let at = within("a waiter", w).await.unwrap();
            let after = at.saturating_duration_since(released);
            assert!(
                after < bound,
                "round {round}: a waiter got in {after:?} after the message"
            );
        }
        assert!(wc.releases_settled(HANG).await);
        let info = held.inspect().await.unwrap();
        assert!(
            info.writer.is_none() && info.readers == 0 && info.waiting_writers == 0,
            "round {round}: {info:?}"
        );
    }
}

async fn script_flush(srv: &RedisServer) {
    let () = cmd(srv, &["SCRIPT", "FLUSH"]).await;
}

/// SCRIPT FLUSH between any two calls (and before a waiting writer's
/// heartbeat) is transparent; flushes racing the calls of two clients
/// cost at most an `Unavailable` unlock that the releaser finishes, and
/// leave nothing held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_between_and_during_calls_is_transparent() {
    let srv = server();
    let c = client(&srv.url()).await;
    let w = deadbolt_testkit::client_with(&srv.url(), |b| {
        preloaded(b).waiter_timeout(Duration::from_millis(600))
    })
    .await;
    let name = "flush";
    let alive = keys_of(&c, name)[5].clone();
    let a = RwLock::new(&c, name);
    // Every call bounded: without the reload after NOSCRIPT, a waiting
    // acquire would retry for ever.
    for _ in 0..2 {
        script_flush(&srv).await;
        let r1 = within("read", a.read_lock().lock()).await.unwrap();
        script_flush(&srv).await;
        let r2 = within("try_read", a.read_lock().try_lock())
            .await
            .unwrap()
            .expect("re-entry");
        script_flush(&srv).await;
        assert_eq!(within("reader_count", a.reader_count()).await.unwrap(), 2);
        script_flush(&srv).await;
        within("extend", r1.extend(Duration::from_secs(40)))
            .await
            .unwrap();
        script_flush(&srv).await;
        let wl = RwLock::new(&w, name);
        let writer_owner = wl.owner().to_string();
        let writer = writing(wl);
        until("the writer waits", || async {
            a.inspect().await.unwrap().waiting_writers == 1
        })
        .await;
        // Its heartbeat (every 200 ms) runs after a flush too.
        let seen: Option<f64> = cmd(&srv, &["ZSCORE", &alive, w.id()]).await;
        script_flush(&srv).await;
        until("a heartbeat after the flush", || async {
            let now: Option<f64> = cmd(&srv, &["ZSCORE", &alive, w.id()]).await;
            now > seen
        })
        .await;
        script_flush(&srv).await;
        within("unlock", r1.unlock()).await.unwrap();
        script_flush(&srv).await;
        let released = Instant::now();
        within("unlock", r2.unlock()).await.unwrap();
        let wg = served("the writer", writer, released, Duration::from_secs(3)).await;
        script_flush(&srv).await;
        within("extend", wg.extend(Duration::from_secs(40)))
            .await
            .unwrap();
        script_flush(&srv).await;
        let info = within("inspect", a.inspect()).await.unwrap();
        assert_eq!(info.writer.as_deref(), Some(writer_owner.as_str()));
        script_flush(&srv).await;
        let ttl = within("remaining_ttl", a.remaining_ttl()).await.unwrap();
        assert!(ttl.unwrap() > Duration::from_secs(30));
        script_flush(&srv).await;
        within("unlock", wg.unlock()).await.unwrap();
        script_flush(&srv).await;
        let freed = within("force_unlock", a.force_unlock()).await.unwrap();
        assert!(!freed.writer && freed.readers == 0);
        script_flush(&srv).await;
        assert!(!within("is_locked", a.is_locked()).await.unwrap());
    }

    // Flushes racing the calls: a reader and a writer loop on each client.
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
    for (cl, write) in [(&c, false), (&c, true), (&w, false), (&w, true)] {
        let l = RwLock::new(cl, name);
        tasks.push(tokio::spawn(async move {
            for _ in 0..20 {
                // A flush between the script's load and its call refuses
                // it unrun (NOSCRIPT): an unlock then is Unavailable, and
                // the releaser finishes it.
                let r = if write {
                    l.write_lock().lock().await.unwrap().unlock().await
                } else {
                    l.read_lock().lock().await.unwrap().unlock().await
                };
                match r {
                    Ok(()) | Err(Error::Unavailable(_)) => {}
                    Err(e) => panic!("unlock: {e:?}"),
                }
            }
        }));
    }
    for t in tasks {
        within("acquire/unlock under flushes", t).await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(within("the flusher", flusher).await.unwrap() > 0);
    assert!(c.releases_settled(HANG).await && w.releases_settled(HANG).await);
    let info = a.inspect().await.unwrap();
    assert!(
        info.writer.is_none() && info.readers == 0 && info.waiting_writers == 0,
        "{info:?}"
    );
    let left = persistent_keys(&srv).await;
    assert!(left.is_empty(), "{left:?}");
}

/// A restart of a server without persistence while a writer holds one lock
/// (with a writer and readers waiting) and a reader holds another (with a
/// writer waiting). The server forgets every hold, mark and fencing
/// counter. The waiters ride it out and get their locks; the writers'
/// tokens are still above every earlier one (the counter's clock floor);
/// the old guards turn `Lost` at their next renewal and their unlocks say
/// `NotHeld`; nothing panics and nothing stays held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_without_persistence_lets_waiters_through_and_old_guards_learn_it() {
    let mut srv = server();
    let hc = deadbolt_testkit::client_with(&srv.url(), |b| {
        preloaded(b).watchdog_timeout(Duration::from_secs(3))
    })
    .await;
    let wc = client(&srv.url()).await;
    let holder = RwLock::new(&hc, "restart");
    let w1 = holder.write_lock().lock().await.unwrap();
    let t1 = w1.fencing_token();
    let w1_lost = w1.lost();
    // The second lock had a writer before: its counter has a token too.
    let second = RwLock::new(&hc, "restart-read");
    let t0 = second.write_lock().lock().await.unwrap();
    let t0_token = t0.fencing_token();
    t0.unlock().await.unwrap();
    let r_old = second.read_lock().lock().await.unwrap();
    let r_lost = r_old.lost();
    let writer = tokened(RwLock::new(&wc, "restart"));
    until("the writer waits", || async {
        holder.inspect().await.unwrap().waiting_writers == 1
    })
    .await;
    let readers = [
        taken(RwLock::new(&wc, "restart"), false),
        taken(RwLock::new(&wc, "restart"), false),
    ];
    let second_writer = tokened(RwLock::new(&wc, "restart-read"));
    until("everyone waits", || async {
        wc.waiters() == 4 && second.inspect().await.unwrap().waiting_writers == 1
    })
    .await;

    tokio::task::block_in_place(|| srv.restart()).expect("restart redis-server");

    assert_eq!(within("w1's lost()", w1_lost).await, LeaseState::Lost);
    assert_eq!(within("r_old's lost()", r_lost).await, LeaseState::Lost);
    // The waiters are served in whatever order they ask; each lets go.
    let t2 = within("the waiting writer", writer).await.unwrap();
    assert!(t2 > t1, "token {t2} after {t1}");
    for r in readers {
        within("a waiting reader", r).await.unwrap();
    }
    let t3 = within("the second lock's writer", second_writer)
        .await
        .unwrap();
    assert!(t3 > t0_token, "token {t3} after {t0_token}");
    assert!(matches!(w1.unlock().await, Err(Error::NotHeld)));
    assert!(matches!(r_old.unlock().await, Err(Error::NotHeld)));
    // The old holder's handles work again.
    let g = within("the old holder writes", holder.write_lock().lock())
        .await
        .unwrap();
    assert!(g.fencing_token() > t1);
    g.unlock().await.unwrap();
    let g = within("the old reader reads", second.read_lock().lock())
        .await
        .unwrap();
    g.unlock().await.unwrap();
    assert!(hc.releases_settled(HANG).await && wc.releases_settled(HANG).await);
    assert!(!holder.is_locked().await.unwrap());
    assert!(!second.is_locked().await.unwrap());
    let left = persistent_keys(&srv).await;
    assert!(left.is_empty(), "{left:?}");
}

/// Replies come later than the client's command timeout (a proxy delays
/// them): every read and write acquire ends `Indeterminate` or is
/// cancelled, though the server ran it and granted it or marked a waiting
/// writer. The releases-by-attempt still run on the server: nothing stays
/// held or marked, while the replies are still late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_cut_short_by_late_replies_leave_nothing_held() {
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let direct = client(&srv.url()).await;
    // Leases and marks far longer than any bound here: only the releases
    // can clear them in time.
    let slow = deadbolt_testkit::client_with(&proxy.url(), |b| {
        preloaded(b)
            .command_timeout(Duration::from_millis(200))
            .watchdog_timeout(Duration::from_secs(120))
            .waiter_timeout(Duration::from_secs(60))
    })
    .await;
    let name = "late";
    let probe = RwLock::new(&direct, name);
    let free = || async {
        let info = probe.inspect().await.unwrap();
        info.writer.is_none() && info.readers == 0 && info.waiting_writers == 0
    };
    proxy.set_reply_delay(Duration::from_millis(500));

    // A free lock: the first write and every read before it are granted on
    // the server; later writes are refused or marked.
    let lease = Duration::from_secs(60);
    let wait = Duration::from_millis(300);
    let mut tasks = Vec::new();
    for i in 0..10u64 {
        let l = RwLock::new(&slow, name);
        tasks.push(tokio::spawn(async move {
            let cut = Duration::from_millis(100 + 40 * i);
            let indeterminate = match i {
                0 => l.read_lock().try_lock().await.map(|_| ()),
                1 => l.write_lock().try_lock().await.map(|_| ()),
                2 => l.read_lock().try_lock_for(wait).await.map(|_| ()),
                3 => l.write_lock().try_lock_for(wait).await.map(|_| ()),
                4 => l.read_lock().try_lock_with(wait, lease).await.map(|_| ()),
                5 => l.write_lock().try_lock_with(wait, lease).await.map(|_| ()),
                6 => {
                    let r = tokio::time::timeout(cut, l.read_lock().lock()).await;
                    assert!(r.is_err(), "read {i}: {r:?}");
                    return;
                }
                7 => {
                    let r = tokio::time::timeout(cut, l.write_lock().lock()).await;
                    assert!(r.is_err(), "write {i}: {r:?}");
                    return;
                }
                8 => {
                    let r = tokio::time::timeout(cut, l.read_lock().lock_with_lease(lease)).await;
                    assert!(r.is_err(), "read_with_lease {i}: {r:?}");
                    return;
                }
                _ => {
                    let r = tokio::time::timeout(cut, l.write_lock().lock_with_lease(lease)).await;
                    assert!(r.is_err(), "write_with_lease {i}: {r:?}");
                    return;
                }
            };
            assert!(
                matches!(&indeterminate, Err(e) if e.is_indeterminate()),
                "acquire {i}: {indeterminate:?}"
            );
        }));
    }
    for t in tasks {
        within("a late acquire", t).await.unwrap();
    }
    until("nothing held while replies are still late", free).await;

    // Contended: readers and writers of the slow client wait (their tries
    // keep timing out; the writers' marks are on the server). Two are
    // cancelled while waiting; then the lock is released, the server
    // grants the others, and they are cancelled too.
    let g = probe.write_lock().lock_with_lease(lease).await.unwrap();
    let mut waiters = Vec::new();
    for i in 0..6 {
        let l = RwLock::new(&slow, name);
        waiters.push(if i % 2 == 0 {
            tokio::spawn(async move { l.read_lock().lock().await.map(|_| ()) })
        } else {
            tokio::spawn(async move { l.write_lock().lock().await.map(|_| ()) })
        });
    }
    until("three writers marked", || async {
        probe.inspect().await.unwrap().waiting_writers == 3
    })
    .await;
    for w in waiters.drain(..2) {
        w.abort();
        assert!(w.await.unwrap_err().is_cancelled());
    }
    until("one writer's mark went", || async {
        probe.inspect().await.unwrap().waiting_writers == 2
    })
    .await;
    g.unlock().await.unwrap();
    until("the slow client granted on the server", || async {
        let info = probe.inspect().await.unwrap();
        info.writer.is_some() || info.readers > 0
    })
    .await;
    for w in waiters {
        assert!(!w.is_finished(), "a late reply was taken for a grant");
        w.abort();
        assert!(w.await.unwrap_err().is_cancelled());
    }
    until("nothing held after the cancellations", free).await;

    // Replies on time again: the releaser settles, and the slow client
    // works.
    proxy.set_reply_delay(Duration::ZERO);
    assert!(slow.releases_settled(HANG).await);
    assert!(free().await);
    let l = RwLock::new(&slow, name);
    within("write on time", l.write_lock().lock())
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    within("read on time", l.read_lock().lock())
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    assert!(free().await);
    let left = persistent_keys(&srv).await;
    assert!(left.is_empty(), "{left:?}");
}

/// A writer that also reads (a downgrade in progress) loses its write hold
/// to its lease (no message is published for that) while a writer and
/// readers of other handles wait. It keeps reading, may read again, may
/// not upgrade; the waiting writer still goes before the new readers, at
/// once when the last read hold goes; the stale write guard's unlock says
/// `NotHeld` and takes nothing from the new writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downgraded_writer_whose_write_lease_ends_keeps_reading_and_the_waiting_writer_goes_first(
) {
    let srv = server();
    let c = client(&srv.url()).await;
    // Readers behind its mark sleep up to its liveness: 20 s.
    let wc = deadbolt_testkit::client_with(&srv.url(), |b| {
        preloaded(b).waiter_timeout(Duration::from_secs(20))
    })
    .await;
    let name = "downgrade";
    let a = RwLock::new(&c, name);
    let aw = a
        .write_lock()
        .lock_with_lease(Duration::from_millis(800))
        .await
        .unwrap();
    let ar = a.read_lock().lock().await.unwrap();
    let wl = RwLock::new(&wc, name);
    let writer_owner = wl.owner().to_string();
    let writer = writing(wl);
    until("the writer waits", || async {
        a.inspect().await.unwrap().waiting_writers == 1
    })
    .await;
    let readers = [
        reading(RwLock::new(&c, name)),
        reading(RwLock::new(&wc, name)),
    ];
    until("the readers wait", || async {
        c.waiters() + wc.waiters() == 3
    })
    .await;
    assert_eq!(
        within("the write lease ends", aw.lost()).await,
        LeaseState::Lost
    );
    until("the write hold is gone on the server", || async {
        !a.is_write_locked().await.unwrap()
    })
    .await;
    assert_eq!(ar.state(), LeaseState::Active);
    assert_eq!(a.reader_count().await.unwrap(), 1);
    // It reads again beside the waiting writer, and may not upgrade.
    let ar2 = within("a re-entered read", a.read_lock().lock())
        .await
        .unwrap();
    assert!(matches!(
        a.write_lock().try_lock().await,
        Err(Error::UpgradeNotSupported)
    ));
    assert!(matches!(
        within("write", a.write_lock().lock()).await,
        Err(Error::UpgradeNotSupported)
    ));
    assert!(!writer.is_finished());
    ar2.unlock().await.unwrap();
    let released = Instant::now();
    ar.unlock().await.unwrap();
    // Its own bound: the read lease (30 s).
    let wg = served(
        "the waiting writer",
        writer,
        released,
        Duration::from_secs(3),
    )
    .await;
    assert!(
        readers.iter().all(|r| !r.is_finished()),
        "a reader got in past the waiting writer"
    );
    assert!(matches!(aw.unlock().await, Err(Error::NotHeld)));
    let info = a.inspect().await.unwrap();
    assert_eq!(info.writer.as_deref(), Some(writer_owner.as_str()));
    assert_eq!(info.write_holds, 1);
    let released = Instant::now();
    wg.unlock().await.unwrap();
    for r in readers {
        served("a reader", r, released, Duration::from_secs(3))
            .await
            .unlock()
            .await
            .unwrap();
    }
    assert!(!a.is_locked().await.unwrap());
}

/// A client process that dies: its own runtime on its own thread, where
/// it reads `reads` and waits to write `writes` (each busy) until
/// [`Doomed::kill`] drops the runtime: no unlock, no release, no renewal,
/// no heartbeat from then on.
struct Doomed {
    ready: Option<tokio::sync::oneshot::Receiver<()>>,
    die: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Doomed {
    fn start(
        url: String,
        lease: Duration,
        wt: Duration,
        reads: Vec<String>,
        writes: Vec<String>,
    ) -> Doomed {
        let (ready_tx, ready) = tokio::sync::oneshot::channel::<()>();
        let (die, die_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let c = deadbolt_testkit::client_with(&url, |b| {
                    preloaded(b).watchdog_timeout(lease).waiter_timeout(wt)
                })
                .await;
                let mut held = Vec::new();
                for n in &reads {
                    held.push(RwLock::new(&c, n).read_lock().lock().await.unwrap());
                }
                for n in &writes {
                    let l = RwLock::new(&c, n);
                    tokio::spawn(async move { l.write_lock().lock().await });
                }
                let _ = ready_tx.send(());
                let _ = die_rx.await;
                // Dies holding: nothing is released.
                std::mem::forget(held);
                std::mem::forget(c);
            });
            drop(rt);
        });
        Doomed {
            ready: Some(ready),
            die,
            thread,
        }
    }

    async fn ready(&mut self) {
        let ready = self.ready.take().expect("ready once");
        within("the doomed process is ready", ready).await.unwrap();
    }

    /// Kill it; returns when it is dead.
    fn kill(self) -> Instant {
        self.die.send(()).unwrap();
        tokio::task::block_in_place(|| self.thread.join()).expect("the doomed thread");
        Instant::now()
    }
}

/// A process dies while it reads four locks: the writer waiting behind
/// each read hold gets in when that read lease ends (no message ever comes;
/// its own sleep is bounded by the longest read lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_processes_read_hold_keeps_a_writer_out_no_longer_than_its_lease() {
    let srv = server();
    let live = client(&srv.url()).await;
    let lease = Duration::from_millis(1500);
    let names: Vec<String> = (0..4).map(|i| format!("dead-reader-{i}")).collect();
    let mut doomed = Doomed::start(
        srv.url(),
        lease,
        Duration::from_secs(5),
        names.clone(),
        vec![],
    );
    doomed.ready().await;
    let writers: Vec<_> = names
        .iter()
        .map(|n| writing(RwLock::new(&live, n)))
        .collect();
    until("the writers wait", || async {
        live.waiters() == names.len()
    })
    .await;
    assert!(writers.iter().all(|w| !w.is_finished()));
    let died = doomed.kill();
    for w in writers {
        served("a writer", w, died, lease + Duration::from_secs(2))
            .await
            .unlock()
            .await
            .unwrap();
    }
    for n in &names {
        assert!(!RwLock::new(&live, n).is_locked().await.unwrap());
    }
}

/// A process dies while its writers wait (marked) on locks other clients
/// read: readers waiting behind those marks get in once the dead client's
/// liveness lapses (`waiter_timeout`: "a dead writer's mark is ignored
/// within waiter_timeout"), not at their own bound (the watchdog timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_behind_a_dead_processes_waiting_writers_get_in_within_waiter_timeout() {
    let srv = server();
    // The readers' own bound, were they to oversleep: 10 s (busy replies
    // with pttl 0 once made them sleep this long).
    let live = deadbolt_testkit::client_with(&srv.url(), |b| {
        preloaded(b).watchdog_timeout(Duration::from_secs(10))
    })
    .await;
    let wt = Duration::from_millis(1000);
    for round in 0..3 {
        let names: Vec<String> = (0..12).map(|i| format!("dead-mark-{round}-{i}")).collect();
        // On each lock a live reader holds, so the dead writer waits.
        let mut holds = Vec::new();
        for n in &names {
            holds.push(RwLock::new(&live, n).read_lock().lock().await.unwrap());
        }
        let mut doomed =
            Doomed::start(srv.url(), Duration::from_secs(5), wt, vec![], names.clone());
        doomed.ready().await;
        let probes: Vec<RwLock> = names.iter().map(|n| RwLock::new(&live, n)).collect();
        until("the doomed writers wait", || async {
            for p in &probes {
                if p.inspect().await.unwrap().waiting_writers != 1 {
                    return false;
                }
            }
            true
        })
        .await;
        // Several readers per lock: a read grant publishes nothing, so a
        // reader that oversleeps is woken by nobody.
        let readers: Vec<_> = names
            .iter()
            .flat_map(|n| (0..4).map(|_| reading(RwLock::new(&live, n))))
            .collect();
        until("the readers wait behind the marks", || async {
            live.waiters() == 4 * names.len()
        })
        .await;
        let died = doomed.kill();
        for r in readers {
            served(
                "a reader behind a dead mark",
                r,
                died,
                wt + Duration::from_secs(2),
            )
            .await
            .unlock()
            .await
            .unwrap();
        }
        for h in holds {
            h.unlock().await.unwrap();
        }
    }
}

/// A writer's fixed lease runs out unreleased (its holder is gone; no
/// message is ever published) while one waiter, a reader or a writer,
/// waits on each of many locks: it gets in when the lease ends, whatever
/// millisecond its try lands in, not at its own bound (the watchdog
/// timeout). One waiter per lock: the release of a second one would wake a
/// waiter that overslept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_get_in_when_an_unreleased_write_lease_ends() {
    let srv = server();
    let c = client(&srv.url()).await;
    // The waiters' own bound, were they to oversleep: 10 s (busy replies
    // with pttl 0 once made them sleep this long).
    let wc = deadbolt_testkit::client_with(&srv.url(), |b| {
        preloaded(b).watchdog_timeout(Duration::from_secs(10))
    })
    .await;
    let lease = Duration::from_millis(300);
    for round in 0..3 {
        let mut waiters = Vec::new();
        for i in 0..24 {
            let name = format!("ends-{round}-{i}");
            let g = RwLock::new(&c, &name)
                .write_lock()
                .lock_with_lease(lease)
                .await
                .unwrap();
            let end = Instant::now() + lease;
            // The holder is gone: no unlock, no release in the background.
            std::mem::forget(g);
            let w = taken(RwLock::new(&wc, &name), i % 2 == 1);
            waiters.push((name, end, w));
        }
        for (name, end, w) in waiters {
            let at = within("a waiter", w).await.unwrap();
            let after = at.saturating_duration_since(end);
            assert!(
                after < Duration::from_secs(2),
                "{name}: a waiter got in {after:?} after the lease ended"
            );
        }
    }
}

/// Releases whose reply is lost (the proxy withholds it, then resets the
/// connection): the unlock says `Indeterminate` and the guard `Unknown`;
/// the release did run, so the waiters it wakes get in at once, and the
/// releaser's retry changes nothing. First the last reader's release (a
/// waiting writer), then a writer's (waiting readers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlocks_whose_reply_is_lost_still_wake_the_waiters() {
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let pc = deadbolt_testkit::client_with(&proxy.url(), fast).await;
    let wc = client(&srv.url()).await;
    let name = "unconfirmed";
    let probe = RwLock::new(&wc, name);
    let r = RwLock::new(&pc, name).read_lock().lock().await.unwrap();
    let lost = r.lost();
    let writer = writing(RwLock::new(&wc, name));
    until("the writer waits", || async {
        probe.inspect().await.unwrap().waiting_writers == 1
    })
    .await;
    let sha = deadbolt_rwlock::scripts::RW_READ_RELEASE.sha().to_string();
    proxy.drop_reply_matching(sha.as_bytes(), 1, Duration::from_millis(600));
    let released = Instant::now();
    let u = r.unlock().await;
    assert!(matches!(u, Err(Error::Indeterminate(_))), "{u:?}");
    assert_eq!(within("lost()", lost).await, LeaseState::Unknown);
    // Its own bound: the read lease (30 s).
    let wg = served("the writer", writer, released, Duration::from_secs(3)).await;
    assert!(pc.releases_settled(HANG).await);
    assert_eq!(probe.reader_count().await.unwrap(), 0);
    wg.unlock().await.unwrap();

    let w = within("write", RwLock::new(&pc, name).write_lock().lock())
        .await
        .unwrap();
    let lost = w.lost();
    let readers = [
        reading(RwLock::new(&wc, name)),
        reading(RwLock::new(&wc, name)),
    ];
    until("the readers wait", || async { wc.waiters() == 2 }).await;
    let sha = deadbolt_rwlock::scripts::RW_WRITE_RELEASE.sha().to_string();
    proxy.drop_reply_matching(sha.as_bytes(), 1, Duration::from_millis(600));
    let released = Instant::now();
    let u = w.unlock().await;
    assert!(matches!(u, Err(Error::Indeterminate(_))), "{u:?}");
    assert_eq!(within("lost()", lost).await, LeaseState::Unknown);
    for r in readers {
        served("a reader", r, released, Duration::from_secs(3))
            .await
            .unlock()
            .await
            .unwrap();
    }
    assert!(pc.releases_settled(HANG).await);
    assert!(!probe.is_locked().await.unwrap());
    // The client whose connection was reset works again.
    let g = within("write again", RwLock::new(&pc, name).write_lock().lock())
        .await
        .unwrap();
    g.unlock().await.unwrap();
}
