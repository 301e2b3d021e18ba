//! Cancellation churn: cancelled acquires of every kind,
//! cancelled unlocks and dropped guards on every primitive, from several
//! clients and tasks at once, with no fault injected; then nothing may be
//! left behind.
//!
//! # What runs
//!
//! [`CLIENTS`] clients (short `watchdog_timeout` and `waiter_timeout`), each
//! with [`TASKS`] tasks, for [`RUN_FOR`]. Two tasks of each client share a
//! handle on every name (clones of a handle are one owner, and re-enter
//! each other's holds); one has its own (handles are owners); the last
//! makes a new handle for every operation, as `client.lock(name)` at each
//! use does (a handle's next acquire repairs a stale hold of its own, so
//! only such a task shows a leak until its lease ends).
//! Each task loops over a random name of a random
//! primitive: an acquire (waiting, bounded wait of 0–30 ms, fixed lease of
//! 50–1500 ms, or one try), raced half of the time (see [`Race`]: cancelled
//! after its first poll, after a few turns of the scheduler, or after a
//! timeout of up to 3 ms); then, with the guard, one of: an unlock raced
//! the same way, a drop of the guard, a hold of 0–4 ms and then a bounded
//! unlock, or a plain unlock.
//!
//! # What it checks
//!
//! After every task ended (every guard is gone) and `releases_settled`
//! returned true on every client, with the clients still running (shutdown
//! would release what they still know of, and hide a leak): no hold of any
//! primitive, no fair-lock queue entry or claim, no semaphore permit taken,
//! and nothing without a TTL. The only keys
//! allowed are the fencing counters, the fair lock's and the semaphore's
//! liveness records and enqueue counters, the RwLock's waiting-writer
//! marker and the `Lock`'s registry of waiting clients (a hint that ends
//! with its TTL), and the semaphore's permit configuration. Any error other
//! than a timeout, `NotHeld` (a fixed lease that ran out) or
//! `UpgradeNotSupported` (see [`allowed`]) fails the run.
//!
//! A failure names the seed, each leftover key with its fields and TTL, and
//! the last operations of the owner that left it (or, when the key names no
//! owner, the last operations on its name).
//!
//! # Running it
//!
//! `cargo test -p deadbolt --test churn -- --nocapture` prints the seed and
//! what ran; `DEADBOLT_CHURN_SEED=<n>` replays the tasks' random choices of
//! seed `<n>` (timing still varies). `DEADBOLT_CHURN_RUNS=<k>` runs it `k`
//! times in a row, each with a fresh seed and server.
//!
//! # Adding a primitive
//!
//! Add a variant to [`Handle`] with its acquire calls, a [`Kind`] with its
//! names and allowed leftovers, and implement [`Held`] for its guard.

use deadbolt::Acquire as _;
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadbolt::Error;
use deadbolt_testkit::support::{self, within};
use deadbolt_testkit::{FaultProxy, RedisServer};
use futures::future::BoxFuture;
use futures::FutureExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const SEED_ENV: &str = "DEADBOLT_CHURN_SEED";
const RUNS_ENV: &str = "DEADBOLT_CHURN_RUNS";
const CLIENTS: usize = 3;
const TASKS: usize = 4;
/// Tasks of a client that share one handle per name (see [`run_once`]).
const SHARED: usize = 2;
const RUN_FOR: Duration = Duration::from_secs(8);
const WATCHDOG_TIMEOUT: Duration = Duration::from_secs(2);
const WAITER_TIMEOUT: Duration = Duration::from_secs(1);
/// Permits of every semaphore.
const PERMITS: u64 = 3;
/// Reply latency of the proxied client.
const LATENCY: Duration = Duration::from_millis(1);
/// Bound on one step that is not raced (a waiting acquire, a plain unlock).
const STEP_BOUND: Duration = Duration::from_secs(10);
/// Operations kept per owner for the failure message.
const LOG_LEN: usize = 16;

