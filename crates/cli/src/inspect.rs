//! `deadbolt inspect` and `deadbolt force-unlock`: lock, fair lock,
//! read-write lock, and (inspect only) semaphore; on one server, a Redis
//! Cluster or a master behind Sentinel (`--topology`, as `deadbolt bench`).

use std::fmt;
use std::future::Future;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use clap::{Args, ValueEnum};
use deadbolt_core::Client;
use deadbolt_rwlock::RwLock;
use deadbolt_semaphore::{Semaphore, SEMAPHORE_KIND};

use crate::target::{redact, split_urls, topology_parser, Target, Topology};

/// The Redis used when `--redis` is not given.
const DEFAULT_REDIS: &str = "redis://127.0.0.1:6379/";

/// Which kind of deadbolt primitive a name refers to (each kind has its own
/// keys, `<ns>:{<name>}:<kind>`, so a `Lock` "x" and a `FairLock` "x" are
/// different things).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[non_exhaustive]
pub enum PrimitiveKind {
    /// The reentrant `Lock`.
    Lock,
    /// The strict-FIFO `FairLock`.
    Fair,
    /// The read-write `RwLock`.
    Rw,
    /// The leased semaphore (`inspect` only: `force-unlock` does not take
    /// a semaphore's permits away).
    Semaphore,
    /// A leader election (`inspect` only: its leader steps down by
    /// resigning, or when its lease ends).
    Election,
}

impl PrimitiveKind {
    fn name(self) -> &'static str {
        match self {
            PrimitiveKind::Lock => "lock",
            PrimitiveKind::Fair => "fair",
            PrimitiveKind::Rw => "rw",
            PrimitiveKind::Semaphore => "semaphore",
            PrimitiveKind::Election => "election",
        }
    }

    /// The kind segment of its keys, `<ns>:{<name>}:<segment>` (the
    /// semaphore's is `sem`, not its `--kind` name).
    fn key_kind(self) -> &'static str {
        match self {
            PrimitiveKind::Semaphore => SEMAPHORE_KIND,
            PrimitiveKind::Election => deadbolt_election::KIND,
            other => other.name(),
        }
    }

    /// What a person calls it: "lock", "fair lock".
    fn title(self) -> &'static str {
        match self {
            PrimitiveKind::Lock => "lock",
            PrimitiveKind::Fair => "fair lock",
            PrimitiveKind::Rw => "read-write lock",
            PrimitiveKind::Semaphore => "semaphore",
            PrimitiveKind::Election => "election",
        }
    }

    /// Refuse `force-unlock` of a kind it cannot undo.
    fn require_force_unlock(self) -> anyhow::Result<()> {
        if self == PrimitiveKind::Election {
            bail!(
                "force-unlock --kind election is not supported: a leader steps down by \
                 resigning, or when its lease ends (see who leads with `deadbolt inspect \
                 --kind election`); only --kind lock, fair or rw can be force-unlocked"
            );
        }
        if self == PrimitiveKind::Semaphore {
            bail!(
                "force-unlock --kind semaphore is not supported: a semaphore's permits are \
                 leased to each holder and come back when it releases them or its lease ends \
                 (see them with `deadbolt inspect --kind semaphore`); only --kind lock, fair \
                 or rw can be force-unlocked"
            );
        }
        Ok(())
    }
}

/// Arguments of `deadbolt inspect`; also the target of `deadbolt force-unlock`.
#[derive(Debug, Clone, Args)]
pub struct InspectArgs {
    /// The lock's name (as passed to `client.lock(name)`, or to
    /// `Semaphore::new(&client, name)`).
    pub name: String,
    /// Kind of primitive. Without it, a name that has no lock but is a
    /// primitive of another kind is refused, naming that kind.
    #[arg(long, value_enum, default_value = "lock")]
    pub kind: PrimitiveKind,
    /// Redis URL; with --topology cluster, seed URLs of the cluster, and
    /// with --topology sentinel, URLs of Sentinels (comma-separated).
    #[arg(long, value_name = "URL[,URL..]", default_value = DEFAULT_REDIS, env = "DEADBOLT_REDIS_URL")]
    pub redis: String,
    /// How the Redis of --redis is deployed. On a cluster each key is read
    /// on the node that owns its slot; behind Sentinel the master is asked
    /// of the first Sentinel that answers and reached with the first
    /// Sentinel URL's scheme, without credentials, on database 0 (as
    /// `Client::sentinel` reaches it).
    #[arg(long, value_parser = topology_parser(), default_value_t = Topology::Standalone, value_name = "TOPOLOGY")]
    pub topology: Topology,
    /// With --topology sentinel: the name the Sentinels know the master by.
    #[arg(long, value_name = "NAME")]
    pub sentinel_master: Option<String>,
    /// Namespace (key prefix) the locks were made with.
    #[arg(long, value_name = "NS", default_value = "deadbolt")]
    pub namespace: String,
    /// `inspect` only: keep watching, and print each holder change as it
    /// happens (who acquired it; released, expired or force-unlocked; the
    /// number of readers or permits in use; an election's leader) until
    /// interrupted. Instant when the server's `notify-keyspace-events`
    /// includes `Kghzx`, else within a second.
    #[arg(long)]
    pub watch: bool,
}

