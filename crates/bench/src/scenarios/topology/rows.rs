//! The topology scenario's rows: deadbolt's `Lock` on the standalone
//! server beside a Redis Cluster or a master found through Sentinel
//! (`--topology`, found or started by `crate::site`), in one run.
//!
//! Rows, one run each, in this order: throughput on the standalone server,
//! then on the topology (a cluster twice: every name on one master's slots,
//! then the names spread evenly over the masters); then hand-off on the
//! standalone server and on the topology. A row's commands are the
//! `INFO commandstats` deltas of every master of its deployment added up;
//! its PING floor is timed to the master of its first name (the standalone
//! rows': server 1, whose PINGs also count in the run's overall PING).

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{bail, Context as _};
use deadbolt_core::deployment::Topology;
use redis::aio::MultiplexedConnection;
use redis::ConnectionInfo;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::contender::{connect_lock, ContenderClient, DEADBOLT_TOPOLOGY_COMMANDS};
use crate::model::{
    Commands, ContenderKind, Latency, RunResult, ScenarioKind, TopologyMeasure, TopologyRow,
    VsStandalone, TOPOLOGY_NAMES_PER_TASK,
};
use crate::progress::Bar;
use crate::scenarios::distinct::{lock_unlock, LockUnlock};
use crate::scenarios::handoff::handoff_rounds;
use crate::scenarios::{join_all, lat_summary, shutdown, Env, Exclusion, EVENT_JITTER};
use crate::site::{Master, Site};
use crate::stats::{self, Pinger};
use crate::table::fmt_rate;

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

/// Where a row's deadbolt clients enter.
#[derive(Debug)]
enum Entry {
    /// Server 1, at this URL.
    Standalone(String),
    /// The `--topology` deployment.
    Site(Site),
}

/// Where one row runs.
#[derive(Debug)]
struct Place {
    topology: Topology,
    /// The row's name in the table ("cluster, 3 masters").
    label: String,
    /// Where its clients enter: server 1, or the deployment.
    entry: Entry,
    /// Every master of the deployment: their commands are counted.
    masters: Vec<Master>,
    /// The masters (indices into `masters`) the row's names go on, in turn;
    /// the first also gets the PINGs.
    on: Vec<usize>,
}

impl Place {
    fn standalone(url: &str) -> anyhow::Result<Place> {
        Ok(Place {
            topology: Topology::Standalone,
            label: Topology::Standalone.name().to_string(),
            entry: Entry::Standalone(url.to_string()),
            masters: vec![Master::whole(url)?],
            on: vec![0],
        })
    }

    fn on_site(site: &Site, label: String, on: Vec<usize>) -> Place {
        Place {
            topology: site.topology,
            label,
            entry: Entry::Site(site.clone()),
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
        bail!("no name of {NAME_TRIES} tried falls on {}", master.shown())
    }

    /// The server the row's PINGs go to.
    fn ping_to(&self) -> ConnectionInfo {
        self.masters[self.on[0]].conn.clone()
    }

    async fn stats(&self) -> anyhow::Result<Vec<MultiplexedConnection>> {
        let mut conns = Vec::new();
        for m in &self.masters {
            conns.push(m.stats().await?);
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
        let builder = match &self.entry {
            Entry::Standalone(url) => deadbolt_core::Client::builder(url),
            Entry::Site(site) => site.builder(),
        };
        Ok(Arc::from(
            connect_lock(builder, &args.namespace, args.lease).await?,
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

/// A row under way, from [`Place::start_row`].
struct Timing {
    /// The bench's own connections to every master, for INFO.
    stats: Vec<MultiplexedConnection>,
    /// Times PING to the master of the row's first name.
    pinger: Pinger,
    /// When the row started; its workers stop `--duration` later.
    start: Instant,
}

impl Place {
    /// Start a row here under a progress bar named `label`: the pinger, every
    /// master's commands before (added up), the bar (planned for
    /// `--duration`).
    async fn start_row(
        &self,
        env: &Env<'_>,
        label: &str,
    ) -> anyhow::Result<(Timing, BTreeMap<String, u64>, Bar)> {
        let mut stats = self.stats().await?;
        let pinger = Pinger::start(self.ping_to()).await?;
        let before = snapshot(&mut stats).await?;
        let bar = env.progress.start(label, env.args.duration);
        let timing = Timing {
            stats,
            pinger,
            start: Instant::now(),
        };
        Ok((timing, before, bar))
    }

    /// End a row whose work is done: the time since its start, every
    /// master's commands after, the stopped pinger's p50 and count; the
    /// row's clients shut down. The failures are left to the caller.
    async fn end_row(
        &self,
        env: &mut Env<'_>,
        mut timing: Timing,
        clients: &[Arc<dyn ContenderClient>],
    ) -> (
        std::time::Duration,
        anyhow::Result<BTreeMap<String, u64>>,
        anyhow::Result<(Option<f64>, u64)>,
    ) {
        let elapsed = timing.start.elapsed();
        let after = snapshot(&mut timing.stats).await;
        let pings = self.finish_pinger(env, timing.pinger).await;
        shutdown(clients).await;
        (elapsed, after, pings)
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
    let mut places = vec![Place::standalone(env.url())?];
    let mut handoff_places = vec![Place::standalone(env.url())?];
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
    let label = format!("topology · {}", p.label);
    let (timing, before, bar) = p.start_row(env, &label).await?;
    let deadline = timing.start + args.duration;
    let mut set = JoinSet::new();
    for own in &names {
        let handles = own.iter().map(|n| clients[0].handle(n)).collect();
        set.spawn(lock_unlock(handles, deadline));
    }
    let workers = join_all(set).await;
    let (elapsed, after, pings) = p.end_row(env, timing, &clients).await;
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
        lat_summary(result.acquire_release.as_ref())
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
    let label = format!("topology · {} hand-off", p.label);
    let (timing, before, bar) = p.start_row(env, &label).await?;
    let deadline = timing.start + args.duration;
    let outcome = handoff_rounds(
        &holder,
        &waiter,
        EVENT_JITTER,
        args.rounds,
        deadline,
        &exclusion,
    )
    .await;
    let (elapsed, after, pings) = p.end_row(env, timing, &clients).await;
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
    use deadbolt_testkit::RedisCluster;

    use super::*;

    #[test]
    fn names_fall_on_the_master_asked_for() {
        let master = |url: &str, slots| Master {
            slots,
            ..Master::whole(url).unwrap()
        };
        let place = Place {
            topology: Topology::Cluster,
            label: "cluster".into(),
            entry: Entry::Standalone("redis://a/".into()),
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
