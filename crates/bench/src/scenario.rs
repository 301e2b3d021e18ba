//! The machinery the scenarios (`crate::scenarios`) share: the run's
//! [`Env`], worker tallies, exclusion checks, and the runs more than one
//! scenario makes (distinct names, many waiters on one name, hand-off
//! rounds).
//!
//! Every run opens its own clients, takes an `INFO commandstats` snapshot
//! before and after its window (the multi scenario: of every server, added
//! up), and (except idle) times PING on a side connection to server 1
//! throughout, so its latencies have a floor measured under the same load.
//! Names carry a per-bench run id, so runs never meet each other's
//! leftovers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use futures::future::BoxFuture;
use hdrhistogram::Histogram;
use redis::aio::MultiplexedConnection;
use tokio::task::JoinSet;
use tokio::time::{timeout, timeout_at, Instant};

use crate::args::{BenchArgs, ScenarioKind};
use crate::contender::{Contender, ContenderClient, Held, LockHandle};
use crate::progress::Progress;
use crate::report::{fmt_rate, fmt_us, Commands, CpuSource, Fairness, Latency, RunResult, Work};
use crate::scenarios;
use crate::stats::{self, float, histogram, record, summarize, Pinger, Snapshot};
use crate::topology::Site;

/// Bound on any wait beyond the planned time: catches hangs, never speed.
pub(crate) const HANG: Duration = Duration::from_secs(20);
/// Errors in a row after which a worker gives up and the run fails.
const MAX_ERRORS_IN_A_ROW: u32 = 50;
/// Hand-off: the holder holds at least this long after the waiter started,
/// so the waiter is waiting when the release comes.
const HANDOFF_HOLD: Duration = Duration::from_millis(3);
/// How long the hand-off floor is measured.
pub(crate) const FLOOR_RUN: Duration = Duration::from_secs(1);
/// Hand-off: random extra hold for contenders that do not poll.
pub(crate) const EVENT_JITTER: Duration = Duration::from_millis(2);

/// How long a run of `scenario` is planned to take (for progress and its
/// ETA); the hand-off scenario may end sooner, after `--rounds`.
pub(crate) fn planned(args: &BenchArgs, scenario: ScenarioKind) -> Duration {
    scenarios::get(scenario).planned(args)
}

/// What every run needs: the servers, the flags, and where results go.
#[derive(Debug)]
pub(crate) struct Env<'a> {
    /// The run's servers, server 1 (the one every scenario uses) first; the
    /// others only when the Redlock contenders run.
    pub(crate) urls: Vec<String>,
    pub(crate) args: &'a BenchArgs,
    /// The bench's own connection to server 1, for INFO.
    pub(crate) stats: MultiplexedConnection,
    /// The bench's own connections to the other servers, for INFO.
    pub(crate) redlock_stats: Vec<MultiplexedConnection>,
    pub(crate) progress: Progress,
    /// Unique per bench: part of every lock name.
    pub(crate) run_id: String,
    /// Every PING of the bench to server 1.
    pub(crate) all_pings: Histogram<u64>,
    /// The topology scenario's cluster or Sentinel-managed master, when
    /// `--topology` names one and that scenario runs.
    pub(crate) topology: Option<Site>,
    /// True when the bench started the servers itself (nobody else uses
    /// them): Redis CPU is then read from the servers' own counters.
    pub(crate) embedded: bool,
    /// What the workers of the many-waiter runs do now: the rows of the
    /// flags, or the service rows.
    pub(crate) work: Work,
    /// The hand-off floor (µs a hop), once measured.
    pub(crate) floor_us: Option<f64>,
}

