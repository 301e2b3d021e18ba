//! [`Permits`], the guard of permits taken from a [`Semaphore`](crate::Semaphore).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadbolt_core::primitive::{Error, Hold, HoldGuard, LeaseState, Result, ScriptCall};

use crate::scripts::SEM_RELEASE_PART;
use crate::SemHandle;

/// Permits taken from a [`Semaphore`](crate::Semaphore), leased to this
/// guard.
///
/// Give them back with [`release`](Permits::release) to see the outcome,
/// or part of them with [`release_permits`](Permits::release_permits);
/// dropping the guard gives back what it still holds in the background
/// (through the client's releaser: not at once).
#[must_use = "if unused the permits are given back at once"]
#[derive(Debug)]
pub struct Permits {
    slot: Slot,
    count: u64,
    sem: Arc<SemHandle>,
}

/// The guard's hold. Who changes it: only
/// [`Permits::release_permits`], which moves `Held` to `Ended` when it
/// gives back the last permits or finds the hold gone on the server (the
/// hold's own state machine, in core, runs the `Held` one).
#[derive(Debug)]
enum Slot {
    /// The hold, renewed by the watchdog (or fixed) as core keeps it.
    Held(Hold),
    /// Every permit went back through `release_permits`; how that ended
    /// (`Released`, or `Lost` / `Unknown`).
    Ended(LeaseState),
}

impl Slot {
    fn state(&self) -> LeaseState {
        match self {
            Slot::Held(h) => h.state(),
            Slot::Ended(s) => *s,
        }
    }

    fn valid_for(&self) -> Duration {
        match self {
            Slot::Held(h) => h.valid_for(),
            Slot::Ended(_) => Duration::ZERO,
        }
    }

    /// An ended slot resolves at once, with the state it ended in: there
    /// is nothing left to count on.
    fn lost(&self) -> impl Future<Output = LeaseState> + Send + 'static {
        let (held, ended) = match self {
            Slot::Held(h) => (Some(h.lost()), LeaseState::Released),
            Slot::Ended(s) => (None, *s),
        };
        async move {
            match held {
                Some(f) => f.await,
                None => ended,
            }
        }
    }

    async fn extend(&self, lease: Duration) -> Result<()> {
        match self {
            Slot::Held(h) => h.extend(lease).await,
            Slot::Ended(_) => Err(Error::NotHeld),
        }
    }
}

/// Permits' lease is their hold's, until every permit went back.
impl HoldGuard for Permits {
    fn state(&self) -> LeaseState {
        self.slot.state()
    }

    fn valid_for(&self) -> Duration {
        self.slot.valid_for()
    }

    fn lost(&self) -> impl Future<Output = LeaseState> + Send + 'static {
        self.slot.lost()
    }
}

impl Permits {
    pub(crate) fn new(hold: Hold, count: u64, sem: Arc<SemHandle>) -> Permits {
        Permits {
            slot: Slot::Held(hold),
            count,
            sem,
        }
    }

