//! The held-names scenario: deadbolt's `Lock` and `FairLock` at scale on
//! one server, or (with `--topology`) on a Redis Cluster or a
//! Sentinel-managed master instead.
//!
//! Client A holds `--names` names; client B parks one waiter on each. With
//! everything held and waited for, the bench reads the server's memory and
//! Pub/Sub figures; then A releases the names one after the other, each
//! release waited out until B's waiter holds that name, and every hand-off is
//! timed with the Redis CPU of the whole release phase. The same steps with
//! one name, `--rounds` times on two fresh clients, are the baseline. Off by
//! default: it runs only with `--scenario held-names` (with `--topology`
//! too: the default selection leaves it out whatever the topology).
//!
//! With `--topology cluster` (or `sentinel`) every step goes to that
//! deployment, the baseline's too, and server 1 is left alone; the memory,
//! the Redis CPU and the commands are every master's added up, the channels
//! and each client's subscriptions those of every node (a cluster's replicas
//! too) added up, shard channels (`SSUBSCRIBE`, deadbolt's on a cluster)
//! with the others: see `nodes`.
//!
//! A pass counts as parked once every waiter is registered on the server
//! (its key exists: the `Lock`'s waiting clients, the `FairLock`'s queue)
//! and subscribed (a channel with its name's hash tag has a subscriber, a
//! shard channel on a cluster), both polled.
//!
//! It drives deadbolt's locks directly (`Exclusive<K>` for the `Lock` and
//! the `FairLock` alike) rather than through the contender's clients, so
//! that its two clients carry names of their own (`CLIENT SETNAME`) by which
//! `CLIENT LIST` tells their connections apart on one server; a cluster's
//! connections carry no name, so there they are told apart by when they
//! appeared (`Pair::owner`).

mod nodes;

use std::collections::HashSet;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use deadbolt_core::deployment::Topology;
use deadbolt_core::scripts::LuaScript;
use deadbolt_core::{
    encode_tag, Acquire as _, Client, Exclusive, ExclusiveGuard, ExclusiveKind, Keys,
};
use futures::{stream, StreamExt as _};
use hdrhistogram::Histogram;
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio::time::{sleep, timeout, Instant};

use super::cells::{client_cpu, cmds, lat, p50, p99, table};
use super::legend::{entries, Legend, HAND_OFF};
use crate::contender::Contender;
use crate::model::{
    float, BenchArgs, ContenderKind, HeldNamesStats, Report, RunResult, ScenarioKind, Tally,
};
use crate::scenarios::{commands, commands_named, kind_and_run, Env, Exclusion, Scenario, HANG};
use crate::stats::{histogram, record, summarize, Snapshot};
use crate::table::fmt_rate;
use nodes::{field, ConnId, Nodes};

/// Client A's acquires, and client B's releases at the end, in flight at
/// once.
const IN_FLIGHT: usize = 64;
/// Gap between two counts of the waiters registered on the server.
const POLL_GAP: Duration = Duration::from_millis(2);
/// Time allowed per waiter, beyond [`HANG`], for all of them to park.
const PER_WAITER: Duration = Duration::from_millis(1);

/// `--names` names each held by one client with one waiter of another,
/// released in turn; one name `--rounds` times beside it.
#[derive(Debug)]
pub(crate) struct HeldNames;

