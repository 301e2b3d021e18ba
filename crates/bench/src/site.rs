//! The servers of a run beyond server 1's connection: the `--topology`
//! deployment the topology scenario measures (a Redis Cluster or a
//! Sentinel-managed master), started here ([`Embedded`]) or given with
//! `--redis`, and the clean-up of a server that is not ours.
//!
//! A deployment's masters are found before any row runs, by the same
//! means deadbolt's client uses: behind Sentinel, core's
//! [`deadbolt_core::sentinel_master`]; on a cluster, redis-rs's cluster
//! client, which lists the masters and routes a `CLUSTER MYID` for each
//! slot to the master that serves it (no `CLUSTER SLOTS` parsing of the
//! bench's own).

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use deadbolt_core::deployment::{redact, Topology};
use deadbolt_testkit::{RedisCluster, RedisSentinelSet, RedisServer};
use futures::{StreamExt as _, TryStreamExt as _};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{ConnectionAddr, ConnectionInfo, Value};

use crate::model::TopologyInfo;
use crate::stats;

/// Hash slots of a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;
/// Bound on each Sentinel's answer.
const SENTINEL_TIMEOUT: Duration = Duration::from_secs(5);
/// Slot lookups in flight at once while a cluster's slots are mapped.
const SLOT_LOOKUPS: usize = 64;

/// The processes the bench started for `--topology`; dropping it kills
/// them all (paused ones too).
#[derive(Debug)]
pub(crate) enum Embedded {
    /// Three masters with one replica each.
    Cluster(RedisCluster),
    /// A master, its replica and three Sentinels.
    Sentinel(RedisSentinelSet),
}

impl Embedded {
    /// Start the deployment of `topology` on free loopback ports and wait
    /// until it is ready (a few seconds).
    ///
    /// # Cancel safety
    /// The start runs on a blocking thread; dropping this future leaves it
    /// running, and what it started is killed when it returns.
    pub(crate) async fn start(topology: Topology) -> anyhow::Result<Embedded> {
        match topology {
            Topology::Cluster => tokio::task::spawn_blocking(RedisCluster::start)
                .await
                .context("starting the Redis Cluster")?
                .map(Embedded::Cluster)
                .context(
                    "starting a Redis Cluster of 3 masters and 3 replicas (needs redis-server \
                     and redis-cli)",
                ),
            Topology::Sentinel => tokio::task::spawn_blocking(RedisSentinelSet::start)
                .await
                .context("starting the Sentinel set")?
                .map(Embedded::Sentinel)
                .context("starting a master, a replica and 3 Sentinels"),
            Topology::Standalone => bail!("the standalone topology has nothing more to start"),
        }
    }

    /// Where clients enter: the cluster's seeds, or the Sentinels and the
    /// name of their master.
    pub(crate) fn entry(&self) -> (Vec<String>, Option<String>) {
        match self {
            Embedded::Cluster(c) => (c.urls(), None),
            Embedded::Sentinel(s) => (s.sentinel_urls(), Some(s.master_name().to_string())),
        }
    }

    fn servers(&self) -> Vec<&RedisServer> {
        match self {
            Embedded::Cluster(c) => c.nodes().iter().collect(),
            Embedded::Sentinel(s) => s.nodes().iter().chain(s.sentinels()).collect(),
        }
    }

