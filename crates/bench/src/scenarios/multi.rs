//! The multi scenario: locks over many keys or servers.
//!
//! A `MultiLock`, deadbolt's `Redlock` and rslock over 3 servers beside a
//! single `Lock`.

use futures::future::BoxFuture;

use super::cells::{lat, max, p50, p99, rate, skipped_in, tail, times, COST_HEADER};
use super::distinct::distinct_names;
use super::legend::{Entry, ACQ_S, CLIENT_CPU, CMDS_ACQ, LOCK_UNLOCK, PING_P50, REDIS_CPU, X_PING};
use crate::contender::Contender;
use crate::model::{
    ContenderKind, Latency, Report, RunResult, ScenarioKind, MULTI_PARTS, REDLOCK_SERVERS,
};
use crate::scenario::Env;
use crate::scenario::Scenario;
use crate::table::Table;

/// `--tasks` tasks lock and unlock distinct names for `--duration`, as in
/// the uncontended scenario, each name a lock over many keys or servers.
#[derive(Debug)]
pub(crate) struct Multi;

/// The lock+unlock p50 over the `Lock`'s.
const P50_OVER_LOCK: Entry = Entry {
    rank: 70,
    term: "p50 / lock",
    text: "the lock+unlock p50 over the single Lock's in the same table; lower is better",
};

/// deadbolt's `Redlock` over rslock's.
const REDLOCK_OVER_RSLOCK: Entry = Entry {
    rank: 80,
    term: "redlock / rslock-3",
    text: "deadbolt's Redlock's figure over rslock's on the same servers: above 1× for acq/s, \
           below 1× for latencies and cmds/acq is deadbolt's ahead",
};

impl Scenario for Multi {
    fn kind(&self) -> ScenarioKind {
        ScenarioKind::Multi
    }

    fn measures(&self, contender: ContenderKind) -> bool {
        use ContenderKind::{Lock, Multi, Redlock, Rslock3};
        matches!(contender, Lock | Multi | Redlock | Rslock3)
    }

    fn counts_every_server(&self) -> bool {
        true
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
        let redis = &report.redis;
        let mut table = Table::new(&[
            "contender",
            "acq/s",
            "lock+unlock p50",
            "p99",
            "max",
            "p50 / lock",
            "cmds/acq",
            COST_HEADER[0],
            COST_HEADER[1],
            "PING p50",
            "errors",
        ]);
        let lock_p50 = rows
            .iter()
            .find(|r| r.contender == ContenderKind::Lock)
            .and_then(|r| r.acquire_release.map(|l| l.p50_us));
        for r in rows {
            table.row(
                vec![
                    r.contender.name().to_string(),
                    rate(r),
                    lat(r.acquire_release, p50),
                    lat(r.acquire_release, p99),
                    lat(r.acquire_release, max),
                    times(r.acquire_release.map(|l| l.p50_us), lock_p50),
                ]
                .into_iter()
                .chain(tail(r))
                .collect(),
            );
        }
        let mut out = format!(
            "multi: {} tasks on distinct names, one client, {:.1} s each\n  lock: one Lock, \
             multi: a MultiLock over {MULTI_PARTS} names, both on server 1; redlock, rslock-3: \
             one name on {REDLOCK_SERVERS} servers{}\n{}",
            s.tasks,
            s.duration_s,
            if redis.redlock_urls.is_empty() {
                String::new()
            } else {
                format!(" ({}, {})", redis.url, redis.redlock_urls.join(", "))
            },
            table.render()
        );
        if let Some(line) = redlock_over_rslock(rows) {
            out.push_str(&line);
            out.push('\n');
        }
        out.push_str(&skipped_in(report, self));
        out
    }

    fn legend(&self) -> &'static [&'static Entry] {
        &[
            &X_PING,
            &ACQ_S,
            &CMDS_ACQ,
            &REDIS_CPU,
            &CLIENT_CPU,
            &LOCK_UNLOCK,
            &P50_OVER_LOCK,
            &REDLOCK_OVER_RSLOCK,
            &PING_P50,
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
    let find = |kind| rows.iter().find(|r| r.contender == kind);
    let (red, rs) = (find(ContenderKind::Redlock)?, find(ContenderKind::Rslock3)?);
    let lat = |r: &RunResult, pick: fn(&Latency) -> f64| r.acquire_release.as_ref().map(pick);
    Some(format!(
        "redlock / rslock-3: lock+unlock p50 {}, p99 {}; {} the acq/s, cmds/acq {}",
        times(lat(red, |l| l.p50_us), lat(rs, |l| l.p50_us)),
        times(lat(red, |l| l.p99_us), lat(rs, |l| l.p99_us)),
        times(red.acquisitions_per_s, rs.acquisitions_per_s),
        times(red.commands.per_acquisition, rs.commands.per_acquisition),
    ))
}
