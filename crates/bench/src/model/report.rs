//! Every figure of one bench run: the JSON report's types.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use deadbolt_core::deployment::Topology;
use serde::{Deserialize, Serialize};

use super::args::BenchArgs;
use super::kinds::{ContenderKind, ScenarioKind};
use super::tally::{float, Tally};

/// Version of the JSON layout of [`Report`]. It changes only when a field is
/// renamed, removed or changes meaning; new fields may be added within a version.
pub const REPORT_SCHEMA: u32 = 1;

/// Everything one `deadbolt-bench` run measured; `--json FILE` writes it.
///
/// # Schema (version [`REPORT_SCHEMA`] = 1)
///
/// Field names are stable. Every field is always present; a figure that does
/// not apply to a scenario is `null`. Latencies are in microseconds (floats),
/// rates per second, and `*_x_ping` fields are ratios to the PING p50 timed
/// on a side connection during the same scenario run (the floor).
///
/// ```text
/// {
///   "schema": 1,
///   "deadbolt_version": "0.1.0",
///   "elapsed_s": 27.3,                       // wall time of the whole bench
///   "interrupted": false,                    // true after Ctrl-C (partial results)
///   "redis": { "version": "7.0.15", "url": "redis://127.0.0.1:40123/", "embedded": true,
///              "redlock_urls": ["redis://127.0.0.1:40125/", ...],  // [] without the
///                                            // multi scenario's Redlock rows
///              "topology": TopologyInfo | null },  // the --topology beside server 1
///                                            // (null: standalone, or no topology scenario)
///   "host": { "cpus": 2, "pinned": false },
///   "settings": { "scenarios": ["uncontended", ...], "contenders": ["lock", ...],
///                 "duration_s": 2.0, "tasks": 4, "waiters": 8, "clients": 4,
///                 "hold_ms": 0.0, "write_ratio": 0.1, "permits": 4, "rounds": 200,
///                 "idle_waiters": 4,
///                 "idle_s": 2.0, "poll_interval_ms": 100.0, "lease_ms": 30000.0,
///                 "plot_waiters": [], "topology": "standalone" | "cluster" | "sentinel" },
///   "ping": Latency | null,                  // every PING of the run together
///   "results": [ RunResult, ... ],           // one per scenario × contender, in run order
///   "sweep": [ SweepPoint, ... ],            // with --plot: contended at each --plot-waiters
///                                            // count W over min(W, --clients) clients, then
///                                            // each W above --clients again over W clients
///                                            // (one client per waiter); per contender
///   "skipped": [ { "contender": "fair", "reason": "..." } ]
/// }
///
/// RunResult = {
///   "scenario": "uncontended" | "contended" | "handoff" | "idle" | "read-mostly"
///             | "semaphore" | "multi" | "names" | "held-names" | "topology",
///   "contender": "lock" | "fair" | "raw-poll" | "rslock"   // topology: lock only
///              | "redisson" | "redisson-fair"
///              | "rw"                        // read-mostly only
///              | "sem" | "sem-poll"          // semaphore only
///              | "multi" | "redlock" | "rslock-3",  // multi only
///   "workers": 4, "clients": 1,              // tasks/waiters, and clients they share
///   "elapsed_s": 2.0,                        // measured window
///   "acquisitions": 41000,                   // all acquisitions in the window
///                                            // (read-mostly: operations, reads and writes)
///   "acquisitions_per_s": 20500.0 | null,    // uncontended, contended, read-mostly,
///                                            // semaphore, multi, topology throughput
///   "rounds": 200 | null,                    // hand-off rounds (handoff, topology hand-off)
///   "errors": 0, "first_error": "..." | null,
///   "exclusion_violations": 0,               // two holders seen at once (semaphore:
///                                            // more than --permits); must be 0
///   "ping_p50_us": 45.0 | null,              // this run's PING floor (null for idle)
///   "acquire": Latency | null,               // time in acquire (uncontended, contended,
///                                            // semaphore, multi; read-mostly: reads and
///                                            // writes together)
///   "acquire_release": Latency | null,       // acquire + release (uncontended, multi,
///                                            // topology throughput)
///   "handoff": Latency | null,               // release start → next holder (handoff,
///                                            // topology hand-off)
///   "fairness": Fairness | null,             // contended, read-mostly and semaphore
///   "read_write": ReadWrite | null,          // read-mostly only
///   "commands": {
///     "counted": 82000,                      // round trips the contender's clients sent
///                                            // (multi: to all its servers)
///     "per_acquisition": 2.0 | null,         // (read-mostly: per operation)
///     "per_waiter_per_s": 0.0 | null,        // idle only
///     "counted_names": ["evalsha", ...],     // which commandstats entries were counted
///     "by_command": { "evalsha": 82000, "hget": 10, ... }  // every command seen, incl.
///   },                                       // those run inside Lua scripts (not counted)
///   "topology": TopologyRow | null,          // the topology scenario only
///   "held_names": HeldNamesStats             // the held-names scenario only (its
///                                            // rows alone have the key; there
///                                            // `acquisitions` are the hand-offs)
/// }
///
/// Latency = { "samples": 41000, "p50_us": 95.0, "p99_us": 310.0, "max_us": 2100.0,
///             "mean_us": 101.2, "p50_x_ping": 2.1 | null, "p99_x_ping": ..., "max_x_ping": ... }
/// Fairness = { "jain_index": 0.99, "min_max_ratio": 0.8, "longest_wait_us": 5200.0,
///              "per_worker": [5100, 4980, ...] }
/// ReadWrite = { "reads": 36000, "writes": 4000, "reads_per_s": 18000.0,
///               "writes_per_s": 2000.0, "read_acquire": Latency | null,
///               "write_acquire": Latency | null }   // null: no read (write) done
/// TopologyInfo = { "topology": "cluster", "embedded": true, "version": "7.0.15",
///                  "urls": ["redis://127.0.0.1:40130/", ...],  // seeds, or Sentinels
///                  "master_name": "deadbolt" | null,           // Sentinel only
///                  "masters": ["redis://127.0.0.1:40130/", ...] }  // found at start
/// TopologyRow = { "measure": "throughput" | "handoff",
///                 "topology": "standalone" | "cluster" | "sentinel",
///                 "label": "cluster, 3 masters",    // the row's name in the table
///                 "masters": 3,                     // masters its names were on
///                 "names": 48,                      // distinct names it took
///                 "vs_standalone": { "acquisitions_per_s": 0.9 | null,  // over the
///                                    "p50": 1.1 | null, "p99": 1.2 | null } | null }
///                 // standalone row of the same measure in this run (p50, p99: of
///                 // lock+unlock, or of the hand-off); null on the standalone rows
/// HeldNamesStats = { "names": 10000, "memory_bytes": 5200000, "bytes_per_name": 520.0,
///                    "topology": "standalone" | "cluster" | "sentinel",  // where it ran
///                    "masters": 1, "nodes": 1,   // memory, CPU, commands: over the masters;
///                                                // channels, subscriptions: every node
///                    "channels": 10001, "shard_channels": 0,   // of them sharded (cluster)
///                    "holder_subscriptions": 1,
///                    "waiter_subscriptions": 10001, "max_connection_subscriptions": 10001,
///                    "redis_cpu_us_per_handoff": 30.5 | null,
///                    "one_name": Latency | null,   // the same hand-off with one name
///                    "p50_vs_one_name": 1.2 | null }
/// SweepPoint = { "contender": "lock", "waiters": 8, "clients": 4,
///                "acquisitions_per_s": 9000.0, "jain_index": 0.99, "min_max_ratio": 0.8,
///                "errors": 0 }
/// ```
///
/// Command counts come from `INFO commandstats` deltas around each run, with
/// contenders run one after another. Redis also counts the commands a Lua
/// script runs, so only the commands the contender's clients send themselves
/// are `counted` (EVALSHA, SUBSCRIBE… for deadbolt; SET, EVALSHA for the
/// `SET NX` locks; EVALSHA, ZREM for the polling semaphore); the bench's own
/// PINGs and INFOs are taken out. The multi scenario adds up the deltas of
/// its three servers; its PING floor is server 1's. The topology scenario's
/// rows add up the deltas of every master of their deployment (SSUBSCRIBE and
/// SUNSUBSCRIBE counted too), and so do the held-names rows run on a
/// `--topology` deployment; a cluster or Sentinel row's PING floor is
/// timed to the master of its first name, and only the standalone rows'
/// PINGs join the run's `ping`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Report {
    /// [`REPORT_SCHEMA`].
    pub schema: u32,
    /// Version of deadbolt-cli that measured.
    pub deadbolt_version: String,
    /// Wall time of the whole bench, in seconds.
    pub elapsed_s: f64,
    /// True when Ctrl-C (or SIGTERM) stopped the run; the results are partial.
    pub interrupted: bool,
    /// The server measured against.
    pub redis: RedisInfo,
    /// The machine.
    pub host: HostInfo,
    /// The sizes in force.
    pub settings: Settings,
    /// Every PING of the run together (`null` when none was timed).
    pub ping: Option<Latency>,
    /// One entry per scenario and contender, in run order.
    pub results: Vec<RunResult>,
    /// The contended scenario at each `--plot-waiters` count W (only with
    /// `--plot`), per contender: over `min(W, --clients)` clients, then each
    /// W above `--clients` again with one client per waiter (`clients` = W).
    pub sweep: Vec<SweepPoint>,
    /// Contenders that were left out, and why.
    pub skipped: Vec<Skipped>,
    /// The hand-off floor of this machine and server, µs: one hop of a token
    /// relayed round robin by PUBLISH between `--clients` clients (one
    /// command and one pushed message, the least a hand-off to another
    /// client costs), measured at the start of the run for the ceilings;
    /// `null` when no scenario with a ceiling ran.
    #[serde(default)]
    pub handoff_floor_us: Option<f64>,
}