/// One kind of primitive in the run.
struct Kind {
    name: &'static str,
    /// The names of its instances.
    names: &'static [&'static str],
    /// Its main key for an instance name.
    main: fn(&str) -> String,
    /// Key suffixes (`<main>:<suffix>`) that may stay, each with a TTL.
    leftovers: &'static [&'static str],
    /// The main key is configuration that stays (a semaphore's permits).
    main_stays: bool,
    /// How often a task picks it, relative to the others.
    weight: u32,
    make: fn(&deadbolt::Client, &str) -> Handle,
}

const KINDS: &[Kind] = &[
    Kind {
        name: "Lock",
        names: &["l0", "l1", "l2"],
        main: |n| format!("deadbolt:{{{n}}}:lock"),
        leftovers: &["waiters"],
        main_stays: false,
        weight: 6,
        make: |c, n| Handle::Lock(c.lock(n)),
    },
    Kind {
        name: "FairLock",
        names: &["f0", "f1", "f2"],
        main: |n| format!("deadbolt:{{{n}}}:fair"),
        leftovers: &["alive", "seq"],
        main_stays: false,
        weight: 3,
        make: |c, n| Handle::Fair(c.fair_lock(n)),
    },
    Kind {
        name: "RwLock",
        names: &["r0", "r1"],
        main: |n| format!("deadbolt:{{{n}}}:rw"),
        leftovers: &["alive", "ww"],
        main_stays: false,
        weight: 0,
        make: |c, n| Handle::Rw(c.rw_lock(n)),
    },
    Kind {
        name: "Semaphore",
        names: &["s0", "s1"],
        main: |n| format!("deadbolt:{{{n}}}:sem"),
        leftovers: &["alive", "q", "qo"],
        main_stays: true,
        weight: 0,
        make: |c, n| Handle::Sem(c.semaphore(n)),
    },
    Kind {
        name: "MultiLock",
        names: &["m0", "m1"],
        main: |n| format!("deadbolt:{{{n}}}"),
        leftovers: &["lock:waiters", "fair:alive", "fair:seq"],
        main_stays: false,
        weight: 0,
        make: |c, n| {
            let (lock, fair) = (c.lock(n), c.fair_lock(n));
            let owners = vec![lock.owner().to_string(), fair.owner().to_string()];
            Handle::Multi(
                deadbolt::MultiLock::new(vec![
                    Arc::new(lock) as Arc<dyn deadbolt::Lockable>,
                    Arc::new(fair),
                ]),
                owners,
            )
        },
    },
];

/// A task's handle on one instance.
enum Handle {
    Lock(deadbolt::Lock),
    Fair(deadbolt::FairLock),
    Rw(deadbolt::RwLock),
    Sem(deadbolt::Semaphore),
    Multi(deadbolt::MultiLock, Vec<String>),
}

/// How an acquire is made.
#[derive(Debug, Clone, Copy)]
enum Acq {
    Wait,
    For(Duration),
    Lease(Duration),
    Try,
}

/// A guard of any primitive.
trait Held: Send {
    fn unlock(self: Box<Self>) -> BoxFuture<'static, deadbolt::Result<()>>;
}

macro_rules! held {
    ($($t:ty => $m:ident),* $(,)?) => {$(
        impl Held for $t {
            fn unlock(self: Box<Self>) -> BoxFuture<'static, deadbolt::Result<()>> {
                Box::pin(<$t>::$m(*self))
            }
        }
    )*};
}
held!(
    deadbolt::ExclusiveGuard => unlock,
    deadbolt::ReadGuard => unlock,
    deadbolt::Permits => release,
    deadbolt::MultiGuard => unlock,
);

type Got = deadbolt::Result<Option<Box<dyn Held>>>;

fn boxed<G: Held + 'static>(r: deadbolt::Result<Option<G>>) -> Got {
    r.map(|g| g.map(|g| Box::new(g) as Box<dyn Held>))
}

/// The four acquire calls of a handle (`lock`, `try_lock_for`,
/// `lock_with_lease`, `try_lock`).
macro_rules! acquire {
    ($h:expr, $a:expr, $wait:ident, $for:ident, $lease:ident, $try:ident) => {
        match $a {
            Acq::Wait => boxed($h.$wait().await.map(Some)),
            Acq::For(d) => boxed($h.$for(d).await),
            Acq::Lease(d) => boxed($h.$lease(d).await.map(Some)),
            Acq::Try => boxed($h.$try().await),
        }
    };
}

