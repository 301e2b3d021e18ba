//! deadbolt-bench: deadbolt's locks and the polling locks people use, side
//! by side, measured in one run on one Redis (and deadbolt's semaphore
//! beside a polling one). The `deadbolt-bench` binary (`scripts/bench`) is
//! this crate's [`BenchCli`] and [`run`]; it was `deadbolt bench` before it
//! left the shipped `deadbolt` command, and still takes a leading `bench`.
//!
//! It measures how deadbolt's lock kinds compare with each other and with
//! the polling locks people use (a textbook `SET NX PX` spin-poller and the
//! rslock crate): latency as a ratio to a PING timed in the same run,
//! throughput under contention, fairness, hand-off latency, the Redis
//! commands an idle waiter costs, a read-mostly mix on the read-write lock
//! beside the `Lock`, deadbolt's `Semaphore` beside a polling ZSET
//! semaphore, and locks over many keys or servers (a `MultiLock` over 3
//! names, deadbolt's `Redlock` and rslock over 3 servers) beside a single
//! `Lock`; with `--topology cluster` or `sentinel`, the `Lock` on a Redis
//! Cluster or a Sentinel-managed master beside a standalone server (and,
//! asked for, the held-names scenario on that deployment). See
//! [`BenchArgs`] for the flags and [`Report`] for the JSON it writes.
//!
//! The run: start a throwaway redis-server unless `--redis` is given (and stop
//! it at the end, on error and on Ctrl-C), then for each selected scenario run
//! each contender it measures in turn (see [`ScenarioKind::measures`]), one
//! after another on the same server, then (with `--plot`) the contended
//! scenario at several waiter counts: spread over at most `--clients`
//! clients, and (above `--clients` waiters) again with one client per
//! waiter. The multi scenario's Redlock rows span two more servers: started
//! and stopped with the first one, or given with `--redlock-redis` besides
//! `--redis`. The topology scenario puts a Redis Cluster or a
//! Sentinel-managed master (`--topology`) beside server 1: started and
//! stopped with it, or given with `--redis` (server 1 is then embedded).
//!
//! Its modules are layered, each importing only those below it: `model`
//! (the shared data: kinds, flags, report rows; a leaf), then `stats`,
//! `progress`, `table`, `contender`, `site`, `scenarios` (the `Scenario`
//! trait and the machinery the runs share, the scenarios one file each, and
//! the registry), `plot`, and at the top `plan` and `output`, which with
//! this file are the only ones that look scenarios up in the registry.
//! [`Topology`] comes from deadbolt-testkit, shared there with deadbolt-cli.
//! Tests drive it in-process: parse a
//! [`BenchCli`] (or build [`BenchArgs`]) and call [`run`], [`bench()`] or
//! [`bench_with`].

mod contender;
pub mod floor;
mod model;
mod output;
mod plan;
mod plot;
mod progress;
mod scenarios;
mod site;
mod stats;
mod table;

use std::ffi::OsString;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::{bail, Context as _};
use clap::Parser;
use deadbolt_core::deployment::redact;
use deadbolt_testkit::{redis_server_path, RedisServer};
use redis::aio::MultiplexedConnection;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::time::Instant;

pub use contender::{REDISSON_LOCK, REDISSON_UNLOCK};
pub use deadbolt_core::deployment::Topology;
pub use model::{
    parse_duration, parse_ratio, BenchArgs, Commands, ContenderKind, CpuSource, Fairness,
    HeldNamesStats, HostInfo, Latency, Left, ReadWrite, RedisInfo, Report, RunResult, ScenarioKind,
    Settings, Skipped, SweepPoint, TopologyInfo, TopologyMeasure, TopologyRow, VsStandalone, Work,
    REPORT_SCHEMA, TOPOLOGY_NAMES_PER_TASK,
};

use model::{plural, REDLOCK_SERVERS};
use plan::Plan;
use progress::Progress;
use scenarios::Env;
use site::{cleanup, Embedded, Site};
use stats::stats_connection;