    /// How many permits this guard holds (0 once
    /// [`release_permits`](Self::release_permits) gave back the last).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Extend the lease to at least `lease` from now.
    ///
    /// # Errors
    /// `InvalidArgument`, `NotHeld` (state becomes `Lost`; also once every
    /// permit was given back), `Indeterminate` (state becomes `Unknown`),
    /// `Unavailable`.
    ///
    /// # Cancel safety
    /// If dropped, the extension may or may not have applied.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        self.slot.extend(lease).await
    }

    /// Give the permits back and wait for the answer; the waiters they
    /// serve are granted them inside the release.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(sem: deadbolt_semaphore::Semaphore) -> deadbolt_core::Result<()> {
    /// let permits = sem.acquire(2).await?;
    /// permits.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the lease had ended (the server had given
    /// them back already), the semaphore was deleted, or
    /// [`release_permits`](Self::release_permits) gave every permit back
    /// already; `Unavailable` / `Indeterminate` when unconfirmed (the
    /// background releaser finishes it).
    ///
    /// # Cancel safety
    /// If dropped, the release may or may not have run; the background
    /// releaser runs it (idempotently).
    pub async fn release(self) -> Result<()> {
        match self.slot {
            Slot::Held(hold) => hold.unlock().await,
            Slot::Ended(_) => Err(Error::NotHeld),
        }
    }

    /// Give back `n` of this guard's permits and keep the rest, under the
    /// same lease (the watchdog goes on renewing it); the waiters the
    /// permits serve are granted them inside the call, as by a full
    /// release. `n` equal to [`count`](Self::count) is
    /// [`release`](Self::release): the guard then holds nothing, its state
    /// is `Released` (or how that release ended: `Lost` when nothing was
    /// held), its `lost()` resolves at once with that state, and dropping
    /// it does nothing.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(sem: deadbolt_semaphore::Semaphore) -> deadbolt_core::Result<()> {
    /// let mut permits = sem.acquire(5).await?;
    /// // The bulk phase is over: keep 1, give 4 back to the waiters.
    /// permits.release_permits(4).await?;
    /// assert_eq!(permits.count(), 1);
    /// permits.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0 or more than `count()`, nothing
    /// sent. [`Error::NotHeld`] when the guard is no longer `Active`
    /// (nothing sent: give everything back with `release`), or the server
    /// no longer records the hold (its lease ended, or the semaphore was
    /// deleted): the guard then turns `Lost` and holds nothing.
    /// `Unavailable` / `Indeterminate` / `WrongType` leave the guard as it
    /// was (still counting every permit; see below); for `n == count()`
    /// as [`release`](Self::release).
    ///
    /// # Cancel safety
    /// For `n < count()`: if dropped after sending, the permits may or may
    /// not have been given back, and the guard still counts them. The call
    /// tells the server how many the hold *keeps*, so calling it again (or
    /// any later `release_permits`) never gives back more than asked, and
    /// its reply sets `count()` to what the server holds; `release` or a
    /// drop gives back whatever is left. For `n == count()`: as
    /// [`release`](Self::release) (the background releaser finishes it).
    pub async fn release_permits(&mut self, n: u64) -> Result<()> {
        if n == 0 || n > self.count {
            return Err(Error::InvalidArgument(format!(
                "cannot release {n} of the {} permits held",
                self.count
            )));
        }
        if n == self.count {
            return self.release_all().await;
        }
        let Slot::Held(hold) = &self.slot else {
            return Err(Error::NotHeld);
        };
        if hold.state() != LeaseState::Active {
            return Err(Error::NotHeld);
        }
        let (keys, _) = self.sem.parts()?;
        let keep = self.count - n;
        let call = ScriptCall::new(
            &SEM_RELEASE_PART,
            keys.clone(),
            vec![hold.attempt().to_string(), keep.to_string()],
        );
        let held: i64 = self.sem.client().run(&call).await?;
        match u64::try_from(held) {
            Ok(now) if now > 0 => {
                self.count = now.min(self.count);
                Ok(())
            }
            _ => {
                // Gone on the server: finish the hold through core (its
                // release finds nothing, and it turns Lost there too).
                let _ = self.release_all().await;
                Err(Error::NotHeld)
            }
        }
    }

    /// Release every permit left through the hold's own unlock, leaving
    /// the slot `Ended` with the state the unlock ended in.
    async fn release_all(&mut self) -> Result<()> {
        let slot = std::mem::replace(&mut self.slot, Slot::Ended(LeaseState::Released));
        let Slot::Held(hold) = slot else {
            self.slot = slot;
            return Err(Error::NotHeld);
        };
        self.count = 0;
        let r = hold.unlock().await;
        self.slot = Slot::Ended(match &r {
            Ok(()) => LeaseState::Released,
            Err(Error::NotHeld) => LeaseState::Lost,
            Err(e) if e.is_indeterminate() => LeaseState::Unknown,
            // The background releaser finishes it.
            Err(Error::Unavailable(_) | Error::Shutdown) => LeaseState::Released,
            Err(_) => LeaseState::Lost,
        });
        r
    }
}
