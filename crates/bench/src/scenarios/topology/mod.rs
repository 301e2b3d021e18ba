//! The topology scenario's selection, runs, section and legend.
//!
//! The rows themselves are made in `rows`.

mod rows;

use std::fmt::Write as _;

use anyhow::{bail, Context as _};
use futures::future::BoxFuture;

use super::cells::{cmds, lat, named_table, p50, p50_p99_max, p99, ping, rate};
use super::legend::{entries, Legend, ACQ_S, CMDS_ACQ, HAND_OFF, LOCK_UNLOCK, PING_P50, X_PING};
use crate::contender::Contender;
use crate::model::{
    plural, BenchArgs, ContenderKind, Report, RunResult, ScenarioKind, TopologyMeasure,
    VsStandalone, TOPOLOGY_NAMES_PER_TASK,
};
use crate::scenarios::Env;
use crate::scenarios::Scenario;
use crate::stats;
use deadbolt_core::deployment::Topology;

/// deadbolt's `Lock` on a standalone server beside the `--topology`, in
/// one run.
#[derive(Debug)]
pub(crate) struct TopologyScenario;

entries! {
    /// The deployment of a row.
    WHERE = 160, "where", "the deployment a topology row ran on: standalone is server 1; \
        cluster, 1 master: every name in one master's slots; cluster, N masters: each task's \
        names spread evenly over the masters";

    /// A row's figures over the standalone row's.
    VS_STANDALONE = 170, "vs standalone", "the row's figure over the standalone row's in the \
        same run: above 1× for acq/s, below 1× for latencies is the topology ahead";
}

impl Scenario for TopologyScenario {
    fn kind(&self) -> ScenarioKind {
        ScenarioKind::Topology
    }

    fn measures(&self, contender: ContenderKind) -> bool {
        contender == ContenderKind::Lock
    }

    fn in_default_selection(&self, topology: Topology) -> bool {
        topology != Topology::Standalone
    }

    fn uses_topology(&self) -> bool {
        true
    }

    fn planned_runs(&self, args: &BenchArgs) -> usize {
        rows::planned_rows(args.topology)
    }

    fn run_one<'a>(
        &'a self,
        _env: &'a mut Env<'_>,
        _c: &'a dyn Contender,
    ) -> BoxFuture<'a, anyhow::Result<RunResult>> {
        // Several rows, each pushed as it ends: see `run`.
        Box::pin(async { bail!("the topology scenario runs through rows::run") })
    }

    fn run<'a>(
        &'a self,
        env: &'a mut Env<'_>,
        _contenders: &'a [Box<dyn Contender>],
        report: &'a mut Report,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let r = rows::run(env, &mut report.results)
                .await
                .context("topology / lock");
            report.ping = stats::summarize(&env.all_pings, None);
            r
        })
    }

    /// A throughput table and a hand-off table, a row per deployment, each
    /// with its figures over the standalone row's.
    fn section(&self, report: &Report, rows: &[&RunResult]) -> String {
        let s = &report.settings;
        let mut out = format!(
            "topology: deadbolt's Lock on the standalone server (server 1) {}\n",
            beside(report)
        );
        let throughput = of(rows, TopologyMeasure::Throughput);
        if !throughput.is_empty() {
            let _ = write!(
                out,
                "  throughput: {} task{} on one client, each taking and giving back its {} names \
                 in turn, {:.1} s per row\n{}",
                s.tasks,
                plural(s.tasks),
                TOPOLOGY_NAMES_PER_TASK,
                s.duration_s,
                throughput_table(&throughput)
            );
        }
        let handoff = of(rows, TopologyMeasure::Handoff);
        if !handoff.is_empty() {
            let _ = write!(
                out,
                "  hand-off: release → next holder on another client, up to {} rounds or {:.1} s \
                 per row\n{}",
                s.rounds,
                s.duration_s,
                handoff_table(&handoff)
            );
        }
        if report.redis.topology.is_some() {
            out.push_str(
                "a cluster or Sentinel row's PING p50 is to the master of its first name, its \
                 cmds/acq over every master\n",
            );
        }
        out
    }

    fn legend(&self) -> Legend {
        &[&[
            &X_PING,
            &ACQ_S,
            &CMDS_ACQ,
            &LOCK_UNLOCK,
            &HAND_OFF,
            &WHERE,
            &VS_STANDALONE,
            &PING_P50,
        ]]
    }
}

