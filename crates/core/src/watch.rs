//! Watching a primitive: a stream of holder changes for any name (who
//! acquired it, whether its hold was released, expired or force-unlocked,
//! how many shared holds it has), the same for every primitive.
//!
//! Keyspace notifications are off by default in Redis: with
//! `notify-keyspace-events` holding `K`, `g`, `h`, `x` and `z` (e.g.
//! `Kghzx`), every change wakes a watch at once, and an idle watch reads
//! only every 30 s as a backstop (asked once per watch with `CONFIG GET`;
//! a user whose ACL refuses it is taken as without). Without them a watch
//! *samples*: it reads every [`CATCH_UP`] and when a lease ends, so a
//! change undone between two reads (an acquire and a release) is not seen
//! at all. On a Redis Cluster keyspace notifications are node-local and
//! not sharded, so a watch there samples too. Errors are paced as [`observe`](crate::observe())
//! paces them: at most one per [`CATCH_UP`].

use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::time::Instant;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::observe::CATCH_UP;
use crate::scripts::ScriptCall;
use crate::wait::{Subscription, Waiter};
use crate::wake::WakePolicy;

/// How long a watch waits between reads when keyspace notifications carry
/// every change: a backstop (a reconnect wakes it anyway), not a sample.
const BACKSTOP: Duration = Duration::from_secs(30);

/// Who holds a primitive exclusively, as a watch read it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The holder's owner id (`<client id>:<handle id>`).
    pub owner: String,
    /// The holder's client name, decoded from its owner id.
    pub holder_name: Option<String>,
    /// The hold's fencing token.
    pub token: u64,
}

/// One change a watch reports ([`watch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HoldEvent {
    /// Held when the watch started (its first read): the current holder.
    Held(Holder),
    /// Free when the watch started (its first read): no exclusive holder.
    Free,
    /// A new exclusive hold.
    Acquired(Holder),
    /// The hold is gone before its lease ended: released by its holder (an
    /// unlock or a drop), or lost with the server's data (a restart
    /// without persistence, a failover to a replica that missed it): a
    /// watch cannot tell these apart.
    Released(Holder),
    /// The hold's lease ran out.
    Expired(Holder),
    /// The hold was removed by `force_unlock`.
    ForceUnlocked(Holder),
    /// The number of shared holds changed;
    /// also reported by the first read when it is not 0.
    Shared {
        /// How many there are now.
        holders: u64,
    },
}

/// The channel on which a force-unlock script announces the hold it
/// removed (`f:<hold key> <token>`): `<hold key>:watch`. No waiter listens
/// there; a watch does, to wake at once.
pub fn forced_channel(hold_key: &str) -> String {
    format!("{hold_key}:watch")
}

/// The call a watch reads with (`hold_watch.lua`): `hold_key` (the hold
/// hash, or a hash standing in for it), its force-unlock record, then
/// `more` keys and `args` as that script's header says (where its shared
/// holds are kept, and how they are counted).
pub fn hold_watch_call(hold_key: &str, more: Vec<String>, args: Vec<String>) -> ScriptCall {
    let mut k = vec![hold_key.to_string(), crate::keys::forced_key(hold_key)];
    k.extend(more);
    ScriptCall::new(&crate::scripts::HOLD_WATCH, k, args)
}

/// A subscription of its own on some channels: any message on any of
/// them ends a [`wait`](Listener::wait). Nothing else shares its slot, so
/// it takes no wake-up from a primitive's waiters.
#[derive(Debug)]
pub struct Listener {
    sub: Option<Subscription>,
    also: Vec<crate::wait::Also>,
}

impl Listener {
    /// A listener whose channels each decode with their own policy.
    fn with_policies(client: &Client, channels: &[(String, &'static dyn WakePolicy)]) -> Listener {
        let Some(((first, policy), rest)) = channels.split_first() else {
            return Listener {
                sub: None,
                also: Vec::new(),
            };
        };
        let engine = client.engine();
        let waiter = Waiter {
            policy: *policy,
            class: "watch",
            tag: None,
            wakeable: false,
            local: None,
        };
        let sub = engine.subscribe(first, waiter);
        let also = rest.iter().map(|(c, p)| engine.also(&sub, c, *p)).collect();
        Listener {
            sub: Some(sub),
            also,
        }
    }

    /// Forget what arrived so far: call before each read, so that what
    /// arrives after it ends the next [`wait`](Listener::wait) at once.
    pub fn mark(&self) {
        if let Some(s) = &self.sub {
            s.begin_try();
        }
    }

    /// Sleep until a message arrived since the last [`mark`](Listener::mark)
    /// (or a reconnect asks every waiter to look again), or `deadline`.
    /// Returns whether a message ended it.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub async fn wait(&self, deadline: Instant) -> bool {
        match &self.sub {
            Some(s) => matches!(s.wait(deadline).await, crate::wait::Woke::Notified),
            None => {
                tokio::time::sleep_until(deadline).await;
                false
            }
        }
    }

    /// Wait until the server confirmed every channel, or `deadline`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub async fn confirmed(&self, deadline: Instant) -> bool {
        let Some(s) = &self.sub else { return true };
        if !s.confirmed(deadline).await {
            return false;
        }
        for a in &self.also {
            if !a.confirmed(deadline).await {
                return false;
            }
        }
        true
    }
}

