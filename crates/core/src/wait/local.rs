//! The local hand-off's states, beside the waiting engine whose slots
//! keep them: the waiter's side ([`LocalWaiter`], the states in [`Local`])
//! and the unlock's [`Claim`] on it (delivered, cancelled or abandoned).
//! The unlock that runs the hand-off is `Hold::pass_locally`
//! (`handoff.rs`); see docs/architecture.md, "Wake-ups and local hand-off".

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::scripts::ScriptCall;
use crate::wait::Slot;

/// A waiter an unlock in this client may hand its hold to directly (local
/// hand-off): who it is, what it asked for, and where it stands.
#[derive(Debug)]
pub(crate) struct LocalWaiter {
    pub(crate) owner: String,
    pub(crate) attempt: String,
    pub(crate) lease_ms: u64,
    /// Release-by-attempt of this waiter's attempt (for a hand-off that
    /// lands after the waiter left).
    pub(crate) release: ScriptCall,
    pub(crate) state: Mutex<Local>,
    /// A claim on this waiter ended without its unlock knowing whether the
    /// hand-off landed (cancelled mid-call, or `Indeterminate`): the lock
    /// may be held under this waiter's attempt. Sticky: the waiter's
    /// attempt counts as armed until it ends with the lock, so a waiter
    /// that leaves without it (cancelled, out of time, an error) releases
    /// its attempt (a no-op when the hand-off never landed). Set under
    /// `state`'s lock while the waiter is still there ([`Claim::abandon`]).
    doubted: AtomicBool,
}

/// A hold handed over locally: what the hand-off script answered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalGrant {
    pub(crate) token: u64,
    pub(crate) pttl: u64,
    /// When the hand-off call was sent (validity counts from it).
    pub(crate) sent_at: Instant,
    /// Local hand-offs in a row while other clients waited, this one included.
    pub(crate) chain: u32,
    /// The id of the new hold, listed (see [`Engine::held`]) before it was
    /// delivered, so a waiter that comes meanwhile sleeps on it.
    pub(crate) hold_id: u64,
}

/// How [`Claim::deliver`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivered {
    /// The waiter has it.
    Yes,
    /// The waiter got the same hold from the server first (a try that
    /// landed after the hand-off): it makes its own hold record.
    Took,
    /// The waiter left: the caller releases the hold.
    Left,
}

/// Where a [`LocalWaiter`] stands. A claimed waiter starts no new try
/// until the claim is settled. A try already in flight is harmless: the
/// lock is held by the claiming unlock until its hand-off lands, so the
/// try either finds it busy (before) or finds the waiter's own attempt
/// holding it (after: a replay of the same hold, same token).
#[derive(Debug)]
pub(crate) enum Local {
    /// Waiting (asleep, or trying): an unlock may claim it.
    Waiting,
    /// An unlock is handing its hold to this waiter.
    Claimed,
    /// Handed over; the waiter has not taken it yet.
    Passed(LocalGrant),
    /// Granted by the server. A hand-off that lands anyway is that same
    /// hold (see above): it is neither delivered nor released.
    Took,
    /// Gone, or took what it was handed.
    Left,
}

/// What a waiter finds after a wake-up.
#[derive(Debug)]
pub(crate) enum LocalNow {
    /// Go on as usual (try at the server).
    Go,
    /// A hand-off is under way: wait for it to settle.
    Claimed,
    /// The hold was handed over.
    Passed(LocalGrant),
}

impl LocalWaiter {
    pub(crate) fn new(owner: &str, attempt: &str, lease_ms: u64, release: ScriptCall) -> Self {
        LocalWaiter {
            owner: owner.to_string(),
            attempt: attempt.to_string(),
            lease_ms,
            release,
            state: Mutex::new(Local::Waiting),
            doubted: AtomicBool::new(false),
        }
    }

    /// Whether a hand-off to this waiter may have landed unseen (see
    /// [`Claim::abandon`]): its attempt must then be released if it ends
    /// without the lock.
    pub(crate) fn doubted(&self) -> bool {
        self.doubted.load(Ordering::SeqCst)
    }

