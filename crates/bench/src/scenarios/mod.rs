//! The scenarios: the [`Scenario`] trait and the registry of them.
//!
//! One file each behind the trait; the rest of the bench iterates over the
//! registry ([`all`], [`get`]).
//!
//! A scenario says what it is called, which contenders it measures, how
//! long its runs are planned to take, how it runs (one [`RunResult`] per
//! contender, or its own rows), its section of the printed table and the
//! legend entries of the columns it shows. A new scenario is a new file
//! here and one line in [`get`], besides its variant of [`ScenarioKind`]
//! (which clap and serde need; the tests check [`ScenarioKind::ALL`] lists
//! every variant and that the names agree).

use std::time::Duration;

use anyhow::Context as _;
use futures::future::BoxFuture;

use crate::args::{BenchArgs, ContenderKind, ScenarioKind};
use crate::contender::Contender;
use crate::report::{Report, RunResult, Settings, Work};
use crate::scenario::Env;
use crate::stats;
use crate::Topology;

pub(crate) mod cells;
pub(crate) mod contended;
mod handoff;
mod idle;
pub(crate) mod legend;
mod multi;
mod names;
mod read_mostly;
mod semaphore;
mod topology;
mod uncontended;

pub(crate) use legend::Entry;

/// One scenario of the bench: how it runs and how it is shown.
pub(crate) trait Scenario: Send + Sync {
    /// Which scenario this is (its value in the JSON report).
    fn kind(&self) -> ScenarioKind;

    /// The name used on the command line, in the JSON report and in the
    /// table.
    fn name(&self) -> &'static str;

    /// Whether this scenario measures `contender`. By default the lock
    /// contenders that take part in every general scenario
    /// ([`general`]).
    fn measures(&self, contender: ContenderKind) -> bool {
        general(contender)
    }

    /// Whether it runs when no `--scenario` is given, with `--topology
    /// topology`. By default always.
    fn in_default_selection(&self, topology: Topology) -> bool {
        let _ = topology;
        true
    }

    /// Whether it measures the `--topology` deployment (which is then
    /// found, or started, before the first run).
    fn uses_topology(&self) -> bool {
        false
    }

    /// Whether its commands are counted on every server of the run (the
    /// Redlock rows' too), not on server 1 only.
    fn counts_every_server(&self) -> bool {
        false
    }

    /// Check the flags for this scenario, once it is selected.
    fn validate(&self, args: &BenchArgs) -> anyhow::Result<()> {
        let _ = args;
        Ok(())
    }

    /// How long one of its runs is planned to take (for progress and its
    /// ETA).
    fn planned(&self, args: &BenchArgs) -> Duration {
        args.duration
    }

    /// The workloads its many-waiter runs go through, one run per
    /// contender each: by default the rows of `--hold` and `--think` alone.
    fn workloads(&self, args: &BenchArgs) -> Vec<Work> {
        vec![Work::flags(args)]
    }

    /// Whether its rows show a ceiling (the bench then measures the
    /// hand-off floor first).
    fn shows_ceiling(&self) -> bool {
        false
    }

    /// Runs it makes per contender it measures.
    fn planned_runs(&self, args: &BenchArgs) -> usize {
        self.workloads(args).len()
    }

    /// Run it for contender `c` with the sizes of the flags.
    ///
    /// Cancel safety: dropping it drops the run's workers and clients;
    /// holds they had end by their contender's own means.
    fn run_one<'a>(
        &'a self,
        env: &'a mut Env<'_>,
        c: &'a dyn Contender,
    ) -> BoxFuture<'a, anyhow::Result<RunResult>>;

    /// Run it for each of `contenders` it measures, in order, once per
    /// workload ([`Scenario::workloads`], set in [`Env::work`]), adding each
    /// result to `report` as it ends (so an interrupted bench keeps the runs
    /// done).
    fn run<'a>(
        &'a self,
        env: &'a mut Env<'_>,
        contenders: &'a [Box<dyn Contender>],
        report: &'a mut Report,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            for work in self.workloads(env.args) {
                env.work = work;
                for c in contenders.iter().filter(|c| self.measures(c.kind())) {
                    let r = self.run_one(env, c.as_ref()).await.with_context(|| {
                        format!(
                            "{} / {} ({})",
                            self.name(),
                            c.kind().name(),
                            work.describe()
                        )
                    })?;
                    report.results.push(r);
                    report.ping = stats::summarize(&env.all_pings, None);
                }
            }
            env.work = Work::flags(env.args);
            Ok(())
        })
    }

    /// Its section of the table: a title, a table of `rows` (its results,
    /// in run order) and any summary lines under it.
    fn section(&self, report: &Report, rows: &[&RunResult]) -> String;

    /// The legend entries of the columns and summaries its section shows.
    fn legend(&self) -> &'static [&'static Entry];

    /// What an exclusion violation of one of its runs means, for the notes
    /// under the table.
    fn violation(&self, settings: &Settings) -> String {
        let _ = settings;
        "mutual exclusion violated".to_string()
    }

    /// Whether its section notes the contenders left out that only it
    /// measures (they then get no note of their own under the table).
    fn notes_own_skipped(&self) -> bool {
        false
    }
}

/// Whether `contender` takes part in every general scenario: not the
/// read-write lock, the semaphores, the `MultiLock`, the Redlocks nor the
/// `Lock` with a write under each hold (`lock-incr`, `lock-guarded`).
pub(crate) fn general(contender: ContenderKind) -> bool {
    use ContenderKind::{LockGuarded, LockIncr, Multi, Redlock, Rslock3, Rw, Sem, SemPoll};
    !matches!(
        contender,
        Rw | Sem | SemPoll | Multi | Redlock | Rslock3 | LockIncr | LockGuarded
    )
}

/// The scenario of `kind`: the one place a [`ScenarioKind`] is matched.
pub(crate) fn get(kind: ScenarioKind) -> &'static dyn Scenario {
    match kind {
        ScenarioKind::Uncontended => &uncontended::Uncontended,
        ScenarioKind::Contended => &contended::Contended,
        ScenarioKind::Handoff => &handoff::Handoff,
        ScenarioKind::Idle => &idle::Idle,
        ScenarioKind::ReadMostly => &read_mostly::ReadMostly,
        ScenarioKind::Semaphore => &semaphore::Semaphore,
        ScenarioKind::Multi => &multi::Multi,
        ScenarioKind::Topology => &topology::TopologyScenario,
        ScenarioKind::Names => &names::Names,
    }
}

/// Every scenario, in the order they run ([`ScenarioKind::ALL`]).
pub(crate) fn all() -> impl Iterator<Item = &'static dyn Scenario> {
    ScenarioKind::ALL.into_iter().map(get)
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum as _;

    use super::*;

    #[test]
    fn the_registry_names_each_scenario_as_clap_and_serde_do() {
        let variants = ScenarioKind::value_variants();
        assert_eq!(variants, ScenarioKind::ALL, "ALL in declaration order");
        for s in all() {
            assert_eq!(get(s.kind()).name(), s.name());
            let clap = s
                .kind()
                .to_possible_value()
                .map(|v| v.get_name().to_string());
            assert_eq!(clap.as_deref(), Some(s.name()));
            let json = serde_json::to_value(s.kind()).ok();
            assert_eq!(json.as_ref().and_then(|v| v.as_str()), Some(s.name()));
        }
    }
}