/// The Redis server of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RedisInfo {
    /// `redis_version` from `INFO server`.
    pub version: String,
    /// The URL, with any password replaced by `***`.
    pub url: String,
    /// True when the bench started this server itself (and the Redlock
    /// servers, if any).
    pub embedded: bool,
    /// The two more servers of the multi scenario's Redlock rows, passwords
    /// replaced by `***`; empty when those rows did not run.
    #[serde(default)]
    pub redlock_urls: Vec<String>,
    /// The cluster or Sentinel-managed master that the topology scenario
    /// measured beside this server; `null` when it measured none.
    #[serde(default)]
    pub topology: Option<TopologyInfo>,
}

/// The cluster or Sentinel-managed master of a `--topology` run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TopologyInfo {
    /// Which deployment (by its name).
    #[serde(with = "topology_name")]
    pub topology: Topology,
    /// True when the bench started it itself.
    pub embedded: bool,
    /// `redis_version` of its first master.
    pub version: String,
    /// What clients were given, passwords replaced by `***`: the cluster's
    /// seeds, or the Sentinels.
    pub urls: Vec<String>,
    /// The name the Sentinels know the master by (Sentinel only).
    pub master_name: Option<String>,
    /// The masters found at start (a cluster's in the order of their first
    /// slot), passwords replaced by `***`.
    pub masters: Vec<String>,
}

