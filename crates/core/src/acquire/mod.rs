//! The acquire loop shared by every exclusive primitive.
//!
//! A primitive describes its scripts and keys in an [`AcquireSpec`]; this
//! module runs the first attempt alone, subscribes only when it failed, tries
//! once more, then waits on the waiting engine for a release message or the
//! holder's remaining TTL, whichever is sooner, and tries again.
//!
//! Acquire scripts share one contract:
//! `ARGV = [owner, attempt, lease_ms, mode, secret, bound, extra...]`, the
//! first six always sent, in this order, whatever the spec (so no script's
//! argument moves with a builder flag), where mode is `'try'`
//! (one attempt), `'wait'` (the first try of an acquire that waits when
//! busy) or `'again'` (a later try of that acquire; scripts that need not
//! tell the two apart treat every mode but `'try'` alike), `secret` is the
//! call's entry secret (below; `'0'` when grants do not come by name),
//! `bound` the stale-hold bound of [`HoldSet::acquire_arg`](crate::HoldSet::acquire_arg)
//! (`'0'` without a set of live holds), and `extra` the spec's own; reply
//! `{1, token, pttl}` granted, `{0, pttl}` busy (nothing recorded),
//! `{2, pttl, fresh, secret}` queued (the attempt is recorded and must be
//! released when the caller gives up; `secret` identifies the queue entry).
//! Specs with hand-off by name ([`AcquireBuilder::tagged`]) send as `secret`
//! a fresh random one per call, stored with the
//! queue entry the call creates and echoed by a hand-off message for that
//! entry. A hand-off is accepted only when it carries the secret of the
//! waiter's current entry: a late grant for an entry the waiter already lost
//! (purged, re-enqueued) or a forged one is ignored, and the waiter asks the
//! server instead. Release scripts take `ARGV = [attempt, extra...]` and
//! reply 0 when the attempt held nothing; a reply of 4 (specs with
//! [`AcquireBuilder::pass`]) means released and
//! granted to another client's waiter, and one waiter of this client is
//! woken to ask the server (the grant's message went to that client alone).
//!
//! Every acquire carries an attempt id. While a request of the attempt may
//! have been recorded by the server (in flight, `Indeterminate`, or queued),
//! the attempt is *armed*: if the future is dropped, or the call ends, the
//! release-by-attempt is handed to the background releaser, exactly once.
//! A retry of the attempt is idempotent on the server.

use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::config::lease_ms;
use crate::ctx::Client;
use crate::error::{Error, Result};
use crate::heartbeat::HeartbeatReg;
use crate::hold::{valid_until, Hold, HoldSpec, LeaseMode, PassSpec};
use crate::scripts::ScriptCall;
use crate::wait::local::{LocalGrant, LocalNow, LocalWaiter};
use crate::wait::{Subscription, Waiter, Woke};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

mod spec;
pub use spec::{AcquireBuilder, AcquireSpec, ConditionBuilder, ConditionSpec, WaitMode};

/// A decoded acquire reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    Granted { token: u64, pttl: u64 },
    Busy { pttl: i64 },
    Queued { pttl: i64, fresh: bool, secret: u64 },
}

fn decode(v: &[i64]) -> Result<Reply> {
    match v {
        [1, token, pttl, ..] => Ok(Reply::Granted {
            token: token.unsigned_abs(),
            pttl: pttl.unsigned_abs(),
        }),
        [0, pttl, ..] => Ok(Reply::Busy { pttl: *pttl }),
        [2, pttl, rest @ ..] => Ok(Reply::Queued {
            pttl: *pttl,
            fresh: rest.first() == Some(&1),
            secret: rest.get(1).map_or(0, |s| s.unsigned_abs()),
        }),
        _ => Err(Error::InvalidArgument(format!(
            "unexpected acquire reply {v:?}"
        ))),
    }
}

/// A fresh attempt id: 64 random bits in hex, then `s` and the attempt's
/// sequence number, which rises with every id this process draws (see
/// [`attempt_seq`]). Short, because registrations carry it and stay in
/// Redis's compact encodings only while each value is at most 64 bytes.
pub fn new_attempt_id() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(1);
    let a: u64 = rand::random();
    let seq = SEQ.fetch_add(1, Ordering::SeqCst);
    format!("{a:016x}s{seq}")
}

