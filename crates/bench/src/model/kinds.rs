//! Which scenarios and contenders there are: the names the flags, the
//! JSON report and the table use, and the sizes every part of the bench
//! agrees on.

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// One scenario of `deadbolt-bench`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ScenarioKind {
    /// `--tasks` tasks lock and unlock distinct names for `--duration`:
    /// latency of acquire and of acquire+release, acquisitions/s.
    Uncontended,
    /// `--waiters` waiters over `--clients` clients on one name, holding it
    /// `--hold`: acquisitions/s and fairness.
    Contended,
    /// One holder releases while one waiter (on another client) waits: the
    /// release-to-next-holder latency, up to `--rounds` rounds or `--duration`.
    Handoff,
    /// `--idle-waiters` waiters blocked on a held lock for `--idle-time`:
    /// Redis commands per waiter per second.
    Idle,
    /// `--waiters` waiters over `--clients` clients on one name for
    /// `--duration`, each operation a write with probability `--write-ratio`
    /// and a read otherwise, held `--hold`: deadbolt's `RwLock` beside its
    /// `Lock` doing the same work exclusively. Operations/s, reads/s and
    /// writes/s, acquire latency of reads and of writes.
    ReadMostly,
    /// A semaphore of `--permits` permits, `--waiters` waiters over
    /// `--clients` clients, each taking one permit, holding it `--hold` and
    /// giving it back, for `--duration`: deadbolt's `Semaphore` beside a
    /// polling ZSET semaphore. Acquisitions/s, acquire latency, fairness;
    /// more than `--permits` holders at once counts as a violation.
    Semaphore,
    /// `--tasks` tasks lock and unlock distinct names for `--duration`, as
    /// in the uncontended scenario, with locks over many keys or servers:
    /// a single `Lock` (`lock`), a `MultiLock` over 3 names (`multi`), both
    /// on server 1, and one name on 3 independent servers through deadbolt's
    /// `Redlock` (`redlock`) and rslock's (`rslock-3`). Latency of
    /// acquire+release, acquisitions/s, commands per acquisition over all
    /// three servers. The Redlock rows need 3 servers: see `--redlock-redis`.
    Multi,
    /// Each contender locks and releases `--names` distinct names once (4
    /// tasks, one client) on an emptied server: the Redis memory and the
    /// keys left behind per released name.
    Names,
    /// Off by default (only with `--scenario held-names`): deadbolt's `Lock`
    /// and `FairLock` at scale on server 1, or with `--topology` on that
    /// deployment instead (a cluster's masters, and its nodes for the
    /// channels and subscriptions, added up). Client A holds `--names` names
    /// (watchdog leases, 64 acquires in flight), client B parks one waiter on
    /// each; with everything held and waited for, the Redis memory per held
    /// name, the Pub/Sub channels (in all, and subscribed per client); then A
    /// releases the names one after the other, each hand-off to B's waiter
    /// timed (p50, p99) with the Redis CPU per hand-off. The same with one
    /// name, `--rounds` times, is the baseline in the same run.
    HeldNames,
    /// deadbolt's `Lock` on a standalone server beside the `--topology`
    /// (a Redis Cluster or a Sentinel-managed master), in one run: `--tasks`
    /// tasks on one client, each taking and giving back its own 12 names
    /// (`TOPOLOGY_NAMES_PER_TASK`) in turn for `--duration`
    /// (acquisitions/s, lock+unlock latency); on a cluster once with every
    /// name on one master's slots and once with the names spread evenly over
    /// the masters. Then hand-off, as in the handoff scenario, on each. Every
    /// figure also as a ratio to the standalone's. Runs by default only with
    /// `--topology cluster` or `sentinel`; asked for by name with the
    /// default topology it measures the standalone rows alone.
    Topology,
}

impl ScenarioKind {
    /// Every scenario, in the order they run.
    pub const ALL: [ScenarioKind; 10] = [
        ScenarioKind::Uncontended,
        ScenarioKind::Contended,
        ScenarioKind::Handoff,
        ScenarioKind::Idle,
        ScenarioKind::ReadMostly,
        ScenarioKind::Semaphore,
        ScenarioKind::Multi,
        ScenarioKind::Names,
        ScenarioKind::HeldNames,
        ScenarioKind::Topology,
    ];

    /// The name used on the command line, in the JSON report and in the
    /// table.
    pub fn name(self) -> &'static str {
        match self {
            ScenarioKind::Uncontended => "uncontended",
            ScenarioKind::Contended => "contended",
            ScenarioKind::Handoff => "handoff",
            ScenarioKind::Idle => "idle",
            ScenarioKind::ReadMostly => "read-mostly",
            ScenarioKind::Semaphore => "semaphore",
            ScenarioKind::Multi => "multi",
            ScenarioKind::Names => "names",
            ScenarioKind::HeldNames => "held-names",
            ScenarioKind::Topology => "topology",
        }
    }
}

/// The names each task of the topology scenario's throughput rows takes in
/// turn: a multiple of 3, so a cluster's 3 masters get the same share of
/// every task's names.
pub const TOPOLOGY_NAMES_PER_TASK: u32 = 12;

