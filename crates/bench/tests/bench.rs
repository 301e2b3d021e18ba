//! The `deadbolt-bench` command against real redis-server processes:
//! argument errors, the embedded server's life cycle (also on error and
//! Ctrl-C), the JSON report, every scenario with every contender.
//!
//! Sizes are tiny and nothing asserts speed: the only time bounds catch hangs.

mod common;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use deadbolt_bench::BenchCli;
use deadbolt_testkit::support::{port_closed, port_of};
use deadbolt_testkit::RedisServer;
use serde_json::Value;

use common::{bench_args, temp_path, HANG};

fn parse(args: &[&str]) -> Result<BenchCli, clap::Error> {
    BenchCli::try_parse_from(std::iter::once("deadbolt-bench").chain(args.iter().copied()))
}

/// Tiny sizes: every run ends quickly whatever the contender.
const TINY: &[&str] = &[
    "--duration",
    "150ms",
    "--names",
    "40",
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
    assert!(parse(&["--scenario", "nope"]).is_err());
    assert!(parse(&["--scenario", "idle,nope"]).is_err());
    assert!(parse(&["--contender", "hazelcast"]).is_err());
    assert_eq!(
        bench_args(&["--contender", "redisson,redisson-fair"]).contenders,
        [
            deadbolt_bench::ContenderKind::Redisson,
            deadbolt_bench::ContenderKind::RedissonFair
        ]
    );
    assert!(parse(&["--duration", "soon"]).is_err());
    assert!(parse(&["--write-ratio", "1.5"]).is_err());
    assert!(parse(&["--write-ratio", "-0.1"]).is_err());
    assert!(parse(&["--write-ratio", "NaN"]).is_err());
    assert!(parse(&["--write-ratio", "10%"]).is_err());
    assert!(parse(&["--permits", "-1"]).is_err());
    assert_eq!(bench_args(&[]).permits, 4);
    assert_eq!(
        bench_args(&["--scenario", "semaphore"]).scenarios,
        [deadbolt_bench::ScenarioKind::Semaphore]
    );
    assert_eq!(
        bench_args(&["--scenario", "multi"]).scenarios,
        [deadbolt_bench::ScenarioKind::Multi]
    );
    assert_eq!(
        bench_args(&["--contender", "multi,redlock,rslock-3"]).contenders,
        [
            deadbolt_bench::ContenderKind::Multi,
            deadbolt_bench::ContenderKind::Redlock,
            deadbolt_bench::ContenderKind::Rslock3
        ]
    );
    assert!(parse(&["--contender", "rslock3"]).is_err());
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
    let err = deadbolt_bench::bench(&bench_args(&["--tasks", "0"]))
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
            "--scenario contended measures only lock, fair, raw-poll, rslock, redisson, \
             redisson-fair (not rw)",
        ),
        (
            &["--scenario", "semaphore", "--contender", "lock,raw-poll"],
            "--scenario semaphore measures only sem, sem-poll (not lock, raw-poll)",
        ),
        (
            &["--scenario", "idle", "--contender", "sem"],
            "--scenario idle measures only lock, fair, raw-poll, rslock, redisson, redisson-fair \
             (not sem)",
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
        let err = deadbolt_bench::bench_with(&bench_args(flags), |url| {
            panic!("{flags:?} started a server at {url} before refusing")
        })
        .await
        .unwrap_err();
        assert_eq!(format!("{err:#}"), expected, "{flags:?}");
    }
    #[cfg(not(feature = "peers"))]
    {
        let err = deadbolt_bench::bench(&bench_args(&["--contender", "rslock"]))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not available"), "{err:#}");
    }
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
        let err = deadbolt_bench::bench_with(&args, |url| {
            panic!("{flags:?} started a server at {url} before refusing")
        })
        .await
        .unwrap_err();
        assert!(format!("{err:#}").contains(&expected), "{flags:?}: {err:#}");
    }
    assert!(!png.exists(), "a refused --plot left a file");

    // The binary says so on stderr and exits non-zero, without starting
    // redis-server (called with a leading `bench`, as `deadbolt bench` was).
    let out = Command::new(env!("CARGO_BIN_EXE_deadbolt-bench"))
        .args(["bench", "--json", "/nonexistent/dir/x.json"])
        .stdin(Stdio::null())
        .output()
        .expect("run deadbolt-bench");
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
        deadbolt_bench::bench_with(&args, move |u| *seen.lock().unwrap() = u.to_string()),
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
        deadbolt_bench::bench_with(&args, move |u| *seen.lock().unwrap() = u.to_string()),
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

