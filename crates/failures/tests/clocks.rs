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
