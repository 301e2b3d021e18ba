//! The contended scenario, and the `--plot` sweep of it.
//!
//! `--waiters` waiters over `--clients` clients on one name; the sweep runs
//! it at several waiter counts.

use anyhow::Context as _;

use super::cells::{per_work, table, waiters_row, WAITERS_HEADER};
use super::legend::{Legend, COST, REDISSON, THROUGHPUT, WAITERS};
use super::many_waiters::many_waiters;
use crate::contender::Contender;
use crate::model::{plural, BenchArgs, Report, RunResult, SweepPoint};
use crate::scenarios::Env;
use crate::scenarios::{kind_and_run, Rows, Scenario};

/// `--waiters` waiters over `--clients` clients on one name, holding it
/// `--hold`.
#[derive(Debug)]
pub(crate) struct Contended;

impl Scenario for Contended {
    kind_and_run!(Contended => of_the_flags);

    fn rows(&self) -> Rows {
        Rows::WithCeiling
    }

    fn section(&self, report: &Report, rows: &[&RunResult]) -> String {
        let s = &report.settings;
        per_work(report, rows, |work, rows| {
            format!(
                "contended: {} waiters over {} clients on one name, {work}, {:.1} s each\n{}",
                s.waiters,
                s.clients.min(s.waiters),
                s.duration_s,
                table(WAITERS_HEADER, rows, waiters_row)
            )
        })
    }

    fn legend(&self) -> Legend {
        &[THROUGHPUT, COST, WAITERS, &[&REDISSON]]
    }
}

/// The run of the flags: `--waiters` waiters over at most `--clients`
/// clients.
async fn of_the_flags(env: &mut Env<'_>, c: &dyn Contender) -> anyhow::Result<RunResult> {
    let w = env.args.waiters;
    let clients = env.args.clients.min(w);
    contended(env, c, w, clients).await
}

/// W waiters over C clients on one name, each holding it `--hold`.
pub(crate) async fn contended(
    env: &mut Env<'_>,
    c: &dyn Contender,
    waiters: u32,
    clients_n: u32,
) -> anyhow::Result<RunResult> {
    let label = if clients_n > env.args.clients {
        // The --plot sweep's runs with one client per waiter, told apart
        // from those over --clients clients.
        format!(
            "contended×{waiters}, {clients_n} clients · {}",
            c.kind().name()
        )
    } else {
        format!("contended×{waiters} · {}", c.kind().name())
    };
    many_waiters(env, c, &Contended, label, (waiters, clients_n), 1).await
}

/// Runs of the `--plot` sweep per contender: every `--plot-waiters` count,
/// and those above `--clients` a second time with one client per waiter.
pub(crate) fn sweep_runs(args: &BenchArgs) -> usize {
    let own = args.plot_waiters.iter().filter(|&&w| w > args.clients);
    args.plot_waiters.len() + own.count()
}

/// The `--plot` sweep: the contended scenario for each of `contenders` it
/// measures at each `--plot-waiters` count, over at most `--clients`
/// clients, then each count above `--clients` again with one client per
/// waiter; each point is added to `report` as it ends.
pub(crate) async fn sweep(
    env: &mut Env<'_>,
    contenders: &[Box<dyn Contender>],
    report: &mut Report,
) -> anyhow::Result<()> {
    let args = env.args;
    for c in contenders.iter().filter(|c| Contended.measures(c.kind())) {
        // The waiters over at most --clients clients, then one client
        // per waiter; up to --clients waiters the two are the same run.
        let spread = args.plot_waiters.iter().map(|&w| (w, args.clients.min(w)));
        let own = args.plot_waiters.iter().filter(|&&w| w > args.clients);
        for (w, clients) in spread.chain(own.map(|&w| (w, w))) {
            let r = contended(env, c.as_ref(), w, clients)
                .await
                .with_context(|| {
                    format!(
                        "sweep at {w} waiters over {clients} client{} / {}",
                        plural(clients),
                        c.kind().name()
                    )
                })?;
            report.sweep.push(SweepPoint {
                contender: r.contender,
                waiters: w,
                clients: r.clients,
                acquisitions_per_s: r.acquisitions_per_s.unwrap_or(0.0),
                jain_index: r.fairness.as_ref().map_or(1.0, |f| f.jain_index),
                min_max_ratio: r.fairness.as_ref().map_or(1.0, |f| f.min_max_ratio),
                errors: r.errors,
            });
        }
    }
    Ok(())
}
