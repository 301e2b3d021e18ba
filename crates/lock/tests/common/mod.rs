//! Shared set-up for the lock's tests: a real redis-server per test.
#![allow(dead_code, unreachable_pub, unused_imports)]

use std::time::Duration;

use deadbolt_core::Client;
pub use deadbolt_testkit::client;
pub use deadbolt_testkit::{FaultProxy, RedisServer};

pub use deadbolt_testkit::support::{cmd, server, until, within, HANG};

pub async fn client_with(url: &str, watchdog: Duration) -> Client {
    deadbolt_testkit::client_with(url, |b| b.watchdog_timeout(watchdog)).await
}

/// A client with a short command timeout (fault tests wait out timeouts).
pub async fn fast_client(url: &str, command_timeout_ms: u64) -> Client {
    deadbolt_testkit::client_with(url, |b| {
        b.command_timeout(Duration::from_millis(command_timeout_ms))
    })
    .await
}

pub async fn exists(srv: &RedisServer, key: &str) -> bool {
    let mut c = srv.conn().await;
    redis::cmd("EXISTS")
        .arg(key)
        .query_async::<i64>(&mut c)
        .await
        .unwrap()
        == 1
}

pub async fn dbsize(srv: &RedisServer) -> i64 {
    let mut c = srv.conn().await;
    redis::cmd("DBSIZE").query_async(&mut c).await.unwrap()
}

pub async fn evalsha_calls(srv: &RedisServer) -> u64 {
    srv.evalsha_calls().await
}
