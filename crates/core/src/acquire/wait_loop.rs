//! The waiting loop of one acquire: the first try, the subscription when
//! it failed, then sleeps until a message, the holder's TTL or the
//! deadline, and tries again. Each step is a method of [`WaitLoop`].

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::attempt::{new_secret, release_call, try_once, Attempt};
use super::reply::{take_named_grant, Granted, Reply};
use super::{AcquireCall, AcquireSpec, WaitMode};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::heartbeat::HeartbeatReg;
use crate::scripts::ScriptCall;
use crate::wait::local::{LocalGrant, LocalNow, LocalWaiter};
use crate::wait::{Subscription, Waiter, Woke};

/// Until when a waiter told "busy" with `pttl` sleeps at most (a release
/// message or a hint may wake it sooner): the holder's TTL, at least 1 ms
/// (`0`: the hold ends within this millisecond, so the next try finds it
/// gone; sleeping for want of a bound would wait a whole `no_bound`); at
/// once when the key vanished between the script's checks (`-2`); else
/// (`-1`, no TTL known) `no_bound`, as a message or a reconnect wakes it.
fn sleep_bound(now: Instant, pttl: i64, no_bound: Duration) -> Instant {
    match pttl {
        -2 => now,
        p if p >= 0 => crate::config::later(now, Duration::from_millis(p.unsigned_abs().max(1))),
        _ => crate::config::later(now, no_bound),
    }
}

/// The longest pause between two tries of one acquire that both ended in
/// errors ([`retry_pause`]).
const RETRY_PAUSE_MAX_MS: i64 = 30_000;

/// The pause (ms) before the next try after a retryable error, from the
/// last pause (`prev`, 0 for none) and how long the failed try took.
///
/// A refusal that came back fast (LOADING, BUSY, READONLY, a reset on a
/// cluster, whose connection never reads as down) doubles the pause from
/// 10 ms to 500 ms. A try left unanswered for about the command timeout
/// says the server is overloaded or out of reach, and every further try
/// adds a script to its queue that runs whether or not anyone still waits
/// for its reply: the pause is then at least what the try took, doubling
/// up to [`RETRY_PAUSE_MAX_MS`]. Retrying every half second instead, a
/// flash sale of 100,000 waiters on 50 clients with a 1 s timeout kept
/// the server at 215,599 commands a second (crates/failures).
fn retry_pause(prev: i64, took: Duration, timeout: Duration) -> i64 {
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    if took >= timeout / 2 {
        prev.saturating_mul(2)
            .max(ms(took))
            .clamp(10, RETRY_PAUSE_MAX_MS)
    } else {
        prev.saturating_mul(2).clamp(10, 500)
    }
}

/// What the first try settled.
pub(super) enum First {
    /// The acquire is over: granted, or a try that found it busy.
    Done(Option<Granted>),
    /// Wait (for this many ms at most, when already subscribed), then try.
    Wait(Option<i64>),
}

/// One acquire's state between its steps. The fields drop in this order
/// (the subscription first, the attempt last): no local hand-off may claim
/// the waiter once its attempt's release may run, and a heartbeat stops
/// before the release of its entry is handed over.
pub(super) struct WaitLoop<'a> {
    /// The subscription to the primitive's channel (joined before the
    /// first try when this client listens there already).
    pub(super) sub: Option<Subscription>,
    queue: QueueState,
    attempt: Attempt<'a>,
    client: &'a Client,
    ask: AcquireCall<'a>,
    deadline: Option<Instant>,
    /// The last retryable error, returned if the time runs out with it.
    last_err: Option<Error>,
    /// The pause after the last retryable error (ms): [`retry_pause`].
    refused: i64,
}

impl<'a> WaitLoop<'a> {
    /// The attempt, and the waiter it sleeps as. A channel this client
    /// already listens on (another local waiter, or one lingering after a
    /// recent wait) costs nothing to join: it is joined before the first
    /// try, and the try after subscribing is not needed, since no release
    /// can fall between the two.
    pub(super) fn new(client: &'a Client, ask: AcquireCall<'a>) -> (WaitLoop<'a>, Waiter) {
        let spec = ask.spec;
        let release = release_call(spec, ask.attempt_id);
        let local = (ask.records && spec.pass.is_some() && ask.wait != WaitMode::Try).then(|| {
            Arc::new(LocalWaiter::new(
                ask.owner,
                ask.attempt_id,
                ask.ms,
                release.clone(),
            ))
        });
        let attempt = Attempt::new(
            client,
            release,
            ask.records,
            local.clone(),
            Some(&spec.channel),
            spec.grants.also_unnamed(),
        );
        let waiter = Waiter {
            policy: spec.wake,
            class: spec.class,
            tag: spec.grants.by_name().then(|| ask.attempt_id.to_string()),
            wakeable: spec.grants.also_unnamed(),
            local,
        };
        let engine = client.engine();
        let sub = match ask.wait {
            WaitMode::Try => None,
            _ => engine.subscribe_if_confirmed(&spec.channel, waiter.clone()),
        };
        let run = WaitLoop {
            sub,
            queue: QueueState::new(Instant::now()),
            attempt,
            client,
            ask,
            deadline: ask.wait.deadline(),
            last_err: None,
            refused: 0,
        };
        (run, waiter)
    }

