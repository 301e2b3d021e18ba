//! The `deadbolt` command against real redis-server processes: argument
//! errors, the embedded server's life cycle (also on error and Ctrl-C), the
//! JSON report, every scenario with every contender, inspect and force-unlock.
//!
//! Sizes are tiny and nothing asserts speed: the only time bounds catch hangs.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser as _;
use deadbolt_cli::{BenchArgs, Cli, ForceUnlockArgs, InspectArgs};
use deadbolt_testkit::support::{port_closed, port_of};
use deadbolt_testkit::RedisServer;

/// Catches hangs, not speed.
const HANG: Duration = Duration::from_secs(60);

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("deadbolt").chain(args.iter().copied()))
}

fn bench_args(args: &[&str]) -> BenchArgs {
    let mut all = vec!["bench", "--quiet"];
    all.extend_from_slice(args);
    match parse(&all).expect("valid bench arguments").command {
        deadbolt_cli::Command::Bench(b) => b,
        other => panic!("expected bench, got {other:?}"),
    }
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "deadbolt-cli-test-{}-{}-{name}",
        std::process::id(),
        rand::random::<u32>()
    ))
}

/// Tiny sizes: every run ends quickly whatever the contender.
const TINY: &[&str] = &[
    "--duration",
    "150ms",
    "--tasks",
    "2",
    "--waiters",
    "3",
    "--clients",
    "2",
    "--rounds",
    "3",
    "--idle-waiters",
    "2",
    "--idle-time",
    "200ms",
    "--poll-interval",
    "10ms",
];