/// What the standalone server stands beside, for the section's title.
fn beside(report: &Report) -> String {
    let Some(t) = &report.redis.topology else {
        return "alone (no --topology given)".to_string();
    };
    let n = u32::try_from(t.masters.len()).unwrap_or(u32::MAX);
    let what = match t.topology {
        Topology::Cluster => format!("a Redis Cluster of {n} master{}", plural(n)),
        _ => format!(
            "the master {} ({}) named by {} Sentinel{}",
            t.master_name.as_deref().unwrap_or("?"),
            t.masters.join(", "),
            t.urls.len(),
            if t.urls.len() == 1 { "" } else { "s" }
        ),
    };
    format!(
        "beside {what}, Redis {} ({}{}: {})",
        t.version,
        if t.embedded { "embedded; " } else { "" },
        if t.topology == Topology::Cluster {
            "seeds"
        } else {
            "Sentinels"
        },
        t.urls.join(", ")
    )
}

/// The rows of one measure, in run order.
fn of<'a>(rows: &[&'a RunResult], m: TopologyMeasure) -> Vec<&'a RunResult> {
    rows.iter()
        .copied()
        .filter(|r| r.topology.as_ref().is_some_and(|t| t.measure == m))
        .collect()
}

/// A row's name: where it ran.
fn label(r: &RunResult) -> String {
    r.topology
        .as_ref()
        .map_or_else(|| r.contender.name().to_string(), |t| t.label.clone())
}

/// A row's figure over the standalone row's, or `-`.
fn vs(r: &RunResult, pick: fn(&VsStandalone) -> Option<f64>) -> String {
    r.topology
        .as_ref()
        .and_then(|t| t.vs_standalone.as_ref())
        .and_then(pick)
        .map_or_else(|| "-".to_string(), |x| format!("{x:.2}×"))
}

/// The columns both tables end with.
const COMMON_HEADINGS: [&str; 5] = [
    "p50 vs standalone",
    "p99 vs standalone",
    "cmds/acq",
    "PING p50",
    "errors",
];

/// A row's cells of [`COMMON_HEADINGS`].
fn common(r: &RunResult) -> [String; 5] {
    [
        vs(r, |v| v.p50),
        vs(r, |v| v.p99),
        cmds(r),
        ping(r),
        r.errors.to_string(),
    ]
}

/// The rows of one measure as a table: where each ran, the columns of
/// `head` (a row's `cells`), then [`COMMON_HEADINGS`].
fn measure_table(
    rows: &[&RunResult],
    head: [&str; 4],
    cells: fn(&RunResult) -> [String; 4],
) -> String {
    let header = [&head[..], &COMMON_HEADINGS].concat();
    named_table(("where", label), &header, rows, |r| {
        cells(r).into_iter().chain(common(r)).collect()
    })
}

/// The throughput rows as a table.
fn throughput_table(rows: &[&RunResult]) -> String {
    let head = ["acq/s", "vs standalone", "lock+unlock p50", "p99"];
    measure_table(rows, head, |r| {
        [
            rate(r),
            vs(r, |v| v.acquisitions_per_s),
            lat(r.acquire_release, p50),
            lat(r.acquire_release, p99),
        ]
    })
}

/// The hand-off rows as a table.
fn handoff_table(rows: &[&RunResult]) -> String {
    let head = ["rounds", "hand-off p50", "p99", "max"];
    measure_table(rows, head, |r| {
        let [p50, p99, max] = p50_p99_max(r.handoff);
        [r.rounds.unwrap_or(0).to_string(), p50, p99, max]
    })
}
