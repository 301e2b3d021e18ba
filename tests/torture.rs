//! Torture test: every exclusive primitive, under a
//! seeded random schedule of faults, against one real `redis-server`.
//!
//! # What runs
//!
//! Three clients (one direct, two through their own [`FaultProxy`]; short
//! `command_timeout`, `watchdog_timeout` and `waiter_timeout` so that faults
//! resolve within a second) each run three tasks per primitive kind. Every
//! task has its own handle (handles are owners) on the one lock of its kind
//! and loops: `try_lock_for` (bounded wait) → one to three writes to an
//! in-process *fenced resource* (mostly short holds; while faults are
//! injected, sometimes a long hold that outlives several watchdog leases and
//! writes all along) → `unlock`, with random jitter.
//! Meanwhile an injector works through a seeded schedule with quiet gaps:
//! SIGSTOP of the server for longer than the lease, a restart (the server
//! has no persistence: every hold and queue is lost), `CLIENT KILL` of the
//! normal or the Pub/Sub connections, reply delays above and below the
//! command timeout for all connections of one proxy or for one connection of
//! the other, resets of every connection of a proxy, and a partition of one
//! proxied client (blackhole, longer than the lease; aimed at a client with
//! a long hold under way when there is one). A task whose hold
//! was lost writes once more later, as a paused process would on waking up
//! (a "zombie" write): the fence must turn it away once a newer token wrote.
//!
//! # What it checks
//!
//! * **Interval history**: a hold *believes* it holds between two
//!   observations of `state() == Active` (taken before the first and after
//!   each write, and before unlock). No two believing spans of one lock may
//!   overlap (more generally: the weights of overlapping spans stay within
//!   the kind's capacity), except across a restart, which loses the holds:
//!   the run keeps a restart epoch (odd while a restart is under way), each
//!   hold records it before and after its acquire, and only holds surely
//!   granted by the same server incarnation are compared.
//! * **Fence**: the resource accepts a token ≥ the highest it has accepted;
//!   its log must show accepted tokens never going down, a write by a guard
//!   that was `Active` before and after it must never be refused within one
//!   incarnation, a token is never handed to two handles, and within one
//!   incarnation tokens rise in the order the holds were observed.
//! * **Guarded writes**: each fenced write of an exclusive hold (but the
//!   MultiLock's, whose parts are in two slots) is also a guarded write in
//!   Redis (an increment of `<main>:data:torture`); one that commits was
//!   made under a hold the server still had, so the fenced write just
//!   before it must have been accepted within one incarnation. A zombie
//!   writes both ways; its guarded writes are counted, refused or not.
//! * **Errors**: only `Unavailable` and `Indeterminate` (any call), `NotHeld`
//!   (unlock after a lost lease) and `Shutdown` (once clients are being shut
//!   down) come back; anything else fails.
//! * **Progress**: after the last fault and a recovery window, every task
//!   completes at least [`PROGRESS_CYCLES`] more clean cycles (acquire, all
//!   writes accepted, unlock `Ok`) within [`PROGRESS_BOUND`].
//! * **Cleanup**: after the tasks stop (one random client is shut down while
//!   its tasks still run) and every client is shut down, Redis holds no hold
//!   key, no queue, nothing without a TTL, and nothing but the suffixes the
//!   kind allows (the fencing counter; for the fair lock its liveness record
//!   and enqueue counter), each with a TTL.
//!
//! Every await is bounded, so a hang fails with the seed rather than at a CI
//! timeout; the run takes about 15–25 s (a failing one up to about 35 s).
//!
//! Counted and printed, not failed: acquire timeouts, lost holds, zombie
//! writes, grants that came back with under 100 ms of validity (a fair-lock
//! hand-off to a waiter queued for almost its `waiter_timeout`), holds that
//! re-entered their handle's unconfirmed previous hold, and overlaps and
//! refused writes excused by a restart.
//!
//! # Running it
//!
//! `cargo test -p deadbolt --test torture -- --nocapture` prints the seed,
//! the fault schedule and a summary. `DEADBOLT_TORTURE_SEED=<n>` replays the
//! schedule and the tasks' random choices of seed `<n>` (timing still
//! varies). Every failure message names the seed.
//!
//! # Adding a primitive
//!
//! Implement [`Contender`] for its handle and [`Held`] for its guard (shared
//! holds: a `weight` and a capacity; no token: no fenced writes), and add one
//! [`Kind`] to [`KINDS`].

use deadbolt::Acquire as _;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadbolt::primitive::{Exclusive, ExclusiveKind};
use deadbolt::{Error, ExclusiveGuard, HoldGuard, LeaseState};
use deadbolt_testkit::{FaultProxy, RedisServer};
use futures::future::BoxFuture;
use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use tokio::sync::watch;

/// Environment variable that fixes the seed.
const SEED_ENV: &str = "DEADBOLT_TORTURE_SEED";
/// Clients: 0 connects directly, 1 and 2 through a proxy each.
const CLIENTS: usize = 3;
/// Tasks per client and kind, each with its own handle.
const TASKS_PER_CLIENT: usize = 3;
/// The one lock name every kind uses (kinds keep their keys apart).
const LOCK_NAME: &str = "torture";
const COMMAND_TIMEOUT: Duration = Duration::from_millis(300);
const WATCHDOG_TIMEOUT: Duration = Duration::from_secs(1);
const WAITER_TIMEOUT: Duration = Duration::from_secs(1);
/// The bounded wait of every acquire.
const ACQUIRE_WAIT: Duration = Duration::from_secs(2);
/// Quiet time before the first fault.
const WARM_UP: Duration = Duration::from_secs(1);
/// Quiet time after the last fault before progress is counted: longer than
/// a lease and a waiter timeout, so what the faults left behind has expired.
const RECOVERY: Duration = Duration::from_millis(1500);
/// Clean cycles every task must complete after the recovery window...
const PROGRESS_CYCLES: u64 = 3;
/// ...within this bound.
const PROGRESS_BOUND: Duration = Duration::from_secs(15);
/// Bound on any single await of a task (an acquire waits at most 2 s).
const STEP_BOUND: Duration = Duration::from_secs(10);
/// Bound on the whole run.
const TOTAL_BOUND: Duration = Duration::from_secs(55);
/// Share of holds that outlive several watchdog leases while faults are
/// injected (none afterwards: progress is about liveness).
const LONG_HOLD_P: f64 = 0.08;
/// A grant returned with less validity than this is counted (not a failure).
const SHORT_GRANT: Duration = Duration::from_millis(100);

// ---------------------------------------------------------------------------
// The primitives under torture.

/// A handle on a primitive, owned by one task.
trait Contender: Send + Sync + 'static {
    /// Wait up to `wait` for a hold (`Ok(None)`: the wait ran out).
    fn acquire(&self, wait: Duration) -> BoxFuture<'_, deadbolt::Result<Option<Box<dyn Held>>>>;
    /// The primitive's main key; its other keys are `<main>:<suffix>`.
    fn main_key(&self) -> String;
}

/// One hold of a [`Contender`].
trait Held: Send + Sync + 'static {
    /// The fencing token; `None` for holds that do not write (shared holds).
    fn token(&self) -> Option<u64>;
    /// Where the hold stands as far as its process knows.
    fn state(&self) -> LeaseState;
    /// How much longer the hold is known valid.
    fn valid_for(&self) -> Duration;
    /// How much of the kind's capacity this hold takes.
    fn weight(&self) -> u32 {
        1
    }
    /// Release the hold.
    fn unlock(self: Box<Self>) -> BoxFuture<'static, deadbolt::Result<()>>;
    /// Guarded writes under this hold (exclusive holds of one slot).
    fn guarded(&self) -> Option<deadbolt::guarded::Guarded<'_>> {
        None
    }
}

