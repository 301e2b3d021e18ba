//! The held-names scenario against a bench-started redis-server: off by
//! default, and with `--scenario held-names` every figure present and sane
//! for both the `Lock` and the `FairLock`.
//!
//! Nothing asserts speed: the only time bound catches hangs.

mod common;

use deadbolt_bench::ScenarioKind;

use common::{bench_args, HANG};

/// Names held at once in the test run.
const NAMES: u64 = 200;
/// One-name rounds of the baseline.
const ROUNDS: u64 = 20;

#[test]
fn the_held_names_scenario_runs_only_when_asked_for() {
    assert!(!bench_args(&[])
        .selected_scenarios()
        .contains(&ScenarioKind::HeldNames));
    assert_eq!(
        bench_args(&["--scenario", "held-names"]).selected_scenarios(),
        [ScenarioKind::HeldNames]
    );
}

#[tokio::test]
async fn held_names_measures_every_name_held_and_waited_for() {
    let args = bench_args(&[
        "--scenario",
        "held-names",
        "--names",
        &NAMES.to_string(),
        "--rounds",
        &ROUNDS.to_string(),
    ]);
    let report = tokio::time::timeout(HANG * 2, deadbolt_bench::bench(&args))
        .await
        .expect("hang")
        .expect("bench");
    let v: serde_json::Value = serde_json::from_str(&report.to_json().unwrap()).unwrap();
    let results = v["results"].as_array().unwrap();
    let contenders: Vec<&str> = results
        .iter()
        .map(|r| r["contender"].as_str().unwrap())
        .collect();
    assert_eq!(contenders, ["lock", "fair"], "{v:#}");
    for r in results {
        let what = format!("held-names / {}", r["contender"]);
        assert_eq!(r["scenario"], "held-names", "{what}");
        assert_eq!(r["errors"], 0, "{what}: {}", r["first_error"]);
        assert_eq!(r["exclusion_violations"], 0, "{what}");
        let h = &r["held_names"];
        assert_eq!(h["names"], NAMES, "{what}: {h:#}");
        assert!(h["memory_bytes"].as_i64().unwrap() > 0, "{what}: {h:#}");
        assert!(h["bytes_per_name"].as_f64().unwrap() > 0.0, "{what}: {h:#}");
        assert!(h["channels"].as_u64().unwrap() > 0, "{what}: {h:#}");
        // Every waiter waits for its own name's message: client B has a
        // subscription per name at least.
        assert!(
            h["waiter_subscriptions"].as_u64().unwrap() >= NAMES,
            "{what}: {h:#}"
        );
        assert!(h["max_connection_subscriptions"].as_u64().unwrap() > 0);
        let handoff = &r["handoff"];
        assert_eq!(handoff["samples"], NAMES, "{what}: {handoff:#}");
        assert_eq!(r["acquisitions"], NAMES, "{what}");
        assert!(handoff["p50_us"].as_f64().unwrap() > 0.0, "{what}");
        assert!(
            handoff["p99_us"].as_f64().unwrap() >= handoff["p50_us"].as_f64().unwrap(),
            "{what}"
        );
        let one = &h["one_name"];
        assert_eq!(one["samples"], ROUNDS, "{what}: {one:#}");
        assert!(one["p50_us"].as_f64().unwrap() > 0.0, "{what}");
        assert!(h["p50_vs_one_name"].as_f64().unwrap() > 0.0, "{what}");
        assert!(
            h["redis_cpu_us_per_handoff"].as_f64().unwrap() > 0.0,
            "{what}"
        );
        assert!(r["commands"]["counted"].as_u64().unwrap() > 0, "{what}");
    }
    let table = report.table();
    assert!(table.contains("held-names: 200 names"), "{table}");
    for term in [
        "memory/held name",
        "channels",
        "subs A / B",
        "p50 / 1 name",
        "client µs/hand-off",
    ] {
        assert!(table.contains(&format!("\n  {term} ")), "{term}:\n{table}");
    }
}