/// What one row of the topology scenario measured, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum TopologyMeasure {
    /// Lock and unlock of distinct names: `acquisitions_per_s`, `acquire`,
    /// `acquire_release`.
    Throughput,
    /// Release to the next holder on another client: `rounds`, `handoff`.
    Handoff,
}

/// A row of the topology scenario: where it ran, and its figures over the
/// standalone server's in the same run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TopologyRow {
    /// Throughput or hand-off.
    pub measure: TopologyMeasure,
    /// The deployment the row ran on (by its name).
    #[serde(with = "topology_name")]
    pub topology: Topology,
    /// The row's name in the table: "standalone", "cluster, 1 master",
    /// "cluster, 3 masters", "cluster" (hand-off), "sentinel".
    pub label: String,
    /// The masters the row's names were on (a cluster's names spread over
    /// these in turn).
    pub masters: u32,
    /// Distinct names the row took.
    pub names: u32,
    /// Its figures over those of the standalone row of the same measure;
    /// `null` on the standalone rows themselves.
    pub vs_standalone: Option<VsStandalone>,
}

/// A topology row's figures over the standalone row's, measured in the same
/// run: above 1 for `acquisitions_per_s`, or below 1 for the latencies, is
/// the topology ahead.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[non_exhaustive]
pub struct VsStandalone {
    /// Acquisitions per second over the standalone's (throughput rows).
    pub acquisitions_per_s: Option<f64>,
    /// p50 over the standalone's: of lock+unlock (throughput) or of the
    /// hand-off.
    pub p50: Option<f64>,
    /// p99 over the standalone's, likewise.
    pub p99: Option<f64>,
}