    /// The acquire call in `mode` (`try`, `wait` or `again`), with a fresh
    /// entry secret when grants come by name.
    fn call(&self, mode: &str) -> ScriptCall {
        let AcquireCall {
            spec,
            owner,
            ms,
            attempt_id,
            ..
        } = self.ask;
        ScriptCall::new(
            spec.acquire,
            spec.keys.clone(),
            [
                owner.to_string(),
                attempt_id.to_string(),
                ms.to_string(),
                mode.to_string(),
                // Always sent, so that every script finds each argument at
                // the same place whatever the spec: '0' for "no entry
                // secret" and "no stale-hold bound".
                if spec.grants.by_name() {
                    new_secret().to_string()
                } else {
                    "0".into()
                },
                spec.live
                    .as_ref()
                    .map_or_else(|| "0".into(), |s| s.acquire_arg(attempt_id)),
            ]
            .into_iter()
            .chain(spec.extra_args.iter().cloned())
            .collect(),
        )
    }

    /// Until when a subscription's confirmation is awaited.
    fn confirm_by(&self) -> Instant {
        let bound = crate::config::after(self.client.config().command_timeout);
        self.deadline.map_or(bound, |d| d.min(bound))
    }

    /// Step one: the first try, unless another owner of this client holds
    /// the lock and will hand it to a local waiter or release it (waking
    /// this one): then sleep at once, without a try that could only find
    /// it busy.
    pub(super) async fn first_try(&mut self) -> Result<First> {
        let (client, spec, wait) = (self.client, self.ask.spec, self.ask.wait);
        let local_bound = match (&self.sub, &self.attempt.local) {
            (Some(_), Some(_)) => client
                .engine()
                .held_elsewhere(&spec.channel, self.ask.owner),
            _ => None,
        };
        if let Some(sub) = &self.sub {
            sub.begin_try();
        }
        let (sent_at, first) = match local_bound {
            Some(until) => {
                let left = until.saturating_duration_since(Instant::now());
                let pttl = i64::try_from(left.as_millis()).unwrap_or(i64::MAX).max(1);
                (Instant::now(), Ok(Reply::Busy { pttl }))
            }
            None => {
                let call = self.call(if wait == WaitMode::Try { "try" } else { "wait" });
                try_once(client, &mut self.attempt, &call).await
            }
        };
        self.queue = QueueState::new(sent_at);
        if let Some(sub) = &self.sub {
            sub.set_registered(matches!(first, Ok(Reply::Queued { .. })));
        }
        Ok(match first {
            Ok(Reply::Granted { token, pttl }) => {
                if let Some(sub) = &self.sub {
                    sub.mark_acquired();
                }
                First::Done(Some(Granted::from_server(token, pttl, sent_at)))
            }
            Ok(Reply::Busy { .. }) | Ok(Reply::Queued { .. }) if wait == WaitMode::Try => {
                self.attempt.give_up().await;
                First::Done(None)
            }
            Ok(reply) => {
                self.queue.observe(client, spec, reply, sent_at);
                First::Wait(match (&self.sub, reply) {
                    (Some(_), Reply::Busy { pttl } | Reply::Queued { pttl, .. }) => Some(pttl),
                    _ => None,
                })
            }
            Err(e) if e.is_retryable() && wait != WaitMode::Try => {
                self.last_err = Some(e);
                First::Wait(self.pause_after_error(sent_at))
            }
            Err(e) => return Err(e),
        })
    }

    /// Step two, after a first try that failed unsubscribed: subscribe,
    /// then the loop tries again at once (a release, or a grant to this
    /// attempt's registration, may have landed between the first try and
    /// the subscription).
    pub(super) async fn subscribe(&mut self, waiter: Waiter) {
        let (engine, spec) = (self.client.engine(), self.ask.spec);
        let sub = engine.subscribe(&spec.channel, waiter);
        sub.confirmed(self.confirm_by()).await;
        sub.set_registered(self.queue.queued_now);
        self.sub = Some(sub);
    }

