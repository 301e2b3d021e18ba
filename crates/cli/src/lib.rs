//! deadbolt-cli: the `deadbolt` command.
//!
//! * `deadbolt bench` measures, in one run on one Redis, how deadbolt's lock
//!   kinds compare with each other and with the polling locks people use
//!   (a textbook `SET NX PX` spin-poller and the rslock crate): latency as a
//!   ratio to a PING timed in the same run, throughput under contention,
//!   fairness, hand-off latency, the Redis commands an idle waiter costs, a
//!   read-mostly mix on the read-write lock beside the `Lock`,
//!   deadbolt's `Semaphore` beside a polling ZSET semaphore, and locks over
//!   many keys or servers (a `MultiLock` over 3 names, deadbolt's `Redlock`
//!   and rslock over 3 servers) beside a single `Lock`; with `--topology
//!   cluster` or `sentinel`, the `Lock` on a Redis Cluster or a
//!   Sentinel-managed master beside a standalone server.
//!   See [`BenchArgs`] for the flags and [`Report`] for the JSON it writes.
//! * `deadbolt inspect NAME` shows who holds a lock, how often, for how long,
//!   and its fencing counter (and, for `--kind fair`, its queue; for
//!   `--kind rw`, the writer, the readers with their leases and the waiting
//!   writers; for `--kind semaphore`, the permits set and available, the
//!   holders with their permits and leases, and the waiters with their
//!   demands).
//! * `deadbolt force-unlock NAME --yes` deletes a lock whoever holds it
//!   (for `--kind rw`, the writer and every read hold; a semaphore is
//!   refused). Both refuse a key of another type at the lock's key, naming
//!   the type found, and both reach a Redis Cluster (`--topology cluster`,
//!   `--redis` listing seed nodes) or a master behind Sentinel (`--topology
//!   sentinel --sentinel-master NAME`, `--redis` listing Sentinels) as
//!   `bench` does.
//!
//! The logic lives here so that tests drive it in-process: parse a [`Cli`]
//! (or build the argument structs) and call [`run`], [`bench()`],
//! [`inspect`] or [`force_unlock`]. `main.rs` only parses and calls [`run`].

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

mod bench;
mod inspect;

pub use bench::{
    bench, bench_with, parse_duration, parse_ratio, BenchArgs, Commands, ContenderKind, Fairness,
    HostInfo, Latency, ReadWrite, RedisInfo, Report, RunResult, ScenarioKind, Settings, Skipped,
    SweepPoint, Topology, TopologyInfo, TopologyMeasure, TopologyRow, VsStandalone, REPORT_SCHEMA,
    TOPOLOGY_NAMES_PER_TASK,
};
pub use inspect::{
    force_unlock, inspect, ForceUnlockArgs, InspectArgs, LockState, PermitHolder, PermitWaiter,
    PrimitiveKind, QueueEntry, ReaderEntry, RwState, SemaphoreState, Unlocked, QUEUE_LISTED,
};

/// Exit code after an interrupted bench (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// The `deadbolt` command line.
///
/// # Examples
/// ```
/// use clap::Parser;
/// let cli = deadbolt_cli::Cli::try_parse_from(["deadbolt", "bench", "--scenario", "idle"]).unwrap();
/// assert!(matches!(cli.command, deadbolt_cli::Command::Bench(_)));
/// ```
#[derive(Debug, Parser)]
#[command(
    name = "deadbolt",
    version,
    about = "Benchmark, inspect and force-unlock deadbolt's Redis locks",
    long_about = None
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands of `deadbolt`.
#[derive(Debug, Subcommand)]
#[non_exhaustive]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once per process; boxing BenchArgs would only burden callers"
)]
pub enum Command {
    /// Compare deadbolt's locks with polling locks, side by side on one Redis.
    Bench(BenchArgs),
    /// Show the state of a lock: holder, hold count, TTL, fencing counter
    /// (and a fair lock's queue, a read-write lock's readers; a semaphore's
    /// permits, holders and waiters).
    Inspect(InspectArgs),
    /// Delete a lock whoever holds it (its holders lose it); needs --yes.
    ForceUnlock(ForceUnlockArgs),
}

/// Run a parsed command line, printing its results to stdout.
///
/// Returns the process exit code: success, or [`EXIT_INTERRUPTED`] after a
/// bench stopped by Ctrl-C (its partial results are still printed and
/// written).
///
/// # Errors
/// Whatever the subcommand reports: bad arguments, an unreachable Redis,
/// redis-server not installed, a failed write of `--json`/`--plot`.
///
/// # Cancel safety
/// As the subcommand's: dropping a running bench stops its embedded
/// redis-server (the server handle is dropped with the future).
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Bench(args) => {
            let report = bench(&args).await?;
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
        Command::Inspect(args) => {
            let state = inspect(&args).await?;
            print!("{state}");
            Ok(ExitCode::SUCCESS)
        }
        Command::ForceUnlock(args) => {
            println!("{}", force_unlock(&args).await?);
            Ok(ExitCode::SUCCESS)
        }
    }
}
