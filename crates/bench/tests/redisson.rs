//! The `redisson` and `redisson-fair` contenders (Redisson's `RLock` and
//! `RFairLock` algorithm, driven by the bench's client) against real
//! redis-server processes: the commands Redis runs per uncontended
//! lock+unlock, counted by `INFO commandstats`; mutual exclusion with many
//! waiters over several clients; the watchdog keeping a hold longer than
//! its lease; wake-ups by message, not by the lease running out.
//!
//! Nothing asserts speed: time bounds catch hangs and lost wake-ups only.

mod common;

use std::collections::HashMap;

use deadbolt_bench::{ContenderKind, RunResult};
use deadbolt_testkit::RedisServer;

use common::{bench_args, HANG};

fn server() -> RedisServer {
    RedisServer::start().expect("redis-server (apt-get install -y redis-server)")
}

/// Calls per command on `server` so far.
async fn commandstats(server: &RedisServer) -> HashMap<String, u64> {
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
}

async fn dbsize(server: &RedisServer) -> u64 {
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    redis::cmd("DBSIZE").query_async(&mut conn).await.unwrap()
}

/// The bench with `args` against `server`.
async fn run(server: &RedisServer, args: &[&str]) -> Vec<RunResult> {
    let url = server.url();
    let args = bench_args(&[&["--redis", url.as_str()], args].concat());
    let report = tokio::time::timeout(HANG, deadbolt_bench::bench(&args))
        .await
        .expect("hang")
        .expect("bench");
    for r in &report.results {
        assert_eq!(r.errors, 0, "{r:?}");
        assert_eq!(r.exclusion_violations, 0, "{r:?}");
        assert!(r.acquisitions > 0, "{r:?}");
    }
    report.results
}

/// What Redis runs inside the scripts per uncontended lock+unlock: the
/// RLock's 9 commands and the RFairLock's 16, as Redisson's own scripts do.
/// Besides, each unlock sends a DEL of its latch key itself.
#[tokio::test]
async fn commands_per_uncontended_lock_and_unlock() {
    let cases: [(&str, &[(&str, u64)]); 2] = [
        (
            "redisson",
            &[
                // tryLock: EXISTS, HINCRBY, PEXPIRE.
                ("exists", 1),
                ("hincrby", 2),
                ("pexpire", 1),
                // unlock: GET latch, HEXISTS, HINCRBY, DEL, PUBLISH, SET latch.
                ("get", 1),
                ("hexists", 1),
                ("del", 1),
                ("publish", 1),
                ("set", 1),
            ],
        ),
        (
            "redisson-fair",
            &[
                // tryLock: LINDEX (stale head), EXISTS lock, EXISTS queue,
                // LPOP, ZREM, ZRANGE, HSET, PEXPIRE; unlock: LINDEX (stale
                // head), GET latch, EXISTS, HEXISTS, HINCRBY, DEL, SET latch,
                // LINDEX (next waiter).
                ("lindex", 3),
                ("exists", 3),
                ("lpop", 1),
                ("zrem", 1),
                ("zrange", 1),
                ("hset", 1),
                ("pexpire", 1),
                ("get", 1),
                ("hexists", 1),
                ("hincrby", 1),
                ("del", 1),
                ("set", 1),
            ],
        ),
    ];
    let expected_total = [9, 16];
    for ((contender, per), total) in cases.into_iter().zip(expected_total) {
        let server = server();
        let before = commandstats(&server).await;
        let results = run(
            &server,
            &[
                "--scenario",
                "uncontended",
                "--contender",
                contender,
                "--tasks",
                "4",
                "--duration",
                "300ms",
            ],
        )
        .await;
        let after = commandstats(&server).await;
        let r = &results[0];
        let acq = r.acquisitions;
        let in_scripts: u64 = per.iter().map(|(_, n)| n).sum();
        assert_eq!(in_scripts, total, "{contender}");
        // The run's window: every command inside the scripts, once per
        // lock+unlock as listed; two scripts sent, nothing else.
        let window = &r.commands.by_command;
        for (cmd, n) in per {
            if *cmd != "del" {
                assert_eq!(
                    window.get(*cmd).copied(),
                    Some(n * acq),
                    "{contender}: {cmd}"
                );
            }
        }
        assert_eq!(window.get("evalsha").copied(), Some(2 * acq), "{contender}");
        assert_eq!(r.commands.per_acquisition, Some(2.0), "{contender}");
        let expected: Vec<&str> = per
            .iter()
            .map(|(c, _)| *c)
            .chain(["evalsha", "ping", "info"])
            .collect();
        for cmd in window.keys() {
            assert!(
                expected.contains(&cmd.as_str()),
                "{contender}: {cmd} was not expected"
            );
        }
        // The whole bench on the server: the latch DELs had all landed when
        // the client shut down (one per unlock besides the script's DEL),
        // and nothing is left behind.
        let total = |cmd: &str| {
            after.get(cmd).copied().unwrap_or(0) - before.get(cmd).copied().unwrap_or(0)
        };
        for (cmd, n) in per {
            let latch_del = u64::from(*cmd == "del");
            assert_eq!(total(cmd), (n + latch_del) * acq, "{contender}: {cmd}");
        }
        assert_eq!(dbsize(&server).await, 0, "{contender} left keys");
    }
}

