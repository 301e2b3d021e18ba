//! Scenario 2: Redlock while clocks jump.
//!
//! Five redis-servers, two of them with a movable wall clock
//! ([`ClockServer`]). Each round, as in Kleppmann's example:
//!
//! 1. holder A takes the lock on servers 0, 3 and 4 (a majority): servers
//!    1 and 2 do not answer it (a network problem: A reaches them through
//!    a [`FaultProxy`] that drops everything for the moment);
//! 2. the clocks of servers 3 and 4 jump forward past the lease, so A's
//!    keys expire there;
//! 3. holder B takes the lock on servers 1 to 4, a majority too, while A's
//!    validity has not run out: two holders at once (an overlap);
//! 4. B writes the row in PostgreSQL, then A writes it.
//!
//! The textbook Redlock ([`TextbookRedlock`]) and deadbolt's `Redlock`
//! overlap the same way: it is the algorithm, not the implementation.
//! deadbolt's tokens are the largest of the majority's, and the servers
//! draw them from their clocks, so B's is larger: the fenced UPDATE
//! refuses A's write. The textbook's lands over B's.

use std::time::Duration;

use anyhow::{ensure, Context as _};
use deadbolt::prelude::*;
use deadbolt_testkit::FaultProxy;

use crate::report::{dur, Row};
use crate::server::ClockServer;
use crate::textbook::TextbookRedlock;
use crate::Postgres;

/// Sizes of the run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Rounds per side.
    pub rounds: u32,
    /// The lease of every hold.
    pub lease: Duration,
    /// Test only: deadbolt's UPDATE without its token check.
    pub unfenced: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            rounds: 5,
            lease: Duration::from_secs(2),
            unfenced: false,
        }
    }
}

/// What one side's rounds counted.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// Rounds in which B was granted while A's grant was still valid.
    pub overlaps: u32,
    /// A's writes applied after B's (the stale holder's write won).
    pub stale_applied: u32,
    /// A's writes refused by the token check.
    pub stale_refused: u32,
}

/// Both sides' counts.
pub type Counts = crate::report::Sides<Config, Side>;

impl Counts {
    /// The table rows.
    pub fn rows(&self) -> Vec<Row> {
        const S: &str = "2. Redlock while clocks jump";
        let (t, d, r) = (&self.textbook, &self.deadbolt, self.config.rounds);
        vec![
            Row::new(
                S,
                format!(
                    "5 servers, 2 clocks jump past the lease ({}): rounds with two holders at once",
                    dur(self.config.lease)
                ),
                format!("{} of {r}", t.overlaps),
                format!("{} of {r}", d.overlaps),
            ),
            Row::new(
                S,
                "stale holder's write applied over the newer one's",
                t.stale_applied,
                d.stale_applied,
            ),
            Row::new(
                S,
                "stale writes refused by the token in the UPDATE",
                "— (no token)",
                d.stale_refused,
            ),
        ]
    }
}

/// Five servers (3 and 4 with movable clocks) and proxies in front of 1
/// and 2 for holder A.
struct Servers {
    servers: Vec<ClockServer>,
    proxies: Vec<FaultProxy>,
}

impl Servers {
    async fn start() -> anyhow::Result<Servers> {
        let mut servers = Vec::new();
        for _ in 0..5 {
            servers.push(ClockServer::start().await?);
        }
        let mut proxies = Vec::new();
        for s in &servers[1..3] {
            proxies.push(FaultProxy::start(s.addr()).await?);
        }
        Ok(Servers { servers, proxies })
    }

    /// A's URLs: 1 and 2 through the proxies.
    fn urls_a(&self) -> Vec<String> {
        (0..5)
            .map(|i| match i {
                1 | 2 => self.proxies[i - 1].url(),
                _ => self.servers[i].url(),
            })
            .collect()
    }

    fn urls_b(&self) -> Vec<String> {
        self.servers.iter().map(ClockServer::url).collect()
    }

    fn partition_a(&self, on: bool) {
        for p in &self.proxies {
            p.set_blackhole(on);
        }
    }

    fn jump(&mut self, by: Duration) -> anyhow::Result<()> {
        self.servers[3].jump(by)?;
        self.servers[4].jump(by)
    }
}

/// Runs both sides, each on its own five servers, against `pg`.
///
/// # Errors
/// A server that cannot be started or reached, or a round that does not
/// go as described (A not granted, B not granted).
pub async fn run(config: &Config, pg: &Postgres) -> anyhow::Result<Counts> {
    let textbook = textbook_side(config, pg).await.context("textbook side")?;
    let deadbolt = deadbolt_side(config, pg).await.context("deadbolt side")?;
    Ok(Counts {
        config: config.clone(),
        textbook,
        deadbolt,
    })
}