impl Env<'_> {
    /// The commands and cost of a run of `c` between two snapshots
    /// ([`commands`]).
    pub(crate) fn commands(
        &self,
        c: &dyn Contender,
        before: &Snapshot,
        after: &Snapshot,
        own_pings: u64,
    ) -> Commands {
        commands(c, before, after, own_pings, self.embedded)
    }

    /// Measure the hand-off floor on server 1 (see
    /// [`Report::handoff_floor_us`]): a token relayed between `--clients`
    /// clients (at least 2) for [`FLOOR_RUN`].
    ///
    /// [`Report::handoff_floor_us`]: crate::Report::handoff_floor_us
    pub(crate) async fn measure_floor(&mut self) -> anyhow::Result<()> {
        let clients = usize::try_from(self.args.clients.max(2)).unwrap_or(2);
        let bar = self.progress.start("hand-off floor", FLOOR_RUN);
        let client = redis::Client::open(self.url())?;
        let prefix = format!("{}:{}:floor", self.args.namespace, self.run_id);
        let rate = deadbolt_testkit::floor::relay(&client, &prefix, clients, false, FLOOR_RUN)
            .await
            .context("measuring the hand-off floor")?;
        self.floor_us = (rate > 0.0).then(|| 1e6 / rate);
        bar.finish(format!(
            "{} a hop (PUBLISH relayed between {clients} clients)",
            self.floor_us.map_or_else(|| "-".into(), fmt_us)
        ));
        Ok(())
    }

    /// The ceiling of a run of which `limit` workers may hold at once, each
    /// holding `held_us` on average: `limit / (held + floor)` per second.
    /// The hold is the one measured (a timer's sleep of 1 ms lasts up to 2
    /// ms), not the one asked for.
    pub(crate) fn ceiling(&self, limit: u64, held_us: f64) -> Option<f64> {
        let floor = self.floor_us?;
        Some(float(limit) * 1e6 / (held_us + floor))
    }

    /// Server 1's URL.
    pub(crate) fn url(&self) -> &str {
        &self.urls[0]
    }

    pub(crate) fn name(
        &self,
        scenario: ScenarioKind,
        c: &dyn Contender,
        suffix: impl std::fmt::Display,
    ) -> String {
        // The service rows take names of their own (a semaphore's permits
        // are set once per name).
        format!(
            "{}:{}:{}:{suffix}{}",
            self.run_id,
            scenario.name(),
            c.kind().name(),
            if self.work.service { ":service" } else { "" }
        )
    }

    /// Server 1's commands and CPU so far, and this process's CPU.
    pub(crate) async fn snapshot(&mut self) -> anyhow::Result<Snapshot> {
        stats::snapshot(&mut self.stats).await
    }

    /// Every server's commands and CPU so far, added up.
    async fn snapshot_all(&mut self) -> anyhow::Result<Snapshot> {
        let mut total = self.snapshot().await?;
        for conn in &mut self.redlock_stats {
            total.add_server(&stats::snapshot(conn).await?);
        }
        Ok(total)
    }

    /// The commands `scenario` counts: server 1's, or (multi) every
    /// server's.
    async fn snapshot_for(&mut self, scenario: ScenarioKind) -> anyhow::Result<Snapshot> {
        if scenarios::get(scenario).counts_every_server() {
            self.snapshot_all().await
        } else {
            self.snapshot().await
        }
    }

    pub(crate) async fn connect(
        &self,
        c: &dyn Contender,
        n: u32,
    ) -> anyhow::Result<Vec<Arc<dyn ContenderClient>>> {
        if self.urls.len() < c.servers() {
            bail!(
                "{} needs {} servers, the run has {}",
                c.kind().name(),
                c.servers(),
                self.urls.len()
            );
        }
        let mut clients = Vec::new();
        for _ in 0..n {
            clients.push(Arc::from(c.connect(&self.urls).await?));
        }
        Ok(clients)
    }

    /// End a timed run of `scenario`: wait for its workers, read the
    /// commands counters, stop the pinger and the clients. Returns the
    /// workers' results, the elapsed time since `start`, the counters after,
    /// and the PING p50 and count.
    pub(crate) async fn finish_run<T: 'static>(
        &mut self,
        scenario: ScenarioKind,
        set: JoinSet<anyhow::Result<T>>,
        start: Instant,
        pinger: Pinger,
        clients: &[Arc<dyn ContenderClient>],
    ) -> anyhow::Result<(Vec<T>, std::time::Duration, Snapshot, (Option<f64>, u64))> {
        let workers = join_all(set).await;
        let elapsed = start.elapsed();
        let after = self.snapshot_for(scenario).await;
        let pings = self.finish_pinger(pinger).await;
        shutdown(clients).await;
        Ok((workers?, elapsed, after?, pings?))
    }

    /// Stop `pinger`, keep its samples, and return its p50 and PING count.
    pub(crate) async fn finish_pinger(
        &mut self,
        pinger: Pinger,
    ) -> anyhow::Result<(Option<f64>, u64)> {
        let (h, sent) = pinger.finish().await?;
        let p50 = stats::p50_us(&h);
        self.all_pings
            .add(&h)
            .map_err(|e| anyhow!("merging PING samples: {e}"))?;
        Ok((p50, sent))
    }
}

