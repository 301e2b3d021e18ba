//! The topology scenario's deployments and rows: deadbolt's `Lock` on the
//! standalone server beside a Redis Cluster or a master found through
//! Sentinel (`--topology`), in one run. (Its selection, section and legend
//! are in `scenarios/topology.rs`.)
//!
//! Rows, one run each, in this order: throughput on the standalone server,
//! then on the topology (a cluster twice: every name on one master's slots,
//! then the names spread evenly over the masters); then hand-off on the
//! standalone server and on the topology. A row's commands are the
//! `INFO commandstats` deltas of every master of its deployment added up;
//! its PING floor is timed to the master of its first name (the standalone
//! rows': server 1, whose PINGs also count in the run's overall PING).
//!
//! The deployment comes from `--redis` (cluster seeds, or Sentinels and
//! `--sentinel-master`) or is started here ([`Embedded`]); either way its
//! masters are read from the servers themselves (`CLUSTER SLOTS`,
//! `SENTINEL GET-MASTER-ADDR-BY-NAME`) before any row runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context as _};
use deadbolt_testkit::{RedisCluster, RedisSentinelSet, RedisServer};
use redis::aio::MultiplexedConnection;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::args::{ContenderKind, ScenarioKind, TOPOLOGY_NAMES_PER_TASK};
use crate::contender::{connect_lock, ContenderClient, DEADBOLT_TOPOLOGY_COMMANDS};
use crate::report::{
    fmt_rate, Commands, Latency, RunResult, TopologyInfo, TopologyMeasure, TopologyRow,
    VsStandalone,
};
use crate::scenario::{self, Env, Exclusion, LockUnlock, EVENT_JITTER};
use crate::stats::{self, Pinger};
use crate::Target;
use crate::Topology;
use crate::{redact, stats_connection};

/// Hash slots of a Redis Cluster.
const SLOTS: u16 = 16384;
/// Bound on the names tried for one that falls on a given master: with 3
/// masters about 3 tries each; this only catches a master without slots.
const NAME_TRIES: u32 = 100_000;

/// The runs the topology scenario makes for `topology`, for the progress
/// plan: throughput and hand-off on the standalone server, and on the
/// topology (a cluster: throughput twice). A cluster of one master given
/// with `--redis` makes one run fewer.
pub(crate) fn planned_rows(topology: Topology) -> usize {
    match topology {
        Topology::Standalone => 2,
        Topology::Cluster => 5,
        Topology::Sentinel => 4,
    }
}

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
struct Master {
    /// How to reach it: the entry URL's scheme and credentials (a
    /// Sentinel-managed master: none, as deadbolt's client reaches it) with
    /// the master's address.
    url: String,
    /// The hash slots it serves, as inclusive ranges (Sentinel: all).
    slots: Vec<(u16, u16)>,
}

impl Master {
    fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
    }
}

/// The cluster or Sentinel-managed master of a run, as found at start.
#[derive(Debug, Clone)]
pub(crate) struct Site {
    topology: Topology,
    target: Target,
    /// Masters in the order of their first slot.
    masters: Vec<Master>,
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
    pub(crate) async fn discover(
        topology: Topology,
        urls: Vec<String>,
        master_name: Option<String>,
        embedded: bool,
    ) -> anyhow::Result<Site> {
        let (masters, target) = match topology {
            Topology::Cluster => (cluster_masters(&urls).await?, Target::Cluster(urls.clone())),
            Topology::Sentinel => {
                let name = master_name
                    .clone()
                    .context("no master name for the Sentinels")?;
                (
                    vec![sentinel_master(&urls, &name).await?],
                    Target::Sentinel {
                        sentinels: urls.clone(),
                        master: name,
                    },
                )
            }
            Topology::Standalone => bail!("the standalone topology is server 1"),
        };
        let mut conn = stats_connection(&masters[0].url)
            .await
            .context("the first master of the topology")?;
        let version = stats::redis_version(&mut conn).await?;
        let info = TopologyInfo {
            topology,
            embedded,
            version,
            urls: urls.iter().map(|u| redact(u)).collect(),
            master_name,
            masters: masters.iter().map(|m| redact(&m.url)).collect(),
        };
        Ok(Site {
            topology,
            target,
            masters,
            info,
        })
    }

    /// Best effort, for a deployment that is not ours: delete this run's
    /// keys (the locks' fencing counters) from every master.
    pub(crate) async fn cleanup(&self, namespace: &str, run_id: &str) {
        for m in &self.masters {
            if let Ok(mut conn) = stats_connection(&m.url).await {
                crate::cleanup(&mut conn, namespace, run_id).await;
            }
        }
    }
}

