//! [`HoldGuard`], what every guard tells of its lease, and
//! [`ExclusiveGuard`], the guard of an exclusive hold.

use std::future::Future;
use std::time::Duration;

use crate::hold::run_while_held;
use crate::{Hold, LeaseState, Result};

/// What every guard tells of the lease it keeps (over one hold or
/// several): where it stands, how long it is known valid, a future that resolves when it can no longer be counted
/// on, and work run under it. Import it (it is in `deadbolt::prelude`) to
/// call these on a guard.
///
/// # Examples
/// ```no_run
/// # use deadbolt_core::{Acquire, Client, Exclusive, ExclusiveKind, HoldGuard};
/// # async fn f<K: ExclusiveKind>(client: &Client) -> deadbolt_core::Result<()> {
/// let guard = Exclusive::<K>::new(client, "orders:42").lock().await?;
/// let total = guard.run(async { 6 * 7 }).await?; // dropped if the lease is lost
/// # Ok(()) }
/// ```
pub trait HoldGuard {
    /// Where the lease stands as far as this process knows.
    fn state(&self) -> LeaseState;

    /// How much longer the lease is known valid (zero unless `Active`).
    fn valid_for(&self) -> Duration;

    /// Resolves when the lease can no longer be counted on (`Lost` or
    /// `Unknown`: it ended, the server said it is gone, or the outcome of a
    /// renewal or release is unknown). A lease released on purpose was not
    /// lost: then it never resolves.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    fn lost(&self) -> impl Future<Output = LeaseState> + Send + 'static;

    /// Run `work` under the lease: it is dropped (cancelled at its next
    /// await) as soon as the lease can no longer be counted on, before the
    /// server could give it to anyone else. A write the work already sent
    /// may have landed: pass the fencing token to what it writes.
    ///
    /// # Errors
    /// [`Error::LeaseLost`](crate::Error::LeaseLost) with the state when
    /// the work was dropped (the loss wins a tie with the work's end).
    ///
    /// # Cancel safety
    /// Dropping this future drops `work`; the lease is untouched.
    fn run<F: Future>(&self, work: F) -> impl Future<Output = Result<F::Output>> {
        run_while_held(self.lost(), work)
    }
}

/// A guard over one hold tells what the hold tells.
impl HoldGuard for ExclusiveGuard {
    fn state(&self) -> LeaseState {
        self.hold.state()
    }

    fn valid_for(&self) -> Duration {
        self.hold.valid_for()
    }

    fn lost(&self) -> impl Future<Output = LeaseState> + Send + 'static {
        self.hold.lost()
    }
}

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

    /// Extend the lease to at least `lease` from now.
    ///
    /// # Errors
    /// `InvalidArgument`, `NotHeld` (state becomes `Lost`),
    /// `Indeterminate` (state becomes `Unknown`), `Unavailable`.
    ///
    /// # Cancel safety
    /// If dropped, the extension may or may not have applied.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        self.hold.extend(lease).await
    }

    /// Writes to Redis that commit only while this hold is live: each call
    /// checks the hold on the server in the same script as its writes, and
    /// writes nothing (failing with [`Error::NotHeld`](crate::Error::NotHeld))
    /// once the hold expired or another holder has the lock. See
    /// [`guarded`](crate::guarded).
    ///
    /// # Examples
    /// ```no_run
    /// # use deadbolt_core::{Acquire, Client, Exclusive, ExclusiveKind};
    /// # async fn f<K: ExclusiveKind>(client: &Client) -> deadbolt_core::Result<()> {
    /// let lock = Exclusive::<K>::new(client, "orders:42");
    /// let guard = lock.lock().await?;
    /// let g = guard.guarded();
    /// g.incr_by(g.key("count"), 1).await?; // refused once the hold is gone
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn guarded(&self) -> crate::guarded::Guarded<'_> {
        crate::guarded::Guarded::over(vec![&self.hold])
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
