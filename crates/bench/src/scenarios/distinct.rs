//! The runs over distinct names: `--tasks` tasks on one client, each
//! locking and unlocking names no other task uses (the uncontended and
//! multi scenarios; the topology scenario's throughput rows use its
//! worker, [`lock_unlock`]).

use std::sync::Arc;

use anyhow::anyhow;
use hdrhistogram::Histogram;
use tokio::time::Instant;

use crate::contender::{Contender, LockHandle};
use crate::model::{float, Commands, ContenderKind, RunResult, ScenarioKind, Tally};
use crate::scenarios::Scenario;
use crate::scenarios::{acquire_bounded, lat_summary, Env};
use crate::stats::{histogram, record, summarize};
use crate::table::fmt_rate;

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
        contender: ContenderKind,
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
    scenario: &dyn Scenario,
) -> anyhow::Result<RunResult> {
    let args = env.args;
    let clients = env.connect(c, 1).await?;
    let handles: Vec<_> = (0..args.tasks)
        .map(|i| clients[0].handle(&env.name(scenario.kind(), c, i)))
        .collect();
    let label = format!("{} · {}", scenario.name(), c.kind().name());
    let run = env.start_run(scenario, &label).await?;
    let (workers, elapsed, after, (ping_p50, sent)) = env
        .run_workers(run.timing, &clients, handles, |_, h, deadline| {
            lock_unlock(vec![h], deadline)
        })
        .await?;
    let (result, rate) = LockUnlock::merge(&workers)?.result(
        scenario.kind(),
        c.kind(),
        args.tasks,
        elapsed,
        ping_p50,
        env.commands(c, &run.before, &after, sent),
    );
    run.bar.finish(format!(
        "{} acq/s, lock+unlock {}",
        fmt_rate(rate),
        lat_summary(result.acquire_release.as_ref())
    ));
    Ok(result)
}
