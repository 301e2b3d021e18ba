//! MultiLock and Redlock tried as an adversary would, against real
//! redis-server processes: keys of another type on one part (every
//! position, both the one-script path and the part-by-part path), a server
//! out of memory, parts on a paused or stopped server, acquires cancelled at
//! random points under late replies, a part lost behind the guard's back;
//! Redlock with servers restarted empty while held, leases too short for the
//! way to a majority, a blackholed server, and fencing tokens across holders
//! and restarts.

use deadbolt_core::Acquire as _;
use deadbolt_core::HoldGuard as _;
use std::sync::Arc;
use std::time::Duration;

use deadbolt_core::{
    drift, Client, ClientBuilder, Error, LeaseMode, LeaseState, Lockable, WaitMode,
};
use deadbolt_fair::FairLock;
use deadbolt_lock::Lock;
use deadbolt_multilock::{MultiGuard, MultiLock, Redlock, RedlockGuard};
use deadbolt_rwlock::RwLock;
use deadbolt_testkit::support::{
    cmd, fill_memory, plant_list, server, snapshot, until, within, HANG,
};
use deadbolt_testkit::{FaultProxy, RedisServer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

fn preloaded(b: ClientBuilder) -> ClientBuilder {
    b.preload(deadbolt_multilock::SCRIPTS)
        .preload(deadbolt_lock::SCRIPTS)
}

async fn client(url: &str) -> Client {
    deadbolt_testkit::client_with(url, preloaded).await
}

async fn client_with(url: &str, watchdog: Duration, command: Duration) -> Client {
    deadbolt_testkit::client_with(url, |b| {
        preloaded(b)
            .watchdog_timeout(watchdog)
            .command_timeout(command)
    })
    .await
}

/// The kinds of lock a multi-lock can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Fair,
    Write,
}

const KINDS: [Kind; 3] = [Kind::Plain, Kind::Fair, Kind::Write];

/// A new handle (a new owner) on lock `name` of `kind`.
fn part(c: &Client, kind: Kind, name: &str) -> Arc<dyn Lockable> {
    match kind {
        Kind::Plain => Arc::new(Lock::new(c, name)),
        Kind::Fair => Arc::new(FairLock::new(c, name)),
        Kind::Write => Arc::new(RwLock::new(c, name).write_lock()),
    }
}

/// The hold hash of lock `name` of `kind` (what a hold lives in).
fn main_key(c: &Client, kind: Kind, name: &str) -> String {
    part(c, kind, name).lock_key().unwrap()
}

/// The fencing counter of lock `name`: its hash slot's, whatever the kind.
fn fence_key(c: &Client, kind: Kind, name: &str) -> String {
    let _ = kind;
    c.keys("lock", name).unwrap().fence().to_string()
}

/// `<prefix>-0`, `<prefix>-1`, `<prefix>-2`: their keys sort in this order,
/// which is the order a multi-lock takes its parts in.
fn names(prefix: &str) -> Vec<String> {
    (0..3).map(|i| format!("{prefix}-{i}")).collect()
}

fn strs(names: &[String]) -> Vec<&str> {
    names.iter().map(String::as_str).collect()
}

/// A multi-lock over `names[i]` of `kinds[i]`, all on `c`.
fn mixed(c: &Client, kinds: &[Kind], names: &[String]) -> MultiLock {
    MultiLock::new(
        kinds
            .iter()
            .zip(names)
            .map(|(k, n)| part(c, *k, n))
            .collect(),
    )
}

async fn exists(srv: &RedisServer, key: &str) -> bool {
    let n: i64 = cmd(srv, &["EXISTS", key]).await;
    n == 1
}

/// The key prefix of every lock whose name starts with `name_prefix`.
fn prefix_of(name_prefix: &str) -> String {
    format!("deadbolt:{{{name_prefix}")
}

/// Keys starting with `prefix` that are a hold or a queue entry: a lock's
/// hold hash (`:lock`, `:fair`, `:rw`), a fair lock's queue, a waiting
/// writer's mark. Fencing counters and other bookkeeping are not holds.
async fn holds_left(srv: &RedisServer, prefix: &str) -> Vec<String> {
    let keys: Vec<String> = cmd(srv, &["KEYS", &format!("{prefix}*")]).await;
    let mut left: Vec<String> = keys
        .into_iter()
        .filter(|k| {
            [
                ":lock", ":fair", ":rw", ":fair:q", ":fair:qo", ":rw:ww", ":rw:r",
            ]
            .iter()
            .any(|s| k.ends_with(s))
        })
        .collect();
    left.sort();
    left
}

/// Another owner (a new handle on `c`) can take lock `name` of `kind` at
/// once, and gives it back.
async fn free_for_another(c: &Client, kind: Kind, name: &str) -> bool {
    let p = part(c, kind, name);
    match p
        .acquire_hold(LeaseMode::Fixed(Duration::from_secs(30)), WaitMode::Try)
        .await
        .unwrap()
    {
        Some(h) => {
            h.unlock().await.unwrap();
            true
        }
        None => false,
    }
}

const ACQUIRES: [&str; 5] = [
    "try_lock",
    "try_lock_for",
    "lock",
    "lock_with_lease",
    "try_lock_with",
];