impl InspectArgs {
    /// Where `--redis`, `--topology` and `--sentinel-master` lead; checked
    /// before anything connects.
    fn target(&self) -> anyhow::Result<Target> {
        let t = self.topology;
        if self.sentinel_master.is_some() && t != Topology::Sentinel {
            bail!("--sentinel-master goes with --topology sentinel");
        }
        let urls = || {
            let urls = split_urls(&self.redis);
            if urls.is_empty() {
                bail!(
                    "--redis with --topology {}: give the {} URLs, comma-separated",
                    t.name(),
                    t.urls_of()
                );
            }
            Ok(urls)
        };
        Ok(match t {
            Topology::Standalone => Target::Standalone(self.redis.clone()),
            Topology::Cluster => Target::Cluster(urls()?),
            Topology::Sentinel => match self.sentinel_master.as_deref() {
                Some(master) if !master.is_empty() => Target::Sentinel {
                    sentinels: urls()?,
                    master: master.to_string(),
                },
                _ => bail!("--topology sentinel: name the master with --sentinel-master NAME"),
            },
        })
    }
}

/// What `target` is, for messages (passwords hidden).
fn describe(target: &Target) -> String {
    let list = |urls: &[String]| {
        urls.iter()
            .map(|u| redact(u))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match target {
        Target::Standalone(url) => redact(url),
        Target::Cluster(seeds) => format!("the cluster at {}", list(seeds)),
        Target::Sentinel { sentinels, master } => {
            format!(
                "the master {master:?} of the Sentinels at {}",
                list(sentinels)
            )
        }
    }
}

/// Arguments of `deadbolt force-unlock`.
#[derive(Debug, Clone, Args)]
pub struct ForceUnlockArgs {
    /// Which lock, on which Redis.
    #[command(flatten)]
    pub target: InspectArgs,
    /// Confirm: the current holder loses the lock while it may still be
    /// working under it.
    #[arg(long)]
    pub yes: bool,
}

/// What `deadbolt inspect` found for one lock, read in one atomic script.
///
/// For a read-write lock (`--kind rw`) the hold fields (`owner`,
/// `hold_count`, `token`, `ttl`) describe the writer, and [`LockState::rw`]
/// the readers and waiting writers. For a semaphore (`--kind semaphore`)
/// [`LockState::semaphore`] holds everything; the hold fields stay empty
/// (no owner, counts 0: permits carry no fencing token).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockState {
    /// The lock's name.
    pub name: String,
    /// Which kind of lock it is.
    pub kind: PrimitiveKind,
    /// The hold hash, `<ns>:{<name>}:lock` (or `:fair`, or `:rw` for the
    /// writer's hold of a read-write lock).
    pub key: String,
    /// Owner id `<client id>:<handle id>` of the holder (the writer, for a
    /// read-write lock); `None` when nobody holds it (writes).
    pub owner: Option<String>,
    /// How many times the holder holds it (re-entries count).
    pub hold_count: u64,
    /// Fencing token of the current hold (0 when free).
    pub token: u64,
    /// Remaining TTL of the hold; `None` when free or when the key has no TTL.
    pub ttl: Option<Duration>,
    /// The fencing counter: the last token handed out for this name (0 when
    /// the counter key is absent).
    pub fence: u64,
    /// Waiters queued (fair lock; always 0 for a `Lock`, which has no queue
    /// and does not print this line).
    pub queued: u64,
    /// The head of the fair lock's queue, in order (at most
    /// [`QUEUE_LISTED`] entries; empty for a `Lock`).
    pub queue: Vec<QueueEntry>,
    /// Readers and waiting writers of a read-write lock; `None` for the
    /// other kinds.
    pub rw: Option<RwState>,
    /// Permits, holders and waiters of a semaphore; `None` for the other
    /// kinds.
    pub semaphore: Option<SemaphoreState>,
    /// The leader's info (what it campaigned with), for an election (the
    /// hold fields are the leader's: `owner`, `token` is its term, `ttl`);
    /// `None` for the other kinds and when nobody leads.
    pub info: Option<String>,
}

/// A semaphore as `deadbolt inspect --kind semaphore` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreState {
    /// The permits set; `None` when never set (every acquire waits until
    /// they are).
    pub permits: Option<u64>,
    /// Permits free now (negative after the total was reduced below what
    /// live holds take, until they give permits back). Ended leases were
    /// given back first.
    pub available: i64,
    /// Live holds.
    pub holds: u64,
    /// Queued waiters.
    pub waiting: u64,
    /// Holders, longest lease first (at most 100: the library lists no more).
    pub holders: Vec<PermitHolder>,
    /// Waiters in queue order (at most 100).
    pub waiters: Vec<PermitWaiter>,
}

/// One hold of a semaphore's permits.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PermitHolder {
    /// The hold's attempt id.
    pub attempt: String,
    /// Owner id `<client id>:<handle id>` of the holder.
    pub owner: String,
    /// Permits it holds.
    pub permits: u64,
    /// How long its lease still runs.
    pub lease_left: Duration,
}

/// One waiter in a semaphore's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PermitWaiter {
    /// The waiting attempt id.
    pub attempt: String,
    /// Owner id `<client id>:<handle id>` of the waiter.
    pub owner: String,
    /// Permits it waits for (all at once).
    pub permits: u64,
}

