//! The semaphore scenario: deadbolt's `Semaphore` beside a polling one.
//!
//! `--waiters` waiters taking one of `--permits` permits each; the polling
//! semaphore is a ZSET of holders.

use super::cells::{p50, p99, per_work, push_line, table, waiters_row, Versus, WAITERS_HEADER};
use super::legend::{entries, Legend, COST, THROUGHPUT, WAITERS};
use super::many_waiters::many_waiters;
use crate::contender::Contender;
use crate::model::{ContenderKind, Report, RunResult, Settings};
use crate::scenarios::Env;
use crate::scenarios::{kind_and_run, Rows, Scenario};

/// A semaphore of `--permits` permits, `--waiters` waiters over `--clients`
/// clients each taking one, holding it `--hold` and giving it back.
#[derive(Debug)]
pub(crate) struct Semaphore;

entries! {
    /// deadbolt's `Semaphore` over the polling one.
    SEM_OVER_POLL = 150, "sem / sem-poll", "deadbolt's Semaphore's figure over the polling one's \
        in the same run: above 1× for acq/s, below 1× for latencies and cmds/acq is the \
        Semaphore ahead";
}

impl Scenario for Semaphore {
    kind_and_run!(Semaphore => semaphore);

    fn measures(&self, contender: ContenderKind) -> bool {
        matches!(contender, ContenderKind::Sem | ContenderKind::SemPoll)
    }

    fn rows(&self) -> Rows {
        Rows::WithCeiling
    }

    fn section(&self, report: &Report, rows: &[&RunResult]) -> String {
        let s = &report.settings;
        per_work(report, rows, |work, rows| {
            let mut out = format!(
                "semaphore: {} permit{}, {} waiters over {} clients taking one each, {work}, \
                 {:.1} s each\n{}",
                s.permits,
                if s.permits == 1 { "" } else { "s" },
                s.waiters,
                s.clients.min(s.waiters),
                s.duration_s,
                table(WAITERS_HEADER, rows, waiters_row)
            );
            push_line(&mut out, sem_over_poll(rows));
            out
        })
    }

    fn legend(&self) -> Legend {
        &[THROUGHPUT, COST, WAITERS, &[&SEM_OVER_POLL]]
    }

    fn violation(&self, settings: &Settings) -> String {
        format!("more than {} holders seen at once", settings.permits)
    }
}

/// `--waiters` waiters over at most `--clients` clients, each taking one of
/// `--permits` permits.
async fn semaphore(env: &mut Env<'_>, c: &dyn Contender) -> anyhow::Result<RunResult> {
    let w = env.args.waiters;
    let permits = env.args.permits;
    let clients = env.args.clients.min(w);
    let label = format!("semaphore×{w}/{permits} · {}", c.kind().name());
    many_waiters(env, c, &Semaphore, label, (w, clients), u64::from(permits)).await
}

/// The semaphore summary: deadbolt's `Semaphore` over the polling one, when
/// both ran ("sem / sem-poll: 3.10× the acq/s; acquire p50 0.20×, p99
/// 0.05×, cmds/acq 0.40×").
fn sem_over_poll(rows: &[&RunResult]) -> Option<String> {
    let v = Versus::find(rows, ContenderKind::Sem, ContenderKind::SemPoll)?;
    let acquire = |r: &RunResult| r.acquire;
    Some(format!(
        "sem / sem-poll: {} the acq/s; acquire p50 {}, p99 {}, cmds/acq {}",
        v.rate(),
        v.lat(acquire, p50),
        v.lat(acquire, p99),
        v.cmds(),
    ))
}
