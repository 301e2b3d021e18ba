//! The flags of `deadbolt-bench`, and the checks of them that need no
//! scenario (each scenario's own are in `plan`).

use std::fs::OpenOptions;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail};
use clap::Args;
use deadbolt_core::deployment::{split_urls, Topology};

/// `--topology`'s parser: a [`Topology`] by its name, each name listed in
/// the help with what it is.
fn topology_parser() -> impl clap::builder::TypedValueParser<Value = Topology> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser as _};
    PossibleValuesParser::new(Topology::ALL.map(|t| PossibleValue::new(t.name()).help(t.about())))
        .map(|name| name.parse().unwrap_or_default())
}

use super::kinds::{ContenderKind, ScenarioKind, REDLOCK_SERVERS};

/// Parse a duration: `2` or `2s` (seconds), `1.5s`, `250ms`, `500us`, `1m`.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// assert_eq!(deadbolt_bench::parse_duration("250ms"), Ok(Duration::from_millis(250)));
/// assert_eq!(deadbolt_bench::parse_duration("1.5"), Ok(Duration::from_millis(1500)));
/// assert!(deadbolt_bench::parse_duration("soon").is_err());
/// ```
///
/// # Errors
/// A message for anything else (negative, not a number, unknown unit).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (try 2s, 500ms)"))?;
    let secs = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "m" | "min" => value * 60.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?} (use s, ms, us, m)"
            ))
        }
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))
}

/// Parse a write ratio: a number from 0 to 1 (`0.1`: one operation in ten
/// writes).
///
/// # Examples
/// ```
/// assert_eq!(deadbolt_bench::parse_ratio("0.25"), Ok(0.25));
/// assert!(deadbolt_bench::parse_ratio("1.5").is_err());
/// assert!(deadbolt_bench::parse_ratio("10%").is_err());
/// ```
///
/// # Errors
/// A message for anything that is not a number from 0 to 1.
pub fn parse_ratio(s: &str) -> Result<f64, String> {
    let value: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number from 0 to 1 (try 0.1)"))?;
    check_ratio(value)
}

/// `value` when it lies in 0..=1 (NaN does not).
fn check_ratio(value: f64) -> Result<f64, String> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{value} is not from 0 to 1"))
    }
}