/// The sequence number of an attempt id drawn by [`new_attempt_id`] (0 for
/// an id without one). An attempt drawn after another has a larger one;
/// the scripts read it the same way (`hold_seq` in `lua/hold_lib.lua`).
pub fn attempt_seq(attempt: &str) -> u64 {
    attempt
        .rsplit_once('s')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0)
}

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

/// What the loop got: a grant, with the instant its validity counts from.
struct Granted {
    token: u64,
    pttl: u64,
    sent_at: Instant,
    /// A hand-off under a claim lease shorter than the lease asked for:
    /// extend to this many ms in the background.
    extend_to: Option<u64>,
    /// Local hand-offs in a row while other clients waited (0 for a grant
    /// from the server).
    chain: u32,
    /// A local hand-off's hold id, already listed.
    hold_id: Option<u64>,
}

impl Granted {
    /// A grant in an acquire script's reply.
    fn from_server(token: u64, pttl: u64, sent_at: Instant) -> Granted {
        Granted {
            token,
            pttl,
            sent_at,
            extend_to: None,
            chain: 0,
            hold_id: None,
        }
    }
}

/// The release-by-attempt call of `spec` for `attempt`.
fn release_call(spec: &AcquireSpec, attempt: &str) -> ScriptCall {
    ScriptCall::new(
        spec.release,
        spec.release_keys.clone(),
        std::iter::once(attempt.to_string())
            .chain(spec.release_extra.iter().cloned())
            .collect(),
    )
}

/// A registration's secret: random, in 1 .. 2^32. It tells apart the
/// registrations of one attempt (a late grant of an earlier one is not
/// taken); a forger would need the attempt id too. At most ten digits, to
/// keep registrations short (see [`new_attempt_id`]).
fn new_secret() -> u64 {
    rand::random_range(1..(1u64 << 32))
}

/// Hands the release of an attempt to the releaser if dropped while armed.
struct Attempt<'a> {
    client: &'a Client,
    release: ScriptCall,
    /// The acquire records something on the server (false for condition
    /// waits, which only read).
    records: bool,
    /// The server may hold a record of this attempt (in flight, Indeterminate).
    in_doubt: bool,
    /// The server holds a queue entry for this attempt.
    queued: bool,
    /// Nothing of the attempt is left to release: it ended with the hold,
    /// or its release ran.
    done: bool,
    /// It ended with the hold.
    won: bool,
    /// Set when an unlock in this client may hand its hold to the attempt.
    local: Option<Arc<LocalWaiter>>,
    /// The channel the attempt waits on (with `local`).
    channel: Option<&'a str>,
    /// The attempt registers for grants beside unnamed wake-ups
    /// (`grants_by_name`): when it leaves registered, its
    /// client's next waiter is woken once the release cleared the
    /// registration (woken before, its try would find the registration
    /// still there and sleep unregistered).
    nudge: bool,
}

impl Attempt<'_> {
    /// Whether the attempt must be released if it ends now without the
    /// hold: a request of it may have been recorded, it is queued, or a
    /// local hand-off to it may have landed unseen (its unlock gave up on
    /// the answer: [`LocalWaiter::doubted`]).
    fn armed(&self) -> bool {
        self.records
            && !self.done
            && (self.in_doubt || self.queued || self.local.as_ref().is_some_and(|l| l.doubted()))
    }

    fn disarm(&mut self) {
        self.in_doubt = false;
        self.queued = false;
    }

    /// The attempt holds the lock: nothing of it is ever released here.
    fn win(&mut self) {
        self.disarm();
        self.done = true;
        self.won = true;
    }

    /// Leave the queue now (awaited), falling back to the releaser.
    async fn give_up(&mut self) {
        if !self.armed() {
            return;
        }
        if self.client.run::<i64>(&self.release).await.is_ok() {
            self.disarm();
            self.done = true;
        }
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        // A hold handed over locally that the waiter did not take (it was
        // cancelled in between) is released like an armed attempt.
        let passed = self.local.as_ref().and_then(|l| l.leave());
        if let (Some(g), Some(channel)) = (passed, self.channel) {
            self.client.engine().unlist_hold(channel, g.hold_id);
        }
        let passed = passed.is_some();
        // A local hand-off claimed the waiter after its own release ran
        // (between its last wake-up and leaving the channel), and its unlock
        // gave up on the answer: the hold may be this attempt's now.
        let doubted_late = !self.won && self.local.as_ref().is_some_and(|l| l.doubted());
        // Also during shutdown: the releaser runs until shutdown closes it,
        // so a waiter woken by shutdown leaves its queue.
        if self.armed() && self.queued && self.nudge {
            if let Some(channel) = self.channel {
                let (client, channel) = (self.client.clone(), channel.to_string());
                self.client
                    .release_in_background_then(self.release.clone(), move || {
                        client.engine().nudge(&channel)
                    });
                return;
            }
        }
        if self.armed() || passed || doubted_late {
            self.client.release_in_background(self.release.clone());
        }
    }
}