/// One read of a watched primitive: the reply of its watch script, `{owner
/// or '', token, pttl, force-unlocked token or 0, live shared holds, ms
/// until the next shared lease ends or -1}` (core's `hold_watch.lua`).
#[derive(Debug, Clone)]
struct Snapshot {
    holder: Option<Holder>,
    /// When the exclusive hold's lease ends, as the read saw it.
    ends: Option<Instant>,
    forced: u64,
    shared: u64,
    /// When the next shared lease ends (the count drops then, with no
    /// call and no notification).
    shared_ends: Option<Instant>,
}

/// The key an observer compares: what changed, not how long is left.
#[derive(Debug, Clone)]
struct Seen(Option<Holder>, u64, Option<Instant>, Option<Instant>);

impl PartialEq for Seen {
    fn eq(&self, other: &Seen) -> bool {
        self.0 == other.0 && self.1 == other.1
    }
}

fn decode(v: &[redis::Value], read_at: Instant) -> Result<Snapshot> {
    let s = |i: usize| -> String {
        v.get(i)
            .and_then(|x| redis::from_redis_value_ref::<String>(x).ok())
            .unwrap_or_default()
    };
    let n = |i: usize| -> i64 {
        v.get(i)
            .and_then(|x| redis::from_redis_value_ref::<i64>(x).ok())
            .unwrap_or(0)
    };
    if v.len() < 5 {
        return Err(Error::Redis(redis::RedisError::from((
            redis::ErrorKind::Parse,
            "a watch script's reply",
        ))));
    }
    let owner = s(0);
    let holder = (!owner.is_empty()).then(|| Holder {
        holder_name: crate::holder_name(&owner),
        owner,
        token: u64::try_from(n(1)).unwrap_or(0),
    });
    let pttl = n(2);
    let ends = (holder.is_some() && pttl >= 0)
        .then(|| read_at + Duration::from_millis(u64::try_from(pttl).unwrap_or(0)));
    let next_end = n(5);
    Ok(Snapshot {
        holder,
        ends,
        forced: u64::try_from(n(3)).unwrap_or(0),
        shared: u64::try_from(n(4)).unwrap_or(0),
        shared_ends: (v.len() > 5 && next_end >= 0)
            .then(|| read_at + Duration::from_millis(next_end.unsigned_abs())),
    })
}

/// What changed from `prev` (`None`: the first read) to `now`.
fn diff(prev: Option<&Snapshot>, now: &Snapshot, read_at: Instant) -> Vec<HoldEvent> {
    let mut out = Vec::new();
    let Some(prev) = prev else {
        out.push(now.holder.clone().map_or(HoldEvent::Free, HoldEvent::Held));
        if now.shared != 0 {
            out.push(HoldEvent::Shared {
                holders: now.shared,
            });
        }
        return out;
    };
    if prev.holder != now.holder {
        if let Some(old) = prev.holder.clone() {
            out.push(if now.forced == old.token {
                HoldEvent::ForceUnlocked(old)
            } else if prev.ends.is_some_and(|e| read_at >= e) {
                HoldEvent::Expired(old)
            } else {
                HoldEvent::Released(old)
            });
        }
        out.extend(now.holder.clone().map(HoldEvent::Acquired));
    }
    if prev.shared != now.shared {
        out.push(HoldEvent::Shared {
            holders: now.shared,
        });
    }
    out
}

