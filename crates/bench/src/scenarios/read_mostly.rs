//! The read-mostly scenario: deadbolt's `RwLock` beside its `Lock`.
//!
//! A mix of reads and `--write-ratio` writes on one name.

use std::sync::Arc;

use anyhow::anyhow;
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use tokio::time::Instant;

use super::cells::{lat, p50, p99, per_work, push_line, rate, tail_table, Versus};
use super::legend::{entries, Legend, COST, PING_P50, X_PING};
use crate::contender::{Contender, LockHandle};
use crate::model::{float, ContenderKind, Latency, ReadWrite, Report, RunResult, Tally, Work};
use crate::scenarios::{
    acquire_bounded, fairness, kind_and_run, spread, Env, Exclusion, Rows, Scenario,
};
use crate::stats::{histogram, record, summarize};
use crate::table::{fmt_percent, fmt_rate};

/// Waiter `i` draws reads and writes from a generator seeded with this plus
/// `i`, so every contender gets the same sequences.
const READ_MOSTLY_SEED: u64 = 0x6465_6164_626f_6c74;

/// `--waiters` waiters over `--clients` clients on one name, each operation
/// a write with probability `--write-ratio` and a read otherwise.
#[derive(Debug)]
pub(crate) struct ReadMostly;

entries! {
    /// Reads plus writes per second.
    OPS_S = 110, "ops/s", "reads plus writes per second, all waiters together (reads/s and \
        writes/s split it); higher is better";

    /// Time a read (a write) waited.
    READ_P50 = 120, "read p50", "time a read waited for the lock (write p50: a write); the Lock \
        makes reads wait like writes; lower is better";

    /// Commands per operation.
    CMDS_OP = 130, "cmds/op", "commands the clients sent per read or write (not those inside \
        scripts); lower is better";

    /// The `RwLock`'s figures over the `Lock`'s.
    RW_OVER_LOCK = 140, "rw / lock", "the RwLock's figure over the Lock's in the same run: above \
        1× for ops/s, below 1× for latencies is the RwLock ahead";
}

impl Scenario for ReadMostly {
    kind_and_run!(ReadMostly => read_mostly);

    fn measures(&self, contender: ContenderKind) -> bool {
        matches!(contender, ContenderKind::Lock | ContenderKind::Rw)
    }

    fn rows(&self) -> Rows {
        Rows::WithService
    }

    fn section(&self, report: &Report, rows: &[&RunResult]) -> String {
        let s = &report.settings;
        per_work(report, rows, |work, rows| {
            let head = [
                "ops/s",
                "reads/s",
                "writes/s",
                "read p50",
                "p99",
                "write p50",
                "p99",
            ];
            let table = tail_table(&head, "cmds/op", rows, |r| {
                let per_s = |pick: fn(&ReadWrite) -> f64| {
                    r.read_write
                        .as_ref()
                        .map_or_else(|| "-".into(), |m| fmt_rate(pick(m)))
                };
                vec![
                    rate(r),
                    per_s(|m| m.reads_per_s),
                    per_s(|m| m.writes_per_s),
                    lat(read_acquire(r), p50),
                    lat(read_acquire(r), p99),
                    lat(write_acquire(r), p50),
                    lat(write_acquire(r), p99),
                ]
            });
            let mut out = format!(
                "read-mostly: {} waiters over {} clients on one name, {} writes, {work}, {:.1} s \
             each\n{table}",
                s.waiters,
                s.clients.min(s.waiters),
                fmt_percent(s.write_ratio),
                s.duration_s,
            );
            push_line(&mut out, rw_over_lock(rows));
            out
        })
    }

    fn legend(&self) -> Legend {
        &[
            COST,
            &[
                &X_PING,
                &OPS_S,
                &READ_P50,
                &CMDS_OP,
                &RW_OVER_LOCK,
                &PING_P50,
            ],
        ]
    }
}

/// A row's reads' waits, when it has any.
fn read_acquire(r: &RunResult) -> Option<Latency> {
    r.read_write.as_ref().and_then(|m| m.read_acquire)
}

/// A row's writes' waits, when it has any.
fn write_acquire(r: &RunResult) -> Option<Latency> {
    r.read_write.as_ref().and_then(|m| m.write_acquire)
}

/// The read-mostly summary: the `RwLock`'s figures over the `Lock`'s, when
/// both ran ("rw / lock: 2.41× the ops/s; read p50 0.38×, write p50
/// 1.20×").
fn rw_over_lock(rows: &[&RunResult]) -> Option<String> {
    let v = Versus::find(rows, ContenderKind::Rw, ContenderKind::Lock)?;
    Some(format!(
        "rw / lock: {} the ops/s; read p50 {}, write p50 {}",
        v.rate(),
        v.lat(read_acquire, p50),
        v.lat(write_acquire, p50),
    ))
}

/// One read-mostly worker's results.
#[derive(Debug)]
struct MixWorker {
    tally: Tally,
    reads: u64,
    writes: u64,
    read_waits: Histogram<u64>,
    write_waits: Histogram<u64>,
}

/// What every read-mostly worker does: hold and think, the share of
/// writes, and whether reads may hold together.
#[derive(Debug, Clone, Copy)]
struct Mix {
    work: Work,
    write_ratio: f64,
    shared_reads: bool,
}

