//! `deadbolt inspect` and `deadbolt force-unlock`.

use std::fmt;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{Args, ValueEnum};
use deadbolt_core::scripts::{ScriptCall, FAIR_QUEUE, LOCK_INSPECT};
use deadbolt_core::Client;

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
    /// The read-write lock (not yet supported by these commands).
    Rw,
    /// The leased semaphore (not yet supported by these commands).
    Semaphore,
}

impl PrimitiveKind {
    fn name(self) -> &'static str {
        match self {
            PrimitiveKind::Lock => "lock",
            PrimitiveKind::Fair => "fair",
            PrimitiveKind::Rw => "rw",
            PrimitiveKind::Semaphore => "semaphore",
        }
    }

    fn require_exclusive(self, what: &str) -> anyhow::Result<()> {
        if !matches!(self, PrimitiveKind::Lock | PrimitiveKind::Fair) {
            bail!(
                "{what} --kind {} is not yet supported (only --kind lock or fair)",
                self.name()
            );
        }
        Ok(())
    }
}

/// Arguments of `deadbolt inspect`; also the target of `deadbolt force-unlock`.
#[derive(Debug, Clone, Args)]
pub struct InspectArgs {
    /// The lock's name (as passed to `client.lock(name)`).
    pub name: String,
    /// Kind of primitive.
    #[arg(long, value_enum, default_value = "lock")]
    pub kind: PrimitiveKind,
    /// Redis URL.
    #[arg(long, value_name = "URL", default_value = DEFAULT_REDIS)]
    pub redis: String,
    /// Namespace (key prefix) the locks were made with.
    #[arg(long, value_name = "NS", default_value = "deadbolt")]
    pub namespace: String,
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
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockState {
    /// The lock's name.
    pub name: String,
    /// The hold hash, `<ns>:{<name>}:lock`.
    pub key: String,
    /// Owner id `<client uuid>:<handle id>` of the holder; `None` when free.
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
    /// Waiters queued (fair lock; 0 for a `Lock`).
    pub queued: u64,
    /// The head of the fair lock's queue, in order (at most
    /// [`QUEUE_LISTED`] entries; empty for a `Lock`).
    pub queue: Vec<QueueEntry>,
}

/// How many queue entries `deadbolt inspect` lists.
pub const QUEUE_LISTED: usize = 20;

/// One waiter in a fair lock's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueEntry {
    /// The waiting acquire's attempt id.
    pub attempt: String,
    /// Owner id `<client uuid>:<handle id>` of the waiter.
    pub owner: String,
    /// The lease it asked for; `None` when not recorded.
    pub lease: Option<Duration>,
    /// How long its client counts as alive without another heartbeat;
    /// `None` when its client is past its deadline (it will be skipped).
    pub alive_for: Option<Duration>,
}

impl fmt::Display for LockState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "lock {}  (key {})", self.name, self.key)?;
        match &self.owner {
            None => writeln!(f, "  state       free")?,
            Some(owner) => {
                writeln!(f, "  state       held")?;
                writeln!(f, "  owner       {owner}")?;
                writeln!(f, "  hold count  {}", self.hold_count)?;
                match self.ttl {
                    Some(ttl) => writeln!(f, "  ttl         {:.3} s", ttl.as_secs_f64())?,
                    None => writeln!(f, "  ttl         none (the key never expires!)")?,
                }
                writeln!(f, "  token       {}", self.token)?;
            }
        }
        writeln!(
            f,
            "  fence       {}  (fencing counter: last token handed out)",
            self.fence
        )?;
        writeln!(f, "  queued      {}", self.queued)?;
        for (i, q) in self.queue.iter().enumerate() {
            let alive = q
                .alive_for
                .map_or("dead (will be skipped)".to_string(), |d| {
                    format!("alive {:.1} s", d.as_secs_f64())
                });
            writeln!(
                f,
                "    {:>3}. {}  attempt {}  {alive}",
                i + 1,
                q.owner,
                q.attempt
            )?;
        }
        Ok(())
    }
}

async fn connect(url: &str, namespace: &str) -> anyhow::Result<Client> {
    Client::builder(url)
        .namespace(namespace)
        .build()
        .await
        .with_context(|| format!("connecting to {}", crate::bench::redact(url)))
}

/// Read the state of a lock or fair lock.
///
/// # Errors
/// A kind other than `lock` or `fair` ("not yet supported"), an unreachable Redis, a
/// key of another type at the lock's key.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn inspect(args: &InspectArgs) -> anyhow::Result<LockState> {
    args.kind.require_exclusive("inspect")?;
    let client = connect(&args.redis, &args.namespace).await?;
    let result = read_lock(&client, args.kind, &args.name).await;
    client.shutdown().await;
    result
}

async fn read_lock(client: &Client, kind: PrimitiveKind, name: &str) -> anyhow::Result<LockState> {
    let keys = client.keys(kind.name(), name)?;
    let call = ScriptCall::new(
        &LOCK_INSPECT,
        vec![keys.main().to_string(), keys.sub("fence"), keys.sub("q")],
        vec![],
    );
    let (owner, hold_count, token, pttl, fence, queued) = client
        .run::<(String, u64, u64, i64, u64, u64)>(&call)
        .await
        .with_context(|| format!("reading {}", keys.main()))?;
    let held = pttl != -2 && !owner.is_empty();
    let queue = if kind == PrimitiveKind::Fair && queued > 0 {
        let call = ScriptCall::new(
            &FAIR_QUEUE,
            deadbolt_fair::fair_keys(&keys),
            vec![QUEUE_LISTED.to_string()],
        );
        client
            .run::<Vec<(String, String, i64, i64)>>(&call)
            .await
            .with_context(|| format!("reading the queue of {}", keys.main()))?
            .into_iter()
            .map(|(attempt, owner, lease, alive)| QueueEntry {
                attempt,
                owner,
                lease: u64::try_from(lease).ok().map(Duration::from_millis),
                alive_for: u64::try_from(alive).ok().map(Duration::from_millis),
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(LockState {
        name: name.to_string(),
        key: keys.main().to_string(),
        owner: held.then_some(owner),
        hold_count: if held { hold_count } else { 0 },
        token: if held { token } else { 0 },
        ttl: u64::try_from(pttl).ok().map(Duration::from_millis),
        fence,
        queued,
        queue,
    })
}

/// Delete a lock whoever holds it and wake one waiter per client. Returns
/// whether a hold was deleted.
///
/// # Errors
/// Without `yes` (nothing is sent), a kind other than `lock`, an unreachable
/// Redis.
///
/// # Cancel safety
/// If dropped, the delete may or may not have happened; running it again is
/// harmless.
pub async fn force_unlock(force: &ForceUnlockArgs) -> anyhow::Result<bool> {
    let args = &force.target;
    if !force.yes {
        bail!(
            "refusing to force-unlock {:?} without --yes: its holder would lose the lock \
             while it may still be working under it",
            args.name
        );
    }
    args.kind.require_exclusive("force-unlock")?;
    let client = connect(&args.redis, &args.namespace).await?;
    let result = match args.kind {
        PrimitiveKind::Fair => {
            deadbolt_fair::FairLock::new(&client, &args.name)
                .force_unlock()
                .await
        }
        _ => {
            deadbolt_lock::Lock::new(&client, &args.name)
                .force_unlock()
                .await
        }
    }
    .with_context(|| format!("force-unlocking {}", args.name));
    client.shutdown().await;
    result
}