/// The machine of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HostInfo {
    /// CPUs available to the bench.
    pub cpus: u32,
    /// True when `--pin` took effect.
    pub pinned: bool,
}

/// The sizes of a run (the flags, in numbers).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Settings {
    /// Scenarios run, in order.
    pub scenarios: Vec<ScenarioKind>,
    /// Contenders run, in order.
    pub contenders: Vec<ContenderKind>,
    /// `--duration` in seconds.
    pub duration_s: f64,
    /// `--tasks`.
    pub tasks: u32,
    /// `--waiters`.
    pub waiters: u32,
    /// `--clients`.
    pub clients: u32,
    /// `--hold` in milliseconds.
    pub hold_ms: f64,
    /// `--think` in milliseconds.
    #[serde(default)]
    pub think_ms: f64,
    /// The service rows' hold and think time, ms; `null` with
    /// `--no-service`.
    #[serde(default)]
    pub service: Option<Work>,
    /// `--write-ratio`: the share of read-mostly operations that write.
    pub write_ratio: f64,
    /// `--permits`: the semaphore scenario's permits.
    pub permits: u32,
    /// `--rounds`.
    pub rounds: u32,
    /// `--idle-waiters`.
    pub idle_waiters: u32,
    /// `--names`.
    #[serde(default)]
    pub names: u32,
    /// `--idle-time` in seconds.
    pub idle_s: f64,
    /// `--poll-interval` in milliseconds.
    pub poll_interval_ms: f64,
    /// `--lease` in milliseconds.
    pub lease_ms: f64,
    /// Waiter counts of the sweep (empty without `--plot`).
    pub plot_waiters: Vec<u32>,
    /// `--topology` (by its name).
    #[serde(default, with = "topology_name")]
    pub topology: Topology,
}

