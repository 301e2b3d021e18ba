//! Floors under deadbolt's Redis cost, for the examples that measure how
//! far a primitive is above the least its guarantees need (`lock_floor`,
//! `redlock_steps`, `sem_floor`), and what they share: the floor scripts,
//! the textbook polling semaphore's try (also the `sem-poll` contender's),
//! and the CPU and command counts they read.
//!
//! A floor script does only what a primitive with those guarantees cannot
//! do without, and leaves out what deadbolt adds for faults and retries
//! (each script's header says what): a measured floor is a lower bound on
//! any design with the same guarantees, not a usable primitive.

use std::collections::BTreeMap;

use redis::aio::MultiplexedConnection;

deadbolt_core::primitive::lua_scripts! {
    list pub SCRIPTS;
    /// A reentrant, fenced lock's take (`lua/floor_lock.lua`).
    pub FLOOR_LOCK_LUA = "floor_lock";
    /// Its release (`lua/floor_unlock.lua`).
    pub FLOOR_UNLOCK_LUA = "floor_unlock";
    /// A strict-FIFO leased semaphore's take or queue
    /// (`lua/floor_sem_acquire.lua`).
    pub FLOOR_SEM_ACQUIRE_LUA = "floor_sem_acquire";
    /// Its release, granting to the queue's head (`lua/floor_sem_release.lua`).
    pub FLOOR_SEM_RELEASE_LUA = "floor_sem_release";
    /// The textbook polling semaphore's try (`lua/sem_poll_acquire.lua`).
    pub SEM_POLL_ACQUIRE_LUA = "sem_poll_acquire";
}

/// Commands a measuring example sends itself besides the workload's:
/// left out of its commands per operation.
pub const ADMIN_COMMANDS: &[&str] = &[
    "info",
    "config|resetstat",
    "config|set",
    "script|load",
    "hello",
    "client|setname",
    "ping",
    "subscribe",
    "unsubscribe",
];

/// `INFO <section>` of the server behind `conn`.
///
/// # Errors
/// The server's, or the connection's.
///
/// # Cancel safety
/// Cancel safe: read-only.
pub async fn info(conn: &mut MultiplexedConnection, section: &str) -> redis::RedisResult<String> {
    redis::cmd("INFO").arg(section).query_async(conn).await
}

/// The server's CPU so far (`INFO cpu`: user + system), µs.
///
/// # Errors
/// The server's, or the connection's.
///
/// # Cancel safety
/// Cancel safe: read-only.
pub async fn server_cpu_us(conn: &mut MultiplexedConnection) -> redis::RedisResult<f64> {
    Ok(crate::stats::parse_server_cpu_us(&info(conn, "cpu").await?))
}

/// `INFO commandstats` as command → (calls, µs), names lowercased.
///
/// # Errors
/// The server's, or the connection's.
///
/// # Cancel safety
/// Cancel safe: read-only.
pub async fn commandstats(
    conn: &mut MultiplexedConnection,
) -> redis::RedisResult<BTreeMap<String, (f64, f64)>> {
    let text = info(conn, "commandstats").await?;
    let calls = crate::stats::parse_commandstats(&text);
    let usec = crate::stats::parse_commandstats_usec(&text);
    #[allow(
        clippy::cast_precision_loss,
        reason = "command counts and µs stay far below 2^53"
    )]
    Ok(calls
        .into_iter()
        .map(|(c, n)| {
            let us = usec.get(&c).copied().unwrap_or(0);
            (c, (n as f64, us as f64))
        })
        .collect())
}

/// `CONFIG RESETSTAT`, then the server's CPU so far (`INFO cpu`), µs: the
/// start of a measured window.
///
/// # Errors
/// The server's, or the connection's.
///
/// # Cancel safety
/// Cancel safe: a reset that landed is harmless to repeat.
pub async fn reset_stats(conn: &mut MultiplexedConnection) -> redis::RedisResult<f64> {
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await?;
    server_cpu_us(conn).await
}

/// The example's first command-line argument parsed, or `default` when
/// it is missing or does not parse.
pub fn first_arg<T: std::str::FromStr>(default: T) -> T {
    std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// This process's CPU time so far (user + system, from its rusage), µs.
pub fn process_cpu_us() -> f64 {
    crate::stats::process_cpu_us()
}
