//! Pub/Sub as the scripts see it: a PUBLISH reaches the clients listening
//! at that moment and returns how many of them this server counts.

use crate::config::Config;
use crate::state::{Attempt, Envelope, Msg, Phase, State};

/// Whether a script's PUBLISH calls go out (off for the
/// ReleaseForgetsToPublish mutation's release).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Out {
    /// As the script does.
    On,
    /// Dropped.
    Off,
}

/// Whether client `c` listens: alive, and one of its waiters subscribed
/// (the engine's subscriptions are per client, shared by its waiters).
pub(crate) fn listens(s: &State, cfg: &Config, c: u8) -> bool {
    !s.clients[usize::from(c)].crashed
        && (0..cfg.waiters()).any(|w| cfg.client_of(w) == c && s.waiters[usize::from(w)].subscribed)
}

/// PUBLISH `msg` on client `to`'s channel: the receiver count (a client
/// subscribed at a replica hears it, uncounted).
pub(crate) fn publish(s: &mut State, cfg: &Config, to: u8, msg: Msg, out: Out) -> usize {
    if out == Out::Off || !listens(s, cfg, to) {
        return 0;
    }
    s.net.push(Envelope { to, msg });
    s.net.sort();
    usize::from(cfg.replica_client != Some(to))
}

/// PUBLISH on the primitive's shared channel: every listening client.
pub(crate) fn publish_all(s: &mut State, cfg: &Config, msg: Msg, out: Out) {
    for c in 0..cfg.clients {
        publish(s, cfg, c, msg, out);
    }
}

/// hold_forced: `f:` to the client of the holder `a`; the holder's belief
/// is marked forced (a ghost: force-unlock ends a hold by design).
pub(crate) fn forced(s: &mut State, cfg: &Config, a: Attempt, token: u32) {
    let w = &mut s.waiters[usize::from(a.waiter)];
    if w.round == a.round {
        if let Phase::Holding { token: t, .. } = w.phase {
            w.phase = Phase::Holding {
                token: t,
                forced: true,
            };
        }
    }
    if !s.forced.contains(&token) {
        s.forced.push(token);
        s.forced.sort_unstable();
    }
    // The client channel is classic, heard wherever the client listens.
    if !s.clients[usize::from(cfg.client_of(a.waiter))].crashed {
        s.net.push(Envelope {
            to: cfg.client_of(a.waiter),
            msg: Msg::Forced,
        });
        s.net.sort();
    }
}
