//! The semaphore scenario: deadbolt's `Semaphore` beside a polling one.
//!
//! `--waiters` waiters taking one of `--permits` permits each; the polling
//! semaphore is a ZSET of holders.

use futures::future::BoxFuture;

use super::cells::{per_work, times, waiters_row, WAITERS_HEADER};
use super::legend::{
    Entry, ACQ_S, CEILING, CLIENT_CPU, CMDS_ACQ, JAIN, LEAST_MOST, LONGEST_WAIT, OF_CEILING,
    PING_P50, REDIS_CPU, X_PING,
};
use super::many_waiters::many_waiters;
use crate::contender::Contender;
use crate::model::{
    BenchArgs, ContenderKind, Latency, Report, RunResult, ScenarioKind, Settings, Work,
};
use crate::scenario::Env;
use crate::scenario::Scenario;
use crate::table::Table;

/// A semaphore of `--permits` permits, `--waiters` waiters over `--clients`
/// clients each taking one, holding it `--hold` and giving it back.
#[derive(Debug)]
pub(crate) struct Semaphore;

/// deadbolt's `Semaphore` over the polling one.
const SEM_OVER_POLL: Entry = Entry {
    rank: 150,
    term: "sem / sem-poll",
    text: "deadbolt's Semaphore's figure over the polling one's in the same run: above 1× for \
           acq/s, below 1× for latencies and cmds/acq is the Semaphore ahead",
};

impl Scenario for Semaphore {
    fn kind(&self) -> ScenarioKind {
        ScenarioKind::Semaphore
    }

    fn measures(&self, contender: ContenderKind) -> bool {
        matches!(contender, ContenderKind::Sem | ContenderKind::SemPoll)
    }

    fn run_one<'a>(
        &'a self,
        env: &'a mut Env<'_>,
        c: &'a dyn Contender,
    ) -> BoxFuture<'a, anyhow::Result<RunResult>> {
        let w = env.args.waiters;
        let permits = env.args.permits;
        let clients = env.args.clients.min(w);
        let label = format!("semaphore×{w}/{permits} · {}", c.kind().name());
        Box::pin(many_waiters(
            env,
            c,
            self,
            label,
            (w, clients),
            u64::from(permits),
        ))
    }

    fn workloads(&self, args: &BenchArgs) -> Vec<Work> {
        Work::both(args)
    }

    fn shows_ceiling(&self) -> bool {
        true
    }

    fn section(&self, report: &Report, rows: &[&RunResult]) -> String {
        let s = &report.settings;
        per_work(report, rows, |work, rows| {
            let mut table = Table::new(WAITERS_HEADER);
            for r in rows {
                table.row(waiters_row(r));
            }
            let mut out = format!(
                "semaphore: {} permit{}, {} waiters over {} clients taking one each, {work}, \
                 {:.1} s each\n{}",
                s.permits,
                if s.permits == 1 { "" } else { "s" },
                s.waiters,
                s.clients.min(s.waiters),
                s.duration_s,
                table.render()
            );
            if let Some(line) = sem_over_poll(rows) {
                out.push_str(&line);
                out.push('\n');
            }
            out
        })
    }

    fn legend(&self) -> &'static [&'static Entry] {
        &[
            &X_PING,
            &ACQ_S,
            &LONGEST_WAIT,
            &JAIN,
            &LEAST_MOST,
            &CMDS_ACQ,
            &REDIS_CPU,
            &CLIENT_CPU,
            &CEILING,
            &OF_CEILING,
            &SEM_OVER_POLL,
            &PING_P50,
        ]
    }

    fn violation(&self, settings: &Settings) -> String {
        format!("more than {} holders seen at once", settings.permits)
    }
}

/// The semaphore summary: deadbolt's `Semaphore` over the polling one, when
/// both ran ("sem / sem-poll: 3.10× the acq/s; acquire p50 0.20×, p99
/// 0.05×, cmds/acq 0.40×").
fn sem_over_poll(rows: &[&RunResult]) -> Option<String> {
    let find = |kind| rows.iter().find(|r| r.contender == kind);
    let (sem, poll) = (find(ContenderKind::Sem)?, find(ContenderKind::SemPoll)?);
    let lat = |r: &RunResult, pick: fn(&Latency) -> f64| r.acquire.as_ref().map(pick);
    Some(format!(
        "sem / sem-poll: {} the acq/s; acquire p50 {}, p99 {}, cmds/acq {}",
        times(sem.acquisitions_per_s, poll.acquisitions_per_s),
        times(lat(sem, |l| l.p50_us), lat(poll, |l| l.p50_us)),
        times(lat(sem, |l| l.p99_us), lat(poll, |l| l.p99_us)),
        times(sem.commands.per_acquisition, poll.commands.per_acquisition),
    ))
}