/// Acquire `m` with the acquire method `ACQUIRES[how]` (bounded by
/// `within`); the waiting ones wait up to 2 s.
async fn acquire_by(m: &MultiLock, how: usize) -> deadbolt_core::Result<Option<MultiGuard>> {
    let what = ACQUIRES[how];
    let wait = Duration::from_secs(2);
    let lease = Duration::from_secs(20);
    match how {
        0 => within(what, m.try_lock()).await,
        1 => within(what, m.try_lock_for(wait)).await,
        2 => within(what, m.lock()).await.map(Some),
        3 => within(what, m.lock_with_lease(lease)).await.map(Some),
        _ => within(what, m.try_lock_with(wait, lease)).await,
    }
}

#[track_caller]
fn assert_wrong_type<T: std::fmt::Debug>(what: &str, r: deadbolt_core::Result<T>, key: &str) {
    match r {
        Err(Error::WrongType { key: k }) if k == key => {}
        other => panic!("{what}: expected WrongType naming {key}, got {other:?}"),
    }
}

#[track_caller]
fn assert_oom<T: std::fmt::Debug>(what: &str, r: deadbolt_core::Result<T>) {
    match &r {
        Err(e @ Error::Redis(inner)) if inner.code() == Some("OOM") => {
            assert!(e.to_string().contains("OOM"), "{what}: {e}");
        }
        other => panic!("{what}: expected the server's OOM error, got {other:?}"),
    }
}

/// Take and give back `m` once, so that every part has a fencing counter
/// (a refused call that wrote one would show in a snapshot).
async fn once(m: &MultiLock) {
    within("take and give back", m.lock())
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
}

/// One-script path (plain locks of one client): a key of another type at a
/// part's hold hash or fencing counter, first, middle or last, fails every
/// acquire method with `WrongType` naming that key, and nothing at all is
/// written to any part; a garbled fencing counter is `BadValue` naming it.
/// Once repaired, the set is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_script_path_refuses_a_part_of_another_type_by_name_and_writes_nothing() {
    let srv = server();
    let c = client(&srv.url()).await;
    for pos in 0..3 {
        for at_fence in [false, true] {
            let prefix = format!("wt-one-{pos}{}", if at_fence { "f" } else { "h" });
            let ns = names(&prefix);
            let m = MultiLock::of_locks(&c, &strs(&ns));
            once(&m).await;
            let bad = if at_fence {
                fence_key(&c, Kind::Plain, &ns[pos])
            } else {
                main_key(&c, Kind::Plain, &ns[pos])
            };
            plant_list(&srv, &bad).await;
            let before = snapshot(&srv, &prefix_of(&prefix)).await;
            for (how, what) in ACQUIRES.iter().enumerate() {
                let r = acquire_by(&m, how).await;
                assert_wrong_type(&format!("{bad}: {what}"), r, &bad);
                assert!(
                    snapshot(&srv, &prefix_of(&prefix)).await == before,
                    "{bad}: {what} wrote"
                );
            }
            let _: i64 = cmd(&srv, &["DEL", &bad]).await;
            let g = within("after the repair", m.try_lock())
                .await
                .unwrap()
                .expect("the repaired set is free");
            g.unlock().await.unwrap();
        }
    }
    // A fencing counter that is not a usable integer: BadValue, nothing written.
    let ns = names("bv-one");
    let m = MultiLock::of_locks(&c, &strs(&ns));
    once(&m).await;
    let bad = fence_key(&c, Kind::Plain, &ns[1]);
    let _: () = cmd(&srv, &["SET", &bad, "not-a-number"]).await;
    let before = snapshot(&srv, &prefix_of("bv-one")).await;
    for (how, what) in ACQUIRES.iter().enumerate() {
        match acquire_by(&m, how).await {
            Err(Error::BadValue { key, .. }) if key == bad => {}
            other => panic!("{what}: expected BadValue naming {bad}, got {other:?}"),
        }
    }
    assert!(snapshot(&srv, &prefix_of("bv-one")).await == before);
}

/// Part-by-part path (mixed kinds: Lock, FairLock, RwLock write side, in
/// every rotation): a key of another type at one part's hold hash or
/// fencing counter, first, middle or last, fails every acquire method with
/// `WrongType` naming that key. No part stays held (the parts taken before
/// the bad one are given back before the call returns: another owner takes
/// each at once), and the parts after it are not touched at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn part_by_part_path_refuses_a_part_of_another_type_and_leaves_no_part_held() {
    let srv = server();
    let c = client(&srv.url()).await;
    let other = client(&srv.url()).await;
    for rot in 0..3 {
        let kinds: Vec<Kind> = (0..3).map(|i| KINDS[(i + rot) % 3]).collect();
        for pos in 0..3 {
            for at_fence in [false, true] {
                let prefix = format!("wt-mix-{rot}{pos}{}", if at_fence { "f" } else { "h" });
                let ns = names(&prefix);
                let m = mixed(&c, &kinds, &ns);
                once(&m).await;
                let bad = if at_fence {
                    fence_key(&c, kinds[pos], &ns[pos])
                } else {
                    main_key(&c, kinds[pos], &ns[pos])
                };
                plant_list(&srv, &bad).await;
                let later: Vec<String> = ns[pos + 1..].iter().map(|n| prefix_of(n)).collect();
                let mut before = Vec::new();
                for p in &later {
                    before.push(snapshot(&srv, p).await);
                }
                for (how, what) in ACQUIRES.iter().enumerate() {
                    let r = acquire_by(&m, how).await;
                    let case = format!("{kinds:?}, {bad}: {what}");
                    assert_wrong_type(&case, r, &bad);
                    let held = holds_left(&srv, &prefix_of(&prefix)).await;
                    let expected: Vec<String> = if at_fence { vec![] } else { vec![bad.clone()] };
                    assert_eq!(held, expected, "{case}: a part stayed held");
                    for (p, b) in later.iter().zip(&before) {
                        assert!(snapshot(&srv, p).await == *b, "{case}: {p}… was written");
                    }
                }
                for (i, n) in ns.iter().enumerate() {
                    if i != pos {
                        assert!(
                            free_for_another(&other, kinds[i], n).await,
                            "{kinds:?}, {bad}: part {n} is not free"
                        );
                    }
                }
                let _: i64 = cmd(&srv, &["DEL", &bad]).await;
                once(&m).await;
            }
        }
    }
}

