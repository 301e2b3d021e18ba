//! The names scenario: what a lock leaves in Redis once it is released.
//!
//! Each contender locks and releases `--names` distinct names once, the
//! common pattern of a lock per entity (an order, a user), and the bench
//! reads the keys and the memory left behind.

use anyhow::Context as _;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::cells::{client_cpu, cmds, rate, redis_cpu, table};
use super::legend::{entries, Legend, ACQ_S, CMDS_ACQ, COST};
use crate::contender::Contender;
use crate::model::{float, BenchArgs, Left, Report, RunResult, ScenarioKind, Tally};
use crate::scenarios::{acquire_bounded, join_all, kind_and_run, shutdown, Env, Scenario};
use crate::stats;
use crate::table::fmt_rate;

/// Tasks that share the names between them.
const TASKS: u64 = 4;

/// `--names` distinct names locked and released once each.
#[derive(Debug)]
pub(crate) struct Names;

entries! {
    /// Bytes left per released name.
    PER_NAME = 170, "memory/name", "Redis used_memory left after every name was released, over \
        the names (keys left: DBSIZE more than before); on a server the bench started it is \
        emptied before each contender, so the figure is that contender's alone; lower is better";
}

impl Scenario for Names {
    kind_and_run!(Names => names);

    fn planned(&self, args: &BenchArgs) -> std::time::Duration {
        // About 100 µs a lock+unlock over 4 tasks, guessed for the ETA.
        std::time::Duration::from_micros(u64::from(args.names) * 25)
    }

    fn section(&self, report: &Report, rows: &[&RunResult]) -> String {
        let header = [
            "names",
            "keys left",
            "memory left",
            "memory/name",
            "acq/s",
            "cmds/acq",
            "Redis µs/acq",
            "client µs/acq",
            "errors",
        ];
        let table = table(&header, rows, |r| {
            let left = r.left.as_ref();
            let cell = |f: fn(&Left) -> String| left.map_or_else(|| "-".into(), f);
            vec![
                cell(|l| fmt_rate(float(l.names))),
                cell(|l| l.keys.to_string()),
                cell(|l| format!("{:.2} MB", f64_of(l.memory_bytes) / 1e6)),
                cell(|l| format!("{:.0} B", l.bytes_per_name)),
                rate(r),
                cmds(r),
                redis_cpu(r),
                client_cpu(r),
                r.errors.to_string(),
            ]
        });
        format!(
            "names: {} distinct names locked and released once each, 4 tasks, one client{}\n{}",
            fmt_rate(float(u64::from(report.settings.names))),
            if rows.iter().any(|r| r.left.is_some_and(|l| !l.emptied)) {
                " (a shared server: other clients' keys count too)"
            } else {
                ", on an emptied server"
            },
            table
        )
    }

    fn legend(&self) -> Legend {
        &[COST, &[&ACQ_S, &CMDS_ACQ, &PER_NAME]]
    }
}

/// A byte count as a float (far below 2^53).
fn f64_of(v: i64) -> f64 {
    #[allow(
        clippy::cast_precision_loss,
        reason = "byte counts of a test server stay far below 2^53"
    )]
    let f = v as f64;
    f
}

/// `used_memory` and `DBSIZE` of server 1.
async fn memory(env: &mut Env<'_>) -> anyhow::Result<(i64, i64)> {
    let info = stats::info(&mut env.stats, "memory").await?;
    let used = info
        .lines()
        .find_map(|l| l.trim().strip_prefix("used_memory:"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let keys: i64 = redis::cmd("DBSIZE")
        .query_async(&mut env.stats)
        .await
        .context("DBSIZE")?;
    Ok((used, keys))
}

/// Lock and release `--names` names once each over [`TASKS`] tasks of one
/// client, then read what is left.
async fn names(env: &mut Env<'_>, c: &dyn Contender) -> anyhow::Result<RunResult> {
    let n = u64::from(env.args.names);
    let clients = env.connect(c, 1).await?;
    let emptied = env.embedded;
    if emptied {
        // The bench's own server: start each contender from nothing, so
        // that what is left is its own (the fencing counters of another
        // contender's names would be shared otherwise).
        let () = redis::cmd("FLUSHALL")
            .arg("SYNC")
            .query_async(&mut env.stats)
            .await
            .context("FLUSHALL")?;
    }
    let (mem0, keys0) = memory(env).await?;
    let before = env.snapshot().await?;
    let bar = env.progress.start(
        &format!("names · {}", c.kind().name()),
        Names.planned(env.args),
    );
    let start = Instant::now();
    let deadline = start + Names.planned(env.args) * 20;
    let mut set = JoinSet::new();
    for t in 0..TASKS {
        let client = clients[0].clone();
        let prefix = env.name(ScenarioKind::Names, c, t);
        set.spawn(async move {
            let mut tally = Tally::default();
            for i in (t..n).step_by(4) {
                let h = client.handle(&format!("{prefix}:{i}"));
                let Some(held) = acquire_bounded(h.acquire(), deadline, &mut tally).await? else {
                    continue;
                };
                match held.release().await {
                    Ok(()) => tally.ok(),
                    Err(e) => tally.error(e)?,
                }
            }
            Ok(tally)
        });
    }
    let workers = join_all(set).await;
    let elapsed = start.elapsed();
    let after = env.snapshot().await?;
    shutdown(&clients).await;
    let (mem1, keys1) = memory(env).await?;
    let mut tally = Tally::default();
    for t in &workers? {
        tally.merge(t);
    }
    let mut cmds = env.commands(c, &before, &after, 0);
    cmds.per_acquisitions(tally.acquisitions);
    let memory_bytes = mem1 - mem0;
    let left = Left {
        names: n,
        keys: keys1 - keys0,
        memory_bytes,
        bytes_per_name: f64_of(memory_bytes) / float(n.max(1)),
        emptied,
    };
    let rate = float(tally.acquisitions) / elapsed.as_secs_f64();
    bar.finish(format!(
        "{} keys and {:.0} B a name left",
        left.keys, left.bytes_per_name
    ));
    Ok(RunResult {
        acquisitions_per_s: Some(rate),
        left: Some(left),
        ..RunResult::of(ScenarioKind::Names, c.kind(), (4, 1), elapsed, tally, cmds)
    })
}