/// [`Client::acquire`]: the attempt id, the loop, then the hold.
pub(crate) async fn acquire(
    client: &Client,
    spec: &AcquireSpec,
    owner: &str,
    lease: LeaseMode,
    wait: WaitMode,
) -> Result<Option<Hold>> {
    let ms = match lease {
        LeaseMode::Watchdog => lease_ms(client.config().watchdog_timeout)?,
        LeaseMode::Fixed(d) => lease_ms(d)?,
    };
    // Counted until the hold is registered: shutdown waits for running
    // acquires and then retires every registered hold, so a grant that
    // lands during shutdown is retired too. (A hold registered after the
    // retiring step stayed in Redis until its lease ended: the likely
    // cause of one torture failure: a hold left after shutdown.)
    let _running = client.acquire_token();
    let wait = after_own_releases(client, &spec.key, wait).await;
    // Entered before the attempt id is drawn (see `HoldSet::acquire_arg`).
    let _this_handle = spec.live.as_ref().map(|s| s.enter());
    let (attempt_id, got) = acquire_past_own_holds(client, spec, owner, ms, wait).await;
    let Some(granted) = got? else {
        return Ok(None);
    };
    let hold = new_hold(client, spec, owner, lease, attempt_id, granted);
    // The hold exists first, so an acquire cancelled while waiting for the
    // replicas drops it, which releases it in the background.
    if let Err(e) = client.await_replicas(&spec.key).await {
        // Granted, but not known to survive a failover: give it back (the
        // drop releases it in the background).
        hold.inner.finish(crate::hold::LeaseState::Released);
        return Err(e);
    }
    Ok(Some(hold))
}

/// Run the acquire loop with fresh attempts while the script refuses as an
/// upgrade a hold of this owner that is no live hold here: the owner's own
/// hold, dropped but not yet released (its release is still on its way,
/// say after a partition): for the caller it is gone, so this is no
/// upgrade. The acquire goes after that release, and a try that cannot is
/// busy. Or no hold of this client on the key is live here at all: the
/// server's hold of this owner is an orphan (its release gave up during an
/// outage, or its grant never reached us), which its lease ends; the
/// acquire waits for that as for a busy lock (paced 20 to 500 ms).
/// Returns the last attempt's id and outcome.
async fn acquire_past_own_holds(
    client: &Client,
    spec: &AcquireSpec,
    owner: &str,
    ms: u64,
    mut wait: WaitMode,
) -> (String, Result<Option<Granted>>) {
    let mut orphan_pause = Duration::ZERO;
    loop {
        let attempt_id = new_attempt_id();
        let ask = Ask {
            spec,
            owner,
            ms,
            wait,
            attempt_id: &attempt_id,
            records: true,
        };
        match run_acquire(client, ask).await {
            Err(Error::UpgradeNotSupported)
                if client.releaser().pending_for(&spec.key) || !client.has_live_hold(&spec.key) => {
            }
            r => return (attempt_id, r),
        }
        if wait == WaitMode::Try {
            return (attempt_id, Ok(None));
        }
        let ends = wait.deadline();
        if client.releaser().pending_for(&spec.key) {
            if !client.releaser().settled(&spec.key, ends).await {
                return (attempt_id, Ok(None));
            }
        } else {
            orphan_pause =
                (orphan_pause * 2).clamp(Duration::from_millis(20), Duration::from_millis(500));
            let until = crate::config::after(orphan_pause);
            tokio::time::sleep_until(ends.map_or(until, |d| d.min(until))).await;
            if ends.is_some_and(|d| Instant::now() >= d) {
                return (attempt_id, Ok(None));
            }
        }
        wait = wait_left(wait, ends);
    }
}