/// Under `maxmemory` with noeviction, once memory is full: every acquire
/// method of a multi-lock fails with the server's own OOM error and holds
/// no part — on the one-script path and the part-by-part path (nothing
/// written), and with parts on two servers, the one out of memory first or
/// second (the part taken on the healthy server is given back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_memory_is_reported_as_it_is_and_no_part_is_held() {
    let full = RedisServer::builder()
        .arg("maxmemory-policy", "noeviction")
        .start()
        .expect("start redis-server");
    let healthy = server();
    let c = client(&full.url()).await;
    let h = client(&healthy.url()).await;
    let plain = MultiLock::of_locks(&c, &strs(&names("oom-one")));
    let mix = mixed(&c, &KINDS, &names("oom-mix"));
    // Parts on two servers: the healthy one's part first, then second.
    let healthy_first = MultiLock::new(vec![
        part(&h, Kind::Plain, "oom-x-0"),
        part(&c, Kind::Fair, "oom-x-1"),
    ]);
    let full_first = MultiLock::new(vec![
        part(&c, Kind::Plain, "oom-y-0"),
        part(&h, Kind::Write, "oom-y-1"),
    ]);
    for m in [&plain, &mix, &healthy_first, &full_first] {
        once(m).await;
    }
    fill_memory(&full).await;
    let on_full = snapshot(&full, "deadbolt:").await;
    let on_healthy = snapshot(&healthy, &prefix_of("oom-y")).await;
    for (what, m) in [
        ("one script", &plain),
        ("part by part", &mix),
        ("healthy part first", &healthy_first),
        ("full part first", &full_first),
    ] {
        for (how, acq) in ACQUIRES.iter().enumerate() {
            assert_oom(&format!("{what}: {acq}"), acquire_by(m, how).await);
            assert!(
                snapshot(&full, "deadbolt:").await == on_full,
                "{what}: {acq} wrote to the full server"
            );
            let left = holds_left(&healthy, "deadbolt:").await;
            assert!(left.is_empty(), "{what}: {acq} left {left:?} held");
        }
    }
    assert!(
        snapshot(&healthy, &prefix_of("oom-y")).await == on_healthy,
        "the part after the full one was touched"
    );
    assert!(free_for_another(&h, Kind::Plain, "oom-x-0").await);
    let () = cmd(&full, &["CONFIG", "SET", "maxmemory", "0"]).await;
    for m in [&plain, &mix, &healthy_first, &full_first] {
        once(m).await;
    }
}

/// Parts on two servers, one of them frozen (SIGSTOP) or stopped during
/// the acquire: `try_lock` and `try_lock_for` end with a typed error
/// (`Indeterminate` / `Unavailable`) or `None` within their bound, the part
/// on the server that answers is given back before the call returns, and
/// once the server is back and the releasers ran, no part is held on
/// either server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parts_on_a_paused_or_stopped_server_end_typed_and_leave_no_part_held() {
    let mut a = server();
    let mut b = server();
    let wd = Duration::from_secs(20);
    let ct = Duration::from_millis(300);
    let ca = client_with(&a.url(), wd, ct).await;
    let cb = client_with(&b.url(), wd, ct).await;
    // Parts: "ps-0" and "ps-2" on A, "ps-1" on B (a fair lock).
    let parts = [
        (Kind::Plain, "ps-0", 0),
        (Kind::Fair, "ps-1", 1),
        (Kind::Write, "ps-2", 0),
    ];
    let m = MultiLock::new(
        parts
            .iter()
            .map(|(k, n, s)| part(if *s == 0 { &ca } else { &cb }, *k, n))
            .collect(),
    );
    once(&m).await;

    for stopped in [false, true] {
        for victim in [0usize, 1] {
            let case = format!(
                "server {} {}",
                ["A", "B"][victim],
                if stopped { "stopped" } else { "paused" }
            );
            {
                let srv = if victim == 0 { &mut a } else { &mut b };
                if stopped {
                    srv.stop();
                } else {
                    srv.pause();
                }
            }
            for (how, what) in [(0, "try_lock"), (1, "try_lock_for")] {
                let started = Instant::now();
                let r = acquire_by(&m, how).await;
                let took = started.elapsed();
                match &r {
                    Ok(None) => {}
                    Err(e) if e.is_retryable() => {}
                    other => panic!("{case}: {what}: {other:?}"),
                }
                // try_lock_for waits up to 2 s; a try needs up to a command timeout or two.
                assert!(
                    took < Duration::from_secs(5),
                    "{case}: {what} took {took:?}"
                );
                // The server that answers has no part held, right away.
                let answering = if victim == 0 { &b } else { &a };
                let left = holds_left(answering, &prefix_of("ps-")).await;
                assert!(left.is_empty(), "{case}: {what}: {left:?} held");
            }
            {
                let srv = if victim == 0 { &mut a } else { &mut b };
                if stopped {
                    tokio::task::block_in_place(|| srv.restart()).unwrap();
                } else {
                    srv.resume();
                }
            }
            assert!(ca.releases_settled(HANG).await, "{case}");
            assert!(cb.releases_settled(HANG).await, "{case}");
            for srv in [&a, &b] {
                let left = holds_left(srv, &prefix_of("ps-")).await;
                assert!(left.is_empty(), "{case}: {left:?} held after the releases");
            }
            // Back to normal: the set is taken (lock() waits until the
            // clients have reconnected), and each part is free for another
            // owner after it.
            let g = within(&case, m.lock()).await.unwrap();
            g.unlock().await.unwrap();
            for (k, n, s) in parts {
                // Another owner (a new handle) on the part's client, which
                // is connected again.
                let other = if s == 0 { &ca } else { &cb };
                assert!(free_for_another(other, k, n).await, "{case}: {n} held");
            }
        }
    }
}