impl<K: ExclusiveKind> Contender for Exclusive<K> {
    fn acquire(&self, wait: Duration) -> BoxFuture<'_, deadbolt::Result<Option<Box<dyn Held>>>> {
        Box::pin(async move {
            Ok(self
                .try_lock_for(wait)
                .await?
                .map(|g| Box::new(g) as Box<dyn Held>))
        })
    }

    fn main_key(&self) -> String {
        self.key().expect("a valid lock name").to_string()
    }
}

impl Held for ExclusiveGuard {
    fn token(&self) -> Option<u64> {
        Some(self.fencing_token())
    }

    fn guarded(&self) -> Option<deadbolt::guarded::Guarded<'_>> {
        Some(ExclusiveGuard::guarded(self))
    }

    fn state(&self) -> LeaseState {
        HoldGuard::state(self)
    }

    fn valid_for(&self) -> Duration {
        HoldGuard::valid_for(self)
    }

    fn unlock(self: Box<Self>) -> BoxFuture<'static, deadbolt::Result<()>> {
        Box::pin(ExclusiveGuard::unlock(*self))
    }
}

/// A read hold of an [`RwLock`](deadbolt::RwLock) (shares the lock) or a
/// write hold (takes all of it: weight = the kind's capacity).
const RW_CAPACITY: u32 = 64;

/// Reads, and every fourth acquisition a write.
struct RwContender {
    lock: deadbolt::RwLock,
    n: AtomicU64,
}

impl Contender for RwContender {
    fn acquire(&self, wait: Duration) -> BoxFuture<'_, deadbolt::Result<Option<Box<dyn Held>>>> {
        Box::pin(async move {
            if self.n.fetch_add(1, Ordering::Relaxed) % 4 == 3 {
                Ok(self
                    .lock
                    .write_lock()
                    .try_lock_for(wait)
                    .await?
                    .map(|g| Box::new(Writer(g)) as Box<dyn Held>))
            } else {
                Ok(self
                    .lock
                    .read_lock()
                    .try_lock_for(wait)
                    .await?
                    .map(|g| Box::new(g) as Box<dyn Held>))
            }
        })
    }

    fn main_key(&self) -> String {
        self.lock.key().expect("a valid lock name").to_string()
    }
}

/// A write hold of an RwLock: exclusive against readers too.
struct Writer(ExclusiveGuard);

impl Held for Writer {
    fn token(&self) -> Option<u64> {
        Some(self.0.fencing_token())
    }

    fn guarded(&self) -> Option<deadbolt::guarded::Guarded<'_>> {
        Some(self.0.guarded())
    }

    fn state(&self) -> LeaseState {
        HoldGuard::state(&self.0)
    }

    fn valid_for(&self) -> Duration {
        HoldGuard::valid_for(&self.0)
    }

    fn weight(&self) -> u32 {
        RW_CAPACITY
    }

    fn unlock(self: Box<Self>) -> BoxFuture<'static, deadbolt::Result<()>> {
        Box::pin(self.0.unlock())
    }
}

impl Held for deadbolt::ReadGuard {
    fn token(&self) -> Option<u64> {
        None
    }

    fn state(&self) -> LeaseState {
        HoldGuard::state(self)
    }

    fn valid_for(&self) -> Duration {
        HoldGuard::valid_for(self)
    }

    fn unlock(self: Box<Self>) -> BoxFuture<'static, deadbolt::Result<()>> {
        Box::pin(deadbolt::ReadGuard::unlock(*self))
    }
}

/// Permits of the semaphore under torture, taken one at a time.
const SEM_PERMITS: u32 = 3;

impl Contender for deadbolt::Semaphore {
    fn acquire(&self, wait: Duration) -> BoxFuture<'_, deadbolt::Result<Option<Box<dyn Held>>>> {
        Box::pin(async move {
            // Set once per server incarnation (a restart loses the setting).
            self.try_set_permits(u64::from(SEM_PERMITS)).await?;
            Ok(self
                .try_acquire_for(1, wait)
                .await?
                .map(|p| Box::new(p) as Box<dyn Held>))
        })
    }

    fn main_key(&self) -> String {
        format!("deadbolt:{{{}}}:sem", self.name())
    }
}

impl Held for deadbolt::Permits {
    fn token(&self) -> Option<u64> {
        None
    }

    fn state(&self) -> LeaseState {
        HoldGuard::state(self)
    }

    fn valid_for(&self) -> Duration {
        HoldGuard::valid_for(self)
    }

    fn unlock(self: Box<Self>) -> BoxFuture<'static, deadbolt::Result<()>> {
        Box::pin(deadbolt::Permits::release(*self))
    }
}

/// The suffix of the counter each exclusive hold also writes with guarded
/// writes (`<main>:data:torture`, with a TTL).
const GUARDED: &str = "data:torture";

/// The guarded write each fenced write is paired with: one increment of
/// the hold's counter, which keeps a TTL (the cleanup allows it).
fn guarded_increment() -> &'static deadbolt::guarded::GuardedScript {
    static S: std::sync::OnceLock<deadbolt::guarded::GuardedScript> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        deadbolt::guarded::GuardedScript::new(
            "local n = redis.call('INCRBY', KEYS[1], 1) redis.call('PEXPIRE', KEYS[1], 60000) return n",
        )
    })
}

/// A guarded increment under `held` (bounded): `Some(true)` written,
/// `Some(false)` refused (the hold is gone), `None` no answer that counts
/// (an outage, a shutdown, no guarded writes for the kind).
async fn guarded_write(held: &dyn Held, out: &mut TaskOut) -> Option<bool> {
    let g = held.guarded()?;
    let key = g.key("torture");
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        g.eval(guarded_increment(), vec![key], vec![]),
    )
    .await
    .ok()?;
    match r {
        Ok(_) => Some(true),
        Err(deadbolt::Error::NotHeld) => Some(false),
        Err(e) if e.is_retryable() || matches!(e, deadbolt::Error::Shutdown) => None,
        Err(e) => {
            *out.errors.entry(format!("guarded write: {e}")).or_default() += 1;
            None
        }
    }
}

/// One kind of primitive in the run.
struct Kind {
    name: &'static str,
    /// A new handle (a new owner) on `name`.
    make: fn(&deadbolt::Client, &str) -> Arc<dyn Contender>,
    /// How much weight may hold at once (1: exclusive).
    capacity: u32,
    /// Key suffixes (`<main>:<suffix>`) that may outlive the run, each with a TTL.
    leftovers: &'static [&'static str],
    /// The main key is configuration that stays (a semaphore's permits):
    /// no permit may be left taken after the run.
    main_stays: bool,
}

/// A multi-lock over a `Lock` and a `FairLock` of one name `<name>-multi`:
/// its keys are `deadbolt:{<name>-multi}:lock…` and `…:fair…`.
struct MultiContender {
    multi: deadbolt::MultiLock,
    main: String,
}

