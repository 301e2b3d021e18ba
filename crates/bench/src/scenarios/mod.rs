//! The scenarios, one file each behind the [`Scenario`] trait (defined
//! with the machinery they share in `scenario.rs`), the runs several
//! of them make (`distinct`, `many_waiters`, `handoff`'s rounds), and the
//! registry of them ([`all`], [`get`]). Only the top of the bench (`lib`,
//! `plan`, `output`) looks scenarios up here; everything below is handed
//! the `&dyn Scenario` it needs.
//!
//! A scenario says what it is called, which contenders it measures, how
//! long its runs are planned to take, how it runs (one [`RunResult`] per
//! contender, or its own rows), its section of the printed table and the
//! legend entries of the columns it shows. A new scenario is a new file
//! here and one line in [`get`], besides its variant of [`ScenarioKind`]
//! (which clap and serde need; the tests check [`ScenarioKind::ALL`] lists
//! every variant and that the names agree).

use crate::model::ScenarioKind;

mod scenario;
pub(crate) use scenario::{
    acquire_bounded, commands, commands_named, fairness, general, join_all, kind_and_run,
    lat_summary, shutdown, spawn_each, spread, Env, Exclusion, Rows, Scenario, EVENT_JITTER,
    FLOOR_RUN, HANG,
};

mod cells;
pub(crate) mod contended;
pub(crate) mod distinct;
pub(crate) mod handoff;
mod held_names;
mod idle;
pub(crate) mod legend;
mod many_waiters;
mod multi;
mod names;
mod read_mostly;
mod semaphore;
mod topology;
mod uncontended;

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
        ScenarioKind::HeldNames => &held_names::HeldNames,
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
