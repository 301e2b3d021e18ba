//! Three processes, one job: leader election with deadbolt's `Election`.
//!
//! `cargo run --release --example scheduler [-- redis://host:port/ [rounds]]`:
//! with no URL a throwaway redis-server is started on a free loopback port
//! and stopped at the end. The program starts three worker processes (itself,
//! with `--worker`), each of which campaigns for the election `scheduler`
//! and, while it leads, runs the job (a line every 200 ms, fenced with its
//! term). The parent observes the election and, in turns, either SIGKILLs
//! the leader's process (and starts a new worker in its place) or asks the
//! leader to resign, and times each hand-over: from the kill (or the
//! request) to the observer seeing the next leader. It ends with the p50 and
//! the longest hand-over of each kind (`rounds` of each, 3 by default).
//!
//! Each worker's watchdog lease is 1 s: a leader that dies is replaced once
//! its lease has run out, so a hand-over after a kill takes about 1 s; a
//! resignation hands over in about a round trip or two.

use deadbolt::HoldGuard as _;
use std::process::Stdio;
use std::time::Duration;

use deadbolt::{Client, Leader};
use futures::StreamExt;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// The workers' lease.
const LEASE: Duration = Duration::from_secs(1);
/// Bound on one hand-over: catches a hang.
const HANG: Duration = Duration::from_secs(20);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--worker") {
        return worker(&args[2], &args[3]).await;
    }
    let (url, server) = deadbolt_testkit::RedisServer::given_or_started(args.get(1).cloned())?;
    if server.is_some() {
        println!("started a throwaway redis-server at {url}");
    }
    let rounds: usize = args.get(2).map_or(Ok(3), |r| r.parse())?;
    let observer = Client::connect(&url).await?;
    let election = observer.election("scheduler");
    let mut changes = Box::pin(election.observe());
    let mut workers = Vec::new();
    for i in 0..3 {
        workers.push(spawn_worker(&url, i)?);
    }
    let mut next_id = 3;
    let mut leader = wait_for_leader(&mut changes, 0).await?;
    println!("{} leads (term {})", leader.info, leader.term);
    let (mut killed, mut resigned) = (Vec::new(), Vec::new());
    for round in 0..2 * rounds {
        tokio::time::sleep(Duration::from_millis(600)).await;
        let Some(pos) = workers.iter().position(|w| w.name == leader.info) else {
            return Err(format!("no worker named {}", leader.info).into());
        };
        let started = Instant::now();
        let kill = round % 2 == 0;
        if kill {
            let mut w = workers.remove(pos);
            w.child.kill().await?;
            println!("killed {} (SIGKILL)", w.name);
            workers.push(spawn_worker(&url, next_id)?);
            next_id += 1;
        } else {
            let w = &mut workers[pos];
            w.stdin.write_all(b"resign\n").await?;
            w.stdin.flush().await?;
            println!("asked {} to resign", w.name);
        }
        let next = wait_for_leader(&mut changes, leader.term).await?;
        let took = started.elapsed();
        println!(
            "{} leads (term {}), {:.1} ms after the {}",
            next.info,
            next.term,
            took.as_secs_f64() * 1e3,
            if kill { "kill" } else { "request" }
        );
        if kill {
            killed.push(took);
        } else {
            resigned.push(took);
        }
        leader = next;
    }
    for (what, mut v) in [("a SIGKILL", killed), ("a resignation", resigned)] {
        v.sort();
        if let (Some(p50), Some(max)) = (v.get(v.len() / 2), v.last()) {
            println!(
                "hand-over after {what}: p50 {:.1} ms, max {:.1} ms over {} rounds",
                p50.as_secs_f64() * 1e3,
                max.as_secs_f64() * 1e3,
                v.len()
            );
        }
    }
    for mut w in workers {
        let _ = w.child.kill().await;
    }
    observer.shutdown().await;
    Ok(())
}

/// A worker process: its name, its stdin (for "resign") and the process.
struct Worker {
    name: String,
    stdin: tokio::process::ChildStdin,
    child: Child,
}

fn spawn_worker(url: &str, i: usize) -> std::io::Result<Worker> {
    let name = format!("worker-{i}");
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--worker", url, &name])
        .stdin(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdin = child.stdin.take().expect("piped stdin");
    Ok(Worker { name, stdin, child })
}

/// The next leader with a term above `after`, as the observer sees it.
async fn wait_for_leader(
    changes: &mut (impl futures::Stream<Item = deadbolt::Result<Option<Leader>>> + Unpin),
    after: u64,
) -> Result<Leader, Box<dyn std::error::Error>> {
    tokio::time::timeout(HANG, async {
        loop {
            match changes.next().await {
                Some(Ok(Some(l))) if l.term > after => return Ok(l),
                Some(Ok(_)) => {}
                Some(Err(e)) => println!("observer: {e}"),
                None => return Err("the observer's stream ended".into()),
            }
        }
    })
    .await
    .map_err(|_| format!("no new leader within {HANG:?}"))?
}

/// One worker: campaign; while leading, run the job until the leadership
/// is lost or the parent asks it to resign; then campaign again.
async fn worker(url: &str, name: &str) -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::builder(url)
        .client_name(name)
        .watchdog_timeout(LEASE)
        .build()
        .await?;
    let election = client.election("scheduler");
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    loop {
        let leadership = election.campaign(name).await?;
        let term = leadership.term();
        println!("  {name}: leading, term {term}");
        let job = async {
            loop {
                // A real job would pass `term` to what it writes, which
                // refuses writes with a lower term than it has seen.
                println!("  {name}: runs the job (term {term})");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        let resign = async {
            while let Ok(Some(line)) = stdin.next_line().await {
                if line == "resign" {
                    return;
                }
            }
            std::future::pending::<()>().await;
        };
        tokio::select! {
            lost = leadership.run(job) => println!("  {name}: lost the leadership: {lost:?}"),
            () = resign => {
                leadership.resign().await?;
                println!("  {name}: resigned");
                // Let another worker take it.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}