/// `MultiLock::lock` documents no `Unavailable` / `Indeterminate` (only
/// `try_lock` adds them), as `Lock::lock`, which rides out a server that
/// cannot answer: a multi-lock waiting with `lock()` while a part's server
/// is frozen for several command timeouts gets every part once the server
/// answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_rides_out_a_frozen_part_server() {
    let a = server();
    let b = server();
    let wd = Duration::from_secs(20);
    let ct = Duration::from_millis(200);
    let ca = client_with(&a.url(), wd, ct).await;
    let cb = client_with(&b.url(), wd, ct).await;
    // One script (all plain on A), and part by part (across A and B).
    let one = MultiLock::of_locks(&ca, &["ride-a", "ride-b"]);
    let two = MultiLock::new(vec![
        part(&ca, Kind::Plain, "ride-c"),
        part(&cb, Kind::Plain, "ride-d"),
    ]);
    for (what, m, srv) in [("one script", &one, &a), ("part by part", &two, &b)] {
        srv.pause();
        let m2 = m.clone();
        let t = tokio::spawn(async move { m2.lock().await });
        // The fault window: several command timeouts pass.
        tokio::time::sleep(Duration::from_millis(800)).await;
        srv.resume();
        let g = within(what, t).await.unwrap();
        let g = g.unwrap_or_else(|e| panic!("{what}: lock() gave up: {e:?}"));
        assert_eq!(g.state(), LeaseState::Active);
        g.unlock().await.unwrap();
    }
    assert!(ca.releases_settled(HANG).await);
    assert!(cb.releases_settled(HANG).await);
    for srv in [&a, &b] {
        assert!(holds_left(srv, &prefix_of("ride-")).await.is_empty());
    }
}

/// Shapes of the multi-locks in the cancellation test: per part, whether
/// it is on the fast client (else the slow one) and its kind. The first is
/// taken in one script.
type Shape = [(bool, Kind); 3];
const SHAPES: [Shape; 4] = [
    [
        (false, Kind::Plain),
        (false, Kind::Plain),
        (false, Kind::Plain),
    ],
    [
        (false, Kind::Plain),
        (false, Kind::Fair),
        (false, Kind::Write),
    ],
    [
        (true, Kind::Plain),
        (false, Kind::Fair),
        (false, Kind::Plain),
    ],
    [
        (false, Kind::Write),
        (true, Kind::Plain),
        (false, Kind::Fair),
    ],
];

/// Three tasks, each `rounds` rounds on its own names (`late<t>s<shape>`):
/// a multi-lock of a random shape, sometimes a part held by `blocker` for
/// a random fixed lease, a random acquire method cut at a random point
/// under `cut_max`. Returns how many were cancelled, ended with an error,
/// ended otherwise (a guard is dropped at once: released in the
/// background).
async fn cancel_rounds(
    seed: u64,
    rounds: usize,
    cut_max: u64,
    slow: &Client,
    fast: &Client,
    blocker: &Client,
) -> [u32; 3] {
    let mut tasks = Vec::new();
    for t in 0..3u64 {
        let (slow, fast, blocker) = (slow.clone(), fast.clone(), blocker.clone());
        let mut rng = StdRng::seed_from_u64(seed.wrapping_add(t));
        tasks.push(tokio::spawn(async move {
            let mut outcomes = [0u32; 3];
            for round in 0..rounds {
                let shape_i = rng.random_range(0..SHAPES.len());
                let shape = SHAPES[shape_i];
                let ns = names(&format!("late{t}s{shape_i}"));
                let m = if shape_i == 0 {
                    MultiLock::of_locks(&slow, &strs(&ns))
                } else {
                    MultiLock::new(
                        shape
                            .iter()
                            .zip(&ns)
                            .map(|((f, k), n)| part(if *f { &fast } else { &slow }, *k, n))
                            .collect(),
                    )
                };
                let block = if rng.random_bool(0.5) {
                    let i = rng.random_range(0..3);
                    let lease = Duration::from_millis(rng.random_range(50..400));
                    part(&blocker, shape[i].1, &ns[i])
                        .acquire_hold(LeaseMode::Fixed(lease), WaitMode::Try)
                        .await
                        .unwrap()
                } else {
                    None
                };
                let how = rng.random_range(0..3);
                let cut = Duration::from_millis(rng.random_range(0..cut_max));
                let wait = Duration::from_millis(rng.random_range(0..400));
                let r = tokio::time::timeout(cut, async {
                    match how {
                        0 => m.lock().await.map(Some),
                        1 => m.try_lock().await,
                        _ => m.try_lock_for(wait).await,
                    }
                })
                .await;
                match r {
                    Err(_) => outcomes[0] += 1,
                    Ok(Err(e)) => {
                        assert!(
                            e.is_retryable(),
                            "seed {seed} task {t} round {round}: {e:?}"
                        );
                        outcomes[1] += 1;
                    }
                    Ok(Ok(_)) => outcomes[2] += 1,
                }
                drop(block);
            }
            outcomes
        }));
    }
    let mut outcomes = [0u32; 3];
    for t in tasks {
        let o = within("rounds", t).await.unwrap();
        for (sum, n) in outcomes.iter_mut().zip(o) {
            *sum += n;
        }
    }
    outcomes
}

