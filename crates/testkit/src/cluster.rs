//! A local Redis Cluster of six `redis-server` processes.

mod migration;
mod nodes;

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub use migration::SlotMigration;
use nodes::{parse_nodes, NodeLine, SLOTS};

use crate::server::redis_server_path;
use crate::topology::{cmd, info_field, query, query_sync, wait, wait_sync, Check, Processes};
use crate::RedisServer;

/// Masters at start; each gets one replica.
const MASTERS: usize = 3;
/// `cluster-node-timeout`: how long a node may not answer before it counts as failing.
const NODE_TIMEOUT_MS: u64 = 2000;
/// Bound on `redis-cli --cluster create` and on the cluster becoming stable after it.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on a failover, a slot hand-over or a replica catching up.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(30);
/// Keys moved per `MIGRATE`.
const MIGRATE_BATCH: usize = 100;
/// `MIGRATE`'s own timeout, in milliseconds.
const MIGRATE_TIMEOUT_MS: u64 = 5000;

/// A local Redis Cluster: three masters with one replica each, six [`RedisServer`]s on free
/// loopback ports.
///
/// The nodes run with `--cluster-node-timeout 2000` (a silent node counts as failing after
/// about 2 s), no persistence and `--repl-diskless-sync-delay 0` (a replica's full sync starts
/// at once instead of after 5 s). The cluster is created with `redis-cli --cluster create
/// ... --cluster-replicas 1`, so `redis-cli` must be installed next to `redis-server` or on
/// `PATH`.
///
/// Nodes are numbered `0..6`. Right after [`start`](Self::start), node `i < 3` is the master
/// of the `i`-th third of the slots (node 0 serves slot 0) and node `i + 3` is its replica.
/// Failovers swap roles; [`masters`](Self::masters), [`master_of_slot`](Self::master_of_slot)
/// and [`replica_of`](Self::replica_of) ask the cluster for the current layout.
///
/// The methods that ask the cluster use the view of the first node that answers (neither
/// paused nor killed). After the layout changes behind their back (a node resumed after a
/// forced failover, an automatic failover after [`pause_node`](Self::pause_node)), call
/// [`wait_stable`](Self::wait_stable) first so that every node's view agrees.
///
/// Dropping the cluster kills every process (paused ones too) and removes their directories.
///
/// # Examples
///
/// ```no_run
/// # async fn example() -> std::io::Result<()> {
/// use deadbolt_testkit::RedisCluster;
///
/// let cluster = RedisCluster::start()?;
/// let client = redis::cluster::ClusterClient::new(cluster.urls()).unwrap();
/// let mut conn = client.get_async_connection().await.unwrap();
/// let () = redis::cmd("SET").arg("k").arg("v").query_async(&mut conn).await.unwrap();
///
/// let slot = RedisCluster::keyslot("k");
/// let owner = cluster.master_of_slot(slot).await?;
/// cluster.wait_replicated(owner).await?;
/// let new_owner = cluster.failover(owner).await?;
/// assert_eq!(cluster.master_of_slot(slot).await?, new_owner);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct RedisCluster {
    procs: Processes,
    /// Node ids (`CLUSTER MYID`), by node index; fixed for the life of the process.
    ids: Vec<String>,
}

/// One node's place in the layout as another node sees it: id, whether it is a master, the
/// master it follows, the slots it serves.
type Placement<'a> = (&'a str, bool, Option<&'a str>, &'a [(u16, u16)]);

/// What one node says about the cluster, read in one go.
#[derive(Debug)]
struct Report {
    index: usize,
    cluster_info: String,
    nodes: Vec<NodeLine>,
    replication: String,
}

