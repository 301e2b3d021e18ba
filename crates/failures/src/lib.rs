//! The four ways Redis locks break in production, run for real.
//!
//! Each scenario starts its own throwaway servers (redis-server, and
//! PostgreSQL as the protected resource, [`postgres::Postgres`]), runs the
//! textbook lock and deadbolt through the same failure, and returns what
//! went wrong, counted:
//!
//! 1. [`scenarios::paused`]: a holder paused past its lease (a GC pause)
//!    while others sell from the same stock row.
//! 2. [`scenarios::clocks`]: Redlock over five servers while two of their
//!    clocks jump forward (the clockjump shim, [`server::ClockServer`]).
//! 3. [`scenarios::flash`]: a flash sale, thousands of buyers waiting for
//!    100 seats: the Redis commands they cost while they wait, and the
//!    hand-off once the sale opens.
//! 4. [`scenarios::failover`]: the master fails before its replica has the
//!    grant, Sentinel promotes the replica, and a second client locks the
//!    same order there.
//!
//! [`report::Table`] prints every scenario's rows in one table. The
//! textbook locks are in [`textbook`].

pub mod postgres;
pub mod report;
pub mod scenarios;
pub mod server;
mod tempdir;
pub mod textbook;

pub use postgres::{pg_bin_dir, Postgres};
pub use report::{Row, Table};

/// Whether the tests may skip for want of PostgreSQL: only when the
/// binaries are missing and `CI` is not set. Under CI a missing PostgreSQL
/// is a failure (this panics), so that a CI image without it cannot pass
/// by skipping.
///
/// # Panics
/// Under `CI` when PostgreSQL is not installed.
pub fn postgres_or_skip(test: &str) -> bool {
    if pg_bin_dir().is_some() {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    assert!(
        !ci,
        "{test}: PostgreSQL is not installed (no initdb) and CI is set: run scripts/ensure-postgres"
    );
    eprintln!(
        "{test}: SKIPPED: PostgreSQL is not installed (no initdb); run scripts/ensure-postgres"
    );
    false
}