/// [`watch`] of a valid handle. The watch listens on the keyspace
/// notification channels of the primitive's keys
/// (`__keyspace@<db>__:<key>`) with a [`Listener`] of its own: no waiter
/// shares them, so a watch never takes a wake-up a waiter needs. Each
/// wake-up (or [`CATCH_UP`], or the end of the hold's lease, whichever
/// comes first) reads the state in one script and reports the difference
/// from the last read. The listener is marked before each read, so a
/// change between a read and the next wait ends that wait at once.
fn watch_keys(
    client: &Client,
    keys: &[String],
    read: ScriptCall,
) -> impl Stream<Item = Result<HoldEvent>> + Send + 'static {
    let hold_key = keys.first().cloned().unwrap_or_default();
    let mut channels: Vec<(String, &'static dyn WakePolicy)> =
        vec![(forced_channel(&hold_key), &crate::wake::WakeAll)];
    channels.extend(
        keys.iter()
            .filter_map(|k| client.keyspace_channel(k))
            .map(|c| (c, &crate::wake::WakeAll as &'static dyn WakePolicy)),
    );
    // Owned by the stream's closures: subscribed for as long as it runs.
    let listener = std::sync::Arc::new(Listener::with_policies(client, &channels));
    let (c, l) = (client.clone(), listener.clone());
    // Whether notifications carry every change: then the reads between
    // them are a backstop, not a sample. Asked once, before the first
    // read, so that the first event comes after the watch's every
    // command but its reads.
    let notified = std::sync::Arc::new(tokio::sync::OnceCell::<bool>::new());
    let asked = notified.clone();
    let snapshots = crate::observe::observe(
        move || {
            let (c, call, l, asked) = (c.clone(), read.clone(), l.clone(), asked.clone());
            async move {
                asked.get_or_init(|| c.notifies_keyspace()).await;
                l.mark();
                let at = Instant::now();
                let v: Vec<redis::Value> = c.run(&call).await?;
                decode(&v, at).map(|s| (s, at))
            }
        },
        |(s, _): &(Snapshot, Instant)| Seen(s.holder.clone(), s.shared, s.ends, s.shared_ends),
        move |seen: Seen| {
            let (l, notified) = (listener.clone(), notified.clone());
            async move {
                let quiet = notified.get().copied().unwrap_or(false);
                let mut until = Instant::now() + if quiet { BACKSTOP } else { CATCH_UP };
                // A little past a lease's end (the hold's, or the next
                // shared one's): the server's expiry has run by then.
                for e in [seen.2, seen.3].into_iter().flatten() {
                    if e > Instant::now() {
                        until = until.min(e + Duration::from_millis(2));
                    }
                }
                Ok(l.wait(until).await)
            }
        },
    );
    snapshots
        .scan(None::<Snapshot>, |prev, r| {
            let events = match r {
                Err(e) => vec![Err(e)],
                Ok((now, at)) => {
                    let ev = diff(prev.as_ref(), &now, at);
                    *prev = Some(now);
                    ev.into_iter().map(Ok).collect()
                }
            };
            futures::future::ready(Some(futures::stream::iter(events)))
        })
        .flatten()
}

/// A stream of the changes of one primitive: what every primitive's
/// `watch()` returns. `parts` are the keys whose keyspace notifications
/// wake the watch (see the module notes for the bounds without them), the
/// first the hold hash, whose force-unlocks are heard on its
/// [`forced_channel`], and the read ([`hold_watch_call`]); or, when the
/// primitive's handle is invalid (an empty name), that error, which the
/// stream then yields once per [`CATCH_UP`]. The first items say what
/// holds it when the watch starts ([`HoldEvent::Held`] or
/// [`HoldEvent::Free`], then [`HoldEvent::Shared`] when there are shared
/// holds).
///
/// # Cancel safety
/// Dropping the stream stops it; it records nothing on the server.
pub fn watch(
    client: &Client,
    parts: Result<(Vec<String>, ScriptCall)>,
) -> impl Stream<Item = Result<HoldEvent>> + Send + 'static {
    match parts {
        Ok((keys, read)) => watch_keys(client, &keys, read).left_stream(),
        Err(e) => failing(e).right_stream(),
    }
}

/// A watch that cannot start (an invalid name): its error, once per
/// [`CATCH_UP`], as any watch's errors.
pub fn failing(e: Error) -> impl Stream<Item = Result<HoldEvent>> + Send + 'static {
    let msg = e.to_string();
    crate::observe::observe(
        move || {
            let m = msg.clone();
            async move { Err::<u8, _>(Error::InvalidArgument(m)) }
        },
        |_: &u8| 0u8,
        |_| async { Ok(false) },
    )
    .map(|r| r.map(|_| HoldEvent::Shared { holders: 0 }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(
        owner: Option<(&str, u64)>,
        forced: u64,
        shared: u64,
        ends: Option<Instant>,
    ) -> Snapshot {
        Snapshot {
            holder: owner.map(|(o, t)| Holder {
                owner: o.to_string(),
                holder_name: None,
                token: t,
            }),
            ends,
            forced,
            shared,
            shared_ends: None,
        }
    }

    #[test]
    fn differences_become_events() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(10);
        let a = snap(Some(("a:1", 5)), 0, 0, Some(later));
        assert!(matches!(&diff(None, &a, t0)[..], [HoldEvent::Held(h)] if h.token == 5));
        assert!(diff(Some(&a), &a, t0).is_empty());
        let free = snap(None, 0, 0, None);
        assert!(matches!(
            &diff(Some(&a), &free, t0)[..],
            [HoldEvent::Released(_)]
        ));
        assert!(matches!(
            &diff(Some(&a), &free, later)[..],
            [HoldEvent::Expired(_)]
        ));
        let forced = snap(None, 5, 0, None);
        assert!(matches!(
            &diff(Some(&a), &forced, t0)[..],
            [HoldEvent::ForceUnlocked(_)]
        ));
        let b = snap(Some(("b:1", 6)), 0, 2, Some(later));
        assert!(matches!(
            &diff(Some(&a), &b, t0)[..],
            [HoldEvent::Released(_), HoldEvent::Acquired(h), HoldEvent::Shared { holders: 2 }] if h.token == 6
        ));
    }
}