entries! {
    /// Memory per name held with its waiter.
    PER_HELD = 171, "memory/held name", "Redis used_memory more than before the first acquire, \
        with every name held by A and waited for by B, over the names: the hold, the waiter's \
        registration and its Pub/Sub subscription together (on a server the bench started it is \
        emptied first; on a cluster every master's added up); lower is better";
    /// Pub/Sub channels while everything is held.
    CHANNELS = 172, "channels", "Pub/Sub channels with a subscriber on the server (PUBSUB \
        CHANNELS, counted; on a cluster PUBSUB SHARDCHANNELS too, on every node added up) while \
        every name was held and waited for; lower is better";
    /// Subscriptions per client.
    SUBS = 173, "subs A / B", "subscriptions (sub + psub + ssub of CLIENT LIST) of the holder's \
        (A's) connections and of the waiters' (B's) at the same moment (on a cluster, of their \
        connections to every node)";
    /// The one-name baseline.
    ONE_NAME = 91, "1 name p50", "hand-off p50 of one name held by A with one waiter of B, the \
        same steps --rounds times in the same run, on two fresh clients: the baseline";
    /// Hand-off at scale over the baseline.
    VS_ONE = 92, "p50 / 1 name", "hand-off p50 with every name held over that of one name: what \
        the scale costs each hand-off (1.00× = nothing); lower is better";
    /// Redis CPU per hand-off.
    CPU_HANDOFF = 53, "Redis µs/hand-off", "Redis CPU over the release phase per hand-off: the \
        server's own CPU time when the bench started it (the watchdog renewals of the names \
        still held included; on a cluster every master's added up), else (--redis) the \
        commandstats µs; lower is better";
    /// Client CPU per hand-off.
    CLIENT_HANDOFF = 55, "client µs/hand-off", "the bench process's CPU time (rusage) over the \
        release phase per hand-off: both clients, the holder's unlocks and the waiters' wake-ups \
        (and the watchdog of every name still held); lower is better";
    /// Commands per hand-off.
    CMDS_HANDOFF = 51, "cmds/hand-off", "commands the two clients sent over the release phase \
        per hand-off (not those inside scripts); lower is better";
}

impl Scenario for HeldNames {
    kind_and_run!(HeldNames => held_names);

    fn measures(&self, contender: ContenderKind) -> bool {
        matches!(contender, ContenderKind::Lock | ContenderKind::Fair)
    }

    fn in_default_selection(&self, _topology: Topology) -> bool {
        false
    }

    /// With `--topology` it runs on that deployment instead of server 1.
    fn uses_topology(&self) -> bool {
        true
    }

    fn planned(&self, args: &BenchArgs) -> Duration {
        // About 2 ms a name at 10,000 names (hold, park, hand-off, release;
        // less with fewer) and 2 ms a one-name round, guessed for the ETA.
        Duration::from_micros(u64::from(args.names) * 2_000 + u64::from(args.rounds) * 2_000)
    }

    fn section(&self, report: &Report, rows: &[&RunResult]) -> String {
        let header = [
            "names",
            "memory/held name",
            "channels",
            "subs A / B",
            "hand-off p50",
            "p99",
            "1 name p50",
            "p50 / 1 name",
            "Redis µs/hand-off",
            "client µs/hand-off",
            "cmds/hand-off",
            "errors",
        ];
        let table = table(&header, rows, |r| {
            let held = r.held_names.as_ref();
            let cell = |f: fn(&HeldNamesStats) -> String| held.map_or_else(|| "-".into(), f);
            let opt = |v: Option<f64>, f: fn(f64) -> String| v.map_or_else(|| "-".into(), f);
            vec![
                cell(|h| fmt_count(h.names)),
                cell(|h| format!("{:.0} B", h.bytes_per_name)),
                cell(|h| fmt_count(h.channels)),
                cell(|h| {
                    let (a, b) = (h.holder_subscriptions, h.waiter_subscriptions);
                    format!("{} / {}", fmt_count(a), fmt_count(b))
                }),
                lat(r.handoff, p50),
                lat(r.handoff, p99),
                cell(|h| lat(h.one_name, p50)),
                opt(held.and_then(|h| h.p50_vs_one_name), |x| format!("{x:.2}×")),
                opt(held.and_then(|h| h.redis_cpu_us_per_handoff), |v| {
                    format!("{v:.1}")
                }),
                client_cpu(r),
                cmds(r),
                r.errors.to_string(),
            ]
        });
        format!(
            "held-names: {} names each held by client A with one waiter of client B, released \
             in turn; 1 name: the same, {} rounds{}\n{}",
            fmt_count(u64::from(report.settings.names)),
            report.settings.rounds,
            rows.iter()
                .find_map(|r| r.held_names.as_ref())
                .map_or_else(String::new, ran_on),
            table
        )
    }

