//! `deadbolt-bench --topology cluster|sentinel`: the topology scenario's rows
//! in the table and the JSON report, against a Redis Cluster and a Sentinel
//! set the bench starts itself (and stops), and against a cluster given with
//! `--redis` (left running, its keys cleaned up); the flags refused before
//! anything starts.
//!
//! Sizes are tiny and nothing asserts speed: the only time bounds catch hangs.

mod common;

use std::process::Command;

use deadbolt_bench::{ScenarioKind, Topology, TOPOLOGY_NAMES_PER_TASK};
use deadbolt_testkit::support::{output_within, port_closed, port_of};
use deadbolt_testkit::RedisCluster;
use serde_json::Value;

use common::{bench_args, temp_path, HANG};

/// Short runs; the hand-off rows stop after 20 rounds.
const SHORT: &[&str] = &[
    "--scenario",
    "topology",
    "--duration",
    "300ms",
    "--tasks",
    "3",
    "--rounds",
    "20",
];

/// Run the binary with `args` and `--quiet --json FILE`: its stdout and the
/// report.
fn run_binary(args: &[&str]) -> (String, Value) {
    let json = temp_path("report.json");
    let out = output_within(
        &format!("deadbolt-bench {args:?}"),
        Command::new(env!("CARGO_BIN_EXE_deadbolt-bench"))
            .args(args)
            .args(["--quiet", "--json", json.to_str().unwrap()]),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).ok();
    (stdout, report)
}

/// The topology rows of `report`, in run order: (measure, label, row).
fn rows(report: &Value) -> Vec<(String, String, &Value)> {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["scenario"], "topology", "{r:#}");
            assert_eq!(r["contender"], "lock", "{r:#}");
            let t = &r["topology"];
            (
                t["measure"].as_str().unwrap().to_string(),
                t["label"].as_str().unwrap().to_string(),
                r,
            )
        })
        .collect()
}

fn positive(v: &Value, what: &str) -> f64 {
    let x = v
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: not a number: {v}"));
    assert!(x > 0.0, "{what}: {x}");
    x
}

/// Every figure of one row present and positive, the ratios to the
/// standalone row there on every other row; `masters`: the masters its
/// names were on.
fn check_row(measure: &str, label: &str, r: &Value, masters: u64, tasks: u64) {
    let what = format!("{measure} / {label}: {r:#}");
    let t = &r["topology"];
    assert_eq!(r["errors"], 0, "{what}");
    assert_eq!(r["exclusion_violations"], 0, "{what}");
    assert_eq!(t["masters"], masters, "{what}");
    positive(&r["ping_p50_us"], &what);
    let standalone = t["topology"] == "standalone";
    assert_eq!(standalone, label == "standalone", "{what}");
    let vs = &t["vs_standalone"];
    assert_eq!(vs.is_null(), standalone, "{what}");
    let latency = |l: &Value| {
        let p50 = positive(&l["p50_us"], &what);
        let p99 = positive(&l["p99_us"], &what);
        assert!(p50 <= p99, "{what}");
        positive(&l["p50_x_ping"], &what);
    };
    match measure {
        "throughput" => {
            assert_eq!(r["workers"], tasks, "{what}");
            assert_eq!(
                t["names"],
                tasks * u64::from(TOPOLOGY_NAMES_PER_TASK),
                "{what}"
            );
            let acquisitions = r["acquisitions"].as_u64().unwrap();
            assert!(acquisitions > 0, "{what}");
            positive(&r["acquisitions_per_s"], &what);
            latency(&r["acquire_release"]);
            assert_eq!(r["acquire_release"]["samples"], acquisitions, "{what}");
            assert!(r["handoff"].is_null() && r["rounds"].is_null(), "{what}");
            // One script to lock and one to unlock, counted over every
            // master of the deployment; nothing loaded during the run.
            assert_eq!(
                r["commands"]["by_command"]["evalsha"],
                2 * acquisitions,
                "{what}"
            );
            assert!(
                r["commands"]["by_command"].get("script|load").is_none(),
                "{what}"
            );
            if !standalone {
                for key in ["acquisitions_per_s", "p50", "p99"] {
                    positive(&vs[key], &format!("{what}: vs_standalone.{key}"));
                }
            }
        }
        "handoff" => {
            assert_eq!(
                (r["workers"].as_u64(), r["clients"].as_u64()),
                (Some(2), Some(2))
            );
            let rounds = r["rounds"].as_u64().unwrap();
            assert!((1..=20).contains(&rounds), "{what}");
            latency(&r["handoff"]);
            assert_eq!(r["handoff"]["samples"], rounds, "{what}");
            assert!(r["acquisitions_per_s"].is_null(), "{what}");
            if !standalone {
                assert!(vs["acquisitions_per_s"].is_null(), "{what}");
                for key in ["p50", "p99"] {
                    positive(&vs[key], &format!("{what}: vs_standalone.{key}"));
                }
            }
        }
        other => panic!("unknown measure {other}: {what}"),
    }
}