/// A master as `CLUSTER SLOTS` lists it.
#[derive(Debug)]
struct Node {
    host: String,
    port: u16,
    /// Inclusive slot ranges.
    slots: Vec<(u16, u16)>,
}

/// The cluster's masters, by `CLUSTER SLOTS` on the first seed that answers.
async fn cluster_masters(seeds: &[String]) -> anyhow::Result<Vec<Master>> {
    let mut last = anyhow!("no cluster seed URL given");
    for seed in seeds {
        match cluster_slots(seed).await {
            Ok(masters) => return Ok(masters),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Parse one `CLUSTER SLOTS` field.
fn field<T: redis::FromRedisValue>(v: &redis::Value) -> anyhow::Result<T> {
    redis::from_redis_value_ref(v).map_err(|e| anyhow!("CLUSTER SLOTS: {e}"))
}

async fn cluster_slots(seed: &str) -> anyhow::Result<Vec<Master>> {
    let mut conn = stats_connection(seed).await?;
    let ranges: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut conn)
        .await
        .with_context(|| format!("CLUSTER SLOTS on {}", redact(seed)))?;
    let seed_host = host_of(seed)?;
    let mut masters: Vec<Node> = Vec::new();
    for range in &ranges {
        let [start, end, node, ..] = range.as_slice() else {
            bail!("CLUSTER SLOTS: a range without its master");
        };
        let (start, end): (u16, u16) = (field(start)?, field(end)?);
        let node: Vec<redis::Value> = field(node)?;
        let [host, port, ..] = node.as_slice() else {
            bail!("CLUSTER SLOTS: a master without its address");
        };
        let host: String = field(host)?;
        let port: u16 = field(port)?;
        // An unknown address ("" or "?") is the one the seed was reached at.
        let host = if host.is_empty() || host == "?" {
            seed_host.clone()
        } else {
            host
        };
        match masters
            .iter_mut()
            .find(|m| m.host == host && m.port == port)
        {
            Some(m) => m.slots.push((start, end)),
            None => masters.push(Node {
                host,
                port,
                slots: vec![(start, end)],
            }),
        }
    }
    let served: u32 = masters
        .iter()
        .flat_map(|m| &m.slots)
        .map(|&(a, b)| u32::from(b.saturating_sub(a)) + 1)
        .sum();
    if served != u32::from(SLOTS) {
        bail!(
            "the cluster at {} serves {served} of {SLOTS} slots",
            redact(seed)
        );
    }
    for m in &mut masters {
        m.slots.sort_unstable();
    }
    masters.sort_by_key(|m| m.slots[0]);
    Ok(masters
        .into_iter()
        .map(|m| Master {
            url: with_host_port(seed, &m.host, m.port),
            slots: m.slots,
        })
        .collect())
}

/// The master the first Sentinel that answers knows as `name`.
async fn sentinel_master(sentinels: &[String], name: &str) -> anyhow::Result<Master> {
    let mut last = anyhow!("no Sentinel URL given");
    for s in sentinels {
        let asked = async {
            let mut conn = stats_connection(s).await?;
            let addr: Option<(String, String)> = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(name)
                .query_async(&mut conn)
                .await
                .with_context(|| format!("SENTINEL GET-MASTER-ADDR-BY-NAME on {}", redact(s)))?;
            anyhow::Ok(addr)
        }
        .await;
        match asked {
            Ok(Some((host, port))) => {
                let port: u16 = port
                    .parse()
                    .with_context(|| format!("the Sentinel at {} gave port {port}", redact(s)))?;
                let scheme = s.split_once("://").map_or("redis", |(scheme, _)| scheme);
                return Ok(Master {
                    url: format!("{scheme}://{}:{port}/", bracketed(&host)),
                    slots: vec![(0, SLOTS - 1)],
                });
            }
            Ok(None) => {
                last = anyhow!(
                    "the Sentinel at {} knows no master named {name:?}",
                    redact(s)
                );
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The host `url` connects to.
fn host_of(url: &str) -> anyhow::Result<String> {
    let client =
        redis::Client::open(url).with_context(|| format!("bad Redis URL {}", redact(url)))?;
    match client.get_connection_info().addr() {
        redis::ConnectionAddr::Tcp(host, _) | redis::ConnectionAddr::TcpTls { host, .. } => {
            Ok(host.clone())
        }
        _ => bail!("a cluster seed must be a TCP URL"),
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

/// `url` with its host and port replaced, keeping its scheme, credentials
/// and path.
fn with_host_port(url: &str, host: &str, port: u16) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("redis", url));
    let (authority, path) = rest.find('/').map_or((rest, "/"), |i| rest.split_at(i));
    let auth = authority.rfind('@').map_or("", |i| &authority[..=i]);
    format!("{scheme}://{auth}{}:{port}{path}", bracketed(host))
}

/// Where one row runs.
#[derive(Debug)]
struct Place {
    topology: Topology,
    /// The row's name in the table ("cluster, 3 masters").
    label: String,
    target: Target,
    /// Every master of the deployment: their commands are counted.
    masters: Vec<Master>,
    /// The masters (indices into `masters`) the row's names go on, in turn;
    /// the first also gets the PINGs.
    on: Vec<usize>,
}

impl Place {
    fn standalone(url: &str) -> Place {
        Place {
            topology: Topology::Standalone,
            label: Topology::Standalone.name().to_string(),
            target: Target::Standalone(url.to_string()),
            masters: vec![Master {
                url: url.to_string(),
                slots: vec![(0, SLOTS - 1)],
            }],
            on: vec![0],
        }
    }

    fn on_site(site: &Site, label: String, on: Vec<usize>) -> Place {
        Place {
            topology: site.topology,
            label,
            target: site.target.clone(),
            masters: site.masters.clone(),
            on,
        }
    }

    /// `base` with the first suffix `:k` that puts the `Lock` of that name on
    /// master `on`.
    fn name_on(&self, namespace: &str, base: &str, on: usize) -> anyhow::Result<String> {
        let master = &self.masters[on];
        for k in 0..NAME_TRIES {
            let name = format!("{base}:{k}");
            let keys = deadbolt_core::Keys::new(namespace, deadbolt_lock::KIND, &name)?;
            if master.serves(deadbolt_core::hash_slot(keys.main())) {
                return Ok(name);
            }
        }
        bail!(
            "no name of {NAME_TRIES} tried falls on {}",
            redact(&master.url)
        )
    }

    /// The URL the row's PINGs go to.
    fn ping_url(&self) -> &str {
        &self.masters[self.on[0]].url
    }

    async fn stats(&self) -> anyhow::Result<Vec<MultiplexedConnection>> {
        let mut conns = Vec::new();
        for m in &self.masters {
            conns.push(stats_connection(&m.url).await?);
        }
        Ok(conns)
    }

    fn row(&self, measure: TopologyMeasure, names: u32) -> TopologyRow {
        TopologyRow {
            measure,
            topology: self.topology,
            label: self.label.clone(),
            masters: u32::try_from(self.on.len()).unwrap_or(u32::MAX),
            names,
            vs_standalone: None,
        }
    }

    async fn connect(&self, env: &Env<'_>) -> anyhow::Result<Arc<dyn ContenderClient>> {
        let args = env.args;
        Ok(Arc::from(
            connect_lock(&self.target, &args.namespace, args.lease).await?,
        ))
    }

    /// Stop `pinger`: its p50 and PING count. The standalone rows' PINGs
    /// (to server 1) join the run's overall PING; the others' do not.
    async fn finish_pinger(
        &self,
        env: &mut Env<'_>,
        pinger: Pinger,
    ) -> anyhow::Result<(Option<f64>, u64)> {
        if self.topology == Topology::Standalone {
            return env.finish_pinger(pinger).await;
        }
        let (h, sent) = pinger.finish().await?;
        Ok((stats::p50_us(&h), sent))
    }
}

/// Every master's commands so far, added up.
async fn snapshot(conns: &mut [MultiplexedConnection]) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut total = BTreeMap::new();
    for conn in conns {
        for (name, calls) in stats::snapshot(conn).await?.calls {
            *total.entry(name).or_default() += calls;
        }
    }
    Ok(total)
}

fn commands(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    own_pings: u64,
) -> Commands {
    let by_command = stats::delta(before, after, own_pings);
    let counted = DEADBOLT_TOPOLOGY_COMMANDS
        .iter()
        .filter_map(|n| by_command.get(*n))
        .sum();
    Commands {
        counted,
        per_acquisition: None,
        per_waiter_per_s: None,
        counted_names: DEADBOLT_TOPOLOGY_COMMANDS
            .iter()
            .map(|n| (*n).to_string())
            .collect(),
        by_command,
        // Not measured on a deployment of several servers (the standalone
        // scenarios show the cost per call).
        redis_cpu_us: None,
        redis_cpu_source: None,
        client_cpu_us: None,
        redis_cpu_us_per_acquisition: None,
        client_cpu_us_per_acquisition: None,
    }
}

/// Run the topology scenario, pushing each row to `results` as it ends (so
/// an interrupted run keeps the rows done).
///
/// # Cancel safety
/// Dropping it drops the row's clients; their holds end with deadbolt's
/// releaser or the lease.
pub(crate) async fn run(env: &mut Env<'_>, results: &mut Vec<RunResult>) -> anyhow::Result<()> {
    let site = env.topology.clone();
    let mut places = vec![Place::standalone(env.url())];
    let mut handoff_places = vec![Place::standalone(env.url())];
    if let Some(site) = &site {
        let n = site.masters.len();
        match site.topology {
            Topology::Cluster => {
                places.push(Place::on_site(
                    site,
                    "cluster, 1 master".to_string(),
                    vec![0],
                ));
                if n > 1 {
                    places.push(Place::on_site(
                        site,
                        format!("cluster, {n} masters"),
                        (0..n).collect(),
                    ));
                }
                handoff_places.push(Place::on_site(site, "cluster".to_string(), vec![0]));
            }
            _ => {
                let label = site.topology.name().to_string();
                places.push(Place::on_site(site, label.clone(), vec![0]));
                handoff_places.push(Place::on_site(site, label, vec![0]));
            }
        }
    }
    for (i, place) in places.iter().enumerate() {
        let r = throughput(env, place, i)
            .await
            .with_context(|| format!("{} throughput", place.label))?;
        push(results, r);
    }
    for (i, place) in handoff_places.iter().enumerate() {
        let r = handoff(env, place, i)
            .await
            .with_context(|| format!("{} hand-off", place.label))?;
        push(results, r);
    }
    Ok(())
}

/// Add `r` to `results` with its ratios to the standalone row of the same
/// measure, when there is one (and `r` is not it).
fn push(results: &mut Vec<RunResult>, mut r: RunResult) {
    let Some(row) = &r.topology else {
        results.push(r);
        return;
    };
    let base = results.iter().find(|b| {
        b.scenario == ScenarioKind::Topology
            && b.topology
                .as_ref()
                .is_some_and(|t| t.topology == Topology::Standalone && t.measure == row.measure)
    });
    let vs = match (row.topology, base) {
        (Topology::Standalone, _) | (_, None) => None,
        (_, Some(base)) => {
            let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                _ => None,
            };
            let lat = |r: &RunResult| match row.measure {
                TopologyMeasure::Throughput => r.acquire_release,
                TopologyMeasure::Handoff => r.handoff,
            };
            let pick = |l: Option<Latency>, f: fn(&Latency) -> f64| l.as_ref().map(f);
            Some(VsStandalone {
                acquisitions_per_s: ratio(r.acquisitions_per_s, base.acquisitions_per_s),
                p50: ratio(pick(lat(&r), |l| l.p50_us), pick(lat(base), |l| l.p50_us)),
                p99: ratio(pick(lat(&r), |l| l.p99_us), pick(lat(base), |l| l.p99_us)),
            })
        }
    };
    if let Some(row) = &mut r.topology {
        row.vs_standalone = vs;
    }
    results.push(r);
}

/// `--tasks` tasks on one client, each taking and giving back its
/// [`TOPOLOGY_NAMES_PER_TASK`] names in turn for `--duration`; task `t`'s
/// name `j` is on master `on[(t + j) % on.len()]`.
async fn throughput(env: &mut Env<'_>, p: &Place, row: usize) -> anyhow::Result<RunResult> {
    let args = env.args;
    let mut names = Vec::new();
    for t in 0..args.tasks {
        let mut own = Vec::new();
        for j in 0..TOPOLOGY_NAMES_PER_TASK {
            let on = p.on[usize::try_from(t + j).unwrap_or(0) % p.on.len()];
            let base = format!("{}:topology:{row}:{t}:{j}", env.run_id);
            own.push(p.name_on(&args.namespace, &base, on)?);
        }
        names.push(own);
    }
    let client = p.connect(env).await?;
    let clients = [client];
    let mut stats_conns = p.stats().await?;
    let pinger = Pinger::start(p.ping_url()).await?;
    let before = snapshot(&mut stats_conns).await?;
    let bar = env
        .progress
        .start(&format!("topology · {}", p.label), args.duration);
    let start = Instant::now();
    let deadline = start + args.duration;
    let mut set = JoinSet::new();
    for own in &names {
        let handles = own.iter().map(|n| clients[0].handle(n)).collect();
        set.spawn(scenario::lock_unlock(handles, deadline));
    }
    let workers = scenario::join_all(set).await;
    let elapsed = start.elapsed();
    let after = snapshot(&mut stats_conns).await;
    let pings = p.finish_pinger(env, pinger).await;
    scenario::shutdown(&clients).await;
    let (workers, after, (ping_p50, sent)) = (workers?, after?, pings?);

    let (mut result, rate) = LockUnlock::merge(&workers)?.result(
        ScenarioKind::Topology,
        ContenderKind::Lock,
        args.tasks,
        elapsed,
        ping_p50,
        commands(&before, &after, sent),
    );
    result.topology = Some(p.row(
        TopologyMeasure::Throughput,
        args.tasks.saturating_mul(TOPOLOGY_NAMES_PER_TASK),
    ));
    bar.finish(format!(
        "{} acq/s, lock+unlock {}",
        fmt_rate(rate),
        scenario::lat_summary(result.acquire_release.as_ref())
    ));
    Ok(result)
}

/// The handoff scenario's rounds on one name of the place's first master:
/// the holder on one client, the waiter on another.
async fn handoff(env: &mut Env<'_>, p: &Place, row: usize) -> anyhow::Result<RunResult> {
    let args = env.args;
    let base = format!("{}:topology:handoff{row}", env.run_id);
    let name = p.name_on(&args.namespace, &base, p.on[0])?;
    let clients = [p.connect(env).await?, p.connect(env).await?];
    let holder = clients[0].handle(&name);
    let waiter = clients[1].handle(&name);
    let exclusion = Exclusion::default();
    let mut stats_conns = p.stats().await?;
    let pinger = Pinger::start(p.ping_url()).await?;
    let before = snapshot(&mut stats_conns).await?;
    let bar = env
        .progress
        .start(&format!("topology · {} hand-off", p.label), args.duration);
    let start = Instant::now();
    let deadline = start + args.duration;
    let outcome = scenario::handoff_rounds(
        &holder,
        &waiter,
        EVENT_JITTER,
        args.rounds,
        deadline,
        &exclusion,
    )
    .await;
    let elapsed = start.elapsed();
    let after = snapshot(&mut stats_conns).await;
    let pings = p.finish_pinger(env, pinger).await;
    scenario::shutdown(&clients).await;
    let (after, (ping_p50, sent)) = (after?, pings?);
    let (mut result, line) = outcome?.result(
        ScenarioKind::Topology,
        ContenderKind::Lock,
        elapsed,
        ping_p50,
        exclusion.violations(),
        commands(&before, &after, sent),
    );
    result.topology = Some(p.row(TopologyMeasure::Handoff, 1));
    bar.finish(line);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_keep_scheme_credentials_and_path() {
        assert_eq!(
            with_host_port("redis://u:p@seed:7000/", "10.0.0.2", 7001),
            "redis://u:p@10.0.0.2:7001/"
        );
        assert_eq!(
            with_host_port("rediss://seed:7000", "::1", 7002),
            "rediss://[::1]:7002/"
        );
        assert_eq!(
            with_host_port("redis://127.0.0.1:7000/0", "127.0.0.1", 7003),
            "redis://127.0.0.1:7003/0"
        );
    }

    #[test]
    fn names_fall_on_the_master_asked_for() {
        let master = |url: &str, slots| Master {
            url: url.to_string(),
            slots,
        };
        let place = Place {
            topology: Topology::Cluster,
            label: "cluster".into(),
            target: Target::Cluster(vec!["redis://a/".into()]),
            masters: vec![
                master("redis://a/", vec![(0, 5460)]),
                master("redis://b/", vec![(5461, 10922)]),
                master("redis://c/", vec![(10923, 16383)]),
            ],
            on: vec![0, 1, 2],
        };
        for on in 0..3 {
            let name = place.name_on("ns", "run1:topology:0:0:0", on).unwrap();
            let keys = deadbolt_core::Keys::new("ns", deadbolt_lock::KIND, &name).unwrap();
            let slot = deadbolt_core::hash_slot(keys.main());
            assert!(place.masters[on].serves(slot), "{name} in slot {slot}");
            // The testkit's slot of the bare name (its hash tag) agrees.
            assert_eq!(RedisCluster::keyslot(&name), slot);
        }
    }
}
