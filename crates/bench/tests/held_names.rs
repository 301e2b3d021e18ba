//! The held-names scenario against a bench-started redis-server, and with
//! `--topology cluster` against a bench-started Redis Cluster of 3 masters
//! (and their replicas): off by default, and with `--scenario held-names`
//! every figure present and sane for both the `Lock` and the `FairLock`.
//!
//! Nothing asserts speed: the only time bound catches hangs.

mod common;

use deadbolt_bench::{Report, ScenarioKind, Topology};
use deadbolt_testkit::support::{port_closed, port_of};
use serde_json::Value;

use common::{bench_args, HANG};

/// Names held at once in the test run.
const NAMES: u64 = 200;
/// One-name rounds of the baseline.
const ROUNDS: u64 = 20;
/// Names held at once on the cluster.
const CLUSTER_NAMES: u64 = 50;
/// One-name rounds of the baseline on the cluster.
const CLUSTER_ROUNDS: u64 = 10;

#[test]
fn the_held_names_scenario_runs_only_when_asked_for() {
    assert!(!bench_args(&[])
        .selected_scenarios()
        .contains(&ScenarioKind::HeldNames));
    assert_eq!(
        bench_args(&["--scenario", "held-names"]).selected_scenarios(),
        [ScenarioKind::HeldNames]
    );
    // With a topology too: asked for, it runs there, and alone.
    assert!(!bench_args(&["--topology", "cluster"])
        .selected_scenarios()
        .contains(&ScenarioKind::HeldNames));
    let on_cluster = bench_args(&["--scenario", "held-names", "--topology", "cluster"]);
    assert_eq!(on_cluster.selected_scenarios(), [ScenarioKind::HeldNames]);
    assert_eq!(on_cluster.topology, Topology::Cluster);
}

/// The JSON of `report`, its rows checked as [`check_rows`] does.
fn json(report: &Report) -> Value {
    serde_json::from_str(&report.to_json().unwrap()).unwrap()
}

/// Every held-names row of `v` (the Lock's, then the FairLock's) with every
/// figure present and sane for `names` names and `rounds` one-name rounds.
fn check_rows(v: &Value, names: u64, rounds: u64) {
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
        assert_eq!(h["names"], names, "{what}: {h:#}");
        assert!(h["memory_bytes"].as_i64().unwrap() > 0, "{what}: {h:#}");
        assert!(h["bytes_per_name"].as_f64().unwrap() > 0.0, "{what}: {h:#}");
        assert!(h["channels"].as_u64().unwrap() > 0, "{what}: {h:#}");
        // Every waiter waits for its own name's message: client B has a
        // subscription per name at least.
        assert!(
            h["waiter_subscriptions"].as_u64().unwrap() >= names,
            "{what}: {h:#}"
        );
        assert!(h["max_connection_subscriptions"].as_u64().unwrap() > 0);
        let handoff = &r["handoff"];
        assert_eq!(handoff["samples"], names, "{what}: {handoff:#}");
        assert_eq!(r["acquisitions"], names, "{what}");
        assert!(handoff["p50_us"].as_f64().unwrap() > 0.0, "{what}");
        assert!(
            handoff["p99_us"].as_f64().unwrap() >= handoff["p50_us"].as_f64().unwrap(),
            "{what}"
        );
        let one = &h["one_name"];
        assert_eq!(one["samples"], rounds, "{what}: {one:#}");
        assert!(one["p50_us"].as_f64().unwrap() > 0.0, "{what}");
        assert!(h["p50_vs_one_name"].as_f64().unwrap() > 0.0, "{what}");
        assert!(
            h["redis_cpu_us_per_handoff"].as_f64().unwrap() > 0.0,
            "{what}"
        );
        assert!(r["commands"]["counted"].as_u64().unwrap() > 0, "{what}");
    }
}

