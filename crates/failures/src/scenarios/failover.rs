//! Scenario 4: failover before replication.
//!
//! Each round starts a master, a replica and three Sentinels watching them
//! (`RedisSentinelSet`). The replica is cut off first (stopped, and its
//! link killed on the master: the window asynchronous replication leaves
//! open, as in `examples/failover_loss`). Then:
//!
//! 1. client 1 locks order N on the master and checks in PostgreSQL that
//!    it is unpaid; it is still charging the card (a slow call) when
//! 2. the master dies (SIGKILL), the replica comes back, and the Sentinels
//!    find the master down and promote the replica, which never saw the
//!    grant;
//! 3. client 2 locks order N on the new master, found through the
//!    Sentinels: granted. It checks, finds the order unpaid and records its
//!    payment; client 1 records its own.
//!
//! * textbook ([`PollLock`]): both payments are recorded: a double payment
//!   every round.
//! * deadbolt (both clients built with `Client::sentinel`): client 1 is
//!   built with `sync_replicas(1, 100 ms)`; the
//!   grant did not reach a replica, so it reports `Indeterminate` instead
//!   of a grant it cannot keep, and client 1 does not charge. Behind that,
//!   the payments table has a unique order key and each row carries its
//!   holder's fencing token: a second payment for an order is refused.
//!   Client 2 is a plain client (its new master has no replica yet).

use std::time::Duration;

use anyhow::Context as _;
use deadbolt::prelude::*;
use deadbolt_testkit::RedisSentinelSet;

use crate::report::Row;
use crate::textbook::PollLock;
use crate::Postgres;

/// Sizes of the run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Failovers per side.
    pub rounds: u32,
    /// Test only: deadbolt without `sync_replicas` and without the unique
    /// order key.
    pub undefended: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            rounds: 10,
            undefended: false,
        }
    }
}

/// What one side's rounds counted.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// Client 1 was told it holds the lock (and the failover lost it).
    pub granted_then_lost: u32,
    /// Client 1 was told `Indeterminate` instead.
    pub indeterminate: u32,
    /// Orders paid (at least one payment row).
    pub paid: u32,
    /// Orders with more than one payment row.
    pub double_payments: u32,
    /// Payments refused by the unique order key.
    pub refused: u32,
}

/// Both sides' counts.
pub type Counts = crate::report::Sides<Config, Side>;

impl Counts {
    /// The table rows.
    pub fn rows(&self) -> Vec<Row> {
        const S: &str = "4. failover before replication";
        let (t, d, r) = (&self.textbook, &self.deadbolt, self.config.rounds);
        vec![
            Row::new(
                S,
                format!("{r} failovers: client 1 told it holds a lock the new master lost"),
                t.granted_then_lost,
                d.granted_then_lost,
            ),
            Row::new(
                S,
                "client 1 told Indeterminate instead (sync_replicas(1, 100 ms))",
                "—",
                d.indeterminate,
            ),
            Row::new(
                S,
                "orders paid",
                format!("{} of {r}", t.paid),
                format!("{} of {r}", d.paid),
            ),
            Row::new(S, "double payments", t.double_payments, d.double_payments),
        ]
    }
}

/// Runs both sides against `pg`; every round on fresh servers.
///
/// # Errors
/// A server that cannot be started or reached.
pub async fn run(config: &Config, pg: &Postgres) -> anyhow::Result<Counts> {
    let textbook = side(config, pg, false).await.context("textbook side")?;
    let deadbolt = side(config, pg, true).await.context("deadbolt side")?;
    Ok(Counts {
        config: config.clone(),
        textbook,
        deadbolt,
    })
}

/// A master (node 0), its replica (node 1), in sync, and three Sentinels.
async fn sentinel_set() -> anyhow::Result<RedisSentinelSet> {
    Ok(tokio::task::spawn_blocking(RedisSentinelSet::start).await??)
}

/// Stops the replica and drops its link on the master: grants from now on
/// do not reach it.
async fn cut_off(set: &RedisSentinelSet) -> anyhow::Result<()> {
    set.pause_node(1);
    let mut m = set.node(0).conn().await;
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query_async(&mut m)
        .await?;
    Ok(())
}

/// The master dies; the replica comes back, and the Sentinels find the
/// master down (after 1 s) and promote the replica.
async fn fail_over(set: &mut RedisSentinelSet) -> anyhow::Result<()> {
    set.kill_node(0);
    set.resume_node(1);
    set.wait_master(1)
        .await
        .context("the Sentinels promote the replica")?;
    Ok(())
}

/// A deadbolt client of the master the Sentinels name.
fn through_sentinels(set: &RedisSentinelSet) -> deadbolt::ClientBuilder {
    deadbolt::Client::sentinel(&set.sentinel_urls(), set.master_name())
}

