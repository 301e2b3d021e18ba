//! How a Redis is deployed, as the command-line tools name it: the
//! `--topology` of a `--redis` URL list, splitting that list, and URL
//! redaction. Shared by `deadbolt inspect`/`force-unlock` (deadbolt-cli) and
//! deadbolt-bench, which both reach such deployments; it lives here because
//! both already depend on this crate and neither should depend on the other
//! (and deadbolt-core stays without clap).
//!
//! With the `cli` feature, [`Topology`] is a clap `ValueEnum`, and serde
//! (de)serialises it by its kebab-case name.

/// How the Redis that `--redis` names is deployed: `--topology` of
/// `deadbolt inspect`, `force-unlock` and `deadbolt-bench`.
///
/// # Examples
/// ```
/// use deadbolt_testkit::Topology;
/// assert_eq!(Topology::default(), Topology::Standalone);
/// assert_eq!(Topology::Cluster.name(), "cluster");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(
    feature = "cli",
    derive(clap::ValueEnum, serde::Serialize, serde::Deserialize)
)]
#[cfg_attr(feature = "cli", serde(rename_all = "kebab-case"))]
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
///     deadbolt_testkit::split_urls(" redis://a:1/, ,redis://b:2/"),
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

/// The URL with any password replaced by `***`.
///
/// # Examples
/// ```
/// assert_eq!(deadbolt_testkit::redact("redis://u:secret@h:6379/"), "redis://***@h:6379/");
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

    #[test]
    fn splits_url_lists() {
        assert_eq!(
            split_urls(" redis://a:1/, ,redis://b:2/"),
            ["redis://a:1/", "redis://b:2/"]
        );
    }
}