    fn legend(&self) -> Legend {
        &[&[
            &CMDS_HANDOFF,
            &CPU_HANDOFF,
            &CLIENT_HANDOFF,
            &HAND_OFF,
            &ONE_NAME,
            &VS_ONE,
            &PER_HELD,
            &CHANNELS,
            &SUBS,
        ]]
    }
}

/// The run of contender `c`: deadbolt's `Lock` or its `FairLock`.
async fn held_names(env: &mut Env<'_>, c: &dyn Contender) -> anyhow::Result<RunResult> {
    match c.kind() {
        ContenderKind::Fair => run::<deadbolt_fair::Fifo>(env, c, deadbolt_fair::SCRIPTS).await,
        _ => run::<deadbolt_lock::Reentrant>(env, c, deadbolt_lock::SCRIPTS).await,
    }
}

/// The two deadbolt clients of a run, each with a name of its own, and
/// what tells their connections apart where they carry no name.
struct Pair {
    /// Holds every name.
    a: Client,
    /// Waits on every name.
    b: Client,
    /// The connections on every node just before A connected: neither's.
    before: HashSet<ConnId>,
    /// A's connections: there just before B connected, not just before A
    /// did. Every later one is taken for B's: B's connections, and those
    /// either client opens again (a cluster connection rebuilt under load;
    /// A's carry no subscriptions, it waits for nothing).
    a_conns: HashSet<ConnId>,
}

impl Pair {
    /// Clients A and B on `nodes`, with `scripts` loaded at connect, one
    /// after the other, the connections on every node noted before each.
    async fn connect(
        env: &Env<'_>,
        nodes: &mut Nodes,
        scripts: &'static [&'static LuaScript],
    ) -> anyhow::Result<Pair> {
        let before = nodes.connections().await?;
        let a = connect_one(env, nodes, scripts, "a").await?;
        let with_a = match nodes.connections().await {
            Ok(c) => c,
            Err(e) => {
                a.shutdown().await;
                return Err(e);
            }
        };
        match connect_one(env, nodes, scripts, "b").await {
            Ok(b) => Ok(Pair {
                a,
                b,
                a_conns: with_a.difference(&before).copied().collect(),
                before,
            }),
            Err(e) => {
                a.shutdown().await;
                Err(e)
            }
        }
    }

    /// Whose connection (`Some(true)`: A's, `Some(false)`: B's) the one of
    /// `CLIENT LIST` line `line` on node `node` is, if either's: by its name
    /// where it has one, else by when it appeared. A replication link is
    /// neither's.
    fn owner(&self, node: usize, line: &str, name: &str) -> Option<bool> {
        let a = deadbolt_core::encode_client_name(self.a.name());
        let b = deadbolt_core::encode_client_name(self.b.name());
        if name == a {
            return Some(true);
        }
        if name == b {
            return Some(false);
        }
        if !name.is_empty() || field(line, "flags").is_some_and(|f| f.contains(['M', 'S'])) {
            return None;
        }
        let id: u64 = field(line, "id")?.parse().ok()?;
        if self.a_conns.contains(&(node, id)) {
            Some(true)
        } else if self.before.contains(&(node, id)) {
            None
        } else {
            Some(false)
        }
    }

    /// Close both clients, and wait (10 s at most) until no node keeps a
    /// connection that was not there before A connected. A server frees a
    /// closed connection's buffers only once it reads the close: a pass
    /// that read `used_memory` before then counted that freeing as its own
    /// (a negative figure, on a loaded host). There is no event for it: the
    /// nodes' connections are looked at every 20 ms.
    async fn shutdown(&self, nodes: &mut Nodes) {
        self.a.shutdown().await;
        self.b.shutdown().await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            match nodes.connections().await {
                Ok(now) if !now.is_subset(&self.before) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                _ => return,
            }
        }
    }
}

/// Client `side` of a run on `nodes`, named after it and the bench's run.
async fn connect_one(
    env: &Env<'_>,
    nodes: &Nodes,
    scripts: &'static [&'static LuaScript],
    side: &str,
) -> anyhow::Result<Client> {
    nodes
        .builder()
        .preload(scripts)
        .namespace(env.args.namespace.clone())
        .watchdog_timeout(env.args.lease)
        .client_name(format!("{}-held-{side}", env.run_id))
        .build()
        .await
        .with_context(|| format!("connecting client {side}"))
}

