//! How a Redis is deployed, as command-line tools name it: the
//! `--topology` of a `--redis` URL list ([`Topology`], parsed from its
//! name), splitting that list, and URL redaction. The `deadbolt` command
//! and deadbolt-bench both take them; core holds them so that neither
//! depends on the other or on the test kit.

/// How the Redis that `--redis` names is deployed: `--topology` of
/// `deadbolt inspect`, `force-unlock` and `deadbolt-bench`.
///
/// # Examples
/// ```
/// use deadbolt_core::deployment::Topology;
/// assert_eq!(Topology::default(), Topology::Standalone);
/// assert_eq!(Topology::Cluster.name(), "cluster");
/// assert_eq!("sentinel".parse::<Topology>(), Ok(Topology::Sentinel));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
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
    /// Every topology, in the order a help text lists them.
    pub const ALL: [Topology; 3] = [Topology::Standalone, Topology::Cluster, Topology::Sentinel];

    /// What the topology is, in one line (a command's help).
    pub fn about(self) -> &'static str {
        match self {
            Topology::Standalone => "One server (`Client::builder`); `--redis` is its URL",
            Topology::Cluster => {
                "A Redis Cluster (`Client::cluster`): keys spread over the masters' hash slots, sharded Pub/Sub; `--redis` lists seed nodes"
            }
            Topology::Sentinel => {
                "A master found through Redis Sentinel (`Client::sentinel`); `--redis` lists Sentinels, `--sentinel-master` names the master"
            }
        }
    }

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

impl std::fmt::Display for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Topology {
    type Err = String;

    /// A topology by its [`name`](Topology::name).
    fn from_str(s: &str) -> std::result::Result<Topology, String> {
        Topology::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| format!("no topology {s:?}: standalone, cluster or sentinel"))
    }
}

/// The URLs of a `--redis` that lists a cluster's seeds or Sentinels:
/// comma-separated, blanks around them and empty entries dropped.
///
/// # Examples
/// ```
/// assert_eq!(
///     deadbolt_core::deployment::split_urls(" redis://a:1/, ,redis://b:2/"),
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
/// assert_eq!(deadbolt_core::deployment::redact("redis://u:secret@h:6379/"), "redis://***@h:6379/");
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