#[tokio::test]
async fn argument_errors() {
    assert!(parse(&["bench", "--scenario", "nope"]).is_err());
    assert!(parse(&["bench", "--scenario", "idle,nope"]).is_err());
    assert!(parse(&["bench", "--contender", "redisson"]).is_err());
    assert!(parse(&["bench", "--duration", "soon"]).is_err());
    assert!(parse(&["bench", "--write-ratio", "1.5"]).is_err());
    assert!(parse(&["bench", "--write-ratio", "-0.1"]).is_err());
    assert!(parse(&["bench", "--write-ratio", "NaN"]).is_err());
    assert!(parse(&["bench", "--write-ratio", "10%"]).is_err());
    assert!(parse(&["bench", "--permits", "-1"]).is_err());
    assert_eq!(bench_args(&[]).permits, 4);
    assert_eq!(
        bench_args(&["--scenario", "semaphore"]).scenarios,
        [deadbolt_cli::ScenarioKind::Semaphore]
    );
    assert_eq!(
        bench_args(&["--scenario", "multi"]).scenarios,
        [deadbolt_cli::ScenarioKind::Multi]
    );
    assert_eq!(
        bench_args(&["--contender", "multi,redlock,rslock-3"]).contenders,
        [
            deadbolt_cli::ContenderKind::Multi,
            deadbolt_cli::ContenderKind::Redlock,
            deadbolt_cli::ContenderKind::Rslock3
        ]
    );
    assert!(parse(&["bench", "--contender", "rslock3"]).is_err());
    let b = bench_args(&[
        "--redis",
        "redis://a:1/",
        "--redlock-redis",
        "redis://b:1/",
        "--redlock-redis",
        "redis://c:1/",
    ]);
    assert_eq!(b.redlock_redis, ["redis://b:1/", "redis://c:1/"]);
    assert_eq!(bench_args(&["--write-ratio", "1"]).write_ratio, 1.0);
    assert_eq!(bench_args(&[]).write_ratio, 0.1);
    assert!(parse(&["inspect", "x", "--kind", "queue"]).is_err());
    assert!(parse(&["frobnicate"]).is_err());

    // Comma lists and repeats both work.
    let b = bench_args(&[
        "--scenario",
        "idle,handoff",
        "--contender",
        "lock",
        "--contender",
        "raw-poll",
    ]);
    assert_eq!(b.scenarios.len(), 2);
    assert_eq!(b.contenders.len(), 2);

    // Refused before anything starts.
    let err = deadbolt_cli::bench(&bench_args(&["--tasks", "0"]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("--tasks"), "{err:#}");

    // A scenario asked for that none of the contenders asked for takes part
    // in: refused before the server starts.
    let cases: [(&[&str], &str); 10] = [
        (
            &["--scenario", "read-mostly", "--contender", "fair"],
            "--scenario read-mostly measures only lock, rw (not fair)",
        ),
        (
            &["--scenario", "contended", "--contender", "rw"],
            "--scenario contended measures only lock, fair, raw-poll, rslock (not rw)",
        ),
        (
            &["--scenario", "semaphore", "--contender", "lock,raw-poll"],
            "--scenario semaphore measures only sem, sem-poll (not lock, raw-poll)",
        ),
        (
            &["--scenario", "idle", "--contender", "sem"],
            "--scenario idle measures only lock, fair, raw-poll, rslock (not sem)",
        ),
        (&["--permits", "0"], "--permits must be at least 1"),
        (
            &["--scenario", "multi", "--contender", "fair,sem"],
            "--scenario multi measures only lock, multi, redlock, rslock-3 (not fair, sem)",
        ),
        (
            &["--redlock-redis", "redis://127.0.0.1:1/"],
            "--redlock-redis needs --redis (without --redis the bench starts all 3 servers \
             itself)",
        ),
        (
            &[
                "--redis",
                "redis://127.0.0.1:1/",
                "--redlock-redis",
                "redis://127.0.0.1:2/",
            ],
            "--redlock-redis: give 2 servers besides --redis, one per flag (got 1)",
        ),
        (
            &[
                "--redis",
                "redis://127.0.0.1:1/",
                "--redlock-redis",
                "redis://127.0.0.1:2/",
                "--redlock-redis",
                "redis://127.0.0.1:1/",
            ],
            "--redis and --redlock-redis must name 3 different servers",
        ),
        (
            &["--contender", "redlock", "--redis", "redis://127.0.0.1:1/"],
            "contender redlock is not available: needs 3 servers: --redis was given without 2 \
             --redlock-redis URLs (without --redis the bench starts all 3 itself)",
        ),
    ];
    for (flags, expected) in cases {
        let err = deadbolt_cli::bench_with(&bench_args(flags), |url| {
            panic!("{flags:?} started a server at {url} before refusing")
        })
        .await
        .unwrap_err();
        assert_eq!(format!("{err:#}"), expected, "{flags:?}");
    }
    #[cfg(not(feature = "peers"))]
    {
        let err = deadbolt_cli::bench(&bench_args(&["--contender", "rslock"]))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not available"), "{err:#}");
    }

    // force-unlock refuses without --yes, before connecting anywhere.
    let cli = parse(&[
        "force-unlock",
        "orders:42",
        "--redis",
        "redis://127.0.0.1:1/",
    ])
    .unwrap();
    let err = deadbolt_cli::run(cli).await.unwrap_err();
    assert!(err.to_string().contains("--yes"), "{err:#}");
}

/// `--json` and `--plot` are checked before the server starts: a missing
/// folder or a plot that is not SVG fails at once, with the path and the
/// reason, and nothing is run or written.
#[tokio::test]
async fn unwritable_outputs_are_refused_before_anything_runs() {
    let png = temp_path("plot.png");
    let cases: [(&[&str], String); 4] = [
        (
            &["--json", "/nonexistent/dir/x.json"],
            "--json /nonexistent/dir/x.json: the folder /nonexistent/dir does not exist".into(),
        ),
        (
            &["--plot", "/nonexistent/dir/x.svg"],
            "--plot /nonexistent/dir/x.svg: the folder /nonexistent/dir does not exist".into(),
        ),
        (
            &["--plot", png.to_str().unwrap()],
            format!("--plot {}: only SVG plots can be written", png.display()),
        ),
        (
            &["--json", &std::env::temp_dir().display().to_string()],
            "that is a folder".into(),
        ),
    ];
    for (flags, expected) in cases {
        let args = bench_args(flags);
        let err = deadbolt_cli::bench_with(&args, |url| {
            panic!("{flags:?} started a server at {url} before refusing")
        })
        .await
        .unwrap_err();
        assert!(format!("{err:#}").contains(&expected), "{flags:?}: {err:#}");
    }
    assert!(!png.exists(), "a refused --plot left a file");

    // The binary says so on stderr and exits non-zero, without starting
    // redis-server.
    let out = Command::new(env!("CARGO_BIN_EXE_deadbolt"))
        .args(["bench", "--json", "/nonexistent/dir/x.json"])
        .stdin(Stdio::null())
        .output()
        .expect("run deadbolt");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        stderr.contains("the folder /nonexistent/dir does not exist"),
        "{stderr}"
    );
    assert!(!stderr.contains("started redis-server"), "{stderr}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[tokio::test]
async fn embedded_server_is_stopped_after_a_run_and_after_an_error() {
    // A good run.
    let url = Arc::new(Mutex::new(String::new()));
    let seen = url.clone();
    let args = bench_args(&[&["--scenario", "uncontended", "--contender", "lock"], TINY].concat());
    let report = tokio::time::timeout(
        HANG,
        deadbolt_cli::bench_with(&args, move |u| *seen.lock().unwrap() = u.to_string()),
    )
    .await
    .expect("hang")
    .expect("bench");
    let port = port_of(&url.lock().unwrap());
    assert!(report.redis.embedded);
    assert_eq!(report.results.len(), 1);
    assert!(
        port_closed(port),
        "redis-server still listens on {port} after the run"
    );

    // A run that fails after the server started: the namespace is refused
    // when the first deadbolt client connects.
    let url = Arc::new(Mutex::new(String::new()));
    let seen = url.clone();
    let args = bench_args(
        &[
            &[
                "--scenario",
                "uncontended",
                "--contender",
                "lock",
                "--namespace",
                "a{b",
            ],
            TINY,
        ]
        .concat(),
    );
    let err = tokio::time::timeout(
        HANG,
        deadbolt_cli::bench_with(&args, move |u| *seen.lock().unwrap() = u.to_string()),
    )
    .await
    .expect("hang")
    .unwrap_err();
    assert!(format!("{err:#}").contains("namespace"), "{err:#}");
    let port = port_of(&url.lock().unwrap());
    assert!(
        port_closed(port),
        "redis-server still listens on {port} after a failed run"
    );
}

#[tokio::test]
async fn every_scenario_with_every_contender_and_the_json_schema() {
    let json = temp_path("report.json");
    let svg = temp_path("plot.svg");
    let args = bench_args(
        &[
            TINY,
            &[
                "--json",
                json.to_str().unwrap(),
                "--plot",
                svg.to_str().unwrap(),
                "--plot-waiters",
                "1,2",
                // Many reads and many writes even in a 150 ms read-mostly run.
                "--write-ratio",
                "0.5",
                // Fewer permits than the 3 waiters: they contend.
                "--permits",
                "2",
            ],
        ]
        .concat(),
    );
    let report = tokio::time::timeout(HANG * 2, deadbolt_cli::bench(&args))
        .await
        .expect("hang")
        .expect("bench");
    report.write_json(&json).unwrap();
    report.write_plot(&svg).unwrap();
    let png = temp_path("plot.png");
    let err = report.write_plot(&png).unwrap_err();
    assert!(format!("{err:#}").contains("only SVG"), "{err:#}");
    assert!(!png.exists(), "a refused plot left a file");

    let contenders: &[&str] = if cfg!(feature = "peers") {
        &["lock", "fair", "raw-poll", "rslock"]
    } else {
        &["lock", "fair", "raw-poll"]
    };
    let scenarios = ["uncontended", "contended", "handoff", "idle"];
    // The read-mostly scenario measures the read-write lock beside the Lock,
    // the semaphore scenario the two semaphores.
    let read_mostly = ["lock", "rw"];
    let semaphores = ["sem", "sem-poll"];
    // The multi scenario: the Lock beside the MultiLock and the two Redlocks
    // over 3 embedded servers.
    let multi_only: &[&str] = if cfg!(feature = "peers") {
        &["multi", "redlock", "rslock-3"]
    } else {
        &["multi", "redlock"]
    };
    let multi = [&["lock"], multi_only].concat();
    let runs = scenarios
        .iter()
        .flat_map(|s| contenders.iter().map(move |c| (*s, *c)))
        .chain(read_mostly.iter().map(|c| ("read-mostly", *c)))
        .chain(semaphores.iter().map(|c| ("semaphore", *c)))
        .chain(multi.iter().map(|c| ("multi", *c)));

    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).ok();
    for key in [
        "schema",
        "deadbolt_version",
        "elapsed_s",
        "interrupted",
        "redis",
        "host",
        "settings",
        "ping",
        "results",
        "sweep",
        "skipped",
    ] {
        assert!(v.get(key).is_some(), "report lacks {key}");
    }
    assert_eq!(v["schema"], deadbolt_cli::REPORT_SCHEMA);
    assert_eq!(v["interrupted"], false);
    assert_eq!(v["redis"]["embedded"], true);
    assert!(v["redis"]["version"]
        .as_str()
        .unwrap()
        .starts_with(|c: char| c.is_ascii_digit()));
    assert!(v["ping"]["p50_us"].as_f64().unwrap() > 0.0);
    for key in [
        "duration_s",
        "tasks",
        "waiters",
        "clients",
        "hold_ms",
        "write_ratio",
        "permits",
        "rounds",
        "idle_waiters",
        "idle_s",
        "poll_interval_ms",
        "lease_ms",
        "plot_waiters",
        "scenarios",
        "contenders",
    ] {
        assert!(v["settings"].get(key).is_some(), "settings lack {key}");
    }
    assert!(v["skipped"].is_array());
    // The two more servers of the Redlock rows were started, and stopped
    // with the first one.
    let redlock_urls: Vec<&str> = v["redis"]["redlock_urls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    assert_eq!(redlock_urls.len(), 2, "{:#}", v["redis"]);
    for url in redlock_urls
        .iter()
        .chain([&v["redis"]["url"].as_str().unwrap()])
    {
        let port = port_of(url);
        assert!(
            port_closed(port),
            "redis-server still listens on {port} after the run"
        );
    }
    assert_eq!(v["settings"]["write_ratio"], 0.5);
    assert_eq!(v["settings"]["permits"], 2);
    let listed: Vec<&str> = v["settings"]["contenders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        [contenders, &["rw"], &semaphores, multi_only].concat()
    );
    let ran: Vec<&str> = v["settings"]["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(
        ran,
        [&scenarios[..], &["read-mostly", "semaphore", "multi"]].concat()
    );

    let results = v["results"].as_array().unwrap();
    assert_eq!(
        results.len(),
        scenarios.len() * contenders.len() + read_mostly.len() + semaphores.len() + multi.len()
    );
    for (s, c) in runs {
        let r = results
            .iter()
            .find(|r| r["scenario"] == s && r["contender"] == c)
            .unwrap_or_else(|| panic!("no result for {s} / {c}"));
        let what = format!("{s} / {c}: {r:#}");
        for key in [
            "workers",
            "clients",
            "elapsed_s",
            "acquisitions",
            "acquisitions_per_s",
            "rounds",
            "errors",
            "first_error",
            "exclusion_violations",
            "ping_p50_us",
            "acquire",
            "acquire_release",
            "handoff",
            "fairness",
            "read_write",
            "commands",
        ] {
            assert!(r.get(key).is_some(), "{what} lacks {key}");
        }
        for key in [
            "counted",
            "per_acquisition",
            "per_waiter_per_s",
            "counted_names",
            "by_command",
        ] {
            assert!(
                r["commands"].get(key).is_some(),
                "{what} lacks commands.{key}"
            );
        }
        assert_eq!(r["errors"], 0, "{what}");
        assert_eq!(r["exclusion_violations"], 0, "{what}");
        let latency = |l: &serde_json::Value| {
            for key in [
                "samples",
                "p50_us",
                "p99_us",
                "max_us",
                "mean_us",
                "p50_x_ping",
                "p99_x_ping",
                "max_x_ping",
            ] {
                assert!(l.get(key).is_some(), "{what} latency lacks {key}");
            }
            assert!(
                l["p50_us"].as_f64().unwrap() <= l["max_us"].as_f64().unwrap(),
                "{what}"
            );
            assert!(l["p50_x_ping"].as_f64().unwrap() > 0.0, "{what}");
        };
        match s {
            "uncontended" => {
                assert!(r["acquisitions"].as_u64().unwrap() > 0, "{what}");
                assert!(r["acquisitions_per_s"].as_f64().unwrap() > 0.0, "{what}");
                latency(&r["acquire"]);
                latency(&r["acquire_release"]);
                // One round trip to acquire and one to release, uncontended;
                // the SET NX locks load their release script on first use.
                let per = r["commands"]["per_acquisition"].as_f64().unwrap();
                if c == "lock" {
                    assert_eq!(per, 2.0, "{what}");
                } else {
                    assert!((2.0..2.5).contains(&per), "{what}");
                }
            }
            "semaphore" => {
                assert_eq!(
                    (r["workers"].as_u64(), r["clients"].as_u64()),
                    (Some(3), Some(2))
                );
                assert!(r["acquisitions"].as_u64().unwrap() > 0, "{what}");
                assert!(r["acquisitions_per_s"].as_f64().unwrap() > 0.0, "{what}");
                latency(&r["acquire"]);
                assert_eq!(r["acquire"]["samples"], r["acquisitions"], "{what}");
                assert!(
                    r["read_write"].is_null() && r["handoff"].is_null(),
                    "{what}"
                );
                let f = &r["fairness"];
                let per_worker: Vec<u64> = f["per_worker"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_u64().unwrap())
                    .collect();
                assert_eq!(per_worker.len(), 3, "{what}");
                assert_eq!(
                    per_worker.iter().sum::<u64>(),
                    r["acquisitions"].as_u64().unwrap(),
                    "{what}"
                );
                let jain = f["jain_index"].as_f64().unwrap();
                assert!((1.0 / 3.0 - 1e-9..=1.0 + 1e-9).contains(&jain), "{what}");
                assert!(f["longest_wait_us"].as_f64().unwrap() > 0.0, "{what}");
                // One call at least (a Lock's local hand-off is a release
                // and an acquire in one script), and no SCRIPT LOAD: both
                // load their scripts at connect.
                let per = r["commands"]["per_acquisition"].as_f64().unwrap();
                assert!(per >= 1.0, "{what}");
                let by_command = &r["commands"]["by_command"];
                assert!(by_command.get("script|load").is_none(), "{what}");
                if c == "sem-poll" {
                    // One ZREM per release, none inside the script.
                    assert_eq!(by_command["zrem"], r["acquisitions"], "{what}");
                }
            }
            "multi" => {
                assert_eq!(
                    (r["workers"].as_u64(), r["clients"].as_u64()),
                    (Some(2), Some(1)),
                    "{what}"
                );
                let acquisitions = r["acquisitions"].as_u64().unwrap();
                assert!(acquisitions > 0, "{what}");
                assert!(r["acquisitions_per_s"].as_f64().unwrap() > 0.0, "{what}");
                latency(&r["acquire"]);
                latency(&r["acquire_release"]);
                assert_eq!(r["acquire_release"]["samples"], acquisitions, "{what}");
                // Each sample's acquire is part of its acquire+release.
                for q in ["p50_us", "p99_us", "max_us"] {
                    assert!(
                        r["acquire"][q].as_f64().unwrap()
                            <= r["acquire_release"][q].as_f64().unwrap(),
                        "{what}"
                    );
                }
                assert!(r["fairness"].is_null() && r["handoff"].is_null(), "{what}");
                // An acquire and a release per key or server, over every
                // server of the run: 1 key for the Lock, 3 servers for the
                // Redlocks; the MultiLock takes its 3 plain locks in one
                // script and releases each. deadbolt's scripts were loaded
                // at connect; rslock loads its release script on first use
                // on each server.
                let per = r["commands"]["per_acquisition"].as_f64().unwrap();
                let by_command = &r["commands"]["by_command"];
                match c {
                    "lock" => assert_eq!(per, 2.0, "{what}"),
                    "multi" => assert_eq!(per, 4.0, "{what}"),
                    "redlock" => assert_eq!(per, 6.0, "{what}"),
                    _ => assert!((6.0..6.5).contains(&per), "{what}"),
                }
                if c == "rslock-3" {
                    // One SET NX PX per server per acquisition.
                    assert_eq!(by_command["set"], 3 * acquisitions, "{what}");
                } else {
                    assert!(by_command.get("script|load").is_none(), "{what}");
                    let scripts = match c {
                        "lock" => 2,
                        "multi" => 4,
                        _ => 6,
                    };
                    assert_eq!(by_command["evalsha"], scripts * acquisitions, "{what}");
                }
            }
            "contended" => {
                assert!(r["acquisitions"].as_u64().unwrap() > 0, "{what}");
                latency(&r["acquire"]);
                let f = &r["fairness"];
                assert_eq!(f["per_worker"].as_array().unwrap().len(), 3, "{what}");
                let jain = f["jain_index"].as_f64().unwrap();
                assert!((1.0 / 3.0 - 1e-9..=1.0 + 1e-9).contains(&jain), "{what}");
                assert!(f["longest_wait_us"].as_f64().unwrap() > 0.0, "{what}");
            }
            "handoff" => {
                assert!(r["rounds"].as_u64().unwrap() >= 1, "{what}");
                latency(&r["handoff"]);
            }
            "read-mostly" => {
                let ops = r["acquisitions"].as_u64().unwrap();
                let m = &r["read_write"];
                let (reads, writes) = (m["reads"].as_u64().unwrap(), m["writes"].as_u64().unwrap());
                assert!(reads > 0 && writes > 0, "{what}");
                assert_eq!(reads + writes, ops, "{what}");
                let per_s = |key: &str| m[key].as_f64().unwrap();
                let rate = r["acquisitions_per_s"].as_f64().unwrap();
                assert!(rate > 0.0, "{what}");
                assert!(
                    (per_s("reads_per_s") + per_s("writes_per_s") - rate).abs() < 1e-6 * rate,
                    "{what}"
                );
                latency(&r["acquire"]);
                latency(&m["read_acquire"]);
                latency(&m["write_acquire"]);
                assert_eq!(m["read_acquire"]["samples"], reads, "{what}");
                assert_eq!(m["write_acquire"]["samples"], writes, "{what}");
                assert_eq!(r["acquire"]["samples"], ops, "{what}");
                // At least one call per operation (a Lock's local hand-off
                // is a release and the next acquire in one script), and no
                // SCRIPT LOAD: the scripts were loaded at connect.
                let per = r["commands"]["per_acquisition"].as_f64().unwrap();
                assert!(per >= 1.0, "{what}");
                assert!(
                    r["commands"]["by_command"].get("script|load").is_none(),
                    "{what}"
                );
                let f = &r["fairness"];
                assert_eq!(f["per_worker"].as_array().unwrap().len(), 3, "{what}");
            }
            _ => {
                assert!(r["read_write"].is_null(), "{what}");
                assert!(r["acquisitions_per_s"].is_null(), "{what}");
                assert!(
                    r["commands"]["per_waiter_per_s"].as_f64().unwrap() >= 0.0,
                    "{what}"
                );
                assert_eq!(r["acquisitions"], 0, "{what}");
            }
        }
    }
    let sweep = v["sweep"].as_array().unwrap();
    // --plot-waiters 1,2 with --clients 2: every waiter has its own client
    // already, so there is no second sweep.
    assert_eq!(sweep.len(), 2 * contenders.len());
    assert!(sweep
        .iter()
        .all(|p| p["acquisitions_per_s"].as_f64().unwrap() > 0.0 && p["clients"] == p["waiters"]));

    let plot = std::fs::read_to_string(&svg).unwrap();
    std::fs::remove_file(&svg).ok();
    assert!(plot.starts_with("<svg"), "not an SVG");
    // The second panel: what each contender's throughput costs in fairness.
    assert!(
        plot.contains("least / most"),
        "the plot has no least/most panel"
    );
    for c in contenders {
        assert!(
            plot.contains(&format!(">\n{c}\n<")),
            "the plot has no legend entry for {c}"
        );
    }

    for c in ["rw", "multi", "redlock", "rslock-3"] {
        assert!(
            !plot.contains(&format!(">\n{c}\n<")),
            "{c} is not in the contended sweep"
        );
    }
    assert!(!plot.contains("dashed:"), "a dashed sweep without its runs");

    let table = report.table();
    for s in scenarios
        .iter()
        .chain(&["read-mostly", "semaphore", "multi"])
    {
        assert!(
            table.contains(&format!("\n{s}:")),
            "table lacks {s}:\n{table}"
        );
    }
    assert!(
        table.contains("read-mostly: 3 waiters over 2 clients on one name, 50% writes"),
        "{table}"
    );
    assert!(table.contains("\nrw / lock: "), "{table}");
    assert!(
        table.contains("semaphore: 2 permits, 3 waiters over 2 clients taking one each, hold 0 ms"),
        "{table}"
    );
    assert!(table.contains("\nsem / sem-poll: "), "{table}");
    assert!(
        table.contains(
            "\n  lock: one Lock, multi: a MultiLock over 3 names, both on server 1; redlock, \
             rslock-3: one name on 3 servers (redis://127.0.0.1:"
        ),
        "{table}"
    );
    if cfg!(feature = "peers") {
        assert!(table.contains("\nredlock / rslock-3: "), "{table}");
    }
    if cfg!(feature = "peers") {
        assert!(!table.contains("skipped"), "{table}");
    }
    assert!(table.contains("PING p50"), "{table}");
    assert!(table.contains("How to read it:"), "{table}");
    for term in ["Jain", "least/most", "cmds/acq", "N.N×"] {
        assert!(
            table.contains(&format!("\n  {term}")),
            "legend lacks {term}:\n{table}"
        );
    }
}

/// `--plot` with waiter counts above `--clients` runs those again with one
/// client per waiter (the counts up to `--clients` are not run twice): the
/// JSON has both sweeps' points, the table a row for each, and the plot a
/// legend for solid and dashed.
#[tokio::test]
async fn the_plot_sweeps_with_one_client_per_waiter_too() {
    let svg = temp_path("sweep.svg");
    let args = bench_args(&[
        "--scenario",
        "contended",
        "--contender",
        "lock",
        "--duration",
        "150ms",
        "--waiters",
        "2",
        "--clients",
        "1",
        "--plot",
        svg.to_str().unwrap(),
        "--plot-waiters",
        "1,2",
    ]);
    let report = tokio::time::timeout(HANG, deadbolt_cli::bench(&args))
        .await
        .expect("hang")
        .expect("bench");
    report.write_plot(&svg).unwrap();

    let v: serde_json::Value = serde_json::from_str(&report.to_json().unwrap()).unwrap();
    let points: Vec<(u64, u64)> = v["sweep"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert_eq!(p["contender"], "lock");
            assert!(p["acquisitions_per_s"].as_f64().unwrap() > 0.0, "{p}");
            (
                p["waiters"].as_u64().unwrap(),
                p["clients"].as_u64().unwrap(),
            )
        })
        .collect();
    // Over --clients 1, then 2 waiters again over 2 clients.
    assert_eq!(points, [(1, 1), (2, 1), (2, 2)]);

    let table = report.table();
    let row = |label: &str| {
        table
            .lines()
            .find(|l| l.starts_with("lock") && l.contains(label))
            .unwrap_or_else(|| panic!("no {label} row:\n{table}"))
            .to_string()
    };
    assert!(table.contains("1 waiter  2 waiters"), "{table}");
    row("over 1 client");
    row("one per waiter");

    let plot = std::fs::read_to_string(&svg).unwrap();
    std::fs::remove_file(&svg).ok();
    assert!(plot.starts_with("<svg"), "not an SVG");
    for text in [
        "solid: over 1 client",
        "dashed: one client per waiter",
        "least / most",
    ] {
        assert!(plot.contains(text), "the plot lacks {text:?}");
    }
}

/// Calls of `command` on `server` so far.
async fn calls(server: &RedisServer, command: &str) -> u64 {
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    deadbolt_testkit::parse_commandstats(&info)
        .get(command)
        .copied()
        .unwrap_or(0)
}

/// Keys on `server`.
async fn dbsize(server: &RedisServer) -> u64 {
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    redis::cmd("DBSIZE").query_async(&mut conn).await.unwrap()
}

/// The multi scenario against servers of one's own: with `--redis` alone
/// the Redlock rows are skipped with a note under the table; with two
/// `--redlock-redis` they run over all three servers (which see their
/// commands), and every key of the run is deleted afterwards.
#[tokio::test]
async fn the_multi_scenario_with_redis_given() {
    let servers: Vec<RedisServer> = (0..3)
        .map(|_| RedisServer::start().expect("redis-server (apt-get install -y redis-server)"))
        .collect();
    let redlock_rows: &[&str] = if cfg!(feature = "peers") {
        &["redlock", "rslock-3"]
    } else {
        &["redlock"]
    };
    let url = servers[0].url();
    let alone = bench_args(&[&["--scenario", "multi", "--redis", &url], TINY].concat());
    let report = tokio::time::timeout(HANG, deadbolt_cli::bench(&alone))
        .await
        .expect("hang")
        .expect("bench");
    let ran: Vec<&str> = report.results.iter().map(|r| r.contender.name()).collect();
    assert_eq!(ran, ["lock", "multi"]);
    assert!(report.redis.redlock_urls.is_empty());
    // (Without the `peers` feature rslock-3 is skipped for that reason.)
    let skipped: Vec<&str> = report
        .skipped
        .iter()
        .filter(|s| {
            s.reason
                .starts_with("needs 3 servers: --redis was given without 2 ")
        })
        .map(|s| s.contender.name())
        .collect();
    assert_eq!(skipped, redlock_rows);
    let table = report.table();
    assert!(
        table.contains(&format!(
            "\n{} skipped: needs 3 servers: --redis was given without 2 --redlock-redis URLs",
            redlock_rows.join(", ")
        )),
        "{table}"
    );
    assert!(
        !table.contains("not run"),
        "noted once, under the table:\n{table}"
    );
    assert_eq!(calls(&servers[1], "evalsha").await, 0);

    // The Lock's scenarios leave the Redlock rows out without a note.
    let other = bench_args(
        &[
            &[
                "--scenario",
                "uncontended",
                "--contender",
                "lock",
                "--redis",
                &url,
            ],
            TINY,
        ]
        .concat(),
    );
    let report = tokio::time::timeout(HANG, deadbolt_cli::bench(&other))
        .await
        .expect("hang")
        .expect("bench");
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);

    let (url2, url3) = (servers[1].url(), servers[2].url());
    let all = bench_args(
        &[
            &[
                "--scenario",
                "multi",
                "--redis",
                &url,
                "--redlock-redis",
                &url2,
                "--redlock-redis",
                &url3,
            ],
            TINY,
        ]
        .concat(),
    );
    let report = tokio::time::timeout(HANG, deadbolt_cli::bench(&all))
        .await
        .expect("hang")
        .expect("bench");
    let ran: Vec<&str> = report.results.iter().map(|r| r.contender.name()).collect();
    assert_eq!(ran, [&["lock", "multi"], redlock_rows].concat());
    assert_eq!(report.skipped.is_empty(), cfg!(feature = "peers"));
    assert!(!report.redis.embedded);
    assert_eq!(report.redis.redlock_urls, [url2, url3]);
    for r in &report.results {
        assert_eq!((r.errors, r.exclusion_violations), (0, 0), "{r:?}");
        assert!(r.acquisitions > 0, "{r:?}");
    }
    // The Redlock rows took their locks on the other servers too.
    for server in &servers[1..] {
        assert!(calls(server, "evalsha").await > 0);
        if cfg!(feature = "peers") {
            assert!(calls(server, "set").await > 0);
        }
    }
    for server in &servers {
        assert_eq!(dbsize(server).await, 0, "the run's keys are deleted");
    }
}

#[tokio::test]
async fn inspect_and_force_unlock() {
    let server = RedisServer::start().expect("redis-server (apt-get install -y redis-server)");
    let client = deadbolt_core::Client::builder(&server.url())
        .namespace("it")
        .build()
        .await
        .unwrap();
    let lock = deadbolt_lock::Lock::new(&client, "orders:42");
    let inspect_args = InspectArgs {
        name: "orders:42".into(),
        kind: deadbolt_cli::PrimitiveKind::Lock,
        redis: server.url(),
        topology: deadbolt_cli::Topology::Standalone,
        sentinel_master: None,
        namespace: "it".into(),
    };

    let free = deadbolt_cli::inspect(&inspect_args).await.unwrap();
    assert_eq!(free.owner, None);
    assert_eq!(free.key, "it:{orders:42}:lock");

    let guard = lock.lock().await.unwrap();
    let held = deadbolt_cli::inspect(&inspect_args).await.unwrap();
    assert_eq!(held.owner.as_deref(), Some(lock.owner()));
    assert_eq!(held.hold_count, 1);
    assert_eq!(held.token, guard.fencing_token());
    assert_eq!(held.fence, guard.fencing_token());
    assert!(held.ttl.is_some_and(|t| t > Duration::ZERO));
    let shown = held.to_string();
    assert!(shown.contains(lock.owner()), "{shown}");
    assert!(shown.starts_with("lock orders:42  "), "{shown}");
    // A plain lock has no queue: no "queued" line.
    assert!(!shown.contains("queued"), "{shown}");

    // A FairLock of the same name is a different lock: free, with its own keys.
    let mut fair = inspect_args.clone();
    fair.kind = deadbolt_cli::PrimitiveKind::Fair;
    let f = deadbolt_cli::inspect(&fair).await.unwrap();
    assert_eq!(f.key, "it:{orders:42}:fair");
    assert_eq!(f.owner, None);
    assert_eq!(f.queued, 0);
    assert!(f.queue.is_empty());
    let shown = f.to_string();
    assert!(shown.starts_with("fair lock orders:42  "), "{shown}");
    assert!(shown.contains("queued      0"), "{shown}");

    // A held fair lock with two waiters: inspect lists them in queue order.
    let fair_holder = deadbolt_fair::FairLock::new(&client, "orders:42");
    let fair_guard = fair_holder.lock().await.unwrap();
    let w1 = deadbolt_fair::FairLock::new(&client, "orders:42");
    let w2 = deadbolt_fair::FairLock::new(&client, "orders:42");
    let (o1, o2) = (w1.owner().to_string(), w2.owner().to_string());
    let t1 = tokio::spawn(async move { w1.lock().await.unwrap().unlock().await.unwrap() });
    let mut seen = deadbolt_cli::inspect(&fair).await.unwrap();
    while seen.queued < 1 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        seen = deadbolt_cli::inspect(&fair).await.unwrap();
    }
    let t2 = tokio::spawn(async move { w2.lock().await.unwrap().unlock().await.unwrap() });
    while seen.queued < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        seen = deadbolt_cli::inspect(&fair).await.unwrap();
    }
    assert_eq!(seen.owner.as_deref(), Some(fair_holder.owner()));
    let owners: Vec<&str> = seen.queue.iter().map(|q| q.owner.as_str()).collect();
    assert_eq!(owners, [o1.as_str(), o2.as_str()]);
    assert!(seen.queue.iter().all(|q| q.alive_for.is_some()));
    let shown = seen.to_string();
    assert!(shown.contains(&o2), "{shown}");
    assert!(shown.contains("queued      2"), "{shown}");
    assert!(shown.contains("liveness left "), "{shown}");
    fair_guard.unlock().await.unwrap();
    t1.await.unwrap();
    t2.await.unwrap();
    // A semaphore of the same name is a different thing, with its own keys.
    let mut other = inspect_args.clone();
    other.kind = deadbolt_cli::PrimitiveKind::Semaphore;
    let sem = deadbolt_cli::inspect(&other).await.unwrap();
    assert_eq!(sem.key, "it:{orders:42}:sem");
    assert_eq!(sem.semaphore.unwrap().permits, None);

    let mut force = ForceUnlockArgs {
        target: inspect_args.clone(),
        yes: false,
    };
    assert!(deadbolt_cli::force_unlock(&force).await.is_err());
    assert!(
        lock.is_locked().await.unwrap(),
        "refused force-unlock changed nothing"
    );
    force.yes = true;
    let unlocked = deadbolt_cli::force_unlock(&force).await.unwrap();
    assert!(unlocked.hold && unlocked.removed_anything());
    assert_eq!(
        unlocked.to_string(),
        "orders:42: unlocked (the hold was deleted)"
    );
    assert!(!lock.is_locked().await.unwrap());
    let again = deadbolt_cli::force_unlock(&force).await.unwrap();
    assert!(!again.removed_anything(), "nothing left to delete");
    assert_eq!(
        again.to_string(),
        "orders:42: was not locked; nothing deleted"
    );
    assert_eq!(
        deadbolt_cli::inspect(&inspect_args).await.unwrap().owner,
        None
    );
    drop(guard);
    client.shutdown().await;
}