async fn table(pg: &Postgres, name: &str) -> anyhow::Result<tokio_postgres::Client> {
    let db = pg.connect().await?;
    db.batch_execute(&format!(
        "DROP TABLE IF EXISTS {name};
         CREATE TABLE {name} (id int PRIMARY KEY, body text NOT NULL, last_token bigint NOT NULL);"
    ))
    .await?;
    Ok(db)
}

async fn conns(urls: &[String]) -> anyhow::Result<Vec<redis::aio::MultiplexedConnection>> {
    let mut out = Vec::new();
    for u in urls {
        out.push(
            redis::Client::open(u.as_str())?
                .get_multiplexed_async_connection()
                .await?,
        );
    }
    Ok(out)
}

async fn textbook_side(config: &Config, pg: &Postgres) -> anyhow::Result<Side> {
    let mut s = Servers::start().await?;
    let db = table(pg, "s2_textbook").await?;
    let mut side = Side::default();
    for round in 0..config.rounds {
        let key = format!("doc:{round}");
        db.execute(
            "INSERT INTO s2_textbook VALUES ($1, 'none', 0)",
            &[&i32::try_from(round)?],
        )
        .await?;
        // Fresh connections each round: the partition resets A's.
        let a = TextbookRedlock::new(conns(&s.urls_a()).await?);
        let b = TextbookRedlock::new(conns(&s.urls_b()).await?);
        s.partition_a(true);
        let ha = a
            .try_lock(&key, config.lease)
            .await
            .context("A must get servers 0, 3 and 4")?;
        s.partition_a(false);
        s.jump(config.lease + Duration::from_secs(1))?;
        let hb = b
            .try_lock(&key, config.lease)
            .await
            .context("B must get servers 1 to 4")?;
        if std::time::Instant::now() < ha.valid_until {
            side.overlaps += 1;
        }
        let update = "UPDATE s2_textbook SET body = $1 WHERE id = $2";
        db.execute(update, &[&"B", &i32::try_from(round)?]).await?;
        let n = db.execute(update, &[&"A", &i32::try_from(round)?]).await?;
        side.stale_applied += u32::from(n == 1);
        b.unlock(&key, hb).await;
        a.unlock(&key, ha).await;
    }
    Ok(side)
}

async fn deadbolt_side(config: &Config, pg: &Postgres) -> anyhow::Result<Side> {
    let mut s = Servers::start().await?;
    let db = table(pg, "s2_deadbolt").await?;
    let mut side = Side::default();
    let update = if config.unfenced {
        "UPDATE s2_deadbolt SET body = $1, last_token = $2 WHERE id = $3"
    } else {
        "UPDATE s2_deadbolt SET body = $1, last_token = $2 WHERE id = $3 AND last_token <= $2"
    };
    for round in 0..config.rounds {
        let id = i32::try_from(round)?;
        let name = format!("doc:{round}");
        db.execute("INSERT INTO s2_deadbolt VALUES ($1, 'none', 0)", &[&id])
            .await?;
        let mut ca = Vec::new();
        for u in s.urls_a() {
            ca.push(deadbolt::Client::connect(&u).await?);
        }
        let mut cb = Vec::new();
        for u in s.urls_b() {
            cb.push(deadbolt::Client::connect(&u).await?);
        }
        let a = deadbolt::Redlock::new(&ca, &name)?;
        let b = deadbolt::Redlock::new(&cb, &name)?;
        s.partition_a(true);
        let ga = a
            .try_lock_with(Duration::ZERO, config.lease)
            .await?
            .context("A must get servers 0, 3 and 4")?;
        s.partition_a(false);
        s.jump(config.lease + Duration::from_secs(1))?;
        let gb = b
            .try_lock_with(Duration::ZERO, config.lease)
            .await?
            .context("B must get servers 1 to 4")?;
        if ga.state() == deadbolt::LeaseState::Active {
            side.overlaps += 1;
        }
        let (ta, tb) = (
            i64::try_from(ga.fencing_token())?,
            i64::try_from(gb.fencing_token())?,
        );
        ensure!(tb > ta, "B's token {tb} must be larger than A's {ta}");
        db.execute(update, &[&"B", &tb, &id]).await?;
        let n = db.execute(update, &[&"A", &ta, &id]).await?;
        side.stale_applied += u32::from(n == 1);
        side.stale_refused += u32::from(n == 0);
        let _ = gb.unlock().await;
        drop(ga);
        for c in ca.iter().chain(&cb) {
            c.shutdown().await;
        }
    }
    Ok(side)
}