/// Many waiters over several clients on one name: never two holders at
/// once (the bench counts overlaps), every waiter served, wake-ups by
/// message: a waiter whose message were lost would sleep out the lock's
/// TTL (the 30 s lease) and the hand-off would take that long.
#[tokio::test]
async fn mutual_exclusion_and_wake_ups() {
    let server = server();
    let results = run(
        &server,
        &[
            "--scenario",
            "contended,handoff",
            "--contender",
            "redisson,redisson-fair",
            "--waiters",
            "6",
            "--clients",
            "3",
            "--hold",
            "1ms",
            "--no-service",
            "--duration",
            "600ms",
            "--rounds",
            "20",
        ],
    )
    .await;
    assert_eq!(results.len(), 4);
    for r in &results {
        let what = format!("{:?} / {}", r.scenario, r.contender.name());
        if let Some(f) = &r.fairness {
            assert_eq!(f.per_worker.len(), 6, "{what}");
            assert!(f.per_worker.iter().all(|n| *n > 0), "{what}: {f:?}");
            // The waiters subscribed (and unsubscribed) on their clients'
            // shared connections.
            let by = &r.commands.by_command;
            assert!(by.get("subscribe").copied().unwrap_or(0) > 0, "{what}");
            if r.contender == ContenderKind::RedissonFair {
                // Strict FIFO: each waiter gets its turn in order.
                assert!(f.min_max_ratio > 0.5, "{what}: {f:?}");
            }
        }
        if let Some(h) = &r.handoff {
            assert_eq!(r.rounds, Some(20), "{what}");
            assert!(h.max_us < 5e6, "{what}: woken by the TTL, not the message");
        }
    }
    assert_eq!(dbsize(&server).await, 0, "keys left");
}

/// Holds of 600 ms under a 300 ms lease: the watchdog renews every 100 ms,
/// so no waiter gets in before the release.
#[tokio::test]
async fn the_watchdog_keeps_a_hold_past_its_lease() {
    let server = server();
    let results = run(
        &server,
        &[
            "--scenario",
            "contended",
            "--contender",
            "redisson,redisson-fair",
            "--waiters",
            "2",
            "--clients",
            "2",
            "--hold",
            "600ms",
            "--no-service",
            "--lease",
            "300ms",
            "--duration",
            "1300ms",
        ],
    )
    .await;
    for r in &results {
        // Two holds at least, each past the lease: the second holder waited
        // for the release, the overlap count (checked in `run`) is 0.
        assert!(r.acquisitions >= 2, "{r:?}");
        let renewals = r.commands.by_command.get("hexists").copied().unwrap_or(0);
        assert!(renewals >= 4, "{}: {renewals} renewals", r.contender.name());
    }
}