/// What is left of `wait` whose deadline is `ends` (a bounded wait whose
/// time is up becomes a try).
fn wait_left(wait: WaitMode, ends: Option<Instant>) -> WaitMode {
    match (wait, ends) {
        (WaitMode::For(_), Some(d)) => match d.saturating_duration_since(Instant::now()) {
            left if left.is_zero() => WaitMode::Try,
            left => WaitMode::For(left),
        },
        _ => wait,
    }
}

/// The hold of a grant of `spec` to `attempt_id`: registered with the
/// client (and its watchdog), extended in the background when it came
/// under a short claim, and added to the handle's hold set.
fn new_hold(
    client: &Client,
    spec: &AcquireSpec,
    owner: &str,
    lease: LeaseMode,
    attempt_id: String,
    g: Granted,
) -> Hold {
    let hold = Hold::with_id(
        g.hold_id,
        client,
        HoldSpec {
            kind: spec.kind,
            key: spec.key.clone(),
            renew: spec.renew,
            renew_keys: spec.renew_keys.clone(),
            release: release_call(spec, &attempt_id),
            pass: spec.pass.map(|script| PassSpec {
                script,
                keys: spec.keys.clone(),
                channel: spec.channel.clone(),
                class: spec.class,
                owner: owner.to_string(),
            }),
        },
        crate::hold::Grant {
            attempt: attempt_id,
            token: g.token,
            mode: lease,
            sent_at: g.sent_at,
            pttl_ms: g.pttl,
        },
    );
    if let Some(ms) = g.extend_to {
        hold.extend_in_background(ms, g.pttl);
    }
    hold.inner.chain.store(g.chain, Ordering::Relaxed);
    if let Some(set) = &spec.live {
        set.add(&hold);
    }
    hold
}

/// Wait until this client's background releases of `key` (guards dropped
/// a moment ago, cancelled attempts) have run, and return what is left of
/// `wait`: the client's own earlier holds are gone from the server before
/// its next acquire looks, so a drop followed by an acquire never finds
/// the dropped hold (a read hold would read as an upgrade). Bounded by the
/// command timeout and the wait; free when nothing is pending.
/// A waiting acquire that then finds the server down rides the outage
/// out in its own loop (whose tries go after the releases, which wait for
/// the connection as well).
async fn after_own_releases(client: &Client, key: &str, wait: WaitMode) -> WaitMode {
    let releaser = &client.releaser();
    // While the connection is known down the releases wait for it too,
    // and the acquire fails (a try) or rides it out (a wait) as before.
    if releaser.pending() == 0 || !client.conn().is_up() {
        return wait;
    }
    // At most a command timeout: a release normally lands within a round
    // trip, and one that cannot be confirmed (late replies, retried in the
    // background until its bound) must not hold the acquire back for long.
    let bound = crate::config::after(client.config().command_timeout);
    let ends = wait.deadline();
    // A try waits too (its own deadline is now): up to the bound.
    let settle_until = match wait {
        WaitMode::Try => bound,
        _ => ends.map_or(bound, |d| d.min(bound)),
    };
    releaser.settled(key, Some(settle_until)).await;
    wait_left(wait, ends)
}

/// [`Client::wait_until`]: the loop for a condition that records nothing.
pub(crate) async fn wait_until(
    client: &Client,
    spec: &ConditionSpec,
    owner: &str,
    wait: WaitMode,
) -> Result<bool> {
    let attempt_id = new_attempt_id();
    let got = run_acquire(
        client,
        Ask {
            spec: &spec.0,
            owner,
            ms: 1,
            wait,
            attempt_id: &attempt_id,
            records: false,
        },
    )
    .await?;
    Ok(got.is_some())
}