/// One worker's counts.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) acquisitions: u64,
    pub(crate) errors: u64,
    in_a_row: u32,
    pub(crate) first_error: Option<String>,
}

impl Tally {
    pub(crate) fn ok(&mut self) {
        self.acquisitions += 1;
        self.in_a_row = 0;
    }

    /// Count an error; fail when there were too many in a row.
    pub(crate) fn error(&mut self, e: anyhow::Error) -> anyhow::Result<()> {
        self.errors += 1;
        self.in_a_row += 1;
        if self.first_error.is_none() {
            self.first_error = Some(format!("{e:#}"));
        }
        if self.in_a_row >= MAX_ERRORS_IN_A_ROW {
            return Err(e.context(format!("{MAX_ERRORS_IN_A_ROW} errors in a row")));
        }
        Ok(())
    }

    pub(crate) fn merge(&mut self, other: &Tally) {
        self.acquisitions += other.acquisitions;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }
}

/// Watches one lock name for two holders at once, or (shared holders, the
/// read side of a read-write lock) for a shared holder beside an exclusive
/// one.
///
/// The first counter holds the exclusive holders in its low 32 bits and the
/// shared ones above, so one atomic step both counts a holder in and sees
/// who was there.
#[derive(Debug, Clone, Default)]
pub(crate) struct Exclusion(Arc<(AtomicU64, AtomicU64)>);

/// One shared holder in [`Exclusion`]'s counter.
const SHARED: u64 = 1 << 32;
/// The exclusive holders in [`Exclusion`]'s counter.
const EXCLUSIVE_MASK: u64 = SHARED - 1;

