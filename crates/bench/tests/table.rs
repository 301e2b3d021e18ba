//! The printed table of saved reports, byte for byte.
//!
//! `data/report-*.json` are reports of real runs (`report-all`: every
//! scenario but topology with `--plot`, edited to show the notes: an error,
//! exclusion violations, skipped contenders, an interrupted run;
//! `report-cluster`: `--topology cluster`); `data/report-*.txt` are the
//! tables the bench printed for them before its scenarios moved behind the
//! `Scenario` trait. Any change to the table shows here.

use deadbolt_bench::Report;

fn table_of(json: &str) -> String {
    let report: Report = serde_json::from_str(json).expect("a saved report");
    report.table()
}

#[test]
fn every_scenario_prints_as_before() {
    assert_eq!(
        table_of(include_str!("data/report-all.json")),
        include_str!("data/report-all.txt")
    );
}

#[test]
fn the_topology_scenario_on_a_cluster_prints_as_before() {
    assert_eq!(
        table_of(include_str!("data/report-cluster.json")),
        include_str!("data/report-cluster.txt")
    );
}