/// The flags of `deadbolt-bench`.
///
/// Every size has a default that keeps a full run under a minute on two
/// cores. Durations take units: `2s`, `250ms`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Redis to run against. Without it a throwaway redis-server (no
    /// persistence) is started on a free loopback port and stopped at the end.
    /// Against a shared server, other clients' traffic shows up in the command
    /// counts. With --topology cluster: seed URLs of the cluster, and with
    /// --topology sentinel: URLs of Sentinels (comma-separated; see
    /// --sentinel-master); the standalone server beside them is then the
    /// embedded one.
    #[arg(long, value_name = "URL[,URL..]")]
    pub redis: Option<String>,

    /// Deployment the topology scenario puts beside a standalone server:
    /// without --redis, `cluster` starts a Redis Cluster of 3 masters and 3
    /// replicas, `sentinel` a master, a replica and 3 Sentinels (with redis-cli
    /// and redis-server, on free loopback ports, stopped at the end), besides
    /// the standalone server. Any value but `standalone` adds the topology
    /// scenario to the default selection. With --scenario held-names, that
    /// scenario runs on the deployment instead of the standalone server.
    #[arg(long, value_parser = topology_parser(), default_value_t = Topology::Standalone, value_name = "TOPOLOGY")]
    pub topology: Topology,

    /// With --topology sentinel and --redis: the name the Sentinels know the
    /// master by. (The embedded set's master is `deadbolt`.)
    #[arg(long, value_name = "NAME")]
    pub sentinel_master: Option<String>,

    /// With --redis: the two more servers the multi scenario's Redlock rows
    /// (redlock, rslock-3) spread their lock over, besides --redis (repeat
    /// the flag; three independent servers in all). Without them those rows
    /// are skipped; without --redis the bench starts all three servers
    /// itself.
    #[arg(long = "redlock-redis", value_name = "URL")]
    pub redlock_redis: Vec<String>,

    /// Scenarios to run (repeat or comma-separate). Default: all but
    /// topology, which joins them with --topology cluster or sentinel.
    #[arg(
        long = "scenario",
        value_enum,
        value_delimiter = ',',
        value_name = "SCENARIO"
    )]
    pub scenarios: Vec<ScenarioKind>,

    /// Contenders to measure (repeat or comma-separate). Default: all that are
    /// available in this build.
    #[arg(
        long = "contender",
        value_enum,
        value_delimiter = ',',
        value_name = "CONTENDER"
    )]
    pub contenders: Vec<ContenderKind>,

    /// How long each contender runs the uncontended, contended, read-mostly,
    /// semaphore and multi scenarios (and each throughput row of the topology
    /// scenario), and the time bound of its hand-off rounds.
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub duration: Duration,

    /// Uncontended, multi and topology: number of tasks, each on its own
    /// names, sharing one client.
    #[arg(long, default_value_t = 4, value_name = "T")]
    pub tasks: u32,

    /// Contended, read-mostly and semaphore: number of waiters on the one
    /// name.
    #[arg(long, default_value_t = 8, value_name = "W")]
    pub waiters: u32,

    /// Contended, read-mostly, semaphore and idle: number of separate
    /// clients (connections) the waiters are spread over.
    #[arg(long, default_value_t = 4, value_name = "C")]
    pub clients: u32,

    /// Contended, read-mostly and semaphore: how long each acquisition holds
    /// the lock (the permit).
    #[arg(long, default_value = "0ms", value_parser = parse_duration, value_name = "DURATION")]
    pub hold: Duration,

    /// Contended, read-mostly and semaphore: how long a worker waits
    /// between its release and its next acquire (0: it asks again at once,
    /// so the lock is never without a waiter).
    #[arg(long, default_value = "0ms", value_parser = parse_duration, value_name = "DURATION")]
    pub think: Duration,

    /// Hold of the service rows that contended, read-mostly and semaphore
    /// add after the rows of --hold and --think: a job worker's loop (see
    /// docs/bench.md). With --service-think, and unless --no-service.
    #[arg(long, default_value = "1ms", value_parser = parse_duration, value_name = "DURATION")]
    pub service_hold: Duration,

    /// Think time of the service rows (see --service-hold).
    #[arg(long, default_value = "2ms", value_parser = parse_duration, value_name = "DURATION")]
    pub service_think: Duration,

    /// No service rows: only the rows of --hold and --think.
    #[arg(long)]
    pub no_service: bool,

    /// Names: how many distinct names each contender locks and releases.
    /// Held-names: how many names client A holds at once, each with one
    /// waiter of client B.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub names: u32,

    /// Read-mostly: the share of operations that write, from 0 to 1 (the
    /// rest read). Each waiter draws from its own seeded random sequence, the
    /// same for every contender.
    #[arg(long, default_value = "0.1", value_parser = parse_ratio, value_name = "RATIO")]
    pub write_ratio: f64,

    /// Semaphore: permits of the semaphore (each waiter takes one at a time).
    #[arg(long, default_value_t = 4, value_name = "P")]
    pub permits: u32,

    /// Hand-off (and the topology scenario's hand-off rows): number of
    /// rounds (bounded by --duration too). Held-names: the one-name rounds
    /// of its baseline.
    #[arg(long, default_value_t = 200, value_name = "N")]
    pub rounds: u32,

    /// Idle: number of waiters blocked on a held lock.
    #[arg(long, default_value_t = 4, value_name = "W")]
    pub idle_waiters: u32,

    /// Idle: how long the waiters' commands are counted.
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub idle_time: Duration,

    /// raw-poll and sem-poll: sleep between two tries.
    #[arg(long, default_value = "100ms", value_parser = parse_duration, value_name = "DURATION")]
    pub poll_interval: Duration,

    /// Lease of every hold: rslock's and raw-poll's TTL, sem-poll's holder
    /// age limit, deadbolt's watchdog timeout.
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub lease: Duration,

    /// Write every figure as JSON to FILE (schema: the `Report` type).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Draw throughput against number of waiters per contender as SVG to
    /// FILE (its name must end in .svg: this build has no bitmap backend);
    /// runs the contended scenario at each W of --plot-waiters with the
    /// waiters over min(W, --clients) clients (solid lines), and each W above
    /// --clients again with one client per waiter (dashed lines).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,

    /// Waiter counts of the throughput sweep drawn by --plot.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,4,8,16",
        value_name = "W,.."
    )]
    pub plot_waiters: Vec<u32>,

    /// Pin redis-server to CPU 0 and the bench to CPU 1 (with taskset; skipped
    /// when taskset is missing or there are fewer than 2 CPUs).
    #[arg(long)]
    pub pin: bool,

    /// No progress bars and no notes on stderr (the table is still printed).
    #[arg(long, short)]
    pub quiet: bool,

    /// Key prefix of the bench's locks.
    #[arg(long, default_value = "deadbolt-bench", value_name = "NS")]
    pub namespace: String,
}

