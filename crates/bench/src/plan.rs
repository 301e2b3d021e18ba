//! What a bench runs, worked out before anything starts: the scenarios
//! selected (resolved once from the registry, then passed down as
//! `&dyn Scenario`), the contenders, the checks every selected scenario
//! makes of the flags, and the planned runs for the progress bar. With
//! `output`, the one place below `lib` that consults the registry.

use std::time::Duration;

use anyhow::bail;
use deadbolt_core::deployment::Topology;

use crate::contender::{self, Contender, ContenderOptions};
use crate::model::{
    BenchArgs, ContenderKind, ScenarioKind, Settings, Skipped, Work, REDLOCK_SERVERS,
};
use crate::scenarios;
use crate::scenarios::{Scenario, FLOOR_RUN};

impl ScenarioKind {
    /// Whether this scenario measures `contender`: the read-mostly scenario
    /// compares the read-write lock with the `Lock` only, the semaphore
    /// scenario the two semaphores only, the multi scenario the `MultiLock`
    /// and the two Redlocks with the `Lock`, the topology scenario the `Lock`
    /// alone, the held-names scenario the `Lock` and the `FairLock`, and the
    /// read-write lock, the semaphores, the `MultiLock` and
    /// the Redlocks take part in no other scenario.
    ///
    /// # Examples
    /// ```
    /// use deadbolt_bench::{ContenderKind, ScenarioKind};
    /// assert!(ScenarioKind::ReadMostly.measures(ContenderKind::Rw));
    /// assert!(ScenarioKind::ReadMostly.measures(ContenderKind::Lock));
    /// assert!(!ScenarioKind::ReadMostly.measures(ContenderKind::Fair));
    /// assert!(!ScenarioKind::Contended.measures(ContenderKind::Rw));
    /// assert!(ScenarioKind::Semaphore.measures(ContenderKind::SemPoll));
    /// assert!(!ScenarioKind::Semaphore.measures(ContenderKind::Lock));
    /// assert!(!ScenarioKind::Idle.measures(ContenderKind::Sem));
    /// assert!(ScenarioKind::Multi.measures(ContenderKind::Lock));
    /// assert!(ScenarioKind::Multi.measures(ContenderKind::Rslock3));
    /// assert!(!ScenarioKind::Multi.measures(ContenderKind::Rslock));
    /// assert!(!ScenarioKind::Uncontended.measures(ContenderKind::Redlock));
    /// assert!(ScenarioKind::Uncontended.measures(ContenderKind::LockGuarded));
    /// assert!(!ScenarioKind::Contended.measures(ContenderKind::LockIncr));
    /// assert!(!ScenarioKind::Names.measures(ContenderKind::LockGuarded));
    /// assert!(ScenarioKind::Topology.measures(ContenderKind::Lock));
    /// assert!(!ScenarioKind::Topology.measures(ContenderKind::Fair));
    /// assert!(ScenarioKind::HeldNames.measures(ContenderKind::Fair));
    /// assert!(!ScenarioKind::HeldNames.measures(ContenderKind::RawPoll));
    /// ```
    pub fn measures(self, contender: ContenderKind) -> bool {
        scenarios::get(self).measures(contender)
    }