    /// Process ids of every server, for `--pin`.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.servers().iter().filter_map(|s| s.pid()).collect()
    }

    /// What it is and where, for the notes ("a Redis Cluster (3 masters, 3
    /// replicas) on 127.0.0.1:40001, ...").
    pub(crate) fn describe(&self) -> String {
        let ports = |servers: &[RedisServer]| {
            servers
                .iter()
                .map(|s| format!("127.0.0.1:{}", s.port()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Embedded::Cluster(c) => format!(
                "a Redis Cluster (3 masters, 3 replicas) on {}",
                ports(c.nodes())
            ),
            Embedded::Sentinel(s) => format!(
                "a master and its replica on {}, watched by 3 Sentinels on {}",
                ports(s.nodes()),
                ports(s.sentinels())
            ),
        }
    }
}

/// One master of the topology.
#[derive(Debug, Clone)]
pub(crate) struct Master {
    /// How to reach it: the entry's settings (a cluster seed's; behind
    /// Sentinel none, as deadbolt's client reaches the master) at the
    /// master's address.
    pub(crate) conn: ConnectionInfo,
    /// The hash slots it serves, as inclusive ranges (Sentinel: all).
    pub(crate) slots: Vec<(u16, u16)>,
}

impl Master {
    /// A master at `url` that serves every slot (a standalone server).
    pub(crate) fn whole(url: &str) -> anyhow::Result<Master> {
        let client = stats::client(url, "Redis")?;
        Ok(Master {
            conn: client.get_connection_info().clone(),
            slots: vec![(0, SLOTS - 1)],
        })
    }

    /// Whether it serves `slot`.
    pub(crate) fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
    }

    /// Its URL as the report shows it: scheme, `***@` for credentials,
    /// address, database.
    pub(crate) fn shown(&self) -> String {
        let (scheme, host, port) = match self.conn.addr() {
            ConnectionAddr::TcpTls { host, port, .. } => ("rediss", host.as_str(), *port),
            ConnectionAddr::Tcp(host, port) => ("redis", host.as_str(), *port),
            ConnectionAddr::Unix(path) => return format!("redis+unix://{}", path.display()),
            _ => return self.conn.addr().to_string(),
        };
        let settings = self.conn.redis_settings();
        let auth = if settings.username().is_some() || settings.password().is_some() {
            "***@"
        } else {
            ""
        };
        let db = match settings.db() {
            0 => String::new(),
            n => n.to_string(),
        };
        format!("{scheme}://{auth}{}:{port}/{db}", bracketed(host))
    }

    /// The bench's own connection to it, for INFO and clean-up.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is written.
    pub(crate) async fn stats(&self) -> anyhow::Result<redis::aio::MultiplexedConnection> {
        redis::Client::open(self.conn.clone())?
            .get_multiplexed_async_connection()
            .await
            .with_context(|| format!("connecting to {}", self.shown()))
    }
}

/// An IPv6 address in brackets, for a URL.
fn bracketed(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// The cluster or Sentinel-managed master of a run, as found at start.
#[derive(Debug, Clone)]
pub(crate) struct Site {
    pub(crate) topology: Topology,
    /// Where clients enter: the cluster's seeds, or the Sentinels.
    pub(crate) urls: Vec<String>,
    /// The name the Sentinels know the master by (Sentinel only).
    pub(crate) master_name: Option<String>,
    /// Masters in the order of their first slot.
    pub(crate) masters: Vec<Master>,
    /// What the report says about it.
    pub(crate) info: TopologyInfo,
}

impl Site {
    /// Find the masters of the deployment `urls` lead to (cluster seeds, or
    /// Sentinels knowing the master as `master_name`) and the Redis version
    /// of the first.
    ///
    /// # Errors
    /// No URL answers, the cluster does not serve every slot, the Sentinels
    /// know no such master, or the master does not answer.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub(crate) async fn discover(
        topology: Topology,
        urls: Vec<String>,
        master_name: Option<String>,
        embedded: bool,
    ) -> anyhow::Result<Site> {
        let masters = match (topology, &master_name) {
            (Topology::Cluster, _) => cluster_masters(&urls).await?,
            (Topology::Sentinel, Some(name)) => vec![sentinel_master(&urls, name).await?],
            (Topology::Sentinel, None) => bail!("no master name for the Sentinels"),
            (Topology::Standalone, _) => bail!("the standalone topology is server 1"),
        };
        let mut conn = masters[0]
            .stats()
            .await
            .context("the first master of the topology")?;
        let version = stats::redis_version(&mut conn).await?;
        let info = TopologyInfo {
            topology,
            embedded,
            version,
            urls: urls.iter().map(|u| redact(u)).collect(),
            master_name: master_name.clone(),
            masters: masters.iter().map(Master::shown).collect(),
        };
        Ok(Site {
            topology,
            urls,
            master_name,
            masters,
            info,
        })
    }

    /// A builder of deadbolt clients for this deployment.
    pub(crate) fn builder(&self) -> deadbolt_core::ClientBuilder {
        match (&self.master_name, self.topology) {
            (Some(name), Topology::Sentinel) => deadbolt_core::Client::sentinel(&self.urls, name),
            _ => deadbolt_core::Client::cluster(&self.urls),
        }
    }

    /// Every node of this deployment, for what is counted on each (Pub/Sub
    /// channels, `CLIENT LIST`): the masters first, in [`Site::masters`]'
    /// order, then on a cluster each master's replicas (as its `ROLE` lists
    /// them), reached with the entry's settings. Behind Sentinel, the master
    /// alone: deadbolt's clients connect to no other node.
    ///
    /// # Errors
    /// A master does not answer, or its `ROLE` is not a master's.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub(crate) async fn nodes(&self) -> anyhow::Result<Vec<ConnectionInfo>> {
        let mut nodes: Vec<ConnectionInfo> = self.masters.iter().map(|m| m.conn.clone()).collect();
        if self.topology != Topology::Cluster {
            return Ok(nodes);
        }
        for m in &self.masters {
            let mut conn = m.stats().await?;
            let (role, _offset, replicas): (String, i64, Vec<(String, String, String)>) =
                redis::cmd("ROLE")
                    .query_async(&mut conn)
                    .await
                    .with_context(|| format!("ROLE of {}", m.shown()))?;
            if role != "master" {
                bail!("{} is a {role}, not a master", m.shown());
            }
            for (host, port, _offset) in replicas {
                let port = port
                    .parse()
                    .with_context(|| format!("a replica of {} at port {port:?}", m.shown()))?;
                nodes.push(at(&m.conn, ConnectionAddr::Tcp(host, port)));
            }
        }
        Ok(nodes)
    }

    /// Best effort, for a deployment that is not ours: delete this run's
    /// keys (the locks' fencing counters) from every master.
    pub(crate) async fn cleanup(&self, namespace: &str, run_id: &str) {
        for m in &self.masters {
            if let Ok(mut conn) = m.stats().await {
                cleanup(&mut conn, namespace, run_id).await;
            }
        }
    }
}