impl RedisCluster {
    /// Start six nodes, join them into a cluster of three masters with one replica each, and
    /// wait until it is stable: every node reports `cluster_state:ok` and all 16384 slots
    /// assigned, every node sees the same layout, and each replica reports
    /// `master_link_status:up`.
    ///
    /// Takes a few seconds (most of it the nodes agreeing through gossip).
    ///
    /// # Errors
    ///
    /// If a node cannot be started (see [`RedisServer::start`]), `redis-cli` is missing or
    /// fails, or the cluster is not stable within 30 s; the message then includes what was
    /// missing and the end of every node's log.
    pub fn start() -> io::Result<RedisCluster> {
        let servers = (0..MASTERS * 2)
            .map(|_| {
                RedisServer::builder()
                    .cluster(true)
                    .arg("cluster-node-timeout", NODE_TIMEOUT_MS.to_string())
                    .arg("repl-diskless-sync-delay", "0")
                    .start()
            })
            .collect::<io::Result<Vec<_>>>()?;
        create(&servers)?;
        let ids = servers
            .iter()
            .map(|s| query_sync(s, &cmd(&["CLUSTER", "MYID"])))
            .collect::<io::Result<Vec<String>>>()?;
        let cluster = RedisCluster {
            procs: Processes::new(servers),
            ids,
        };
        let mut layout = Vec::new();
        wait_sync(
            "cluster start",
            START_TIMEOUT,
            || cluster.procs.logs(),
            || {
                let reports = cluster.reports_sync()?;
                cluster.check_stable(&reports)?;
                layout = reports
                    .into_iter()
                    .next()
                    .map(|r| r.nodes)
                    .unwrap_or_default();
                Ok(())
            },
        )?;
        cluster.reordered(&layout)
    }

    /// The same cluster with its nodes renumbered: masters by their first slot, then the
    /// replica of each master in the same order.
    fn reordered(self, layout: &[NodeLine]) -> io::Result<RedisCluster> {
        let mut masters: Vec<&NodeLine> = layout.iter().filter(|n| n.master).collect();
        masters.sort_by_key(|n| n.slots.iter().map(|&(lo, _)| lo).min());
        let replicas = masters.iter().map(|m| {
            layout
                .iter()
                .find(|n| n.master_id.as_deref() == Some(m.id.as_str()))
        });
        let order = masters
            .iter()
            .copied()
            .map(Some)
            .chain(replicas)
            .map(|n| n.and_then(|n| self.index_of_id(&n.id)))
            .collect::<Option<Vec<usize>>>()
            .filter(|o| o.len() == self.ids.len())
            .ok_or_else(|| {
                io::Error::other(format!(
                    "deadbolt-testkit: unexpected cluster layout after start: {layout:?}"
                ))
            })?;
        let ids = order.iter().map(|&i| self.ids[i].clone()).collect();
        let mut servers: Vec<Option<RedisServer>> =
            self.procs.into_servers().into_iter().map(Some).collect();
        let servers = order
            .iter()
            .map(|&i| {
                servers[i]
                    .take()
                    .expect("a permutation takes each node once")
            })
            .collect();
        Ok(RedisCluster {
            procs: Processes::new(servers),
            ids,
        })
    }

    /// Seed URLs for a cluster client (`redis://127.0.0.1:<port>/`): those of nodes 0, 1 and 2
    /// (the masters at start) that are neither paused nor killed, or of every such node if
    /// none of those three is. Any node serves as a seed: a client learns the current layout
    /// from `CLUSTER SLOTS`.
    pub fn urls(&self) -> Vec<String> {
        let live = self.procs.live();
        let seeds: Vec<usize> = live.iter().copied().filter(|&i| i < MASTERS).collect();
        let seeds = if seeds.is_empty() { live } else { seeds };
        seeds.iter().map(|&i| self.procs.get(i).url()).collect()
    }

    /// All six nodes, by index.
    pub fn nodes(&self) -> &[RedisServer] {
        self.procs.servers()
    }

    /// Node `i`.
    ///
    /// # Panics
    ///
    /// If `i` is not below 6.
    pub fn node(&self, i: usize) -> &RedisServer {
        self.procs.get(i)
    }

    /// The cluster node id of node `i` (`CLUSTER MYID`).
    ///
    /// # Panics
    ///
    /// If `i` is not below 6.
    pub fn node_id(&self, i: usize) -> &str {
        self.procs.get(i);
        &self.ids[i]
    }

    /// The hash slot of `key`, computed locally as Redis does (CRC16 of the key or of its
    /// `{hash tag}`, modulo 16384); the same as `CLUSTER KEYSLOT`.
    pub fn keyslot(key: impl AsRef<[u8]>) -> u16 {
        nodes::keyslot(key.as_ref())
    }

    /// Indices of the current masters that serve slots, ascending, read from `CLUSTER NODES`.
    ///
    /// # Errors
    ///
    /// If no node answers.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: read-only.
    pub async fn masters(&self) -> io::Result<Vec<usize>> {
        let view = self.view().await?;
        let mut masters: Vec<usize> = view
            .iter()
            .filter(|n| n.master && !n.failed && !n.slots.is_empty())
            .filter_map(|n| self.index_of_id(&n.id))
            .collect();
        masters.sort_unstable();
        Ok(masters)
    }

