//! Client settings and their defaults.

use std::time::Duration;

use crate::error::{Error, Result};

/// Settings shared by every primitive made from one [`Client`](crate::Client).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Prefix of every key and channel (default `deadbolt`). May not contain braces.
    pub namespace: String,
    /// Lease of watchdog-renewed holds; renewed every third of it (default 30 s).
    pub watchdog_timeout: Duration,
    /// Bound on one command's round trip; past it the outcome is
    /// `Indeterminate` (default 1 s).
    pub command_timeout: Duration,
    /// How long a fair-lock waiter that stopped heart-beating keeps its place,
    /// measured on the server clock (default 5 s; 30 ms to `MAX_LEASE_MS / 3`).
    pub waiter_timeout: Duration,
    /// Bound on the background releaser's retries of one release after a fault
    /// (default: the watchdog timeout, after which the lease has run out anyway).
    pub release_timeout: Option<Duration>,
    /// How many times in a row an unlock may hand a lock straight to a
    /// waiter of the same client while waiters of other clients wait, before
    /// it releases to them (default 8; 0 turns local hand-off off). Only
    /// primitives that give a hand-off script
    /// ([`AcquireBuilder::pass`](crate::AcquireBuilder::pass)) hand off locally;
    /// see `docs/architecture.md`.
    pub local_handoffs: u32,
    /// Replica acknowledgement of every grant: after each acquire that
    /// succeeds, `WAIT n timeout` on the same connection; fewer than `n`
    /// replicas in time and the acquire answers `Indeterminate` (its grant
    /// handed to the releaser). Off (`None`) by default, and then free. See
    /// [`ClientBuilder::sync_replicas`](crate::ClientBuilder::sync_replicas).
    pub sync_replicas: Option<(u32, Duration)>,
    /// The name this client's holds, queue entries, readers and permits
    /// carry (in their owner ids), and its connections' `CLIENT SETNAME`:
    /// default `<hostname>:<pid>`. 1 to 64 bytes, no control characters.
    /// See [`ClientBuilder::client_name`](crate::ClientBuilder::client_name).
    pub client_name: String,
}

/// The default client name: `<hostname>:<pid>` (the hostname from the
/// kernel, else `$HOSTNAME`, else `localhost`).
pub fn default_client_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string());
    format!("{host}:{}", std::process::id())
}

/// The longest client name accepted, in bytes.
pub const MAX_CLIENT_NAME: usize = 64;