/// The figures of one contender in one scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunResult {
    /// The scenario.
    pub scenario: ScenarioKind,
    /// The contender.
    pub contender: ContenderKind,
    /// Tasks or waiters that took part.
    pub workers: u32,
    /// Separate clients (connections) they were spread over.
    pub clients: u32,
    /// Length of the measured window, in seconds.
    pub elapsed_s: f64,
    /// Acquisitions in the window (read-mostly: operations, reads and
    /// writes).
    pub acquisitions: u64,
    /// Acquisitions per second (uncontended, contended, read-mostly,
    /// semaphore and multi; else `null`).
    pub acquisitions_per_s: Option<f64>,
    /// Hand-off rounds (handoff; else `null`).
    pub rounds: Option<u64>,
    /// Failed acquires and releases.
    pub errors: u64,
    /// The first error's message.
    pub first_error: Option<String>,
    /// Times two holders were seen at once (semaphore: more than
    /// `--permits`); anything but 0 is a bug.
    pub exclusion_violations: u64,
    /// PING p50 timed during this run, µs (`null` for idle).
    pub ping_p50_us: Option<f64>,
    /// Time spent in acquire (uncontended, contended, semaphore, multi;
    /// read-mostly: reads and writes together).
    pub acquire: Option<Latency>,
    /// Time of acquire plus release (uncontended, multi).
    pub acquire_release: Option<Latency>,
    /// From the start of the holder's release to the waiter holding the lock (handoff).
    pub handoff: Option<Latency>,
    /// Fairness across waiters (contended, read-mostly and semaphore).
    pub fairness: Option<Fairness>,
    /// Reads and writes apart (read-mostly).
    pub read_write: Option<ReadWrite>,
    /// Redis commands.
    pub commands: Commands,
    /// Where a topology scenario row ran, and its ratios to the standalone
    /// row (topology scenario; else `null`).
    #[serde(default)]
    pub topology: Option<TopologyRow>,
    /// The workers' hold and think time (contended, read-mostly, semaphore;
    /// else `null`).
    #[serde(default)]
    pub work: Option<Work>,
    /// The most acquisitions per second this row could make: `limit / (hold
    /// + hand-off floor)` with `limit` 1 for a lock and `--permits` for the
    /// semaphore, the hold as measured ([`Work::held_us`]) and the floor of
    /// [`Report::handoff_floor_us`] (contended and semaphore; else `null`).
    #[serde(default)]
    pub ceiling_per_s: Option<f64>,
    /// `acquisitions_per_s` over `ceiling_per_s`.
    #[serde(default)]
    pub of_ceiling: Option<f64>,
    /// What the names scenario left in Redis (else `null`).
    #[serde(default)]
    pub left: Option<Left>,
    /// The held-names scenario's figures with every name held and waited
    /// for, and its one-name baseline. Only in that scenario's results: the
    /// key is left out of every other row, so that their JSON keys stay as
    /// they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_names: Option<HeldNamesStats>,
}

/// What the held-names scenario measured: `names` names each held by
/// client A with one waiter of client B parked on it, then released in
/// turn (the hand-offs at that scale are the row's `handoff`, their commands
/// and Redis CPU its `commands`, per hand-off in `per_acquisition` and
/// `redis_cpu_us_per_acquisition`), beside the hand-off of a single name in
/// the same run.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HeldNamesStats {
    /// Names held, each with its one waiter, when the figures were read.
    pub names: u64,
    /// Where the run went: server 1 (`standalone`), or the `--topology`
    /// deployment (a Redis Cluster, a Sentinel-managed master).
    #[serde(default, with = "topology_name")]
    pub topology: Topology,
    /// Masters of that deployment: `memory_bytes`, the Redis CPU and the
    /// commands are those of every master added up.
    #[serde(default = "one")]
    pub masters: u32,
    /// Nodes of that deployment (a cluster's replicas too): `channels` and
    /// the subscriptions are counted on every one and added up.
    #[serde(default = "one")]
    pub nodes: u32,
    /// `used_memory` more than before the first acquire, with every name
    /// held and waited for, bytes (every master's added up).
    pub memory_bytes: i64,
    /// `memory_bytes` over `names`.
    pub bytes_per_name: f64,
    /// Pub/Sub channels with a subscriber at that moment, on every node
    /// added up: `PUBSUB CHANNELS` counted, and on a cluster (where deadbolt
    /// subscribes with sharded Pub/Sub, `SSUBSCRIBE`) `PUBSUB SHARDCHANNELS`
    /// too; every client's, the bench's two included.
    pub channels: u64,
    /// The shard channels (`PUBSUB SHARDCHANNELS`) of `channels`: 0 but on
    /// a cluster.
    #[serde(default)]
    pub shard_channels: u64,
    /// Subscriptions (`sub` + `psub` + `ssub` of `CLIENT LIST`) of the
    /// holder's (client A's) connections, on every node it is connected to.
    pub holder_subscriptions: u64,
    /// Subscriptions of the waiters' (client B's) connections.
    pub waiter_subscriptions: u64,
    /// The most subscriptions of any one connection of the two clients.
    pub max_connection_subscriptions: u64,
    /// Redis CPU over the release phase per hand-off, µs (as
    /// `commands.redis_cpu_us_per_acquisition`; `null` without hand-offs).
    pub redis_cpu_us_per_handoff: Option<f64>,
    /// The hand-off of one name held with one waiter, the same steps
    /// repeated `--rounds` times (`null` when none completed).
    pub one_name: Option<Latency>,
    /// The hand-off p50 at `names` names over `one_name`'s p50.
    pub p50_vs_one_name: Option<f64>,
}