/// The read side of a read-write lock, as `deadbolt inspect --kind rw`
/// shows it (the writer is in [`LockState`]'s hold fields).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RwState {
    /// Live read holds (re-entries count: each hold has its own lease).
    pub readers: u64,
    /// Until the longest read lease ends; `None` without readers.
    pub longest_lease: Option<Duration>,
    /// Read holds, longest lease first (at most as many as
    /// `RwLock::inspect` lists: 100).
    pub reader_list: Vec<ReaderEntry>,
    /// Writers marked as waiting (while a live one waits, new readers wait
    /// behind it).
    pub waiting_writers: u64,
}

/// One read hold of a read-write lock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReaderEntry {
    /// The read hold's attempt id.
    pub attempt: String,
    /// Owner id `<client id>:<handle id>` of the reader.
    pub owner: String,
    /// How long its lease still runs.
    pub lease_left: Duration,
}

/// How many queue entries `deadbolt inspect` lists.
pub const QUEUE_LISTED: usize = 20;

/// One waiter in a fair lock's queue: core's own record of it.
pub use deadbolt_core::QueuedWaiter as QueueEntry;

impl From<deadbolt_semaphore::HolderInfo> for PermitHolder {
    fn from(h: deadbolt_semaphore::HolderInfo) -> PermitHolder {
        PermitHolder {
            attempt: h.attempt,
            owner: h.owner,
            permits: h.permits,
            lease_left: h.ttl,
        }
    }
}

impl From<deadbolt_semaphore::WaiterInfo> for PermitWaiter {
    fn from(w: deadbolt_semaphore::WaiterInfo) -> PermitWaiter {
        PermitWaiter {
            attempt: w.attempt,
            owner: w.owner,
            permits: w.permits,
        }
    }
}

impl From<deadbolt_rwlock::ReaderInfo> for ReaderEntry {
    fn from(r: deadbolt_rwlock::ReaderInfo) -> ReaderEntry {
        ReaderEntry {
            attempt: r.attempt,
            owner: r.owner,
            lease_left: r.ttl,
        }
    }
}

/// A queued waiter's liveness in words: "liveness left 4.8 s", "expired
/// 1.2 s ago (will be skipped)".
fn liveness(q: &QueueEntry) -> String {
    match (q.alive_for, q.expired_ago) {
        (Some(left), _) => format!("liveness left {:.1} s", left.as_secs_f64()),
        (None, Some(ago)) => {
            format!("expired {:.1} s ago (will be skipped)", ago.as_secs_f64())
        }
        (None, None) => "no liveness record (will be skipped)".to_string(),
    }
}

/// "1 writer", "2 writers".
/// The line `<prefix><client name>` for `owner`, when its id carries a
/// client name ([`deadbolt_core::holder_name`]): who holds or waits, in the
/// words its process gave (`ClientBuilder::client_name`).
fn named(f: &mut fmt::Formatter<'_>, prefix: &str, owner: &str) -> fmt::Result {
    match deadbolt_core::holder_name(owner) {
        Some(name) => writeln!(f, "{prefix}{name}"),
        None => Ok(()),
    }
}

/// The line under an entry of a list: its client's name.
const ENTRY_CLIENT: &str = "         client ";

fn writers(n: u64) -> String {
    format!("{n} writer{}", if n == 1 { "" } else { "s" })
}

/// "1 permit", "2 permits".
fn permits(n: u64) -> String {
    format!("{n} permit{}", if n == 1 { "" } else { "s" })
}

/// "… and 3 more" when `total` exceeds what was listed.
fn fmt_more(f: &mut fmt::Formatter<'_>, total: u64, listed: usize) -> fmt::Result {
    let listed = u64::try_from(listed).unwrap_or(u64::MAX);
    if total > listed {
        writeln!(f, "         … and {} more", total - listed)?;
    }
    Ok(())
}

impl SemaphoreState {
    /// The permits, the holders longest lease first, the waiters in order.
    fn fmt_lines(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.permits {
            Some(n) => writeln!(f, "  permits     {n}")?,
            None => writeln!(
                f,
                "  permits     never set (acquires wait until they are set)"
            )?,
        }
        if self.available < 0 {
            writeln!(
                f,
                "  available   {}  (the total was reduced below what holders hold)",
                self.available
            )?;
        } else {
            writeln!(f, "  available   {}", self.available)?;
        }
        writeln!(f, "  holders     {}", self.holds)?;
        for (i, h) in self.holders.iter().enumerate() {
            writeln!(
                f,
                "    {:>3}. {}  {}  lease left {:.1} s  attempt {}",
                i + 1,
                h.owner,
                permits(h.permits),
                h.lease_left.as_secs_f64(),
                h.attempt
            )?;
            named(f, ENTRY_CLIENT, &h.owner)?;
        }
        fmt_more(f, self.holds, self.holders.len())?;
        writeln!(f, "  waiting     {}", self.waiting)?;
        for (i, w) in self.waiters.iter().enumerate() {
            writeln!(
                f,
                "    {:>3}. {}  wants {}  attempt {}",
                i + 1,
                w.owner,
                permits(w.permits),
                w.attempt
            )?;
            named(f, ENTRY_CLIENT, &w.owner)?;
        }
        fmt_more(f, self.waiting, self.waiters.len())
    }
}