/// One bench of every scenario with every contender (the default
/// selection, tiny sizes), its JSON report and SVG plot written and read
/// back: the file's longest run, which the checks below share.
struct FullRun {
    report: deadbolt_bench::Report,
    /// The report as `write_json` wrote it.
    json: Value,
    /// The plot as `write_plot` wrote it.
    plot: String,
}

/// The shared run, made by the first test that asks for it while the
/// others wait; a failed run fails each of them with its message.
///
/// libtest starts tests in name order, so the run starts with the file's
/// first test ([`a_plot_other_than_svg_is_refused_and_leaves_no_file`]),
/// the other tests run beside it, and the checks in
/// [`the_run_of_every_scenario`], named to come after the slow ones, find
/// it done instead of holding a test thread while they wait. The order only
/// saves time: any order gives the same verdicts.
fn full_run() -> &'static FullRun {
    static RUN: OnceLock<Result<FullRun, String>> = OnceLock::new();
    let run = RUN.get_or_init(|| {
        std::panic::catch_unwind(run_every_scenario).map_err(|panic| {
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
                .unwrap_or_default()
        })
    });
    match run {
        Ok(run) => run,
        Err(panic) => panic!("the run of every scenario failed: {panic}"),
    }
}

fn run_every_scenario() -> FullRun {
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
    // Its own runtime: the tests that share the run each have their own
    // thread, and any of them may be the one that makes it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = runtime
        .block_on(async { tokio::time::timeout(HANG * 2, deadbolt_bench::bench(&args)).await })
        .expect("hang")
        .expect("bench");
    report.write_json(&json).unwrap();
    report.write_plot(&svg).unwrap();
    let v = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).ok();
    let plot = std::fs::read_to_string(&svg).unwrap();
    std::fs::remove_file(&svg).ok();
    FullRun {
        report,
        json: v,
        plot,
    }
}

/// The contenders of the general scenarios, in run order.
fn contenders() -> &'static [&'static str] {
    if cfg!(feature = "peers") {
        &[
            "lock",
            "fair",
            "raw-poll",
            "rslock",
            "redisson",
            "redisson-fair",
        ]
    } else {
        &["lock", "fair", "raw-poll", "redisson", "redisson-fair"]
    }
}

/// The general scenarios.
const SCENARIOS: [&str; 4] = ["uncontended", "contended", "handoff", "idle"];
/// The Lock with a write under each hold: the uncontended scenario only.
const WITH_WRITE: [&str; 2] = ["lock-incr", "lock-guarded"];
/// The read-mostly scenario measures the read-write lock beside the Lock,
const READ_MOSTLY: [&str; 2] = ["lock", "rw"];
/// the semaphore scenario the two semaphores.
const SEMAPHORES: [&str; 2] = ["sem", "sem-poll"];

/// The multi scenario's contenders besides the Lock: the MultiLock and the
/// two Redlocks over 3 embedded servers.
fn multi_only() -> &'static [&'static str] {
    if cfg!(feature = "peers") {
        &["multi", "redlock", "rslock-3"]
    } else {
        &["multi", "redlock"]
    }
}

/// The multi scenario's contenders.
fn multi() -> Vec<&'static str> {
    [&["lock"], multi_only()].concat()
}

/// Every (scenario, contender) run but the names scenario's.
fn runs() -> Vec<(&'static str, &'static str)> {
    SCENARIOS
        .iter()
        .flat_map(|s| contenders().iter().map(move |c| (*s, *c)))
        .chain(WITH_WRITE.iter().map(|c| ("uncontended", *c)))
        .chain(READ_MOSTLY.iter().map(|c| ("read-mostly", *c)))
        .chain(SEMAPHORES.iter().map(|c| ("semaphore", *c)))
        .chain(multi().into_iter().map(|c| ("multi", c)))
        .collect()
}

