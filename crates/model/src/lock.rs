//! The Lock's scripts (lua/lock), each one atomic step over
//! [`LockKeys`].

use crate::config::{Config, Mutation};
use crate::net::{publish, publish_all, Out};
use crate::state::{Attempt, LockHold, LockKeys, Msg, Reg, Server, State};
use crate::Reply;

fn keys(s: &mut State) -> &mut LockKeys {
    match &mut s.server {
        Server::Lock(k) => k,
        _ => unreachable!("a lock step on another primitive"),
    }
}

/// lock_acquire.lua for `a` (owner: its waiter; ARGV[6] its round, so a
/// hold of an earlier attempt of the same handle is stale), mode 'wait'
/// (`again` false) or 'again', with the call's secret `secret`.
pub(crate) fn acquire(s: &mut State, cfg: &Config, a: Attempt, again: bool, secret: u8) -> Reply {
    let client = cfg.client_of(a.waiter);
    let k = keys(s);
    // hold_is_stale: the owner's hash records neither this attempt nor a newer one.
    if k.hold.as_ref().is_some_and(|h| {
        h.attempt.waiter == a.waiter && h.attempt != a && h.attempt.round <= a.round
    }) {
        k.hold = None;
    }
    let queue_client = |k: &mut LockKeys| {
        if !k.queue.contains(&client) {
            k.queue.push(client);
        }
    };
    let Some(h) = &k.hold else {
        k.fence += 1;
        let token = k.fence;
        k.hold = Some(LockHold {
            attempt: a,
            token,
            x: false,
            w: false,
            claim: false,
            regs: Vec::new(),
        });
        if again {
            k.queue.retain(|&c| c != client);
        }
        return Reply::Granted(token);
    };
    if h.attempt.waiter != a.waiter {
        let other = cfg.client_of(h.attempt.waiter) != client;
        if other {
            queue_client(k);
        }
        let Some(h) = &mut k.hold else { unreachable!() };
        if !other {
            h.w = true;
            return Reply::Busy;
        }
        h.x = true;
        // reg_register: once per client (HSETNX).
        return match h.regs.iter().find(|r| r.client == client) {
            Some(r) if r.attempt == a => Reply::Queued {
                fresh: false,
                secret: r.secret,
            },
            Some(_) => Reply::Busy,
            None => {
                h.regs.push(Reg {
                    client,
                    attempt: a,
                    secret,
                });
                h.regs.sort_by_key(|r| r.client);
                Reply::Queued {
                    fresh: true,
                    secret,
                }
            }
        };
    }
    // hold_reenter: a replay of this attempt (the stale check left no other);
    // a grant under a claim is stretched to the lease.
    let Some(h) = &mut k.hold else { unreachable!() };
    h.claim = false;
    Reply::Granted(h.token)
}

/// What a lock release did (its reply).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Released {
    /// 0: nothing held by the attempt.
    Nothing,
    /// 2 or 4: the last hold went (freed, or granted inside).
    Last,
}

/// lock_release.lua for attempt `a` with every optional key and argument
/// (ARGV[3] = the attempt's client). `out` says whether it publishes, and
/// for the PassOverUnheard mutation whether an unheard grant's
/// registration counts as older than its claim (`pass_over`).
pub(crate) fn release(
    s: &mut State,
    cfg: &Config,
    a: Attempt,
    out: Out,
    pass_over: bool,
) -> Released {
    let me_client = cfg.client_of(a.waiter);
    let k = keys(s);
    let held = k.hold.as_ref().is_some_and(|h| h.attempt == a);
    if !held {
        // reg_drop of the client's registration if it is this attempt's, and ZREM.
        if let Some(h) = &mut k.hold {
            if let Some(i) = h
                .regs
                .iter()
                .position(|r| r.client == me_client && r.attempt == a)
            {
                h.regs.remove(i);
                k.queue.retain(|&c| c != me_client);
            }
        }
        return Released::Nothing;
    }
    let h = k.hold.clone().unwrap_or_else(|| unreachable!());
    let me = cfg.client_of(h.attempt.waiter);
    let waited = h.w;
    let mut stoken: Option<u32> = None;
    if h.x {
        let tries = if cfg.mutation == Mutation::PassOverUnheard {
            4
        } else {
            2
        };
        for _ in 0..tries {
            let k = keys(s);
            if k.queue.is_empty() {
                break;
            }
            let head = k.queue.remove(0);
            if head == me {
                continue;
            }
            let Some(e) = k
                .hold
                .as_ref()
                .and_then(|h| h.regs.iter().find(|r| r.client == head).copied())
            else {
                break;
            };
            let token = match (cfg.mutation, stoken) {
                (Mutation::PassOverUnheard, Some(t)) => t,
                _ => {
                    k.fence += 1;
                    k.fence
                }
            };
            stoken = Some(token);
            let heard = publish(
                s,
                cfg,
                head,
                Msg::Grant {
                    attempt: e.attempt,
                    token,
                    secret: e.secret,
                    valid: true,
                },
                out,
            );
            if cfg.mutation == Mutation::PassOverUnheard && heard == 0 && pass_over {
                let k = keys(s);
                if let Some(h) = &mut k.hold {
                    h.regs.retain(|r| r.client != head);
                }
                continue;
            }
            grant_to(s, e, token, waited);
            return Released::Last;
        }
    }
    if h.x || h.w {
        publish_all(s, cfg, Msg::Notice, out);
    }
    keys(s).hold = None;
    Released::Last
}

/// lock_release.lua's grant_to: the new hold under the claim (x kept
/// while others wait).
fn grant_to(s: &mut State, e: Reg, token: u32, waited: bool) {
    // The sleep bound the script sends the next client's registered waiter
    // (`t:<attempt> <claim>`) moves a timer, which the model has none of.
    let next = keys(s).queue.first().copied();
    let k = keys(s);
    let more = waited || next.is_some();
    if let Some(h) = &mut k.hold {
        h.regs.retain(|r| r.client != e.client);
        h.attempt = e.attempt;
        h.token = token;
        h.w = false;
        h.x = more && h.x;
        h.claim = true;
    }
}

/// lock_pass.lua: the last hold of `from` goes to `to` (a waiter of the
/// same client) with a fresh token; `None` when `from` held nothing.
pub(crate) fn pass(s: &mut State, from: Attempt, to: Attempt) -> Option<u32> {
    let k = keys(s);
    match &mut k.hold {
        Some(h) if h.attempt == from => {
            k.fence += 1;
            h.attempt = to;
            h.token = k.fence;
            h.claim = false;
            Some(k.fence)
        }
        _ => None,
    }
}

/// lock_force_unlock.lua: f: to the holder's client, delete, '1'.
pub(crate) fn force_unlock(s: &mut State, cfg: &Config) {
    let Some(h) = keys(s).hold.clone() else {
        return;
    };
    crate::net::forced(s, cfg, h.attempt, h.token);
    keys(s).hold = None;
    publish_all(s, cfg, Msg::Notice, Out::On);
}

/// hold_renew.lua for `a`: true when the hash records the attempt (its
/// claim is then extended to the lease).
pub(crate) fn renew(s: &mut State, a: Attempt) -> bool {
    match &mut keys(s).hold {
        Some(h) if h.attempt == a => {
            h.claim = false;
            true
        }
        _ => false,
    }
}