/// One acquire call's parameters, as the loop's steps read them.
#[derive(Clone, Copy)]
struct Ask<'a> {
    spec: &'a AcquireSpec,
    owner: &'a str,
    /// The lease in ms.
    ms: u64,
    wait: WaitMode,
    attempt_id: &'a str,
    /// The acquire records something on the server (false for condition
    /// waits, which only read).
    records: bool,
}

async fn run_acquire(client: &Client, ask: Ask<'_>) -> Result<Option<Granted>> {
    client.check_open()?;
    // Counted while running, so shutdown can wait for woken waiters to
    // leave (dropped after the attempt, which hands over its release).
    let _running = client.acquire_token();
    let span = tracing::debug_span!("acquire", kind = ask.spec.kind, key = %ask.spec.key,
        owner = ask.owner, attempt = %ask.attempt_id);
    let started = Instant::now();
    let r = acquire_inner(client, ask).instrument(span.clone()).await;
    span.in_scope(|| {
        tracing::debug!(outcome = match &r { Ok(Some(_)) => "acquired", Ok(None) => "timed out", Err(_) => "error" },
            waited = ?started.elapsed(), "acquire done");
    });
    let outcome = match &r {
        Ok(Some(_)) => "acquired",
        Ok(None) => "timed_out",
        Err(e) => e.kind(),
    };
    crate::metrics::acquire(ask.spec.kind, outcome, started.elapsed());
    r
}

/// The acquire loop: the first try (after joining the channel when this
/// client listens on it already), the subscription when that try failed,
/// then waits and tries until granted or out of time. Each step is a
/// method of [`Loop`].
async fn acquire_inner(client: &Client, ask: Ask<'_>) -> Result<Option<Granted>> {
    let (mut run, waiter) = Loop::new(client, ask);
    let next_wait = match run.first_try().await? {
        First::Done(got) => return Ok(got),
        First::Wait(next_wait) => next_wait,
    };
    if run.sub.is_none() {
        run.subscribe(waiter).await;
    }
    run.wait_and_retry(next_wait).await
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
enum First {
    /// The acquire is over: granted, or a try that found it busy.
    Done(Option<Granted>),
    /// Wait (for this many ms at most, when already subscribed), then try.
    Wait(Option<i64>),
}

/// One acquire's state between its steps. The fields drop in this order
/// (the subscription first, the attempt last): no local hand-off may claim
/// the waiter once its attempt's release may run, and a heartbeat stops
/// before the release of its entry is handed over.
struct Loop<'a> {
    /// The subscription to the primitive's channel (joined before the
    /// first try when this client listens there already).
    sub: Option<Subscription>,
    queue: QueueState,
    attempt: Attempt<'a>,
    client: &'a Client,
    ask: Ask<'a>,
    deadline: Option<Instant>,
    /// The last retryable error, returned if the time runs out with it.
    last_err: Option<Error>,
    /// The pause after the last retryable error (ms): [`retry_pause`].
    refused: i64,
}

