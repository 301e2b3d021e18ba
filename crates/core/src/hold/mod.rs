//! A granted hold: its lease state, fencing token, `extend` and `unlock`,
//! shared by every primitive's guard; renewal ([`renew`]) and release in
//! the background ([`release`]) live beside it.

pub(crate) mod lease;
pub(crate) mod release;
pub(crate) mod renew;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::scripts::ScriptCall;

pub use lease::{drift, lease_lost, LeaseMode, LeaseState, Validity};
pub(crate) use lease::{valid_until, HoldInner, HoldSpec, PassSpec, Renewal, NEXT_HOLD};

/// Run `work` until `lost` resolves (a guard's `lost()`): the one way
/// every guard's `run` stops work when its hold can no longer be counted
/// on. The loss wins a tie with the work's end.
///
/// # Errors
/// [`Error::LeaseLost`] with the state `lost` resolved to.
///
/// # Cancel safety
/// Dropping this future drops `work`.
pub(crate) async fn run_while_held<F: std::future::Future>(
    lost: impl std::future::Future<Output = LeaseState>,
    work: F,
) -> Result<F::Output> {
    tokio::select! {
        biased;
        state = lost => Err(Error::LeaseLost { state }),
        out = work => Ok(out),
    }
}

/// One granted hold: fencing token, lease state, renewal and release.
///
/// Primitive guards wrap it. Dropping it while active hands the release to
/// the client's background releaser.
#[derive(Debug)]
pub struct Hold {
    pub(crate) inner: Arc<HoldInner>,
    /// The client it was granted through.
    pub(crate) client: Client,
    pub(crate) armed: bool,
}

/// The sequence number of an attempt id drawn by `new_attempt_id` (the acquire module) (0 for
/// an id without one). An attempt drawn after another has a larger one;
/// the scripts read it the same way (`hold_seq` in `lua/hold_lib.lua`).
pub(crate) fn attempt_seq(attempt: &str) -> u64 {
    attempt
        .rsplit_once('s')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0)
}

/// The holds one handle was granted, and its acquires in progress, to tell
/// whether a hold of the handle's owner on the server may be one the
/// handle has (or is about to have). See [`AcquireBuilder::live`](crate::AcquireBuilder::live).
#[derive(Debug, Default)]
pub struct HoldSet {
    holds: Mutex<Vec<std::sync::Weak<HoldInner>>>,
    acquiring: std::sync::atomic::AtomicUsize,
}

/// One acquire of a handle in progress ([`HoldSet::enter`]); counted until
/// dropped.
#[derive(Debug)]
pub struct Acquiring<'a>(&'a HoldSet);

impl Drop for Acquiring<'_> {
    fn drop(&mut self) {
        self.0.acquiring.fetch_sub(1, Ordering::SeqCst);
    }
}

impl HoldSet {
    /// Count an acquire of this handle as in progress until the returned
    /// guard is dropped (after its hold, if any, was [`add`](Self::add)ed).
    /// A concurrent acquire of the same handle (a clone in another task)
    /// may be granted a hold this one's script must take for a re-entry,
    /// not for a stale hold. Enter before drawing the attempt id
    /// (`new_attempt_id`): see
    /// [`acquire_arg`](Self::acquire_arg).
    pub fn enter(&self) -> Acquiring<'_> {
        self.acquiring.fetch_add(1, Ordering::SeqCst);
        Acquiring(self)
    }

    /// Remember `hold` (forgotten once it ends or is dropped).
    pub fn add(&self, hold: &Hold) {
        let mut v = self.holds.lock();
        v.retain(|w| w.upgrade().is_some_and(|h| !h.state.borrow().is_terminal()));
        v.push(Arc::downgrade(&hold.inner));
    }

    /// The stale-hold bound (`ARGV[6]`) of a call of `attempt`, an acquire made inside
    /// [`enter`](Self::enter) (see [`AcquireBuilder::live`](crate::AcquireBuilder::live)):
    /// `0` when one of the remembered holds is still active or another
    /// acquire of the handle is in progress (a re-entry is possible), else
    /// the attempt's sequence number (`attempt_seq`).
    ///
    /// Why the number: every acquire of the handle whose attempt was drawn
    /// before this one entered before it too, so it is either counted here
    /// (the reply is `0`) or over, its hold added. A hold of the handle's
    /// owner whose attempts are all that old is therefore nobody's. An
    /// acquire that enters after this check draws a larger number, and its
    /// hold, even one that reaches the server before this call, is spared.
    pub fn acquire_arg(&self, attempt: &str) -> String {
        if self.acquiring.load(Ordering::SeqCst) > 1 || self.any_active() {
            "0".to_string()
        } else {
            attempt_seq(attempt).to_string()
        }
    }

    /// Whether one of the remembered holds is still active.
    pub fn any_active(&self) -> bool {
        self.holds
            .lock()
            .iter()
            .any(|w| w.upgrade().is_some_and(|h| !h.state.borrow().is_terminal()))
    }
}

