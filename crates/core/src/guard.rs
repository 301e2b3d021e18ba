use std::future::Future;
use std::time::Duration;

use crate::{Hold, LeaseState, Result};

/// One hold of an exclusive lock ([`Exclusive`](crate::Exclusive): `Lock`, `FairLock`).
///
/// Release it with [`unlock`](ExclusiveGuard::unlock) to see the outcome. Dropping
/// it releases too, but not at once: the release goes through the client's
/// background releaser (and a warning is logged).
#[must_use = "if unused the lock is released at once"]
#[derive(Debug)]
pub struct ExclusiveGuard {
    hold: Hold,
}

impl ExclusiveGuard {
    /// The guard of an exclusive hold (a primitive's write side).
    pub fn new(hold: Hold) -> ExclusiveGuard {
        ExclusiveGuard { hold }
    }

    /// The hold inside (for composites that hold several locks).
    pub fn into_hold(self) -> Hold {
        self.hold
    }

    /// The fencing token of this hold: larger than every token handed out
    /// for this name before it. Pass it to the resource you protect.
    pub fn fencing_token(&self) -> u64 {
        self.hold.fencing_token()
    }

    /// Where the hold stands as far as this process knows.
    pub fn state(&self) -> LeaseState {
        self.hold.state()
    }

    /// How much longer the hold is known valid.
    pub fn valid_for(&self) -> Duration {
        self.hold.valid_for()
    }

    /// Resolves when the hold can no longer be counted on (`Lost` or `Unknown`).
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    pub fn lost(&self) -> impl Future<Output = LeaseState> + Send + 'static {
        self.hold.lost()
    }

    /// Extend a fixed lease to at least `lease` from now.
    ///
    /// # Errors
    /// `InvalidArgument`, `NotHeld` (state becomes `Lost`), `Indeterminate`
    /// (state becomes `Unknown`), `Unavailable`.
    ///
    /// # Cancel safety
    /// If dropped, the extension may or may not have applied.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        self.hold.extend(lease).await
    }

    /// Stop renewal, release this hold and wait for the answer. An inner
    /// unlock of a re-entered lock leaves the key's TTL alone.
    ///
    /// # Errors
    /// [`Error::NotHeld`](crate::Error::NotHeld) when the hold expired or was taken
    /// over; `Unavailable`/`Indeterminate` when unconfirmed (the release then
    /// continues in the background releaser).
    ///
    /// # Cancel safety
    /// If dropped, the release may or may not have run; the background
    /// releaser runs it (idempotently).
    pub async fn unlock(self) -> Result<()> {
        self.hold.unlock().await
    }
}