    /// The waiter leaves. Returns the hold handed to it and not taken:
    /// the caller must release it (and take it off the list). A claim
    /// still under way finds the waiter gone and does both itself.
    ///
    /// A waiter that took the hold itself (`Took`) stays so: a hand-off
    /// that lands after it left is that same hold (its own try found it, a
    /// replay of its attempt), so the claim must see `Took` and keep it,
    /// not `Left` and release it. (Found in CI: the release of such a late
    /// hand-off took the hold from under the waiter's `Active` guard, whose
    /// unlock then said `NotHeld`.)
    pub(crate) fn leave(&self) -> Option<LocalGrant> {
        let mut st = self.state.lock();
        if matches!(*st, Local::Took) {
            return None;
        }
        match std::mem::replace(&mut *st, Local::Left) {
            Local::Passed(g) => Some(g),
            _ => None,
        }
    }
}

/// An unlock's claim on a sleeping local waiter. Settled by
/// [`Claim::deliver`], [`Claim::cancel`] (nothing was handed over) or
/// [`Claim::abandon`] (the hand-off may have landed); dropped unsettled it
/// is abandoned, which wakes the waiter with its attempt in doubt.
#[derive(Debug)]
pub(crate) struct Claim {
    pub(crate) slot: Arc<Slot>,
    pub(crate) settled: bool,
}

impl Claim {
    /// The claimed waiter.
    pub(crate) fn waiter(&self) -> &LocalWaiter {
        self.slot
            .local
            .as_ref()
            .expect("only local waiters are claimed")
    }

    /// Hand the hold over.
    pub(crate) fn deliver(mut self, grant: LocalGrant) -> Delivered {
        self.settled = true;
        let mut st = self.waiter().state.lock();
        match *st {
            Local::Took => return Delivered::Took,
            Local::Claimed => {}
            _ => return Delivered::Left,
        }
        *st = Local::Passed(grant);
        drop(st);
        self.slot.wake();
        Delivered::Yes
    }

    /// Nothing was handed over: the waiter sleeps on, woken to ask the
    /// server when `wake`.
    pub(crate) fn cancel(mut self, wake: bool) {
        self.settled = true;
        self.unclaim(wake);
    }

    /// The hand-off call's outcome is not known (its unlock was cancelled
    /// mid-call, or the reply was `Indeterminate`): the lock may now be held
    /// under the waiter's attempt. A waiter still there is woken to ask the
    /// server, its attempt marked in doubt, so that it releases the attempt
    /// if it ends without the lock. Returns true when the waiter has left
    /// already: the caller must then release the waiter's attempt
    /// ([`LocalWaiter::release`]; a no-op when the hand-off never landed).
    ///
    /// Without this, a hand-off landing for a waiter that gave up (its wait
    /// ran out, it was cancelled) left the lock held by nobody until the
    /// waiter's lease ended (issue 22).
    pub(crate) fn abandon(mut self) -> bool {
        self.settled = true;
        self.unclaim_in_doubt()
    }

    fn unclaim_in_doubt(&self) -> bool {
        let w = self.waiter();
        let mut st = w.state.lock();
        match *st {
            Local::Claimed => {
                w.doubted.store(true, Ordering::SeqCst);
                *st = Local::Waiting;
                drop(st);
                self.slot.wake();
                false
            }
            Local::Left => true,
            // Granted by the server (the same hold, if the hand-off
            // landed), or handed over by this claim: nothing to do.
            Local::Took | Local::Passed(_) | Local::Waiting => false,
        }
    }

    fn unclaim(&self, wake: bool) {
        let mut st = self.waiter().state.lock();
        if matches!(*st, Local::Claimed) {
            // Asleep or not, the waiter treats a wake-up as a prompt to try.
            *st = Local::Waiting;
            drop(st);
            if wake {
                self.slot.wake();
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.settled && self.unclaim_in_doubt() {
            // Unreachable in practice: every claim is settled by its
            // unlock, whose drop guard abandons it and releases for a
            // waiter that left. Said loudly, in case one is not.
            tracing::warn!(attempt = %self.waiter().attempt,
                "a local hand-off to a waiter that left was dropped unsettled; its lease ends it");
        }
    }
}