/// Exit code after an interrupted bench (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// The `deadbolt-bench` command line: the flags of [`BenchArgs`], after an
/// optional leading `bench` (so `deadbolt-bench bench --scenario idle`, as
/// `deadbolt-bench` was called, still works).
///
/// # Examples
/// ```
/// let cli = deadbolt_bench::BenchCli::try_parse_from(["deadbolt-bench", "--scenario", "idle"])
///     .unwrap();
/// assert_eq!(cli.args.scenarios, [deadbolt_bench::ScenarioKind::Idle]);
/// let old = deadbolt_bench::BenchCli::try_parse_from(["deadbolt-bench", "bench", "--quiet"])
///     .unwrap();
/// assert!(old.args.quiet);
/// ```
#[derive(Debug, Parser)]
#[command(
    name = "deadbolt-bench",
    version,
    about = "Compare deadbolt's locks with polling locks, side by side on one Redis",
    long_about = None
)]
pub struct BenchCli {
    /// The bench's flags.
    #[command(flatten)]
    pub args: BenchArgs,
}

impl BenchCli {
    /// Parse `args` (the program name first), dropping a literal `bench`
    /// right after the program name.
    ///
    /// # Errors
    /// Bad flags, or `--help` / `--version` (clap's error prints them).
    pub fn try_parse_from<I, T>(args: I) -> Result<BenchCli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let mut all: Vec<OsString> = args.into_iter().map(Into::into).collect();
        if all.get(1).is_some_and(|a| a == "bench") {
            all.remove(1);
        }
        <BenchCli as Parser>::try_parse_from(all)
    }

    /// Parse the process's arguments as [`BenchCli::try_parse_from`] does;
    /// on an error, print it and exit as clap does.
    pub fn parse_args() -> BenchCli {
        BenchCli::try_parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit())
    }
}

