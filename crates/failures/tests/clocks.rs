//! Scenario 2 at a small size: deadbolt's Redlock overlaps as the textbook
//! one does, and its tokens keep the stale write out of PostgreSQL.

use deadbolt_failures::scenarios::clocks;
use deadbolt_failures::{postgres_or_skip, Postgres, Table};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clock_jumps_apply_no_stale_write() {
    if !postgres_or_skip("clock_jumps_apply_no_stale_write") {
        return;
    }
    let pg = Postgres::start().await.expect("start PostgreSQL");
    let config = clocks::Config {
        rounds: 2,
        ..clocks::Config::default()
    };
    let c = clocks::run(&config, &pg).await.expect("scenario 2");
    let mut table = Table::default();
    table.extend(c.rows());
    println!("{table}");
    let d = &c.deadbolt;
    assert_eq!(d.stale_applied, 0, "{d:?}");
    assert_eq!(d.stale_refused, config.rounds, "{d:?}");
}

/// The shim under the scenario: a jump moves the server's TIME and
/// expires a key whose TTL it passes, at once.
#[tokio::test]
async fn a_clock_jump_expires_keys_at_once() {
    use std::time::Duration;
    let mut s = deadbolt_failures::server::ClockServer::start()
        .await
        .expect("start redis-server");
    let mut c = redis::Client::open(s.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let time = |c: &mut redis::aio::MultiplexedConnection| {
        let mut c = c.clone();
        async move {
            let (secs, _): (u64, u64) = redis::cmd("TIME").query_async(&mut c).await.unwrap();
            secs
        }
    };
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .arg("PX")
        .arg(10_000)
        .query_async(&mut c)
        .await
        .unwrap();
    let before = time(&mut c).await;
    s.jump(Duration::from_secs(20)).unwrap();
    let after = time(&mut c).await;
    assert!(after >= before + 19, "TIME {before} then {after}");
    let v: Option<String> = redis::cmd("GET")
        .arg("k")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(v, None, "the key's TTL is behind the new clock");
}
