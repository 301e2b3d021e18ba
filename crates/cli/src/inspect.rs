//! `deadbolt inspect` and `deadbolt force-unlock`.

use std::fmt;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{Args, ValueEnum};
use deadbolt_core::scripts::ScriptCall;
use deadbolt_core::Client;
use deadbolt_fair::scripts::FAIR_QUEUE;

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

    /// What a person calls it: "lock", "fair lock".
    fn title(self) -> &'static str {
        match self {
            PrimitiveKind::Lock => "lock",
            PrimitiveKind::Fair => "fair lock",
            PrimitiveKind::Rw => "read-write lock",
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
    /// Which kind of lock it is.
    pub kind: PrimitiveKind,
    /// The hold hash, `<ns>:{<name>}:lock` (or `:fair`).
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
    /// Waiters queued (fair lock; always 0 for a `Lock`, which has no queue
    /// and does not print this line).
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
    /// `None` when its client is past its deadline or has no liveness record
    /// (it will be skipped).
    pub alive_for: Option<Duration>,
    /// How long ago its client's liveness deadline passed; `None` when it is
    /// alive or has no liveness record.
    pub expired_ago: Option<Duration>,
}

impl QueueEntry {
    /// Build an entry from the reply of `fair_queue.lua`: `lease_ms` is -1
    /// when not recorded, `liveness_ms` is the time left before the owner's
    /// client counts as dead (negative: past it; -1 also stands for "no
    /// liveness record", which is skipped the same way).
    fn from_reply(attempt: String, owner: String, lease_ms: i64, liveness_ms: i64) -> QueueEntry {
        let ms = |v: i64| u64::try_from(v).ok().map(Duration::from_millis);
        QueueEntry {
            attempt,
            owner,
            lease: ms(lease_ms),
            alive_for: ms(liveness_ms),
            expired_ago: if liveness_ms < -1 {
                ms(liveness_ms.saturating_neg())
            } else {
                None
            },
        }
    }

    /// "liveness left 4.8 s", "expired 1.2 s ago (will be skipped)".
    fn liveness(&self) -> String {
        match (self.alive_for, self.expired_ago) {
            (Some(left), _) => format!("liveness left {:.1} s", left.as_secs_f64()),
            (None, Some(ago)) => {
                format!("expired {:.1} s ago (will be skipped)", ago.as_secs_f64())
            }
            (None, None) => "no liveness record (will be skipped)".to_string(),
        }
    }
}

impl fmt::Display for LockState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} {}  (key {})", self.kind.title(), self.name, self.key)?;
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
                q.liveness()
            )?;
        }
        let listed = u64::try_from(self.queue.len()).unwrap_or(u64::MAX);
        if self.queued > listed {
            writeln!(f, "         … and {} more", self.queued - listed)?;
        }
        Ok(())
    }
}

/// How long the CLI's own `TYPE` check may take to connect and to answer.
const TYPE_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Refuse a lock whose hold key is of another type than a hold (a hash).
///
/// Asks Redis for the `TYPE` of `key` on a connection of its own: `none`
/// (free) and `hash` (a hold) pass; anything else is refused with the type
/// found, before anything is written. This does not rely on the library's
/// scripts refusing a wrong type.
async fn check_key_type(url: &str, key: &str, kind: PrimitiveKind) -> anyhow::Result<()> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(TYPE_CHECK_TIMEOUT))
        .set_response_timeout(Some(TYPE_CHECK_TIMEOUT));
    let mut conn = redis::Client::open(url)
        .with_context(|| format!("bad Redis URL {}", crate::bench::redact(url)))?
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .with_context(|| format!("connecting to {}", crate::bench::redact(url)))?;
    let found: String = redis::cmd("TYPE")
        .arg(key)
        .query_async(&mut conn)
        .await
        .with_context(|| format!("reading the type of {key}"))?;
    match found.as_str() {
        "none" | "hash" => Ok(()),
        other => bail!("refused: {key} holds a {other}, not a {}", kind.title()),
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
/// A kind other than `lock` or `fair` ("not yet supported"), an unreachable
/// Redis, a key of another type at the lock's key ("refused: KEY holds a
/// string, not a lock").
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn inspect(args: &InspectArgs) -> anyhow::Result<LockState> {
    args.kind.require_exclusive("inspect")?;
    let client = connect(&args.redis, &args.namespace).await?;
    let result = async {
        let key = client.keys(args.kind.name(), &args.name)?;
        check_key_type(&args.redis, key.main(), args.kind).await?;
        read_lock(&client, args.kind, &args.name).await
    }
    .await;
    client.shutdown().await;
    result
}

async fn read_lock(client: &Client, kind: PrimitiveKind, name: &str) -> anyhow::Result<LockState> {
    let keys = client.keys(kind.name(), name)?;
    let info = match kind {
        PrimitiveKind::Fair => deadbolt_fair::FairLock::new(client, name).inspect().await,
        _ => deadbolt_lock::Lock::new(client, name).inspect().await,
    }
    .with_context(|| format!("reading {}", keys.main()))?;
    let queue = if kind == PrimitiveKind::Fair && info.queued > 0 {
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
            .map(|(attempt, owner, lease, alive)| {
                QueueEntry::from_reply(attempt, owner, lease, alive)
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(LockState {
        name: name.to_string(),
        kind,
        key: keys.main().to_string(),
        token: info.token.unwrap_or(0),
        hold_count: info.hold_count,
        ttl: info.holder.as_ref().and(info.ttl),
        owner: info.holder,
        // None: a counter the acquire would refuse (BADVALUE); shown as 0.
        fence: info.fence.unwrap_or(0),
        queued: info.queued,
        queue,
    })
}

/// Delete a lock whoever holds it and wake one waiter per client. Returns
/// whether a hold was deleted.
///
/// # Errors
/// Without `yes` (nothing is sent), a kind other than `lock` or `fair`, an
/// unreachable Redis, a key of another type at the lock's key: that is
/// refused with the type found ("refused: KEY holds a string, not a lock")
/// and nothing is deleted.
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
    let result = async {
        let key = client.keys(args.kind.name(), &args.name)?;
        check_key_type(&args.redis, key.main(), args.kind).await?;
        match args.kind {
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
        .with_context(|| format!("force-unlocking {}", args.name))
    }
    .await;
    client.shutdown().await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(liveness_ms: i64) -> QueueEntry {
        QueueEntry::from_reply("a1".into(), "c:1".into(), 30_000, liveness_ms)
    }

    #[test]
    fn liveness_says_which_way() {
        assert_eq!(entry(4_800).liveness(), "liveness left 4.8 s");
        assert_eq!(entry(0).liveness(), "liveness left 0.0 s");
        assert_eq!(
            entry(-1_200).liveness(),
            "expired 1.2 s ago (will be skipped)"
        );
        assert_eq!(entry(-1).liveness(), "no liveness record (will be skipped)");
        assert_eq!(entry(-1).lease, Some(Duration::from_secs(30)));
    }

    #[test]
    fn header_names_the_kind_and_only_a_fair_lock_shows_a_queue() {
        let state = |kind, queue: Vec<QueueEntry>| LockState {
            name: "x".into(),
            kind,
            key: "ns:{x}:k".into(),
            owner: None,
            hold_count: 0,
            token: 0,
            ttl: None,
            fence: 7,
            queued: u64::try_from(queue.len()).unwrap(),
            queue,
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
}
