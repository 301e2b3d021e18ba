//! The machinery the scenarios share (re-exported by `scenarios`): the
//! [`Scenario`] trait, the run's [`Env`], exclusion checks, bounded
//! acquires, command counts. The runs themselves (distinct names, many
//! waiters on one name, hand-off rounds) are in the files beside this one.
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
use deadbolt_core::deployment::Topology;
use futures::future::BoxFuture;
use hdrhistogram::Histogram;
use redis::aio::MultiplexedConnection;
use tokio::task::JoinSet;
use tokio::time::{timeout_at, Instant};

use crate::contender::{Contender, ContenderClient, Held, LockHandle};
use crate::model::{
    float, BenchArgs, Commands, ContenderKind, CpuSource, Fairness, Latency, Report, RunResult,
    ScenarioKind, Settings, Tally, Work,
};
use crate::progress::{Bar, Progress};
use crate::site::Site;
use crate::stats::{self, Pinger, Snapshot};
use crate::table::{fmt_us, Legend};

/// Bound on any wait beyond the planned time: catches hangs, never speed.
pub(crate) const HANG: Duration = Duration::from_secs(20);
/// How long the hand-off floor is measured.
pub(crate) const FLOOR_RUN: Duration = Duration::from_secs(1);
/// Hand-off: random extra hold for contenders that do not poll.
pub(crate) const EVENT_JITTER: Duration = Duration::from_millis(2);

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

    /// The commands a run counts: server 1's, or with `every_server` (the
    /// multi scenario's, [`Scenario::counts_every_server`]) every server's.
    ///
    /// [`Scenario::counts_every_server`]: crate::scenarios::Scenario::counts_every_server
    pub(crate) async fn snapshot_for(&mut self, every_server: bool) -> anyhow::Result<Snapshot> {
        if every_server {
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

    /// Start a timed run of `scenario` once its clients are ready: the
    /// pinger to server 1, the counters before (every server's where the
    /// scenario counts them all, as [`Env::snapshot_for`]), a progress bar
    /// named `label`.
    pub(crate) async fn start_run(
        &mut self,
        scenario: &dyn Scenario,
        label: &str,
    ) -> anyhow::Result<Started> {
        let every_server = scenario.counts_every_server();
        let pinger = Pinger::start(self.url()).await?;
        let before = self.snapshot_for(every_server).await?;
        let bar = self.progress.start(label, scenario.planned(self.args));
        let start = Instant::now();
        let timing = Timing {
            start,
            deadline: start + self.args.duration,
            pinger,
            every_server,
        };
        Ok(Started {
            timing,
            before,
            bar,
        })
    }

    /// The workers of the run of `timing` on `clients`, one per handle of
    /// `handles` (`worker(i, h, deadline)` for the `i`th), waited for; then
    /// the run ended (as [`Env::end_run`]). Returns the workers' results (in
    /// the handles' order), the elapsed time, the counters after, and the
    /// PING p50 and count.
    pub(crate) async fn run_workers<T, Fut>(
        &mut self,
        timing: Timing,
        clients: &[Arc<dyn ContenderClient>],
        handles: Vec<Arc<dyn LockHandle>>,
        mut worker: impl FnMut(usize, Arc<dyn LockHandle>, Instant) -> Fut,
    ) -> anyhow::Result<(Vec<T>, std::time::Duration, Snapshot, (Option<f64>, u64))>
    where
        T: Send + 'static,
        Fut: std::future::Future<Output = anyhow::Result<T>> + Send + 'static,
    {
        let deadline = timing.deadline;
        let set = spawn_each(handles, |i, h| {
            let work = worker(i, h, deadline);
            async move { Ok((i, work.await?)) }
        });
        let workers = join_all(set).await;
        let (elapsed, after, pings) = self.end_run(timing, clients).await;
        let mut workers = workers?;
        workers.sort_by_key(|(i, _)| *i);
        let workers = workers.into_iter().map(|(_, w)| w).collect();
        Ok((workers, elapsed, after?, pings?))
    }

    /// End the run of `timing` once its work is done: the time since its
    /// start, the counters after (as they were read before), the p50 and
    /// count of the stopped pinger; the clients shut down. The failures are
    /// left to the caller, to raise in its own order.
    pub(crate) async fn end_run(
        &mut self,
        timing: Timing,
        clients: &[Arc<dyn ContenderClient>],
    ) -> (
        std::time::Duration,
        anyhow::Result<Snapshot>,
        anyhow::Result<(Option<f64>, u64)>,
    ) {
        let elapsed = timing.start.elapsed();
        let after = self.snapshot_for(timing.every_server).await;
        let pings = self.finish_pinger(timing.pinger).await;
        shutdown(clients).await;
        (elapsed, after, pings)
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

/// A timed run under way, from [`Env::start_run`].
pub(crate) struct Started {
    /// Its clock and pinger, for [`Env::run_workers`] or [`Env::end_run`].
    pub(crate) timing: Timing,
    /// The commands counters before the run.
    pub(crate) before: Snapshot,
    /// The run's progress bar.
    pub(crate) bar: Bar,
}

/// When a timed run started and ends, its pinger, and where its commands
/// are counted.
pub(crate) struct Timing {
    start: Instant,
    /// When its workers stop: `--duration` after the start.
    pub(crate) deadline: Instant,
    /// Times PING to server 1 throughout the run.
    pinger: Pinger,
    every_server: bool,
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

/// The two methods of a [`Scenario`] impl that most scenarios write alike:
/// [`Scenario::kind`], `ScenarioKind::$kind`, and [`Scenario::run_one`], the
/// run `$run(env, c, $args...)` boxed.
macro_rules! kind_and_run {
    ($kind:ident => $run:path $(, $arg:expr)*) => {
        fn kind(&self) -> $crate::model::ScenarioKind {
            $crate::model::ScenarioKind::$kind
        }

        fn run_one<'a>(
            &'a self,
            env: &'a mut $crate::scenarios::Env<'_>,
            c: &'a dyn $crate::contender::Contender,
        ) -> ::futures::future::BoxFuture<'a, ::anyhow::Result<$crate::model::RunResult>> {
            Box::pin($run(env, c $(, $arg)*))
        }
    };
}
pub(crate) use kind_and_run;

/// The rows a scenario's many-waiter runs make ([`Scenario::rows`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rows {
    /// The rows of `--hold` and `--think` alone.
    Flags,
    /// Those, then the service rows (`--service-hold`, `--service-think`)
    /// unless they would repeat them ([`Work::both`]).
    WithService,
    /// Both, each with its ceiling.
    WithCeiling,
}

/// One scenario of the bench: how it runs and how it is shown.
pub(crate) trait Scenario: Send + Sync {
    /// Which scenario this is (its value in the JSON report).
    fn kind(&self) -> ScenarioKind;

    /// The name used on the command line, in the JSON report and in the
    /// table: its kind's.
    fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Whether this scenario measures `contender`. By default the lock
    /// contenders that take part in every general scenario
    /// ([`general`]).
    fn measures(&self, contender: ContenderKind) -> bool {
        general(contender)
    }

    /// Whether it runs when no `--scenario` is given, with `--topology
    /// topology`. By default always.
    fn in_default_selection(&self, topology: Topology) -> bool {
        let _ = topology;
        true
    }

    /// Whether it measures the `--topology` deployment (which is then
    /// found, or started, before the first run) when one is given: the
    /// topology scenario beside server 1, the held-names scenario instead
    /// of it.
    fn uses_topology(&self) -> bool {
        false
    }

    /// Whether its commands are counted on every server of the run (the
    /// Redlock rows' too), not on server 1 only.
    fn counts_every_server(&self) -> bool {
        false
    }

    /// Check the flags for this scenario, once it is selected.
    fn validate(&self, args: &BenchArgs) -> anyhow::Result<()> {
        let _ = args;
        Ok(())
    }

    /// How long one of its runs is planned to take (for progress and its
    /// ETA).
    fn planned(&self, args: &BenchArgs) -> Duration {
        args.duration
    }

    /// The rows its many-waiter runs make: by default those of `--hold`
    /// and `--think` alone.
    fn rows(&self) -> Rows {
        Rows::Flags
    }

    /// The workloads its runs go through, one run per contender each (as
    /// [`Scenario::rows`] says).
    fn workloads(&self, args: &BenchArgs) -> Vec<Work> {
        match self.rows() {
            Rows::Flags => vec![Work::flags(args)],
            Rows::WithService | Rows::WithCeiling => Work::both(args),
        }
    }

    /// Whether its rows show a ceiling (the bench then measures the
    /// hand-off floor first).
    fn shows_ceiling(&self) -> bool {
        self.rows() == Rows::WithCeiling
    }

    /// Runs it makes per contender it measures.
    fn planned_runs(&self, args: &BenchArgs) -> usize {
        self.workloads(args).len()
    }

    /// Run it for contender `c` with the sizes of the flags.
    ///
    /// Cancel safety: dropping it drops the run's workers and clients;
    /// holds they had end by their contender's own means.
    fn run_one<'a>(
        &'a self,
        env: &'a mut Env<'_>,
        c: &'a dyn Contender,
    ) -> BoxFuture<'a, anyhow::Result<RunResult>>;

    /// Run it for each of `contenders` it measures, in order, once per
    /// workload ([`Scenario::workloads`], set in [`Env::work`]), adding each
    /// result to `report` as it ends (so an interrupted bench keeps the runs
    /// done).
    fn run<'a>(
        &'a self,
        env: &'a mut Env<'_>,
        contenders: &'a [Box<dyn Contender>],
        report: &'a mut Report,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            for work in self.workloads(env.args) {
                env.work = work;
                for c in contenders.iter().filter(|c| self.measures(c.kind())) {
                    let r = self.run_one(env, c.as_ref()).await.with_context(|| {
                        format!(
                            "{} / {} ({})",
                            self.name(),
                            c.kind().name(),
                            work.describe()
                        )
                    })?;
                    report.results.push(r);
                    report.ping = stats::summarize(&env.all_pings, None);
                }
            }
            env.work = Work::flags(env.args);
            Ok(())
        })
    }

    /// Its section of the table: a title, a table of `rows` (its results,
    /// in run order) and any summary lines under it.
    fn section(&self, report: &Report, rows: &[&RunResult]) -> String;

    /// The legend entries of the columns and summaries its section shows.
    fn legend(&self) -> Legend;

    /// What an exclusion violation of one of its runs means, for the notes
    /// under the table.
    fn violation(&self, settings: &Settings) -> String {
        let _ = settings;
        "mutual exclusion violated".to_string()
    }

    /// Whether its section notes the contenders left out that only it
    /// measures (they then get no note of their own under the table).
    fn notes_own_skipped(&self) -> bool {
        false
    }
}