/// 1: the masters and nodes of a held-names row from before they were
/// counted (it ran on one server).
fn one() -> u32 {
    1
}

/// What locking and releasing many distinct names left in Redis.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Left {
    /// Distinct names locked and released once each.
    pub names: u64,
    /// Keys more than before (`DBSIZE`), once every release returned.
    pub keys: i64,
    /// `used_memory` more than before, bytes.
    pub memory_bytes: i64,
    /// `memory_bytes` over `names`.
    pub bytes_per_name: f64,
    /// True when the server was emptied (FLUSHALL) first, so that the
    /// figures are this contender's alone: on servers the bench started.
    pub emptied: bool,
}

/// What each worker of a many-waiter run does per acquisition: hold the
/// lock (or permit) `hold_ms`, then wait `think_ms` before asking again.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Work {
    /// How long each acquisition holds, ms.
    pub hold_ms: f64,
    /// Time between a release and the worker's next acquire, ms.
    pub think_ms: f64,
    /// True for the service rows (`--service-hold`, `--service-think`),
    /// false for the rows of `--hold` and `--think`.
    pub service: bool,
    /// The hold as it happened, µs on average over the row's acquisitions
    /// (a timer's sleep of 1 ms lasts up to 2): what the row's ceiling is
    /// worked out from. `null` in the settings and where not measured.
    #[serde(default)]
    pub held_us: Option<f64>,
}

impl Work {
    /// The rows of `--hold` and `--think`.
    pub(crate) fn flags(args: &BenchArgs) -> Work {
        Work {
            hold_ms: args.hold.as_secs_f64() * 1e3,
            think_ms: args.think.as_secs_f64() * 1e3,
            service: false,
            held_us: None,
        }
    }

    /// The service rows, unless `--no-service` (or they would repeat the
    /// rows of the flags).
    pub(crate) fn service(args: &BenchArgs) -> Option<Work> {
        let w = Work {
            hold_ms: args.service_hold.as_secs_f64() * 1e3,
            think_ms: args.service_think.as_secs_f64() * 1e3,
            service: true,
            held_us: None,
        };
        let flags = Work::flags(args);
        let same = w.hold_ms == flags.hold_ms && w.think_ms == flags.think_ms;
        (!args.no_service && !same).then_some(w)
    }

    /// The rows of the flags, then the service rows when they run.
    pub(crate) fn both(args: &BenchArgs) -> Vec<Work> {
        std::iter::once(Work::flags(args))
            .chain(Work::service(args))
            .collect()
    }

    /// The hold.
    pub(crate) fn hold(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.hold_ms.max(0.0) / 1e3)
    }

    /// The think time.
    pub(crate) fn think(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.think_ms.max(0.0) / 1e3)
    }

    /// "hold 1 ms, think 2 ms" (and "service: " before it for the service
    /// rows).
    pub(crate) fn describe(&self) -> String {
        format!(
            "{}hold {} ms, think {} ms",
            if self.service { "service: " } else { "" },
            self.hold_ms,
            self.think_ms
        )
    }
}

impl RunResult {
    /// A result of `scenario` for `contender` with the counts every run
    /// has, and every figure that only some scenarios have left empty
    /// (`None`), for the caller to fill in.
    pub(crate) fn of(
        scenario: ScenarioKind,
        contender: ContenderKind,
        (workers, clients): (u32, u32),
        elapsed: std::time::Duration,
        tally: Tally,
        commands: Commands,
    ) -> RunResult {
        RunResult {
            scenario,
            contender,
            workers,
            clients,
            elapsed_s: elapsed.as_secs_f64(),
            acquisitions: tally.acquisitions,
            acquisitions_per_s: None,
            rounds: None,
            errors: tally.errors,
            first_error: tally.first_error,
            exclusion_violations: 0,
            ping_p50_us: None,
            acquire: None,
            acquire_release: None,
            handoff: None,
            fairness: None,
            read_write: None,
            commands,
            topology: None,
            work: None,
            ceiling_per_s: None,
            of_ceiling: None,
            left: None,
            held_names: None,
        }
    }
}