/// Run the binary off the runtime's thread (the test's clients keep
/// renewing meanwhile); its stdout, or a panic with its stderr.
async fn deadbolt_stdout(args: Vec<String>) -> String {
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_deadbolt"))
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .expect("run deadbolt")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `--kind rw`: a free read-write lock, one with a writer (and a writer
/// waiting behind it), one with two readers listed longest lease first;
/// force-unlock removes the readers (their unlocks then say so) and the
/// writer, and says what it removed. Through the library and the binary.
#[tokio::test]
async fn inspect_and_force_unlock_a_read_write_lock() {
    use deadbolt_cli::PrimitiveKind;
    use deadbolt_rwlock::RwLock;

    let server = RedisServer::start().expect("redis-server (apt-get install -y redis-server)");
    let client = deadbolt_core::Client::builder(&server.url())
        .namespace("it")
        .build()
        .await
        .unwrap();
    let target = InspectArgs {
        name: "catalog".into(),
        kind: PrimitiveKind::Rw,
        redis: server.url(),
        topology: deadbolt_cli::Topology::Standalone,
        sentinel_master: None,
        namespace: "it".into(),
    };
    let cli_args = |cmd: &str, extra: &[&str]| -> Vec<String> {
        [
            cmd,
            "catalog",
            "--kind",
            "rw",
            "--namespace",
            "it",
            "--redis",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .chain([server.url()])
        .chain(extra.iter().map(|s| (*s).to_string()))
        .collect()
    };

    // Free.
    let free = deadbolt_cli::inspect(&target).await.unwrap();
    assert_eq!(free.key, "it:{catalog}:rw");
    assert_eq!(free.owner, None);
    let rw = free.rw.as_ref().expect("read-write details");
    assert_eq!((rw.readers, rw.waiting_writers), (0, 0));
    assert!(rw.reader_list.is_empty() && rw.longest_lease.is_none());
    let shown = free.to_string();
    assert!(
        shown.starts_with(
            "read-write lock catalog  (key it:{catalog}:rw)\n  state       free\n  \
             writer      none\n  readers     0\n  waiting     0 writers\n"
        ),
        "{shown}"
    );

    // A writer, and a second writer waiting behind it.
    let writer = RwLock::new(&client, "catalog");
    let guard = writer.write().await.unwrap();
    let next = RwLock::new(&client, "catalog");
    let waiting = tokio::spawn(async move { next.write().await.unwrap().unlock().await.unwrap() });
    // Its mark is set by its first try: poll the state (no sleeping).
    let deadline = Instant::now() + HANG;
    while writer.inspect().await.unwrap().waiting_writers < 1 {
        assert!(Instant::now() < deadline, "the second writer never waited");
    }
    let held = deadbolt_cli::inspect(&target).await.unwrap();
    assert_eq!(held.owner.as_deref(), Some(writer.owner()));
    assert_eq!(held.hold_count, 1);
    assert_eq!(held.token, guard.fencing_token());
    assert_eq!(held.fence, guard.fencing_token());
    assert!(held.ttl.is_some_and(|t| t > Duration::ZERO));
    assert_eq!(held.rw.as_ref().unwrap().readers, 0);
    let shown = held.to_string();
    for line in [
        "  state       held (writing)\n".to_string(),
        format!("  writer      {}\n", writer.owner()),
        "  hold count  1\n".to_string(),
        format!("  token       {}\n", guard.fencing_token()),
        "  waiting     1 writer\n".to_string(),
    ] {
        assert!(shown.contains(&line), "{line:?} in\n{shown}");
    }
    let printed = deadbolt_stdout(cli_args("inspect", &[])).await;
    assert!(printed.contains("held (writing)"), "{printed}");
    assert!(printed.contains(writer.owner()), "{printed}");
    guard.unlock().await.unwrap();
    tokio::time::timeout(HANG, waiting).await.unwrap().unwrap();

    // Two readers with fixed leases: listed longest lease first.
    let long = RwLock::new(&client, "catalog");
    let short = RwLock::new(&client, "catalog");
    let r_long = long.read_with_lease(Duration::from_secs(40)).await.unwrap();
    let r_short = short
        .read_with_lease(Duration::from_secs(20))
        .await
        .unwrap();
    let reading = deadbolt_cli::inspect(&target).await.unwrap();
    assert_eq!(reading.owner, None);
    let rw = reading.rw.as_ref().unwrap();
    assert_eq!(rw.readers, 2);
    let owners: Vec<&str> = rw.reader_list.iter().map(|r| r.owner.as_str()).collect();
    assert_eq!(owners, [long.owner(), short.owner()]);
    let leases: Vec<Duration> = rw.reader_list.iter().map(|r| r.lease_left).collect();
    assert!(
        leases[0] > Duration::from_secs(20) && leases[0] <= Duration::from_secs(40),
        "{leases:?}"
    );
    assert!(
        leases[1] > Duration::ZERO && leases[1] <= Duration::from_secs(20),
        "{leases:?}"
    );
    assert_eq!(rw.longest_lease, Some(leases[0]));
    let shown = reading.to_string();
    for line in [
        "  state       held (reading)\n".to_string(),
        "  writer      none\n".to_string(),
        format!(
            "  readers     2  (longest lease left {:.1} s)\n",
            leases[0].as_secs_f64()
        ),
        format!(
            "      1. {}  attempt {}  lease left ",
            long.owner(),
            rw.reader_list[0].attempt
        ),
        format!("      2. {}  attempt ", short.owner()),
    ] {
        assert!(shown.contains(&line), "{line:?} in\n{shown}");
    }
    assert!(!shown.contains("hold count"), "{shown}");
    let printed = deadbolt_stdout(cli_args("inspect", &[])).await;
    assert!(
        printed.contains("  readers     2  (longest lease left "),
        "{printed}"
    );
    assert!(printed.contains(short.owner()), "{printed}");

    // force-unlock: refused without --yes, then removes both read holds.
    let mut force = ForceUnlockArgs {
        target: target.clone(),
        yes: false,
    };
    assert!(deadbolt_cli::force_unlock(&force).await.is_err());
    assert_eq!(
        long.reader_count().await.unwrap(),
        2,
        "refused changed nothing"
    );
    force.yes = true;
    let removed = deadbolt_cli::force_unlock(&force).await.unwrap();
    assert_eq!((removed.hold, removed.read_holds), (false, 2));
    assert_eq!(
        removed.to_string(),
        "catalog: unlocked (removed writer: no, read holds: 2)"
    );
    assert!(!long.is_locked().await.unwrap());
    assert!(matches!(
        r_long.unlock().await,
        Err(deadbolt_core::Error::NotHeld)
    ));
    assert!(matches!(
        r_short.unlock().await,
        Err(deadbolt_core::Error::NotHeld)
    ));

    // A writer, force-unlocked through the binary.
    let guard = writer.write().await.unwrap();
    let printed = deadbolt_stdout(cli_args("force-unlock", &["--yes"])).await;
    assert_eq!(
        printed,
        "catalog: unlocked (removed writer: yes, read holds: 0)\n"
    );
    assert!(!writer.is_locked().await.unwrap());
    assert!(matches!(
        guard.unlock().await,
        Err(deadbolt_core::Error::NotHeld)
    ));
    let printed = deadbolt_stdout(cli_args("force-unlock", &["--yes"])).await;
    assert_eq!(printed, "catalog: was not locked; nothing deleted\n");
    let after = deadbolt_cli::inspect(&target).await.unwrap();
    assert_eq!(after.owner, None);
    assert_eq!(after.rw.unwrap().readers, 0);
    client.shutdown().await;
}

/// `--kind semaphore`: never set; then 3 permits with a holder of 2 (fixed
/// 40 s lease) and one of 1 (the watchdog's 30 s), listed longest lease
/// first, and a waiter for 2 behind them, asleep while 1 is free and served
/// once 2 are; force-unlock is refused. Through the library and the binary.
#[tokio::test]
async fn inspect_a_semaphore() {
    use deadbolt_cli::PrimitiveKind;
    use deadbolt_semaphore::Semaphore;

    let server = RedisServer::start().expect("redis-server (apt-get install -y redis-server)");
    let client = deadbolt_core::Client::builder(&server.url())
        .namespace("it")
        .build()
        .await
        .unwrap();
    let target = InspectArgs {
        name: "pool".into(),
        kind: PrimitiveKind::Semaphore,
        redis: server.url(),
        topology: deadbolt_cli::Topology::Standalone,
        sentinel_master: None,
        namespace: "it".into(),
    };
    let cli_args = |cmd: &str, extra: &[&str]| -> Vec<String> {
        [
            cmd,
            "pool",
            "--kind",
            "semaphore",
            "--namespace",
            "it",
            "--redis",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .chain([server.url()])
        .chain(extra.iter().map(|s| (*s).to_string()))
        .collect()
    };

    // Never set.
    let never = deadbolt_cli::inspect(&target).await.unwrap();
    assert_eq!(never.key, "it:{pool}:sem");
    assert_eq!((never.owner.as_deref(), never.rw.as_ref()), (None, None));
    let sem = never.semaphore.as_ref().expect("semaphore details");
    assert_eq!(sem.permits, None);
    assert_eq!((sem.available, sem.holds, sem.waiting), (0, 0, 0));
    assert!(sem.holders.is_empty() && sem.waiters.is_empty());
    assert_eq!(
        never.to_string(),
        "semaphore pool  (key it:{pool}:sem)\n  permits     never set (acquires wait until \
         they are set)\n  available   0\n  holders     0\n  waiting     0\n"
    );
    let printed = deadbolt_stdout(cli_args("inspect", &[])).await;
    assert_eq!(printed, never.to_string());

    // Two holders and a waiter.
    let pool = Semaphore::new(&client, "pool");
    assert!(pool.try_set_permits(3).await.unwrap());
    let long = pool
        .acquire_with_lease(2, Duration::from_secs(40))
        .await
        .unwrap();
    let short = pool.acquire(1).await.unwrap();
    let other = Semaphore::new(&client, "pool");
    let waiting = tokio::spawn(async move { other.acquire(2).await.unwrap() });
    // Its entry is written by its first try: poll the state (no sleeping).
    let deadline = Instant::now() + HANG;
    while pool.inspect().await.unwrap().waiting < 1 {
        assert!(Instant::now() < deadline, "the waiter never queued");
    }
    let busy = deadbolt_cli::inspect(&target).await.unwrap();
    let sem = busy.semaphore.as_ref().unwrap();
    assert_eq!(sem.permits, Some(3));
    assert_eq!((sem.available, sem.holds, sem.waiting), (0, 2, 1));
    let held: Vec<u64> = sem.holders.iter().map(|h| h.permits).collect();
    assert_eq!(held, [2, 1], "longest lease first");
    let leases: Vec<Duration> = sem.holders.iter().map(|h| h.lease_left).collect();
    assert!(
        leases[0] > Duration::from_secs(30) && leases[0] <= Duration::from_secs(40),
        "{leases:?}"
    );
    assert!(
        leases[1] > Duration::ZERO && leases[1] <= Duration::from_secs(30),
        "{leases:?}"
    );
    let holder_owner = &sem.holders[0].owner;
    assert!(holder_owner.starts_with(client.id()), "{holder_owner}");
    assert_eq!(&sem.holders[1].owner, holder_owner, "one handle took both");
    assert_eq!(sem.waiters.len(), 1);
    let w = &sem.waiters[0];
    assert_eq!((w.permits, w.woken), (2, false));
    assert!(w.owner.starts_with(client.id()) && &w.owner != holder_owner);
    let shown = busy.to_string();
    for line in [
        "  permits     3\n".to_string(),
        "  available   0\n".to_string(),
        "  holders     2\n".to_string(),
        format!(
            "      1. {holder_owner}  2 permits  lease left {:.1} s  attempt {}\n",
            leases[0].as_secs_f64(),
            sem.holders[0].attempt
        ),
        format!("      2. {holder_owner}  1 permit  lease left "),
        "  waiting     1\n".to_string(),
        format!(
            "      1. {}  wants 2 permits  asleep  attempt {}\n",
            w.owner, w.attempt
        ),
    ] {
        assert!(shown.contains(&line), "{line:?} in\n{shown}");
    }
    assert!(!shown.contains("fence"), "{shown}");
    let printed = deadbolt_stdout(cli_args("inspect", &[])).await;
    for line in [
        "  holders     2\n",
        "  1 permit  ",
        "wants 2 permits  asleep",
    ] {
        assert!(printed.contains(line), "{line:?} in\n{printed}");
    }

    // One permit back: not enough for the waiter, which stays asleep.
    short.release().await.unwrap();
    let one_free = deadbolt_cli::inspect(&target).await.unwrap();
    let sem = one_free.semaphore.as_ref().unwrap();
    assert_eq!((sem.available, sem.holds, sem.waiting), (1, 1, 1));
    assert!(!sem.waiters[0].woken);

    // Two more: the waiter takes its two.
    long.release().await.unwrap();
    let got = tokio::time::timeout(HANG, waiting).await.unwrap().unwrap();
    assert_eq!(got.count(), 2);
    let served = deadbolt_cli::inspect(&target).await.unwrap();
    let sem = served.semaphore.as_ref().unwrap();
    assert_eq!((sem.available, sem.holds, sem.waiting), (1, 1, 0));
    assert_eq!(sem.holders[0].permits, 2);
    assert_ne!(&sem.holders[0].owner, holder_owner);

    // force-unlock does not take permits away: refused, nothing changed.
    let force = ForceUnlockArgs {
        target: target.clone(),
        yes: true,
    };
    let err = deadbolt_cli::force_unlock(&force).await.unwrap_err();
    assert!(
        format!("{err:#}").starts_with("force-unlock --kind semaphore is not supported: "),
        "{err:#}"
    );
    let out = tokio::task::spawn_blocking({
        let args = cli_args("force-unlock", &["--yes"]);
        move || {
            Command::new(env!("CARGO_BIN_EXE_deadbolt"))
                .args(&args)
                .stdin(Stdio::null())
                .output()
                .expect("run deadbolt")
        }
    })
    .await
    .unwrap();
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not supported"),
        "{out:?}"
    );
    assert_eq!(pool.available_permits().await.unwrap(), 1);
    got.release().await.unwrap();
    assert_eq!(pool.available_permits().await.unwrap(), 3);
    client.shutdown().await;
}

/// A key of another type where the lock's hold should be: inspect and
/// force-unlock refuse it, name the type they found, and delete nothing; the
/// binary exits non-zero.
#[tokio::test]
async fn a_key_of_another_type_is_refused() {
    let server = RedisServer::start().expect("redis-server (apt-get install -y redis-server)");
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("it:{x}:lock")
        .arg("user data")
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg("it:{x}:fair")
        .arg("user data")
        .query_async(&mut conn)
        .await
        .unwrap();
    let target = InspectArgs {
        name: "x".into(),
        kind: deadbolt_cli::PrimitiveKind::Lock,
        redis: server.url(),
        topology: deadbolt_cli::Topology::Standalone,
        sentinel_master: None,
        namespace: "it".into(),
    };
    let force = ForceUnlockArgs {
        target: target.clone(),
        yes: true,
    };
    let err = deadbolt_cli::force_unlock(&force).await.unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "refused: it:{x}:lock holds a string, not a lock"
    );
    let err = deadbolt_cli::inspect(&target).await.unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "refused: it:{x}:lock holds a string, not a lock"
    );
    let mut fair = force.clone();
    fair.target.kind = deadbolt_cli::PrimitiveKind::Fair;
    let err = deadbolt_cli::force_unlock(&fair).await.unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "refused: it:{x}:fair holds a list, not a fair lock"
    );
    let _: () = redis::cmd("SADD")
        .arg("it:{x}:rw")
        .arg("user data")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut rw = force.clone();
    rw.target.kind = deadbolt_cli::PrimitiveKind::Rw;
    for err in [
        deadbolt_cli::force_unlock(&rw).await.unwrap_err(),
        deadbolt_cli::inspect(&rw.target).await.unwrap_err(),
    ] {
        assert_eq!(
            format!("{err:#}"),
            "refused: it:{x}:rw holds a set, not a read-write lock"
        );
    }

    let _: () = redis::cmd("SET")
        .arg("it:{x}:sem")
        .arg("user data")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut sem = target.clone();
    sem.kind = deadbolt_cli::PrimitiveKind::Semaphore;
    let err = deadbolt_cli::inspect(&sem).await.unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "refused: it:{x}:sem holds a string, not a semaphore"
    );

    // The binary: a message on stderr, a non-zero exit, nothing deleted.
    let out = Command::new(env!("CARGO_BIN_EXE_deadbolt"))
        .args([
            "force-unlock",
            "x",
            "--yes",
            "--namespace",
            "it",
            "--redis",
            &server.url(),
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run deadbolt");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        stderr.contains("refused: it:{x}:lock holds a string, not a lock"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("unlocked"));

    let value: String = redis::cmd("GET")
        .arg("it:{x}:lock")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "user data", "the refused key was changed");
    let len: u64 = redis::cmd("LLEN")
        .arg("it:{x}:fair")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(len, 1, "the refused fair key was changed");
    let members: u64 = redis::cmd("SCARD")
        .arg("it:{x}:rw")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(members, 1, "the refused read-write key was changed");
    let value: String = redis::cmd("GET")
        .arg("it:{x}:sem")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "user data", "the refused semaphore key was changed");
}