/// W waiters over C clients on one name, each operation a write with
/// probability `--write-ratio` and else a read, holding it `--hold`. The
/// read-write lock reads on its read side; every other contender takes its
/// one lock for both. Waiter `i` draws from a generator seeded with
/// [`READ_MOSTLY_SEED`] + `i`.
async fn read_mostly(env: &mut Env<'_>, c: &dyn Contender) -> anyhow::Result<RunResult> {
    let args = env.args;
    let work = env.work;
    let mix = Mix {
        work,
        write_ratio: args.write_ratio,
        shared_reads: c.shared_reads(),
    };
    let waiters = args.waiters;
    let clients_n = args.clients.min(waiters);
    let clients = env.connect(c, clients_n).await?;
    let name = env.name(ReadMostly.kind(), c, waiters);
    let handles = spread(&clients, waiters, &name);
    let exclusion = Exclusion::default();
    let label = format!("read-mostly · {}", c.kind().name());
    let run = env.start_run(&ReadMostly, &label).await?;
    let (workers, elapsed, after, (ping_p50, sent)) = env
        .run_workers(run.timing, &clients, handles, |index, h, deadline| {
            mix_worker(index, h, mix, deadline, exclusion.clone())
        })
        .await?;
    let all = MixWorkers::merge(workers)?;
    let mut cmds = env.commands(c, &run.before, &after, sent);
    cmds.per_acquisitions(all.tally.acquisitions);
    let secs = elapsed.as_secs_f64();
    let rate = float(all.tally.acquisitions) / secs;
    let read_write = ReadWrite {
        reads: all.reads,
        writes: all.writes,
        reads_per_s: float(all.reads) / secs,
        writes_per_s: float(all.writes) / secs,
        read_acquire: summarize(&all.read_waits, ping_p50),
        write_acquire: summarize(&all.write_waits, ping_p50),
    };
    let fairness = fairness(all.per_worker, &all.waits);
    run.bar.finish(format!(
        "{} ops/s ({} reads/s, {} writes/s)",
        fmt_rate(rate),
        fmt_rate(read_write.reads_per_s),
        fmt_rate(read_write.writes_per_s)
    ));
    Ok(RunResult {
        acquisitions_per_s: Some(rate),
        exclusion_violations: exclusion.violations(),
        ping_p50_us: ping_p50,
        acquire: summarize(&all.waits, ping_p50),
        fairness: Some(fairness),
        read_write: Some(read_write),
        work: Some(work),
        ..RunResult::of(
            ReadMostly.kind(),
            c.kind(),
            (waiters, clients_n),
            elapsed,
            all.tally,
            cmds,
        )
    })
}

/// Worker `index` on handle `h` until `deadline`: a write or a read (as
/// its seeded generator draws), hold, release, think, again.
async fn mix_worker(
    index: usize,
    h: Arc<dyn LockHandle>,
    mix: Mix,
    deadline: Instant,
    exclusion: Exclusion,
) -> anyhow::Result<MixWorker> {
    let (hold, think) = (mix.work.hold(), mix.work.think());
    let seed = READ_MOSTLY_SEED.wrapping_add(u64::try_from(index).unwrap_or(u64::MAX));
    let mut rng = StdRng::seed_from_u64(seed);
    let mut w = MixWorker {
        tally: Tally::default(),
        reads: 0,
        writes: 0,
        read_waits: histogram(),
        write_waits: histogram(),
    };
    while Instant::now() < deadline {
        let write = rng.random_bool(mix.write_ratio);
        let shared = mix.shared_reads && !write;
        let t0 = Instant::now();
        let acquire = if write { h.acquire() } else { h.acquire_read() };
        let Some(held) = acquire_bounded(acquire, deadline, &mut w.tally).await? else {
            continue;
        };
        let waits = if write {
            &mut w.write_waits
        } else {
            &mut w.read_waits
        };
        record(waits, t0.elapsed());
        exclusion.enter_as(shared);
        if !hold.is_zero() {
            tokio::time::sleep(hold).await;
        }
        exclusion.leave_as(shared);
        match held.release().await {
            Ok(()) => {
                w.tally.ok();
                if write {
                    w.writes += 1;
                } else {
                    w.reads += 1;
                }
            }
            Err(e) => w.tally.error(e)?,
        }
        if !think.is_zero() {
            tokio::time::sleep(think).await;
        }
    }
    Ok(w)
}

/// Every read-mostly worker's figures together.
#[derive(Debug)]
struct MixWorkers {
    tally: Tally,
    reads: u64,
    writes: u64,
    read_waits: Histogram<u64>,
    write_waits: Histogram<u64>,
    /// Reads' and writes' waits together.
    waits: Histogram<u64>,
    /// Operations per worker, in worker order.
    per_worker: Vec<u64>,
}

impl MixWorkers {
    /// Every worker's figures together, `workers` in worker order (as
    /// [`Env::run_workers`] returns them).
    fn merge(workers: Vec<MixWorker>) -> anyhow::Result<MixWorkers> {
        let mut all = MixWorkers {
            tally: Tally::default(),
            reads: 0,
            writes: 0,
            read_waits: histogram(),
            write_waits: histogram(),
            waits: histogram(),
            per_worker: Vec::new(),
        };
        for w in &workers {
            all.tally.merge(&w.tally);
            all.reads += w.reads;
            all.writes += w.writes;
            all.per_worker.push(w.tally.acquisitions);
            for (into, from) in [
                (&mut all.read_waits, &w.read_waits),
                (&mut all.write_waits, &w.write_waits),
            ] {
                into.add(from).map_err(|e| anyhow!("{e}"))?;
            }
        }
        all.waits.add(&all.read_waits).map_err(|e| anyhow!("{e}"))?;
        all.waits
            .add(&all.write_waits)
            .map_err(|e| anyhow!("{e}"))?;
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_contender_gets_the_same_draws() {
        let draws = |i: u64| {
            let mut rng = StdRng::seed_from_u64(READ_MOSTLY_SEED.wrapping_add(i));
            (0..64).map(|_| rng.random_bool(0.1)).collect::<Vec<_>>()
        };
        assert_eq!(draws(3), draws(3));
        assert_ne!(draws(0), draws(1), "each waiter its own sequence");
    }
}