impl Contender for MultiContender {
    fn acquire(&self, wait: Duration) -> BoxFuture<'_, deadbolt::Result<Option<Box<dyn Held>>>> {
        Box::pin(async move {
            Ok(self
                .multi
                .try_lock_for(wait)
                .await?
                .map(|g| Box::new(g) as Box<dyn Held>))
        })
    }

    fn main_key(&self) -> String {
        self.main.clone()
    }
}

impl Held for deadbolt::MultiGuard {
    fn token(&self) -> Option<u64> {
        // The largest part's token: each part's rises, so the largest does.
        Some(self.fencing_token())
    }

    fn state(&self) -> LeaseState {
        HoldGuard::state(self)
    }

    fn valid_for(&self) -> Duration {
        HoldGuard::valid_for(self)
    }

    fn unlock(self: Box<Self>) -> BoxFuture<'static, deadbolt::Result<()>> {
        Box::pin(deadbolt::MultiGuard::unlock(*self))
    }
}

fn make_multi_lock(client: &deadbolt::Client, name: &str) -> Arc<dyn Contender> {
    let name = format!("{name}-multi");
    Arc::new(MultiContender {
        multi: deadbolt::MultiLock::new(vec![
            Arc::new(client.lock(&name)) as Arc<dyn deadbolt::Lockable>,
            Arc::new(client.fair_lock(&name)),
        ]),
        main: format!("deadbolt:{{{name}}}"),
    })
}

fn make_rw_lock(client: &deadbolt::Client, name: &str) -> Arc<dyn Contender> {
    Arc::new(RwContender {
        lock: client.rw_lock(name),
        n: AtomicU64::new(0),
    })
}

fn make_semaphore(client: &deadbolt::Client, name: &str) -> Arc<dyn Contender> {
    Arc::new(client.semaphore(name))
}

impl Contender for deadbolt::Election {
    fn acquire(&self, wait: Duration) -> BoxFuture<'_, deadbolt::Result<Option<Box<dyn Held>>>> {
        Box::pin(async move {
            Ok(self
                .campaign_for("torture", wait)
                .await?
                .map(|l| Box::new(l) as Box<dyn Held>))
        })
    }

    fn main_key(&self) -> String {
        format!("deadbolt:{{{}}}:elect", self.name())
    }
}

impl Held for deadbolt::Leadership {
    fn token(&self) -> Option<u64> {
        // The term: a fencing token.
        Some(self.term())
    }

    fn guarded(&self) -> Option<deadbolt::guarded::Guarded<'_>> {
        Some(deadbolt::Leadership::guarded(self))
    }

    fn state(&self) -> LeaseState {
        HoldGuard::state(self)
    }

    fn valid_for(&self) -> Duration {
        HoldGuard::valid_for(self)
    }

    fn unlock(self: Box<Self>) -> BoxFuture<'static, deadbolt::Result<()>> {
        Box::pin(deadbolt::Leadership::resign(*self))
    }
}

fn make_election(client: &deadbolt::Client, name: &str) -> Arc<dyn Contender> {
    Arc::new(client.election(name))
}

fn make_lock(client: &deadbolt::Client, name: &str) -> Arc<dyn Contender> {
    Arc::new(client.lock(name))
}

fn make_fair_lock(client: &deadbolt::Client, name: &str) -> Arc<dyn Contender> {
    Arc::new(client.fair_lock(name))
}

/// Every primitive under torture; a new primitive joins with one entry.
const KINDS: &[Kind] = &[
    Kind {
        name: "Lock",
        make: make_lock,
        capacity: 1,
        leftovers: &["waiters", "next", GUARDED],
        main_stays: false,
    },
    Kind {
        name: "FairLock",
        make: make_fair_lock,
        capacity: 1,
        leftovers: &["alive", "seq", GUARDED],
        main_stays: false,
    },
    Kind {
        name: "RwLock",
        make: make_rw_lock,
        capacity: RW_CAPACITY,
        leftovers: &["alive", "ww", GUARDED],
        main_stays: false,
    },
    Kind {
        name: "MultiLock",
        make: make_multi_lock,
        capacity: 1,
        leftovers: &["lock:waiters", "lock:next", "fair:alive", "fair:seq"],
        main_stays: false,
    },
    Kind {
        name: "Election",
        make: make_election,
        capacity: 1,
        leftovers: &[GUARDED],
        main_stays: false,
    },
    Kind {
        name: "Semaphore",
        make: make_semaphore,
        capacity: SEM_PERMITS,
        leftovers: &["alive", "q", "qo"],
        main_stays: true,
    },
];

// ---------------------------------------------------------------------------
// Shared run state.

struct Run {
    seed: u64,
    t0: Instant,
    /// Restart epoch: odd from just before a restart kills the server until
    /// the new one answers. Holds granted while it stayed one even value were
    /// granted by one server incarnation.
    epoch: AtomicU64,
    /// The injector is done: no more long holds.
    faults_over: AtomicBool,
    /// Tasks finish their cycle and leave.
    stop: AtomicBool,
    /// Clients may be shut down from now on (`Error::Shutdown` is allowed).
    shutting_down: AtomicBool,
    /// Clean cycles per task.
    cycles: Vec<AtomicU64>,
    /// Long holds under way, per client.
    long_holds: [AtomicU64; CLIENTS],
    /// Ticks on every clean cycle, for the progress check to await.
    tick: watch::Sender<u64>,
    next_hold: AtomicU64,
    failures: Mutex<Vec<String>>,
    faults: Mutex<Vec<String>>,
}

impl Run {
    fn new(seed: u64, tasks: usize) -> Run {
        Run {
            seed,
            t0: Instant::now(),
            epoch: AtomicU64::new(0),
            faults_over: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            shutting_down: AtomicBool::new(false),
            cycles: (0..tasks).map(|_| AtomicU64::new(0)).collect(),
            long_holds: Default::default(),
            tick: watch::Sender::new(0),
            next_hold: AtomicU64::new(1),
            failures: Mutex::new(Vec::new()),
            faults: Mutex::new(Vec::new()),
        }
    }

    /// Seconds since the start, for messages.
    fn secs(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.t0).as_secs_f64()
    }

    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// `what`, with the seed and the fault log.
    fn msg(&self, what: &str) -> String {
        let faults = self.faults.lock().unwrap().join("\n  ");
        format!(
            "torture seed {seed} (replay: {SEED_ENV}={seed}): {what}\n  faults:\n  {faults}",
            seed = self.seed
        )
    }

    fn fail(&self, what: String) {
        eprintln!("torture seed {}: FAILED CHECK: {what}", self.seed);
        self.failures.lock().unwrap().push(what);
    }

    fn note_fault(&self, what: String) {
        println!("torture: {what}");
        self.faults.lock().unwrap().push(what);
    }

    /// Await `f`, failing with the seed if it takes longer than [`STEP_BOUND`].
    async fn within<F: Future>(&self, what: &str, f: F) -> F::Output {
        match tokio::time::timeout(STEP_BOUND, f).await {
            Ok(v) => v,
            Err(_) => panic!("{}", self.msg(&format!("{what} hung for {STEP_BOUND:?}"))),
        }
    }

    /// Count an error if its kind is documented for `op`, fail otherwise.
    /// Returns whether the task should stop (its client was shut down).
    fn error(&self, who: &str, op: &str, e: &Error, counts: &mut BTreeMap<String, u64>) -> bool {
        let kind = match e {
            Error::Unavailable(_) => "Unavailable",
            Error::Indeterminate(_) => "Indeterminate",
            Error::NotHeld if op == "unlock" => "NotHeld",
            Error::Shutdown if self.shutting_down.load(Ordering::SeqCst) => "Shutdown",
            other => {
                self.fail(format!(
                    "{who}: {op} at {:.2}s returned an undocumented error {other:?} ({})",
                    self.secs(Instant::now()),
                    other.report()
                ));
                "UNEXPECTED"
            }
        };
        *counts.entry(format!("{op}:{kind}")).or_default() += 1;
        matches!(e, Error::Shutdown)
    }
}