#[test]
fn an_embedded_cluster_beside_the_standalone_server() {
    let (table, v) = run_binary(&[SHORT, &["--topology", "cluster"]].concat());
    assert_eq!(v["settings"]["topology"], "cluster");
    assert_eq!(v["settings"]["scenarios"], serde_json::json!(["topology"]));
    let t = &v["redis"]["topology"];
    assert_eq!(t["topology"], "cluster", "{t:#}");
    assert_eq!(t["embedded"], true, "{t:#}");
    assert!(t["master_name"].is_null(), "{t:#}");
    let masters = t["masters"].as_array().unwrap();
    assert_eq!(masters.len(), 3, "{t:#}");

    let rows = rows(&v);
    let labels: Vec<(&str, &str)> = rows
        .iter()
        .map(|(m, l, _)| (m.as_str(), l.as_str()))
        .collect();
    assert_eq!(
        labels,
        [
            ("throughput", "standalone"),
            ("throughput", "cluster, 1 master"),
            ("throughput", "cluster, 3 masters"),
            ("handoff", "standalone"),
            ("handoff", "cluster"),
        ]
    );
    for (measure, label, r) in &rows {
        let on = if label == "cluster, 3 masters" { 3 } else { 1 };
        check_row(measure, label, r, on, 3);
        if label.starts_with("cluster") {
            // Sharded Pub/Sub, and the cluster's commands counted.
            assert_eq!(r["topology"]["topology"], "cluster");
            assert!(
                r["commands"]["counted_names"]
                    .as_array()
                    .unwrap()
                    .contains(&Value::from("ssubscribe")),
                "{r:#}"
            );
        }
    }

    for line in [
        "\ntopology: deadbolt's Lock on the standalone server (server 1) beside a Redis Cluster \
         of 3 masters",
        "\n  throughput: 3 tasks on one client, each taking and giving back its 12 names in turn",
        "\ncluster, 1 master ",
        "\ncluster, 3 masters ",
        "\n  hand-off: release → next holder on another client, up to 20 rounds",
        "\ncluster ",
        "\n  vs standalone ",
    ] {
        assert!(table.contains(line), "the table lacks {line:?}:\n{table}");
    }

    // Every process stopped: the standalone server, the cluster's masters.
    let mut urls = vec![v["redis"]["url"].as_str().unwrap()];
    urls.extend(masters.iter().map(|m| m.as_str().unwrap()));
    for url in urls {
        assert!(port_closed(port_of(url)), "{url} still listens");
    }
}

#[test]
fn an_embedded_sentinel_set_beside_the_standalone_server() {
    let (table, v) = run_binary(&[SHORT, &["--topology", "sentinel"]].concat());
    assert_eq!(v["settings"]["topology"], "sentinel");
    let t = &v["redis"]["topology"];
    assert_eq!(t["topology"], "sentinel", "{t:#}");
    assert_eq!(t["embedded"], true, "{t:#}");
    assert_eq!(t["master_name"], "deadbolt", "{t:#}");
    assert_eq!(t["urls"].as_array().unwrap().len(), 3, "{t:#}");
    assert_eq!(t["masters"].as_array().unwrap().len(), 1, "{t:#}");

    let rows = rows(&v);
    let labels: Vec<(&str, &str)> = rows
        .iter()
        .map(|(m, l, _)| (m.as_str(), l.as_str()))
        .collect();
    assert_eq!(
        labels,
        [
            ("throughput", "standalone"),
            ("throughput", "sentinel"),
            ("handoff", "standalone"),
            ("handoff", "sentinel"),
        ]
    );
    for (measure, label, r) in &rows {
        check_row(measure, label, r, 1, 3);
    }
    assert!(
        table.contains("\nsentinel ") && table.contains("named by 3 Sentinels"),
        "{table}"
    );

    let mut urls = vec![v["redis"]["url"].as_str().unwrap()];
    for key in ["urls", "masters"] {
        urls.extend(
            t[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|u| u.as_str().unwrap()),
        );
    }
    for url in urls {
        assert!(port_closed(port_of(url)), "{url} still listens");
    }
}

