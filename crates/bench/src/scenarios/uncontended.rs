//! The uncontended scenario: distinct names, one client.
//!
//! `--tasks` tasks lock and unlock names no other task uses. Besides the
//! general contenders it measures the `Lock` with one write under each
//! hold, plain (`lock-incr`) and guarded (`lock-guarded`): the price of the
//! guarded write's check.

use futures::future::BoxFuture;

use super::cells::{lat, max, p50, p99, rate, tail, COST_HEADER};
use super::distinct::distinct_names;
use super::legend::{
    Entry, ACQ_S, CLIENT_CPU, CMDS_ACQ, LOCK_GUARDED, LOCK_INCR, LOCK_UNLOCK, PING_P50, REDISSON,
    REDIS_CPU, X_PING,
};
use crate::contender::Contender;
use crate::model::{ContenderKind, Report, RunResult, ScenarioKind};
use crate::scenario::Env;
use crate::scenario::Scenario;
use crate::table::Table;

/// `--tasks` tasks lock and unlock distinct names for `--duration`.
#[derive(Debug)]
pub(crate) struct Uncontended;

impl Scenario for Uncontended {
    fn kind(&self) -> ScenarioKind {
        ScenarioKind::Uncontended
    }

    /// The general contenders, and the `Lock` with a write under each hold.
    fn measures(&self, contender: ContenderKind) -> bool {
        use ContenderKind::{LockGuarded, LockIncr};
        crate::scenario::general(contender) || matches!(contender, LockIncr | LockGuarded)
    }

    fn run_one<'a>(
        &'a self,
        env: &'a mut Env<'_>,
        c: &'a dyn Contender,
    ) -> BoxFuture<'a, anyhow::Result<RunResult>> {
        Box::pin(distinct_names(env, c, self))
    }

    fn section(&self, report: &Report, rows: &[&RunResult]) -> String {
        let s = &report.settings;
        let mut table = Table::new(&[
            "contender",
            "acq/s",
            "acquire p50",
            "p99",
            "max",
            "lock+unlock p50",
            "p99",
            "cmds/acq",
            COST_HEADER[0],
            COST_HEADER[1],
            "PING p50",
            "errors",
        ]);
        for r in rows {
            table.row(
                vec![
                    r.contender.name().to_string(),
                    rate(r),
                    lat(r.acquire, p50),
                    lat(r.acquire, p99),
                    lat(r.acquire, max),
                    lat(r.acquire_release, p50),
                    lat(r.acquire_release, p99),
                ]
                .into_iter()
                .chain(tail(r))
                .collect(),
            );
        }
        format!(
            "uncontended: {} tasks on distinct names, one client, {:.1} s each\n{}",
            s.tasks,
            s.duration_s,
            table.render()
        )
    }

    fn legend(&self) -> &'static [&'static Entry] {
        &[
            &X_PING,
            &REDISSON,
            &LOCK_INCR,
            &LOCK_GUARDED,
            &ACQ_S,
            &CMDS_ACQ,
            &REDIS_CPU,
            &CLIENT_CPU,
            &LOCK_UNLOCK,
            &PING_P50,
        ]
    }
}