/// What the server granted: the attempt, its fencing token, the lease
/// mode, when the granting request was sent and the TTL in its reply.
#[derive(Debug)]
pub(crate) struct Grant {
    pub(crate) attempt: String,
    pub(crate) token: u64,
    pub(crate) mode: LeaseMode,
    pub(crate) sent_at: Instant,
    pub(crate) pttl_ms: u64,
}

impl Hold {
    /// Record a grant: `sent_at` is when the granting request was sent,
    /// `pttl_ms` the TTL in its reply. Watchdog holds are registered for renewal.
    pub(crate) fn new(
        client: &Client,
        spec: HoldSpec,
        attempt: String,
        token: u64,
        mode: LeaseMode,
        sent_at: Instant,
        pttl_ms: u64,
    ) -> Hold {
        let grant = Grant {
            attempt,
            token,
            mode,
            sent_at,
            pttl_ms,
        };
        Hold::with_id(None, client, spec, grant)
    }

    /// [`Hold::new`], for a hold handed over locally under an id already
    /// listed (`Some`), or a new one.
    pub(crate) fn with_id(
        listed: Option<u64>,
        client: &Client,
        spec: HoldSpec,
        grant: Grant,
    ) -> Hold {
        let Grant {
            attempt,
            token,
            mode,
            sent_at,
            pttl_ms,
        } = grant;
        let (state, _) = watch::channel(LeaseState::Active);
        let inner = Arc::new(HoldInner {
            id: listed.unwrap_or_else(|| NEXT_HOLD.fetch_add(1, Ordering::Relaxed)),
            engine: client.engine().clone(),
            spec,
            attempt,
            token,
            mode,
            state,
            valid_until: Mutex::new(valid_until(sent_at, pttl_ms)),
            in_watchdog: AtomicBool::new(false),
            chain: AtomicU32::new(0),
            granted: Instant::now(),
        });
        if mode == LeaseMode::Watchdog {
            client.watchdog().register(inner.clone());
        }
        if let (Some(p), None) = (&inner.spec.pass, listed) {
            if client.config().local_handoffs > 0 {
                client.engine().list_hold(
                    &p.channel,
                    inner.id,
                    &p.owner,
                    *inner.valid_until.lock(),
                );
            }
        }
        client.remember_hold(&inner);
        Hold {
            inner,
            client: client.clone(),
            armed: true,
        }
    }

    /// The fencing token of this hold.
    pub fn fencing_token(&self) -> u64 {
        self.inner.token
    }

    /// The attempt id that was granted (names the hold in Redis).
    pub fn attempt(&self) -> &str {
        &self.inner.attempt
    }

    /// The Redis key of the hold (its hold hash).
    pub fn key(&self) -> &str {
        &self.inner.spec.key
    }

    /// The client the hold was granted through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Current lease state; a fixed lease whose validity ran out reads `Lost`.
    pub fn state(&self) -> LeaseState {
        self.inner.current()
    }

    /// How much longer the hold is known valid (zero unless `Active`).
    pub fn valid_for(&self) -> Duration {
        Validity::valid_for(&*self.inner)
    }

