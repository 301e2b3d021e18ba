//! deadbolt-cli: the `deadbolt` command.
//!
//! * `deadbolt inspect NAME` shows who holds a lock, how often, for how long,
//!   and its fencing counter (and, for `--kind fair`, its queue; for
//!   `--kind rw`, the writer, the readers with their leases and the waiting
//!   writers; for `--kind semaphore`, the permits set and available, the
//!   holders with their permits and leases, and the waiters with their
//!   demands; for `--kind election`, the leader, its term and its info).
//! * `deadbolt force-unlock NAME --yes` deletes a lock whoever holds it
//!   (for `--kind rw`, the writer and every read hold; a semaphore or an
//!   election is refused). Both refuse a key of another type at the lock's key, naming
//!   the type found, and both reach a Redis Cluster (`--topology cluster`,
//!   `--redis` listing seed nodes) or a master behind Sentinel (`--topology
//!   sentinel --sentinel-master NAME`, `--redis` listing Sentinels).
//!
//! The benchmark is its own crate and binary, `deadbolt-bench`
//! (`scripts/bench`); [`Topology`], [`split_urls`] and [`redact`] are
//! deadbolt-core's, which both use.
//!
//! The logic lives here so that tests drive it in-process: parse a [`Cli`]
//! (or build the argument structs) and call [`run`], [`inspect`] or
//! [`force_unlock`]. `main.rs` only parses and calls [`run`].

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod inspect;
mod target;
mod watch;

pub use inspect::{
    force_unlock, inspect, FairState, ForceUnlockArgs, Hold, InspectArgs, Inspection, Leader,
    PermitHolder, PermitWaiter, PrimitiveKind, PrimitiveState, QueueEntry, ReaderEntry, RwState,
    SemaphoreState, Unlocked, QUEUE_LISTED,
};
pub use target::{redact, split_urls, topology_parser, Target, Topology};
pub use watch::{describe, watch};

/// The `deadbolt` command line.
///
/// # Examples
/// ```
/// use clap::Parser;
/// let cli = deadbolt_cli::Cli::try_parse_from(["deadbolt", "inspect", "orders:42"]).unwrap();
/// assert!(matches!(cli.command, deadbolt_cli::Command::Inspect(_)));
/// ```
#[derive(Debug, Parser)]
#[command(
    name = "deadbolt",
    version,
    about = "Inspect and force-unlock deadbolt's Redis locks",
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
pub enum Command {
    /// Show the state of a lock: holder, hold count, TTL, fencing counter
    /// (and a fair lock's queue, a read-write lock's readers; a semaphore's
    /// permits, holders and waiters).
    Inspect(InspectArgs),
    /// Delete a lock whoever holds it (its holders lose it); needs --yes.
    ForceUnlock(ForceUnlockArgs),
}

/// Run a parsed command line, printing its results to stdout.
///
/// Returns the process exit code (success; failures are errors).
///
/// # Errors
/// Whatever the subcommand reports: bad arguments, an unreachable Redis, a
/// key of another type at the lock's key.
///
/// # Cancel safety
/// As the subcommand's ([`inspect`] is cancel safe; a dropped
/// [`force_unlock`] may or may not have deleted the lock).
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Inspect(args) if args.watch => {
            use std::io::Write as _;
            watch(&args, |line| {
                let mut o = std::io::stdout().lock();
                writeln!(o, "{line}").and_then(|()| o.flush()).is_ok()
            })
            .await?;
            Ok(ExitCode::SUCCESS)
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
