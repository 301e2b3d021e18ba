//! Where a command connects: the [`Target`] that makes deadbolt clients for
//! a `--redis` URL list of a `--topology`, used by `inspect` and
//! `force-unlock`. [`Topology`], [`split_urls`] and [`redact`] come from
//! deadbolt-testkit, shared there with deadbolt-bench (which does not
//! depend on this crate); they are re-exported here unchanged.

pub use deadbolt_testkit::{redact, split_urls, Topology};

/// Where deadbolt clients connect: `deadbolt inspect`'s and
/// `force-unlock`'s.
#[derive(Debug, Clone)]
pub enum Target {
    /// One server (`Client::builder`).
    Standalone(String),
    /// A Redis Cluster through these seed nodes (`Client::cluster`).
    Cluster(Vec<String>),
    /// The master these Sentinels know by `master` (`Client::sentinel`).
    Sentinel {
        /// The Sentinels' URLs.
        sentinels: Vec<String>,
        /// The name the Sentinels know the master by.
        master: String,
    },
}

impl Target {
    /// A builder of deadbolt clients for this target (`deadbolt inspect`'s
    /// and `force-unlock`'s).
    pub fn builder(&self) -> deadbolt_core::ClientBuilder {
        match self {
            Target::Standalone(url) => deadbolt_core::Client::builder(url),
            Target::Cluster(seeds) => deadbolt_core::Client::cluster(seeds),
            Target::Sentinel { sentinels, master } => {
                deadbolt_core::Client::sentinel(sentinels, master)
            }
        }
    }
}