    /// Index of the master that serves `slot` now.
    ///
    /// # Errors
    ///
    /// If `slot` is not below 16384, no node answers, or no node serves the slot.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: read-only.
    pub async fn master_of_slot(&self, slot: u16) -> io::Result<usize> {
        check_slot(slot)?;
        let view = self.view().await?;
        view.iter()
            .filter(|n| n.master && n.serves(slot))
            .find_map(|n| self.index_of_id(&n.id))
            .ok_or_else(|| io::Error::other(format!("no node serves slot {slot}")))
    }

    /// Index of a replica of node `master` (the lowest, should there be several) that is not
    /// flagged as failing.
    ///
    /// # Errors
    ///
    /// If no node answers or `master` has no such replica.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: read-only.
    ///
    /// # Panics
    ///
    /// If `master` is not below 6.
    pub async fn replica_of(&self, master: usize) -> io::Result<usize> {
        let id = self.node_id(master);
        let view = self.view().await?;
        let mut replicas: Vec<usize> = view
            .iter()
            .filter(|n| !n.master && !n.failed && n.master_id.as_deref() == Some(id))
            .filter_map(|n| self.index_of_id(&n.id))
            .collect();
        replicas.sort_unstable();
        replicas
            .first()
            .copied()
            .ok_or_else(|| io::Error::other(format!("node {master} has no working replica")))
    }

    /// Move `slot` with its keys to node `to`, the way `redis-cli --cluster reshard` does, and
    /// wait until every node that answers sees `to` as its owner.
    ///
    /// [`begin_migration`](Self::begin_migration) followed by
    /// [`SlotMigration::finish`]; does nothing if `to` serves the slot already.
    ///
    /// # Errors
    ///
    /// As [`begin_migration`](Self::begin_migration) and [`SlotMigration::finish`].
    ///
    /// # Cancel safety
    ///
    /// **Not** cancel safe: dropped half-way, the slot may stay MIGRATING on its owner and
    /// IMPORTING on `to`, with some keys moved.
    ///
    /// # Panics
    ///
    /// If `to` is not below 6.
    pub async fn migrate_slot(&self, slot: u16, to: usize) -> io::Result<()> {
        if self.master_of_slot(slot).await? == to {
            return Ok(());
        }
        self.begin_migration(slot, to).await?.finish().await
    }