/// Refuse a plot file whose name does not end in `.svg` (any case): plotters
/// is built here with its SVG backend only, and writing SVG into `x.png`
/// would only confuse.
pub(crate) fn require_svg(path: &Path) -> Result<(), String> {
    let svg = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("svg"));
    if svg {
        Ok(())
    } else {
        Err(
            "only SVG plots can be written (deadbolt draws with plotters' SVG backend, \
             built without bitmap or font libraries); give a file name ending in .svg"
                .to_string(),
        )
    }
}

/// Refuse an output path that cannot be written, before the bench runs:
/// a missing folder, a folder in place of the file, no permission. Leaves no
/// file behind (a probe file is created and removed).
fn check_writable(flag: &str, path: &Path) -> anyhow::Result<()> {
    let shown = path.display();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            bail!(
                "{flag} {shown}: the folder {} does not exist (nothing was run)",
                dir.display()
            )
        }
        Err(e) => bail!(
            "{flag} {shown}: cannot use the folder {}: {e}",
            dir.display()
        ),
        Ok(m) if !m.is_dir() => bail!("{flag} {shown}: {} is not a folder", dir.display()),
        Ok(_) => {}
    }
    if path.is_dir() {
        bail!("{flag} {shown}: that is a folder; give a file name");
    }
    let probe = if path.exists() {
        OpenOptions::new().append(true).open(path).map(drop)
    } else {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .and_then(|_| std::fs::remove_file(path))
    };
    probe.map_err(|e| anyhow!("{flag} {shown}: cannot write there: {e} (nothing was run)"))
}

impl BenchArgs {
    /// The standalone server given with `--redis`: its value with the
    /// default topology; with another, `--redis` names that topology's
    /// servers and the standalone server is embedded.
    pub(crate) fn standalone_redis(&self) -> Option<&str> {
        match self.topology {
            Topology::Standalone => self.redis.as_deref(),
            _ => None,
        }
    }

    /// The URLs `--redis` gives for a `--topology` other than standalone
    /// (cluster seeds or Sentinels); empty without `--redis` (the bench then
    /// starts the topology itself) or with the default topology.
    pub(crate) fn topology_urls(&self) -> Vec<String> {
        match (self.topology, &self.redis) {
            (Topology::Standalone, _) | (_, None) => Vec::new(),
            (_, Some(urls)) => split_urls(urls),
        }
    }

    /// Check that `--json` and `--plot` can be written, before anything is
    /// started: a bench that fails at the end to save what it measured
    /// wastes the run.
    pub(crate) fn check_outputs(&self) -> anyhow::Result<()> {
        if let Some(path) = &self.plot {
            if let Err(reason) = require_svg(path) {
                bail!("--plot {}: {reason}", path.display());
            }
            check_writable("--plot", path)?;
        }
        if let Some(path) = &self.json {
            check_writable("--json", path)?;
        }
        Ok(())
    }

