//! The printed table of saved reports, byte for byte.
//!
//! `data/report-*.json` are reports of real runs (`report-all`: every
//! scenario but topology with `--plot`, edited to show the notes: an error,
//! exclusion violations, skipped contenders, an interrupted run;
//! `report-cluster`: `--topology cluster`); `data/report-*.txt` are the
//! tables the bench printed for them before its scenarios moved behind the
//! `Scenario` trait, as changed since (the cost and ceiling columns, the
//! service rows). Any change to the table shows here; after a deliberate
//! one, `DEADBOLT_BLESS=1 cargo test -p deadbolt-bench --test table` writes
//! the new tables, to be read over before they are committed.

use deadbolt_bench::Report;

fn table_of(json: &str) -> String {
    let report: Report = serde_json::from_str(json).expect("a saved report");
    report.table()
}

fn check(json: &str, txt: &str, path: &str) {
    let table = table_of(json);
    if std::env::var_os("DEADBOLT_BLESS").is_some() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
        std::fs::write(&path, &table).expect("writing the blessed table");
        return;
    }
    assert_eq!(table, txt);
}

#[test]
fn every_scenario_prints_as_before() {
    check(
        include_str!("data/report-all.json"),
        include_str!("data/report-all.txt"),
        "tests/data/report-all.txt",
    );
}

#[test]
fn the_topology_scenario_on_a_cluster_prints_as_before() {
    check(
        include_str!("data/report-cluster.json"),
        include_str!("data/report-cluster.txt"),
        "tests/data/report-cluster.txt",
    );
}