/// The section of `table` has every column the legend explains.
fn check_table(table: &str) {
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
    let v = json(&report);
    check_rows(&v, NAMES, ROUNDS);
    for r in v["results"].as_array().unwrap() {
        let h = &r["held_names"];
        assert_eq!(h["topology"], "standalone", "{h:#}");
        assert_eq!(
            (&h["masters"], &h["nodes"]),
            (&1.into(), &1.into()),
            "{h:#}"
        );
        assert_eq!(h["shard_channels"], 0, "{h:#}");
    }
    let table = report.table();
    assert!(table.contains("held-names: 200 names"), "{table}");
    assert!(!table.contains("Redis Cluster"), "{table}");
    check_table(&table);
}

/// `--scenario held-names --topology cluster`: the same figures, read on
/// the cluster the bench started (memory, CPU and commands over its 3
/// masters, channels and subscriptions over its 6 nodes), server 1 left
/// alone; everything stopped at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_names_on_the_cluster_counts_every_master_and_node() {
    let args = bench_args(&[
        "--scenario",
        "held-names",
        "--topology",
        "cluster",
        "--names",
        &CLUSTER_NAMES.to_string(),
        "--rounds",
        &CLUSTER_ROUNDS.to_string(),
    ]);
    let report = tokio::time::timeout(HANG * 2, deadbolt_bench::bench(&args))
        .await
        .expect("hang")
        .expect("bench");
    let v = json(&report);
    assert_eq!(v["settings"]["topology"], "cluster");
    assert_eq!(
        v["settings"]["scenarios"],
        serde_json::json!(["held-names"])
    );
    let t = &v["redis"]["topology"];
    assert_eq!(t["topology"], "cluster", "{t:#}");
    assert_eq!(t["embedded"], true, "{t:#}");
    let masters = t["masters"].as_array().unwrap();
    assert_eq!(masters.len(), 3, "{t:#}");
    check_rows(&v, CLUSTER_NAMES, CLUSTER_ROUNDS);
    for r in v["results"].as_array().unwrap() {
        let what = format!("held-names / {} on the cluster", r["contender"]);
        let h = &r["held_names"];
        assert_eq!(h["topology"], "cluster", "{what}: {h:#}");
        assert_eq!(h["masters"], 3, "{what}: {h:#}");
        // Each master with its replica.
        assert_eq!(h["nodes"], 6, "{what}: {h:#}");
        // deadbolt waits with sharded Pub/Sub on a cluster: a shard channel
        // per waiter's name at least, and B's subscriptions are SSUBSCRIBEs
        // on the masters of its names, found though its connections carry
        // no name.
        let shard = h["shard_channels"].as_u64().unwrap();
        assert!(shard >= CLUSTER_NAMES, "{what}: {h:#}");
        assert!(h["channels"].as_u64().unwrap() >= shard, "{what}: {h:#}");
        // No one connection holds them all: the names are on 3 masters.
        assert!(
            h["max_connection_subscriptions"].as_u64().unwrap()
                < h["waiter_subscriptions"].as_u64().unwrap(),
            "{what}: {h:#}"
        );
        let cmds = &r["commands"];
        assert!(
            cmds["counted_names"]
                .as_array()
                .unwrap()
                .contains(&Value::from("ssubscribe")),
            "{what}: {cmds:#}"
        );
        // Every hand-off's message was an SPUBLISH, counted on the masters.
        assert!(
            cmds["by_command"]["spublish"].as_u64().unwrap() >= CLUSTER_NAMES,
            "{what}: {cmds:#}"
        );
        assert_eq!(cmds["redis_cpu_source"], "server", "{what}: {cmds:#}");
    }
    let table = report.table();
    assert!(
        table.contains("held-names: 50 names")
            && table.contains("on a Redis Cluster of 3 masters (6 nodes)"),
        "{table}"
    );
    check_table(&table);
    // Every process stopped: the standalone server, the cluster's masters.
    let mut urls = vec![v["redis"]["url"].as_str().unwrap()];
    urls.extend(masters.iter().map(|m| m.as_str().unwrap()));
    for url in urls {
        assert!(port_closed(port_of(url)), "{url} still listens");
    }
}
