//! Scenario 1 at a small size, its paused worker a process stopped by
//! SIGSTOP: deadbolt's side sells exactly its stock.

use deadbolt_failures::scenarios::paused;
use deadbolt_failures::{postgres_or_skip, Postgres, Table};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_cannot_oversell() {
    if !postgres_or_skip("a_paused_holder_cannot_oversell") {
        return;
    }
    let pg = Postgres::start().await.expect("start PostgreSQL");
    let config = paused::Config {
        stock: 20,
        // The paused worker is this package's binary, stopped by SIGSTOP.
        worker_exe: Some(env!("CARGO_BIN_EXE_deadbolt-failures").into()),
        ..paused::Config::default()
    };
    let c = paused::run(&config, &pg).await.expect("scenario 1");
    let mut table = Table::default();
    table.extend(c.rows());
    println!("{table}");
    let d = &c.deadbolt;
    assert_eq!(d.oversold, 0, "{d:?}");
    assert_eq!(d.sold, config.stock, "{d:?}");
    assert_eq!(d.lost_updates, 0, "{d:?}");
    assert_eq!(d.redis_lost_updates, 0, "{d:?}");
    assert!(
        d.stale_refused >= 1,
        "the paused holder's UPDATE must be refused: {d:?}"
    );
    assert!(
        d.redis_stale_refused >= 1,
        "its guarded write must be refused: {d:?}"
    );
}