/// One lock implementation `deadbolt-bench` measures.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ContenderKind {
    /// deadbolt's reentrant `Lock` (Pub/Sub waiting, watchdog lease).
    Lock,
    /// deadbolt's `Lock` with a plain `INCRBY` of a counter at the hold's
    /// `guarded().key("n")` under each hold (uncontended scenario only),
    /// sent on a redis-rs connection of its own to the same server at the
    /// start of the release: the baseline of `lock-guarded`.
    LockIncr,
    /// deadbolt's `Lock` with the same increment as a guarded write
    /// (`guard.guarded().incr_by(key, 1)`: one EVALSHA that checks the hold
    /// and writes) under each hold (uncontended scenario only): beside
    /// `lock-incr`, the price of the check.
    LockGuarded,
    /// deadbolt's strict-FIFO `FairLock`.
    Fair,
    /// The textbook lock: `SET key token NX PX lease`, spin-polled every
    /// `--poll-interval`, released by a Lua compare-and-delete.
    RawPoll,
    /// The rslock 0.10 crate with its default retries (3 tries, random 0–200 ms
    /// apart, called again until it gets the lock). Needs the `peers` feature.
    Rslock,
    /// Redisson's `RLock` algorithm: its server side (a hash of hold counts
    /// per thread, a PUBLISH on every release, an idempotency latch key per
    /// unlock), its Pub/Sub wait (subscribe after a failed try, wake on the
    /// message or the lock's TTL) and its watchdog (renew every lease/3),
    /// driven by this bench's Rust client, not Redisson's Java one: the
    /// Redis-side cost is Redisson's, the client side is not (no Netty, no
    /// JVM). Its latch DEL (one per release, sent without waiting) is not in
    /// cmds/acq: the DEL inside its scripts shares the name.
    Redisson,
    /// Redisson's `RFairLock` algorithm, likewise: a FIFO queue and a ZSET
    /// of waiters' timeouts (threadWaitTime 5 min, Redisson's default), each
    /// waiter woken on a channel of its own.
    RedissonFair,
    /// deadbolt's read-write `RwLock` (read-mostly scenario only): reads
    /// take its read side, writes its write side.
    Rw,
    /// deadbolt's `Semaphore` (semaphore scenario only): leased permits,
    /// Pub/Sub wake-ups for exactly the waiters that fit.
    Sem,
    /// The textbook polling semaphore (semaphore scenario only): a ZSET of
    /// holders scored by the server time they took a permit; one Lua script
    /// drops those older than `--lease` and adds the caller if fewer than
    /// `--permits` remain, tried every `--poll-interval`; released by ZREM.
    SemPoll,
    /// deadbolt's `MultiLock` over 3 `Lock` names on one server (multi
    /// scenario only): all or none, taken in key order.
    Multi,
    /// deadbolt's `Redlock`: one `Lock` name on 3 independent servers, held
    /// on a majority (multi scenario only).
    Redlock,
    /// rslock 0.10's `LockManager` over the same 3 servers as `redlock`
    /// (rslock is Redlock; multi scenario only), with its default retries.
    /// Needs the `peers` feature.
    #[value(name = "rslock-3")]
    #[serde(rename = "rslock-3")]
    Rslock3,
}

impl ContenderKind {
    /// Every contender, in the order they run.
    pub const ALL: [ContenderKind; 14] = [
        ContenderKind::Lock,
        ContenderKind::LockIncr,
        ContenderKind::LockGuarded,
        ContenderKind::Fair,
        ContenderKind::RawPoll,
        ContenderKind::Rslock,
        ContenderKind::Redisson,
        ContenderKind::RedissonFair,
        ContenderKind::Rw,
        ContenderKind::Sem,
        ContenderKind::SemPoll,
        ContenderKind::Multi,
        ContenderKind::Redlock,
        ContenderKind::Rslock3,
    ];

    /// The name used on the command line and in the JSON report.
    pub fn name(self) -> &'static str {
        match self {
            ContenderKind::Lock => "lock",
            ContenderKind::LockIncr => "lock-incr",
            ContenderKind::LockGuarded => "lock-guarded",
            ContenderKind::Fair => "fair",
            ContenderKind::RawPoll => "raw-poll",
            ContenderKind::Rslock => "rslock",
            ContenderKind::Redisson => "redisson",
            ContenderKind::RedissonFair => "redisson-fair",
            ContenderKind::Rw => "rw",
            ContenderKind::Sem => "sem",
            ContenderKind::SemPoll => "sem-poll",
            ContenderKind::Multi => "multi",
            ContenderKind::Redlock => "redlock",
            ContenderKind::Rslock3 => "rslock-3",
        }
    }
}

/// The servers a Redlock contender spreads its lock over.
pub(crate) const REDLOCK_SERVERS: usize = 3;

/// The names a `multi` contender's `MultiLock` holds together.
pub(crate) const MULTI_PARTS: usize = 3;