    /// `--redlock-redis`: two URLs, with `--redis`, all three servers
    /// different.
    fn validate_redlock_servers(&self) -> anyhow::Result<()> {
        let extra = &self.redlock_redis;
        if extra.is_empty() {
            return Ok(());
        }
        let Some(first) = self.standalone_redis() else {
            if self.redis.is_some() {
                bail!(
                    "--redlock-redis needs --redis to name the standalone server, but with \
                     --topology {t} --redis names the {t}'s servers (the bench starts the \
                     standalone servers itself; leave --redlock-redis out)",
                    t = self.topology.name()
                );
            }
            bail!(
                "--redlock-redis needs --redis (without --redis the bench starts all \
                 {REDLOCK_SERVERS} servers itself)"
            );
        };
        if extra.len() != REDLOCK_SERVERS - 1 {
            bail!(
                "--redlock-redis: give {} servers besides --redis, one per flag (got {})",
                REDLOCK_SERVERS - 1,
                extra.len()
            );
        }
        let mut all: Vec<&str> = std::iter::once(first)
            .chain(extra.iter().map(String::as_str))
            .collect();
        all.sort();
        all.dedup();
        if all.len() != REDLOCK_SERVERS {
            bail!("--redis and --redlock-redis must name {REDLOCK_SERVERS} different servers");
        }
        Ok(())
    }

    /// `--topology` with `--redis` and `--sentinel-master`: URLs for a
    /// cluster or Sentinel set, the master's name with Sentinels given.
    fn validate_topology(&self) -> anyhow::Result<()> {
        let t = self.topology;
        if self.sentinel_master.is_some() && !(t == Topology::Sentinel && self.redis.is_some()) {
            bail!(
                "--sentinel-master goes with --topology sentinel and --redis SENTINEL_URLS (the \
                 embedded Sentinel set names its master itself)"
            );
        }
        if t == Topology::Standalone || self.redis.is_none() {
            return Ok(());
        }
        if self.topology_urls().is_empty() {
            bail!(
                "--redis with --topology {}: give the {} URLs, comma-separated",
                t.name(),
                t.urls_of()
            );
        }
        if t == Topology::Sentinel && self.sentinel_master.as_deref().is_none_or(str::is_empty) {
            bail!("--topology sentinel with --redis: name the master with --sentinel-master NAME");
        }
        Ok(())
    }

    /// Check the sizes and the servers before anything is started (what
    /// each selected scenario checks besides is `plan::validate`).
    pub(crate) fn validate_flags(&self) -> anyhow::Result<()> {
        let positive = [
            ("--tasks", self.tasks),
            ("--waiters", self.waiters),
            ("--clients", self.clients),
            ("--permits", self.permits),
            ("--rounds", self.rounds),
            ("--idle-waiters", self.idle_waiters),
        ];
        for (flag, v) in positive {
            if v == 0 {
                bail!("{flag} must be at least 1");
            }
        }
        if self.duration.is_zero() {
            bail!("--duration must not be zero");
        }
        self.validate_redlock_servers()?;
        self.validate_topology()?;
        if let Err(reason) = check_ratio(self.write_ratio) {
            bail!("--write-ratio: {reason}");
        }
        if self.idle_time.is_zero() {
            bail!("--idle-time must not be zero");
        }
        if self.poll_interval < Duration::from_millis(1) {
            bail!("--poll-interval must be at least 1ms");
        }
        if self.lease < Duration::from_millis(100) {
            bail!("--lease must be at least 100ms");
        }
        if self.plot.is_some() && (self.plot_waiters.is_empty() || self.plot_waiters.contains(&0)) {
            bail!("--plot-waiters must list waiter counts of at least 1");
        }
        Ok(())
    }
}
