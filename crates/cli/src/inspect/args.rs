//! What `deadbolt inspect` and `deadbolt force-unlock` are asked: the
//! kind of primitive, the name, and where Redis is.

use anyhow::bail;
use clap::{Args, ValueEnum};
use deadbolt_semaphore::SEMAPHORE_KIND;

use super::DEFAULT_REDIS;
use crate::target::{redact, split_urls, topology_parser, Target, Topology};

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
    pub(super) fn name(self) -> &'static str {
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
    pub(super) fn key_kind(self) -> &'static str {
        match self {
            PrimitiveKind::Semaphore => SEMAPHORE_KIND,
            PrimitiveKind::Election => deadbolt_election::KIND,
            other => other.name(),
        }
    }

    /// What a person calls it: "lock", "fair lock".
    pub(super) fn title(self) -> &'static str {
        match self {
            PrimitiveKind::Lock => "lock",
            PrimitiveKind::Fair => "fair lock",
            PrimitiveKind::Rw => "read-write lock",
            PrimitiveKind::Semaphore => "semaphore",
            PrimitiveKind::Election => "election",
        }
    }

    /// Refuse `force-unlock` of a kind it cannot undo.
    pub(super) fn require_force_unlock(self) -> anyhow::Result<()> {
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
    pub(super) fn target(&self) -> anyhow::Result<Target> {
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
pub(super) fn describe(target: &Target) -> String {
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
