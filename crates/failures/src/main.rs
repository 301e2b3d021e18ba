//! `deadbolt-failures`: the four ways Redis locks break in production, run
//! on throwaway servers, the textbook lock beside deadbolt, printed as one
//! table. See the library for what each scenario does.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use deadbolt_failures::scenarios::{clocks, failover, flash, paused};
use deadbolt_failures::{Postgres, Table};

/// Runs the four failure scenarios (a holder paused past its lease,
/// Redlock while clocks jump, a flash sale, a failover before replication)
/// with the textbook Redis lock and with deadbolt, against PostgreSQL, and
/// prints what went wrong, counted.
#[derive(Debug, Parser)]
#[command(name = "deadbolt-failures", version)]
struct Args {
    /// Smaller sizes for a small or busy machine (flash sale: 2,000 buyers
    /// over 10 clients; fewer rounds).
    #[arg(long)]
    small: bool,
    /// Flash-sale buyers (default 10,000; 2,000 with --small). The
    /// article's figure is 100,000.
    #[arg(long)]
    buyers: Option<usize>,
    /// Flash-sale clients the buyers are spread over (default 20).
    #[arg(long)]
    clients: Option<usize>,
    /// Run only these scenarios (1 to 4; repeat or separate by commas).
    #[arg(long, value_delimiter = ',')]
    only: Vec<u8>,
    /// Internal: run as scenario 1's paused worker (started by the
    /// scenario itself, with its values).
    #[arg(long, hide = true, num_args = paused::WORKER_ARGS, allow_hyphen_values = true)]
    paused_worker: Option<Vec<String>>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(worker) = &args.paused_worker {
        return paused::paused_worker(worker).await;
    }
    let want = |n: u8| args.only.is_empty() || args.only.contains(&n);
    let started = Instant::now();
    let pg = Postgres::start().await.context("start PostgreSQL")?;
    eprintln!("PostgreSQL on 127.0.0.1:{}", pg.port());
    let mut table = Table::default();
    if want(1) {
        eprintln!("1/4 a holder paused past its lease ...");
        let config = paused::Config {
            worker_exe: Some(std::env::current_exe().context("this binary's path")?),
            ..paused::Config::default()
        };
        let c = paused::run(&config, &pg).await?;
        table.extend(c.rows());
    }
    if want(2) {
        eprintln!("2/4 Redlock while clocks jump ...");
        let config = clocks::Config {
            rounds: if args.small { 3 } else { 5 },
            ..clocks::Config::default()
        };
        table.extend(clocks::run(&config, &pg).await?.rows());
    }
    if want(3) {
        let config = flash::Config {
            buyers: args
                .buyers
                .unwrap_or(if args.small { 2_000 } else { 10_000 }),
            clients: args.clients.unwrap_or(if args.small { 10 } else { 20 }),
            window: if args.small {
                Duration::from_secs(1)
            } else {
                Duration::from_secs(2)
            },
            ..flash::Config::default()
        };
        eprintln!(
            "3/4 flash sale: {} buyers over {} clients ...",
            config.buyers, config.clients
        );
        table.extend(flash::run(&config, &pg).await?.rows());
    }
    if want(4) {
        eprintln!("4/4 failover before replication ...");
        let config = failover::Config {
            rounds: if args.small { 5 } else { 10 },
            ..failover::Config::default()
        };
        table.extend(failover::run(&config, &pg).await?.rows());
    }
    println!("{table}");
    println!(
        "Redlock alone does not protect: both Redlocks let two holders in at once when clocks \
         jump; only the fencing token, checked by PostgreSQL, kept the stale write out."
    );
    eprintln!("done in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}