/// The cluster's masters, through redis-rs's cluster client on the seeds.
async fn cluster_masters(seeds: &[String]) -> anyhow::Result<Vec<Master>> {
    let seed = seeds.first().context("no cluster seed URL given")?;
    let shown = redact(seed);
    let base = stats::client(seed, "Redis")?.get_connection_info().clone();
    let mut conn = redis::cluster::ClusterClient::new(seeds.iter().map(String::as_str))
        .with_context(|| format!("the cluster seeds {shown}"))?
        .get_async_connection()
        .await
        .with_context(|| format!("connecting to the cluster at {shown}"))?;
    let ids = master_ids(&mut conn)
        .await
        .with_context(|| format!("the masters of the cluster at {shown}"))?;
    let owners = slot_owners(&mut conn)
        .await
        .with_context(|| format!("the slots of the cluster at {shown}"))?;
    let mut masters: Vec<Master> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (slot, id) in (0..SLOTS).zip(owners) {
        let i = match index.get(&id) {
            Some(&i) => i,
            None => {
                let addr = ids.get(&id).with_context(|| {
                    format!("slot {slot} is served by {id}, not one of the masters listed")
                })?;
                masters.push(Master {
                    conn: at(&base, addr.clone()),
                    slots: Vec::new(),
                });
                index.insert(id, masters.len() - 1);
                masters.len() - 1
            }
        };
        let slots = &mut masters[i].slots;
        match slots.last_mut() {
            Some(last) if last.1 + 1 == slot => last.1 = slot,
            _ => slots.push((slot, slot)),
        }
    }
    Ok(masters)
}

/// Every master's node id, to its address (`CLUSTER MYID` on every master).
async fn master_ids(
    conn: &mut ClusterConnection,
) -> anyhow::Result<HashMap<String, ConnectionAddr>> {
    let all = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
    let reply = conn
        .route_command(redis::cmd("CLUSTER").arg("MYID").clone(), all)
        .await?;
    let Value::Map(nodes) = reply else {
        bail!("CLUSTER MYID on every master: a reply per master expected, got {reply:?}");
    };
    let mut ids = HashMap::new();
    for (addr, id) in nodes {
        let addr: String = redis::from_redis_value(addr)?;
        let id: String = redis::from_redis_value(id)?;
        let (host, port) = addr
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h.to_string(), p.parse().ok()?)))
            .with_context(|| format!("a master at {addr:?}"))?;
        ids.insert(id, ConnectionAddr::Tcp(host, port));
    }
    Ok(ids)
}

/// The node id of the master serving each slot, in slot order: `CLUSTER
/// MYID` routed by redis-rs to each slot's master. A slot nobody serves
/// fails.
async fn slot_owners(conn: &mut ClusterConnection) -> anyhow::Result<Vec<String>> {
    futures::stream::iter(0..SLOTS)
        .map(|slot| {
            let mut conn = conn.clone();
            async move {
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::new(slot, SlotAddr::Master),
                ));
                let reply = conn
                    .route_command(redis::cmd("CLUSTER").arg("MYID").clone(), route)
                    .await
                    .with_context(|| format!("slot {slot}"))?;
                anyhow::Ok(redis::from_redis_value::<String>(reply)?)
            }
        })
        .buffered(SLOT_LOOKUPS)
        .try_collect()
        .await
}