/// A cluster given with `--redis` (seeds, comma-separated): measured, left
/// running, and the run's keys deleted from its masters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_given_with_redis() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster");
    let seeds = cluster.urls().join(",");
    let args = bench_args(&[SHORT, &["--topology", "cluster", "--redis", &seeds]].concat());
    let report = tokio::time::timeout(HANG, deadbolt_bench::bench(&args))
        .await
        .expect("hang")
        .expect("bench");
    let t = report.redis.topology.as_ref().expect("the cluster's info");
    assert!(!t.embedded && report.redis.embedded);
    assert_eq!(t.urls, cluster.urls());
    let results: Vec<_> = report
        .results
        .iter()
        .map(|r| r.topology.as_ref().unwrap().label.as_str())
        .collect();
    assert_eq!(
        results,
        [
            "standalone",
            "cluster, 1 master",
            "cluster, 3 masters",
            "standalone",
            "cluster"
        ]
    );
    assert!(report.results.iter().all(|r| r.errors == 0));
    for i in cluster.masters().await.unwrap() {
        let node = cluster.node(i);
        assert!(!port_closed(node.port()), "the given cluster was stopped");
        let keys: u64 = redis::cmd("DBSIZE")
            .query_async(&mut node.conn().await)
            .await
            .unwrap();
        assert_eq!(keys, 0, "keys left on node {i}");
    }
}

#[tokio::test]
async fn topology_flags_are_checked_before_anything_starts() {
    // The default run leaves the topology scenario out; --topology adds it.
    assert!(!bench_args(&[])
        .selected_scenarios()
        .contains(&ScenarioKind::Topology));
    assert_eq!(bench_args(&[]).topology, Topology::Standalone);
    let with = bench_args(&["--topology", "sentinel"]).selected_scenarios();
    assert_eq!(with.last(), Some(&ScenarioKind::Topology));
    // Every scenario but held-names, which runs only when asked for.
    assert_eq!(with.len(), ScenarioKind::ALL.len() - 1);
    assert!(!with.contains(&ScenarioKind::HeldNames));
    assert!(
        deadbolt_bench::BenchCli::try_parse_from(["deadbolt-bench", "--topology", "mesh"]).is_err()
    );

    let cases: [(&[&str], &str); 6] = [
        (
            &["--topology", "cluster", "--scenario", "uncontended"],
            "--topology cluster is measured by the topology and held-names scenarios only, \
             neither of which is selected: add --scenario topology or --scenario held-names",
        ),
        (
            &["--topology", "cluster", "--contender", "fair"],
            "--topology cluster is measured by the topology scenario only, which measures the \
             lock contender only: add --contender lock",
        ),
        (
            &["--topology", "sentinel", "--redis", "redis://127.0.0.1:1/"],
            "--topology sentinel with --redis: name the master with --sentinel-master NAME",
        ),
        (
            &["--sentinel-master", "mymaster"],
            "--sentinel-master goes with --topology sentinel and --redis SENTINEL_URLS (the \
             embedded Sentinel set names its master itself)",
        ),
        (
            &["--topology", "cluster", "--redis", " , "],
            "--redis with --topology cluster: give the cluster's seed URLs, comma-separated",
        ),
        (
            &[
                "--topology",
                "cluster",
                "--redis",
                "redis://127.0.0.1:1/",
                "--redlock-redis",
                "redis://127.0.0.1:2/",
                "--redlock-redis",
                "redis://127.0.0.1:3/",
            ],
            "--redlock-redis needs --redis to name the standalone server, but with --topology \
             cluster --redis names the cluster's servers (the bench starts the standalone \
             servers itself; leave --redlock-redis out)",
        ),
    ];
    for (flags, expected) in cases {
        let err = deadbolt_bench::bench_with(&bench_args(flags), |url| {
            panic!("{flags:?} started a server at {url} before refusing")
        })
        .await
        .unwrap_err();
        assert_eq!(format!("{err:#}"), expected, "{flags:?}");
    }
}
