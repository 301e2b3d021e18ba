//! Reading a primitive's state from Redis (after checking the key's type),
//! and the force-unlock.

use std::future::Future;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use clap::ValueEnum as _;
use deadbolt_core::Client;
use deadbolt_rwlock::RwLock;
use deadbolt_semaphore::Semaphore;

use super::args::{describe, ForceUnlockArgs, InspectArgs, PrimitiveKind};
use super::state::{
    FairState, Hold, Inspection, PermitHolder, PermitWaiter, PrimitiveState, ReaderEntry, RwState,
    SemaphoreState, Unlocked, QUEUE_LISTED,
};
use crate::target::{redact, Target};

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

/// Read the state of a lock, fair lock, read-write lock, semaphore or
/// election.
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
pub async fn inspect(args: &InspectArgs) -> anyhow::Result<Inspection> {
    on_checked_key(args, async |client| {
        let name = args.name.as_str();
        let key = client.keys(args.kind.key_kind(), name)?.main().to_string();
        let state = match args.kind {
            PrimitiveKind::Lock => read_lock(client, name, &key).await,
            PrimitiveKind::Fair => read_fair(client, name, &key).await,
            PrimitiveKind::Rw => read_rw(client, name, &key).await,
            PrimitiveKind::Semaphore => read_semaphore(client, name, &key).await,
            PrimitiveKind::Election => read_election(client, name, &key).await,
        }?;
        Ok(Inspection {
            name: name.to_string(),
            key,
            state,
        })
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

/// What `read` (the library's inspect of the primitive at `key`) found; a
/// failure is "reading KEY".
async fn read_at<T, E>(key: &str, read: impl Future<Output = Result<T, E>>) -> anyhow::Result<T>
where
    E: std::error::Error + Send + Sync + 'static,
{
    read.await.with_context(|| format!("reading {key}"))
}

async fn read_lock(client: &Client, name: &str, key: &str) -> anyhow::Result<PrimitiveState> {
    let info = read_at(key, deadbolt_lock::Lock::new(client, name).inspect()).await?;
    Ok(PrimitiveState::Lock(Hold::read(
        info.holder,
        info.hold_count,
        info.token,
        info.ttl,
        info.fence,
    )))
}

/// A fair lock: its hold, and the head of its queue when anyone waits.
async fn read_fair(client: &Client, name: &str, key: &str) -> anyhow::Result<PrimitiveState> {
    let fair = deadbolt_fair::FairLock::new(client, name);
    let info = read_at(key, fair.inspect()).await?;
    let queue = if info.queued > 0 {
        fair.queue(QUEUE_LISTED)
            .await
            .with_context(|| format!("reading the queue of {key}"))?
    } else {
        Vec::new()
    };
    Ok(PrimitiveState::FairLock(FairState {
        hold: Hold::read(
            info.holder,
            info.hold_count,
            info.token,
            info.ttl,
            info.fence,
        ),
        queued: info.queued,
        queue,
    }))
}

/// An election: its leader, if any.
async fn read_election(client: &Client, name: &str, key: &str) -> anyhow::Result<PrimitiveState> {
    let election = deadbolt_election::Election::new(client, name);
    let leader = read_at(key, election.leader()).await?;
    Ok(PrimitiveState::Election(leader))
}

/// A read-write lock: the writer's hold, the readers, the waiting writers.
async fn read_rw(client: &Client, name: &str, key: &str) -> anyhow::Result<PrimitiveState> {
    let info = read_at(key, RwLock::new(client, name).inspect()).await?;
    Ok(PrimitiveState::RwLock(RwState {
        writer: Hold::read(
            info.writer,
            info.write_holds,
            info.token,
            info.write_ttl,
            info.fence,
        ),
        readers: info.readers,
        longest_lease: info.read_ttl,
        reader_list: info
            .reader_list
            .into_iter()
            .map(ReaderEntry::from)
            .collect(),
        waiting_writers: info.waiting_writers,
    }))
}

async fn read_semaphore(client: &Client, name: &str, key: &str) -> anyhow::Result<PrimitiveState> {
    let info = read_at(key, Semaphore::new(client, name).inspect()).await?;
    Ok(PrimitiveState::Semaphore(SemaphoreState {
        permits: info.permits,
        available: info.available,
        holds: info.holds,
        waiting: info.waiting,
        holders: info.holders.into_iter().map(PermitHolder::from).collect(),
        waiters: info.waiters.into_iter().map(PermitWaiter::from).collect(),
    }))
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