/// `base`'s settings at `addr` (TLS kept when `base` has it).
fn at(base: &ConnectionInfo, addr: ConnectionAddr) -> ConnectionInfo {
    let addr = match (base.addr(), addr) {
        (
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            },
            ConnectionAddr::Tcp(host, port),
        ) => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        (_, addr) => addr,
    };
    base.clone().set_addr(addr)
}

/// The master the Sentinels at `sentinels` know as `name`, through core's
/// lookup, reached as deadbolt's client reaches it (the first Sentinel's
/// address kind, no credentials, database 0).
async fn sentinel_master(sentinels: &[String], name: &str) -> anyhow::Result<Master> {
    let clients = sentinels
        .iter()
        .map(|s| stats::client(s, "Sentinel"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let first = clients.first().context("no Sentinel URL given")?;
    let node = first
        .get_connection_info()
        .clone()
        .set_redis_settings(redis::RedisConnectionInfo::default());
    let conn = deadbolt_core::sentinel_master(&clients, name, &node, SENTINEL_TIMEOUT)
        .await
        .map_err(|e| anyhow!("the master {name:?} of the Sentinels: {e}"))?;
    Ok(Master {
        conn,
        slots: vec![(0, SLOTS - 1)],
    })
}

/// Best effort: delete this run's keys from a server (or one cluster
/// master) that is not ours, one DEL per key (a cluster refuses a DEL of
/// keys in different slots), and the fencing counters of the bench's
/// namespace (deadbolt keeps one per hash slot that its names used; the
/// namespace is the bench's own, and tokens drawn after a counter is gone
/// still rise: they have the server clock as their floor).
pub(crate) async fn cleanup(
    conn: &mut redis::aio::MultiplexedConnection,
    namespace: &str,
    run_id: &str,
) {
    delete_matching(conn, &format!("{namespace}:*{run_id}*"), |_| true).await;
    // The redisson contenders' keys around a lock name (unlock latches, the
    // fair lock's queue and timeouts) put a prefix of Redisson's first.
    delete_matching(
        conn,
        &format!("redisson_*:{{{namespace}:*{run_id}*}}*"),
        |_| true,
    )
    .await;
    delete_matching(conn, &format!("{namespace}:{{*}}:fence"), |k| {
        deadbolt_core::is_fence_key(namespace, k)
    })
    .await;
}

/// Best effort: delete the keys that match the SCAN `pattern` and `keep`.
async fn delete_matching(
    conn: &mut redis::aio::MultiplexedConnection,
    pattern: &str,
    keep: impl Fn(&str) -> bool,
) {
    let mut cursor: u64 = 0;
    loop {
        let Ok((next, keys)): redis::RedisResult<(u64, Vec<String>)> = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
        else {
            return;
        };
        let keys: Vec<&String> = keys.iter().filter(|k| keep(k)).collect();
        if !keys.is_empty() {
            let mut pipe = redis::pipe();
            for key in &keys {
                pipe.cmd("DEL").arg(key).ignore();
            }
            let _: redis::RedisResult<()> = pipe.query_async(conn).await;
        }
        if next == 0 {
            return;
        }
        cursor = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A master found through a seed is reached with the seed's scheme,
    /// credentials and database, at the master's address.
    #[test]
    fn masters_keep_the_seeds_scheme_credentials_and_database() {
        let seed = |url: &str| {
            redis::Client::open(url)
                .unwrap()
                .get_connection_info()
                .clone()
        };
        let master = |url: &str, host: &str, port| Master {
            conn: at(&seed(url), ConnectionAddr::Tcp(host.to_string(), port)),
            slots: vec![(0, SLOTS - 1)],
        };
        let m = master("redis://u:p@seed:7000/", "10.0.0.2", 7001);
        assert_eq!(m.shown(), "redis://***@10.0.0.2:7001/");
        assert_eq!(m.conn.redis_settings().username(), Some("u"));
        assert_eq!(m.conn.redis_settings().password(), Some("p"));
        assert_eq!(
            master("rediss://seed:7000", "::1", 7002).shown(),
            "rediss://[::1]:7002/"
        );
        assert_eq!(
            master("redis://127.0.0.1:7000/2", "127.0.0.1", 7003).shown(),
            "redis://127.0.0.1:7003/2"
        );
    }
}
