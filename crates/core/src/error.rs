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
    /// The arguments were refused before anything was sent.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The command was certainly not executed: the connection is known to be
    /// down, the server refused it before running it, or it could not be sent.
    /// Retrying is always safe.
    #[error("redis unavailable (the command was not run)")]
    Unavailable(#[source] Cause),
    /// The command may or may not have run: it was handed to the connection and
    /// then timed out or the connection broke. For an acquire, any possible
    /// grant has already been handed to the background releaser.
    #[error("outcome unknown (the command may have run)")]
    Indeterminate(#[source] Cause),
    /// Unlock or renewal of a hold that expired or was taken over.
    #[error("the hold is no longer held (expired or taken over)")]
    NotHeld,
    /// A key of another type is in the way; nothing was written.
    #[error("key {key} holds a value of another type")]
    WrongType {
        /// The key that is in the way.
        key: String,
    },
    /// A reader asked for the write lock while holding a read lock.
    #[error("a read holder cannot upgrade to the write lock")]
    UpgradeNotSupported,
    /// The client was shut down.
    #[error("the client was shut down")]
    Shutdown,
    /// Any other error reply from the server.
    #[error("redis answered with an error")]
    Redis(#[source] redis::RedisError),
}

/// Why a command is [`Error::Unavailable`] or [`Error::Indeterminate`]:
/// the underlying Redis error when there was one, or a description. It is the
/// `source()` of those variants, whose own messages say only what the caller
/// may assume.
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
            message: err.to_string(),
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

impl Error {
    /// This error and its causes on one line (`outer: inner: ...`), for logs.
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

    /// True for [`Error::Indeterminate`]: the command may have run.
    pub fn is_indeterminate(&self) -> bool {
        matches!(self, Error::Indeterminate(_))
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
                // The server refused the command before running it.
                "BUSY" | "LOADING" | "READONLY" | "MASTERDOWN" | "NOREPLICAS" | "TRYAGAIN"
                | "CLUSTERDOWN" | "NOSCRIPT" => return Error::Unavailable(Cause::redis(err)),
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
    }

    #[test]
    fn predicates() {
        assert!(Error::unavailable("x").is_unavailable());
        assert!(Error::unavailable("x").is_retryable());
        assert!(!Error::NotHeld.is_retryable());
    }
}