/// The report's result rows.
fn results() -> &'static [Value] {
    full_run().json["results"].as_array().unwrap()
}

/// The first row of `s` / `c` (the flags' row, where a service row follows
/// it), and what to call it in a failure.
fn row(s: &str, c: &str) -> (&'static Value, String) {
    let r = results()
        .iter()
        .find(|r| r["scenario"] == s && r["contender"] == c)
        .unwrap_or_else(|| panic!("no result for {s} / {c}"));
    (r, format!("{s} / {c}: {r:#}"))
}

/// Each run of scenario `s`: its contender, and its [`row`].
fn rows_of(s: &str) -> Vec<(&'static str, &'static Value, String)> {
    runs()
        .into_iter()
        .filter(|(scenario, _)| *scenario == s)
        .map(|(s, c)| {
            let (r, what) = row(s, c);
            (c, r, what)
        })
        .collect()
}

/// A latency summary with every field, its median under its maximum.
fn latency(l: &Value, what: &str) {
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
}

#[test]
fn a_plot_other_than_svg_is_refused_and_leaves_no_file() {
    let png = temp_path("plot.png");
    let err = full_run().report.write_plot(&png).unwrap_err();
    assert!(format!("{err:#}").contains("only SVG"), "{err:#}");
    assert!(!png.exists(), "a refused plot left a file");
}

/// The checks of the shared run ([`full_run`]).
mod the_run_of_every_scenario {
    use super::*;

