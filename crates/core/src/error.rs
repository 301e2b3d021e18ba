//! The one error type of deadbolt.

use std::fmt;

/// The result type used across deadbolt.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong when talking to Redis through deadbolt.
///
/// The variants say what the caller may assume about the server: nothing was
/// written (`InvalidArgument`, `Unavailable`, `Shutdown`), or the outcome is not
/// known (`Indeterminate`). Losing a race is not an error: `try_*` methods
/// return `Ok(None)`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The arguments were refused, and nothing was written: by the client
    /// before anything was sent, or by a script that found them at odds
    /// with the primitive's state (reducing permits below zero).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The command was certainly not executed: the connection is known to be
    /// down, the server refused it before running it, or it could not be sent.
    /// Retrying is always safe. The message ends with the immediate cause
    /// ("connection refused", "LOADING ...").
    #[error("redis unavailable (the command was not run): {0}")]
    Unavailable(Cause),
    /// The command may or may not have run: it was handed to the connection and
    /// then timed out or the connection broke. For an acquire, any possible
    /// grant has already been handed to the background releaser.
    #[error("outcome unknown (the command may have run): {0}")]
    Indeterminate(Cause),
    /// Unlock or renewal of a hold that expired or was taken over.
    #[error("the hold is no longer held (expired or taken over)")]
    NotHeld,
    /// Work run under a hold (`guard.run(work)`) was dropped because the
    /// hold could no longer be counted on: `Lost` (its lease ran out, or
    /// the server said it is gone) or `Unknown` (the outcome of a renewal
    /// or release is not known). What the work had already sent may have
    /// landed: pass the fencing token to what you write.
    #[error("the hold was {state:?} while work ran under it; the work was dropped")]
    LeaseLost {
        /// The hold's state when the work was dropped.
        state: crate::LeaseState,
    },
    /// A key of another type is in the way; nothing was written (except by
    /// a caller's own guarded script, whose writes before the failing
    /// command stay).
    #[error("{}", wrong_type_message(.key))]
    WrongType {
        /// The key that is in the way; empty when Redis did not say which
        /// (a caller's guarded script over several keys).
        key: String,
    },
    /// A key holds a value deadbolt cannot use (a fencing counter that is not
    /// an integer below 2^53 − 1, with which tokens could repeat or go
    /// backwards); nothing was written. Someone else wrote that key: delete
    /// or repair it.
    #[error("key {key} holds an unusable value ({detail}); nothing was written")]
    BadValue {
        /// The key that holds the value.
        key: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The server refused to subscribe to a primitive's channel (for example
    /// an ACL user without permission for it: `NOPERM`). Waiting calls fail
    /// with this at once instead of missing every release; calls that need no
    /// wait (`try_lock`) still work. Grant the user `&<channel>` (see
    /// docs/safety.md).
    #[error("subscribing to channel {channel} was refused: {reason}")]
    SubscribeRefused {
        /// The channel.
        channel: String,
        /// The server's error text.
        reason: String,
    },
    /// A guarded write names a key outside the hash slot of the hold that
    /// guards it (one script cannot touch both on a Redis Cluster);
    /// refused before anything is sent, on a single server too. Make keys
    /// with `guarded().key(suffix)`, or put the lock's hash tag in them.
    #[error(
        "key {key} is not in the hash slot of the hold that guards the write; nothing was sent"
    )]
    CrossSlot {
        /// The key of the other slot.
        key: String,
    },
    /// A reader asked for the write lock while holding a read lock.
    #[error("a read holder cannot upgrade to the write lock")]
    UpgradeNotSupported,
    /// The client was shut down.
    #[error("the client was shut down")]
    Shutdown,
    /// Any other error reply from the server (for example `OOM` under
    /// `maxmemory`), passed through as the server gave it.
    #[error("redis answered with an error: {}", redis_text(.0))]
    Redis(redis::RedisError),
}

/// Why a command is [`Error::Unavailable`] or [`Error::Indeterminate`]:
/// the underlying Redis error when there was one, or a description. Those
/// variants print it after what the caller may assume; the Redis error
/// itself is [`Cause::redis_error`].
#[derive(Debug)]
pub struct Cause {
    message: String,
    source: Option<redis::RedisError>,
}