/// The run of the lock kind `K` (its scripts `scripts`) for contender `c`:
/// the pass over `--names` names, then the `--rounds` passes over one name
/// each, on clients of their own (a waiter's subscriptions outlast its
/// wait, so those of the first pass would be the rounds' too); all on the
/// `--topology` deployment when there is one, else on server 1.
async fn run<K: ExclusiveKind>(
    env: &mut Env<'_>,
    c: &dyn Contender,
    scripts: &'static [&'static LuaScript],
) -> anyhow::Result<RunResult> {
    let label = format!("held-names · {}", c.kind().name());
    let bar = env.progress.start(&label, HeldNames.planned(env.args));
    let mut nodes = Nodes::of(env).await?;
    if nodes.embedded() {
        // The bench's own servers: what the memory grows by is this run's.
        nodes.flush().await?;
    }
    let start = Instant::now();
    // Each pass's names share a prefix no other pass's names start with,
    // by which its waiters' channels are found.
    let prefix = env.name(ScenarioKind::HeldNames, c, "all:");
    let pair = Pair::connect(env, &mut nodes, scripts).await?;
    let scale = pass::<K>(&mut nodes, &pair, &prefix, env.args.names, true).await;
    pair.shutdown(&mut nodes).await;
    let scale = scale?;
    let pair = Pair::connect(env, &mut nodes, scripts).await?;
    let one = one_name_rounds::<K>(env, &mut nodes, c, &pair).await;
    pair.shutdown(&mut nodes).await;
    let (result, line) = scale.result(&nodes, c, one?, start.elapsed())?;
    bar.finish(line);
    Ok(result)
}

/// The `--rounds` passes over one name each, their figures added up.
async fn one_name_rounds<K: ExclusiveKind>(
    env: &Env<'_>,
    nodes: &mut Nodes,
    c: &dyn Contender,
    pair: &Pair,
) -> anyhow::Result<Pass> {
    let mut one = Pass::default();
    for round in 0..env.args.rounds {
        let prefix = env.name(ScenarioKind::HeldNames, c, format!("one:{round}:"));
        one.add(pass::<K>(nodes, pair, &prefix, 1, false).await?)?;
    }
    Ok(one)
}

/// A waiter's answer: when its `lock()` returned, and what it returned.
type Reply = (Instant, deadbolt_core::Result<ExclusiveGuard>);

/// What one pass over a set of names measured.
#[derive(Default)]
struct Pass {
    /// The hand-offs (acquisitions) and every failed acquire and release.
    tally: Tally,
    /// From just before A's unlock to B's waiter holding the name.
    handoffs: Option<Histogram<u64>>,
    /// Times a name was seen with two holders at once.
    violations: u64,
    /// The figures read with everything held (a pass that reads them).
    held: Option<Held>,
    /// The counters before and after the release phase (likewise).
    window: Option<(Snapshot, Snapshot)>,
}

/// What the server showed with every name held and waited for.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// Names held, each with its waiter.
    names: u64,
    /// `used_memory` more than before the pass.
    memory_bytes: i64,
    /// `PUBSUB CHANNELS` (and on a cluster `PUBSUB SHARDCHANNELS`) of
    /// every node, counted.
    channels: u64,
    /// The shard channels of `channels`.
    shard_channels: u64,
    /// Subscriptions of A's connections.
    holder_subscriptions: u64,
    /// Subscriptions of B's connections.
    waiter_subscriptions: u64,
    /// The most of any one connection of the two.
    max_connection_subscriptions: u64,
}

impl Pass {
    /// Add the samples and counts of `other` (the one-name rounds).
    fn add(&mut self, other: Pass) -> anyhow::Result<()> {
        self.tally.merge(&other.tally);
        self.violations += other.violations;
        if let Some(h) = other.handoffs {
            self.handoffs
                .get_or_insert_with(histogram)
                .add(&h)
                .map_err(|e| anyhow!("merging hand-off samples: {e}"))?;
        }
        Ok(())
    }