/// `name` as it goes into owner ids and `CLIENT SETNAME`: ASCII letters,
/// digits, `.`, `_` and `-` as they are, every other byte as `%XX`. The
/// result has no `:`, `@`, space or brace, so owner ids keep their shape
/// (`<encoded name>@<random id>:<handle>`) and Redis takes it as a connection
/// name.
pub fn encode_client_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The client name carried by an owner id (`<encoded name>@<random id>:<handle>`)
/// or a client id (`<encoded name>@<random id>`), decoded; `None` for an id
/// without one (of a deadbolt that had no names).
///
/// # Examples
/// ```
/// use deadbolt_core::holder_name;
/// assert_eq!(holder_name("web-1%3A42@0f3a9c:7").as_deref(), Some("web-1:42"));
/// assert_eq!(holder_name("0f3a9c:7"), None);
/// ```
pub fn holder_name(owner: &str) -> Option<String> {
    let (enc, _) = owner.split_once('@')?;
    let b = enc.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl Default for Config {
    fn default() -> Self {
        Config {
            namespace: "deadbolt".to_string(),
            watchdog_timeout: Duration::from_secs(30),
            command_timeout: Duration::from_secs(1),
            waiter_timeout: Duration::from_secs(5),
            release_timeout: None,
            local_handoffs: 8,
            sync_replicas: None,
            client_name: default_client_name(),
        }
    }
}

/// The longest span core adds to an instant: about 30 years. Waits, bounds
/// and hints beyond it (`Duration::MAX` included) are cut to it rather than
/// overflow an `Instant` (which panics).
pub(crate) const FAR: Duration = Duration::from_secs(30 * 365 * 86_400);

/// `at + d`, with `d` cut to [`FAR`]: never panics.
pub(crate) fn later(at: tokio::time::Instant, d: Duration) -> tokio::time::Instant {
    at + d.min(FAR)
}

/// `now + d`, with `d` cut to [`FAR`].
pub(crate) fn after(d: Duration) -> tokio::time::Instant {
    later(tokio::time::Instant::now(), d)
}

/// The largest lease deadbolt accepts, in milliseconds: 2^53 − 1, the largest
/// integer Lua numbers carry exactly (Redis itself would take up to ~2^63 ms).
pub const MAX_LEASE_MS: u64 = (1 << 53) - 1;

impl Config {
    /// The claim lease, in ms, of a grant that a release makes to a waiter
    /// registered by a client with this configuration, for primitives
    /// whose waiters keep no heartbeat: twice the command timeout (2 s by
    /// default), long enough for the grant's message to arrive and the
    /// waiter to extend the hold to its lease, short enough that a client
    /// that died while registered holds the primitive up for no longer
    /// (the hold is the claim's, and runs out with it).
    pub fn claim_ms(&self) -> u64 {
        u64::try_from(self.command_timeout.saturating_mul(2).as_millis())
            .unwrap_or(u64::MAX)
            .clamp(1, MAX_LEASE_MS)
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.namespace.is_empty() {
            return Err(Error::InvalidArgument("namespace is empty".into()));
        }
        if self.namespace.contains('{') || self.namespace.contains('}') {
            return Err(Error::InvalidArgument(
                "namespace may not contain braces (they would break the hash tag)".into(),
            ));
        }
        lease_ms(self.watchdog_timeout).map_err(|_| {
            Error::InvalidArgument("watchdog_timeout must be between 1 ms and 2^53-1 ms".into())
        })?;
        if self.watchdog_timeout < Duration::from_millis(30) {
            return Err(Error::InvalidArgument(
                "watchdog_timeout must be at least 30 ms".into(),
            ));
        }
        if self.command_timeout.is_zero() {
            return Err(Error::InvalidArgument(
                "command_timeout must not be zero".into(),
            ));
        }
        if let Some((n, t)) = self.sync_replicas {
            if n == 0 || t.is_zero() || t >= self.command_timeout {
                return Err(Error::InvalidArgument(
                    "sync_replicas needs at least one replica and a timeout above zero \
                     and under command_timeout"
                        .into(),
                ));
            }
        }
        // The queues' keys live three waiter timeouts: each TTL a script
        // sets stays within the largest lease Lua carries exactly.
        if self.waiter_timeout < Duration::from_millis(30)
            || self.waiter_timeout > Duration::from_millis(MAX_LEASE_MS / 3)
        {
            return Err(Error::InvalidArgument(format!(
                "waiter_timeout must be between 30 ms and {} ms",
                MAX_LEASE_MS / 3
            )));
        }
        if self.client_name.is_empty()
            || self.client_name.len() > MAX_CLIENT_NAME
            || self.client_name.chars().any(char::is_control)
        {
            return Err(Error::InvalidArgument(format!(
                "client_name must be 1 to {MAX_CLIENT_NAME} bytes without control characters"
            )));
        }
        Ok(())
    }
}

/// Check a lease and turn it into whole milliseconds.
///
/// # Errors
/// [`Error::InvalidArgument`] for a lease under one millisecond or over
/// [`MAX_LEASE_MS`].
pub fn lease_ms(lease: Duration) -> Result<u64> {
    if lease < Duration::from_millis(1) {
        return Err(Error::InvalidArgument(format!(
            "lease {lease:?} is under one millisecond"
        )));
    }
    let ms = lease.as_millis();
    if ms > u128::from(MAX_LEASE_MS) {
        return Err(Error::InvalidArgument(format!(
            "lease {lease:?} is beyond the largest accepted ({MAX_LEASE_MS} ms)"
        )));
    }
    Ok(u64::try_from(ms).unwrap_or(MAX_LEASE_MS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_bounds() {
        assert!(lease_ms(Duration::ZERO).is_err());
        assert!(lease_ms(Duration::from_micros(999)).is_err());
        assert_eq!(lease_ms(Duration::from_micros(1500)).unwrap(), 1);
        assert_eq!(lease_ms(Duration::from_secs(2)).unwrap(), 2000);
        assert!(lease_ms(Duration::MAX).is_err());
        assert!(lease_ms(Duration::from_millis(MAX_LEASE_MS)).is_ok());
        assert!(lease_ms(Duration::from_millis(MAX_LEASE_MS + 1)).is_err());
    }

    #[test]
    fn waiter_timeout_bounds() {
        let with = |t: Duration| {
            Config {
                waiter_timeout: t,
                ..Config::default()
            }
            .validate()
        };
        assert!(with(Duration::from_millis(29)).is_err());
        assert!(with(Duration::from_millis(30)).is_ok());
        assert!(with(Duration::from_millis(MAX_LEASE_MS / 3)).is_ok());
        assert!(with(Duration::from_millis(MAX_LEASE_MS / 3 + 1)).is_err());
        assert!(with(Duration::MAX).is_err());
    }

    #[test]
    fn namespace_rules() {
        let mut c = Config::default();
        assert!(c.validate().is_ok());
        c.namespace = "a{b".into();
        assert!(c.validate().is_err());
        c.namespace = String::new();
        assert!(c.validate().is_err());
    }
}
