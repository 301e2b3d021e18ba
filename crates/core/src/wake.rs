//! Wake-ups: what a message on a primitive's channel asks of the waiters
//! of one client.
//!
//! Every message says whom it wakes ([`Message`]): a grant names its
//! waiters, a turn its waiter, `1` asks one waiter per client to try, `*`
//! every waiter (of a class: `*:write`), a new term every waiter. So the
//! engine needs no policy per
//! primitive: [`WakeAsTold`] decodes every primitive's channel. A channel
//! that carries messages deadbolt does not write (keyspace notifications)
//! uses [`WakeAll`]: any message wakes everyone on it, who then look at the
//! state themselves. Waiters carry a class (`"read"`, `"write"`, ...), so
//! one channel can serve several kinds of waiter.

use std::fmt;
use std::time::Duration;

pub use crate::message::{parse_u64, Grant, Message};

/// What one message asks of this client's waiters on the channel.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wake {
    /// Nothing (a message no waiter acts on).
    Nothing,
    /// The longest-waiting waiter not already woken tries. Named waiters
    /// (hand-off by name) are never woken this way. A woken waiter that
    /// leaves without getting what it waited for passes its wake-up on to
    /// the next such waiter.
    One,
    /// Every waiter of `class` (every waiter when `None`) tries.
    All {
        /// Only waiters of this class.
        class: Option<String>,
    },
    /// Messages for the waiters registered under these names (their
    /// attempt ids), in order: one, or several when one release hands the
    /// primitive to several waiters at once (a writer's release admitting
    /// every registered reader).
    Named(Vec<(String, Signal)>),
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

/// Decodes the messages of one channel into wake-ups.
///
/// Implementations must not panic on any input: anyone allowed to publish
/// on the channel can send anything.
pub trait WakePolicy: Send + Sync + fmt::Debug + 'static {
    /// What `message` asks of the waiters.
    fn wake(&self, message: &Message) -> Wake;

    /// What `payload` asks of the waiters: its [`Message`], then
    /// [`wake`](Self::wake). The waiting engine calls it for every message.
    fn decode(&self, payload: &[u8]) -> Wake {
        self.wake(&Message::parse(payload))
    }
}

/// Every primitive's channels: each message does what it says. A grant
/// (`g:` lines) goes to the waiters it names, a turn (`t:`) to its waiter,
/// with its sleep bound (`t:<attempt> <ms>`) or to try now, `1`
/// wakes one waiter per client, `*` every waiter (`*:<class>`: of that
/// class), a new term (`l:<term>`) every waiter. Anything else wakes
/// nobody.
#[derive(Debug, Clone, Copy, Default)]
pub struct WakeAsTold;

impl WakePolicy for WakeAsTold {
    fn wake(&self, message: &Message) -> Wake {
        match message {
            Message::Granted(grants) => Wake::Named(
                grants
                    .iter()
                    .map(|(name, g)| (name.clone(), Signal::Grant(*g)))
                    .collect(),
            ),
            Message::Turn { name, after } => Wake::Named(vec![(
                name.clone(),
                after.map_or(Signal::Retry, Signal::SleepFor),
            )]),
            Message::TryOne => Wake::One,
            Message::TryAll { class } => Wake::All {
                class: class.clone(),
            },
            // A new term: everyone who waits for a change looks again.
            Message::Term(_) => Wake::All { class: None },
            _ => Wake::Nothing,
        }
    }
}

/// Any message wakes every waiter of the client: observers that look at
/// the state themselves, on channels that carry messages deadbolt does not
/// write (a watch's keyspace notifications).
#[derive(Debug, Clone, Copy, Default)]
pub struct WakeAll;

impl WakePolicy for WakeAll {
    fn wake(&self, _message: &Message) -> Wake {
        Wake::All { class: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::tests::grant;

    #[test]
    fn every_message_wakes_whom_it_names() {
        let p = WakeAsTold;
        assert_eq!(p.decode(b"1"), Wake::One);
        assert_eq!(p.decode(b"*"), Wake::All { class: None });
        // A new term: every waiter looks again.
        assert_eq!(p.decode(b"l:3"), Wake::All { class: None });
        assert_eq!(
            p.decode(b"*:write"),
            Wake::All {
                class: Some("write".into())
            }
        );
        assert_eq!(
            p.decode(b"g:a1 7 350 9 300\ng:b2 0 300 4 300"),
            Wake::Named(vec![
                ("a1".into(), Signal::Grant(grant(7, 350, 9, 300))),
                ("b2".into(), Signal::Grant(grant(0, 300, 4, 300))),
            ])
        );
        assert_eq!(
            p.decode(b"t:a1 25"),
            Wake::Named(vec![(
                "a1".into(),
                Signal::SleepFor(Duration::from_millis(25))
            )])
        );
        assert_eq!(
            p.decode(b"t:a1"),
            Wake::Named(vec![("a1".into(), Signal::Retry)])
        );
        // One message may admit several readers, a line each; a malformed
        // line (anyone may publish) is skipped.
        assert_eq!(
            p.decode(b"g:a1 0 350 7 300\ng:bad\ng:b2 0 300 9 300"),
            Wake::Named(vec![
                ("a1".into(), Signal::Grant(grant(0, 350, 7, 300))),
                ("b2".into(), Signal::Grant(grant(0, 300, 9, 300))),
            ])
        );
        for junk in [
            &b""[..],
            b"0",
            b"r",
            b"\xff",
            b"*:",
            b"g:",
            b"g:bad\ng:",
            b"g:ab 7 500",
            b"g:ab 7 500 9 1 2",
            b"g:ab 7 500 9 x",
            b"g: 7 500 9",
            b"g:ab x 500 9",
            b"t:ab 1e9",
            b"t:",
            b"h:x",
            b"l:",
            b"l:x",
        ] {
            assert_eq!(p.decode(junk), Wake::Nothing, "{junk:?}");
        }
        assert_eq!(WakeAll.decode(b"hset"), Wake::All { class: None });
    }
}