    #[test]
    fn writes_a_json_report_with_every_field() {
        let v = &full_run().json;
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
            "handoff_floor_us",
        ] {
            assert!(v.get(key).is_some(), "report lacks {key}");
        }
        assert_eq!(v["schema"], deadbolt_bench::REPORT_SCHEMA);
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
            "think_ms",
            "service",
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
        assert_eq!(v["settings"]["write_ratio"], 0.5);
        assert_eq!(v["settings"]["permits"], 2);
    }

    /// The two more servers of the Redlock rows were started, and stopped
    /// with the first one.
    #[test]
    fn stops_every_server_it_started() {
        let redis = &full_run().json["redis"];
        let redlock_urls: Vec<&str> = redis["redlock_urls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u.as_str().unwrap())
            .collect();
        assert_eq!(redlock_urls.len(), 2, "{redis:#}");
        for url in redlock_urls.iter().chain([&redis["url"].as_str().unwrap()]) {
            let port = port_of(url);
            assert!(
                port_closed(port),
                "redis-server still listens on {port} after the run"
            );
        }
    }

    #[test]
    fn lists_every_contender_and_scenario_in_run_order() {
        let settings = &full_run().json["settings"];
        let names = |key: &str| -> Vec<&str> {
            settings[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap())
                .collect()
        };
        let contenders = contenders();
        assert_eq!(
            names("contenders"),
            [
                &contenders[..1],
                &WITH_WRITE,
                &contenders[1..],
                &["rw"],
                &SEMAPHORES,
                multi_only()
            ]
            .concat()
        );
        assert_eq!(
            names("scenarios"),
            [
                &SCENARIOS[..],
                &["read-mostly", "semaphore", "multi", "names"]
            ]
            .concat()
        );
    }

    #[test]
    fn has_a_row_with_every_field_and_no_error_for_each_run() {
        // Contended, read-mostly and semaphore run each contender twice: at
        // --hold and --think, then in the service rows.
        let contenders = contenders().len();
        assert_eq!(
            results().len(),
            (SCENARIOS.len() + 1) * contenders
                + WITH_WRITE.len()
                + 2 * READ_MOSTLY.len()
                + 2 * SEMAPHORES.len()
                + multi().len()
                + contenders
        );
        for (s, c) in runs() {
            let (r, what) = row(s, c);
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
                "redis_cpu_us",
                "redis_cpu_source",
                "client_cpu_us",
                "redis_cpu_us_per_acquisition",
                "client_cpu_us_per_acquisition",
            ] {
                assert!(
                    r["commands"].get(key).is_some(),
                    "{what} lacks commands.{key}"
                );
            }
            assert_eq!(r["errors"], 0, "{what}");
            assert_eq!(r["exclusion_violations"], 0, "{what}");
        }
    }

    /// 40 names, each locked and released once, on an emptied server:
    /// deadbolt leaves its slots' fencing counters (at most one per name
    /// here), the SET NX locks nothing.
    #[test]
    fn names_leave_only_deadbolts_fencing_counters() {
        for r in results().iter().filter(|r| r["scenario"] == "names") {
            let what = format!("names / {}", r["contender"]);
            let left = &r["left"];
            assert_eq!(left["names"], 40, "{what}");
            assert_eq!(left["emptied"], true, "{what}");
            assert_eq!(r["acquisitions"], 40, "{what}");
            let keys = left["keys"].as_i64().unwrap();
            if r["contender"] == "lock" || r["contender"] == "fair" {
                assert!((1..=40).contains(&keys), "{what}: {keys} keys left");
            } else {
                assert_eq!(keys, 0, "{what}");
            }
        }
    }

    /// Every throughput row has its cost, from the embedded server's own
    /// counters and this process's rusage.
    #[test]
    fn prices_every_throughput_row_in_redis_and_client_cpu() {
        for r in results() {
            let what = format!("{} / {}", r["scenario"], r["contender"]);
            if r["acquisitions_per_s"].is_number() {
                let cmds = &r["commands"];
                assert_eq!(cmds["redis_cpu_source"], "server", "{what}");
                for key in [
                    "redis_cpu_us_per_acquisition",
                    "client_cpu_us_per_acquisition",
                ] {
                    assert!(cmds[key].as_f64().unwrap() > 0.0, "{what}: {key}");
                }
            }
        }
    }

    /// The many-waiter scenarios run the flags' rows (no hold, no think
    /// here), then service rows (1 ms hold, 2 ms think); the ceiling is
    /// limit / (the hold as measured + the hand-off floor).
    #[test]
    fn runs_service_rows_with_their_ceilings() {
        let floor = full_run().json["handoff_floor_us"].as_f64().unwrap();
        assert!(floor > 0.0, "the hand-off floor was measured");
        for r in results() {
            let what = format!("{} / {}", r["scenario"], r["contender"]);
            let scenario = r["scenario"].as_str().unwrap();
            if ["contended", "semaphore", "read-mostly"].contains(&scenario) {
                let work = &r["work"];
                let service = work["service"].as_bool().unwrap();
                let (hold, think) = if service { (1.0, 2.0) } else { (0.0, 0.0) };
                assert_eq!(work["hold_ms"].as_f64(), Some(hold), "{what}");
                assert_eq!(work["think_ms"].as_f64(), Some(think), "{what}");
            }
            if ["contended", "semaphore"].contains(&scenario) {
                let held = r["work"]["held_us"].as_f64().unwrap();
                if r["work"]["service"] == true {
                    assert!(held >= 1000.0, "{what}: a 1 ms hold lasted {held} µs");
                }
                let limit = if scenario == "semaphore" { 2.0 } else { 1.0 };
                let ceiling = r["ceiling_per_s"].as_f64().unwrap();
                assert!(
                    (ceiling - limit * 1e6 / (held + floor)).abs() < 1e-6 * ceiling,
                    "{what}"
                );
                let share = r["of_ceiling"].as_f64().unwrap();
                let rate = r["acquisitions_per_s"].as_f64().unwrap();
                assert!((share - rate / ceiling).abs() < 1e-9, "{what}");
            }
        }
        for s in ["contended", "read-mostly", "semaphore"] {
            assert!(
                results()
                    .iter()
                    .any(|r| r["scenario"] == s && r["work"]["service"] == true),
                "{s} has service rows"
            );
        }
    }

    /// One round trip to acquire and one to release, uncontended, and one
    /// more for a write under the hold; the SET NX locks load their release
    /// script on first use.
    #[test]
    fn measures_uncontended_round_trips() {
        for (c, r, what) in rows_of("uncontended") {
            assert!(r["acquisitions"].as_u64().unwrap() > 0, "{what}");
            assert!(r["acquisitions_per_s"].as_f64().unwrap() > 0.0, "{what}");
            latency(&r["acquire"], &what);
            latency(&r["acquire_release"], &what);
            let per = r["commands"]["per_acquisition"].as_f64().unwrap();
            if c == "lock" {
                assert_eq!(per, 2.0, "{what}");
            } else if WITH_WRITE.contains(&c) {
                assert_eq!(per, 3.0, "{what}");
            } else {
                assert!((2.0..2.5).contains(&per), "{what}");
            }
        }
    }

    #[test]
    fn measures_semaphore_permits_shared_by_every_waiter() {
        for (c, r, what) in rows_of("semaphore") {
            assert_eq!(
                (r["workers"].as_u64(), r["clients"].as_u64()),
                (Some(3), Some(2))
            );
            assert!(r["acquisitions"].as_u64().unwrap() > 0, "{what}");
            assert!(r["acquisitions_per_s"].as_f64().unwrap() > 0.0, "{what}");
            latency(&r["acquire"], &what);
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
            // One call at least (a Lock's local hand-off is a release and
            // an acquire in one script), and no SCRIPT LOAD: both load
            // their scripts at connect.
            let per = r["commands"]["per_acquisition"].as_f64().unwrap();
            assert!(per >= 1.0, "{what}");
            let by_command = &r["commands"]["by_command"];
            assert!(by_command.get("script|load").is_none(), "{what}");
            if c == "sem-poll" {
                // One ZREM per release, none inside the script.
                assert_eq!(by_command["zrem"], r["acquisitions"], "{what}");
            }
        }
    }

    #[test]
    fn measures_multi_locks_over_every_key_and_server() {
        for (c, r, what) in rows_of("multi") {
            assert_eq!(
                (r["workers"].as_u64(), r["clients"].as_u64()),
                (Some(2), Some(1)),
                "{what}"
            );
            let acquisitions = r["acquisitions"].as_u64().unwrap();
            assert!(acquisitions > 0, "{what}");
            assert!(r["acquisitions_per_s"].as_f64().unwrap() > 0.0, "{what}");
            latency(&r["acquire"], &what);
            latency(&r["acquire_release"], &what);
            assert_eq!(r["acquire_release"]["samples"], acquisitions, "{what}");
            // Each sample's acquire is part of its acquire+release.
            for q in ["p50_us", "p99_us", "max_us"] {
                assert!(
                    r["acquire"][q].as_f64().unwrap() <= r["acquire_release"][q].as_f64().unwrap(),
                    "{what}"
                );
            }
            assert!(r["fairness"].is_null() && r["handoff"].is_null(), "{what}");
            // An acquire and a release per key or server, over every server
            // of the run: 1 key for the Lock, 3 servers for the Redlocks;
            // the MultiLock takes its 3 plain locks in one script and
            // releases each. deadbolt's scripts were loaded at connect;
            // rslock loads its release script on first use on each server.
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
    }

    #[test]
    fn measures_contended_fairness_over_every_waiter() {
        for (_, r, what) in rows_of("contended") {
            assert!(r["acquisitions"].as_u64().unwrap() > 0, "{what}");
            latency(&r["acquire"], &what);
            let f = &r["fairness"];
            assert_eq!(f["per_worker"].as_array().unwrap().len(), 3, "{what}");
            let jain = f["jain_index"].as_f64().unwrap();
            assert!((1.0 / 3.0 - 1e-9..=1.0 + 1e-9).contains(&jain), "{what}");
            assert!(f["longest_wait_us"].as_f64().unwrap() > 0.0, "{what}");
        }
    }

    #[test]
    fn measures_each_handoff() {
        for (_, r, what) in rows_of("handoff") {
            assert!(r["rounds"].as_u64().unwrap() >= 1, "{what}");
            latency(&r["handoff"], &what);
        }
    }

    #[test]
    fn measures_reads_and_writes_apart_in_read_mostly() {
        for (_, r, what) in rows_of("read-mostly") {
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
            latency(&r["acquire"], &what);
            latency(&m["read_acquire"], &what);
            latency(&m["write_acquire"], &what);
            assert_eq!(m["read_acquire"]["samples"], reads, "{what}");
            assert_eq!(m["write_acquire"]["samples"], writes, "{what}");
            assert_eq!(r["acquire"]["samples"], ops, "{what}");
            // At least one call per operation (a Lock's local hand-off is
            // a release and the next acquire in one script), and no SCRIPT
            // LOAD: the scripts were loaded at connect.
            let per = r["commands"]["per_acquisition"].as_f64().unwrap();
            assert!(per >= 1.0, "{what}");
            assert!(
                r["commands"]["by_command"].get("script|load").is_none(),
                "{what}"
            );
            let f = &r["fairness"];
            assert_eq!(f["per_worker"].as_array().unwrap().len(), 3, "{what}");
        }
    }

    #[test]
    fn counts_idle_commands_without_acquisitions() {
        for (_, r, what) in rows_of("idle") {
            assert!(r["read_write"].is_null(), "{what}");
            assert!(r["acquisitions_per_s"].is_null(), "{what}");
            assert!(
                r["commands"]["per_waiter_per_s"].as_f64().unwrap() >= 0.0,
                "{what}"
            );
            assert_eq!(r["acquisitions"], 0, "{what}");
        }
    }

    /// --plot-waiters 1,2 with --clients 2: every waiter has its own client
    /// already, so there is no second sweep.
    #[test]
    fn sweeps_once_when_every_waiter_has_its_own_client() {
        let sweep = full_run().json["sweep"].as_array().unwrap();
        assert_eq!(sweep.len(), 2 * contenders().len());
        assert!(sweep.iter().all(|p| {
            p["acquisitions_per_s"].as_f64().unwrap() > 0.0 && p["clients"] == p["waiters"]
        }));
    }

    #[test]
    fn plots_each_swept_contender_and_no_other() {
        let plot = &full_run().plot;
        assert!(plot.starts_with("<svg"), "not an SVG");
        // The second panel: what each contender's throughput costs in
        // fairness.
        assert!(
            plot.contains("least / most"),
            "the plot has no least/most panel"
        );
        for c in contenders() {
            assert!(
                plot.contains(&format!(">\n{c}\n<")),
                "the plot has no legend entry for {c}"
            );
        }
        for c in [
            "rw",
            "multi",
            "redlock",
            "rslock-3",
            "lock-incr",
            "lock-guarded",
        ] {
            assert!(
                !plot.contains(&format!(">\n{c}\n<")),
                "{c} is not in the contended sweep"
            );
        }
        assert!(!plot.contains("dashed:"), "a dashed sweep without its runs");
    }

    #[test]
    fn tables_every_scenario_with_its_legend() {
        let table = full_run().report.table();
        for s in SCENARIOS
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
            table.contains(
                "semaphore: 2 permits, 3 waiters over 2 clients taking one each, hold 0 ms"
            ),
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
        for term in [
            "Jain",
            "least/most",
            "cmds/acq",
            "N.N×",
            "lock-incr",
            "lock-guarded",
        ] {
            assert!(
                table.contains(&format!("\n  {term}")),
                "legend lacks {term}:\n{table}"
            );
        }
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
    let report = tokio::time::timeout(HANG, deadbolt_bench::bench(&args))
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
    let report = tokio::time::timeout(HANG, deadbolt_bench::bench(&alone))
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
    let report = tokio::time::timeout(HANG, deadbolt_bench::bench(&other))
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
    let report = tokio::time::timeout(HANG, deadbolt_bench::bench(&all))
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

/// The binary, stopped by Ctrl-C mid-run: it stops its redis-server, prints
/// the partial table and exits with 130.
#[test]
fn ctrl_c_stops_the_embedded_server() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_deadbolt-bench"))
        .args([
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
        .expect("spawn deadbolt-bench");
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
            panic!("deadbolt-bench did not exit after SIGINT");
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