/// Multi-locks of four shapes (one script; mixed kinds part by part; parts
/// on a slow and a fast client) cancelled at random points, sometimes with
/// a part held by another owner: first with every reply later than the
/// slow client's command timeout (a proxy delays them), then with replies
/// slow but in time, so that the cuts fall between parts, into the giving
/// back of taken parts and into waits on a busy part. No part stays held
/// once the releases ran on the server (in the first phase they do while
/// the replies are still late), and every part is free for another owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_cancelled_at_random_points_under_late_replies_leave_no_part_held() {
    let seed: u64 = std::env::var("DEADBOLT_FAULTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("seed {seed} (DEADBOLT_FAULTS_SEED={seed} replays the schedule)");
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    // Leases and queue places far longer than the test: only the releases
    // can free what the cancelled acquires took.
    let slow = deadbolt_testkit::client_with(&proxy.url(), |b| {
        preloaded(b)
            .command_timeout(Duration::from_millis(150))
            .watchdog_timeout(Duration::from_secs(120))
            .waiter_timeout(Duration::from_secs(60))
    })
    .await;
    let fast = deadbolt_testkit::client_with(&srv.url(), |b| {
        preloaded(b).watchdog_timeout(Duration::from_secs(120))
    })
    .await;
    let blocker = client(&srv.url()).await;

    proxy.set_reply_delay(Duration::from_millis(250));
    let late = cancel_rounds(seed, 10, 300, &slow, &fast, &blocker).await;
    eprintln!("late replies: cancelled / ended with an error / ended otherwise: {late:?}");
    assert!(late[0] > 0, "seed {seed}: no acquire was cancelled");
    until("no part held while the replies are still late", || async {
        holds_left(&srv, &prefix_of("late")).await.is_empty()
    })
    .await;

    proxy.set_reply_delay(Duration::from_millis(30));
    let slowish = cancel_rounds(seed ^ 0x5eed, 10, 400, &slow, &fast, &blocker).await;
    eprintln!("slow replies: cancelled / ended with an error / ended otherwise: {slowish:?}");
    assert!(slowish[0] > 0, "seed {seed}: no acquire was cancelled");

    proxy.set_reply_delay(Duration::ZERO);
    for c in [&slow, &fast, &blocker] {
        assert!(c.releases_settled(HANG).await, "seed {seed}");
    }
    let left = holds_left(&srv, &prefix_of("late")).await;
    assert!(left.is_empty(), "seed {seed}: {left:?}");
    for t in 0..3 {
        for (s, shape) in SHAPES.iter().enumerate() {
            for (n, (_, k)) in names(&format!("late{t}s{s}")).iter().zip(shape) {
                assert!(
                    free_for_another(&blocker, *k, n).await,
                    "seed {seed}: {n} is held"
                );
            }
        }
    }
}

/// A part's hold deleted behind the guard's back (first, middle or last;
/// one script and part by part): `lost()` fires and the state is `Lost`;
/// when another owner took that part meanwhile, `unlock` says `NotHeld`,
/// gives back every other part and leaves the new owner's hold alone. An
/// unlock before the watchdog noticed says the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_after_a_part_was_lost_is_not_held_and_releases_the_rest() {
    let srv = server();
    let c = deadbolt_testkit::client_with(&srv.url(), |b| {
        preloaded(b).watchdog_timeout(Duration::from_millis(900))
    })
    .await;
    let other = client(&srv.url()).await;
    for mixed_kinds in [false, true] {
        for pos in 0..3 {
            let noticed = pos != 1;
            let prefix = format!("lost-{}{pos}", if mixed_kinds { "m" } else { "p" });
            let ns = names(&prefix);
            let kinds = if mixed_kinds { KINDS } else { [Kind::Plain; 3] };
            let m = if mixed_kinds {
                mixed(&c, &kinds, &ns)
            } else {
                MultiLock::of_locks(&c, &strs(&ns))
            };
            let case = format!("{kinds:?}, part {pos}");
            let g = within("lock", m.lock()).await.unwrap();
            let lost = g.lost();
            let key = main_key(&c, kinds[pos], &ns[pos]);
            let _: i64 = cmd(&srv, &["DEL", &key]).await;
            let taken = if noticed {
                assert_eq!(within("lost()", lost).await, LeaseState::Lost, "{case}");
                assert_eq!(g.state(), LeaseState::Lost, "{case}");
                assert_eq!(g.valid_for(), Duration::ZERO, "{case}");
                let h = part(&other, kinds[pos], &ns[pos])
                    .acquire_hold(LeaseMode::Fixed(Duration::from_secs(30)), WaitMode::Try)
                    .await
                    .unwrap()
                    .expect("the lost part is free");
                Some(h)
            } else {
                None
            };
            let r = within("unlock", g.unlock()).await;
            assert!(matches!(r, Err(Error::NotHeld)), "{case}: {r:?}");
            for (i, n) in ns.iter().enumerate() {
                if i != pos {
                    assert!(
                        !exists(&srv, &main_key(&c, kinds[i], n)).await,
                        "{case}: part {i} stayed held"
                    );
                }
            }
            if let Some(h) = taken {
                let field = format!("a:{}", h.attempt());
                let n: i64 = cmd(&srv, &["HEXISTS", &key, &field]).await;
                assert_eq!(n, 1, "{case}: the new owner's hold was touched");
                h.unlock().await.unwrap();
            }
            assert!(
                holds_left(&srv, &prefix_of(&prefix)).await.is_empty(),
                "{case}"
            );
        }
    }
}

