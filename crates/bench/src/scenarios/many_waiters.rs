//! The many-waiter run: W waiters over C clients on one name (the
//! contended scenario, its `--plot` sweep, and the semaphore scenario).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use hdrhistogram::Histogram;
use tokio::time::Instant;

use crate::contender::{Contender, LockHandle};
use crate::model::{float, RunResult, Tally, Work};
use crate::scenarios::Scenario;
use crate::scenarios::{acquire_bounded, fairness, spread, Env};
use crate::stats::{histogram, record, summarize};
use crate::table::fmt_rate;

/// Watches one name for more holders at once than it allows (`limit`: 1
/// for a lock, the permits for a semaphore).
#[derive(Debug, Clone)]
struct Capacity(Arc<(AtomicU64, AtomicU64)>, u64);

impl Capacity {
    fn new(limit: u64) -> Capacity {
        Capacity(Arc::default(), limit)
    }

    /// A holder got in.
    fn enter(&self) {
        if self.0 .0.fetch_add(1, Ordering::SeqCst) >= self.1 {
            self.0 .1.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A holder is about to give its place back (before the release is
    /// sent).
    fn leave(&self) {
        self.0 .0.fetch_sub(1, Ordering::SeqCst);
    }

    fn violations(&self) -> u64 {
        self.0 .1.load(Ordering::SeqCst)
    }
}

/// What one waiter did: its counts, waits for the lock (ns) and the
/// time it held it.
type Waiter = (Tally, Histogram<u64>, Duration);

/// W waiters over C clients on one name, each taking it (a lock, or one
/// permit of a semaphore: see [`ContenderClient::prepare`]), holding it
/// for the hold of [`Env::work`], giving it back and waiting its think time
/// before the next acquire, for `--duration`, under a progress bar named
/// `label`. More than `limit` holders at once counts as a violation.
///
/// [`ContenderClient::prepare`]: crate::contender::ContenderClient::prepare
pub(crate) async fn many_waiters(
    env: &mut Env<'_>,
    c: &dyn Contender,
    scenario: &dyn Scenario,
    label: String,
    (waiters, clients_n): (u32, u32),
    limit: u64,
) -> anyhow::Result<RunResult> {
    let work = env.work;
    let clients = env.connect(c, clients_n).await?;
    let name = env.name(scenario.kind(), c, waiters);
    clients[0]
        .prepare(&name)
        .await
        .with_context(|| format!("preparing {name}"))?;
    let handles = spread(&clients, waiters, &name);
    let capacity = Capacity::new(limit);
    let run = env.start_run(scenario, &label).await?;
    let (workers, elapsed, after, (ping_p50, sent)) = env
        .run_workers(run.timing, &clients, handles, |_, h, deadline| {
            waiter(h, work, deadline, capacity.clone())
        })
        .await?;
    let Merged {
        tally,
        waits,
        per_worker,
        held_us,
    } = merge(workers)?;
    let mut cmds = env.commands(c, &run.before, &after, sent);
    cmds.per_acquisitions(tally.acquisitions);
    let rate = float(tally.acquisitions) / elapsed.as_secs_f64();
    let fairness = fairness(per_worker, &waits);
    let ceiling = held_us.and_then(|h| env.ceiling(limit, h));
    run.bar.finish(format!(
        "{} acq/s, Jain {:.3}, least/most {:.2}",
        fmt_rate(rate),
        fairness.jain_index,
        fairness.min_max_ratio
    ));
    Ok(RunResult {
        acquisitions_per_s: Some(rate),
        exclusion_violations: capacity.violations(),
        ping_p50_us: ping_p50,
        acquire: summarize(&waits, ping_p50),
        fairness: Some(fairness),
        work: Some(Work { held_us, ..work }),
        ceiling_per_s: ceiling,
        of_ceiling: ceiling.filter(|c| *c > 0.0).map(|c| rate / c),
        ..RunResult::of(
            scenario.kind(),
            c.kind(),
            (waiters, clients_n),
            elapsed,
            tally,
            cmds,
        )
    })
}

/// A waiter on handle `h` until `deadline`: acquire, hold, release,
/// think, again.
async fn waiter(
    h: Arc<dyn LockHandle>,
    work: Work,
    deadline: Instant,
    capacity: Capacity,
) -> anyhow::Result<Waiter> {
    let (hold, think) = (work.hold(), work.think());
    let mut tally = Tally::default();
    let mut waits = histogram();
    let mut held_for = Duration::ZERO;
    while Instant::now() < deadline {
        let t0 = Instant::now();
        let Some(held) = acquire_bounded(h.acquire(), deadline, &mut tally).await? else {
            continue;
        };
        record(&mut waits, t0.elapsed());
        capacity.enter();
        let h0 = Instant::now();
        if !hold.is_zero() {
            tokio::time::sleep(hold).await;
        }
        held_for += h0.elapsed();
        capacity.leave();
        match held.release().await {
            Ok(()) => tally.ok(),
            Err(e) => tally.error(e)?,
        }
        if !think.is_zero() {
            tokio::time::sleep(think).await;
        }
    }
    Ok((tally, waits, held_for))
}

/// Every waiter's figures together.
#[derive(Debug)]
struct Merged {
    tally: Tally,
    /// Every wait for the lock, ns.
    waits: Histogram<u64>,
    /// Acquisitions per waiter, in waiter order.
    per_worker: Vec<u64>,
    /// The mean hold, µs (`None` without acquisitions).
    held_us: Option<f64>,
}

/// Every waiter's figures together, `workers` in waiter order (as
/// [`Env::run_workers`] returns them).
fn merge(workers: Vec<Waiter>) -> anyhow::Result<Merged> {
    let mut tally = Tally::default();
    let mut waits = histogram();
    let mut per_worker = Vec::new();
    let mut held_for = Duration::ZERO;
    for (t, w, held) in &workers {
        tally.merge(t);
        per_worker.push(t.acquisitions);
        waits.add(w).map_err(|e| anyhow!("{e}"))?;
        held_for += *held;
    }
    let held_us =
        (tally.acquisitions > 0).then(|| held_for.as_secs_f64() * 1e6 / float(tally.acquisitions));
    Ok(Merged {
        tally,
        waits,
        per_worker,
        held_us,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_counts_holders_beyond_the_limit() {
        let c = Capacity::new(2);
        c.enter();
        c.enter();
        assert_eq!(c.violations(), 0, "two of two");
        c.enter();
        assert_eq!(c.violations(), 1, "a third");
        c.leave();
        c.leave();
        c.enter();
        assert_eq!(c.violations(), 1, "two again");
        let lock = Capacity::new(1);
        lock.enter();
        lock.enter();
        assert_eq!(lock.violations(), 1, "two holders of a lock");
    }
}
