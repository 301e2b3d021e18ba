//! The `deadbolt` command against real redis-server processes: argument
//! errors, the embedded server's life cycle (also on error and Ctrl-C), the
//! JSON report, every scenario with every contender, inspect and force-unlock.
//!
//! Sizes are tiny and nothing asserts speed: the only time bounds catch hangs.

use std::io::{BufRead as _, BufReader};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser as _;
use deadbolt_cli::{BenchArgs, Cli, ForceUnlockArgs, InspectArgs};
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

fn port_of(url: &str) -> u16 {
    url.trim_end_matches('/')
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {url}"))
}

fn port_closed(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_err()
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

    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), scenarios.len() * contenders.len());
    for s in scenarios {
        for c in contenders {
            let r = results
                .iter()
                .find(|r| r["scenario"] == s && r["contender"] == *c)
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
                    if *c == "lock" {
                        assert_eq!(per, 2.0, "{what}");
                    } else {
                        assert!((2.0..2.5).contains(&per), "{what}");
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
                _ => {
                    assert!(r["acquisitions_per_s"].is_null(), "{what}");
                    assert!(
                        r["commands"]["per_waiter_per_s"].as_f64().unwrap() >= 0.0,
                        "{what}"
                    );
                    assert_eq!(r["acquisitions"], 0, "{what}");
                }
            }
        }
    }
    let sweep = v["sweep"].as_array().unwrap();
    assert_eq!(sweep.len(), 2 * contenders.len());
    assert!(sweep
        .iter()
        .all(|p| p["acquisitions_per_s"].as_f64().unwrap() > 0.0));

    let plot = std::fs::read_to_string(&svg).unwrap();
    std::fs::remove_file(&svg).ok();
    assert!(plot.starts_with("<svg"), "not an SVG");
    for c in contenders {
        assert!(
            plot.contains(&format!(">\n{c}\n<")),
            "the plot has no legend entry for {c}"
        );
    }

    let table = report.table();
    for s in scenarios {
        assert!(
            table.contains(&format!("\n{s}:")),
            "table lacks {s}:\n{table}"
        );
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
    let mut other = inspect_args.clone();
    other.kind = deadbolt_cli::PrimitiveKind::Rw;
    let err = deadbolt_cli::inspect(&other).await.unwrap_err();
    assert!(err.to_string().contains("not yet supported"), "{err:#}");

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
    assert!(deadbolt_cli::force_unlock(&force).await.unwrap());
    assert!(!lock.is_locked().await.unwrap());
    assert!(
        !deadbolt_cli::force_unlock(&force).await.unwrap(),
        "nothing left to delete"
    );
    assert_eq!(
        deadbolt_cli::inspect(&inspect_args).await.unwrap().owner,
        None
    );
    drop(guard);
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
