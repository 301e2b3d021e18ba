//! The FairLock's scripts (lua/fair), each one atomic step over
//! [`FairKeys`].

use crate::config::Config;
use crate::net::{publish, Out};
use crate::state::{Attempt, Entry, FairHold, FairKeys, Msg, Server, State};
use crate::Reply;

fn keys(s: &mut State) -> &mut FairKeys {
    match &mut s.server {
        Server::Fair(k) => k,
        _ => unreachable!("a fair step on another primitive"),
    }
}

/// fair_live_head: the first entry whose client's liveness record is
/// live; dead heads are dropped on the way.
fn live_head(s: &mut State, cfg: &Config) -> Option<Entry> {
    let k = keys(s);
    while let Some(e) = k.queue.first().copied() {
        if k.alive.contains(&cfg.client_of(e.attempt.waiter)) {
            return Some(e);
        }
        k.queue.remove(0);
    }
    None
}

/// fair_handoff: g: to the head's client, then the hold under its claim
/// with c set.
fn handoff(s: &mut State, cfg: &Config, e: Entry, out: Out) {
    let token = keys(s).fence + 1;
    publish(
        s,
        cfg,
        cfg.client_of(e.attempt.waiter),
        Msg::Grant {
            attempt: e.attempt,
            token,
            secret: e.secret,
            valid: true,
        },
        out,
    );
    let k = keys(s);
    k.fence = token;
    k.queue.retain(|q| q.attempt != e.attempt);
    k.hold = Some(FairHold {
        attempt: e.attempt,
        token,
        unclaimed: true,
        claim: true,
    });
}

/// fair_pass_on: hand the free lock to the live head; whether it did.
fn pass_on(s: &mut State, cfg: &Config, out: Out) -> bool {
    match live_head(s, cfg) {
        Some(e) => {
            handoff(s, cfg, e, out);
            true
        }
        None => false,
    }
}

/// fair_acquire.lua, mode 'wait', for `a` with the call's secret `secret`.
pub(crate) fn acquire(s: &mut State, cfg: &Config, a: Attempt, secret: u8) -> Reply {
    let client = cfg.client_of(a.waiter);
    let k = keys(s);
    if k.hold.as_ref().is_some_and(|h| {
        h.attempt.waiter == a.waiter && h.attempt != a && h.attempt.round <= a.round
    }) {
        k.hold = None;
    }
    let enqueue = |s: &mut State| {
        let k = keys(s);
        let r = match k.queue.iter().find(|e| e.attempt == a) {
            Some(e) => Reply::Queued {
                fresh: false,
                secret: e.secret,
            },
            None => {
                k.queue.push(Entry { attempt: a, secret });
                Reply::Queued {
                    fresh: true,
                    secret,
                }
            }
        };
        if !k.alive.contains(&client) {
            k.alive.push(client);
            k.alive.sort_unstable();
        }
        r
    };
    if let Some(h) = &mut k.hold {
        if h.attempt.waiter == a.waiter {
            // Pick-up of a hand-off (c == attempt), or a replay: the claim
            // becomes the lease. (fair_wake_next's t: hint is not modelled.)
            h.unclaimed = false;
            h.claim = false;
            return Reply::Granted(h.token);
        }
        return enqueue(s);
    }
    match live_head(s, cfg) {
        None => {}
        Some(e) if e.attempt == a => {}
        Some(e) => {
            handoff(s, cfg, e, Out::On);
            return enqueue(s);
        }
    }
    let k = keys(s);
    k.fence += 1;
    k.queue.retain(|e| e.attempt != a);
    k.hold = Some(FairHold {
        attempt: a,
        token: k.fence,
        unclaimed: false,
        claim: false,
    });
    Reply::Granted(k.fence)
}

/// fair_release.lua for `a`: the last hold is passed on to the live head
/// (publishing as `out` says); a queued attempt leaves the queue. Whether
/// the attempt held the lock.
pub(crate) fn release(s: &mut State, cfg: &Config, a: Attempt, out: Out) -> bool {
    let k = keys(s);
    if k.hold.as_ref().is_some_and(|h| h.attempt == a) {
        if k.queue.is_empty() || !pass_on(s, cfg, out) {
            keys(s).hold = None;
        }
        return true;
    }
    k.queue.retain(|e| e.attempt != a);
    false
}

/// fair_heartbeat.lua for client `c`: a lock nobody queues on is skipped;
/// else the liveness record, and a free lock handed to the live head.
pub(crate) fn heartbeat(s: &mut State, cfg: &Config, c: u8) {
    let k = keys(s);
    if k.queue.is_empty() {
        return;
    }
    if !k.alive.contains(&c) {
        k.alive.push(c);
        k.alive.sort_unstable();
    }
    if k.hold.is_none() {
        pass_on(s, cfg, Out::On);
    }
}

/// fair_force_unlock.lua: f: to the holder's client, then pass it on or delete.
pub(crate) fn force_unlock(s: &mut State, cfg: &Config) {
    let Some(h) = keys(s).hold.clone() else {
        return;
    };
    crate::net::forced(s, cfg, h.attempt, h.token);
    if !pass_on(s, cfg, Out::On) {
        keys(s).hold = None;
    }
}

/// hold_renew.lua for `a`: whether the hash records it (claim extended).
pub(crate) fn renew(s: &mut State, a: Attempt) -> bool {
    match &mut keys(s).hold {
        Some(h) if h.attempt == a => {
            h.claim = false;
            true
        }
        _ => false,
    }
}
