//! Wake-up policies: how a message on a primitive's channel wakes the
//! waiters of one client.
//!
//! Core's waiting engine knows nothing of any primitive's messages. Each
//! primitive hands its acquires a [`WakePolicy`] (in
//! [`AcquireBuilder`](crate::AcquireBuilder)); the engine asks it to
//! decode every message on the channel into a [`Wake`] and carries it out:
//! wake one waiter (an unfair lock's release), every waiter (readers after
//! a writer), `n` waiters (permits returned), or one named waiter (a fair
//! hand-off, with its grant). Waiters carry a class (`"read"`, `"write"`,
//! ...), so one channel can serve several kinds of waiter.

use std::fmt;
use std::time::Duration;

pub use crate::message::{parse_u64, Grant, Message};

/// What one message asks of this client's waiters on the channel.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wake {
    /// Nothing (a message the policy does not use).
    Nothing,
    /// Wake up to `n` waiters not already woken, longest waiting first,
    /// of `class` (any class when `None`). Named waiters (hand-off by name)
    /// are never woken this way. A woken waiter that leaves without getting
    /// what it waited for passes its wake-up on to the next such waiter.
    Any {
        /// How many at most.
        n: usize,
        /// Only waiters of this class.
        class: Option<&'static str>,
    },
    /// Wake every waiter of `class` (every waiter when `None`).
    All {
        /// Only waiters of this class.
        class: Option<&'static str>,
    },
    /// Another client's waiter was granted the primitive under a claim that
    /// ends `within` from now unless its taker extends it: a waiter of this
    /// client registered for the next grant sleeps until then at most (the
    /// taker may be gone), and a client without one wakes a waiter to try,
    /// which registers it.
    Soon {
        /// When the claim ends, from now.
        within: Duration,
    },
    /// A message for the waiter registered under `name` (its attempt id).
    Named {
        /// The waiter's name.
        name: String,
        /// What to tell it.
        signal: Signal,
    },
    /// Each of these, in order: one message that hands the primitive to
    /// several waiters at once (a writer's release admitting every
    /// registered reader), each named ([`Wake::grants`]).
    Several(Vec<Wake>),
}

impl Wake {
    /// Wake the longest-waiting waiter of any class.
    pub fn one() -> Wake {
        Wake::Any { n: 1, class: None }
    }
}

/// What a named waiter is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signal {
    /// Try again now.
    Retry,
    /// Nothing to try before this long from now (the new holder's lease
    /// ends then); the waiter moves its sleep bound without a round trip.
    SleepFor(Duration),
    /// The lock was handed to this waiter (see [`Grant`]).
    Grant(Grant),
}

/// Decodes the messages of one primitive's channel.
///
/// Implementations must not panic on any input: anyone allowed to publish
/// on the channel can send anything. Unknown messages decode to
/// [`Wake::Nothing`].
pub trait WakePolicy: Send + Sync + fmt::Debug + 'static {
    /// What `message` asks of the waiters: the policy's choice over the
    /// one message schema ([`Message`]).
    fn wake(&self, message: &Message) -> Wake;

    /// What `payload` asks of the waiters: its [`Message`], then
    /// [`wake`](Self::wake). The waiting engine calls it for every message.
    fn decode(&self, payload: &[u8]) -> Wake {
        self.wake(&Message::parse(payload))
    }
}

impl Wake {
    /// The wake-up of the waiter registered under `name` with its grant.
    pub fn granted(name: &str, grant: Grant) -> Wake {
        Wake::Named {
            name: name.to_string(),
            signal: Signal::Grant(grant),
        }
    }

    /// The wake-ups of every waiter a [`Message::Granted`] names: one
    /// [`Wake::Named`] for one, [`Wake::Several`] for more. For policies
    /// whose one release grants to several waiters of several clients on
    /// the shared channel.
    pub fn grants(grants: &[(String, Grant)]) -> Wake {
        match grants {
            [] => Wake::Nothing,
            [(name, g)] => Wake::granted(name, *g),
            _ => Wake::Several(grants.iter().map(|(n, g)| Wake::granted(n, *g)).collect()),
        }
    }

    /// The wake-up of the one waiter a single-grant message names
    /// ([`Message::single_grant`]); `None` for a message that is no grant,
    /// and [`Wake::Nothing`] for a grant message of another shape. For
    /// policies whose grants name one waiter on its client's own channel.
    pub fn single_grant(message: &Message) -> Option<Wake> {
        match message {
            Message::Granted(_) | Message::Malformed(b'g') => Some(
                message
                    .single_grant()
                    .map_or(Wake::Nothing, |(name, g)| Wake::granted(name, *g)),
            ),
            _ => None,
        }
    }
}

/// An unfair lock's waiters: `g:<attempt> <token> <ttl> <secret> <claim>`
/// hands the primitive to that waiter ([`Wake::single_grant`]); `h:<ms>`
/// says another client's claim ends within `ms` ([`Wake::Soon`]); any
/// other message wakes one waiter per client, and one of them wins. For
/// primitives whose release grants to the waiter a client registered when
/// it knows one, and else publishes a plain release (the `Lock`), and for
/// those that only ever publish plain releases (the `Election`'s
/// campaigners).
#[derive(Debug, Clone, Copy, Default)]
pub struct OnePerClient;

impl WakePolicy for OnePerClient {
    fn wake(&self, message: &Message) -> Wake {
        Wake::single_grant(message).unwrap_or_else(|| match message {
            Message::Claimed(within) => Wake::Soon { within: *within },
            Message::Malformed(b'h') => Wake::Nothing,
            _ => Wake::one(),
        })
    }
}

/// Any message wakes every waiter of the client: observers that look at
/// the state themselves (a watch, an election's observers).
#[derive(Debug, Clone, Copy, Default)]
pub struct WakeAll;

impl WakePolicy for WakeAll {
    fn wake(&self, _message: &Message) -> Wake {
        Wake::All { class: None }
    }
}