/// The seed from [`SEED_ENV`], or a random one.
fn seed() -> u64 {
    match std::env::var(SEED_ENV) {
        Ok(s) if !s.trim().is_empty() => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{SEED_ENV}={s:?} is not a u64")),
        _ => rand::random(),
    }
}

// ---------------------------------------------------------------------------
// The fenced resource.

/// An in-process resource that accepts a write iff its token is at least the
/// highest it accepted (the same hold may write again).
#[derive(Default)]
struct Fence {
    state: Mutex<FenceState>,
}

#[derive(Default)]
struct FenceState {
    highest: u64,
    /// Every write in the order the resource saw it: (token, hold, accepted).
    log: Vec<(u64, u64, bool)>,
}

impl Fence {
    fn write(&self, token: u64, hold: u64) -> bool {
        let mut s = self.state.lock().unwrap();
        let accepted = token >= s.highest;
        if accepted {
            s.highest = token;
        }
        s.log.push((token, hold, accepted));
        accepted
    }
}

// ---------------------------------------------------------------------------
// Tasks.

/// One write to the fenced resource.
struct WriteRec {
    /// Taken before the `Active` check that preceded the write.
    before: Instant,
    /// Taken after the write, before the `Active` check that followed it.
    after: Instant,
    accepted: bool,
    active_after: bool,
    /// Restart epoch right after the write.
    epoch: u64,
}

/// One granted hold.
struct HoldRec {
    task: usize,
    id: u64,
    token: Option<u64>,
    weight: u32,
    /// Restart epoch before and after the acquire.
    epochs: (u64, u64),
    /// First and last instant at which the hold was observed `Active`.
    span: Option<(Instant, Instant)>,
    writes: Vec<WriteRec>,
}

impl HoldRec {
    /// The server incarnation that surely granted it, if known.
    fn incarnation(&self) -> Option<u64> {
        let (a, b) = self.epochs;
        (a == b && a % 2 == 0).then_some(a / 2)
    }

    fn observe(&mut self, at: Instant) {
        self.span = Some(match self.span {
            None => (at, at),
            Some((first, _)) => (first, at),
        });
    }
}

#[derive(Default)]
struct TaskOut {
    holds: Vec<HoldRec>,
    timeouts: u64,
    /// Granted, but no longer `Active` by the time the acquire returned.
    stale_grants: u64,
    /// Granted `Active` with less than [`SHORT_GRANT`] of validity left.
    short_grants: u64,
    /// Found no longer `Active` during the hold.
    lost: u64,
    zombie_accepted: u64,
    zombie_refused: u64,
    /// Guarded writes paired with the fenced ones: written, refused.
    guarded_ok: u64,
    guarded_refused: u64,
    /// The zombie's guarded write: written (its hold was still the live one
    /// on the server), refused.
    zombie_guarded_ok: u64,
    zombie_guarded_refused: u64,
    errors: BTreeMap<String, u64>,
}

struct TaskCtx {
    run: Arc<Run>,
    /// Index into `run.cycles`.
    task: usize,
    /// Index of the task's client.
    client: usize,
    who: String,
    contender: Arc<dyn Contender>,
    fence: Arc<Fence>,
    rng: StdRng,
}

/// Counts one long hold under way for as long as it lives.
struct LongHold<'a>(&'a AtomicU64);

impl<'a> LongHold<'a> {
    fn new(count: &'a AtomicU64) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        LongHold(count)
    }
}