impl Handle {
    fn owners(&self) -> Vec<String> {
        match self {
            Handle::Lock(l) => vec![l.owner().to_string()],
            Handle::Fair(l) => vec![l.owner().to_string()],
            Handle::Rw(l) => vec![l.owner().to_string()],
            Handle::Sem(_) => vec![],
            Handle::Multi(_, owners) => owners.clone(),
        }
    }

    fn acquire(&self, a: Acq, write: bool, n: u64) -> BoxFuture<'_, Got> {
        Box::pin(async move {
            match self {
                Handle::Lock(l) => acquire!(l, a, lock, try_lock_for, lock_with_lease, try_lock),
                Handle::Fair(l) => acquire!(l, a, lock, try_lock_for, lock_with_lease, try_lock),
                Handle::Multi(l, _) => {
                    acquire!(l, a, lock, try_lock_for, lock_with_lease, try_lock)
                }
                Handle::Rw(l) if write => {
                    let l = l.write_lock();
                    acquire!(l, a, lock, try_lock_for, lock_with_lease, try_lock)
                }
                Handle::Rw(l) => {
                    let l = l.read_lock();
                    acquire!(l, a, lock, try_lock_for, lock_with_lease, try_lock)
                }
                Handle::Sem(s) => match a {
                    Acq::Wait => boxed(s.acquire(n).await.map(Some)),
                    Acq::For(d) => boxed(s.try_acquire_for(n, d).await),
                    Acq::Lease(d) => boxed(s.acquire_with_lease(n, d).await.map(Some)),
                    Acq::Try => boxed(s.try_acquire(n).await),
                },
            }
        })
    }
}

/// What the run saw, and the last operations of every owner and name.
#[derive(Default)]
struct Log {
    t0: Option<Instant>,
    by_owner: HashMap<String, VecDeque<String>>,
    by_name: HashMap<String, VecDeque<String>>,
    errors: Vec<String>,
    counts: HashMap<&'static str, u64>,
}

impl Log {
    fn note(&mut self, owners: &[String], name: &str, what: String) {
        let at = self.t0.map_or(0, |t| t.elapsed().as_millis());
        let line = format!("{at:>6} ms {name}: {what}");
        let push = |q: &mut VecDeque<String>| {
            if q.len() == LOG_LEN {
                q.pop_front();
            }
            q.push_back(line.clone());
        };
        for o in owners {
            push(self.by_owner.entry(o.clone()).or_default());
        }
        push(self.by_name.entry(name.to_string()).or_default());
    }

    fn count(&mut self, what: &'static str) {
        *self.counts.entry(what).or_default() += 1;
    }
}

type Shared = Arc<Mutex<Log>>;

/// What a call is raced against: cancelled after its first poll (its
/// request may just have been sent), after a few turns of the scheduler
/// (mid-call), or after a timeout of up to 3 ms (tokio's timer rounds it
/// up to its next millisecond tick).
#[derive(Debug, Clone, Copy)]
enum Race {
    FirstPoll,
    Yields(u32),
    Timeout(Duration),
}

fn pick_race(rng: &mut StdRng) -> Race {
    match rng.random_range(0..5) {
        0 => Race::FirstPoll,
        1 => Race::Yields(rng.random_range(1..=40)),
        _ => Race::Timeout(Duration::from_micros(rng.random_range(1..=3000))),
    }
}

/// `f`, raced as `race` says when given (`None` when it lost), else bounded
/// by [`STEP_BOUND`] (a hang fails the run).
async fn raced<T>(race: Option<Race>, what: &str, f: impl Future<Output = T>) -> Option<T> {
    match race {
        Some(Race::FirstPoll) => f.now_or_never(),
        Some(Race::Yields(n)) => {
            tokio::pin!(f);
            for _ in 0..n {
                if let Some(v) = (&mut f).now_or_never() {
                    return Some(v);
                }
                tokio::task::yield_now().await;
            }
            None
        }
        Some(Race::Timeout(d)) => tokio::time::timeout(d, f).await.ok(),
        None => Some(
            tokio::time::timeout(STEP_BOUND, f)
                .await
                .unwrap_or_else(|_| panic!("{what} hung for {STEP_BOUND:?}")),
        ),
    }
}

