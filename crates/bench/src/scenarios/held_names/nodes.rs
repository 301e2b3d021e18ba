//! Where a held-names run goes and what it reads there: server 1, or the
//! `--topology` deployment (a Redis Cluster of several masters and their
//! replicas, or a Sentinel-managed master).
//!
//! What a server holds (`used_memory`) and spends (`INFO commandstats`,
//! `INFO cpu`) is read on every master and added up; what a client sees
//! (Pub/Sub channels, `CLIENT LIST`) on every node, a cluster's replicas
//! too, and added up. On a cluster deadbolt waits with sharded Pub/Sub
//! (`SSUBSCRIBE`), so there the channels are `PUBSUB SHARDCHANNELS`'s
//! besides `PUBSUB CHANNELS`'s, and the waiters' keys, in many hash slots,
//! are looked up one slot's at a time on the master that serves it.

use std::collections::{BTreeMap, HashSet};

use anyhow::Context as _;
use deadbolt_core::deployment::Topology;
use redis::aio::MultiplexedConnection;

use crate::contender::DEADBOLT_TOPOLOGY_COMMANDS;
use crate::scenarios::Env;
use crate::site::{Master, Site};
use crate::stats::{self, Snapshot};

/// Keys per `EXISTS` on one server, and `EXISTS` per pipeline on a
/// cluster's master, when counting the waiters registered.
const EXISTS_CHUNK: usize = 1000;

/// Where a held-names run's clients go, and the bench's own connections to
/// every node there.
pub(super) struct Nodes {
    /// Server 1 (`Standalone`) or the deployment's.
    topology: Topology,
    /// Where the clients enter: the deployment, or (`None`) server 1.
    site: Option<Site>,
    /// Server 1's URL.
    url: String,
    /// The masters, each with the slots it serves.
    masters: Vec<Master>,
    /// The bench's connection to every node, the masters first (in
    /// `masters`' order).
    conns: Vec<MultiplexedConnection>,
    /// Whether the bench started them: emptied before a run, and their
    /// Redis CPU read from the servers' own counters.
    embedded: bool,
}

/// The Pub/Sub channels with a subscriber on every node, added up.
#[derive(Debug, Default)]
pub(super) struct Channels {
    /// `PUBSUB CHANNELS`'s.
    pub(super) plain: Vec<String>,
    /// `PUBSUB SHARDCHANNELS`'s (a cluster's only).
    pub(super) shard: Vec<String>,
}

impl Channels {
    /// Every channel, plain and sharded.
    pub(super) fn all(&self) -> impl Iterator<Item = &String> {
        self.plain.iter().chain(&self.shard)
    }

    /// How many there are, plain and sharded.
    pub(super) fn count(&self) -> u64 {
        u64::try_from(self.plain.len() + self.shard.len()).unwrap_or(u64::MAX)
    }
}

/// A connection of a client: the node it is on (an index into the nodes)
/// and its `CLIENT LIST` id there.
pub(super) type ConnId = (usize, u64);

impl Nodes {
    /// The nodes of `env`'s `--topology` deployment when it has one, else
    /// server 1 alone.
    pub(super) async fn of(env: &Env<'_>) -> anyhow::Result<Nodes> {
        let Some(site) = env.topology.clone() else {
            return Ok(Nodes {
                topology: Topology::Standalone,
                site: None,
                url: env.url().to_string(),
                masters: vec![Master::whole(env.url())?],
                conns: vec![env.stats.clone()],
                embedded: env.embedded,
            });
        };
        let mut conns = Vec::new();
        for info in site.nodes().await? {
            let shown = Master {
                conn: info.clone(),
                slots: Vec::new(),
            }
            .shown();
            let conn = redis::Client::open(info)?
                .get_multiplexed_async_connection()
                .await
                .with_context(|| format!("connecting to {shown}"))?;
            conns.push(conn);
        }
        Ok(Nodes {
            topology: site.topology,
            url: env.url().to_string(),
            masters: site.masters.clone(),
            embedded: site.info.embedded,
            site: Some(site),
            conns,
        })
    }

    /// Where the run goes.
    pub(super) fn topology(&self) -> Topology {
        self.topology
    }

    /// How many masters there are.
    pub(super) fn masters(&self) -> u32 {
        u32::try_from(self.masters.len()).unwrap_or(u32::MAX)
    }

    /// How many nodes there are, the masters included.
    pub(super) fn nodes(&self) -> u32 {
        u32::try_from(self.conns.len()).unwrap_or(u32::MAX)
    }

    /// Whether the bench started them.
    pub(super) fn embedded(&self) -> bool {
        self.embedded
    }

    /// Whether keys are spread over hash slots and Pub/Sub is sharded (a
    /// cluster).
    fn sharded(&self) -> bool {
        self.topology == Topology::Cluster
    }