async fn clients_for(srvs: &[RedisServer], watchdog: Duration, command: Duration) -> Vec<Client> {
    let mut out = Vec::new();
    for s in srvs {
        out.push(client_with(&s.url(), watchdog, command).await);
    }
    out
}

/// Redlock's `unlock` is `NotHeld` only when no server held it any more: a
/// hold deleted on a majority (but not all) is still released where it
/// is, without error; a server whose key another owner took meanwhile
/// keeps that owner's hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_unlock_is_not_held_only_when_no_server_held_it() {
    let srvs: Vec<RedisServer> = (0..3).map(|_| server()).collect();
    let cs = clients_for(&srvs, Duration::from_secs(10), Duration::from_millis(500)).await;
    let others = clients_for(&srvs, Duration::from_secs(10), Duration::from_millis(500)).await;
    let r = Redlock::new(&cs, "rl-unlock").unwrap();
    let key = Lock::new(&cs[0], "rl-unlock").key().unwrap().to_string();
    let lease = Duration::from_secs(20);

    // Deleted on two servers, another owner on one of them; held on one.
    let g = r.lock_with_lease(lease).await.unwrap();
    for s in &srvs[..2] {
        let _: i64 = cmd(s, &["DEL", &key]).await;
    }
    let theirs = Lock::new(&others[0], "rl-unlock")
        .try_lock_with(Duration::ZERO, lease)
        .await
        .unwrap()
        .expect("free on server 0");
    let res = within("unlock", g.unlock()).await;
    assert!(res.is_ok(), "{res:?}");
    assert!(
        exists(&srvs[0], &key).await,
        "the other owner's hold was released"
    );
    assert!(
        !exists(&srvs[2], &key).await,
        "not released where it was held"
    );
    theirs.unlock().await.unwrap();

    // Deleted everywhere: NotHeld.
    let g = r.lock_with_lease(lease).await.unwrap();
    for s in &srvs {
        let _: i64 = cmd(s, &["DEL", &key]).await;
    }
    let res = within("unlock", g.unlock()).await;
    assert!(matches!(res, Err(Error::NotHeld)), "{res:?}");
}

/// A key of another type on a minority of the servers does not stop a
/// Redlock; on a majority every acquire fails with `WrongType` naming the
/// key (no endless retry), and nothing is left held on the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_with_keys_of_another_type_on_a_majority_is_refused_by_name() {
    let srvs: Vec<RedisServer> = (0..3).map(|_| server()).collect();
    let cs = clients_for(&srvs, Duration::from_secs(10), Duration::from_millis(500)).await;
    let r = Redlock::new(&cs, "rl-wt").unwrap();
    let key = Lock::new(&cs[0], "rl-wt").key().unwrap().to_string();
    plant_list(&srvs[0], &key).await;
    let g = within("a majority without server 0", r.lock())
        .await
        .unwrap();
    assert!(exists(&srvs[1], &key).await && exists(&srvs[2], &key).await);
    g.unlock().await.unwrap();
    plant_list(&srvs[1], &key).await;
    for what in ["try_lock", "try_lock_for", "lock", "lock_with_lease"] {
        let res = within(what, async {
            match what {
                "try_lock" => r.try_lock().await,
                "try_lock_for" => r.try_lock_for(Duration::from_secs(2)).await,
                "lock" => r.lock().await.map(Some),
                _ => r.lock_with_lease(Duration::from_secs(5)).await.map(Some),
            }
        })
        .await;
        assert_wrong_type(what, res, &key);
        assert!(
            !exists(&srvs[2], &key).await,
            "{what}: left held on server 2"
        );
    }
}

/// Five servers, a holder on all of them: two servers restarted without
/// persistence while it holds (a minority, one at a time, each for more
/// than a renewal period). The lock stays exclusive — another Redlock on
/// the same servers gets no majority while the first guard is `Active` —
/// and the first guard stays `Active` through its renewals (it still holds
/// a majority). After its unlock the other gets the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_stays_exclusive_when_a_minority_restarts_empty_while_held() {
    let mut srvs: Vec<RedisServer> = (0..5).map(|_| server()).collect();
    let wd = Duration::from_secs(3);
    let ct = Duration::from_millis(300);
    let a = clients_for(&srvs, wd, ct).await;
    let b = clients_for(&srvs, wd, ct).await;
    let ra = Redlock::new(&a, "rl-restart").unwrap();
    let rb = Redlock::new(&b, "rl-restart").unwrap();
    let key = Lock::new(&a[0], "rl-restart").key().unwrap().to_string();
    let g = within("lock", ra.lock()).await.unwrap();
    for s in &srvs {
        assert!(exists(s, &key).await, "not held on every server");
    }
    let mut tries = 0;
    for victim in [0, 1] {
        tokio::task::block_in_place(|| srvs[victim].restart()).unwrap();
        assert!(!exists(&srvs[victim], &key).await);
        // The window: a little over one renewal period (a third of 3 s).
        let end = Instant::now() + Duration::from_millis(1300);
        while Instant::now() < end {
            if let Some(theirs) = rb.try_lock().await.unwrap() {
                panic!(
                    "a second holder (token {}) while the first is {:?}",
                    theirs.fencing_token(),
                    g.state()
                );
            }
            tries += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            g.state(),
            LeaseState::Active,
            "the holder lost its majority"
        );
    }
    assert!(tries > 20, "only {tries} tries");
    for s in &srvs[2..] {
        let pttl: i64 = cmd(s, &["PTTL", &key]).await;
        assert!(pttl > 0, "not held on a server that kept it");
    }
    within("unlock", g.unlock()).await.unwrap();
    let theirs = within("the other after the unlock", rb.try_lock())
        .await
        .unwrap()
        .expect("free after the unlock");
    theirs.unlock().await.unwrap();
}