impl Cause {
    pub(crate) fn msg(message: impl Into<String>) -> Self {
        Cause {
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn redis(err: redis::RedisError) -> Self {
        Cause {
            message: redis_text(&err),
            source: Some(err),
        }
    }

    /// The Redis error behind this cause, if any.
    pub fn redis_error(&self) -> Option<&redis::RedisError> {
        self.source.as_ref()
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The message already carries the Redis error's text, so the chain stops
/// here (no line printed twice); [`Cause::redis_error`] gives the error itself.
impl std::error::Error for Cause {}

/// A redis-rs error as one short line: its text without repeats ("timed
/// out: timed out") and without redis-rs's debug tags ("- IoError").
fn redis_text(err: &redis::RedisError) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut push = |s: String| {
        let s = s.trim().to_string();
        if !s.is_empty() && !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    };
    push(strip_kind(&err.to_string()));
    let mut next = std::error::Error::source(err);
    while let Some(e) = next {
        push(e.to_string());
        next = e.source();
    }
    parts.join(": ")
}

/// `"desc - IoError: detail"` → `"desc: detail"` (redis-rs prints its
/// error kind's debug name in the middle).
fn strip_kind(s: &str) -> String {
    if let Some(i) = s.find(" - ") {
        let rest = &s[i + 3..];
        let end = rest.find(':').unwrap_or(rest.len());
        if end > 0 && rest[..end].chars().all(|c| c.is_ascii_alphanumeric()) {
            return format!("{}{}", &s[..i], &rest[end..]);
        }
    }
    s.to_string()
}

impl Error {
    /// This error on one line, for logs. Every variant's message already
    /// carries its immediate cause; this adds any further `source()` chain.
    pub fn report(&self) -> String {
        let mut out = self.to_string();
        let mut next = std::error::Error::source(self);
        while let Some(e) = next {
            out.push_str(": ");
            out.push_str(&e.to_string());
            next = e.source();
        }
        out
    }

    /// True when the hold the call needed is gone or no longer counted on:
    /// [`Error::NotHeld`] (an unlock, a guarded write or a renewal found it
    /// gone) or [`Error::LeaseLost`] (work under the hold was dropped).
    /// Both say the same to the caller: another may hold it now.
    pub fn is_lost(&self) -> bool {
        matches!(self, Error::NotHeld | Error::LeaseLost { .. })
    }

    /// True for [`Error::Indeterminate`]: the command may have run.
    pub fn is_indeterminate(&self) -> bool {
        matches!(self, Error::Indeterminate(_))
    }

    /// A short name of the error's kind, for metrics and logs:
    /// `invalid_argument`, `unavailable`, `indeterminate`, `not_held`,
    /// `lease_lost`, `wrong_type`, `bad_value`, `subscribe_refused`,
    /// `cross_slot`, `upgrade_not_supported`, `shutdown` or `redis`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::InvalidArgument(_) => "invalid_argument",
            Error::Unavailable(_) => "unavailable",
            Error::Indeterminate(_) => "indeterminate",
            Error::NotHeld => "not_held",
            Error::LeaseLost { .. } => "lease_lost",
            Error::WrongType { .. } => "wrong_type",
            Error::BadValue { .. } => "bad_value",
            Error::SubscribeRefused { .. } => "subscribe_refused",
            Error::CrossSlot { .. } => "cross_slot",
            Error::UpgradeNotSupported => "upgrade_not_supported",
            Error::Shutdown => "shutdown",
            Error::Redis(_) => "redis",
        }
    }

    /// True for [`Error::Unavailable`]: the command certainly did not run.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Unavailable(_))
    }

    /// True when retrying the same call may succeed later
    /// (`Unavailable` or `Indeterminate`).
    pub fn is_retryable(&self) -> bool {
        self.is_unavailable() || self.is_indeterminate()
    }

    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Error::Unavailable(Cause::msg(message))
    }

    /// Classify an error returned by redis-rs for a command that was handed to
    /// the connection (so it may have reached the server).
    pub(crate) fn from_sent(err: redis::RedisError) -> Self {
        if let Some(code) = err.code() {
            match code {
                "WRONGTYPE" => {
                    let key = err.detail().unwrap_or("").trim().to_string();
                    return Error::WrongType { key };
                }
                // A script's `INVALID <why>`: the arguments do not fit the
                // primitive's state (reducing permits below zero); refused
                // with nothing written.
                "INVALID" => {
                    return Error::InvalidArgument(err.detail().unwrap_or("").trim().to_string())
                }
                // A script's `UPGRADE <key>`: a read holder asked to write.
                "UPGRADE" => return Error::UpgradeNotSupported,
                // A script's `BADVALUE <key> <what>`.
                "BADVALUE" => {
                    let detail = err.detail().unwrap_or("").trim();
                    let (key, what) = detail.split_once(' ').unwrap_or((detail, ""));
                    return Error::BadValue {
                        key: key.to_string(),
                        detail: what.to_string(),
                    };
                }
                // The server refused the command before running it (on a
                // cluster: redirected it elsewhere, or asked to retry while
                // its slot migrates).
                "BUSY" | "LOADING" | "READONLY" | "MASTERDOWN" | "NOREPLICAS" | "TRYAGAIN"
                | "CLUSTERDOWN" | "NOSCRIPT" | "ASK" | "MOVED" => {
                    return Error::Unavailable(Cause::redis(err))
                }
                _ => return Error::Redis(err),
            }
        }
        if err.is_connection_refusal() {
            return Error::Unavailable(Cause::redis(err));
        }
        if err.is_timeout() || err.is_io_error() || err.is_connection_dropped() {
            return Error::Indeterminate(Cause::redis(err));
        }
        match err.kind() {
            redis::ErrorKind::Server(_) | redis::ErrorKind::Extension => Error::Redis(err),
            _ => Error::Indeterminate(Cause::redis(err)),
        }
    }
}

fn wrong_type_message(key: &str) -> String {
    if key.is_empty() {
        "a key holds a value of another type".into()
    } else {
        format!("key {key} holds a value of another type; nothing was written")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_joins_the_chain_once() {
        let e = Error::unavailable("command connection is down");
        assert_eq!(
            e.report(),
            "redis unavailable (the command was not run): command connection is down"
        );
        assert_eq!(e.to_string(), e.report());
    }

    #[test]
    fn redis_text_is_short() {
        assert_eq!(
            strip_kind("Connection refused - IoError: os error 111"),
            "Connection refused: os error 111"
        );
        assert_eq!(strip_kind("timed out - IoError"), "timed out");
        assert_eq!(strip_kind("a - b c"), "a - b c");
    }

    #[test]
    fn predicates() {
        assert!(Error::unavailable("x").is_unavailable());
        assert!(Error::unavailable("x").is_retryable());
        assert!(!Error::NotHeld.is_retryable());
    }
}