impl Drop for LongHold<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn jitter(rng: &mut StdRng, max_ms: u64) {
    let ms = rng.random_range(0..=max_ms);
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// Loop acquire → writes → unlock until the run stops.
async fn task_loop(mut cx: TaskCtx) -> TaskOut {
    let run = Arc::clone(&cx.run);
    let mut out = TaskOut::default();
    while !run.stop.load(Ordering::SeqCst) {
        let e0 = run.epoch();
        let res = run
            .within(
                &format!("{}: acquire", cx.who),
                cx.contender.acquire(ACQUIRE_WAIT),
            )
            .await;
        let e1 = run.epoch();
        let held = match res {
            Ok(Some(h)) => h,
            Ok(None) => {
                out.timeouts += 1;
                continue;
            }
            Err(e) => {
                if run.error(&cx.who, "acquire", &e, &mut out.errors) {
                    break;
                }
                jitter(&mut cx.rng, 30).await;
                continue;
            }
        };
        let mut rec = HoldRec {
            task: cx.task,
            id: run.next_hold.fetch_add(1, Ordering::Relaxed),
            token: held.token(),
            weight: held.weight(),
            epochs: (e0, e1),
            span: None,
            writes: Vec::new(),
        };
        let clean = hold_and_write(&mut cx, &mut out, &mut rec, &*held).await;
        let r = run
            .within(&format!("{}: unlock", cx.who), held.unlock())
            .await;
        let stop = match r {
            Ok(()) => {
                if clean {
                    run.cycles[cx.task].fetch_add(1, Ordering::SeqCst);
                    run.tick.send_modify(|n| *n += 1);
                }
                false
            }
            Err(e) => run.error(&cx.who, "unlock", &e, &mut out.errors),
        };
        out.holds.push(rec);
        if stop {
            break;
        }
        // Think time: also gives waiters of slower clients a chance at an unfair lock.
        tokio::time::sleep(ms(&mut cx.rng, 5, 40)).await;
    }
    out
}

/// Observe the hold and write with it; returns whether the cycle was clean
/// (observed `Active`, at least one write, every write accepted).
async fn hold_and_write(
    cx: &mut TaskCtx,
    out: &mut TaskOut,
    rec: &mut HoldRec,
    held: &dyn Held,
) -> bool {
    let run = Arc::clone(&cx.run);
    let at = Instant::now();
    if held.state() != LeaseState::Active {
        out.stale_grants += 1;
        return false;
    }
    rec.observe(at);
    if held.valid_for() < SHORT_GRANT {
        out.short_grants += 1;
    }
    let Some(token) = rec.token else {
        // A hold without a token only holds for a while.
        jitter(&mut cx.rng, 30).await;
        let at = Instant::now();
        if held.state() == LeaseState::Active {
            rec.observe(at);
            return true;
        }
        out.lost += 1;
        return false;
    };
    let long = !run.faults_over.load(Ordering::SeqCst) && cx.rng.random_bool(LONG_HOLD_P);
    // A long hold (1.5–3 s, several leases: the watchdog must renew it)
    // writes every 0–120 ms until its time is up; the injector aims
    // partitions at clients with one under way.
    let (writes, gap_ms, until, _long_hold) = if long {
        let until = Instant::now() + ms(&mut cx.rng, 1500, 3000);
        let mark = LongHold::new(&run.long_holds[cx.client]);
        (usize::MAX, 120, Some(until), Some(mark))
    } else {
        (cx.rng.random_range(1..=3), 15, None, None)
    };
    let mut clean = true;
    let mut lost = false;
    for i in 0..writes {
        if i > 0 {
            jitter(&mut cx.rng, gap_ms).await;
        }
        if until.is_some_and(|u| Instant::now() >= u) {
            break;
        }
        let before = Instant::now();
        if held.state() != LeaseState::Active {
            lost = true;
            break;
        }
        let accepted = cx.fence.write(token, rec.id);
        let epoch = run.epoch();
        // The same write as a guarded write in Redis. One that commits was
        // made under a hold the server still had, which no newer hold of
        // its incarnation can have overtaken: the fenced write just before
        // must have been accepted too.
        match guarded_write(held, out).await {
            Some(true) => {
                out.guarded_ok += 1;
                let same = rec
                    .incarnation()
                    .is_some_and(|i| epoch == 2 * i && run.epoch() == epoch);
                if !accepted && same {
                    run.fail(format!(
                        "a guarded write of hold {} (token {token}) committed although the fence had \
                         refused its write: a newer hold wrote while it was still held",
                        rec.id
                    ));
                }
            }
            Some(false) => out.guarded_refused += 1,
            None => {}
        }
        let after = Instant::now();
        let active_after = held.state() == LeaseState::Active;
        if active_after {
            rec.observe(after);
        }
        rec.writes.push(WriteRec {
            before,
            after,
            accepted,
            active_after,
            epoch,
        });
        clean &= accepted;
        if !active_after {
            lost = true;
            break;
        }
    }
    if lost {
        out.lost += 1;
        if !run.stop.load(Ordering::SeqCst) {
            // A paused holder waking up later and writing all the same.
            let ms = cx.rng.random_range(200..=2500);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            if cx.fence.write(token, rec.id) {
                out.zombie_accepted += 1;
            } else {
                out.zombie_refused += 1;
            }
            match guarded_write(held, out).await {
                Some(true) => out.zombie_guarded_ok += 1,
                Some(false) => out.zombie_guarded_refused += 1,
                None => {}
            }
        }
        return false;
    }
    let at = Instant::now();
    if held.state() == LeaseState::Active {
        rec.observe(at);
    }
    clean && !rec.writes.is_empty()
}

// ---------------------------------------------------------------------------
// Faults.

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// SIGSTOP the server for this long (longer than the lease), then SIGCONT.
    Pause(Duration),
    /// Kill the server, keep it down this long, start it again (empty).
    Restart(Duration),
    /// `CLIENT KILL TYPE <type>`: "normal" or "pubsub".
    Kill(&'static str),
    /// Delay every reply through proxy 1 (client 1) by `delay` for `span`.
    ProxyDelay { delay: Duration, span: Duration },
    /// Delay the replies of one random connection of proxy 2 (client 2).
    ConnDelay { delay: Duration, span: Duration },
    /// Reset every connection of one proxy (0: proxy 1, 1: proxy 2).
    ProxyReset(usize),
    /// Cut one proxy's client off (blackhole) for longer than the lease,
    /// then reset its connections: a partitioned holder.
    Partition(usize, Duration),
}

fn ms(rng: &mut StdRng, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(rng.random_range(lo..=hi))
}

/// A delay above the command timeout (every command through it times out)
/// or below it (slow but answered).
fn delay(rng: &mut StdRng, above: bool) -> Duration {
    if above {
        ms(rng, 400, 900)
    } else {
        ms(rng, 30, 250)
    }
}

fn fault_of(rng: &mut StdRng, category: u32) -> Fault {
    match category {
        0 => Fault::Pause(ms(rng, 1200, 2000)),
        1 => Fault::Restart(ms(rng, 0, 500)),
        2 => Fault::Kill(if rng.random_bool(0.5) {
            "normal"
        } else {
            "pubsub"
        }),
        3 => {
            let above = rng.random_bool(0.7);
            Fault::ProxyDelay {
                delay: delay(rng, above),
                span: ms(rng, 700, 1500),
            }
        }
        4 => {
            let above = rng.random_bool(0.6);
            Fault::ConnDelay {
                delay: delay(rng, above),
                span: ms(rng, 700, 1500),
            }
        }
        5 => Fault::ProxyReset(rng.random_range(0..2)),
        _ => Fault::Partition(rng.random_range(0..2), ms(rng, 1200, 2000)),
    }
}

/// Every category once plus one to three more, shuffled, each after a quiet gap.
fn plan_faults(rng: &mut StdRng) -> Vec<(Duration, Fault)> {
    let mut categories: Vec<u32> = (0..7).collect();
    for _ in 0..rng.random_range(1..=3) {
        categories.push(rng.random_range(0..7));
    }
    categories.shuffle(rng);
    categories
        .into_iter()
        .map(|c| (ms(rng, 500, 1000), fault_of(rng, c)))
        .collect()
}

/// Ids of the connections proxy `p` has open. Probing sets each one's own
/// reply delay to zero, so it is used only on a proxy whose proxy-wide delay
/// stays zero.
fn open_connections(p: &FaultProxy) -> Vec<u64> {
    (0..4096)
        .filter(|&id| p.set_connection_reply_delay(id, Duration::ZERO))
        .collect()
}

/// A fresh admin connection (an old one may have been killed or restarted away).
async fn admin(url: &str) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(url)?;
    match tokio::time::timeout(
        Duration::from_secs(3),
        client.get_multiplexed_async_connection(),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => Err(redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "admin connect timed out",
        ))),
    }
}

async fn inject(
    run: Arc<Run>,
    srv: Arc<Mutex<RedisServer>>,
    url: String,
    proxies: Arc<[FaultProxy; 2]>,
    plan: Vec<(Duration, Fault)>,
    mut rng: StdRng,
) {
    for (gap, fault) in plan {
        tokio::time::sleep(gap).await;
        let start = Instant::now();
        let mut detail = String::new();
        match fault {
            Fault::Pause(d) => {
                srv.lock().unwrap().pause();
                tokio::time::sleep(d).await;
                srv.lock().unwrap().resume();
            }
            Fault::Restart(down) => {
                run.epoch.fetch_add(1, Ordering::SeqCst);
                let s = Arc::clone(&srv);
                let restarted = tokio::task::spawn_blocking(move || {
                    let mut s = s.lock().unwrap();
                    s.stop();
                    std::thread::sleep(down);
                    s.restart()
                });
                match tokio::time::timeout(Duration::from_secs(20), restarted).await {
                    Ok(Ok(Ok(()))) => {}
                    other => panic!(
                        "{}",
                        run.msg(&format!("restarting redis-server failed: {other:?}"))
                    ),
                }
                run.epoch.fetch_add(1, Ordering::SeqCst);
            }
            Fault::Kill(kind) => {
                let killed: redis::RedisResult<i64> = match admin(&url).await {
                    Ok(mut c) => {
                        redis::cmd("CLIENT")
                            .arg("KILL")
                            .arg("TYPE")
                            .arg(kind)
                            .query_async(&mut c)
                            .await
                    }
                    Err(e) => Err(e),
                };
                match killed {
                    Ok(n) => detail = format!(" ({n} connections)"),
                    Err(e) => run.fail(format!("injector: CLIENT KILL failed: {e}")),
                }
            }
            Fault::ProxyDelay { delay, span } => {
                proxies[0].set_reply_delay(delay);
                tokio::time::sleep(span).await;
                proxies[0].set_reply_delay(Duration::ZERO);
            }
            Fault::ConnDelay { delay, span } => {
                let open = open_connections(&proxies[1]);
                if let Some(&id) = open.choose(&mut rng) {
                    proxies[1].set_connection_reply_delay(id, delay);
                    detail = format!(" (connection {id} of {open:?})");
                    tokio::time::sleep(span).await;
                    proxies[1].set_connection_reply_delay(id, Duration::ZERO);
                } else {
                    detail = " (no connection open)".to_string();
                }
            }
            Fault::ProxyReset(p) => proxies[p].reset_all(),
            Fault::Partition(planned, d) => {
                // Aim at a proxied client with a long hold under way, if any.
                let busy: Vec<usize> = (0..2)
                    .filter(|&p| run.long_holds[p + 1].load(Ordering::SeqCst) > 0)
                    .collect();
                let p = busy.choose(&mut rng).copied().unwrap_or(planned);
                detail = format!(
                    " (proxy {}, long holds there: {})",
                    p + 1,
                    busy.contains(&p)
                );
                proxies[p].set_blackhole(true);
                tokio::time::sleep(d).await;
                proxies[p].set_blackhole(false);
            }
        }
        run.note_fault(format!(
            "{:6.2}s–{:6.2}s {fault:?}{detail}",
            run.secs(start),
            run.secs(Instant::now())
        ));
    }
}

