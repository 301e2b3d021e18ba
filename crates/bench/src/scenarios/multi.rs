//! The multi scenario: locks over many keys or servers.
//!
//! A `MultiLock`, deadbolt's `Redlock` and rslock over 3 servers beside a
//! single `Lock`.

use super::cells::{p50, p50_p99_max, p99, push_line, rate, skipped_in, tail_table, times, Versus};
use super::distinct::distinct_names;
use super::legend::{entries, Legend, COST, LOCK_UNLOCK, THROUGHPUT};
use crate::model::{ContenderKind, Report, RunResult, MULTI_PARTS, REDLOCK_SERVERS};
use crate::scenarios::{kind_and_run, Scenario};

/// `--tasks` tasks lock and unlock distinct names for `--duration`, as in
/// the uncontended scenario, each name a lock over many keys or servers.
#[derive(Debug)]
pub(crate) struct Multi;

entries! {
    /// The lock+unlock p50 over the `Lock`'s.
    P50_OVER_LOCK = 70, "p50 / lock", "the lock+unlock p50 over the single Lock's in the same \
        table; lower is better";

    /// deadbolt's `Redlock` over rslock's.
    REDLOCK_OVER_RSLOCK = 80, "redlock / rslock-3", "deadbolt's Redlock's figure over rslock's \
        on the same servers: above 1× for acq/s, below 1× for latencies and cmds/acq is \
        deadbolt's ahead";
}

impl Scenario for Multi {
    kind_and_run!(Multi => distinct_names, &Multi);

    fn measures(&self, contender: ContenderKind) -> bool {
        use ContenderKind::{Lock, Multi, Redlock, Rslock3};
        matches!(contender, Lock | Multi | Redlock | Rslock3)
    }

    fn counts_every_server(&self) -> bool {
        true
    }

    fn section(&self, report: &Report, rows: &[&RunResult]) -> String {
        let s = &report.settings;
        let redis = &report.redis;
        let head = ["acq/s", "lock+unlock p50", "p99", "max", "p50 / lock"];
        let lock_p50 = rows
            .iter()
            .find(|r| r.contender == ContenderKind::Lock)
            .and_then(|r| r.acquire_release.map(|l| l.p50_us));
        let table = tail_table(&head, "cmds/acq", rows, |r| {
            let over_lock = times(r.acquire_release.map(|l| l.p50_us), lock_p50);
            std::iter::once(rate(r))
                .chain(p50_p99_max(r.acquire_release))
                .chain([over_lock])
                .collect()
        });
        let mut out = format!(
            "multi: {} tasks on distinct names, one client, {:.1} s each\n  lock: one Lock, \
             multi: a MultiLock over {MULTI_PARTS} names, both on server 1; redlock, rslock-3: \
             one name on {REDLOCK_SERVERS} servers{}\n{table}",
            s.tasks,
            s.duration_s,
            if redis.redlock_urls.is_empty() {
                String::new()
            } else {
                format!(" ({}, {})", redis.url, redis.redlock_urls.join(", "))
            },
        );
        push_line(&mut out, redlock_over_rslock(rows));
        out.push_str(&skipped_in(report, self));
        out
    }

    fn legend(&self) -> Legend {
        &[
            THROUGHPUT,
            COST,
            &[&LOCK_UNLOCK, &P50_OVER_LOCK, &REDLOCK_OVER_RSLOCK],
        ]
    }

    fn notes_own_skipped(&self) -> bool {
        true
    }
}

/// The multi summary: deadbolt's `Redlock` over rslock on the same servers,
/// when both ran ("redlock / rslock-3: lock+unlock p50 0.80×, p99 0.50×;
/// 1.25× the acq/s, cmds/acq 1.00×").
fn redlock_over_rslock(rows: &[&RunResult]) -> Option<String> {
    let v = Versus::find(rows, ContenderKind::Redlock, ContenderKind::Rslock3)?;
    let total = |r: &RunResult| r.acquire_release;
    Some(format!(
        "redlock / rslock-3: lock+unlock p50 {}, p99 {}; {} the acq/s, cmds/acq {}",
        v.lat(total, p50),
        v.lat(total, p99),
        v.rate(),
        v.cmds(),
    ))
}