impl Exclusion {
    /// A holder got the lock.
    pub(crate) fn enter(&self) {
        if self.0 .0.fetch_add(1, Ordering::SeqCst) > 0 {
            self.0 .1.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A holder is about to release it (before the release is sent).
    pub(crate) fn leave(&self) {
        self.0 .0.fetch_sub(1, Ordering::SeqCst);
    }

    /// A holder got the lock, shared with other shared holders when
    /// `shared`, else as [`Exclusion::enter`].
    pub(crate) fn enter_as(&self, shared: bool) {
        if !shared {
            return self.enter();
        }
        if self.0 .0.fetch_add(SHARED, Ordering::SeqCst) & EXCLUSIVE_MASK > 0 {
            self.0 .1.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The holder of [`Exclusion::enter_as`] is about to release it.
    pub(crate) fn leave_as(&self, shared: bool) {
        if shared {
            self.0 .0.fetch_sub(SHARED, Ordering::SeqCst);
        } else {
            self.leave();
        }
    }

    pub(crate) fn violations(&self) -> u64 {
        self.0 .1.load(Ordering::SeqCst)
    }
}

/// Watches one name for more holders at once than it allows (`limit`: 1
/// for a lock, the permits for a semaphore).
#[derive(Debug, Clone)]
struct Capacity(Arc<(AtomicU64, AtomicU64)>, u64);

impl Capacity {
    fn new(limit: u64) -> Capacity {
        Capacity(Arc::default(), limit)
    }

    /// A holder got in.
    fn enter(&self) {
        if self.0 .0.fetch_add(1, Ordering::SeqCst) >= self.1 {
            self.0 .1.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A holder is about to give its place back (before the release is
    /// sent).
    fn leave(&self) {
        self.0 .0.fetch_sub(1, Ordering::SeqCst);
    }

    fn violations(&self) -> u64 {
        self.0 .1.load(Ordering::SeqCst)
    }
}

/// One acquire of a worker (`acquire`: a handle's `acquire()` or
/// `acquire_read()`), bounded by the run's end plus [`HANG`]: `None` when it
/// failed (counted in `tally`), an error when it hung or failed too often in
/// a row.
pub(crate) async fn acquire_bounded(
    acquire: BoxFuture<'_, anyhow::Result<Box<dyn Held>>>,
    deadline: Instant,
    tally: &mut Tally,
) -> anyhow::Result<Option<Box<dyn Held>>> {
    match timeout_at(deadline + HANG, acquire).await {
        Err(_) => bail!("an acquire did not return within {HANG:?} after the run"),
        Ok(Err(e)) => {
            tally.error(e)?;
            Ok(None)
        }
        Ok(Ok(held)) => Ok(Some(held)),
    }
}

pub(crate) async fn join_all<T: 'static>(
    mut set: JoinSet<anyhow::Result<T>>,
) -> anyhow::Result<Vec<T>> {
    let mut out = Vec::new();
    while let Some(r) = set.join_next().await {
        out.push(r.context("a bench worker panicked")??);
    }
    Ok(out)
}

/// The commands and the cost of a run between two snapshots: Redis CPU
/// from the server's own counters when the bench started the servers
/// (`embedded`), else from the commandstats µs of the commands the
/// contender sends (see [`CpuSource`]).
pub(crate) fn commands(
    c: &dyn Contender,
    before: &Snapshot,
    after: &Snapshot,
    own_pings: u64,
    embedded: bool,
) -> Commands {
    let by_command = stats::delta(&before.calls, &after.calls, own_pings);
    let names = c.client_commands();
    let counted = names.iter().filter_map(|n| by_command.get(*n)).sum();
    let (redis_cpu_us, source) = if embedded {
        (
            after.server_cpu_us - before.server_cpu_us,
            CpuSource::Server,
        )
    } else {
        let usec = stats::delta(&before.usec, &after.usec, 0);
        let spent: u64 = names.iter().filter_map(|n| usec.get(*n)).sum();
        (float(spent), CpuSource::Commandstats)
    };
    Commands {
        counted,
        per_acquisition: None,
        per_waiter_per_s: None,
        counted_names: names.iter().map(|n| (*n).to_string()).collect(),
        by_command,
        redis_cpu_us: Some(redis_cpu_us.max(0.0)),
        redis_cpu_source: Some(source),
        client_cpu_us: Some((after.client_cpu_us - before.client_cpu_us).max(0.0)),
        redis_cpu_us_per_acquisition: None,
        client_cpu_us_per_acquisition: None,
    }
}

/// How evenly a run's acquisitions went round its waiters: `per_worker`
/// counts each waiter's, `waits` holds every wait for one (ns).
pub(crate) fn fairness(per_worker: Vec<u64>, waits: &Histogram<u64>) -> Fairness {
    Fairness {
        jain_index: stats::jain(&per_worker),
        min_max_ratio: stats::min_max_ratio(&per_worker),
        longest_wait_us: float(waits.max()) / 1e3,
        per_worker,
    }
}

pub(crate) fn lat_summary(l: Option<&Latency>) -> String {
    l.map_or_else(String::new, |l| match l.p50_x_ping {
        Some(x) => format!("p50 {} ({x:.1}× PING)", fmt_us(l.p50_us)),
        None => format!("p50 {}", fmt_us(l.p50_us)),
    })
}

pub(crate) async fn shutdown(clients: &[Arc<dyn ContenderClient>]) {
    for c in clients {
        c.shutdown().await;
    }
}

/// What one lock-and-unlock worker (or all of them, merged) measured.
#[derive(Debug)]
pub(crate) struct LockUnlock {
    pub(crate) tally: Tally,
    /// Time in acquire.
    pub(crate) acquire: Histogram<u64>,
    /// Time of acquire plus release.
    pub(crate) total: Histogram<u64>,
}

impl LockUnlock {
    /// Every worker's figures together.
    pub(crate) fn merge(workers: &[LockUnlock]) -> anyhow::Result<LockUnlock> {
        let mut all = LockUnlock {
            tally: Tally::default(),
            acquire: histogram(),
            total: histogram(),
        };
        for w in workers {
            all.tally.merge(&w.tally);
            all.acquire.add(&w.acquire).map_err(|e| anyhow!("{e}"))?;
            all.total.add(&w.total).map_err(|e| anyhow!("{e}"))?;
        }
        Ok(all)
    }

    /// The result of a lock+unlock run over distinct names on one client:
    /// `workers` tasks for `elapsed`, the commands counted, and the PING p50
    /// timed during the run. Also returns the acquisition rate.
    pub(crate) fn result(
        self,
        scenario: ScenarioKind,
        contender: crate::args::ContenderKind,
        workers: u32,
        elapsed: std::time::Duration,
        ping_p50: Option<f64>,
        mut cmds: Commands,
    ) -> (RunResult, f64) {
        cmds.per_acquisitions(self.tally.acquisitions);
        let rate = float(self.tally.acquisitions) / elapsed.as_secs_f64();
        let result = RunResult {
            acquisitions_per_s: Some(rate),
            ping_p50_us: ping_p50,
            acquire: summarize(&self.acquire, ping_p50),
            acquire_release: summarize(&self.total, ping_p50),
            ..RunResult::of(scenario, contender, (workers, 1), elapsed, self.tally, cmds)
        };
        (result, rate)
    }
}

/// One worker of the distinct-names scenarios: until `deadline`, take and
/// give back each of `handles` in turn (all of them owners of names no other
/// worker uses), timing the acquire and the acquire plus release.
pub(crate) async fn lock_unlock(
    handles: Vec<Arc<dyn LockHandle>>,
    deadline: Instant,
) -> anyhow::Result<LockUnlock> {
    let mut w = LockUnlock {
        tally: Tally::default(),
        acquire: histogram(),
        total: histogram(),
    };
    for h in handles.iter().cycle() {
        if Instant::now() >= deadline {
            break;
        }
        let t0 = Instant::now();
        let Some(held) = acquire_bounded(h.acquire(), deadline, &mut w.tally).await? else {
            continue;
        };
        let t1 = Instant::now();
        let released = held.release().await;
        let t2 = Instant::now();
        match released {
            Ok(()) => {
                record(&mut w.acquire, t1 - t0);
                record(&mut w.total, t2 - t0);
                w.tally.ok();
            }
            Err(e) => w.tally.error(e)?,
        }
    }
    Ok(w)
}

/// T tasks, one name each, on one client: the uncontended path (scenario
/// uncontended), or the same with locks over many keys or servers (multi:
/// a name is a `MultiLock`'s three names, or one name on each of a Redlock's
/// servers).
pub(crate) async fn distinct_names(
    env: &mut Env<'_>,
    c: &dyn Contender,
    scenario: ScenarioKind,
) -> anyhow::Result<RunResult> {
    let args = env.args;
    let clients = env.connect(c, 1).await?;
    let handles: Vec<_> = (0..args.tasks)
        .map(|i| clients[0].handle(&env.name(scenario, c, i)))
        .collect();
    let pinger = Pinger::start(env.url()).await?;
    let before = env.snapshot_for(scenario).await?;
    let bar = env.progress.start(
        &format!("{} · {}", scenario.name(), c.kind().name()),
        planned(args, scenario),
    );
    let start = Instant::now();
    let deadline = start + args.duration;
    let mut set = JoinSet::new();
    for h in handles {
        set.spawn(lock_unlock(vec![h], deadline));
    }
    let (workers, elapsed, after, (ping_p50, sent)) = env
        .finish_run(scenario, set, start, pinger, &clients)
        .await?;
    let (result, rate) = LockUnlock::merge(&workers)?.result(
        scenario,
        c.kind(),
        args.tasks,
        elapsed,
        ping_p50,
        env.commands(c, &before, &after, sent),
    );
    bar.finish(format!(
        "{} acq/s, lock+unlock {}",
        fmt_rate(rate),
        lat_summary(result.acquire_release.as_ref())
    ));
    Ok(result)
}

/// W waiters over C clients on one name, each taking it (a lock, or one
/// permit of a semaphore: see [`ContenderClient::prepare`]), holding it
/// for the hold of [`Env::work`], giving it back and waiting its think time
/// before the next acquire, for `--duration`, under a progress bar named
/// `label`. More than `limit` holders at once counts as a violation.
///
/// [`ContenderClient::prepare`]: crate::contender::ContenderClient::prepare
pub(crate) async fn many_waiters(
    env: &mut Env<'_>,
    c: &dyn Contender,
    scenario: ScenarioKind,
    label: String,
    waiters: u32,
    clients_n: u32,
    limit: u64,
) -> anyhow::Result<RunResult> {
    let args = env.args;
    let work = env.work;
    let (hold, think) = (work.hold(), work.think());
    let clients = env.connect(c, clients_n).await?;
    let name = env.name(scenario, c, waiters);
    clients[0]
        .prepare(&name)
        .await
        .with_context(|| format!("preparing {name}"))?;
    let handles: Vec<_> = (0..waiters)
        .zip(clients.iter().cycle())
        .map(|(_, client)| client.handle(&name))
        .collect();
    let capacity = Capacity::new(limit);
    let pinger = Pinger::start(env.url()).await?;
    let before = env.snapshot().await?;
    let bar = env.progress.start(&label, planned(args, scenario));
    let start = Instant::now();
    let deadline = start + args.duration;
    let mut set = JoinSet::new();
    for (i, h) in handles.into_iter().enumerate() {
        let capacity = capacity.clone();
        set.spawn(async move {
            let mut tally = Tally::default();
            let mut waits = histogram();
            let mut held_for = Duration::ZERO;
            while Instant::now() < deadline {
                let t0 = Instant::now();
                let Some(held) = acquire_bounded(h.acquire(), deadline, &mut tally).await? else {
                    continue;
                };
                record(&mut waits, t0.elapsed());
                capacity.enter();
                let h0 = Instant::now();
                if !hold.is_zero() {
                    tokio::time::sleep(hold).await;
                }
                held_for += h0.elapsed();
                capacity.leave();
                match held.release().await {
                    Ok(()) => tally.ok(),
                    Err(e) => tally.error(e)?,
                }
                if !think.is_zero() {
                    tokio::time::sleep(think).await;
                }
            }
            Ok((i, tally, waits, held_for))
        });
    }
    let (mut workers, elapsed, after, (ping_p50, sent)) = env
        .finish_run(scenario, set, start, pinger, &clients)
        .await?;
    workers.sort_by_key(|w| w.0);

    let mut tally = Tally::default();
    let mut waits = histogram();
    let mut per_worker = Vec::new();
    let mut held_for = Duration::ZERO;
    for (_, t, w, held) in &workers {
        tally.merge(t);
        per_worker.push(t.acquisitions);
        waits.add(w).map_err(|e| anyhow!("{e}"))?;
        held_for += *held;
    }
    let held_us =
        (tally.acquisitions > 0).then(|| held_for.as_secs_f64() * 1e6 / float(tally.acquisitions));
    let mut cmds = env.commands(c, &before, &after, sent);
    cmds.per_acquisitions(tally.acquisitions);
    let rate = float(tally.acquisitions) / elapsed.as_secs_f64();
    let fairness = fairness(per_worker, &waits);
    let ceiling = held_us.and_then(|h| env.ceiling(limit, h));
    bar.finish(format!(
        "{} acq/s, Jain {:.3}, least/most {:.2}",
        fmt_rate(rate),
        fairness.jain_index,
        fairness.min_max_ratio
    ));
    Ok(RunResult {
        acquisitions_per_s: Some(rate),
        exclusion_violations: capacity.violations(),
        ping_p50_us: ping_p50,
        acquire: summarize(&waits, ping_p50),
        fairness: Some(fairness),
        work: Some(Work { held_us, ..work }),
        ceiling_per_s: ceiling,
        of_ceiling: ceiling.filter(|c| *c > 0.0).map(|c| rate / c),
        ..RunResult::of(
            scenario,
            c.kind(),
            (waiters, clients_n),
            elapsed,
            tally,
            cmds,
        )
    })
}

/// What the rounds of a hand-off run measured.
#[derive(Debug)]
pub(crate) struct Handoffs {
    pub(crate) tally: Tally,
    /// From the start of the holder's release to the waiter holding it.
    pub(crate) handoffs: Histogram<u64>,
    /// Rounds that ended with the waiter holding the lock.
    pub(crate) rounds: u64,
}

impl Handoffs {
    /// The hand-off row (two workers on two clients), and the line that
    /// closes its progress bar.
    pub(crate) fn result(
        self,
        scenario: ScenarioKind,
        contender: crate::args::ContenderKind,
        elapsed: std::time::Duration,
        ping_p50: Option<f64>,
        exclusion_violations: u64,
        mut cmds: Commands,
    ) -> (RunResult, String) {
        cmds.per_acquisitions(self.tally.acquisitions);
        let result = RunResult {
            rounds: Some(self.rounds),
            exclusion_violations,
            ping_p50_us: ping_p50,
            handoff: summarize(&self.handoffs, ping_p50),
            ..RunResult::of(scenario, contender, (2, 2), elapsed, self.tally, cmds)
        };
        let line = format!(
            "{} rounds, hand-off {}",
            self.rounds,
            lat_summary(result.handoff.as_ref())
        );
        (result, line)
    }
}

/// The hand-off rounds: `holder` takes the lock, `waiter` (another client's
/// owner of the same name) starts waiting for it, the holder holds it
/// [`HANDOFF_HOLD`] plus a random part of `jitter` and releases it; the time
/// from the release call to the waiter's grant is one sample. Up to
/// `max_rounds` rounds, and no new round after `deadline` once one is done.
pub(crate) async fn handoff_rounds(
    holder: &Arc<dyn LockHandle>,
    waiter: &Arc<dyn LockHandle>,
    jitter: Duration,
    max_rounds: u32,
    deadline: Instant,
    exclusion: &Exclusion,
) -> anyhow::Result<Handoffs> {
    let mut tally = Tally::default();
    let mut handoffs = histogram();
    let mut rounds = 0u64;
    while rounds < u64::from(max_rounds) && (rounds == 0 || Instant::now() < deadline) {
        let held = match timeout(HANG, holder.acquire()).await {
            Err(_) => bail!("the holder did not get a free lock in {HANG:?}"),
            Ok(Err(e)) => {
                tally.error(e)?;
                continue;
            }
            Ok(Ok(held)) => held,
        };
        exclusion.enter();
        tally.ok();
        let waiting = {
            let waiter = waiter.clone();
            let exclusion = exclusion.clone();
            tokio::spawn(async move {
                let r = waiter.acquire().await;
                let at = Instant::now();
                if r.is_ok() {
                    exclusion.enter();
                }
                (at, r)
            })
        };
        let extra = rand::random_range(Duration::ZERO..jitter);
        tokio::time::sleep(HANDOFF_HOLD + extra).await;
        let released_at = Instant::now();
        exclusion.leave();
        if let Err(e) = held.release().await {
            waiting.abort();
            tally.error(e)?;
            break;
        }
        let (acquired_at, r) = match timeout(HANG, waiting).await {
            Err(_) => bail!("the waiter did not get the lock within {HANG:?} of its release"),
            Ok(joined) => joined.context("the waiter panicked")?,
        };
        match r {
            Err(e) => tally.error(e)?,
            Ok(held) => {
                record(
                    &mut handoffs,
                    acquired_at.saturating_duration_since(released_at),
                );
                rounds += 1;
                tally.ok();
                exclusion.leave();
                if let Err(e) = held.release().await {
                    tally.error(e)?;
                    break;
                }
            }
        }
    }
    Ok(Handoffs {
        tally,
        handoffs,
        rounds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusion_lets_shared_holders_overlap_and_nothing_else() {
        let e = Exclusion::default();
        e.enter_as(true);
        e.enter_as(true);
        assert_eq!(e.violations(), 0, "two readers");
        e.enter_as(false);
        assert_eq!(e.violations(), 1, "a writer beside readers");
        e.leave_as(false);
        e.leave_as(true);
        e.leave_as(true);
        e.enter();
        e.enter_as(true);
        assert_eq!(e.violations(), 2, "a reader beside a writer");
        e.leave_as(true);
        e.enter();
        assert_eq!(e.violations(), 3, "two writers");
        e.leave();
        e.leave();
        e.enter_as(false);
        assert_eq!(e.violations(), 3, "alone again");
    }

    #[test]
    fn capacity_counts_holders_beyond_the_limit() {
        let c = Capacity::new(2);
        c.enter();
        c.enter();
        assert_eq!(c.violations(), 0, "two of two");
        c.enter();
        assert_eq!(c.violations(), 1, "a third");
        c.leave();
        c.leave();
        c.enter();
        assert_eq!(c.violations(), 1, "two again");
        let lock = Capacity::new(1);
        lock.enter();
        lock.enter();
        assert_eq!(lock.violations(), 1, "two holders of a lock");
    }
}