async fn unpaid(db: &tokio_postgres::Client, table: &str, order: i32) -> anyhow::Result<bool> {
    let n: i64 = db
        .query_one(
            &format!("SELECT count(*) FROM {table} WHERE order_id = $1"),
            &[&order],
        )
        .await?
        .get(0);
    Ok(n == 0)
}

/// Records a payment; false when the unique order key refused it.
async fn pay(
    db: &tokio_postgres::Client,
    table: &str,
    order: i32,
    token: i64,
) -> anyhow::Result<bool> {
    let n = db
        .execute(
            &format!(
                "INSERT INTO {table} (order_id, token) VALUES ($1, $2) ON CONFLICT DO NOTHING"
            ),
            &[&order, &token],
        )
        .await?;
    Ok(n == 1)
}

/// One textbook round: client 1 locks on the master and checks the order;
/// the failover; client 2 locks on the new master, checks and pays; client
/// 1 pays too. Returns 1 when client 1 was granted (the grant then lost).
async fn textbook_round(
    set: &mut RedisSentinelSet,
    db: &tokio_postgres::Client,
    table: &str,
    order: i32,
    name: &str,
) -> anyhow::Result<u32> {
    let lease = Duration::from_secs(30);
    let poll = Duration::from_millis(100);
    let l1 = PollLock::new(set.node(0).conn().await, name.to_string(), poll);
    let h1 = l1.try_lock(lease).await?;
    let checked1 = match &h1 {
        Some(_) => unpaid(db, table, order).await?,
        None => false,
    };
    fail_over(set).await?;
    let new_master = set.master().await?;
    let l2 = PollLock::new(set.node(new_master).conn().await, name.to_string(), poll);
    let h2 = l2.lock(lease).await?;
    if unpaid(db, table, order).await? {
        pay(db, table, order, 0).await?;
    }
    if checked1 {
        pay(db, table, order, 0).await?;
    }
    let _ = l2.unlock(h2).await;
    Ok(u32::from(h1.is_some()))
}

async fn side(config: &Config, pg: &Postgres, deadbolt: bool) -> anyhow::Result<Side> {
    let table = if deadbolt {
        "s4_pay_deadbolt"
    } else {
        "s4_pay_textbook"
    };
    let unique = deadbolt && !config.undefended;
    let db = pg.connect().await?;
    db.batch_execute(&format!(
        "DROP TABLE IF EXISTS {table};
         CREATE TABLE {table} (id bigserial PRIMARY KEY, order_id int NOT NULL {}, token bigint);",
        if unique { "UNIQUE" } else { "" }
    ))
    .await?;
    let mut side = Side::default();
    let lease = Duration::from_secs(30);
    for round in 0..config.rounds {
        let order = i32::try_from(round)?;
        let name = format!("order:{round}");
        let mut set = sentinel_set().await?;
        cut_off(&set).await?;
        if deadbolt {
            let b = through_sentinels(&set);
            let b = if config.undefended {
                b
            } else {
                b.sync_replicas(1, Duration::from_millis(100))
            };
            let c1 = b.build().await?;
            // Client 1: granted (and about to be lost), or Indeterminate.
            let g1 = match c1.lock(&name).lock_with_lease(lease).await {
                Ok(g) => Some(g),
                Err(e) if e.is_indeterminate() => None,
                Err(e) => return Err(e.into()),
            };
            let t1 = match &g1 {
                Some(g) => Some((
                    i64::try_from(g.fencing_token())?,
                    unpaid(&db, table, order).await?,
                )),
                None => None,
            };
            side.indeterminate += u32::from(g1.is_none());
            side.granted_then_lost += u32::from(g1.is_some());
            fail_over(&mut set).await?;
            let c2 = through_sentinels(&set).build().await?;
            let g2 = c2.lock(&name).lock_with_lease(lease).await?;
            let t2 = i64::try_from(g2.fencing_token())?;
            if unpaid(&db, table, order).await? && !pay(&db, table, order, t2).await? {
                side.refused += 1;
            }
            if let Some((t1, true)) = t1 {
                if !pay(&db, table, order, t1).await? {
                    side.refused += 1;
                }
            }
            let _ = g2.unlock().await;
            drop(g1);
            c2.shutdown().await;
            drop(c1);
        } else {
            side.granted_then_lost += textbook_round(&mut set, &db, table, order, &name).await?;
        }
    }
    let rows = db
        .query(
            &format!("SELECT order_id, count(*) FROM {table} GROUP BY order_id"),
            &[],
        )
        .await?;
    for r in rows {
        let n: i64 = r.get(1);
        side.paid += 1;
        side.double_payments += u32::from(n > 1);
    }
    Ok(side)
}
