//! The uncontended scenario: distinct names, one client.
//!
//! `--tasks` tasks lock and unlock names no other task uses. Besides the
//! general contenders it measures the `Lock` with one write under each
//! hold, plain (`lock-incr`) and guarded (`lock-guarded`): the price of the
//! guarded write's check.

use super::cells::{lat, p50, p50_p99_max, p99, rate, tail_table};
use super::distinct::distinct_names;
use super::legend::{Legend, COST, LOCK_GUARDED, LOCK_INCR, LOCK_UNLOCK, REDISSON, THROUGHPUT};
use crate::model::{ContenderKind, Report, RunResult};
use crate::scenarios::{kind_and_run, Scenario};

/// `--tasks` tasks lock and unlock distinct names for `--duration`.
#[derive(Debug)]
pub(crate) struct Uncontended;

impl Scenario for Uncontended {
    kind_and_run!(Uncontended => distinct_names, &Uncontended);

    /// The general contenders, and the `Lock` with a write under each hold.
    fn measures(&self, contender: ContenderKind) -> bool {
        use ContenderKind::{LockGuarded, LockIncr};
        crate::scenarios::general(contender) || matches!(contender, LockIncr | LockGuarded)
    }

    fn section(&self, report: &Report, rows: &[&RunResult]) -> String {
        let s = &report.settings;
        let head = [
            "acq/s",
            "acquire p50",
            "p99",
            "max",
            "lock+unlock p50",
            "p99",
        ];
        let table = tail_table(&head, "cmds/acq", rows, |r| {
            let total = [lat(r.acquire_release, p50), lat(r.acquire_release, p99)];
            std::iter::once(rate(r))
                .chain(p50_p99_max(r.acquire))
                .chain(total)
                .collect()
        });
        format!(
            "uncontended: {} tasks on distinct names, one client, {:.1} s each\n{table}",
            s.tasks, s.duration_s,
        )
    }

    fn legend(&self) -> Legend {
        &[
            THROUGHPUT,
            COST,
            &[&REDISSON, &LOCK_INCR, &LOCK_GUARDED, &LOCK_UNLOCK],
        ]
    }
}