// ---------------------------------------------------------------------------
// Checks after the run.

#[derive(Default)]
struct KindStats {
    holds: usize,
    cycles: u64,
    timeouts: u64,
    stale_grants: u64,
    short_grants: u64,
    lost: u64,
    zombie_accepted: u64,
    zombie_refused: u64,
    guarded_ok: u64,
    guarded_refused: u64,
    zombie_guarded_ok: u64,
    zombie_guarded_refused: u64,
    /// Refused writes of guards no longer `Active` right after.
    refused_after_loss: u64,
    /// Refused writes of guards `Active` before and after, excused by a restart.
    refused_across_restart: u64,
    /// Overlapping believing spans of different incarnations (excused).
    overlaps_across_restart: u64,
    writes: usize,
    /// Holds that got the token of their handle's previous hold.
    reentries: u64,
    errors: BTreeMap<String, u64>,
}

/// The believing span of a hold that was observed `Active`.
#[derive(Clone, Copy)]
struct Span<'a> {
    hold: &'a HoldRec,
    from: Instant,
    to: Instant,
}

impl Span<'_> {
    fn overlaps(&self, other: &Span<'_>) -> bool {
        self.from <= other.to && other.from <= self.to
    }

    fn same_incarnation(&self, other: &Span<'_>) -> bool {
        self.hold.incarnation().is_some() && self.hold.incarnation() == other.hold.incarnation()
    }

    fn text(&self, run: &Run) -> String {
        let h = self.hold;
        format!(
            "hold {} (task {}, token {:?}, epochs {:?}) believed {:.4}s–{:.4}s",
            h.id,
            h.task,
            h.token,
            h.epochs,
            run.secs(self.from),
            run.secs(self.to)
        )
    }
}

/// Interval history, fence and tokens of one kind.
fn check_kind(run: &Run, kind: &Kind, holds: &[&HoldRec], fence: &Fence, stats: &mut KindStats) {
    let spans: Vec<Span<'_>> = holds
        .iter()
        .filter_map(|&hold| hold.span.map(|(from, to)| Span { hold, from, to }))
        .collect();

    // 1. Interval history: at every start of a believing span, the spans of
    //    the same incarnation that contain it stay within the capacity.
    let mut reported = 0;
    for s in &spans {
        if s.hold.incarnation().is_none() {
            continue;
        }
        let within: Vec<&Span<'_>> = spans
            .iter()
            .filter(|o| o.same_incarnation(s) && o.from <= s.from && s.from <= o.to)
            .collect();
        let weight: u32 = within.iter().map(|o| o.hold.weight).sum();
        if weight > kind.capacity && reported < 5 {
            reported += 1;
            let list: Vec<String> = within.iter().map(|o| o.text(run)).collect();
            run.fail(format!(
                "{}: {} holds believed they held at once (weight {weight} > capacity {}) \
                 within one server incarnation:\n    {}",
                kind.name,
                within.len(),
                kind.capacity,
                list.join("\n    ")
            ));
        }
    }
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            if a.overlaps(b) && !a.same_incarnation(b) {
                stats.overlaps_across_restart += 1;
            }
        }
    }

    // 2. Tokens: never handed to two handles (one handle gets its token
    //    again when it re-enters a hold whose unlock was not confirmed);
    //    within one incarnation they rise in the order the holds were
    //    first observed.
    let mut seen: HashMap<u64, &HoldRec> = HashMap::new();
    for h in holds {
        if let Some(t) = h.token {
            match seen.insert(t, h) {
                Some(other) if other.task == h.task => stats.reentries += 1,
                Some(other) => run.fail(format!(
                    "{}: token {t} was handed to hold {} (task {}) and to hold {} (task {})",
                    kind.name, other.id, other.task, h.id, h.task
                )),
                None => {}
            }
        }
    }
    let mut by_inc: BTreeMap<u64, Vec<Span<'_>>> = BTreeMap::new();
    for s in &spans {
        if let (Some(inc), Some(_)) = (s.hold.incarnation(), s.hold.token) {
            by_inc.entry(inc).or_default().push(*s);
        }
    }
    for list in by_inc.values_mut() {
        list.sort_by_key(|s| s.from);
        for w in list.windows(2) {
            let (a, b) = (w[0].hold, w[1].hold);
            let same_handle = a.task == b.task && a.token == b.token;
            if a.token >= b.token && !same_handle {
                run.fail(format!(
                    "{}: tokens out of grant order within one incarnation:\n    {}\n    {}",
                    kind.name,
                    w[0].text(run),
                    w[1].text(run)
                ));
            }
        }
    }

    // 3. The fence: its log never accepts a token below one it accepted,
    //    never refuses one at or above; a guard Active around its write is
    //    never refused unless a restart intervened.
    let state = fence.state.lock().unwrap();
    let log = &state.log;
    let mut highest = 0;
    for &(token, hold, accepted) in log {
        if accepted && token < highest {
            run.fail(format!(
                "{}: the resource accepted token {token} (hold {hold}) after token {highest}",
                kind.name
            ));
        }
        if !accepted && token >= highest {
            run.fail(format!(
                "{}: the resource refused token {token} (hold {hold}) with highest {highest}",
                kind.name
            ));
        }
        if accepted {
            highest = highest.max(token);
        }
    }
    for h in holds {
        for w in &h.writes {
            stats.writes += 1;
            if w.accepted {
                continue;
            }
            if !w.active_after {
                stats.refused_after_loss += 1;
                continue;
            }
            if h.incarnation().is_some_and(|inc| w.epoch == inc * 2) {
                run.fail(format!(
                    "{}: hold {} (task {}, token {:?}) was Active before ({:.4}s) and after \
                     ({:.4}s) a write the fence refused, with no restart since its grant",
                    kind.name,
                    h.id,
                    h.task,
                    h.token,
                    run.secs(w.before),
                    run.secs(w.after)
                ));
            } else {
                stats.refused_across_restart += 1;
            }
        }
    }
}