    /// The contenders of [`ContenderKind::ALL`] this scenario measures, by
    /// name ("lock, rw").
    fn measured_names(self) -> String {
        ContenderKind::ALL
            .into_iter()
            .filter(|c| self.measures(*c))
            .map(ContenderKind::name)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl BenchArgs {
    /// The scenarios to run, in their fixed order, without duplicates: those
    /// of `--scenario`, or by default every one but the held-names scenario
    /// (only when asked for, with any `--topology`) and the topology
    /// scenario, which joins them with a `--topology` other than
    /// `standalone`.
    pub fn selected_scenarios(&self) -> Vec<ScenarioKind> {
        ScenarioKind::ALL
            .into_iter()
            .filter(|s| {
                if self.scenarios.is_empty() {
                    scenarios::get(*s).in_default_selection(self.topology)
                } else {
                    self.scenarios.contains(s)
                }
            })
            .collect()
    }

    /// The selected scenarios that measure at least one of `contenders`.
    ///
    /// A scenario asked for by name that none of them takes part in is an
    /// error ("--scenario read-mostly measures only lock, rw (not fair)"),
    /// and so is a selection with nothing to run; a scenario left to the
    /// default is silently left out.
    pub(crate) fn scenarios_for(
        &self,
        contenders: &[ContenderKind],
    ) -> anyhow::Result<Vec<ScenarioKind>> {
        let mut run = Vec::new();
        for s in self.selected_scenarios() {
            if contenders.iter().any(|c| s.measures(*c)) {
                run.push(s);
            } else if self.scenarios.contains(&s) {
                bail!(
                    "--scenario {} measures only {} (not {})",
                    s.name(),
                    s.measured_names(),
                    contenders
                        .iter()
                        .map(|c| c.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        if run.is_empty() {
            bail!("nothing to run: no contender takes part in the selected scenarios");
        }
        Ok(run)
    }
}

/// The plan of a run, and the contenders left out (each noted only when a
/// selected scenario measures it), after every check that needs no server.
///
/// # Errors
/// As [`bench()`](crate::bench()), for everything checked before anything
/// starts.
pub(crate) fn make(args: &BenchArgs) -> anyhow::Result<(Plan, Vec<Skipped>)> {
    validate(args)?;
    args.check_outputs()?;
    let (mut contenders, mut skipped) = resolve_contenders(args)?;
    let kinds: Vec<ContenderKind> = contenders.iter().map(|c| c.kind()).collect();
    let scenarios: Vec<&'static dyn Scenario> = args
        .scenarios_for(&kinds)?
        .into_iter()
        .map(scenarios::get)
        .collect();
    if args.topology != Topology::Standalone && !scenarios.iter().any(|s| s.uses_topology()) {
        bail!(
            "--topology {} is measured by the {}",
            args.topology.name(),
            if args.scenarios.is_empty() {
                "topology scenario only, which measures the lock contender only: add --contender \
                 lock"
            } else {
                "topology and held-names scenarios only, neither of which is selected: add \
                 --scenario topology or --scenario held-names"
            }
        );
    }
    // A contender no selected scenario measures is not run (nor listed), and
    // one left out is only noted when a selected scenario measures it.
    contenders.retain(|c| scenarios.iter().any(|s| s.measures(c.kind())));
    skipped.retain(|s| scenarios.iter().any(|sc| sc.measures(s.contender)));
    Ok((
        Plan {
            scenarios,
            contenders,
        },
        skipped,
    ))
}

/// Check the flags before anything is started: the sizes and servers
/// ([`BenchArgs`]'s own checks), then what each selected scenario needs.
pub(crate) fn validate(args: &BenchArgs) -> anyhow::Result<()> {
    args.validate_flags()?;
    for s in args.selected_scenarios() {
        scenarios::get(s).validate(args)?;
    }
    Ok(())
}

/// The planned length of every run, in run order: each scenario for each
/// contender it measures, then (with `--plot`) the sweep: each
/// `--plot-waiters` count over at most `--clients` clients, and each count
/// above `--clients` again with one client per waiter.
pub(crate) fn planned_runs(
    args: &BenchArgs,
    scenarios: &[&dyn Scenario],
    contenders: &[ContenderKind],
) -> Vec<Duration> {
    let measured = |s: &dyn Scenario| contenders.iter().filter(|c| s.measures(**c)).count();
    let mut runs = Vec::new();
    if scenarios.iter().any(|s| s.shows_ceiling()) {
        runs.push(FLOOR_RUN);
    }
    for &scenario in scenarios {
        let n = measured(scenario) * scenario.planned_runs(args);
        runs.extend(std::iter::repeat_n(scenario.planned(args), n));
    }
    if args.plot.is_some() {
        runs.extend(std::iter::repeat_n(
            args.duration,
            measured(scenarios::get(ScenarioKind::Contended))
                * scenarios::contended::sweep_runs(args),
        ));
    }
    runs
}

/// The contenders of a run, in run order.
pub(crate) type Contenders = Vec<Box<dyn Contender>>;

/// What a bench runs: each scenario, in order, for each contender it
/// measures.
pub(crate) struct Plan {
    /// The scenarios, each measuring at least one of the contenders,
    /// resolved once from the registry.
    pub(crate) scenarios: Vec<&'static dyn Scenario>,
    /// The contenders, in run order.
    pub(crate) contenders: Contenders,
}

/// The contenders to run, and those left out with the reason. A contender
/// asked for by name that this build lacks is an error.
pub(crate) fn resolve_contenders(args: &BenchArgs) -> anyhow::Result<(Contenders, Vec<Skipped>)> {
    let opts = ContenderOptions {
        namespace: args.namespace.clone(),
        lease: args.lease,
        poll_interval: args.poll_interval,
        permits: args.permits,
        servers: if args.standalone_redis().is_some() {
            1 + args.redlock_redis.len()
        } else {
            REDLOCK_SERVERS
        },
    };
    let mut run = Vec::new();
    let mut skipped = Vec::new();
    for kind in ContenderKind::ALL {
        let asked = args.contenders.contains(&kind);
        if !args.contenders.is_empty() && !asked {
            continue;
        }
        match contender::make(kind, &opts) {
            Ok(c) => run.push(c),
            Err(reason) if asked => {
                bail!("contender {} is not available: {reason}", kind.name())
            }
            Err(reason) => skipped.push(Skipped {
                contender: kind,
                reason,
            }),
        }
    }
    Ok((run, skipped))
}

/// The sizes of the run, for the report.
pub(crate) fn settings(args: &BenchArgs, plan: &Plan) -> Settings {
    Settings {
        scenarios: plan.scenarios.iter().map(|s| s.kind()).collect(),
        contenders: plan.contenders.iter().map(|c| c.kind()).collect(),
        duration_s: args.duration.as_secs_f64(),
        tasks: args.tasks,
        waiters: args.waiters,
        clients: args.clients,
        hold_ms: args.hold.as_secs_f64() * 1e3,
        think_ms: args.think.as_secs_f64() * 1e3,
        names: args.names,
        service: Work::service(args),
        write_ratio: args.write_ratio,
        permits: args.permits,
        rounds: args.rounds,
        idle_waiters: args.idle_waiters,
        idle_s: args.idle_time.as_secs_f64(),
        poll_interval_ms: args.poll_interval.as_secs_f64() * 1e3,
        lease_ms: args.lease.as_secs_f64() * 1e3,
        plot_waiters: if args.plot.is_some() {
            args.plot_waiters.clone()
        } else {
            Vec::new()
        },
        topology: args.topology,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_counts_both_sweeps() {
        let args = |extra: &[&str]| {
            let all = [
                "deadbolt-bench",
                "--scenario",
                "contended",
                "--clients",
                "2",
            ];
            match crate::BenchCli::try_parse_from(all.iter().chain(extra)) {
                Ok(crate::BenchCli { args: b }) => b,
                other => panic!("expected bench arguments, got {other:?}"),
            }
        };
        let kinds = [ContenderKind::Lock, ContenderKind::Fair];
        let scenarios = [scenarios::get(ScenarioKind::Contended)];
        let plain = args(&[]);
        // The hand-off floor, then each contender at --hold and in the
        // service rows.
        assert_eq!(planned_runs(&plain, &scenarios, &kinds).len(), 1 + 2 * 2);
        let alone = args(&["--no-service"]);
        assert_eq!(planned_runs(&alone, &scenarios, &kinds).len(), 1 + 2);
        // 1, 2, 4 and 8 over at most 2 clients, then 4 and 8 over 4 and 8.
        let plot = args(&["--plot", "x.svg", "--plot-waiters", "1,2,4,8"]);
        assert_eq!(
            planned_runs(&plot, &scenarios, &kinds).len(),
            1 + 2 * 2 + 2 * 6
        );
    }
}
