//! A master, its replica and three Sentinels watching them.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::topology::{cmd, info_field, query, query_sync, wait, wait_sync, Check, Processes};
use crate::RedisServer;

/// The name the Sentinels monitor the master under.
const MASTER_NAME: &str = "deadbolt";
/// Number of Sentinels; a quorum of 2 of them agrees that the master is down.
const SENTINELS: usize = 3;
/// Bound on the start (replica in sync, Sentinels aware of everyone).
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on a failover.
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(30);

/// A local Redis Sentinel deployment: a master, one replica (`--replicaof`) and three
/// Sentinels monitoring the master as [`master_name`](Self::master_name) with a quorum of 2,
/// every process a [`RedisServer`] on a free loopback port.
///
/// The Sentinels run with `down-after-milliseconds 1000` (a master that does not answer for
/// 1 s is down; a [paused](Self::pause_node) master is failed over automatically a few seconds
/// later) and `failover-timeout 5000`. The data nodes run without persistence and with
/// `--repl-diskless-sync-delay 0` (a replica's full sync starts at once instead of after 5 s).
///
/// Data nodes are numbered 0 (the master at start) and 1 (its replica);
/// [`master`](Self::master) asks the Sentinels which one is master now.
///
/// Dropping the set kills every process (paused ones too) and removes their directories.
///
/// # Examples
///
/// ```no_run
/// # async fn example() -> std::io::Result<()> {
/// use deadbolt_testkit::RedisSentinelSet;
///
/// let set = RedisSentinelSet::start()?;
/// assert_eq!(set.master().await?, 0);
/// let new = set.failover().await?;
/// assert_eq!(new, 1);
/// let mut conn = set.node(new).conn().await;
/// let () = redis::cmd("SET").arg("k").arg("v").query_async(&mut conn).await.unwrap();
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct RedisSentinelSet {
    nodes: Processes,
    sentinels: Vec<RedisServer>,
}

impl RedisSentinelSet {
    /// Start the master, the replica and the three Sentinels, and wait until the replica's
    /// link is up and every Sentinel sees the master as healthy, knows the replica (with its
    /// link up) and knows the other two Sentinels.
    ///
    /// Takes a few seconds: Sentinels find each other through hello messages they publish
    /// every 2 s.
    ///
    /// # Errors
    ///
    /// If a process cannot be started (see [`RedisServer::start`]) or the set is not ready
    /// within 30 s; the message then includes what was missing and the end of every log.
    pub fn start() -> io::Result<RedisSentinelSet> {
        let data_node = || RedisServer::builder().arg("repl-diskless-sync-delay", "0");
        let master = data_node().start()?;
        let replica = data_node()
            .arg("replicaof", format!("127.0.0.1 {}", master.port()))
            .start()?;
        let config = format!(
            "sentinel resolve-hostnames no\n\
             sentinel monitor {MASTER_NAME} 127.0.0.1 {} 2\n\
             sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
             sentinel failover-timeout {MASTER_NAME} 5000\n",
            master.port()
        );
        let nodes = Processes::new(vec![master, replica]);
        // A Sentinel learns of replicas from the master's INFO, which it asks for once at
        // connect and then every 10 s: the replica must be attached before the Sentinels start.
        wait_sync(
            "replica in sync",
            START_TIMEOUT,
            || nodes.logs(),
            || {
                let info: String = query_sync(nodes.get(1), &cmd(&["INFO", "replication"]))
                    .map_err(|e| e.to_string())?;
                check_replica_of(&info, nodes.get(0).port())
            },
        )?;
        let sentinels = (0..SENTINELS)
            .map(|_| RedisServer::builder().sentinel(config.clone()).start())
            .collect::<io::Result<Vec<_>>>()?;
        let set = RedisSentinelSet { nodes, sentinels };
        wait_sync(
            "sentinels aware of the master, the replica and each other",
            START_TIMEOUT,
            || set.logs(),
            || set.sentinels.iter().try_for_each(check_sentinel_ready),
        )?;
        Ok(set)
    }

    /// The name the Sentinels know the master by (`SENTINEL GET-MASTER-ADDR-BY-NAME <name>`).
    pub fn master_name(&self) -> &str {
        MASTER_NAME
    }

    /// `redis://127.0.0.1:<port>/` of each Sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// `127.0.0.1:<port>` of each Sentinel.
    pub fn sentinel_addrs(&self) -> Vec<SocketAddr> {
        self.sentinels.iter().map(RedisServer::addr).collect()
    }

