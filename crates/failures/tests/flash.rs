//! Scenario 3 at a small size: deadbolt's waiting buyers cost about no
//! Redis commands, and every seat is sold once.

use std::time::Duration;

use deadbolt_failures::scenarios::flash;
use deadbolt_failures::{postgres_or_skip, Postgres, Table};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_buyers_cost_no_commands_and_seats_sell_once() {
    if !postgres_or_skip("waiting_buyers_cost_no_commands_and_seats_sell_once") {
        return;
    }
    let pg = Postgres::start().await.expect("start PostgreSQL");
    let config = flash::Config {
        buyers: 1_000,
        clients: 10,
        seats: 50,
        window: Duration::from_secs(1),
        ..flash::Config::default()
    };
    let c = flash::run(&config, &pg).await.expect("scenario 3");
    let mut table = Table::default();
    table.extend(c.rows());
    println!("{table}");
    let d = &c.deadbolt;
    assert!(
        d.cmds_per_buyer_per_sec < 0.01,
        "waiting buyers must cost ~0 commands: {d:?}"
    );
    assert_eq!(d.sold, config.seats as u64, "{d:?}");
    assert_eq!(d.double_sales_refused, 0, "{d:?}");
}