    /// The row of this pass (with everything held), beside the one-name
    /// passes `one`; and the line that closes the progress bar.
    fn result(
        self,
        nodes: &Nodes,
        c: &dyn Contender,
        one: Pass,
        elapsed: Duration,
    ) -> anyhow::Result<(RunResult, String)> {
        let held = self.held.context("the pass read nothing while held")?;
        let (before, after) = self.window.context("the pass counted nothing")?;
        let embedded = nodes.embedded();
        let mut cmds = match nodes.client_commands() {
            Some(names) => commands_named(names, &before, &after, 0, embedded),
            None => commands(c, &before, &after, 0, embedded),
        };
        cmds.per_acquisitions(self.tally.acquisitions);
        let handoff = self.handoffs.as_ref().and_then(|h| summarize(h, None));
        let one_name = one.handoffs.as_ref().and_then(|h| summarize(h, None));
        let p50_vs_one_name = match (handoff, one_name) {
            (Some(n), Some(one)) if one.p50_us > 0.0 => Some(n.p50_us / one.p50_us),
            _ => None,
        };
        let stats = HeldNamesStats {
            names: held.names,
            topology: nodes.topology(),
            masters: nodes.masters(),
            nodes: nodes.nodes(),
            memory_bytes: held.memory_bytes,
            bytes_per_name: f64_of(held.memory_bytes) / float(held.names.max(1)),
            channels: held.channels,
            shard_channels: held.shard_channels,
            holder_subscriptions: held.holder_subscriptions,
            waiter_subscriptions: held.waiter_subscriptions,
            max_connection_subscriptions: held.max_connection_subscriptions,
            redis_cpu_us_per_handoff: cmds.redis_cpu_us_per_acquisition,
            one_name,
            p50_vs_one_name,
        };
        let mut tally = self.tally;
        tally.errors += one.tally.errors;
        if tally.first_error.is_none() {
            tally.first_error = one.tally.first_error;
        }
        let workers = u32::try_from(held.names).unwrap_or(u32::MAX);
        let line = format!(
            "{:.0} B a held name, {} channels, hand-off p50 {} ({} at one name)",
            stats.bytes_per_name,
            stats.channels,
            lat(handoff, p50),
            lat(one_name, p50)
        );
        let result = RunResult {
            exclusion_violations: self.violations + one.violations,
            handoff,
            held_names: Some(stats),
            ..RunResult::of(
                ScenarioKind::HeldNames,
                c.kind(),
                (workers, 2),
                elapsed,
                tally,
                cmds,
            )
        };
        Ok((result, line))
    }
}

/// Where the rows of `h` ran, for the section's title: nothing on server 1,
/// else the deployment and what is added up over which of its nodes.
fn ran_on(h: &HeldNamesStats) -> String {
    let plural = |n: u32| if n == 1 { "" } else { "s" };
    match h.topology {
        Topology::Standalone => String::new(),
        Topology::Cluster => format!(
            "; on a Redis Cluster of {} master{} ({} nodes): memory, Redis CPU and commands over \
             the masters, channels (shard channels too) and subscriptions over every node",
            h.masters,
            plural(h.masters),
            h.nodes
        ),
        Topology::Sentinel => "; on the master named by the Sentinels".to_string(),
    }
}

/// A count with thousands separators, whole at any size (`64`, `10,000`).
fn fmt_count(n: u64) -> String {
    if n < 100 {
        n.to_string()
    } else {
        fmt_rate(float(n))
    }
}

/// A byte count as a float (far below 2^53).
fn f64_of(v: i64) -> f64 {
    #[allow(
        clippy::cast_precision_loss,
        reason = "byte counts of a test server stay far below 2^53"
    )]
    let f = v as f64;
    f
}