impl LockState {
    /// `name` of `kind` at `key` with nothing held, queued or counted: what
    /// each kind's reader (and each test) fills in.
    fn empty(name: &str, kind: PrimitiveKind, key: &str) -> LockState {
        LockState {
            name: name.to_string(),
            kind,
            key: key.to_string(),
            owner: None,
            hold_count: 0,
            token: 0,
            ttl: None,
            fence: 0,
            queued: 0,
            queue: Vec::new(),
            rw: None,
            semaphore: None,
            info: None,
        }
    }

    /// The hold fields (the writer's, for a read-write lock) as the library
    /// read them: a TTL only while held, and a missing token or fence shown
    /// as 0 (a fence of `None` is a counter the acquire would refuse,
    /// BADVALUE).
    fn with_hold(
        self,
        owner: Option<String>,
        hold_count: u64,
        token: Option<u64>,
        ttl: Option<Duration>,
        fence: Option<u64>,
    ) -> LockState {
        LockState {
            ttl: owner.as_ref().and(ttl),
            owner,
            hold_count,
            token: token.unwrap_or(0),
            fence: fence.unwrap_or(0),
            ..self
        }
    }

    /// The hold lines: hold count, TTL, token.
    fn fmt_hold(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  hold count  {}", self.hold_count)?;
        match self.ttl {
            Some(ttl) => writeln!(f, "  ttl         {:.3} s", ttl.as_secs_f64())?,
            None => writeln!(f, "  ttl         none (the key never expires!)")?,
        }
        writeln!(f, "  token       {}", self.token)
    }

    /// An election's leader: owner, client name, term, lease left, info.
    fn fmt_election(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(owner) = &self.owner else {
            return writeln!(f, "  state       no leader");
        };
        writeln!(f, "  state       led")?;
        writeln!(f, "  leader      {owner}")?;
        named(f, "  client      ", owner)?;
        writeln!(f, "  term        {}", self.token)?;
        if let Some(ttl) = self.ttl {
            writeln!(f, "  lease left  {:.3} s", ttl.as_secs_f64())?;
        }
        writeln!(f, "  info        {}", self.info.as_deref().unwrap_or(""))
    }

    /// A read-write lock's writer, readers and waiting writers.
    fn fmt_rw(&self, rw: &RwState, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match (self.owner.is_some(), rw.readers > 0) {
            (false, false) => "free",
            (true, false) => "held (writing)",
            (false, true) => "held (reading)",
            // The writer's own reads (a downgrade in progress).
            (true, true) => "held (writing and reading)",
        };
        writeln!(f, "  state       {state}")?;
        match &self.owner {
            None => writeln!(f, "  writer      none")?,
            Some(owner) => {
                writeln!(f, "  writer      {owner}")?;
                named(f, "  client      ", owner)?;
                self.fmt_hold(f)?;
            }
        }
        match rw.longest_lease {
            Some(left) if rw.readers > 0 => writeln!(
                f,
                "  readers     {}  (longest lease left {:.1} s)",
                rw.readers,
                left.as_secs_f64()
            )?,
            _ => writeln!(f, "  readers     {}", rw.readers)?,
        }
        for (i, r) in rw.reader_list.iter().enumerate() {
            writeln!(
                f,
                "    {:>3}. {}  attempt {}  lease left {:.1} s",
                i + 1,
                r.owner,
                r.attempt,
                r.lease_left.as_secs_f64()
            )?;
            named(f, ENTRY_CLIENT, &r.owner)?;
        }
        fmt_more(f, rw.readers, rw.reader_list.len())?;
        writeln!(f, "  waiting     {}", writers(rw.waiting_writers))
    }
}

impl fmt::Display for LockState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} {}  (key {})", self.kind.title(), self.name, self.key)?;
        // A semaphore has no single holder and no fencing counter.
        if let Some(sem) = &self.semaphore {
            return sem.fmt_lines(f);
        }
        if self.kind == PrimitiveKind::Election {
            return self.fmt_election(f);
        }
        match (&self.rw, &self.owner) {
            (Some(rw), _) => self.fmt_rw(rw, f)?,
            (None, None) => writeln!(f, "  state       free")?,
            (None, Some(owner)) => {
                writeln!(f, "  state       held")?;
                writeln!(f, "  owner       {owner}")?;
                named(f, "  client      ", owner)?;
                self.fmt_hold(f)?;
            }
        }
        writeln!(
            f,
            "  fence       {}  (fencing counter: last token handed out)",
            self.fence
        )?;
        // A plain lock has no queue: its waiters wait on their own clients.
        if self.kind != PrimitiveKind::Fair {
            return Ok(());
        }
        writeln!(f, "  queued      {}", self.queued)?;
        for (i, q) in self.queue.iter().enumerate() {
            writeln!(
                f,
                "    {:>3}. {}  attempt {}  {}",
                i + 1,
                q.owner,
                q.attempt,
                liveness(q)
            )?;
            named(f, ENTRY_CLIENT, &q.owner)?;
        }
        fmt_more(f, self.queued, self.queue.len())
    }
}

