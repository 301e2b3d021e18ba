//! Where a command connects: the [`Target`] that makes deadbolt clients for
//! a `--redis` URL list of a `--topology`, used by `inspect` and
//! `force-unlock`. [`Topology`], [`split_urls`] and [`redact`] are
//! deadbolt-core's (`deadbolt_core::deployment`), re-exported here.

pub use deadbolt_core::deployment::{redact, split_urls, Topology};

/// `--topology`'s parser: a [`Topology`] by its name, each name listed in
/// the help with what it is.
pub fn topology_parser() -> impl clap::builder::TypedValueParser<Value = Topology> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser as _};
    PossibleValuesParser::new(Topology::ALL.map(|t| PossibleValue::new(t.name()).help(t.about())))
        .map(|name| name.parse().unwrap_or_default())
}

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