/// One pass of the steps over `n` names, `prefix` and a number each
/// (`prefix` the start of no other pass's names): A holds them all, B parks a waiter
/// on each, and once every waiter is registered on the server (and, when
/// `read`, the server's figures are read and the counters taken) A releases
/// them in turn, each hand-off timed; then B releases its holds.
async fn pass<K: ExclusiveKind>(
    nodes: &mut Nodes,
    pair: &Pair,
    prefix: &str,
    n: u32,
    read: bool,
) -> anyhow::Result<Pass> {
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
    let names = &names[..];
    let mut out = Pass::default();
    let exclusions: Vec<Exclusion> = names.iter().map(|_| Exclusion::default()).collect();
    let memory_before = if read { nodes.used_memory().await? } else { 0 };
    let guards = hold_all::<K>(&pair.a, names, &exclusions, &mut out.tally).await?;
    // Dropping the set (on an error) stops every waiter still waiting.
    let mut waiters = JoinSet::new();
    let replies = park::<K>(&pair.b, names, &guards, &exclusions, &mut waiters);
    let parked: Vec<&String> = names
        .iter()
        .zip(&guards)
        .filter_map(|(n, g)| g.as_ref().map(|_| n))
        .collect();
    wait_parked::<K>(nodes, &pair.a.config().namespace, prefix, &parked).await?;
    let before = if read {
        let mut held = read_held(nodes, pair).await?;
        held.names = u64::try_from(parked.len()).unwrap_or(u64::MAX);
        held.memory_bytes -= memory_before;
        out.held = Some(held);
        Some(nodes.snapshot().await?)
    } else {
        None
    };
    let taken = release_in_turn(guards, replies, &exclusions, &mut out).await?;
    if let Some(before) = before {
        out.window = Some((before, nodes.snapshot().await?));
    }
    release_all(taken, &mut out.tally).await?;
    waiters.shutdown().await;
    out.violations = exclusions.iter().map(Exclusion::violations).sum();
    Ok(out)
}

/// A takes every name of `names` (a watchdog lease each, [`IN_FLIGHT`] at
/// once), entering each one's exclusion check: the guards in the names'
/// order, `None` where the acquire failed (counted in `tally`).
async fn hold_all<K: ExclusiveKind>(
    a: &Client,
    names: &[String],
    exclusions: &[Exclusion],
    tally: &mut Tally,
) -> anyhow::Result<Vec<Option<ExclusiveGuard>>> {
    let locks: Vec<Exclusive<K>> = names.iter().map(|n| Exclusive::new(a, n)).collect();
    let taken: Vec<_> = stream::iter(locks)
        .map(|lock| async move { timeout(HANG, lock.lock()).await })
        .buffered(IN_FLIGHT)
        .collect()
        .await;
    let mut guards = Vec::with_capacity(taken.len());
    for (r, exclusion) in taken.into_iter().zip(exclusions) {
        match r {
            Err(_) => bail!("client A did not get a free lock within {HANG:?}"),
            Ok(Err(e)) => {
                tally.error(e.into())?;
                guards.push(None);
            }
            Ok(Ok(guard)) => {
                exclusion.enter();
                guards.push(Some(guard));
            }
        }
    }
    Ok(guards)
}

/// B starts one waiter (`lock()`) on each name A holds (`guards`), each in
/// a task of `waiters`: the channels their answers come on, in the names'
/// order (`None` where A holds nothing).
fn park<K: ExclusiveKind>(
    b: &Client,
    names: &[String],
    guards: &[Option<ExclusiveGuard>],
    exclusions: &[Exclusion],
    waiters: &mut JoinSet<()>,
) -> Vec<Option<oneshot::Receiver<Reply>>> {
    names
        .iter()
        .zip(guards)
        .zip(exclusions)
        .map(|((name, guard), exclusion)| {
            guard.as_ref()?;
            let (tx, rx) = oneshot::channel();
            let lock = Exclusive::<K>::new(b, name);
            let exclusion = exclusion.clone();
            waiters.spawn(async move {
                let r = lock.lock().await;
                let at = Instant::now();
                if r.is_ok() {
                    exclusion.enter();
                }
                // A closed channel: the pass failed and stops.
                let _ = tx.send((at, r));
            });
            Some(rx)
        })
        .collect()
}