    /// Step three, the loop: wait (when a reply said how long at most),
    /// take what was handed over, else try again, until granted or out of
    /// time.
    pub(super) async fn wait_and_retry(
        mut self,
        mut next_wait: Option<i64>,
    ) -> Result<Option<Granted>> {
        loop {
            self.check_refusals()?;
            if let Some(pttl) = next_wait.take() {
                if let Some(g) = self.sleep_then_take(pttl).await {
                    return Ok(Some(g));
                }
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            match self.try_again().await? {
                Ok(g) => return Ok(Some(g)),
                Err(wait) => next_wait = wait,
            }
        }
        self.time_out().await
    }

    fn sub(&self) -> &Subscription {
        self.sub.as_ref().expect("subscribed before the loop")
    }

    /// A refused subscription ends the acquire: without the channel no
    /// release would ever wake this waiter.
    fn check_refusals(&self) -> Result<()> {
        let spec = self.ask.spec;
        if let Some(reason) = self.sub().refused() {
            return Err(Error::SubscribeRefused {
                channel: spec.channel.clone(),
                reason,
            });
        }
        Ok(())
    }

    /// Sleep for `pttl` at most (see [`sleep_until_woken`]), then take a
    /// hold handed over while asleep: by an unlock in this client, under
    /// this attempt's own id and lease, or a grant by name.
    async fn sleep_then_take(&mut self, pttl: i64) -> Option<Granted> {
        let passed = sleep_until_woken(self.client, self.sub(), pttl, self.deadline).await;
        let got = match passed {
            Some(g) => Some(Granted {
                token: g.token,
                pttl: g.pttl,
                sent_at: g.sent_at,
                extend_to: None,
                chain: g.chain,
                hold_id: Some(g.hold_id),
            }),
            None => take_named_grant(self.sub(), self.queue.entry, self.ask.ms),
        }?;
        self.attempt.win();
        self.sub().mark_acquired();
        Some(got)
    }

    /// Step four: try again. `Ok(grant)`, or `Err(wait)`: wait for that
    /// many ms at most before the next try (`None`: no wait).
    async fn try_again(&mut self) -> Result<std::result::Result<Granted, Option<i64>>> {
        self.sub().begin_try();
        let call = self.call("again");
        let (sent_at, r) = try_once(self.client, &mut self.attempt, &call).await;
        self.sub()
            .set_registered(matches!(r, Ok(Reply::Queued { .. })));
        match r {
            Ok(Reply::Granted { token, pttl }) => {
                self.sub().mark_acquired();
                Ok(Ok(Granted::from_server(token, pttl, sent_at)))
            }
            Ok(reply @ (Reply::Busy { pttl } | Reply::Queued { pttl, .. })) => {
                self.sub().tried();
                self.queue
                    .observe(self.client, self.ask.spec, reply, sent_at);
                self.last_err = None;
                self.refused = 0;
                Ok(Err(Some(pttl)))
            }
            Err(e) if e.is_retryable() => {
                let wait = self.pause_after_error(sent_at);
                if wait.is_none() {
                    self.client.conn().wait_up(self.deadline).await;
                }
                self.last_err = Some(e);
                Ok(Err(wait))
            }
            Err(e) => Err(e),
        }
    }

    /// How long to wait on the channel (a release still wakes this
    /// waiter) after a try sent at `sent_at` ended in a retryable error:
    /// [`retry_pause`], with jitter, so that waiters whose tries timed out
    /// together do not try again together. `None` while the connection is
    /// down: the caller waits for it instead, then tries at once.
    fn pause_after_error(&mut self, sent_at: Instant) -> Option<i64> {
        if !self.client.conn().is_up() {
            return None;
        }
        let timeout = self.client.config().command_timeout;
        self.refused = retry_pause(self.refused, sent_at.elapsed(), timeout);
        Some(rand::random_range(self.refused / 2..=self.refused))
    }

    /// Out of time. Off the channel first: no local hand-off may claim this
    /// waiter while its release runs (one that did, and whose unlock was
    /// then cancelled, would leave its hold with an attempt already given
    /// up). A registration it held goes with that release; only then is
    /// the next local waiter woken, to register anew (its drop would wake
    /// it before, to find the registration still there).
    async fn time_out(self) -> Result<Option<Granted>> {
        let WaitLoop {
            sub,
            queue,
            mut attempt,
            client,
            ask,
            last_err,
            ..
        } = self;
        let registered = sub.as_ref().is_some_and(Subscription::registered);
        if let Some(sub) = &sub {
            sub.set_registered(false);
        }
        drop(sub);
        drop(queue);
        match last_err {
            Some(e) => Err(e), // the armed attempt's drop hands it to the releaser
            None => {
                attempt.give_up().await;
                if registered {
                    client.engine().nudge(&ask.spec.channel);
                }
                Ok(None)
            }
        }
    }
}

/// Sleep until a release message, the holder's TTL (`pttl` from
/// the last reply), or the deadline. Woken or not, the next try tells: a
/// lease that ran out is free. A hint moves the bound without a try.
/// Returns the hold an unlock in this client handed over while it slept.
async fn sleep_until_woken(
    client: &Client,
    sub: &Subscription,
    pttl: i64,
    deadline: Option<Instant>,
) -> Option<LocalGrant> {
    let by_ttl = sleep_bound(Instant::now(), pttl, client.config().watchdog_timeout);
    let mut until = deadline.map_or(by_ttl, |d| d.min(by_ttl));
    loop {
        while let Woke::Hint(h) = sub.wait(until).await {
            until = deadline.map_or(h, |d| d.min(h));
        }
        match sub.local_wake() {
            LocalNow::Go => return None,
            LocalNow::Passed(g) => return Some(g),
            // An unlock in this client is handing its hold over: it
            // settles within its command's timeout (an unlock dropped
            // mid-call abandons the claim, which wakes this waiter).
            LocalNow::Claimed => {
                until = crate::config::after(client.config().command_timeout);
            }
        }
    }
}

/// What a waiter knows about its place in a queue: whether it was queued
/// (to notice a purge), its current entry and its liveness registration.
struct QueueState {
    /// When the attempt's first request was sent.
    started: Instant,
    queued: bool,
    /// The last reply was `Queued` (the attempt holds a registration).
    queued_now: bool,
    /// The current queue entry: its secret, and an instant no later than
    /// when the request that created it was sent (any hand-off to this entry
    /// happened after it).
    entry: Option<(u64, Instant)>,
    heartbeat: Option<HeartbeatReg>,
}

impl QueueState {
    pub(super) fn new(started: Instant) -> QueueState {
        QueueState {
            started,
            queued: false,
            queued_now: false,
            entry: None,
            heartbeat: None,
        }
    }