/// How long the CLI's own `TYPE` check (and, behind Sentinel, each
/// Sentinel's answer) may take to connect and to answer.
const TYPE_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Refuse a lock whose hold key is of another type than a hold (a hash;
/// a semaphore's `<ns>:{<name>}:sem` is a hash too).
///
/// Asks Redis for the `TYPE` of `key` on a connection of its own: `none`
/// (free) and `hash` (a hold) pass; anything else is refused with the type
/// found, before anything is written. This does not rely on the library's
/// scripts refusing a wrong type. On a cluster the `TYPE` goes to the node
/// that owns the key's slot; behind Sentinel to the master the Sentinels
/// name now.
async fn check_key_type(target: &Target, key: &str, kind: PrimitiveKind) -> anyhow::Result<String> {
    let mut type_of = redis::cmd("TYPE");
    type_of.arg(key);
    let found: String = match target {
        Target::Standalone(url) => {
            let info = redis::IntoConnectionInfo::into_connection_info(url.as_str())
                .with_context(|| format!("bad Redis URL {}", redact(url)))?;
            type_of.query_async(&mut node_connection(info).await?).await
        }
        Target::Sentinel { sentinels, master } => {
            let info = sentinel_master(sentinels, master).await?;
            type_of.query_async(&mut node_connection(info).await?).await
        }
        Target::Cluster(seeds) => {
            let mut conn = redis::cluster::ClusterClient::builder(seeds.iter().map(String::as_str))
                .connection_timeout(TYPE_CHECK_TIMEOUT)
                .response_timeout(TYPE_CHECK_TIMEOUT)
                .build()
                .with_context(|| format!("bad cluster seed URLs {}", describe(target)))?
                .get_async_connection()
                .await
                .with_context(|| format!("connecting to {}", describe(target)))?;
            // Routed by its key to the node that owns the slot.
            type_of.query_async(&mut conn).await
        }
    }
    .with_context(|| format!("reading the type of {key}"))?;
    match found.as_str() {
        "none" | "hash" => Ok(found),
        other => bail!("refused: {key} holds a {other}, not a {}", kind.title()),
    }
}

/// The name has no lock key: if another kind's main key is there, say
/// which kind it is (a held fair lock read as a lock would print "free").
async fn refuse_another_kind(
    target: &Target,
    client: &Client,
    args: &InspectArgs,
) -> anyhow::Result<()> {
    for other in PrimitiveKind::value_variants() {
        if *other == args.kind {
            continue;
        }
        let key = client.keys(other.key_kind(), &args.name)?;
        if check_key_type(target, key.main(), *other)
            .await
            .map_or(true, |t| t != "none")
        {
            bail!(
                "{} is a {}, not a {}: use --kind {}",
                args.name,
                other.title(),
                args.kind.title(),
                other.name()
            );
        }
    }
    Ok(())
}

/// A connection of the CLI's own to one server, bounded by
/// [`TYPE_CHECK_TIMEOUT`].
async fn node_connection(
    info: redis::ConnectionInfo,
) -> anyhow::Result<redis::aio::MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(TYPE_CHECK_TIMEOUT))
        .set_response_timeout(Some(TYPE_CHECK_TIMEOUT));
    let shown = info.addr().to_string();
    redis::Client::open(info)
        .with_context(|| format!("bad Redis address {shown}"))?
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .with_context(|| format!("connecting to {shown}"))
}