    /// Resolves once the hold can no longer be counted on: `Lost` or `Unknown`
    /// (also when the local validity of a lease runs out). A hold that was
    /// released was not lost: then it never resolves.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    pub fn lost(&self) -> impl std::future::Future<Output = LeaseState> + Send + 'static {
        lease_lost(self.inner.clone())
    }

    /// Run `work` under this hold: it is dropped (cancelled at its next
    /// await) as soon as the hold can no longer be counted on, `Lost` or
    /// `Unknown` (see [`lost`](Self::lost): the lease's local validity runs
    /// out before the server could have given it to anyone else, so the
    /// work stops before a second holder can start). The hold stays as it
    /// is: unlock it (or drop it) after.
    ///
    /// What "cancelled" cannot undo: a write the work already sent may
    /// have landed, and code between two awaits runs to the next one.
    /// Pass [`fencing_token`](Self::fencing_token) to whatever the work
    /// writes, so a late write is refused.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] with the state when the work was dropped. When
    /// the loss and the work's end are seen at the same moment, the loss
    /// wins: `Ok` means the hold was still good when the work ended.
    ///
    /// # Cancel safety
    /// Dropping this future drops `work`; the hold is untouched.
    pub async fn run<F: std::future::Future>(&self, work: F) -> Result<F::Output> {
        run_while_held(self.lost(), work).await
    }

    /// Extend a lease to at least `lease` from now (never shortens the key's TTL).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad lease; [`Error::NotHeld`] when the
    /// hold is gone (state becomes `Lost`); `Indeterminate` makes the state
    /// `Unknown`; `Unavailable` leaves it as it was.
    ///
    /// # Cancel safety
    /// If dropped after sending, the extension may or may not apply; the
    /// state stays `Active` until its old validity runs out.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        let ms = crate::config::lease_ms(lease)?;
        if self.state() != LeaseState::Active {
            return Err(Error::NotHeld);
        }
        let call = ScriptCall::new(
            self.inner.spec.renew,
            self.inner.spec.renew_keys.clone(),
            vec![ms.to_string(), self.inner.attempt.clone()],
        );
        let sent = Instant::now();
        match self.client.run::<Vec<i64>>(&call).await {
            Ok(v) => match v.first().copied().map(Renewal::of) {
                Some(Renewal::Renewed(ms)) => {
                    self.inner.renewed(sent, ms);
                    Ok(())
                }
                Some(Renewal::WrongType(j)) => Err(Error::WrongType {
                    key: self.inner.renew_key(j),
                }),
                _ => {
                    self.inner.finish(LeaseState::Lost);
                    Err(Error::NotHeld)
                }
            },
            Err(e) => {
                if e.is_indeterminate() {
                    self.inner.finish(LeaseState::Unknown);
                }
                Err(e)
            }
        }
    }

    /// Extend the hold to at least `lease_ms` in a background task, a third
    /// of the way into its current lease of `claim_ms` (a fair-lock hand-off
    /// arrives under a short claim lease; a hold released before then needs
    /// no extension at all). Success moves the local validity; "gone" marks
    /// the hold `Lost`; a failed call leaves the claim's validity (and the
    /// watchdog, for watchdog leases, retries).
    pub(crate) fn extend_in_background(&self, lease_ms: u64, claim_ms: u64) {
        let inner = self.inner.clone();
        // A third into the claim, or halfway through what is left of the
        // local validity if that comes first (it counts from an earlier
        // instant than the claim: the enqueueing request).
        let left = self
            .inner
            .valid_until
            .lock()
            .saturating_duration_since(Instant::now());
        let at = crate::config::after(Duration::from_millis(claim_ms / 3).min(left / 2));
        let mut state = inner.state.subscribe();
        let client = self.client.clone();
        tokio::spawn(async move {
            // A timer for the renewal, as the watchdog's; not a wait loop.
            // A hold that ends first (most do: a short hold is unlocked
            // well within a third of the claim) ends the task with it, so
            // a busy lock does not keep a sleeping task per recent grant.
            tokio::select! {
                _ = tokio::time::sleep_until(at) => {}
                _ = state.wait_for(|s| *s != LeaseState::Active) => return,
            }
            if *inner.state.borrow() != LeaseState::Active {
                return;
            }
            let call = ScriptCall::new(
                inner.spec.renew,
                inner.spec.renew_keys.clone(),
                vec![lease_ms.to_string(), inner.attempt.clone()],
            );
            let sent = Instant::now();
            match client.run::<Vec<i64>>(&call).await {
                Ok(v) => match v.first().copied().map(Renewal::of) {
                    Some(Renewal::Renewed(ms)) => inner.renewed(sent, ms),
                    Some(Renewal::WrongType(j)) => tracing::warn!(key = %inner.renew_key(j),
                        "extending a handed-off claim found a key of another type; it holds until the claim ends"),
                    _ => {
                        inner.finish(LeaseState::Lost);
                    }
                },
                Err(e) => tracing::warn!(error = %e.report(), key = %inner.spec.key,
                    "extending a handed-off claim failed; it holds until the claim ends"),
            }
        });
    }

    /// Stop renewal, then release this hold and wait for the server's answer.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the hold had expired or was taken over;
    /// [`Error::Unavailable`] / [`Error::Indeterminate`] when the release could
    /// not be confirmed; it was then handed to the background releaser.
    ///
    /// # Cancel safety
    /// If dropped before the reply, the release may or may not have run; the
    /// background releaser runs it (again: it is idempotent).
    pub async fn unlock(mut self) -> Result<()> {
        let inner = self.inner.clone();
        self.client.watchdog().unregister(&inner);
        if let Some(outcome) = self.pass_locally().await {
            return outcome;
        }
        let started = Instant::now();
        let result = self.client.run::<i64>(&inner.spec.release).await;
        let outcome = match result {
            Ok(0) => {
                self.armed = false;
                inner.finish(LeaseState::Lost);
                Err(Error::NotHeld)
            }
            Ok(n) => {
                self.armed = false;
                inner.state.send_replace(LeaseState::Released);
                // It granted the lock to another client's waiter, and told
                // only that client: a waiter of this one asks the server
                // (and registers for a grant).
                if let (4, Some(p)) = (n, &inner.spec.pass) {
                    self.client.engine().nudge(&p.channel);
                }
                Ok(())
            }
            // Shut down (or shutting down): shutdown releases what is
            // still registered, and the drop below hands it to the releaser
            // while that still runs.
            Err(Error::Shutdown) => Err(Error::Shutdown),
            Err(e @ (Error::Unavailable(_) | Error::Indeterminate(_))) => {
                if e.is_indeterminate() {
                    inner.finish(LeaseState::Unknown);
                }
                // Drop below hands the release to the releaser.
                Err(e)
            }
            Err(e) => {
                self.armed = false;
                Err(e)
            }
        };
        tracing::debug!(kind = inner.spec.kind, key = %inner.spec.key, attempt = %inner.attempt,
            ok = outcome.is_ok(), elapsed = ?started.elapsed(), "release");
        outcome
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        crate::metrics::held(self.inner.spec.kind, self.inner.granted.elapsed());
        let inner = &self.inner;
        self.client.forget_hold(inner.id);
        if let Some(p) = &inner.spec.pass {
            let engine = self.client.engine();
            engine.unlist_hold(&p.channel, inner.id);
            if self.armed {
                // Released in the background: a local waiter that slept on
                // this hold asks the server (the release may find nothing
                // to release, and then wakes nobody).
                engine.nudge(&p.channel);
            }
        }
        if !self.armed {
            return;
        }
        self.client.watchdog().unregister(inner);
        if *inner.state.borrow() == LeaseState::Active {
            // Debug, not a warning: a drop (a `?` in a critical section) is
            // the ordinary release, as in tokio::sync.
            tracing::debug!(kind = inner.spec.kind, key = %inner.spec.key,
                "guard dropped without unlock().await; releasing in the background");
        }
        // Refused (a no-op) once shutdown has closed the releaser; by then
        // shutdown has released every registered hold itself.
        let deadline = release::deadline(self.client.config(), Some(inner.mode));
        self.client
            .releaser()
            .submit(inner.spec.release.clone(), deadline);
        inner.state.send_if_modified(|s| {
            if *s == LeaseState::Active {
                *s = LeaseState::Released;
                true
            } else {
                false
            }
        });
    }
}