    /// The three Sentinel processes.
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// Both data nodes, by index.
    pub fn nodes(&self) -> &[RedisServer] {
        self.nodes.servers()
    }

    /// Data node `i` (0 or 1).
    ///
    /// # Panics
    ///
    /// If `i` is not 0 or 1.
    pub fn node(&self, i: usize) -> &RedisServer {
        self.nodes.get(i)
    }

    /// Index of the data node that is master now, by `SENTINEL GET-MASTER-ADDR-BY-NAME` on the
    /// first Sentinel that answers.
    ///
    /// # Errors
    ///
    /// If no Sentinel answers, or the address is not one of the data nodes.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: read-only.
    pub async fn master(&self) -> io::Result<usize> {
        let mut last = None;
        for s in &self.sentinels {
            match master_port(s).await {
                Ok(port) => {
                    return self.nodes.index_of_port(port).ok_or_else(|| {
                        io::Error::other(format!("the master is at port {port}, no data node"))
                    })
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no sentinel")))
    }

    /// Fail the master over with `SENTINEL FAILOVER` on the first Sentinel and wait until
    /// every Sentinel reports the replica's address as the master's, the replica reports
    /// `role:master`, and the old master, if it answers, reports it is a replica of the new
    /// one with its link up. Returns the index of the new master.
    ///
    /// `SENTINEL FAILOVER` does not wait for the replica to catch up: writes it has not
    /// received are lost; call [`wait_replicated`](Self::wait_replicated) first to keep them.
    /// When Sentinel turns the old master into a replica it also closes the old master's
    /// client connections (`CLIENT KILL TYPE normal`), so clients reconnect and ask again.
    ///
    /// Takes about 10 s if the old master answers: Sentinel turns an old master into a
    /// replica only some 8 s after seeing it claim the master role, and asks for its role
    /// every 10 s.
    ///
    /// # Errors
    ///
    /// If the Sentinel refuses (for example `-NOGOODSLAVE` when the replica is paused or
    /// killed) or the switch is not complete within 30 s (the message then includes the end
    /// of every log).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future only stops the waiting: once sent, the failover goes ahead.
    pub async fn failover(&self) -> io::Result<usize> {
        let old = self.master().await?;
        let new = 1 - old;
        let () = query(
            &self.sentinels[0],
            &cmd(&["SENTINEL", "FAILOVER", MASTER_NAME]),
        )
        .await?;
        self.wait_switched(
            &format!("SENTINEL FAILOVER from node {old} to node {new}"),
            new,
        )
        .await?;
        Ok(new)
    }

    /// Wait until node `i` is the master all agree on: every Sentinel reports its address,
    /// it reports `role:master`, and the other node, if it answers, reports it is a replica
    /// of node `i` with its link up.
    ///
    /// After [`pause_node`](Self::pause_node) of the master this waits out the automatic
    /// failover to the replica; after [`resume_node`](Self::resume_node) of a master that was
    /// failed over meanwhile, until Sentinel has made it a replica (some 10 s, see
    /// [`failover`](Self::failover)).
    ///
    /// # Errors
    ///
    /// If that is not so within 30 s; the message then includes the end of every log.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: read-only.
    ///
    /// # Panics
    ///
    /// If `i` is not 0 or 1.
    pub async fn wait_master(&self, i: usize) -> io::Result<()> {
        self.node(i);
        self.wait_switched(&format!("node {i} master"), i).await
    }

    async fn wait_switched(&self, what: &str, new: usize) -> io::Result<()> {
        let old = 1 - new;
        wait(
            what,
            FAILOVER_TIMEOUT,
            || self.logs(),
            || async move { self.check_switched(old, new).await },
        )
        .await
    }

    async fn check_switched(&self, old: usize, new: usize) -> Check {
        let port = self.nodes.get(new).port();
        for (k, s) in self.sentinels.iter().enumerate() {
            let seen = master_port(s).await.map_err(|e| e.to_string())?;
            if seen != port {
                return Err(format!("sentinel {k} reports the master at port {seen}"));
            }
        }
        let info = self.nodes.replication(new).await?;
        if info_field(&info, "role") != Some("master") {
            return Err(format!("node {new}: {info}"));
        }
        if self.nodes.is_live(old) {
            check_replica_of(&self.nodes.replication(old).await?, port)?;
        }
        Ok(())
    }

    /// Wait until the replica has received everything the master had received when this was
    /// called (the replica's `slave_repl_offset` reaches the master's `master_repl_offset`).
    ///
    /// # Errors
    ///
    /// If a node does not answer or the replica does not catch up within 30 s.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: read-only.
    pub async fn wait_replicated(&self) -> io::Result<()> {
        let master = self.master().await?;
        let replica = 1 - master;
        self.nodes
            .wait_caught_up(master, replica, FAILOVER_TIMEOUT, || self.logs())
            .await
    }

    /// Freeze data node `i` (SIGSTOP): connections stay open but nothing is answered. A
    /// paused master counts as down after 1 s, and the Sentinels fail it over on their own a
    /// few seconds later ([`wait_master`](Self::wait_master) waits for that). Does nothing if
    /// the node is paused or killed already.
    ///
    /// # Panics
    ///
    /// If `i` is not 0 or 1.
    pub fn pause_node(&self, i: usize) {
        self.nodes.pause(i);
    }

    /// Let a node frozen by [`pause_node`](Self::pause_node) continue (SIGCONT). Does nothing
    /// if it is not paused.
    ///
    /// # Panics
    ///
    /// If `i` is not 0 or 1.
    pub fn resume_node(&self, i: usize) {
        self.nodes.resume(i);
    }

    /// Kill data node `i` (SIGKILL) for good.
    ///
    /// # Panics
    ///
    /// If `i` is not 0 or 1.
    pub fn kill_node(&mut self, i: usize) {
        self.nodes.kill(i);
    }

    fn logs(&self) -> String {
        self.nodes.logs() + &crate::topology::logs_of(&self.sentinels)
    }
}

/// Whether `INFO replication` shows a replica of the node at `port` with its link up.
fn check_replica_of(info: &str, port: u16) -> Check {
    let port = port.to_string();
    let role = info_field(info, "role");
    let following = info_field(info, "master_port");
    let link = info_field(info, "master_link_status");
    if role == Some("slave") && following == Some(port.as_str()) && link == Some("up") {
        Ok(())
    } else {
        Err(format!(
            "role {role:?}, master port {following:?}, link {link:?} (want a replica of {port})"
        ))
    }
}

/// The master's port according to `sentinel`.
async fn master_port(sentinel: &RedisServer) -> io::Result<u16> {
    let addr: Option<(String, u16)> = query(
        sentinel,
        &cmd(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME]),
    )
    .await?;
    addr.map(|(_, port)| port)
        .ok_or_else(|| io::Error::other(format!("sentinel does not know {MASTER_NAME}")))
}

/// Whether `sentinel` sees the master as healthy, its one replica as healthy with its link
/// up, and the two other Sentinels.
fn check_sentinel_ready(sentinel: &RedisServer) -> Check {
    let port = sentinel.port();
    let ask = |sub: &str| -> Result<redis::Value, String> {
        query_sync(sentinel, &cmd(&["SENTINEL", sub, MASTER_NAME]))
            .map_err(|e| format!("sentinel {port}: {e}"))
    };
    let as_maps = |v: redis::Value| -> Result<Vec<HashMap<String, String>>, String> {
        redis::FromRedisValue::from_redis_value(v).map_err(|e| format!("sentinel {port}: {e}"))
    };
    let master: HashMap<String, String> = redis::FromRedisValue::from_redis_value(ask("MASTER")?)
        .map_err(|e| format!("sentinel {port}: {e}"))?;
    let replicas = as_maps(ask("REPLICAS")?)?;
    let sentinels = as_maps(ask("SENTINELS")?)?;
    let field = |m: &HashMap<String, String>, k: &str| m.get(k).cloned().unwrap_or_default();
    let healthy_replicas = replicas
        .iter()
        .filter(|r| field(r, "flags") == "slave" && field(r, "master-link-status") == "ok")
        .count();
    let healthy_sentinels = sentinels
        .iter()
        .filter(|s| field(s, "flags") == "sentinel")
        .count();
    if field(&master, "flags") == "master"
        && healthy_replicas == 1
        && healthy_sentinels == SENTINELS - 1
    {
        Ok(())
    } else {
        Err(format!(
            "sentinel {port}: master flags {:?}, {healthy_replicas} healthy replica(s) of {}, \
             {healthy_sentinels} other sentinel(s)",
            field(&master, "flags"),
            replicas.len()
        ))
    }
}