/// The key a waiter of `K` on `name` is recorded in with its failed try,
/// as the kind says ([`ExclusiveKind::waiters_key`]).
fn waiter_key<K: ExclusiveKind>(namespace: &str, name: &str) -> anyhow::Result<String> {
    let keys = Keys::new(namespace, K::KIND, name)?;
    K::waiters_key(&keys)
        .ok_or_else(|| anyhow::anyhow!("a {} records no waiters on the server", K::KIND))
}

/// Wait until the waiter of every name of `names` (all starting with
/// `prefix`) is parked: registered on the server (its key exists) and
/// subscribed (a channel of its name, one with the name's hash tag, has a
/// subscriber on some node). Polls every [`POLL_GAP`], counting again only
/// the keys not all found before; an error after [`HANG`] and
/// [`PER_WAITER`] a waiter.
async fn wait_parked<K: ExclusiveKind>(
    nodes: &mut Nodes,
    namespace: &str,
    prefix: &str,
    names: &[&String],
) -> anyhow::Result<()> {
    let keys = names
        .iter()
        .map(|n| waiter_key::<K>(namespace, n))
        .collect::<anyhow::Result<Vec<String>>>()?;
    // Every channel of a name is `<ns>:{<tag>}:...`, its keys' hash tag.
    let pattern = format!(
        "{}*",
        glob_escape(&format!("{namespace}:{{{}", encode_tag(prefix)))
    );
    let want = keys.len();
    let mut pending = nodes.exists_groups(keys);
    let mut found = 0usize;
    let bound = HANG + PER_WAITER * u32::try_from(want).unwrap_or(u32::MAX);
    let deadline = Instant::now() + bound;
    loop {
        // A group whose keys all exist is not counted again: a waiter's
        // registration lasts as long as its wait, which lasts until the
        // release phase.
        let counts = nodes.count_existing(&pending).await?;
        let mut registered = found;
        let mut left = Vec::with_capacity(pending.len());
        for (group, n) in pending.into_iter().zip(counts) {
            registered += n;
            if n >= group.1.len() {
                found += group.1.len();
            } else {
                left.push(group);
            }
        }
        pending = left;
        let channels = nodes.channels(Some(&pattern)).await?;
        let subscribed = channels
            .all()
            .filter_map(|ch| ch.split_once('{')?.1.split_once('}').map(|(tag, _)| tag))
            .collect::<HashSet<&str>>()
            .len();
        if registered >= want && subscribed >= want {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{registered} of {want} waiters registered and {subscribed} subscribed within \
                 {bound:?}"
            );
        }
        sleep(POLL_GAP).await;
    }
}

/// `s` with the characters special to Redis's glob patterns escaped.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if matches!(ch, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// A releases every name it holds (`guards`), one after the other: each
/// release waited out until B's waiter (`replies`) holds the name, the time
/// from just before the unlock to the waiter's grant one sample of `out`.
/// Returns B's holds with their exclusion checks.
async fn release_in_turn(
    guards: Vec<Option<ExclusiveGuard>>,
    replies: Vec<Option<oneshot::Receiver<Reply>>>,
    exclusions: &[Exclusion],
    out: &mut Pass,
) -> anyhow::Result<Vec<(ExclusiveGuard, Exclusion)>> {
    let handoffs = out.handoffs.get_or_insert_with(histogram);
    let mut taken = Vec::with_capacity(guards.len());
    let n = guards.len();
    let phase = Instant::now();
    let turns = guards.into_iter().zip(replies).zip(exclusions);
    for (i, ((guard, reply), exclusion)) in turns.enumerate() {
        let (Some(guard), Some(reply)) = (guard, reply) else {
            continue;
        };
        let released_at = Instant::now();
        exclusion.leave();
        if let Err(e) = guard.unlock().await {
            // Its waiter gets the name once the lease runs out, after the
            // pass: not waited for.
            out.tally.error(e.into())?;
            continue;
        }
        let (acquired_at, r) = timeout(HANG, reply)
            .await
            .map_err(|_| {
                anyhow!(
                    "the waiter on name {i} of {n} did not get the lock within {HANG:?} of its \
                     release, {:.1} s into the release phase",
                    phase.elapsed().saturating_sub(HANG).as_secs_f64()
                )
            })?
            .context("a waiter ended without an answer")?;
        match r {
            Err(e) => out.tally.error(e.into())?,
            Ok(held) => {
                record(handoffs, acquired_at.saturating_duration_since(released_at));
                out.tally.ok();
                taken.push((held, exclusion.clone()));
            }
        }
    }
    Ok(taken)
}

