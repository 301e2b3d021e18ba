//! The local hand-off's states, beside the waiting engine whose slots
//! keep them: the waiter's side ([`LocalWaiter`], where it stands in
//! [`Local`]) and an unlock's [`Claim`] on it, with every transition
//! between the states.
//!
//! An unlock that finds a sleeping waiter of its own client hands its hold
//! straight to it (lock cohorting). The engine claims the waiter for the
//! unlock (`Shared::claim` in `wait/slot.rs`, under the table lock:
//! `Waiting` → `Claimed`); the unlock runs the hand-off script
//! (`Hold::pass_locally`, in `handoff.rs`, which needs the client and the
//! hold) and settles the claim: delivered (`Passed`), cancelled (back to
//! `Waiting`, nothing handed over) or abandoned (back to `Waiting`, the
//! waiter's attempt in doubt: the outcome is unknown). The waiter, woken,
//! reads where it stands ([`LocalWaiter::after_wake`]), is granted the
//! lock by the server itself ([`LocalWaiter::took`]: `Took`) or leaves
//! ([`LocalWaiter::leave`]: `Left`). The state is kept under one mutex, so
//! each transition is one step; the loom tests (`wait/loom.rs`) race them
//! against a waiter's cancel. See docs/architecture.md, "Wake-ups and
//! local hand-off".

use std::sync::Arc;

use tokio::time::Instant;

use super::sync::{AtomicBool, Mutex, Ordering};
use crate::scripts::ScriptCall;

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
    /// Changed only by the transitions in this module: a claim (by the
    /// engine, under the table lock), its settling (by the unlock), and
    /// the waiter's own reading, taking and leaving.
    state: Mutex<Local>,
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
    /// The id of the new hold, listed (see `Engine::held`) before it was
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

    /// An unlock claims this waiter, if it is `Waiting` (called by the
    /// engine under the table lock). Returns whether it did.
    pub(crate) fn claim(&self) -> bool {
        let mut st = self.state.lock();
        let free = matches!(*st, Local::Waiting);
        if free {
            *st = Local::Claimed;
        }
        free
    }

    /// After a wake-up: whether a local hand-off claimed this waiter (a
    /// waiter that goes on to try may still be claimed: see [`Local`]). A
    /// hold handed over is taken (`Left`).
    pub(crate) fn after_wake(&self) -> LocalNow {
        let mut st = self.state.lock();
        match *st {
            Local::Claimed => LocalNow::Claimed,
            Local::Passed(g) => {
                *st = Local::Left;
                LocalNow::Passed(g)
            }
            Local::Waiting | Local::Took | Local::Left => LocalNow::Go,
        }
    }

    /// The server granted this waiter the lock (`Took`): a hand-off still
    /// under way is that same hold. Returns the hand-off that landed
    /// before (`Passed`): this waiter's own try then found the same hold
    /// (a replay of its attempt) and keeps it under a record of its own,
    /// so the caller takes the hand-off's listing off (or this client's
    /// later waiters would sleep on a hold that no longer exists until
    /// its lease would have ended).
    pub(crate) fn took(&self) -> Option<LocalGrant> {
        match std::mem::replace(&mut *self.state.lock(), Local::Took) {
            Local::Passed(g) => Some(g),
            _ => None,
        }
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
    waiter: Arc<LocalWaiter>,
    /// The slot the waiter sleeps on.
    slot: Arc<dyn Wakeup>,
    settled: bool,
}

/// What a claim needs of the slot its waiter sleeps on: a wake-up. (The
/// engine's `Slot`, in `wait/slot.rs`, which keeps the [`LocalWaiter`]; a
/// trait here, so that this module does not import the notifier that
/// imports it.)
pub(crate) trait Wakeup: std::fmt::Debug + Send + Sync {
    /// Wake the waiter (`Slot::wake`: its flag, then its notification).
    fn wake(&self);
}

impl Claim {
    /// A claim on `waiter`, asleep on `slot`, whose state
    /// [`LocalWaiter::claim`] just moved to `Claimed`.
    pub(crate) fn new(waiter: Arc<LocalWaiter>, slot: Arc<dyn Wakeup>) -> Claim {
        Claim {
            waiter,
            slot,
            settled: false,
        }
    }

    /// The claimed waiter.
    pub(crate) fn waiter(&self) -> &LocalWaiter {
        &self.waiter
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

#[cfg(all(test, not(deadbolt_loom)))]
mod tests {
    use std::sync::Arc;

    use tokio::time::Instant;

    use crate::scripts::{ScriptCall, HOLD_RENEW};
    use crate::wait::local::{Claim, Delivered, LocalGrant, LocalWaiter, Wakeup};

    /// A slot nobody sleeps on (these tests look at the states alone).
    #[derive(Debug)]
    struct Nobody;

    impl Wakeup for Nobody {
        fn wake(&self) {}
    }

    fn waiter() -> (Arc<dyn Wakeup>, Arc<LocalWaiter>) {
        let local = Arc::new(LocalWaiter::new(
            "client:1",
            "attempt",
            30_000,
            ScriptCall::new(&HOLD_RENEW, vec![], vec![]),
        ));
        (Arc::new(Nobody), local)
    }

    fn grant() -> LocalGrant {
        LocalGrant {
            token: 7,
            pttl: 30_000,
            sent_at: Instant::now(),
            chain: 0,
            hold_id: 1,
        }
    }

    /// An unlock claims a waiter whose try is in flight; the hand-off
    /// lands first, the try replays it (the same hold), the waiter takes
    /// that and leaves, and only then does the unlock deliver: the
    /// delivery must see the waiter took the hold, so that the unlock does
    /// not release it.
    #[test]
    fn a_hand_off_delivered_after_the_waiter_took_the_hold_itself_is_kept() {
        let (slot, local) = waiter();
        assert!(local.claim(), "claimed");
        let claim = Claim::new(local.clone(), slot.clone());
        // The try's reply: mark_acquired.
        assert!(local.took().is_none(), "nothing landed before");
        // The acquire returns: its attempt leaves.
        assert!(local.leave().is_none());
        assert!(matches!(claim.deliver(grant()), Delivered::Took));
    }

    /// A waiter that left without the hold (cancelled) still makes a late
    /// delivery give the hold back.
    #[test]
    fn a_hand_off_delivered_after_the_waiter_left_empty_handed_is_released() {
        let (slot, local) = waiter();
        assert!(local.claim(), "claimed");
        let claim = Claim::new(local.clone(), slot.clone());
        assert!(local.leave().is_none());
        assert!(matches!(claim.deliver(grant()), Delivered::Left));
    }
}
