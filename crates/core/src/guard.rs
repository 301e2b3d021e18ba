use crate::{Hold, Result};

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

    crate::hold_guard_methods!(hold);

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

/// The methods every guard over one [`Hold`] offers, written once:
/// `state`, `valid_for`, `lost` and `extend`, delegated to the guard's
/// `Hold` field (`hold_guard_methods!(hold)` inside the guard's `impl`).
#[macro_export]
macro_rules! hold_guard_methods {
    ($field:tt) => {
        /// Where the hold stands as far as this process knows.
        pub fn state(&self) -> $crate::LeaseState {
            self.$field.state()
        }

        /// How much longer the hold is known valid.
        pub fn valid_for(&self) -> ::std::time::Duration {
            self.$field.valid_for()
        }

        /// Resolves when the hold can no longer be counted on (`Lost` or
        /// `Unknown`: the lease ended, the server said it is gone, or the
        /// outcome of a renewal or release is unknown).
        ///
        /// # Cancel safety
        /// Cancel safe: it only watches.
        pub fn lost(
            &self,
        ) -> impl ::std::future::Future<Output = $crate::LeaseState> + Send + 'static {
            self.$field.lost()
        }

        /// Run `work` under this hold: it is dropped as soon as the hold
        /// can no longer be counted on (`Lost` or `Unknown`), before the
        /// server could give it to anyone else. A write the work already
        /// sent may have landed: pass the fencing token to what it writes.
        ///
        /// # Errors
        /// [`Error::LeaseLost`]($crate::Error::LeaseLost) with the state
        /// when the work was dropped (the loss wins a tie with the work's
        /// end).
        ///
        /// # Cancel safety
        /// Dropping this future drops `work`; the hold is untouched.
        pub async fn run<F: ::std::future::Future>(&self, work: F) -> $crate::Result<F::Output> {
            self.$field.run(work).await
        }

        /// Extend the lease to at least `lease` from now.
        ///
        /// # Errors
        /// `InvalidArgument`, `NotHeld` (state becomes `Lost`),
        /// `Indeterminate` (state becomes `Unknown`), `Unavailable`.
        ///
        /// # Cancel safety
        /// If dropped, the extension may or may not have applied.
        pub async fn extend(&self, lease: ::std::time::Duration) -> $crate::Result<()> {
            self.$field.extend(lease).await
        }
    };
}