impl<'a> Loop<'a> {
    /// The attempt, and the waiter it sleeps as. A channel this client
    /// already listens on (another local waiter, or one lingering after a
    /// recent wait) costs nothing to join: it is joined before the first
    /// try, and the try after subscribing is not needed, since no release
    /// can fall between the two.
    fn new(client: &'a Client, ask: Ask<'a>) -> (Loop<'a>, Waiter) {
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
        let attempt = Attempt {
            client,
            release,
            records: ask.records,
            in_doubt: false,
            queued: false,
            done: false,
            won: false,
            local: local.clone(),
            channel: Some(&spec.channel),
            nudge: spec.grants.also_unnamed(),
        };
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
        let run = Loop {
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
        let Ask {
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
    async fn first_try(&mut self) -> Result<First> {
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
    async fn subscribe(&mut self, waiter: Waiter) {
        let (engine, spec) = (self.client.engine(), self.ask.spec);
        let sub = engine.subscribe(&spec.channel, waiter);
        sub.confirmed(self.confirm_by()).await;
        sub.set_registered(self.queue.queued_now);
        self.sub = Some(sub);
    }

    /// Step three, the loop: wait (when a reply said how long at most),
    /// take what was handed over, else try again, until granted or out of
    /// time.
    async fn wait_and_retry(mut self, mut next_wait: Option<i64>) -> Result<Option<Granted>> {
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
        let Loop {
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

/// One try. Returns when the request was sent and the decoded
/// reply or the error, keeping the attempt's armed state right.
async fn try_once(
    client: &Client,
    attempt: &mut Attempt<'_>,
    call: &ScriptCall,
) -> (Instant, Result<Reply>) {
    let prior_doubt = attempt.in_doubt;
    attempt.in_doubt = true;
    let sent_at = Instant::now();
    let r = match client.run::<Vec<i64>>(call).await {
        Ok(v) => decode(&v),
        Err(e) => Err(e),
    };
    match &r {
        Ok(Reply::Granted { .. }) => attempt.win(),
        Ok(Reply::Busy { .. }) => {
            // A definite "not granted" settles earlier doubts too; a
            // queue entry is dropped by the script when it answers busy.
            attempt.disarm();
        }
        Ok(Reply::Queued { .. }) => {
            attempt.in_doubt = false;
            attempt.queued = true;
        }
        // It may have run. So may a script that failed with a raw error of
        // Redis: that can come from a command part way through it (a later
        // command refused: NOPERM, a value out of range), after it queued
        // the attempt, and a release may since have granted it. Keep the
        // doubt: the release by attempt finds nothing when nothing was
        // written.
        Err(Error::Indeterminate(_) | Error::Redis(_)) => {}
        // The scripts' own refusals come before their first write, and a
        // server that refused the call ran none of it: an earlier request
        // of the attempt may have been recorded all the same.
        Err(_) => attempt.in_doubt = prior_doubt,
    }
    (sent_at, r)
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

/// For hand-offs by name: a message that names this attempt
/// carries the token, the claim lease and the entry's secret. The lock is
/// taken without a round trip when the grant is for the current queue
/// entry (`entry`: its secret, and an instant no later than when the
/// request that created it was sent) and its claim is still good counted
/// from then. Anything else (a late grant for a lost entry, a forgery) is
/// left to the next try. A claim whose validity is mostly gone is not
/// worth a guard that turns `Lost` at once: the next try (a pick-up call)
/// extends it to the real lease instead.
fn take_named_grant(sub: &Subscription, entry: Option<(u64, Instant)>, ms: u64) -> Option<Granted> {
    let (g, (current, t0)) = (sub.take_grant()?, entry?);
    let (token, ttl) = (g.token, g.ttl_ms);
    let useful = Duration::from_millis(g.claim_ms / 3).max(Duration::from_millis(1));
    (g.secret == current && valid_until(t0, ttl) > Instant::now() + useful).then_some(Granted {
        token,
        pttl: ttl,
        sent_at: t0,
        extend_to: (ms > g.claim_ms).then_some(ms),
        chain: 0,
        hold_id: None,
    })
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
    fn new(started: Instant) -> QueueState {
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
    fn decodes_replies() {
        assert_eq!(
            decode(&[1, 7, 100]).unwrap(),
            Reply::Granted {
                token: 7,
                pttl: 100
            }
        );
        assert_eq!(decode(&[0, 50]).unwrap(), Reply::Busy { pttl: 50 });
        assert_eq!(
            decode(&[2, 50, 1, 9]).unwrap(),
            Reply::Queued {
                pttl: 50,
                fresh: true,
                secret: 9
            }
        );
        let s = new_secret();
        assert!(s > 0 && s < (1 << 53));
        assert!(decode(&[]).is_err());
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

    #[test]
    fn attempt_ids_are_unique_and_numbered_in_order() {
        let a = new_attempt_id();
        let b = new_attempt_id();
        assert_ne!(a, b);
        assert!(a.starts_with(|c: char| c.is_ascii_hexdigit()));
        assert!(attempt_seq(&a) > 0);
        assert!(attempt_seq(&b) > attempt_seq(&a));
        assert_eq!(attempt_seq("00ff"), 0);
    }
}