/// The read-mostly scenario's reads and writes, apart.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ReadWrite {
    /// Reads done in the window.
    pub reads: u64,
    /// Writes done in the window.
    pub writes: u64,
    /// Reads per second.
    pub reads_per_s: f64,
    /// Writes per second.
    pub writes_per_s: f64,
    /// Time a read spent in acquire; `null` when no read was done.
    pub read_acquire: Option<Latency>,
    /// Time a write spent in acquire; `null` when no write was done.
    pub write_acquire: Option<Latency>,
}

/// A latency distribution.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Latency {
    /// Number of samples.
    pub samples: u64,
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Largest, µs.
    pub max_us: f64,
    /// Mean, µs.
    pub mean_us: f64,
    /// `p50_us` over the run's PING p50.
    pub p50_x_ping: Option<f64>,
    /// `p99_us` over the run's PING p50.
    pub p99_x_ping: Option<f64>,
    /// `max_us` over the run's PING p50.
    pub max_x_ping: Option<f64>,
}

/// How evenly the lock went round the waiters.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Fairness {
    /// Jain's index over per-waiter acquisition counts: 1 = equal shares,
    /// 1/n = one waiter got everything. Flatters pollers; see `min_max_ratio`.
    pub jain_index: f64,
    /// Acquisitions of the least-served waiter over the most-served one.
    pub min_max_ratio: f64,
    /// The longest a waiter waited for one acquisition, µs.
    pub longest_wait_us: f64,
    /// Acquisitions per waiter.
    pub per_worker: Vec<u64>,
}

/// Redis commands of one run, from `INFO commandstats` deltas.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Commands {
    /// Commands the contender's clients sent (round trips; multi: to every
    /// server).
    pub counted: u64,
    /// `counted` per acquisition.
    pub per_acquisition: Option<f64>,
    /// `counted` per waiter per second (idle).
    pub per_waiter_per_s: Option<f64>,
    /// The commandstats names that make up `counted`.
    pub counted_names: Vec<String>,
    /// Every command Redis ran in the window, including those inside scripts.
    pub by_command: BTreeMap<String, u64>,
    /// Redis CPU over the window, µs, and where it was read: see
    /// [`CpuSource`]; `null` where the scenario does not measure it.
    #[serde(default)]
    pub redis_cpu_us: Option<f64>,
    /// Where `redis_cpu_us` comes from.
    #[serde(default)]
    pub redis_cpu_source: Option<CpuSource>,
    /// The bench process's CPU over the window (its rusage, user + system),
    /// µs: the contender's clients, plus the bench's PING task and progress
    /// bar, the same for every contender.
    #[serde(default)]
    pub client_cpu_us: Option<f64>,
    /// `redis_cpu_us` per acquisition (read-mostly: per operation).
    #[serde(default)]
    pub redis_cpu_us_per_acquisition: Option<f64>,
    /// `client_cpu_us` per acquisition (read-mostly: per operation).
    #[serde(default)]
    pub client_cpu_us_per_acquisition: Option<f64>,
}

impl Commands {
    /// Set the per-acquisition figures for `acquisitions` acquisitions.
    pub(crate) fn per_acquisitions(&mut self, acquisitions: u64) {
        let n = float(acquisitions);
        let per = |v: Option<f64>| v.filter(|_| acquisitions > 0).map(|v| v / n);
        self.per_acquisition = per(Some(float(self.counted)));
        self.redis_cpu_us_per_acquisition = per(self.redis_cpu_us);
        self.client_cpu_us_per_acquisition = per(self.client_cpu_us);
    }
}