/// Run the bench, print its table to stdout and write `--json` and `--plot`.
///
/// Returns the process exit code: success, or [`EXIT_INTERRUPTED`] after a
/// bench stopped by Ctrl-C (its partial results are still printed and
/// written).
///
/// # Errors
/// As [`bench()`], and a failed write of `--json`/`--plot`.
///
/// # Cancel safety
/// As [`bench()`]: dropping it stops its embedded redis-server (the server
/// handle is dropped with the future).
pub async fn run(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    let report = bench(args).await?;
    let mut out = std::io::stdout().lock();
    out.write_all(report.table().as_bytes())?;
    out.flush()?;
    drop(out);
    if let Some(path) = &args.json {
        report
            .write_json(path)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        report
            .write_plot(path)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(if report.interrupted {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Run the bench described by `args` and return every figure.
///
/// Prints progress on stderr (unless `--quiet`): a bar for the current run
/// and an overall line with an ETA when stdout and stderr are terminals, else
/// one note per finished run. It does not print the table: see
/// [`Report::table`].
///
/// # Errors
/// Bad sizes, a `--json` or `--plot` path that cannot be written (a missing
/// folder, a `--plot` name not ending in `.svg`), a `--redlock-redis`
/// without `--redis` or not naming two more servers, a contender that is not
/// available in this build (or, asked for by name, needs servers the run
/// lacks), a scenario asked for that none of the contenders takes part in,
/// a `--topology` other than standalone without the topology scenario, or
/// with `--redis` but no URL (or, for Sentinel, no `--sentinel-master`)
/// (all before anything starts); redis-server (or, for an embedded cluster,
/// redis-cli) not installed (the message says how to install it); an
/// unreachable `--redis` or `--redlock-redis`, a cluster that does not serve
/// every slot, Sentinels that do not know the master; a run that failed (too
/// many errors in a row, a hang). The embedded servers (and cluster or
/// Sentinel set) are stopped in every case.
///
/// # Cancel safety
/// Dropping the future drops the embedded server handles, which kills the
/// servers; contender clients end with it.
pub async fn bench(args: &BenchArgs) -> anyhow::Result<Report> {
    bench_with(args, |_| {}).await
}

/// [`bench()`], calling `on_ready` with the Redis URL once the server answers
/// (and before any scenario runs). That is server 1's URL; the multi
/// scenario's other servers are in the report (`redis.redlock_urls`).
///
/// Ctrl-C or SIGTERM during the run stops it: the embedded servers are
/// stopped and the partial report comes back with `interrupted: true`.
///
/// # Errors
/// As [`bench()`].
///
/// # Cancel safety
/// As [`bench()`].
pub async fn bench_with(
    args: &BenchArgs,
    on_ready: impl FnOnce(&str) + Send,
) -> anyhow::Result<Report> {
    let (plan, skipped) = plan::make(args)?;
    let kinds: Vec<ContenderKind> = plan.contenders.iter().map(|c| c.kind()).collect();
    let progress = Progress::new(
        args.quiet,
        plan::planned_runs(args, &plan.scenarios, &kinds),
    );
    // Registered now, before the server exists: tokio's `ctrl_c()` only
    // registers its handler when first polled, and a SIGINT before that would
    // kill the process and orphan redis-server.
    let mut interrupt = Interrupt::install()?;
    let started = Instant::now();
    let mut servers: Vec<RedisServer> = Vec::new();
    let mut deployment: Option<Embedded> = None;
    let mut report: Option<Report> = None;
    let slots = Slots {
        servers: &mut servers,
        deployment: &mut deployment,
        report: &mut report,
    };
    let outcome = tokio::select! {
        r = run_plan(args, &plan, progress.clone(), skipped, slots, on_ready) => r,
        () = interrupt.recv() => {
            progress.note("interrupted; stopping");
            Err(Interrupted.into())
        }
    };
    progress.finish();
    for mut s in servers {
        s.stop();
        progress.note(&format!("stopped redis-server on 127.0.0.1:{}", s.port()));
    }
    if let Some(d) = deployment {
        let what = d.describe();
        drop(d);
        progress.note(&format!("stopped {what}"));
    }
    match outcome {
        Ok(()) => {}
        Err(e) if e.is::<Interrupted>() => match &mut report {
            Some(r) => r.interrupted = true,
            None => return Err(e),
        },
        Err(e) => return Err(e),
    }
    let mut report = report.context("the bench ended without a report")?;
    report.elapsed_s = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The bench was stopped by a signal.
#[derive(Debug)]
struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// SIGINT (Ctrl-C) and SIGTERM.
struct Interrupt {
    int: Signal,
    term: Signal,
}

impl Interrupt {
    fn install() -> anyhow::Result<Interrupt> {
        Ok(Interrupt {
            int: signal(SignalKind::interrupt()).context("installing the Ctrl-C handler")?,
            term: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
    }
}

/// Start the embedded redis-server, or say how to install it.
async fn start_server(args: &BenchArgs) -> anyhow::Result<RedisServer> {
    if redis_server_path().is_none() {
        if args.topology != Topology::Standalone {
            bail!(
                "redis-server is not installed (looked in PATH, /usr/bin, /usr/local/bin, \
                 /usr/sbin); with --topology {} the bench starts the standalone server it \
                 compares with itself.\nInstall it with `apt-get install -y redis-server`.",
                args.topology.name()
            );
        }
        bail!(
            "redis-server is not installed (looked in PATH, /usr/bin, /usr/local/bin, /usr/sbin).\n\
             Install it with `apt-get install -y redis-server`, or run against a Redis you \
             already have with `deadbolt-bench --redis redis://HOST:PORT/`."
        );
    }
    tokio::task::spawn_blocking(RedisServer::start)
        .await
        .context("starting redis-server")?
        .context("starting redis-server")
}

fn find_in_path(exe: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(["/usr/bin", "/bin"].into_iter().map(PathBuf::from))
        .map(|d| d.join(exe))
        .find(|p| p.is_file())
}

/// `--pin`: the embedded redis-servers (`server_pids`; none with `--redis`)
/// on CPU 0, this process (every thread) on CPU 1. Returns whether it took
/// effect.
fn pin(server_pids: &[u32], cpus: u32, progress: &Progress) -> bool {
    let Some(taskset) = find_in_path("taskset") else {
        progress.note("--pin skipped: taskset is not installed (apt-get install -y util-linux)");
        return false;
    };
    if cpus < 2 {
        progress.note("--pin skipped: fewer than 2 CPUs");
        return false;
    }
    let set = |cpu: &str, pid: u32| {
        Command::new(&taskset)
            .args(["-a", "-cp", cpu, &pid.to_string()])
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let server_ok = server_pids.iter().all(|pid| set("0", *pid));
    let own_ok = set("1", std::process::id());
    if server_ok && own_ok {
        progress.note(if server_pids.len() > 1 {
            "pinned the redis-servers to CPU 0 and the bench to CPU 1"
        } else if !server_pids.is_empty() {
            "pinned redis-server to CPU 0 and the bench to CPU 1"
        } else {
            "pinned the bench to CPU 1 (the server is not ours to pin)"
        });
        true
    } else {
        progress.note("--pin skipped: taskset failed");
        false
    }
}

/// Where [`run_plan`] leaves what must survive an interrupt: the servers it
/// started (server 1 first), the cluster or Sentinel set it started, and the
/// report it made.
struct Slots<'a> {
    servers: &'a mut Vec<RedisServer>,
    deployment: &'a mut Option<Embedded>,
    report: &'a mut Option<Report>,
}

/// The run's servers as [`servers`] found or started them.
struct Servers {
    /// Server 1 first, then the Redlock rows' servers (when they run).
    urls: Vec<String>,
    /// True when the bench started them.
    embedded: bool,
    /// Server 1's `redis_version`.
    version: String,
    /// The bench's own connection to server 1, for INFO.
    stats: MultiplexedConnection,
    /// The bench's own connections to the other servers.
    redlock_stats: Vec<MultiplexedConnection>,
}

/// The body of [`bench_with`]: what it starts and makes goes into `slots`.
async fn run_plan(
    args: &BenchArgs,
    plan: &Plan,
    progress: Progress,
    skipped: Vec<Skipped>,
    slots: Slots<'_>,
    on_ready: impl FnOnce(&str),
) -> anyhow::Result<()> {
    let Slots {
        servers: servers_slot,
        deployment: deployment_slot,
        report: report_slot,
    } = slots;
    let servers = servers(args, plan, &progress, servers_slot).await?;
    let site = if plan.scenarios.iter().any(|s| s.uses_topology())
        && args.topology != Topology::Standalone
    {
        Some(topology_site(args, &progress, deployment_slot).await?)
    } else {
        None
    };
    let cpus = std::thread::available_parallelism()
        .ok()
        .and_then(|n| u32::try_from(n.get()).ok())
        .unwrap_or(1);
    let mut server_pids: Vec<u32> = servers_slot.iter().filter_map(RedisServer::pid).collect();
    server_pids.extend(deployment_slot.iter().flat_map(Embedded::pids));
    let pinned = args.pin && pin(&server_pids, cpus, &progress);
    on_ready(&servers.urls[0]);
    let report = report_slot.insert(new_report(args, plan, &servers, site.as_ref(), skipped));
    report.host = HostInfo { cpus, pinned };
    let mut env = Env {
        urls: servers.urls,
        args,
        stats: servers.stats,
        redlock_stats: servers.redlock_stats,
        progress,
        run_id: format!("run{:08x}", rand::random::<u32>()),
        all_pings: stats::histogram(),
        topology: site,
        embedded: servers.embedded,
        work: Work::flags(args),
        floor_us: None,
    };
    if plan.scenarios.iter().any(|s| s.shows_ceiling()) {
        env.measure_floor().await?;
        report.handoff_floor_us = env.floor_us;
    }
    let outcome = run_scenarios(&mut env, plan, report).await;
    report.ping = stats::summarize(&env.all_pings, None);
    clean_up(&mut env).await;
    outcome
}

/// Server 1 (`--redis`, or started now) and, when a Redlock contender
/// runs, the two more servers of its rows (`--redlock-redis`, or started
/// now); those started are left in `started`, so that they are stopped
/// whatever happens next.
async fn servers(
    args: &BenchArgs,
    plan: &Plan,
    progress: &Progress,
    started: &mut Vec<RedisServer>,
) -> anyhow::Result<Servers> {
    let first = match args.standalone_redis() {
        Some(url) => url.to_string(),
        None => {
            let server = start_server(args).await?;
            let url = server.url();
            started.push(server);
            url
        }
    };
    let embedded = !started.is_empty();
    let mut stats = stats_connection(&first).await?;
    let version = stats::redis_version(&mut stats).await?;
    if embedded {
        progress.note(&format!(
            "started redis-server {version} on 127.0.0.1:{} (no persistence; stopped at the end)",
            started[0].port()
        ));
    }
    let mut urls = vec![first];
    // The other servers are only needed (and started) when a Redlock
    // contender runs; `resolve_contenders` left those out when --redis came
    // without them.
    if plan.contenders.iter().any(|c| c.servers() > 1) {
        if embedded {
            urls.extend(start_redlock_servers(args, progress, started).await?);
        } else {
            urls.extend(args.redlock_redis.iter().cloned());
        }
    }
    let mut redlock_stats = Vec::new();
    for url in &urls[1..] {
        redlock_stats.push(
            stats_connection(url)
                .await
                .context("a server of the Redlock rows")?,
        );
    }
    Ok(Servers {
        urls,
        embedded,
        version,
        stats,
        redlock_stats,
    })
}

/// Start the Redlock rows' two more servers beside server 1 (left in
/// `started`); their URLs.
async fn start_redlock_servers(
    args: &BenchArgs,
    progress: &Progress,
    started: &mut Vec<RedisServer>,
) -> anyhow::Result<Vec<String>> {
    let mut urls = Vec::new();
    for _ in 1..REDLOCK_SERVERS {
        let server = start_server(args).await?;
        urls.push(server.url());
        started.push(server);
    }
    let ports: Vec<String> = started[1..]
        .iter()
        .map(|s| format!("127.0.0.1:{}", s.port()))
        .collect();
    progress.note(&format!(
        "started {} more redis-servers for the Redlock rows on {}",
        ports.len(),
        ports.join(", ")
    ));
    Ok(urls)
}

/// The report before any run: the servers, the settings, no results yet.
fn new_report(
    args: &BenchArgs,
    plan: &Plan,
    servers: &Servers,
    site: Option<&Site>,
    skipped: Vec<Skipped>,
) -> Report {
    Report {
        schema: REPORT_SCHEMA,
        deadbolt_version: env!("CARGO_PKG_VERSION").to_string(),
        elapsed_s: 0.0,
        interrupted: false,
        redis: RedisInfo {
            version: servers.version.clone(),
            url: redact(&servers.urls[0]),
            embedded: servers.embedded,
            redlock_urls: servers.urls[1..].iter().map(|u| redact(u)).collect(),
            topology: site.map(|s| s.info.clone()),
        },
        host: HostInfo {
            cpus: 1,
            pinned: false,
        },
        settings: plan::settings(args, plan),
        ping: None,
        results: Vec::new(),
        sweep: Vec::new(),
        skipped,
        handoff_floor_us: None,
    }
}

/// Best effort: delete this run's keys from the servers that are not ours.
async fn clean_up(env: &mut Env<'_>) {
    let namespace = &env.args.namespace;
    if !env.embedded {
        cleanup(&mut env.stats, namespace, &env.run_id).await;
        for conn in &mut env.redlock_stats {
            cleanup(conn, namespace, &env.run_id).await;
        }
    }
    if let Some(site) = env.topology.as_ref().filter(|s| !s.info.embedded) {
        site.cleanup(namespace, &env.run_id).await;
    }
}

/// The cluster or Sentinel-managed master of `--topology`: the one `--redis`
/// names, or one started now (left in `slot`, so that it is stopped
/// whatever happens next).
async fn topology_site(
    args: &BenchArgs,
    progress: &Progress,
    slot: &mut Option<Embedded>,
) -> anyhow::Result<Site> {
    let given = args.topology_urls();
    let (urls, master_name, embedded) = if given.is_empty() {
        let started = Embedded::start(args.topology).await?;
        let (urls, master_name) = started.entry();
        progress.note(&format!(
            "started {} (no persistence; stopped at the end)",
            started.describe()
        ));
        *slot = Some(started);
        (urls, master_name, true)
    } else {
        (given, args.sentinel_master.clone(), false)
    };
    let site = Site::discover(args.topology, urls, master_name, embedded)
        .await
        .with_context(|| format!("the --topology {} servers", args.topology.name()))?;
    if !embedded {
        progress.note(&format!(
            "{} master{} found: {}",
            site.info.masters.len(),
            plural(u32::try_from(site.info.masters.len()).unwrap_or(u32::MAX)),
            site.info.masters.join(", ")
        ));
    }
    Ok(site)
}

/// Every scenario of `plan` in turn, then (with `--plot`) the sweep; each
/// result goes into `report` as it ends.
async fn run_scenarios(env: &mut Env<'_>, plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    for scenario in &plan.scenarios {
        scenario.run(env, &plan.contenders, report).await?;
    }
    if env.args.plot.is_some() {
        env.work = Work::flags(env.args);
        scenarios::contended::sweep(env, &plan.contenders, report).await?;
    }
    Ok(())
}