/// The master the first Sentinel that answers knows as `master`, with the
/// settings deadbolt's `Client::sentinel` reaches it with: the first
/// Sentinel's scheme (and TLS settings), no credentials, database 0. The
/// library's own resolution ([`deadbolt_core::sentinel_master`]), so the
/// check reads the server the library writes to.
async fn sentinel_master(
    sentinels: &[String],
    master: &str,
) -> anyhow::Result<redis::ConnectionInfo> {
    let clients = sentinels
        .iter()
        .map(|url| {
            redis::Client::open(url.as_str())
                .with_context(|| format!("bad Sentinel URL {}", redact(url)))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let Some(first) = clients.first() else {
        bail!("no Sentinel URL given");
    };
    let node = first
        .get_connection_info()
        .clone()
        .set_redis_settings(redis::RedisConnectionInfo::default());
    deadbolt_core::sentinel_master(&clients, master, &node, TYPE_CHECK_TIMEOUT)
        .await
        .map_err(|e| anyhow!("finding the master {master:?}: {e}"))
}

async fn connect(target: &Target, namespace: &str) -> anyhow::Result<Client> {
    target
        .builder()
        .namespace(namespace)
        .build()
        .await
        .with_context(|| format!("connecting to {}", describe(target)))
}

/// Read the state of a lock, fair lock, read-write lock or semaphore.
///
/// # Errors
/// Flags that do not go together (`--sentinel-master` without `--topology
/// sentinel`, `--topology sentinel` without it, `--topology cluster` or
/// `sentinel` with no URL in `--redis`: nothing is sent), an unreachable
/// Redis, a cluster that cannot be mapped, Sentinels that do not know the
/// master, a key of another type at the lock's key ("refused: KEY holds a
/// string, not a lock").
///
/// # Cancel safety
/// Cancel safe: it only reads (a semaphore's inspect gives back ended
/// leases first, which is due anyway).
pub async fn inspect(args: &InspectArgs) -> anyhow::Result<LockState> {
    on_checked_key(args, async |client| match args.kind {
        PrimitiveKind::Rw => read_rw(client, &args.name).await,
        PrimitiveKind::Semaphore => read_semaphore(client, &args.name).await,
        PrimitiveKind::Election => read_election(client, &args.name).await,
        kind => read_lock(client, kind, &args.name).await,
    })
    .await
}

/// Connect to where `args` lead, refuse a key of another type at the lock's
/// key ([`check_key_type`]), then run `op`; the client is shut down
/// whatever `op` returns.
pub(crate) async fn on_checked_key<T>(
    args: &InspectArgs,
    op: impl AsyncFnOnce(&Client) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let target = args.target()?;
    let client = connect(&target, &args.namespace).await?;
    let result = async {
        let key = client.keys(args.kind.key_kind(), &args.name)?;
        let found = check_key_type(&target, key.main(), args.kind).await?;
        // `--kind lock` is the default: a name held as another kind would
        // read as a free lock. (Asked for by name, a kind is what it says:
        // a lock and a fair lock of one name are two locks.)
        if found == "none" && args.kind == PrimitiveKind::Lock {
            refuse_another_kind(&target, &client, args).await?;
        }
        op(&client).await
    }
    .await;
    client.shutdown().await;
    result
}

/// What `read` (the library's inspect of `name` as `kind`) found, with the
/// state it starts from: nothing held yet, at the kind's main key (a
/// failure is "reading KEY").
async fn read_info<T, E>(
    client: &Client,
    kind: PrimitiveKind,
    name: &str,
    read: impl Future<Output = Result<T, E>>,
) -> anyhow::Result<(LockState, T)>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let keys = client.keys(kind.key_kind(), name)?;
    let info = read
        .await
        .with_context(|| format!("reading {}", keys.main()))?;
    Ok((LockState::empty(name, kind, keys.main()), info))
}

async fn read_lock(client: &Client, kind: PrimitiveKind, name: &str) -> anyhow::Result<LockState> {
    let (state, info) = read_info(client, kind, name, async {
        match kind {
            PrimitiveKind::Fair => deadbolt_fair::FairLock::new(client, name).inspect().await,
            _ => deadbolt_lock::Lock::new(client, name).inspect().await,
        }
    })
    .await?;
    // The fair lock reads its own queue (a `Lock` has none: empty).
    let queue = if kind == PrimitiveKind::Fair && info.queued > 0 {
        deadbolt_fair::FairLock::new(client, name)
            .queue(QUEUE_LISTED)
            .await
            .with_context(|| format!("reading the queue of {}", state.key))?
    } else {
        Vec::new()
    };
    Ok(LockState {
        queued: info.queued,
        queue,
        ..state.with_hold(
            info.holder,
            info.hold_count,
            info.token,
            info.ttl,
            info.fence,
        )
    })
}

/// An election: the leader in the hold fields (its term as the token), its
/// info in `info`.
async fn read_election(client: &Client, name: &str) -> anyhow::Result<LockState> {
    let kind = PrimitiveKind::Election;
    let election = deadbolt_election::Election::new(client, name);
    let (state, leader) = read_info(client, kind, name, election.leader()).await?;
    Ok(match leader {
        None => state,
        Some(l) => LockState {
            info: Some(l.info),
            ..state.with_hold(Some(l.owner), 1, Some(l.term), Some(l.ttl), Some(l.term))
        },
    })
}

/// A read-write lock: the writer in the hold fields, the rest in `rw`.
async fn read_rw(client: &Client, name: &str) -> anyhow::Result<LockState> {
    let kind = PrimitiveKind::Rw;
    let (state, info) = read_info(client, kind, name, RwLock::new(client, name).inspect()).await?;
    Ok(LockState {
        rw: Some(RwState {
            readers: info.readers,
            longest_lease: info.read_ttl,
            reader_list: info
                .reader_list
                .into_iter()
                .map(ReaderEntry::from)
                .collect(),
            waiting_writers: info.waiting_writers,
        }),
        ..state.with_hold(
            info.writer,
            info.write_holds,
            info.token,
            info.write_ttl,
            info.fence,
        )
    })
}

/// A semaphore: everything in `semaphore`.
async fn read_semaphore(client: &Client, name: &str) -> anyhow::Result<LockState> {
    let kind = PrimitiveKind::Semaphore;
    let (state, info) =
        read_info(client, kind, name, Semaphore::new(client, name).inspect()).await?;
    Ok(LockState {
        semaphore: Some(SemaphoreState {
            permits: info.permits,
            available: info.available,
            holds: info.holds,
            waiting: info.waiting,
            holders: info.holders.into_iter().map(PermitHolder::from).collect(),
            waiters: info.waiters.into_iter().map(PermitWaiter::from).collect(),
        }),
        ..state
    })
}

/// What `deadbolt force-unlock` removed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unlocked {
    /// The lock's name.
    pub name: String,
    /// Which kind of lock it is.
    pub kind: PrimitiveKind,
    /// Whether a hold was deleted: the lock's (lock, fair) or the writer's
    /// (rw).
    pub hold: bool,
    /// Read holds removed (rw; always 0 for the other kinds).
    pub read_holds: u64,
}

impl Unlocked {
    /// Whether anything was deleted.
    pub fn removed_anything(&self) -> bool {
        self.hold || self.read_holds > 0
    }
}

impl fmt::Display for Unlocked {
    /// "x: unlocked (the hold was deleted)"; for a read-write lock "x:
    /// unlocked (removed writer: yes, read holds: 2)"; "x: was not locked;
    /// nothing deleted".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.removed_anything() {
            return write!(f, "{}: was not locked; nothing deleted", self.name);
        }
        if self.kind == PrimitiveKind::Rw {
            write!(
                f,
                "{}: unlocked (removed writer: {}, read holds: {})",
                self.name,
                if self.hold { "yes" } else { "no" },
                self.read_holds
            )
        } else {
            write!(f, "{}: unlocked (the hold was deleted)", self.name)
        }
    }
}