/// Whether `contender` takes part in every general scenario: not the
/// read-write lock, the semaphores, the `MultiLock`, the Redlocks nor the
/// `Lock` with a write under each hold (`lock-incr`, `lock-guarded`).
pub(crate) fn general(contender: ContenderKind) -> bool {
    use ContenderKind::{LockGuarded, LockIncr, Multi, Redlock, Rslock3, Rw, Sem, SemPoll};
    !matches!(
        contender,
        Rw | Sem | SemPoll | Multi | Redlock | Rslock3 | LockIncr | LockGuarded
    )
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

/// The handles of `waiters` waiters on `name`, spread over `clients` in
/// turn.
pub(crate) fn spread(
    clients: &[Arc<dyn ContenderClient>],
    waiters: u32,
    name: &str,
) -> Vec<Arc<dyn LockHandle>> {
    (0..waiters)
        .zip(clients.iter().cycle())
        .map(|(_, client)| client.handle(name))
        .collect()
}

/// One task per handle of `handles`, in order: `worker(i, h)` for the `i`th
/// handle `h`.
pub(crate) fn spawn_each<T, Fut>(
    handles: Vec<Arc<dyn LockHandle>>,
    mut worker: impl FnMut(usize, Arc<dyn LockHandle>) -> Fut,
) -> JoinSet<anyhow::Result<T>>
where
    T: Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<T>> + Send + 'static,
{
    let mut set = JoinSet::new();
    for (i, h) in handles.into_iter().enumerate() {
        set.spawn(worker(i, h));
    }
    set
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
    commands_named(c.client_commands(), before, after, own_pings, embedded)
}

/// [`commands`] with the commands a client sends itself named outright
/// (`names`) rather than by a contender: what a run on a Redis Cluster
/// counts, sharded Pub/Sub included.
pub(crate) fn commands_named(
    names: &'static [&'static str],
    before: &Snapshot,
    after: &Snapshot,
    own_pings: u64,
    embedded: bool,
) -> Commands {
    let by_command = stats::delta(&before.calls, &after.calls, own_pings);
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
}
