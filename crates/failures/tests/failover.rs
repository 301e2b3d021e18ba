//! Scenario 4 at a small size: no order is paid twice with deadbolt.

use deadbolt_failures::scenarios::failover;
use deadbolt_failures::{postgres_or_skip, Postgres, Table};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_pays_no_order_twice() {
    if !postgres_or_skip("a_failover_pays_no_order_twice") {
        return;
    }
    let pg = Postgres::start().await.expect("start PostgreSQL");
    let config = failover::Config {
        rounds: 3,
        ..failover::Config::default()
    };
    let c = failover::run(&config, &pg).await.expect("scenario 4");
    let mut table = Table::default();
    table.extend(c.rows());
    println!("{table}");
    let d = &c.deadbolt;
    assert_eq!(d.double_payments, 0, "{d:?}");
    assert_eq!(d.paid, config.rounds, "every order paid once: {d:?}");
    assert_eq!(d.granted_then_lost, 0, "no grant the failover lost: {d:?}");
    assert_eq!(d.indeterminate, config.rounds, "{d:?}");
}