/// Errors a churn without faults may see: `NotHeld` (a fixed lease ran
/// out before the unlock), `UpgradeNotSupported` (a write acquire of a
/// handle whose dropped read guard is still being released).
fn allowed(e: &Error) -> bool {
    matches!(e, Error::NotHeld | Error::UpgradeNotSupported)
}

async fn task(
    log: Shared,
    seed: u64,
    handles: Vec<(usize, &'static str, Arc<Handle>)>,
    fresh: Option<deadbolt::Client>,
    until: Instant,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let total: u32 = handles.iter().map(|(k, _, _)| KINDS[*k].weight).sum();
    while Instant::now() < until {
        // A random instance, kinds by weight.
        let mut pick = rng.random_range(0..total);
        let (k, name, h) = handles
            .iter()
            .find(|(k, _, _)| {
                let w = KINDS[*k].weight;
                if pick < w {
                    true
                } else {
                    pick -= w;
                    false
                }
            })
            .expect("a handle");
        // A task with a client makes a new handle (a new owner) for every
        // operation, as `client.lock(name)` at each use does.
        let h = match &fresh {
            Some(c) => &Arc::new((KINDS[*k].make)(c, name)),
            None => h,
        };
        // The run's end cancels the operation under way, like any other
        // cancellation: a task never waits out a hold left behind, which
        // would hide it (it expires meanwhile).
        let op = one_op(&log, &mut rng, h, name);
        if tokio::time::timeout_at(until.into(), op).await.is_err() {
            let mut l = log.lock().unwrap();
            l.count("cancelled by the run's end");
            l.note(&h.owners(), name, "cancelled by the run's end".to_string());
        }
    }
}

/// One operation of a task on handle `h` of instance `name`: an acquire,
/// raced or not, and what is done with the guard.
async fn one_op(log: &Shared, rng: &mut StdRng, h: &Handle, name: &str) {
    let owners = h.owners();
    let acq = match rng.random_range(0..4) {
        0 => Acq::Wait,
        1 => Acq::For(Duration::from_millis(rng.random_range(0..=30))),
        2 => Acq::Lease(Duration::from_millis(rng.random_range(50..=1500))),
        _ => Acq::Try,
    };
    let write = rng.random_bool(0.5);
    let n = rng.random_range(1..=2);
    let race = rng.random_bool(0.5).then(|| pick_race(rng));
    let what = format!(
        "acquire {acq:?}{}{} raced {race:?}",
        if matches!(h, Handle::Rw(_)) {
            if write {
                " write"
            } else {
                " read"
            }
        } else {
            ""
        },
        if matches!(h, Handle::Sem(_)) {
            format!(" n={n}")
        } else {
            String::new()
        }
    );
    let got = raced(race, &what, h.acquire(acq, write, n)).await;
    let guard = match got {
        None => {
            let mut l = log.lock().unwrap();
            l.count("acquires cancelled");
            l.note(&owners, name, format!("{what}: cancelled"));
            return;
        }
        Some(Ok(None)) => {
            let mut l = log.lock().unwrap();
            l.count("acquires timed out");
            l.note(&owners, name, format!("{what}: not acquired"));
            return;
        }
        Some(Err(e)) => {
            let mut l = log.lock().unwrap();
            l.note(&owners, name, format!("{what}: error {e}"));
            if !allowed(&e) {
                l.errors.push(format!("{name}: {what}: {e}"));
            }
            return;
        }
        Some(Ok(Some(g))) => {
            let mut l = log.lock().unwrap();
            l.count("acquired");
            l.note(&owners, name, format!("{what}: acquired"));
            g
        }
    };
    let (what, r) = match rng.random_range(0..4) {
        0 => {
            let race = pick_race(rng);
            let what = format!("unlock raced {race:?}");
            (what.clone(), raced(Some(race), &what, guard.unlock()).await)
        }
        1 => {
            drop(guard);
            ("drop guard".to_string(), Some(Ok(())))
        }
        2 => {
            let hold = Duration::from_micros(rng.random_range(0..=4000));
            tokio::time::sleep(hold).await;
            let what = format!("hold {hold:?}, unlock");
            (what.clone(), raced(None, &what, guard.unlock()).await)
        }
        _ => {
            let what = "unlock".to_string();
            (what.clone(), raced(None, &what, guard.unlock()).await)
        }
    };
    let mut l = log.lock().unwrap();
    match &r {
        None => l.count("unlocks cancelled"),
        Some(Ok(())) if what == "drop guard" => l.count("guards dropped"),
        Some(Ok(())) => l.count("unlocked"),
        Some(Err(e)) => {
            if !allowed(e) {
                l.errors.push(format!("{name}: {what}: {e}"));
            }
            l.count("unlock errors");
        }
    }
    let outcome = match r {
        None => "cancelled".to_string(),
        Some(Ok(())) => "ok".to_string(),
        Some(Err(e)) => format!("error {e}"),
    };
    l.note(&owners, name, format!("{what}: {outcome}"));
}

/// Every key left, with what it holds, for the failure message.
async fn describe(c: &mut redis::aio::MultiplexedConnection, key: &str) -> (String, i64, String) {
    let ty: String = redis::cmd("TYPE").arg(key).query_async(c).await.unwrap();
    let pttl: i64 = redis::cmd("PTTL").arg(key).query_async(c).await.unwrap();
    let body = match ty.as_str() {
        "hash" => {
            let v: Vec<(String, String)> =
                redis::cmd("HGETALL").arg(key).query_async(c).await.unwrap();
            v.iter()
                .map(|(f, v)| format!("{f}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        }
        "zset" => {
            let v: Vec<(String, String)> = redis::cmd("ZRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query_async(c)
                .await
                .unwrap();
            v.iter()
                .map(|(m, s)| format!("{m}@{s}"))
                .collect::<Vec<_>>()
                .join(" ")
        }
        "string" => {
            let v: Option<String> = redis::cmd("GET").arg(key).query_async(c).await.unwrap();
            v.unwrap_or_default()
        }
        _ => String::new(),
    };
    (ty, pttl, body)
}

/// The leftovers after the run: one line per key that should not be there.
async fn leftovers(srv: &RedisServer, log: &Log) -> Vec<String> {
    let mut c = srv.conn().await;
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut c)
        .await
        .unwrap();
    keys.sort();
    let mut bad = Vec::new();
    for key in keys {
        // The kind and instance the key belongs to, and its suffix.
        let found = KINDS.iter().find_map(|k| {
            k.names.iter().find_map(|n| {
                let main = (k.main)(n);
                if key == main {
                    Some((k, *n, None))
                } else {
                    key.strip_prefix(&main)
                        .and_then(|r| r.strip_prefix(':'))
                        .map(|s| (k, *n, Some(s.to_string())))
                }
            })
        });
        let (ty, pttl, body) = describe(&mut c, &key).await;
        // The fencing counters of the names' hash slots stay, without a
        // TTL (at most one per slot, whatever the number of names).
        let slot_fence = deadbolt_core::is_fence_key("deadbolt", &key);
        let why = match &found {
            None if slot_fence && ty == "string" => None,
            None => Some("unknown key".to_string()),
            Some((k, n, None)) if k.main_stays => {
                let taken: Option<i64> = redis::cmd("HGET")
                    .arg(format!("{}:hn", (k.main)(n)))
                    .arg("#t")
                    .query_async(&mut c)
                    .await
                    .unwrap();
                taken
                    .filter(|t| *t != 0)
                    .map(|t| format!("{t} permits still taken"))
            }
            Some((k, _, None)) => Some(format!("{} hold left", k.name)),
            Some((k, _, Some(s))) if k.main_stays && s == "hn" => None,
            Some((k, _, Some(s))) if !k.leftovers.contains(&s.as_str()) => {
                Some(format!("{} key :{s} left", k.name))
            }
            Some((k, _, Some(_))) if pttl < 0 => Some(format!("{} key without a TTL", k.name)),
            Some(_) => None,
        };
        let Some(why) = why else { continue };
        let mut line = format!("{why}: {key} ({ty}, pttl {pttl} ms) {{{body}}}");
        // The last operations of every owner the key names, else of its name.
        let words: Vec<&str> = body.split([' ', '=']).collect();
        let owners: Vec<&String> = log
            .by_owner
            .keys()
            .filter(|o| words.contains(&o.as_str()))
            .collect();
        if owners.is_empty() {
            if let Some((_, n, _)) = found {
                let _ = write!(line, "\n    last operations on {n}:");
                for op in log.by_name.get(n).into_iter().flatten() {
                    let _ = write!(line, "\n      {op}");
                }
            }
        }
        for o in owners {
            let _ = write!(line, "\n    last operations of owner {o}:");
            for op in &log.by_owner[o] {
                let _ = write!(line, "\n      {op}");
            }
        }
        bad.push(line);
    }
    bad
}

async fn run_once(seed: u64) {
    println!("churn: seed {seed} ({SEED_ENV}={seed} replays it)");
    let srv = support::server();
    // The last client talks through a proxy that delays replies by
    // LATENCY, as a network does: calls stay in flight long enough for
    // cancellations to land mid-call (loopback answers in microseconds).
    let proxy = FaultProxy::start(srv.addr()).await.expect("proxy");
    proxy.set_reply_delay(LATENCY);
    let mut clients = Vec::new();
    for i in 0..CLIENTS {
        let url = if i + 1 == CLIENTS {
            proxy.url()
        } else {
            srv.url()
        };
        clients.push(
            deadbolt::Client::builder(&url)
                .watchdog_timeout(WATCHDOG_TIMEOUT)
                .waiter_timeout(WAITER_TIMEOUT)
                .build()
                .await
                .expect("client"),
        );
    }
    for k in KINDS.iter().filter(|k| k.main_stays) {
        for n in k.names {
            assert!(clients[0]
                .semaphore(n)
                .try_set_permits(PERMITS)
                .await
                .expect("set permits"));
        }
    }
    let log: Shared = Arc::default();
    log.lock().unwrap().t0 = Some(Instant::now());
    let until = Instant::now() + RUN_FOR;
    let mut tasks = Vec::new();
    for (ci, client) in clients.iter().enumerate() {
        let set = || -> Vec<(usize, &'static str, Arc<Handle>)> {
            KINDS
                .iter()
                .enumerate()
                .flat_map(|(ki, k)| k.names.iter().map(move |n| (ki, *n)))
                .map(|(ki, n)| (ki, n, Arc::new((KINDS[ki].make)(client, n))))
                .collect()
        };
        // The first SHARED tasks of a client share their handles (clones of
        // one handle are one owner: they re-enter each other's holds); the
        // others have their own.
        let shared = set();
        for t in 0..TASKS {
            let handles = if t < SHARED { shared.clone() } else { set() };
            let task_seed = seed
                .wrapping_mul(1_000_003)
                .wrapping_add((ci * TASKS + t) as u64);
            let fresh = (t >= SHARED).then(|| client.clone());
            tasks.push(tokio::spawn(task(
                log.clone(),
                task_seed,
                handles,
                fresh,
                until,
            )));
        }
    }
    for t in tasks {
        within("a churn task", t).await.expect("task panicked");
    }
    for (i, c) in clients.iter().enumerate() {
        assert!(
            c.releases_settled(Duration::from_secs(5)).await,
            "seed {seed}: client {i} has {} releases still pending after 5 s",
            c.pending_releases()
        );
    }
    let log = std::mem::take(&mut *log.lock().unwrap());
    let bad = leftovers(&srv, &log).await;
    let mut counts: Vec<_> = log.counts.iter().collect();
    counts.sort();
    println!("churn: seed {seed}: {counts:?}");
    assert!(
        log.errors.is_empty(),
        "seed {seed}: unexpected errors:\n  {}",
        log.errors.join("\n  ")
    );
    assert!(
        bad.is_empty(),
        "seed {seed}: left behind after every task ended and every release settled:\n  {}",
        bad.join("\n  ")
    );
    for c in &clients {
        c.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelled_acquires_and_unlocks_leave_nothing_behind() {
    let runs: usize = std::env::var(RUNS_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let fixed: Option<u64> = std::env::var(SEED_ENV).ok().and_then(|s| s.parse().ok());
    for _ in 0..runs {
        run_once(fixed.unwrap_or_else(rand::random)).await;
    }
}