/// The binary, stopped by Ctrl-C mid-run: it stops its redis-server, prints
/// the partial table and exits with 130.
#[test]
fn ctrl_c_stops_the_embedded_server() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_deadbolt"))
        .args([
            "bench",
            "--scenario",
            "contended",
            "--contender",
            "lock",
            "--duration",
            "60s",
            "--pin",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn deadbolt");
    // Read stderr on a thread to the end: closing the pipe early would make
    // the child's later notes fail.
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut port = None;
    let mut lines = Vec::new();
    while let Ok(line) = rx.recv_timeout(HANG) {
        if line.contains("started redis-server") {
            port = line
                .split("on 127.0.0.1:")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|p| p.parse::<u16>().ok());
            break;
        }
        lines.push(line);
    }
    let port = port.unwrap_or_else(|| panic!("no start line on stderr: {lines:?}"));
    assert!(!port_closed(port), "the server should be up");

    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(status.success());

    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > HANG {
            child.kill().ok();
            panic!("deadbolt did not exit after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert_eq!(status.code(), Some(130), "stdout: {stdout}");
    assert!(stdout.contains("INTERRUPTED"), "stdout: {stdout}");
    assert!(
        port_closed(port),
        "redis-server still listens on {port} after Ctrl-C"
    );
    reader.join().unwrap();
    let notes: Vec<String> = rx.try_iter().collect();
    assert!(
        notes.iter().any(|l| l.contains("stopped redis-server")),
        "{notes:?}"
    );
}
