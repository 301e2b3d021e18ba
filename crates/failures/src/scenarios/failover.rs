//! Scenario 4: failover before replication.
//!
//! Each round starts a master and a replica. The replica is cut off first
//! (stopped, and its link killed on the master: the window asynchronous
//! replication leaves open, as in `examples/failover_loss`). Then:
//!
//! 1. client 1 locks order N on the master and checks in PostgreSQL that
//!    it is unpaid; it is still charging the card (a slow call) when
//! 2. the master dies and the replica is promoted (`REPLICAOF NO ONE`);
//!    the replica never saw the grant;
//! 3. client 2 locks order N on the new master: granted. It checks, finds
//!    the order unpaid and records its payment; client 1 records its own.
//!
//! * textbook ([`PollLock`]): both payments are recorded: a double payment
//!   every round.
//! * deadbolt: client 1 is built with `sync_replicas(1, 100 ms)`; the
//!   grant did not reach a replica, so it reports `Indeterminate` instead
//!   of a grant it cannot keep, and client 1 does not charge. Behind that,
//!   the payments table has a unique order key and each row carries its
//!   holder's fencing token: a second payment for an order is refused.
//!   Client 2 is a plain client (its new master has no replica yet).

use std::time::Duration;

use anyhow::{bail, Context as _};
use deadbolt::prelude::*;
use deadbolt_testkit::RedisServer;

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

/// A master and a replica that has caught up with it.
async fn pair() -> anyhow::Result<(RedisServer, RedisServer)> {
    let master = tokio::task::spawn_blocking(RedisServer::start).await??;
    let replica = tokio::task::spawn_blocking(RedisServer::start).await??;
    // The first full sync would otherwise wait 5 s for more replicas.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-diskless-sync-delay")
        .arg("0")
        .query_async(&mut master.conn().await)
        .await?;
    let mut r = replica.conn().await;
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port())
        .query_async(&mut r)
        .await?;
    // Redis announces no event for the link coming up: ask until it has
    // (bounded), as redis-cli --replica does.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut r)
            .await?;
        if info.contains("master_link_status:up") {
            return Ok((master, replica));
        }
        if std::time::Instant::now() > deadline {
            bail!("the replica did not connect in 10 s");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Stops the replica and drops its link on the master: grants from now on
/// do not reach it.
async fn cut_off(master: &RedisServer, replica: &RedisServer) -> anyhow::Result<()> {
    replica.pause();
    let mut m = master.conn().await;
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query_async(&mut m)
        .await?;
    Ok(())
}

/// The master dies; the replica comes back and is promoted.
async fn fail_over(master: &mut RedisServer, replica: &RedisServer) -> anyhow::Result<()> {
    master.stop();
    replica.resume();
    let mut r = replica.conn().await;
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query_async(&mut r)
        .await?;
    Ok(())
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
        let (mut master, replica) = pair().await?;
        cut_off(&master, &replica).await?;
        if deadbolt {
            let b = deadbolt::Client::builder(&master.url());
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
            fail_over(&mut master, &replica).await?;
            let c2 = deadbolt::Client::connect(&replica.url()).await?;
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
            let l1 = PollLock::new(
                master.conn().await,
                name.clone(),
                Duration::from_millis(100),
            );
            let h1 = l1.try_lock(lease).await?;
            let checked1 = match &h1 {
                Some(_) => unpaid(&db, table, order).await?,
                None => false,
            };
            side.granted_then_lost += u32::from(h1.is_some());
            fail_over(&mut master, &replica).await?;
            let l2 = PollLock::new(
                replica.conn().await,
                name.clone(),
                Duration::from_millis(100),
            );
            let h2 = l2.lock(lease).await?;
            if unpaid(&db, table, order).await? {
                pay(&db, table, order, 0).await?;
            }
            if checked1 {
                pay(&db, table, order, 0).await?;
            }
            let _ = l2.unlock(h2).await;
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