/// Delete a lock whoever holds it and wake its waiters (one per client for
/// a lock or fair lock, every waiter for a read-write lock, whose writer and
/// read holds all go; its waiting writers keep their marks). Returns what
/// was deleted.
///
/// # Errors
/// Without `yes` (nothing is sent), `--kind semaphore` (not supported:
/// nothing is sent), flags that do not go together (as for [`inspect`]:
/// nothing is sent), an unreachable Redis, a cluster that cannot be mapped,
/// Sentinels that do not know the master, a key of another type at the
/// lock's key: that is refused with the type found ("refused: KEY holds a
/// string, not a lock") and nothing is deleted.
///
/// # Cancel safety
/// If dropped, the delete may or may not have happened; running it again is
/// harmless.
pub async fn force_unlock(force: &ForceUnlockArgs) -> anyhow::Result<Unlocked> {
    let args = &force.target;
    if args.watch {
        bail!("--watch goes with `deadbolt inspect`, not with force-unlock");
    }
    if !force.yes {
        bail!(
            "refusing to force-unlock {:?} without --yes: its holder would lose the lock \
             while it may still be working under it",
            args.name
        );
    }
    args.kind.require_force_unlock()?;
    on_checked_key(args, async |client| {
        let (hold, read_holds) = match args.kind {
            PrimitiveKind::Fair => deadbolt_fair::FairLock::new(client, &args.name)
                .force_unlock()
                .await
                .map(|deleted| (deleted, 0)),
            PrimitiveKind::Rw => RwLock::new(client, &args.name)
                .force_unlock()
                .await
                .map(|removed| (removed.writer, removed.readers)),
            // Semaphore: refused above.
            _ => deadbolt_lock::Lock::new(client, &args.name)
                .force_unlock()
                .await
                .map(|deleted| (deleted, 0)),
        }
        .with_context(|| format!("force-unlocking {}", args.name))?;
        Ok(Unlocked {
            name: args.name.clone(),
            kind: args.kind,
            hold,
            read_holds,
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(liveness_ms: i64) -> QueueEntry {
        QueueEntry::from_reply(("a1".into(), "c:1".into(), 30_000, liveness_ms))
    }

    #[test]
    fn liveness_says_which_way() {
        assert_eq!(liveness(&entry(4_800)), "liveness left 4.8 s");
        assert_eq!(liveness(&entry(0)), "liveness left 0.0 s");
        assert_eq!(
            liveness(&entry(-1_200)),
            "expired 1.2 s ago (will be skipped)"
        );
        assert_eq!(liveness(&entry(-1)), "no liveness record (will be skipped)");
        assert_eq!(entry(-1).lease, Some(Duration::from_secs(30)));
    }

    #[test]
    fn header_names_the_kind_and_only_a_fair_lock_shows_a_queue() {
        let state = |kind, queue: Vec<QueueEntry>| LockState {
            fence: 7,
            queued: u64::try_from(queue.len()).unwrap(),
            queue,
            ..LockState::empty("x", kind, "ns:{x}:k")
        };
        let lock = state(PrimitiveKind::Lock, Vec::new()).to_string();
        assert!(lock.starts_with("lock x  (key ns:{x}:k)\n"), "{lock}");
        assert!(!lock.contains("queued"), "{lock}");
        let fair = state(PrimitiveKind::Fair, vec![entry(2_000), entry(-3_000)]).to_string();
        assert!(fair.starts_with("fair lock x  (key ns:{x}:k)\n"), "{fair}");
        assert!(fair.contains("  queued      2\n"), "{fair}");
        assert!(
            fair.contains("  1. c:1  attempt a1  liveness left 2.0 s\n"),
            "{fair}"
        );
        assert!(
            fair.contains("  2. c:1  attempt a1  expired 3.0 s ago (will be skipped)\n"),
            "{fair}"
        );
    }

    fn rw_state(owner: Option<&str>, readers: &[(&str, u64)], count: u64) -> LockState {
        LockState {
            owner: owner.map(str::to_string),
            hold_count: u64::from(owner.is_some()),
            token: if owner.is_some() { 3 } else { 0 },
            ttl: owner.map(|_| Duration::from_millis(29_500)),
            fence: 3,
            rw: Some(RwState {
                readers: count,
                longest_lease: readers.first().map(|(_, ms)| Duration::from_millis(*ms)),
                reader_list: readers
                    .iter()
                    .enumerate()
                    .map(|(i, (o, ms))| ReaderEntry {
                        attempt: format!("a{i}"),
                        owner: (*o).to_string(),
                        lease_left: Duration::from_millis(*ms),
                    })
                    .collect(),
                waiting_writers: 1,
            }),
            ..LockState::empty("cat", PrimitiveKind::Rw, "ns:{cat}:rw")
        }
    }

    fn sem_state(sem: SemaphoreState) -> String {
        LockState {
            semaphore: Some(sem),
            ..LockState::empty("pool", PrimitiveKind::Semaphore, "ns:{pool}:sem")
        }
        .to_string()
    }

    #[test]
    fn a_semaphore_shows_its_permits_holders_and_waiters() {
        let never = sem_state(SemaphoreState {
            permits: None,
            available: 0,
            holds: 0,
            waiting: 0,
            holders: Vec::new(),
            waiters: Vec::new(),
        });
        assert_eq!(
            never,
            "semaphore pool  (key ns:{pool}:sem)\n  permits     never set (acquires wait until \
             they are set)\n  available   0\n  holders     0\n  waiting     0\n"
        );
        let holder = |owner: &str, n, ms| PermitHolder {
            attempt: format!("h{n}"),
            owner: owner.into(),
            permits: n,
            lease_left: Duration::from_millis(ms),
        };
        let waiter = |owner: &str, n| PermitWaiter {
            attempt: format!("w{n}"),
            owner: owner.into(),
            permits: n,
        };
        let busy = sem_state(SemaphoreState {
            permits: Some(4),
            available: 1,
            holds: 3,
            waiting: 2,
            holders: vec![holder("c:1", 2, 39_000), holder("c:2", 1, 12_500)],
            waiters: vec![waiter("c:3", 2), waiter("c:4", 1)],
        });
        assert_eq!(
            busy,
            "semaphore pool  (key ns:{pool}:sem)\n  permits     4\n  available   1\n  \
             holders     3\n      1. c:1  2 permits  lease left 39.0 s  attempt h2\n      \
             2. c:2  1 permit  lease left 12.5 s  attempt h1\n         … and 1 more\n  \
             waiting     2\n      1. c:3  wants 2 permits  attempt w2\n      \
             2. c:4  wants 1 permit  attempt w1\n"
        );
        assert!(!busy.contains("fence"), "{busy}");
        let reduced = sem_state(SemaphoreState {
            permits: Some(1),
            available: -2,
            holds: 1,
            waiting: 0,
            holders: vec![holder("c:1", 3, 1_000)],
            waiters: Vec::new(),
        });
        assert!(
            reduced.contains("  available   -2  (the total was reduced below what holders hold)\n"),
            "{reduced}"
        );
    }

    #[test]
    fn a_semaphore_cannot_be_force_unlocked_and_has_its_own_keys() {
        let err = PrimitiveKind::Semaphore
            .require_force_unlock()
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("force-unlock --kind semaphore is not supported: "),
            "{err}"
        );
        assert!(PrimitiveKind::Rw.require_force_unlock().is_ok());
        assert_eq!(PrimitiveKind::Semaphore.key_kind(), "sem");
        assert_eq!(PrimitiveKind::Fair.key_kind(), "fair");
    }

    #[test]
    fn a_read_write_lock_shows_its_writer_readers_and_waiting_writers() {
        let free = rw_state(None, &[], 0).to_string();
        assert_eq!(
            free,
            "read-write lock cat  (key ns:{cat}:rw)\n  state       free\n  writer      none\n  \
             readers     0\n  waiting     1 writer\n  fence       3  (fencing counter: last \
             token handed out)\n"
        );
        let writing = rw_state(Some("c:1"), &[], 0).to_string();
        for line in [
            "  state       held (writing)\n",
            "  writer      c:1\n",
            "  hold count  1\n",
            "  ttl         29.500 s\n",
            "  token       3\n",
            "  readers     0\n",
        ] {
            assert!(writing.contains(line), "{line:?} in\n{writing}");
        }
        let reading = rw_state(None, &[("c:2", 9_000), ("c:3", 4_000)], 3).to_string();
        for line in [
            "  state       held (reading)\n",
            "  writer      none\n",
            "  readers     3  (longest lease left 9.0 s)\n",
            "      1. c:2  attempt a0  lease left 9.0 s\n",
            "      2. c:3  attempt a1  lease left 4.0 s\n",
            "         … and 1 more\n",
        ] {
            assert!(reading.contains(line), "{line:?} in\n{reading}");
        }
        assert!(!reading.contains("hold count"), "{reading}");
        let both = rw_state(Some("c:1"), &[("c:1", 9_000)], 1).to_string();
        assert!(both.contains("held (writing and reading)"), "{both}");
    }

    #[test]
    fn the_public_futures_are_send() {
        fn send<T: Send>(_: T) {}
        let args = InspectArgs {
            name: "x".into(),
            kind: PrimitiveKind::Lock,
            redis: DEFAULT_REDIS.into(),
            topology: Topology::Standalone,
            sentinel_master: None,
            namespace: "ns".into(),
            watch: false,
        };
        send(inspect(&args));
        let force = ForceUnlockArgs {
            target: args.clone(),
            yes: false,
        };
        send(force_unlock(&force));
    }

    #[test]
    fn force_unlock_says_what_it_removed() {
        let unlocked = |kind, hold, read_holds| {
            Unlocked {
                name: "x".into(),
                kind,
                hold,
                read_holds,
            }
            .to_string()
        };
        assert_eq!(
            unlocked(PrimitiveKind::Lock, true, 0),
            "x: unlocked (the hold was deleted)"
        );
        assert_eq!(
            unlocked(PrimitiveKind::Rw, false, 2),
            "x: unlocked (removed writer: no, read holds: 2)"
        );
        assert_eq!(
            unlocked(PrimitiveKind::Rw, true, 0),
            "x: unlocked (removed writer: yes, read holds: 0)"
        );
        assert_eq!(
            unlocked(PrimitiveKind::Rw, false, 0),
            "x: was not locked; nothing deleted"
        );
    }
}