/// After every client shut down: no hold, no queue, nothing without a TTL,
/// only the suffixes the kinds allow.
async fn check_leftovers(run: &Run, url: &str, mains: &[(usize, String)]) {
    let mut c = match admin(url).await {
        Ok(c) => c,
        Err(e) => {
            run.fail(format!("cleanup: cannot reach redis-server: {e}"));
            return;
        }
    };
    let mut query = async |cmd: &str, key: &str| -> Option<redis::Value> {
        match redis::cmd(cmd).arg(key).query_async(&mut c).await {
            Ok(v) => Some(v),
            Err(e) => {
                run.fail(format!("cleanup: {cmd} {key} failed: {e}"));
                None
            }
        }
    };
    let Some(keys) = query("KEYS", "*").await else {
        return;
    };
    let keys: Vec<String> = redis::from_redis_value(keys).unwrap_or_default();
    for key in keys {
        let pttl: i64 = match query("PTTL", &key).await {
            Some(v) => redis::from_redis_value(v).unwrap_or(-3),
            None => continue,
        };
        let ty = match query("TYPE", &key).await {
            Some(redis::Value::SimpleString(t)) => t,
            other => format!("{other:?}"),
        };
        let dump = || format!("{key} ({ty}, pttl {pttl} ms)");
        // The fencing counters of the names' hash slots stay, without a
        // TTL (at most one per slot, whatever the number of names).
        if deadbolt_core::is_fence_key("deadbolt", &key) {
            if ty != "string" {
                run.fail(format!(
                    "cleanup: a fencing counter of another type: {}",
                    dump()
                ));
            }
            continue;
        }
        let owner = mains.iter().find_map(|(k, main)| {
            if key == *main {
                Some((*k, None))
            } else {
                key.strip_prefix(main.as_str())
                    .and_then(|rest| rest.strip_prefix(':'))
                    .map(|suffix| (*k, Some(suffix)))
            }
        });
        match owner {
            None => run.fail(format!("cleanup: unknown key left in Redis: {}", dump())),
            Some((k, None)) if KINDS[k].main_stays => {
                // Configuration stays; every permit must be back.
                let taken = match admin(url).await {
                    Ok(mut c2) => {
                        redis::cmd("HGET")
                            .arg(format!("{key}:hn"))
                            .arg("#t")
                            .query_async::<Option<i64>>(&mut c2)
                            .await
                    }
                    Err(e) => Err(e),
                };
                match taken {
                    Ok(None | Some(0)) => {}
                    other => run.fail(format!(
                        "cleanup: {} permits still taken after shutdown: {other:?} in {}",
                        KINDS[k].name,
                        dump()
                    )),
                }
            }
            Some((k, None)) => run.fail(format!(
                "cleanup: {} hold left in Redis after shutdown: {}",
                KINDS[k].name,
                dump()
            )),
            Some((k, Some(suffix))) => {
                if !KINDS[k].leftovers.contains(&suffix) {
                    run.fail(format!(
                        "cleanup: {} key :{suffix} left in Redis after shutdown: {}",
                        KINDS[k].name,
                        dump()
                    ));
                } else if pttl < 0 {
                    run.fail(format!(
                        "cleanup: {} key without a TTL: {}",
                        KINDS[k].name,
                        dump()
                    ));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The run.

async fn build_client(run: &Run, url: &str) -> deadbolt::Client {
    deadbolt::Client::builder(url)
        .command_timeout(COMMAND_TIMEOUT)
        .watchdog_timeout(WATCHDOG_TIMEOUT)
        .waiter_timeout(WAITER_TIMEOUT)
        .build()
        .await
        .unwrap_or_else(|e| panic!("{}", run.msg(&format!("connecting to {url}: {e}"))))
}

struct Spawned {
    kind: usize,
    client: usize,
    task: usize,
    handle: tokio::task::JoinHandle<TaskOut>,
}

/// One task per (kind, client, slot), each with its own contender and
/// seed; the main key of each kind's first task on a client, for the
/// leftover check.
fn spawn_tasks(
    run: &Arc<Run>,
    clients: &[deadbolt::Client],
    fences: &[Arc<Fence>],
    rng: &mut StdRng,
) -> (Vec<Spawned>, Vec<(usize, String)>) {
    let mut spawned = Vec::new();
    let mut mains = Vec::new();
    for (k, kind) in KINDS.iter().enumerate() {
        for (c, client) in clients.iter().enumerate() {
            for _ in 0..TASKS_PER_CLIENT {
                let task = spawned.len();
                let contender = (kind.make)(client, LOCK_NAME);
                if task % (CLIENTS * TASKS_PER_CLIENT) == 0 {
                    mains.push((k, contender.main_key()));
                }
                let cx = TaskCtx {
                    run: Arc::clone(run),
                    task,
                    client: c,
                    who: format!("{} task {task} (client {c})", kind.name),
                    contender,
                    fence: Arc::clone(&fences[k]),
                    rng: StdRng::seed_from_u64(rng.random()),
                };
                spawned.push(Spawned {
                    kind: k,
                    client: c,
                    task,
                    handle: tokio::spawn(task_loop(cx)),
                });
            }
        }
    }
    (spawned, mains)
}

/// Plan the faults, inject them after the warm-up, and wait for the
/// injector (bounded by the plan's length).
async fn run_faults(
    run: &Arc<Run>,
    srv: &Arc<Mutex<RedisServer>>,
    url: &str,
    proxies: &Arc<[FaultProxy; 2]>,
    rng: &mut StdRng,
) {
    let plan = plan_faults(rng);
    let planned: Duration = plan
        .iter()
        .map(|(gap, f)| {
            *gap + match f {
                Fault::Pause(d) | Fault::Restart(d) | Fault::Partition(_, d) => *d,
                Fault::ProxyDelay { span, .. } | Fault::ConnDelay { span, .. } => *span,
                Fault::Kill(_) | Fault::ProxyReset(_) => Duration::ZERO,
            }
        })
        .sum();
    println!(
        "torture: {} faults planned over {planned:.1?}: {:?}",
        plan.len(),
        plan.iter().map(|(_, f)| f).collect::<Vec<_>>()
    );
    tokio::time::sleep(WARM_UP).await;
    let injector = tokio::spawn(inject(
        Arc::clone(run),
        Arc::clone(srv),
        url.to_string(),
        Arc::clone(proxies),
        plan,
        StdRng::seed_from_u64(rng.random()),
    ));
    match tokio::time::timeout(planned + Duration::from_secs(20), injector).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{}", run.msg(&format!("the injector failed: {e}"))),
        Err(_) => panic!("{}", run.msg("the injector hung")),
    }
}

/// After the recovery time, wait until every task completed
/// PROGRESS_CYCLES more cycles, or record which did not within
/// PROGRESS_BOUND and return false.
async fn await_progress(run: &Run, spawned: &[Spawned]) -> bool {
    tokio::time::sleep(RECOVERY).await;
    let base: Vec<u64> = run
        .cycles
        .iter()
        .map(|c| c.load(Ordering::SeqCst))
        .collect();
    let deadline = tokio::time::Instant::now() + PROGRESS_BOUND;
    let mut ticks = run.tick.subscribe();
    loop {
        let behind: Vec<usize> = (0..base.len())
            .filter(|&i| run.cycles[i].load(Ordering::SeqCst) < base[i] + PROGRESS_CYCLES)
            .collect();
        if behind.is_empty() {
            return true;
        }
        if tokio::time::timeout_at(deadline, ticks.changed())
            .await
            .is_err()
        {
            let list: Vec<String> = behind
                .iter()
                .map(|&i| {
                    format!(
                        "{} task {i} (client {}): {} of {PROGRESS_CYCLES} cycles",
                        KINDS[spawned[i].kind].name,
                        spawned[i].client,
                        run.cycles[i].load(Ordering::SeqCst) - base[i]
                    )
                })
                .collect();
            run.fail(format!(
                "progress: {} task(s) did not complete {PROGRESS_CYCLES} cycles within \
                 {PROGRESS_BOUND:?} after the faults (+{RECOVERY:?} recovery): {}",
                list.len(),
                list.join("; ")
            ));
            return false;
        }
    }
}

/// Sum each kind's task outcomes and check its holds.
fn check_outs(
    run: &Run,
    spawned: &[Spawned],
    outs: &[(usize, TaskOut)],
    fences: &[Arc<Fence>],
) -> Vec<KindStats> {
    let mut stats: Vec<KindStats> = KINDS.iter().map(|_| KindStats::default()).collect();
    for (k, out) in outs {
        let st = &mut stats[*k];
        st.holds += out.holds.len();
        st.timeouts += out.timeouts;
        st.stale_grants += out.stale_grants;
        st.short_grants += out.short_grants;
        st.lost += out.lost;
        st.zombie_accepted += out.zombie_accepted;
        st.zombie_refused += out.zombie_refused;
        st.guarded_ok += out.guarded_ok;
        st.guarded_refused += out.guarded_refused;
        st.zombie_guarded_ok += out.zombie_guarded_ok;
        st.zombie_guarded_refused += out.zombie_guarded_refused;
        for (e, n) in &out.errors {
            *st.errors.entry(e.clone()).or_default() += n;
        }
    }
    for s in spawned {
        stats[s.kind].cycles += run.cycles[s.task].load(Ordering::SeqCst);
    }
    for (k, kind) in KINDS.iter().enumerate() {
        let holds: Vec<&HoldRec> = outs
            .iter()
            .filter(|(kk, _)| *kk == k)
            .flat_map(|(_, o)| &o.holds)
            .collect();
        check_kind(run, kind, &holds, &fences[k], &mut stats[k]);
    }
    stats
}

/// The run's summary: seed, time, restarts, and each kind's counts.
fn summary(
    run: &Run,
    spawned: &[Spawned],
    stats: &[KindStats],
    progress_took: Duration,
    early: usize,
) -> String {
    let mut summary = String::new();
    let _ = writeln!(
        summary,
        "torture: seed {} — {:.1}s, {} restart(s), progress phase {progress_took:.1?} \
         (early shutdown: client {early})",
        run.seed,
        run.t0.elapsed().as_secs_f64(),
        run.epoch() / 2,
    );
    for (k, kind) in KINDS.iter().enumerate() {
        let s = &stats[k];
        let per_task: Vec<u64> = spawned
            .iter()
            .filter(|t| t.kind == k)
            .map(|t| run.cycles[t.task].load(Ordering::SeqCst))
            .collect();
        let _ = writeln!(
            summary,
            "  {}: {} holds, {} clean cycles (per task {per_task:?}), {} writes, \
             {} acquire timeouts, {} stale and {} short grants, {} lost holds, zombie writes {} accepted / \
             {} refused, guarded writes {} / {} refused (zombies {} / {} refused), \
             {} refused writes of holds lost meanwhile, \
             {} refused writes and {} overlaps excused by a restart, \
             {} re-entries, errors {:?}",
            kind.name,
            s.holds,
            s.cycles,
            s.writes,
            s.timeouts,
            s.stale_grants,
            s.short_grants,
            s.lost,
            s.zombie_accepted,
            s.zombie_refused,
            s.guarded_ok,
            s.guarded_refused,
            s.zombie_guarded_ok,
            s.zombie_guarded_refused,
            s.refused_after_loss,
            s.refused_across_restart,
            s.overlaps_across_restart,
            s.reentries,
            s.errors
        );
    }
    summary
}

async fn torture(run: Arc<Run>) {
    let mut rng = StdRng::seed_from_u64(run.seed);
    let srv = RedisServer::start().unwrap_or_else(|e| {
        panic!(
            "{}",
            run.msg(&format!(
                "start redis-server (apt-get install -y redis-server): {e}"
            ))
        )
    });
    let url = srv.url();
    let addr = srv.addr();
    let srv = Arc::new(Mutex::new(srv));
    let proxy = async || {
        FaultProxy::start(addr)
            .await
            .unwrap_or_else(|e| panic!("{}", run.msg(&format!("starting a proxy: {e}"))))
    };
    let proxies = Arc::new([proxy().await, proxy().await]);
    let urls = [url.clone(), proxies[0].url(), proxies[1].url()];
    let mut clients = Vec::new();
    for u in &urls {
        clients.push(build_client(&run, u).await);
    }
    let fences: Vec<Arc<Fence>> = KINDS.iter().map(|_| Arc::default()).collect();

    let (mut spawned, mains) = spawn_tasks(&run, &clients, &fences, &mut rng);
    assert_eq!(spawned.len(), run.cycles.len());

    run_faults(&run, &srv, &url, &proxies, &mut rng).await;
    let faults_over = Instant::now();
    run.faults_over.store(true, Ordering::SeqCst);

    let progressed = await_progress(&run, &spawned).await;
    let progress_took = faults_over.elapsed();

    // Stop: one random client is shut down while its tasks still run, the
    // others once their tasks have finished their cycle.
    run.stop.store(true, Ordering::SeqCst);
    run.shutting_down.store(true, Ordering::SeqCst);
    let early = rng.random_range(0..CLIENTS);
    let joined = run
        .within(
            "stopping the tasks",
            futures::future::join(
                clients[early].shutdown(),
                futures::future::join_all(spawned.iter_mut().map(|s| &mut s.handle)),
            ),
        )
        .await
        .1;
    run.within(
        "shutting the clients down",
        futures::future::join_all(clients.iter().map(|c| c.shutdown())),
    )
    .await;

    // Collect.
    let mut outs: Vec<(usize, TaskOut)> = Vec::new();
    for (s, r) in spawned.iter().zip(joined) {
        match r {
            Ok(out) => outs.push((s.kind, out)),
            Err(e) => panic!("{}", run.msg(&format!("task {} panicked: {e}", s.task))),
        }
    }
    let stats = check_outs(&run, &spawned, &outs, &fences);
    check_leftovers(&run, &url, &mains).await;

    let summary = summary(&run, &spawned, &stats, progress_took, early);
    print!("{summary}");
    let failures = run.failures.lock().unwrap().clone();
    let mut shown: Vec<&str> = failures.iter().take(20).map(String::as_str).collect();
    let more = format!("... and {} more", failures.len().saturating_sub(20));
    if failures.len() > 20 {
        shown.push(&more);
    }
    assert!(
        failures.is_empty() && progressed,
        "{}",
        run.msg(&format!(
            "{} failed check(s):\n  {}\n{summary}",
            failures.len(),
            shown.join("\n  ")
        ))
    );
    drop(proxies);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_survive_random_faults() {
    let seed = seed();
    println!("torture: seed {seed} (replay with {SEED_ENV}={seed})");
    let tasks = KINDS.len() * CLIENTS * TASKS_PER_CLIENT;
    let run = Arc::new(Run::new(seed, tasks));
    if tokio::time::timeout(TOTAL_BOUND, torture(Arc::clone(&run)))
        .await
        .is_err()
    {
        panic!(
            "{}",
            run.msg(&format!("the run took longer than {TOTAL_BOUND:?}"))
        );
    }
}
