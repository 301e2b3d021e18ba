//! The Semaphore's scripts (lua/semaphore), each one atomic step
//! over [`SemKeys`]. Every request is for one permit; ended leases are
//! gone from `holds` as soon as time ends them (the scripts' purges then
//! find nothing to do).

use crate::config::{Config, Primitive};
use crate::net::{publish, Out};
use crate::state::{Attempt, Entry, Msg, SemHold, SemKeys, Server, State};
use crate::Reply;

fn keys(s: &mut State) -> &mut SemKeys {
    match &mut s.server {
        Server::Sem(k) => k,
        _ => unreachable!("a semaphore step on another primitive"),
    }
}

fn permits(cfg: &Config) -> usize {
    match cfg.primitive {
        Primitive::Semaphore(n) => usize::from(n),
        _ => 0,
    }
}

/// sem_live_head: the first entry whose client is live; dead ones dropped.
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

/// sem_wake: grant, from the head on, the waiters that fit in `avail`
/// (g: first, then the hold under its claim); dead waiters are dropped.
fn wake(s: &mut State, cfg: &Config, avail: usize, out: Out) {
    let mut used = 0;
    while used < avail {
        let k = keys(s);
        let Some(e) = k.queue.first().copied() else {
            return;
        };
        if !k.alive.contains(&cfg.client_of(e.attempt.waiter)) {
            k.queue.remove(0);
            continue;
        }
        used += 1;
        publish(
            s,
            cfg,
            cfg.client_of(e.attempt.waiter),
            Msg::Grant {
                attempt: e.attempt,
                token: 0,
                secret: e.secret,
                valid: true,
            },
            out,
        );
        let k = keys(s);
        k.holds.push(SemHold {
            attempt: e.attempt,
            claim: true,
        });
        k.holds.sort_by_key(|h| h.attempt);
        k.queue.remove(0);
    }
}

fn available(s: &mut State, cfg: &Config) -> usize {
    permits(cfg).saturating_sub(keys(s).holds.len())
}

/// sem_acquire.lua, mode 'wait', for `a` with the call's secret `secret`.
pub(crate) fn acquire(s: &mut State, cfg: &Config, a: Attempt, secret: u8) -> Reply {
    let client = cfg.client_of(a.waiter);
    if let Some(h) = keys(s).holds.iter_mut().find(|h| h.attempt == a) {
        // lease_replay: a grant under a claim is stretched to the lease.
        h.claim = false;
        return Reply::Granted(0);
    }
    let avail = available(s, cfg);
    let head = live_head(s, cfg);
    let reserve = usize::from(head.is_some_and(|e| e.attempt != a));
    if avail > reserve {
        let k = keys(s);
        k.holds.push(SemHold {
            attempt: a,
            claim: false,
        });
        k.holds.sort_by_key(|h| h.attempt);
        k.queue.retain(|e| e.attempt != a);
        if head.is_some_and(|e| e.attempt == a) {
            wake(s, cfg, avail - 1, Out::On);
        }
        return Reply::Granted(0);
    }
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
}

/// sem_release.lua for `a`: a hold gives its permit back and the waiters
/// it serves are granted (publishing as `out` says); a queued attempt
/// leaves, and what it was kept for goes to those behind it. Whether `a`
/// held a permit.
pub(crate) fn release(s: &mut State, cfg: &Config, a: Attempt, out: Out) -> bool {
    let k = keys(s);
    if let Some(i) = k.holds.iter().position(|h| h.attempt == a) {
        k.holds.remove(i);
        if !k.queue.is_empty() {
            let avail = available(s, cfg);
            wake(s, cfg, avail, out);
        }
        return true;
    }
    if k.queue.iter().any(|e| e.attempt == a) {
        k.queue.retain(|e| e.attempt != a);
        let avail = available(s, cfg);
        wake(s, cfg, avail, out);
    }
    false
}

/// sem_heartbeat.lua for client `c`: skipped where nobody queues; else
/// the liveness record, and the waiters that free permits serve granted.
pub(crate) fn heartbeat(s: &mut State, cfg: &Config, c: u8) {
    let k = keys(s);
    if k.queue.is_empty() {
        return;
    }
    if !k.alive.contains(&c) {
        k.alive.push(c);
        k.alive.sort_unstable();
    }
    let avail = available(s, cfg);
    wake(s, cfg, avail, Out::On);
}

/// sem_renew.lua for `a`: whether the hold is recorded (claim extended).
pub(crate) fn renew(s: &mut State, a: Attempt) -> bool {
    match keys(s).holds.iter_mut().find(|h| h.attempt == a) {
        Some(h) => {
            h.claim = false;
            true
        }
        None => false,
    }
}
