//! Local hand-off (lock cohorting): an unlock that finds a sleeping waiter
//! of its own client hands its hold straight to it, in one script call,
//! instead of a release, a message and the waiter's acquire.
//!
//! The waiter's side ([`LocalWaiter`](crate::wait::local::LocalWaiter), the states in [`Local`](crate::wait::local::Local)) is kept by
//! the waiting engine's slot; the engine claims a waiter for an unlock
//! (`Engine::claim`, under the table lock); the unlock runs the hand-off
//! ([`Hold::pass_locally`]) and settles the [`Claim`]: delivered, cancelled
//! (nothing handed over) or abandoned (the outcome is unknown: the waiter's
//! attempt is in doubt). See docs/architecture.md, "Wake-ups and local
//! hand-off".

use std::sync::atomic::Ordering;

use tokio::time::Instant;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::hold::{valid_until, Hold, LeaseState, NEXT_HOLD};
use crate::scripts::ScriptCall;
use crate::wait::local::{Claim, Delivered, LocalGrant};

impl Hold {
    /// Hand the hold straight to a sleeping waiter of this client, when
    /// the primitive supports it and the budget allows. `None` when no
    /// hand-off was tried: the caller releases as usual.
    pub(crate) async fn pass_locally(&mut self) -> Option<Result<()>> {
        let inner = self.inner.clone();
        let p = inner.spec.pass.as_ref()?;
        let client = &self.client;
        let engine = client.engine();
        let budget = client.config().local_handoffs;
        let chain = inner.chain.load(Ordering::Relaxed);
        // After `budget` local hand-offs in a row while waiters of other
        // clients waited, release to them instead (the release grants to
        // the waiter the longest-waiting client registered).
        let want = budget > 0 && chain < budget && client.check_open().is_ok();
        // Until the call's outcome is known, the claim is in flight: if
        // this future is dropped mid-call, the guard abandons it (the
        // hand-off may land after all) instead of just waking the waiter.
        let mut in_flight = InFlight {
            claim: Some(engine.claim(&p.channel, p.class, inner.id, want)?),
            client,
        };
        let w = in_flight.claim().waiter();
        let call = ScriptCall::new(
            p.script,
            p.keys.clone(),
            vec![
                inner.attempt.clone(),
                w.owner.clone(),
                w.attempt.clone(),
                w.lease_ms.to_string(),
            ],
        );
        let release_new = w.release.clone();
        let owner_new = w.owner.clone();
        let sent_at = Instant::now();
        let r = client.run::<Vec<i64>>(&call).await;
        tracing::debug!(kind = inner.spec.kind, key = %inner.spec.key, attempt = %inner.attempt,
            reply = ?r.as_ref().ok(), elapsed = ?sent_at.elapsed(), "local hand-off");
        let claim = in_flight.settle();
        Some(match r {
            Ok(v) => match v.as_slice() {
                [2, token, pttl, others, ..] => {
                    self.armed = false;
                    inner.state.send_replace(LeaseState::Released);
                    let pttl = pttl.unsigned_abs();
                    let grant = LocalGrant {
                        token: token.unsigned_abs(),
                        pttl,
                        sent_at,
                        chain: if *others != 0 { chain + 1 } else { 0 },
                        hold_id: NEXT_HOLD.fetch_add(1, Ordering::Relaxed),
                    };
                    deliver(client, &p.channel, claim, grant, &owner_new, release_new);
                    Ok(())
                }
                [1, ..] => {
                    // An inner hold of a re-entered lock: still held.
                    claim.cancel(false);
                    self.armed = false;
                    inner.state.send_replace(LeaseState::Released);
                    Ok(())
                }
                _ => {
                    // Not held any more: the lock may be free.
                    claim.cancel(true);
                    self.armed = false;
                    inner.finish(LeaseState::Lost);
                    Err(Error::NotHeld)
                }
            },
            Err(e) => {
                if e.is_indeterminate() {
                    // The hand-off may have landed: the waiter asks the
                    // server (it finds such a hold under its attempt id),
                    // and releases its attempt if it ends without the lock.
                    abandon(claim, client);
                    inner.finish(LeaseState::Unknown);
                } else {
                    // Not run (or refused with nothing written): the
                    // waiter asks the server.
                    claim.cancel(true);
                }
                // Still armed unless shut down: the drop hands the release
                // (a no-op after a hand-off that landed) to the releaser.
                Err(e)
            }
        })
    }
}

/// Give a hand-off that landed to its waiter: listed before it is
/// delivered, so a waiter of this client that comes now sleeps on the new
/// hold at once; unlisted again when the waiter keeps it under a record of
/// its own, and released when the waiter left while the call ran (the hold
/// is its attempt's now).
fn deliver(
    client: &Client,
    channel: &str,
    claim: Claim,
    grant: LocalGrant,
    owner: &str,
    release: ScriptCall,
) {
    let engine = client.engine();
    let valid = valid_until(grant.sent_at, grant.pttl);
    engine.list_hold(channel, grant.hold_id, owner, valid);
    match claim.deliver(grant) {
        Delivered::Yes => {}
        Delivered::Took => engine.unlist_hold(channel, grant.hold_id),
        Delivered::Left => {
            engine.unlist_hold(channel, grant.hold_id);
            client.release_in_background(release);
        }
    }
}

/// A local hand-off's claim while its call is in flight (see
/// [`Hold::pass_locally`]).
struct InFlight<'a> {
    claim: Option<Claim>,
    client: &'a Client,
}

impl InFlight<'_> {
    fn claim(&self) -> &Claim {
        self.claim.as_ref().expect("claim in flight")
    }

    /// The call's outcome is known: the caller settles the claim.
    fn settle(&mut self) -> Claim {
        self.claim.take().expect("claim in flight")
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        // The unlock was cancelled mid-call: the hand-off may land yet.
        if let Some(claim) = self.claim.take() {
            abandon(claim, self.client);
        }
    }
}

/// Abandon a claim whose hand-off may have landed ([`Claim::abandon`]): a
/// waiter that left already has its attempt released in the background.
fn abandon(claim: Claim, client: &Client) {
    let release = claim.waiter().release.clone();
    if claim.abandon() {
        client.release_in_background(release);
    }
}