    /// Start moving `slot` to node `to`: `CLUSTER SETSLOT <slot> IMPORTING` on `to`, then
    /// `CLUSTER SETSLOT <slot> MIGRATING` on the current owner.
    ///
    /// Until [`SlotMigration::finish`], the owner still serves the keys it holds and answers
    /// `-ASK` for the others, which a client must then send to `to` after `ASKING`. Keys move
    /// with [`SlotMigration::move_keys`].
    ///
    /// # Errors
    ///
    /// If `slot` is not below 16384, `to` already serves it or is not a master serving slots,
    /// or a node does not answer or refuses.
    ///
    /// # Cancel safety
    ///
    /// **Not** cancel safe: dropped between the two commands, the slot stays IMPORTING on
    /// `to`.
    ///
    /// # Panics
    ///
    /// If `to` is not below 6.
    pub async fn begin_migration(&self, slot: u16, to: usize) -> io::Result<SlotMigration<'_>> {
        let target_id = self.node_id(to).to_owned();
        let from = self.master_of_slot(slot).await?;
        if from == to {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("node {to} already serves slot {slot}"),
            ));
        }
        if !self.masters().await?.contains(&to) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("node {to} is not a master serving slots"),
            ));
        }
        let slot_arg = slot.to_string();
        let () = query(
            self.node(to),
            &cmd(&[
                "CLUSTER",
                "SETSLOT",
                &slot_arg,
                "IMPORTING",
                &self.ids[from],
            ]),
        )
        .await?;
        let () = query(
            self.node(from),
            &cmd(&["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &target_id]),
        )
        .await?;
        Ok(SlotMigration::new(self, slot, from, to))
    }

    /// Promote the replica of node `master` with `CLUSTER FAILOVER` (a coordinated manual
    /// failover: the master stops writes until the replica has caught up, so nothing
    /// acknowledged is lost) and wait until the cluster is stable again with the roles
    /// swapped: the replica reports `role:master`, every node that answers reports
    /// `cluster_state:ok` and sees the new layout, and the old master, if it answers, is a
    /// replica of the new one with its link up. Returns the index of the new master.
    ///
    /// Takes about a second. The master must answer; see
    /// [`failover_force`](Self::failover_force) otherwise.
    ///
    /// # Errors
    ///
    /// If `master` has no working replica, the replica refuses, or the cluster is not stable
    /// within 30 s (the message then includes the end of every node's log).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in the sense that dropping the future only stops the waiting: once sent,
    /// the failover goes ahead.
    ///
    /// # Panics
    ///
    /// If `master` is not below 6.
    pub async fn failover(&self, master: usize) -> io::Result<usize> {
        self.failover_with(master, None).await
    }

    /// Like [`failover`](Self::failover) with `CLUSTER FAILOVER FORCE`: the replica does not
    /// wait for its master (which may be paused or dead) but still needs the votes of a
    /// majority of masters. Writes the replica has not received are lost.
    ///
    /// # Errors
    ///
    /// As [`failover`](Self::failover).
    ///
    /// # Cancel safety
    ///
    /// As [`failover`](Self::failover).
    ///
    /// # Panics
    ///
    /// If `master` is not below 6.
    pub async fn failover_force(&self, master: usize) -> io::Result<usize> {
        self.failover_with(master, Some("FORCE")).await
    }

    /// Like [`failover`](Self::failover) with `CLUSTER FAILOVER TAKEOVER`: the replica takes
    /// the slots without asking anyone (no election), as after losing a majority of masters.
    /// Writes the replica has not received are lost.
    ///
    /// # Errors
    ///
    /// As [`failover`](Self::failover).
    ///
    /// # Cancel safety
    ///
    /// As [`failover`](Self::failover).
    ///
    /// # Panics
    ///
    /// If `master` is not below 6.
    pub async fn failover_takeover(&self, master: usize) -> io::Result<usize> {
        self.failover_with(master, Some("TAKEOVER")).await
    }

    async fn failover_with(&self, master: usize, mode: Option<&str>) -> io::Result<usize> {
        let replica = self.replica_of(master).await?;
        let mut failover = cmd(&["CLUSTER", "FAILOVER"]);
        if let Some(mode) = mode {
            failover.arg(mode);
        }
        let () = query(self.node(replica), &failover).await?;
        let what = format!(
            "CLUSTER FAILOVER{} of node {master} to node {replica}",
            mode.map(|m| format!(" {m}")).unwrap_or_default()
        );
        wait(
            &what,
            CHANGE_TIMEOUT,
            || self.procs.logs(),
            || async move {
                let reports = self.reports().await?;
                self.check_stable(&reports)?;
                self.check_roles_swapped(&reports, master, replica)
            },
        )
        .await?;
        Ok(replica)
    }

    fn check_roles_swapped(&self, reports: &[Report], old: usize, new: usize) -> Check {
        let role = |i: usize| {
            reports
                .iter()
                .find(|r| r.index == i)
                .map(|r| info_field(&r.replication, "role").unwrap_or("?"))
        };
        match role(new) {
            Some("master") => {}
            other => return Err(format!("node {new} has role {other:?}")),
        }
        if let Some(r) = reports.iter().find(|r| r.index == old) {
            let port = self.node(new).port().to_string();
            let following = info_field(&r.replication, "master_port");
            if role(old) != Some("slave") || following != Some(port.as_str()) {
                return Err(format!(
                    "old master {old} has role {:?}, follows port {following:?}",
                    role(old)
                ));
            }
        }
        Ok(())
    }

    /// Wait until the replica of node `master` has received everything the master had
    /// received when this was called (the replica's `slave_repl_offset` reaches the master's
    /// `master_repl_offset`).
    ///
    /// `WAIT 1` is no substitute: it waits for the writes of its own connection only, so on a
    /// fresh connection it returns at once.
    ///
    /// # Errors
    ///
    /// If `master` has no working replica, a node does not answer, or the replica does not
    /// catch up within 30 s.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: read-only.
    ///
    /// # Panics
    ///
    /// If `master` is not below 6.
    pub async fn wait_replicated(&self, master: usize) -> io::Result<()> {
        let replica = self.replica_of(master).await?;
        self.procs
            .wait_caught_up(master, replica, CHANGE_TIMEOUT, || self.procs.logs())
            .await
    }

    /// Wait until the cluster is stable: every node that answers reports `cluster_state:ok`
    /// with all slots assigned, sees every other answering node as healthy and the same
    /// layout as the others, every slot is served by a node that answers, and every answering
    /// replica's link to its master is up.
    ///
    /// After [`pause_node`](Self::pause_node) or [`kill_node`](Self::kill_node) of a master
    /// this waits out the automatic failover (the slots must be served by a node that
    /// answers); after [`resume_node`](Self::resume_node) of a master that was failed over
    /// meanwhile, until it has rejoined as a replica.
    ///
    /// # Errors
    ///
    /// If the cluster is not stable within 30 s (for instance because the only copy of some
    /// slots was killed); the message then includes the end of every node's log.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: read-only.
    pub async fn wait_stable(&self) -> io::Result<()> {
        wait(
            "cluster stable",
            CHANGE_TIMEOUT,
            || self.procs.logs(),
            || async move { self.check_stable(&self.reports().await?) },
        )
        .await
    }

    /// The first of `<prefix>0`, `<prefix>1`, ... whose hash slot master `master` serves
    /// now (for a key, or for a hash tag: a deadbolt primitive's keys all carry its name as
    /// their tag).
    ///
    /// # Errors
    ///
    /// If a node does not answer.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: read-only.
    pub async fn key_on(&self, master: usize, prefix: &str) -> io::Result<String> {
        for i in 0u32.. {
            let key = format!("{prefix}{i}");
            if self.master_of_slot(Self::keyslot(&key)).await? == master {
                return Ok(key);
            }
        }
        unreachable!("some key of every prefix falls in every master's slots")
    }

    /// Cut the replica of master `master` off, as a partition would: freeze it
    /// ([`pause_node`](Self::pause_node)) and have the master drop its replication link
    /// (`CLIENT KILL TYPE replica`). A frozen replica alone would still read, once resumed,
    /// what the master had sent it; cut off, it misses every write from now on until it
    /// reconnects (after [`resume_node`](Self::resume_node), if the master answers). Returns
    /// the replica's index.
    ///
    /// # Errors
    ///
    /// If `master` has no replica or does not answer.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped half-way, the replica stays frozen with its link up.
    pub async fn cut_off_replica(&self, master: usize) -> io::Result<usize> {
        let replica = self.replica_of(master).await?;
        self.pause_node(replica);
        let _: i64 = query(
            self.node(master),
            &cmd(&["CLIENT", "KILL", "TYPE", "replica"]),
        )
        .await?;
        Ok(replica)
    }

    /// Freeze node `i` (SIGSTOP): its connections stay open but it answers nothing, neither
    /// clients nor the cluster bus, so after about 2 s the others flag it as failing.
    ///
    /// If it is a master, its replica takes over on its own once the master is flagged
    /// failing and the replica has won an election (a few seconds after the pause;
    /// [`wait_stable`](Self::wait_stable) waits for that), unless
    /// [`failover_force`](Self::failover_force) promotes it first. Does nothing if the node is
    /// paused or killed already.
    ///
    /// # Panics
    ///
    /// If `i` is not below 6.
    pub fn pause_node(&self, i: usize) {
        self.procs.pause(i);
    }

    /// Let a node frozen by [`pause_node`](Self::pause_node) continue (SIGCONT). Does nothing
    /// if it is not paused.
    ///
    /// # Panics
    ///
    /// If `i` is not below 6.
    pub fn resume_node(&self, i: usize) {
        self.procs.resume(i);
    }

    /// Kill node `i` (SIGKILL) for good; the others flag it as failing after about 2 s.
    ///
    /// # Panics
    ///
    /// If `i` is not below 6.
    pub fn kill_node(&mut self, i: usize) {
        self.procs.kill(i);
    }

    fn index_of_id(&self, id: &str) -> Option<usize> {
        self.ids.iter().position(|x| x == id)
    }

    /// `CLUSTER NODES` of the first node that answers.
    async fn view(&self) -> io::Result<Vec<NodeLine>> {
        let mut last = None;
        for i in self.procs.live() {
            match query::<String>(self.node(i), &cmd(&["CLUSTER", "NODES"])).await {
                Ok(text) => return parse_nodes(&text).map_err(io::Error::other),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("every node is paused or killed")))
    }

    async fn reports(&self) -> Result<Vec<Report>, String> {
        let mut reports = Vec::new();
        for index in self.procs.live() {
            let node = self.node(index);
            let ask = |words: &'static [&'static str]| async move {
                query::<String>(node, &cmd(words))
                    .await
                    .map_err(|e| format!("node {index}: {e}"))
            };
            reports.push(Report {
                index,
                cluster_info: ask(&["CLUSTER", "INFO"]).await?,
                nodes: parse_nodes(&ask(&["CLUSTER", "NODES"]).await?)?,
                replication: ask(&["INFO", "replication"]).await?,
            });
        }
        Ok(reports)
    }

    fn reports_sync(&self) -> Result<Vec<Report>, String> {
        self.procs
            .live()
            .into_iter()
            .map(|index| {
                let ask = |words: &[&str]| {
                    query_sync::<String>(self.node(index), &cmd(words))
                        .map_err(|e| format!("node {index}: {e}"))
                };
                Ok(Report {
                    index,
                    cluster_info: ask(&["CLUSTER", "INFO"])?,
                    nodes: parse_nodes(&ask(&["CLUSTER", "NODES"])?)?,
                    replication: ask(&["INFO", "replication"])?,
                })
            })
            .collect()
    }

    /// See [`wait_stable`](Self::wait_stable).
    fn check_stable(&self, reports: &[Report]) -> Check {
        let live_ids: Vec<&str> = reports.iter().map(|r| self.ids[r.index].as_str()).collect();
        let mut first_layout = None;
        for r in reports {
            let i = r.index;
            let state = info_field(&r.cluster_info, "cluster_state");
            let assigned = info_field(&r.cluster_info, "cluster_slots_assigned");
            if state != Some("ok") || assigned != Some("16384") {
                return Err(format!(
                    "node {i}: cluster_state {state:?}, slots assigned {assigned:?}"
                ));
            }
            let mut layout: Vec<Placement<'_>> = Vec::new();
            for id in &live_ids {
                let n = r
                    .nodes
                    .iter()
                    .find(|n| n.id == *id)
                    .ok_or_else(|| format!("node {i} does not know node {id}"))?;
                if n.failed || n.joining {
                    return Err(format!("node {i} sees {n:?}"));
                }
                layout.push((*id, n.master, n.master_id.as_deref(), &n.slots));
            }
            let served: usize = r
                .nodes
                .iter()
                .filter(|n| n.master && live_ids.contains(&n.id.as_str()))
                .map(NodeLine::slot_count)
                .sum();
            if served != usize::from(SLOTS) {
                return Err(format!("node {i}: answering masters serve {served} slots"));
            }
            match &first_layout {
                None => first_layout = Some(layout),
                Some(first) if *first == layout => {}
                Some(first) => {
                    return Err(format!(
                        "nodes disagree: node {} sees {first:?}, node {i} sees {layout:?}",
                        reports[0].index
                    ))
                }
            }
            if info_field(&r.replication, "role") == Some("slave") {
                let link = info_field(&r.replication, "master_link_status");
                if link != Some("up") {
                    return Err(format!("replica {i}: master_link_status {link:?}"));
                }
            }
        }
        Ok(())
    }
}

