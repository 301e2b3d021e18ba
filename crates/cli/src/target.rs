//! Where a command connects: the `--topology` of a `--redis` URL list, the
//! [`Target`] that makes deadbolt clients for it, and URL redaction; shared
//! by `inspect`, `force-unlock` and deadbolt-bench.

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// How the Redis that `--redis` names is deployed: `--topology` of
/// `deadbolt inspect`, `force-unlock` and `deadbolt-bench`.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    ValueEnum,
    Serialize,
    Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Topology {
    /// One server (`Client::builder`); `--redis` is its URL.
    #[default]
    Standalone,
    /// A Redis Cluster (`Client::cluster`): keys spread over the masters'
    /// hash slots, sharded Pub/Sub; `--redis` lists seed nodes.
    Cluster,
    /// A master found through Redis Sentinel (`Client::sentinel`); `--redis`
    /// lists Sentinels, `--sentinel-master` names the master.
    Sentinel,
}

impl Topology {
    /// The name used on the command line and in the JSON report.
    pub fn name(self) -> &'static str {
        match self {
            Topology::Standalone => "standalone",
            Topology::Cluster => "cluster",
            Topology::Sentinel => "sentinel",
        }
    }

    /// Whose URLs `--redis` lists with this topology, for messages ("give
    /// the cluster's seed URLs").
    pub fn urls_of(self) -> &'static str {
        match self {
            Topology::Standalone => "server's",
            Topology::Cluster => "cluster's seed",
            Topology::Sentinel => "Sentinels'",
        }
    }
}

/// The URLs of a `--redis` that lists a cluster's seeds or Sentinels:
/// comma-separated, blanks around them and empty entries dropped.
///
/// # Examples
/// ```
/// assert_eq!(
///     deadbolt_cli::split_urls(" redis://a:1/, ,redis://b:2/"),
///     ["redis://a:1/", "redis://b:2/"]
/// );
/// ```
pub fn split_urls(redis: &str) -> Vec<String> {
    redis
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_string)
        .collect()
}

/// Where deadbolt clients connect: `deadbolt inspect`'s and
/// `force-unlock`'s, and deadbolt-bench's topology scenario's.
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
    /// A builder of deadbolt clients for this target (the bench's topology
    /// scenario's, and `deadbolt inspect`'s and `force-unlock`'s).
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

/// The URL with any password replaced by `***`.
///
/// # Examples
/// ```
/// assert_eq!(deadbolt_cli::redact("redis://u:secret@h:6379/"), "redis://***@h:6379/");
/// ```
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme + 3 => {
            format!("{}***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("redis://u:secret@h:6379/"), "redis://***@h:6379/");
        assert_eq!(redact("redis://127.0.0.1:6379/"), "redis://127.0.0.1:6379/");
    }
}