    /// The commands a deadbolt client sends itself here, when they are not
    /// the contender's own list (`None` on server 1): with sharded Pub/Sub.
    pub(super) fn client_commands(&self) -> Option<&'static [&'static str]> {
        (self.topology != Topology::Standalone).then_some(DEADBOLT_TOPOLOGY_COMMANDS)
    }

    /// A builder of deadbolt clients for these nodes.
    pub(super) fn builder(&self) -> deadbolt_core::ClientBuilder {
        match &self.site {
            Some(site) => site.builder(),
            None => deadbolt_core::Client::builder(&self.url),
        }
    }

    /// The masters' connections.
    fn master_conns(&mut self) -> &mut [MultiplexedConnection] {
        let n = self.masters.len();
        &mut self.conns[..n]
    }

    /// Empty every master (`FLUSHALL SYNC`; a cluster's replicas follow).
    pub(super) async fn flush(&mut self) -> anyhow::Result<()> {
        for conn in self.master_conns() {
            let () = redis::cmd("FLUSHALL")
                .arg("SYNC")
                .query_async(conn)
                .await
                .context("FLUSHALL")?;
        }
        Ok(())
    }

    /// `used_memory` of every master added up, bytes.
    pub(super) async fn used_memory(&mut self) -> anyhow::Result<i64> {
        let mut total = 0;
        for conn in self.master_conns() {
            total += used_memory(conn).await?;
        }
        Ok(total)
    }

    /// Every master's commands and CPU so far added up, and this process's
    /// CPU.
    pub(super) async fn snapshot(&mut self) -> anyhow::Result<Snapshot> {
        let mut total: Option<Snapshot> = None;
        for conn in self.master_conns() {
            let s = stats::snapshot(conn).await?;
            match &mut total {
                Some(t) => t.add_server(&s),
                None => total = Some(s),
            }
        }
        total.context("no master")
    }

    /// `keys` in groups one `EXISTS` each counts, each with the master it
    /// goes to: on one server chunks of [`EXISTS_CHUNK`] keys, on a cluster
    /// the keys of one hash slot.
    pub(super) fn exists_groups(&self, keys: Vec<String>) -> Vec<(usize, Vec<String>)> {
        if !self.sharded() {
            return keys.chunks(EXISTS_CHUNK).map(|c| (0, c.to_vec())).collect();
        }
        let mut by_slot: BTreeMap<u16, Vec<String>> = BTreeMap::new();
        for key in keys {
            by_slot
                .entry(deadbolt_core::hash_slot(&key))
                .or_default()
                .push(key);
        }
        by_slot
            .into_iter()
            .map(|(slot, keys)| {
                let on = self.masters.iter().position(|m| m.serves(slot));
                (on.unwrap_or(0), keys)
            })
            .collect()
    }

    /// How many keys of each group of `groups` ([`Nodes::exists_groups`])
    /// exist, in their order.
    pub(super) async fn count_existing(
        &mut self,
        groups: &[(usize, Vec<String>)],
    ) -> anyhow::Result<Vec<usize>> {
        let mut counts = vec![0; groups.len()];
        for (m, conn) in self.master_conns().iter_mut().enumerate() {
            let mine: Vec<usize> = (0..groups.len()).filter(|&i| groups[i].0 == m).collect();
            for chunk in mine.chunks(EXISTS_CHUNK) {
                let mut pipe = redis::pipe();
                for &i in chunk {
                    pipe.cmd("EXISTS").arg(&groups[i].1);
                }
                let found: Vec<usize> = pipe.query_async(conn).await.context("EXISTS")?;
                for (&i, n) in chunk.iter().zip(found) {
                    counts[i] = n;
                }
            }
        }
        Ok(counts)
    }

    /// The channels with a subscriber on every node (those matching the
    /// glob `pattern` when given): `PUBSUB CHANNELS`, and on a cluster
    /// `PUBSUB SHARDCHANNELS`.
    pub(super) async fn channels(&mut self, pattern: Option<&str>) -> anyhow::Result<Channels> {
        let sharded = self.sharded();
        let mut out = Channels::default();
        for conn in &mut self.conns {
            out.plain.extend(pubsub(conn, "CHANNELS", pattern).await?);
            if sharded {
                out.shard
                    .extend(pubsub(conn, "SHARDCHANNELS", pattern).await?);
            }
        }
        Ok(out)
    }

    /// `CLIENT LIST` of every node, in the nodes' order.
    pub(super) async fn client_lists(&mut self) -> anyhow::Result<Vec<String>> {
        let mut lists = Vec::with_capacity(self.conns.len());
        for conn in &mut self.conns {
            let list: String = redis::cmd("CLIENT")
                .arg("LIST")
                .query_async(conn)
                .await
                .context("CLIENT LIST")?;
            lists.push(list);
        }
        Ok(lists)
    }

    /// Every connection on every node now, by its id: what a client's
    /// connections are told apart by where they carry no name (deadbolt
    /// names its connections to one server, not a cluster's).
    pub(super) async fn connections(&mut self) -> anyhow::Result<HashSet<ConnId>> {
        let lists = self.client_lists().await?;
        Ok(lists
            .iter()
            .enumerate()
            .flat_map(|(node, list)| {
                list.lines()
                    .filter_map(move |l| Some((node, field(l, "id")?.parse().ok()?)))
            })
            .collect())
    }
}

/// `PUBSUB <sub> [pattern]` on one node.
async fn pubsub(
    conn: &mut MultiplexedConnection,
    sub: &str,
    pattern: Option<&str>,
) -> anyhow::Result<Vec<String>> {
    let mut cmd = redis::cmd("PUBSUB");
    cmd.arg(sub);
    if let Some(p) = pattern {
        cmd.arg(p);
    }
    cmd.query_async(conn)
        .await
        .with_context(|| format!("PUBSUB {sub}"))
}

/// The value of field `key` of one `CLIENT LIST` line.
pub(super) fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(' ')
        .filter_map(|f| f.split_once('='))
        .find_map(|(k, v)| (k == key).then_some(v))
}

/// `used_memory` of the server behind `conn`, bytes.
async fn used_memory(conn: &mut MultiplexedConnection) -> anyhow::Result<i64> {
    let info = stats::info(conn, "memory").await?;
    info.lines()
        .find_map(|l| l.trim().strip_prefix("used_memory:"))
        .and_then(|v| v.parse().ok())
        .context("INFO memory has no used_memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_list_fields_are_found_by_name() {
        let line = "id=7 addr=127.0.0.1:5 name=a sub=2 ssub=3";
        assert_eq!(field(line, "id"), Some("7"));
        assert_eq!(field(line, "ssub"), Some("3"));
        assert_eq!(field(line, "psub"), None);
    }
}
