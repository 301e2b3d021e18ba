//! The acquire loop shared by every exclusive primitive.
//!
//! A primitive describes its scripts and keys in an [`AcquireSpec`]; this
//! module runs the first attempt alone, subscribes only when it failed, tries
//! once more, then waits on the waiting engine for a release message or the
//! holder's remaining TTL, whichever is sooner, and tries again.
//!
//! The scripts' argument and reply contract is written once, on
//! [`AcquireSpec`].
//!
//! Every acquire carries an attempt id. While a request of the attempt may
//! have been recorded by the server (in flight, `Indeterminate`, or queued),
//! the attempt is *armed*: if the future is dropped, or the call ends, the
//! release-by-attempt is handed to the background releaser, exactly once.
//! A retry of the attempt is idempotent on the server.

use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use std::sync::atomic::Ordering;

use crate::client::Client;
use crate::config::lease_ms;
use crate::error::{Error, Result};
use crate::hold::{Hold, HoldSpec, LeaseMode, PassSpec};

mod attempt;
mod reply;
mod spec;
mod wait_loop;
pub(crate) use attempt::new_attempt_id;
use attempt::release_call;
use reply::Granted;
pub use spec::{AcquireBuilder, AcquireSpec, ConditionBuilder, ConditionSpec, WaitMode};
use wait_loop::{First, WaitLoop};

impl Client {
    /// Acquire a hold as described by `spec` for `owner` (a primitive's
    /// handle calls it from its [`Acquire::acquire_with`](crate::Acquire::acquire_with)).
    ///
    /// Returns `Ok(None)` when the wait ended without the hold.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad lease (nothing sent);
    /// [`Error::Unavailable`] / [`Error::Indeterminate`] when the time ran out
    /// while Redis could not answer (any possible grant is already with the
    /// releaser); [`Error::WrongType`], [`Error::Redis`], [`Error::Shutdown`].
    ///
    /// # Cancel safety
    /// Cancel safe in effect: if dropped after a request may have reached
    /// Redis, the possible grant or queue entry is released exactly once by
    /// the background releaser (or expires with its lease).
    pub async fn acquire(
        &self,
        spec: &AcquireSpec,
        owner: &str,
        lease: LeaseMode,
        wait: WaitMode,
    ) -> Result<Option<Hold>> {
        crate::acquire::acquire(self, spec, owner, lease, wait).await
    }

    /// Wait until a condition holds (for example a count reaching zero),
    /// with the acquire loop: the first try alone, then a subscription, a
    /// catch-up try and waits on the channel. The check replies `{1, ...}`
    /// when the condition holds and `{0, pttl}` when not (nothing is
    /// recorded, so nothing is released). Returns whether the condition
    /// held before the wait ended.
    ///
    /// # Errors
    /// As [`Client::acquire`].
    ///
    /// # Cancel safety
    /// Cancel safe: the tries record nothing.
    pub async fn wait_until(
        &self,
        spec: &ConditionSpec,
        owner: &str,
        wait: WaitMode,
    ) -> Result<bool> {
        crate::acquire::wait_until(self, spec, owner, wait).await
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
        let ask = AcquireCall {
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
        AcquireCall {
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
struct AcquireCall<'a> {
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

async fn run_acquire(client: &Client, ask: AcquireCall<'_>) -> Result<Option<Granted>> {
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
/// method of [`WaitLoop`].
async fn acquire_inner(client: &Client, ask: AcquireCall<'_>) -> Result<Option<Granted>> {
    let (mut run, waiter) = WaitLoop::new(client, ask);
    let next_wait = match run.first_try().await? {
        First::Done(got) => return Ok(got),
        First::Wait(next_wait) => next_wait,
    };
    if run.sub.is_none() {
        run.subscribe(waiter).await;
    }
    run.wait_and_retry(next_wait).await
}