/// Validity is counted from before the first request and a majority that
/// arrives after the validity ran out is no grant: with replies delayed
/// (a proxy in front of every server) past the validity of a short lease,
/// but within the per-server timeout, every call gives `None`; never a
/// guard. With a long lease, the guard's validity is never more than
/// `lease − drift` less the time the replies took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_lease_shorter_than_the_way_to_a_majority_gives_no_guard() {
    let srvs: Vec<RedisServer> = (0..3).map(|_| server()).collect();
    let mut proxies = Vec::new();
    let mut cs = Vec::new();
    for s in &srvs {
        let p = FaultProxy::start(s.addr()).await.unwrap();
        cs.push(client_with(&p.url(), Duration::from_secs(10), Duration::from_secs(1)).await);
        proxies.push(p);
    }
    let r = Redlock::new(&cs, "rl-short").unwrap();
    // Validity of a 3 ms lease: 0.97 ms; of 4 ms: 1.96 ms. Per-server
    // timeout: 5 ms. Replies: 3 ms late.
    for p in &proxies {
        p.set_reply_delay(Duration::from_millis(3));
    }
    for round in 0..20 {
        let lease = Duration::from_millis(3 + round % 2);
        let wait = Duration::from_millis(if round % 4 < 2 { 0 } else { 60 });
        let res = within("try_lock_with", r.try_lock_with(wait, lease)).await;
        match res {
            Ok(None) => {}
            Err(Error::InvalidArgument(_)) => {}
            Ok(Some(g)) => panic!(
                "a guard for a {lease:?} lease whose majority came after its validity: \
                 state {:?}, valid for {:?}",
                g.state(),
                g.valid_for()
            ),
            Err(e) => panic!("{e:?}"),
        }
    }
    // A long lease: held, and valid for no more than lease − drift minus
    // the 20 ms the replies took (counted from before the requests, not
    // from the replies).
    let delay = Duration::from_millis(20);
    for p in &proxies {
        p.set_reply_delay(delay);
    }
    let lease = Duration::from_secs(1);
    let g = within("lock_with_lease", r.lock_with_lease(lease))
        .await
        .unwrap();
    let valid = g.valid_for();
    assert!(valid > Duration::ZERO, "{:?}", g.state());
    assert!(
        valid <= lease - drift(lease) - delay,
        "valid for {valid:?}: counted from the replies, not from before the requests"
    );
    g.unlock().await.unwrap();
}

/// A lease at or under the drift (2 ms + 1 %) can never leave any validity:
/// `lock_with_lease` must not spin for ever taking and releasing the lock on
/// every server; a typed error (a bad lease) is expected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_lock_with_a_lease_that_can_never_be_valid_is_refused() {
    let srvs: Vec<RedisServer> = (0..3).map(|_| server()).collect();
    let cs = clients_for(&srvs, Duration::from_secs(10), Duration::from_millis(500)).await;
    let r = Redlock::new(&cs, "rl-never").unwrap();
    for ms in [1, 2] {
        let lease = Duration::from_millis(ms);
        // One round takes a millisecond or so: 2 s is hundreds of rounds.
        let res = tokio::time::timeout(Duration::from_secs(2), r.lock_with_lease(lease)).await;
        match res {
            Ok(Err(Error::InvalidArgument(_))) => {}
            Ok(other) => panic!("{lease:?}: {other:?}"),
            Err(_) => panic!("lock_with_lease({lease:?}) still retrying after 2 s"),
        }
    }
    // A lease beyond the largest any lock takes is refused the same way,
    // by each server's acquire before it sends anything: no key anywhere.
    let beyond = Duration::from_millis(deadbolt_core::MAX_LEASE_MS + 1);
    match r.lock_with_lease(beyond).await {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("a lease of {beyond:?}: {other:?}"),
    }
    for s in &srvs {
        let n: i64 = redis::cmd("DBSIZE")
            .query_async(&mut s.conn().await)
            .await
            .unwrap();
        assert_eq!(n, 0, "a refused lease left keys behind");
    }
}

