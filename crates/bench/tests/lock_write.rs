//! The `lock-incr` and `lock-guarded` contenders (deadbolt's `Lock` with a
//! plain and a guarded `INCRBY` under each hold) through the bench, against
//! a real redis-server: every acquisition wrote once, and each sent one
//! command more than the `lock` contender's two. (The counters' values are
//! checked beside the contender, `src/contender/lock_write.rs`: the bench
//! deletes a run's keys when it ends.)

mod common;

use deadbolt_bench::ContenderKind;
use deadbolt_testkit::RedisServer;

use common::{bench_args, HANG};

/// Both contenders in one uncontended run of 4 tasks: one INCRBY per
/// acquisition, the plain one counted among the commands sent, the guarded
/// one inside its script (one EVALSHA more per acquisition instead); no
/// write refused; the counters deleted with the run's other keys.
#[tokio::test]
async fn every_acquisition_writes_its_counter_once() {
    let server = RedisServer::start().expect("redis-server (apt-get install -y redis-server)");
    let url = server.url();
    let args = bench_args(&[
        "--redis",
        url.as_str(),
        "--scenario",
        "uncontended",
        "--contender",
        "lock-incr,lock-guarded",
        "--tasks",
        "4",
        "--duration",
        "300ms",
    ]);
    let report = tokio::time::timeout(HANG, deadbolt_bench::bench(&args))
        .await
        .expect("hang")
        .expect("bench");
    let kinds: Vec<ContenderKind> = report.results.iter().map(|r| r.contender).collect();
    assert_eq!(kinds, [ContenderKind::LockIncr, ContenderKind::LockGuarded]);

    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for r in &report.results {
        let what = r.contender.name();
        assert_eq!((r.errors, r.exclusion_violations), (0, 0), "{what}: {r:?}");
        let acq = r.acquisitions;
        assert!(acq > 0, "{what}");
        let by = &r.commands.by_command;
        assert_eq!(by.get("incrby").copied(), Some(acq), "{what}: {by:?}");
        let scripts = match r.contender {
            ContenderKind::LockIncr => 2,
            _ => 3,
        };
        assert_eq!(
            by.get("evalsha").copied(),
            Some(scripts * acq),
            "{what}: {by:?}"
        );
        assert_eq!(r.commands.per_acquisition, Some(3.0), "{what}");
    }
    let dbsize: u64 = redis::cmd("DBSIZE").query_async(&mut conn).await.unwrap();
    assert_eq!(dbsize, 0, "keys left");
}