fn check_slot(slot: u16) -> io::Result<()> {
    if slot < SLOTS {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("slot {slot} is not below {SLOTS}"),
        ))
    }
}

/// Path of `redis-cli`: next to `redis-server` first (the same version), then on `PATH`.
fn redis_cli_path() -> io::Result<PathBuf> {
    let beside = redis_server_path().and_then(|p| p.parent().map(|d| d.join("redis-cli")));
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("redis-cli"));
    beside
        .into_iter()
        .chain(on_path)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "redis-cli is not installed (needed for `redis-cli --cluster create`); \
                 install it with `apt-get install -y redis-tools`",
            )
        })
}

/// `redis-cli --cluster create <nodes> --cluster-replicas 1 --cluster-yes`, bounded by
/// [`START_TIMEOUT`]. Its output goes to `cluster-create.log` in the first node's directory.
fn create(servers: &[RedisServer]) -> io::Result<()> {
    let log_path = servers[0].dir().join("cluster-create.log");
    let log = File::create(&log_path)?;
    let mut command = Command::new(redis_cli_path()?);
    command.args(["--cluster", "create"]);
    for s in servers {
        command.arg(format!("127.0.0.1:{}", s.port()));
    }
    command
        .args(["--cluster-replicas", "1", "--cluster-yes"])
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log));
    let mut child = command.spawn()?;
    let deadline = Instant::now() + START_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if status.is_some_and(|s| s.success()) {
        return Ok(());
    }
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    let outcome = status.map_or_else(
        || format!("did not finish within {START_TIMEOUT:?}"),
        |s| format!("failed ({s})"),
    );
    Err(io::Error::other(format!(
        "deadbolt-testkit: redis-cli --cluster create {outcome}; its output:\n{output}\nlogs:\n{}",
        crate::topology::logs_of(servers)
    )))
}