    fn observe(&mut self, client: &Client, spec: &AcquireSpec, reply: Reply, sent_at: Instant) {
        self.queued_now = matches!(reply, Reply::Queued { .. });
        let Reply::Queued { fresh, secret, .. } = reply else {
            return;
        };
        if fresh {
            self.entry = Some((secret, sent_at));
        } else if self.entry.map(|e| e.0) != Some(secret) {
            // The entry was created by an earlier request of this attempt
            // whose reply never came: it was sent after `started`.
            self.entry = Some((secret, self.started));
        }
        // (A registration without a queue, granted or cleared by a
        // release, is made anew as a matter of course.)
        if fresh && self.queued && spec.heartbeat.is_some() {
            tracing::warn!(kind = spec.kind, key = %spec.key,
                "waiter was purged from the queue while alive; re-enqueued at the tail");
        }
        self.queued = true;
        if self.heartbeat.is_none() {
            self.heartbeat = spec
                .heartbeat
                .as_ref()
                .map(|h| client.heartbeat().register(h));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_after_timeouts_grow_to_seconds_and_after_refusals_stay_short() {
        let (t, ms) = (Duration::from_secs(1), Duration::from_millis);
        assert_eq!(retry_pause(0, ms(1), t), 10);
        assert_eq!(retry_pause(320, ms(1), t), 500);
        assert_eq!(retry_pause(500, ms(1), t), 500);
        let mut p = 0;
        let timed_out: Vec<i64> = (0..7)
            .map(|_| {
                p = retry_pause(p, ms(1000), t);
                p
            })
            .collect();
        assert_eq!(timed_out, [1000, 2000, 4000, 8000, 16000, 30000, 30000]);
        assert_eq!(retry_pause(30_000, ms(1), t), 500, "a fast refusal again");
    }

    #[test]
    fn a_hold_ending_now_is_tried_again_at_once() {
        let now = Instant::now();
        let long = Duration::from_secs(30);
        assert_eq!(sleep_bound(now, 0, long), now + Duration::from_millis(1));
        assert_eq!(
            sleep_bound(now, 250, long),
            now + Duration::from_millis(250)
        );
        assert_eq!(sleep_bound(now, -2, long), now);
        assert_eq!(sleep_bound(now, -1, long), now + long);
    }
}