/// Where a run's Redis CPU figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum CpuSource {
    /// The server's own CPU time (`used_cpu_sys` + `used_cpu_user` of `INFO
    /// cpu`): on servers the bench started, which nobody else uses. It
    /// includes the server's event loop and system calls, and the bench's
    /// PINGs and INFOs.
    Server,
    /// The `usec` of `INFO commandstats` of the commands the contender's
    /// clients send (a script's includes the commands it runs): with
    /// `--redis`, where other clients may share the server. It leaves out
    /// the event loop and system calls, so it reads lower than `server`.
    Commandstats,
}

/// One point of the throughput sweep drawn by `--plot`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SweepPoint {
    /// The contender.
    pub contender: ContenderKind,
    /// Waiters on the one name.
    pub waiters: u32,
    /// Clients they were spread over: `min(waiters, --clients)`, or
    /// `waiters` in the sweep with one client per waiter.
    pub clients: u32,
    /// Acquisitions per second.
    pub acquisitions_per_s: f64,
    /// Jain's index over per-waiter counts.
    pub jain_index: f64,
    /// Least over most served waiter.
    pub min_max_ratio: f64,
    /// Failed acquires and releases.
    pub errors: u64,
}

/// A contender that was not run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Skipped {
    /// The contender.
    pub contender: ContenderKind,
    /// Why.
    pub reason: String,
}

impl Report {
    /// The report as pretty-printed JSON.
    ///
    /// # Errors
    /// Never in practice (every field serialises).
    pub fn to_json(&self) -> anyhow::Result<String> {
        serde_json::to_string_pretty(self).context("serialising the report")
    }

    /// Write [`Report::to_json`] to `path`.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        let mut json = self.to_json()?;
        json.push('\n');
        std::fs::write(path, json)?;
        Ok(())
    }

    /// Whether the `--plot` sweep has runs with one client per waiter, apart
    /// from those over `--clients` clients (waiter counts above it).
    pub(crate) fn has_own_client_sweep(&self) -> bool {
        self.sweep
            .iter()
            .any(|p| p.clients == p.waiters && p.waiters > self.settings.clients)
    }

    /// The points of one sweep of `--plot`, in run order. A point of at most
    /// `--clients` waiters is in both.
    pub(crate) fn sweep_points(&self, sweep: Sweep) -> impl Iterator<Item = &SweepPoint> {
        let most = self.settings.clients;
        self.sweep.iter().filter(move |p| match sweep {
            Sweep::Spread => p.clients == most.min(p.waiters),
            Sweep::OwnClient => p.clients == p.waiters,
        })
    }

    /// How a sweep spreads its waiters, in a few words ("over 4 clients",
    /// "one per waiter").
    pub(crate) fn sweep_label(&self, sweep: Sweep) -> String {
        match sweep {
            Sweep::Spread => {
                let n = self.settings.clients;
                format!("over {n} client{}", plural(n))
            }
            Sweep::OwnClient => "one per waiter".to_string(),
        }
    }
}

impl RunResult {
    /// The run in a few words, for the notes under the table: "contended /
    /// lock", or for the topology scenario "topology / lock (cluster, 3
    /// masters, throughput)".
    pub(crate) fn name(&self) -> String {
        let base = format!("{} / {}", self.scenario.name(), self.contender.name());
        match &self.topology {
            Some(t) => {
                let measure = match t.measure {
                    TopologyMeasure::Throughput => "throughput",
                    TopologyMeasure::Handoff => "hand-off",
                };
                format!("{base} ({}, {measure})", t.label)
            }
            None => base,
        }
    }
}

/// The two sweeps of `--plot`: the contended scenario at each
/// `--plot-waiters` count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sweep {
    /// The waiters spread over at most `--clients` clients.
    Spread,
    /// Each waiter its own client.
    OwnClient,
}

/// "" for 1, else "s".
pub(crate) fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A [`Topology`] in JSON: its name (`"cluster"`).
mod topology_name {
    use super::Topology;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(t: &Topology, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(t.name())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Topology, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}