/// One of three servers behind a blackholed proxy: a Redlock acquires with
/// the other two within bounds and unlocks; held on all three and then
/// blackholed, the unlock still ends within bounds (the majority is
/// released at once), and the blackholed server's key is removed by the
/// releaser once it is reachable again, well before its lease ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_with_a_blackholed_server_works_and_cleans_up_after() {
    let srvs: Vec<RedisServer> = (0..3).map(|_| server()).collect();
    let proxy = FaultProxy::start(srvs[2].addr()).await.unwrap();
    let wd = Duration::from_secs(4);
    let ct = Duration::from_millis(300);
    let cs = vec![
        client_with(&srvs[0].url(), wd, ct).await,
        client_with(&srvs[1].url(), wd, ct).await,
        client_with(&proxy.url(), wd, ct).await,
    ];
    let others = clients_for(&srvs, wd, ct).await;
    let r = Redlock::new(&cs, "rl-hole").unwrap();
    let rival = Redlock::new(&others, "rl-hole").unwrap();
    let key = Lock::new(&cs[0], "rl-hole").key().unwrap().to_string();

    // Blackholed from the start.
    proxy.set_blackhole(true);
    let started = Instant::now();
    let g = within("lock", r.lock()).await.unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert!(
        g.valid_for() > Duration::from_secs(2),
        "{:?}",
        g.valid_for()
    );
    assert!(rival.try_lock().await.unwrap().is_none());
    let started = Instant::now();
    within("unlock", g.unlock()).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    for s in &srvs {
        assert!(!exists(s, &key).await);
    }
    proxy.set_blackhole(false);
    let probe = Lock::new(&cs[2], "rl-hole-probe");
    until("the proxied client is back", || async {
        probe.is_locked().await.is_ok()
    })
    .await;

    // Held on all three (the proxied client may still be reconnecting its
    // subscriber: retry until the hold includes server 2), then blackholed.
    let g = within("a hold on all three", async {
        loop {
            let g = r.lock().await.unwrap();
            if exists(&srvs[2], &key).await {
                return g;
            }
            g.unlock().await.unwrap();
        }
    })
    .await;
    for s in &srvs[..2] {
        assert!(exists(s, &key).await);
    }
    proxy.set_blackhole(true);
    let started = Instant::now();
    let res = within("unlock", g.unlock()).await;
    let took = started.elapsed();
    assert!(
        matches!(
            &res,
            Ok(()) | Err(Error::Indeterminate(_) | Error::Unavailable(_))
        ),
        "{res:?}"
    );
    assert!(took < Duration::from_secs(2), "unlock took {took:?}");
    assert!(!exists(&srvs[0], &key).await && !exists(&srvs[1], &key).await);
    let pttl: i64 = cmd(&srvs[2], &["PTTL", &key]).await;
    assert!(pttl > 1000, "the blackholed server's key: PTTL {pttl}");
    let back = Instant::now();
    proxy.set_blackhole(false);
    until("the blackholed server's key is released", || async {
        !exists(&srvs[2], &key).await
    })
    .await;
    let after = back.elapsed();
    assert!(
        after < Duration::from_millis(u64::try_from(pttl).unwrap() - 300),
        "removed {after:?} after the blackhole ended: it expired, nobody released it"
    );
    assert!(cs[2].releases_settled(HANG).await);
    let theirs = within("rival", rival.try_lock()).await.unwrap();
    theirs.expect("free everywhere").unlock().await.unwrap();
}

/// One hold of `r`: its fencing token.
async fn token_of_one_hold(r: &Redlock) -> u64 {
    let g: RedlockGuard = within("lock", r.lock()).await.unwrap();
    let t = g.fencing_token();
    g.unlock().await.unwrap();
    t
}

#[track_caller]
fn rises(last: &mut u64, t: u64, what: &str) {
    assert!(t > *last, "{what}: token {t} after {last}");
    *last = t;
}

/// What docs/safety.md promises for a Redlock's fencing token: the largest
/// of the majority's tokens, rising across successive holders while the
/// servers' clocks agree (here: one machine) — also when servers restart
/// empty between holds (each server's clock floor), even when the next
/// majority is made of restarted servers only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_fencing_tokens_rise_across_holders_and_restarts() {
    let mut srvs: Vec<RedisServer> = (0..3).map(|_| server()).collect();
    let wd = Duration::from_secs(2);
    let ct = Duration::from_millis(500);
    let mut holders = Vec::new();
    for _ in 0..3 {
        let cs = clients_for(&srvs, wd, ct).await;
        holders.push(Redlock::new(&cs, "rl-fence").unwrap());
    }
    let fence = client(&srvs[0].url())
        .await
        .keys("lock", "rl-fence")
        .unwrap()
        .fence()
        .to_string();
    let mut last = 0u64;
    for i in 0..12 {
        let t = token_of_one_hold(&holders[i % 3]).await;
        rises(&mut last, t, &format!("hold {i}"));
        if i % 4 == 3 {
            tokio::task::block_in_place(|| srvs[(i / 4) % 3].restart()).unwrap();
        }
    }
    // Two servers restarted empty and the third down: the next majority
    // knows nothing of the earlier tokens but its clocks.
    tokio::task::block_in_place(|| {
        srvs[0].restart().unwrap();
        srvs[1].restart().unwrap();
        srvs[2].stop();
    });
    for i in 12..15 {
        let t = token_of_one_hold(&holders[i % 3]).await;
        rises(&mut last, t, &format!("hold {i}, by restarted servers"));
    }
    tokio::task::block_in_place(|| srvs[2].restart()).unwrap();
    // The largest of the majority's tokens: server 0's counter far ahead
    // (as if its clock ran ahead).
    let ahead = last + 1_000_000_000_000;
    let () = cmd(&srvs[0], &["SET", &fence, &ahead.to_string()]).await;
    let t = within("a hold that includes server 0", async {
        loop {
            let t = token_of_one_hold(&holders[0]).await;
            let on0: String = cmd(&srvs[0], &["GET", &fence]).await;
            if on0 != ahead.to_string() {
                return t;
            }
        }
    })
    .await;
    assert!(
        t > ahead,
        "token {t}: not the largest of the majority's (> {ahead})"
    );
    rises(&mut last, t, "server 0 ahead");
    for i in 16..19 {
        let t = token_of_one_hold(&holders[i % 3]).await;
        rises(&mut last, t, &format!("hold {i}, server 0 ahead"));
    }
}