/// B releases its holds, [`IN_FLIGHT`] at once, leaving each exclusion check
/// first.
async fn release_all(
    taken: Vec<(ExclusiveGuard, Exclusion)>,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let released: Vec<deadbolt_core::Result<()>> = stream::iter(taken)
        .map(|(guard, exclusion)| async move {
            exclusion.leave();
            guard.unlock().await
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    for r in released {
        if let Err(e) = r {
            tally.error(e.into())?;
        }
    }
    Ok(())
}

/// What the nodes show now (every name held and waited for): the masters'
/// `used_memory` (the caller takes the figure before away), every node's
/// Pub/Sub channels and the subscriptions of A's and B's connections.
/// `names` is left to the caller.
async fn read_held(nodes: &mut Nodes, pair: &Pair) -> anyhow::Result<Held> {
    let memory_bytes = nodes.used_memory().await?;
    let channels = nodes.channels(None).await?;
    let subs = subscriptions(&nodes.client_lists().await?, pair);
    Ok(Held {
        names: 0,
        memory_bytes,
        channels: channels.count(),
        shard_channels: u64::try_from(channels.shard.len()).unwrap_or(u64::MAX),
        holder_subscriptions: subs.holder,
        waiter_subscriptions: subs.waiter,
        max_connection_subscriptions: subs.max,
    })
}

/// The Pub/Sub subscriptions of a run's two clients.
#[derive(Debug, Clone, Copy, Default)]
struct Subscriptions {
    /// Of A's connections together.
    holder: u64,
    /// Of B's connections together.
    waiter: u64,
    /// Of the one connection of the two clients with the most.
    max: u64,
}

/// The subscriptions of A's and of B's connections in `lists` (`CLIENT
/// LIST` of every node, in the nodes' order), told apart as
/// [`Pair::owner`] says.
fn subscriptions(lists: &[String], pair: &Pair) -> Subscriptions {
    let mut out = Subscriptions::default();
    for (node, list) in lists.iter().enumerate() {
        for line in list.lines() {
            let Some((name, subs)) = connection_subscriptions(line) else {
                continue;
            };
            match pair.owner(node, line, name) {
                Some(true) => out.holder += subs,
                Some(false) => out.waiter += subs,
                None => continue,
            }
            out.max = out.max.max(subs);
        }
    }
    out
}

/// The name of the connection of one `CLIENT LIST` line and its
/// subscriptions (`sub` + `psub` + `ssub`); `None` for a line without a
/// name field.
fn connection_subscriptions(line: &str) -> Option<(&str, u64)> {
    let mut name = None;
    let mut subs = 0;
    for (key, value) in line.split(' ').filter_map(|f| f.split_once('=')) {
        match key {
            "name" => name = Some(value),
            "sub" | "psub" | "ssub" => subs += value.parse::<u64>().unwrap_or(0),
            _ => {}
        }
    }
    name.map(|n| (n, subs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_list_lines_give_their_name_and_subscriptions() {
        let line = "id=7 addr=127.0.0.1:5 fd=9 name=run1-held-b age=0 db=0 sub=201 psub=1 \
                    ssub=0 multi=-1 cmd=subscribe";
        assert_eq!(connection_subscriptions(line), Some(("run1-held-b", 202)));
        assert_eq!(connection_subscriptions("id=8 sub=3"), None);
        assert_eq!(glob_escape(r"a*b?[c]\d{e}"), r"a\*b\?\[c\]\\d{e}");
        let old = "id=9 name= sub=0 psub=0";
        assert_eq!(connection_subscriptions(old), Some(("", 0)));
    }
}
