//! deadbolt-multilock: hold many locks at once, or one lock on a majority
//! of independent Redis servers.
//!
//! **[`MultiLock`]** holds every one of its locks or none. The locks may be of
//! any kind ([`Lockable`]: `Lock`, `FairLock`, an `RwLock`'s write side), from
//! one client or several. They are taken in one global order (their keys),
//! one attempt each; when one is busy, whatever was taken is released before
//! the wait, and the wait is on the busy lock's own channel (Pub/Sub, bounded
//! by its holder's lease) — so two multi-locks over overlapping sets, taken in
//! any order, never deadlock: nobody waits while holding.
//!
//! **[`Redlock`]** takes one `Lock` name on N independent servers (N odd,
//! ≥ 3), each through its own [`Client`], concurrently, and holds it when a
//! majority granted it within its validity: `TTL − elapsed − drift`, drift =
//! `TTL·1% + 2 ms`. Otherwise it releases on every server, those that seemed
//! to fail included. See docs/safety.md for what Redlock does not protect
//! against; fencing tokens are the tool for correctness.
//!
//! ```no_run
//! use deadbolt_core::Acquire; // lock, try_lock, try_lock_for, ...
//! # async fn f(client: deadbolt_core::Client) -> deadbolt_core::Result<()> {
//! let both = deadbolt_multilock::MultiLock::of_locks(&client, &["acct:1", "acct:2"]);
//! let guard = both.lock().await?; // both or neither
//! guard.unlock().await?;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadbolt_core::primitive::{
    drift, lease_lost, Acquire, Client, Error, Guarded, Hold, HoldGuard, LeaseMode, LeaseState,
    Lockable, PlainLocks, Result, Validity, WaitMode,
};
use deadbolt_lock::Lock;

/// The multi-lock's Lua scripts (files in this crate's `lua/`).
pub mod scripts {
    deadbolt_core::primitive::lua_scripts! {
        list pub SCRIPTS;
        libs [MSG_LIB, HOLD_LIB];
        /// Take several plain locks of one client at once, all or none.
        pub MULTI_ACQUIRE = "multi_acquire";
        /// Release one attempt's holds on several plain locks.
        pub MULTI_RELEASE = "multi_release";
    }
}
use futures::future::join_all;
use parking_lot::Mutex;
pub use scripts::SCRIPTS;
use scripts::{MULTI_ACQUIRE, MULTI_RELEASE};
use tokio::sync::watch;
use tokio::time::Instant;

fn left(deadline: Option<Instant>) -> WaitMode {
    match deadline {
        None => WaitMode::Forever,
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                WaitMode::Try
            } else {
                WaitMode::For(left)
            }
        }
    }
}

/// Release `holds` (awaited; a failed release is finished by the background
/// releaser when the hold drops).
async fn release_all(holds: Vec<Hold>) -> Result<()> {
    let results = join_all(holds.into_iter().map(Hold::unlock)).await;
    results.into_iter().find(|r| r.is_err()).unwrap_or(Ok(()))
}

/// A lock over many locks: all of them or none.
///
/// Reentrant per handle: a clone is the same owner of every part. Each part
/// is renewed by its own client's watchdog.
#[derive(Debug, Clone)]
pub struct MultiLock {
    parts: Arc<Vec<Arc<dyn Lockable>>>,
    /// Every part as a plain lock of one client, when they all are: the
    /// first try of a round takes them in one script.
    plain: Option<PlainLocks>,
    /// An invalid part's error, reported by every call.
    invalid: Option<String>,
}

impl MultiLock {
    /// A multi-lock over `locks` (any kinds, any clients). Duplicate keys are
    /// held once.
    pub fn new(locks: Vec<Arc<dyn Lockable>>) -> MultiLock {
        let mut keyed = Vec::new();
        let mut invalid = None;
        for l in locks {
            match l.lock_key() {
                Ok(k) => keyed.push((k, l)),
                // Kept as the argument's own words: the error is made
                // again (InvalidArgument) when the multi-lock is used.
                Err(Error::InvalidArgument(why)) => invalid = Some(why),
                Err(e) => invalid = Some(e.to_string()),
            }
        }
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        keyed.dedup_by(|a, b| a.0 == b.0);
        if keyed.is_empty() && invalid.is_none() {
            invalid = Some("a multi-lock needs at least one lock".into());
        }
        let parts: Vec<Arc<dyn Lockable>> = keyed.into_iter().map(|(_, l)| l).collect();
        // One script for the whole set needs one client, and keys that one
        // call may touch (on a cluster: one hash slot).
        let plain = PlainLocks::of(&parts);
        MultiLock {
            parts: Arc::new(parts),
            plain,
            invalid,
        }
    }

    /// A multi-lock over plain `Lock`s of `names` on one client (each a new
    /// handle of this multi-lock).
    pub fn of_locks(client: &Client, names: &[&str]) -> MultiLock {
        MultiLock::new(
            names
                .iter()
                .map(|n| Arc::new(Lock::new(client, n)) as Arc<dyn Lockable>)
                .collect(),
        )
    }

    /// How many distinct locks it holds together.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Whether it holds no lock at all (never: `new` refuses an empty set).
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    async fn acquire(&self, lease: LeaseMode, wait: WaitMode) -> Result<Option<MultiGuard>> {
        if let Some(e) = &self.invalid {
            return Err(Error::InvalidArgument(e.clone()));
        }
        let deadline = wait.deadline();
        // A part taken while waiting for it: kept into the next round.
        let mut carried: Option<(usize, Hold)> = None;
        loop {
            // All plain locks of one client, nothing carried: one script
            // takes the whole set atomically (one round trip).
            if let (Some(plain), None) = (&self.plain, &carried) {
                // Busy part `i`, or the server could not answer (all parts
                // are on one client: wait through the first part's acquire,
                // which rides out the outage as `Lock::lock` does).
                let wait_on = match plain.try_take(lease, &MULTI_ACQUIRE, &MULTI_RELEASE).await {
                    Ok(Ok(holds)) => return Ok(Some(MultiGuard::new(holds))),
                    Ok(Err(_)) if wait == WaitMode::Try => return Ok(None),
                    Ok(Err(i)) => i,
                    Err(e) if e.is_retryable() && wait != WaitMode::Try => 0,
                    Err(e) => return Err(e),
                };
                match self.parts[wait_on]
                    .acquire_hold(lease, left(deadline))
                    .await?
                {
                    Some(h) => carried = Some((wait_on, h)),
                    None => return Ok(None),
                }
                continue;
            }
            let mut held: Vec<(usize, Hold)> = carried.take().into_iter().collect();
            let mut blocked = None;
            for (i, p) in self.parts.iter().enumerate() {
                if held.iter().any(|(j, _)| *j == i) {
                    continue;
                }
                match p.acquire_hold(lease, WaitMode::Try).await {
                    Ok(Some(h)) => held.push((i, h)),
                    Ok(None) => {
                        blocked = Some(i);
                        break;
                    }
                    // A part whose server could not answer, while the caller
                    // waits: wait for it as for a busy part (its acquire
                    // rides out the outage until the wait ends).
                    Err(e) if e.is_retryable() && wait != WaitMode::Try => {
                        blocked = Some(i);
                        break;
                    }
                    Err(e) => {
                        let _ = release_all(held.into_iter().map(|(_, h)| h).collect()).await;
                        return Err(e);
                    }
                }
            }
            let Some(i) = blocked else {
                held.sort_by_key(|(i, _)| *i);
                return Ok(Some(MultiGuard::new(
                    held.into_iter().map(|(_, h)| h).collect(),
                )));
            };
            // Nobody waits while holding: give back what was taken, then
            // wait on the busy (or unreachable) part's channel (bounded by
            // its holder's lease) and take it; the next round tries the
            // others.
            let _ = release_all(held.into_iter().map(|(_, h)| h).collect()).await;
            if wait == WaitMode::Try {
                return Ok(None);
            }
            match self.parts[i].acquire_hold(lease, left(deadline)).await? {
                Some(h) => carried = Some((i, h)),
                None => return Ok(None),
            }
        }
    }
}

/// Every lock of a [`MultiLock`], held together.
#[must_use = "if unused the locks are released at once"]
#[derive(Debug)]
pub struct MultiGuard {
    parts: Vec<Hold>,
}

/// A multi-lock's lease stands as its weakest part's.
impl HoldGuard for MultiGuard {
    /// `Active` while every part is; otherwise the first part's state that
    /// is not.
    fn state(&self) -> LeaseState {
        self.parts
            .iter()
            .map(Hold::state)
            .find(|s| *s != LeaseState::Active)
            .unwrap_or(LeaseState::Active)
    }

    /// How much longer every part is known valid (the shortest).
    fn valid_for(&self) -> Duration {
        self.parts
            .iter()
            .map(Hold::valid_for)
            .min()
            .unwrap_or_default()
    }

    /// Resolves when any part can no longer be counted on.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    fn lost(&self) -> impl Future<Output = LeaseState> + Send + 'static {
        let parts: Vec<_> = self.parts.iter().map(|h| Box::pin(h.lost())).collect();
        async move { futures::future::select_all(parts).await.0 }
    }
}

impl MultiGuard {
    fn new(parts: Vec<Hold>) -> MultiGuard {
        MultiGuard { parts }
    }

    /// Writes to Redis that commit only while every part is live, for a
    /// multi-lock whose parts' keys share one hash slot (each name is its
    /// keys' hash tag, so that is names whose slots coincide:
    /// `deadbolt_core::hash_slot` tells): one script checks every part and
    /// writes. Parts of several slots make every write fail with
    /// [`Error::CrossSlot`] before anything is sent, on a single server
    /// too, as a cluster would refuse the script. See
    /// [`deadbolt_core::guarded`].
    pub fn guarded(&self) -> Guarded<'_> {
        Guarded::over(self.parts.iter().collect())
    }

    /// The largest of the parts' fencing tokens. A resource guarded by one
    /// of the locks should check that lock's own token
    /// ([`fencing_tokens`](Self::fencing_tokens)).
    pub fn fencing_token(&self) -> u64 {
        self.parts
            .iter()
            .map(Hold::fencing_token)
            .max()
            .unwrap_or(0)
    }

    /// Each part's fencing token, in the multi-lock's order (by key).
    pub fn fencing_tokens(&self) -> Vec<u64> {
        self.parts.iter().map(Hold::fencing_token).collect()
    }

    /// Release every part; returns the first error, after trying them all.
    ///
    /// # Errors
    /// As a lock's unlock: `NotHeld`, `Unavailable`, `Indeterminate` (the
    /// background releaser finishes what was unconfirmed).
    ///
    /// # Cancel safety
    /// If dropped, parts not yet released are released by the background
    /// releaser.
    pub async fn unlock(self) -> Result<()> {
        release_all(self.parts).await
    }
}

/// A lock held on a majority of N independent Redis servers.
#[derive(Debug, Clone)]
pub struct Redlock {
    servers: Arc<Vec<Lock>>,
    ttl: Duration,
}

impl Redlock {
    /// The lock `name` on every server of `clients` (N odd, ≥ 3; each client
    /// on its own server). The lease is the first client's watchdog timeout.
    ///
    /// `clients` may be core [`Client`]s or the facade's `deadbolt::Client`s
    /// (anything that is [`AsRef<Client>`]), so
    /// `Redlock::new(&[c1, c2, c3], "jobs")` works with either.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an even number or fewer than 3 clients.
    pub fn new<C: AsRef<Client>>(clients: &[C], name: &str) -> Result<Redlock> {
        if clients.len() < 3 || clients.len().is_multiple_of(2) {
            return Err(Error::InvalidArgument(format!(
                "Redlock needs an odd number of servers, at least 3 (got {})",
                clients.len()
            )));
        }
        Ok(Redlock {
            servers: Arc::new(
                clients
                    .iter()
                    .map(|c| Lock::new(c.as_ref(), name))
                    .collect(),
            ),
            ttl: clients[0].as_ref().config().watchdog_timeout,
        })
    }

    fn majority(&self) -> usize {
        self.servers.len() / 2 + 1
    }

    /// One round: try every server at once, each bounded by a timeout much
    /// shorter than the lease. A majority within validity is a grant;
    /// anything less is released everywhere (a timed-out try's future is
    /// dropped, and core releases a possible grant by its attempt id).
    async fn round(&self, ttl: Duration) -> Result<Round> {
        let per_server = (ttl / 10).clamp(Duration::from_millis(5), Duration::from_secs(1));
        let start = Instant::now();
        let tries = self.servers.iter().map(|l| async move {
            tokio::time::timeout(
                per_server,
                l.acquire_hold(LeaseMode::Fixed(ttl), WaitMode::Try),
            )
            .await
        });
        let mut holds = Vec::new();
        let mut busy = Vec::new();
        let mut silent = Vec::new();
        let mut err = None;
        for (i, r) in join_all(tries).await.into_iter().enumerate() {
            match r {
                Ok(Ok(Some(h))) => holds.push(h),
                Ok(Ok(None)) => busy.push(i),
                Ok(Err(e)) if !e.is_retryable() => err = Some(e),
                _ => silent.push(i),
            }
        }
        let valid_until = start + ttl.saturating_sub(drift(ttl));
        if holds.len() >= self.majority() && Instant::now() < valid_until {
            return Ok(Round::Won(holds, valid_until));
        }
        let split = !holds.is_empty();
        let _ = release_all(holds).await;
        match err {
            Some(e) => Err(e),
            None => Ok(Round::Lost {
                wait_on: if busy.is_empty() { silent } else { busy },
                split,
            }),
        }
    }

    /// Wait until one of the servers `on` releases (or answers again),
    /// bounded by `bound`: the first of them ends the wait.
    async fn wait_for_release(&self, on: &[usize], ttl: Duration, bound: Duration) -> Result<()> {
        if on.is_empty() {
            // Nothing to wait on (every server granted, too late): the
            // next round goes after a pause, never at once.
            tokio::time::sleep(bound.min(Duration::from_millis(20))).await;
            return Ok(());
        }
        let waits = on.iter().map(|&i| {
            Box::pin(self.servers[i].acquire_hold(LeaseMode::Fixed(ttl), WaitMode::For(bound)))
        });
        // The first wait that ends (granted, timed out or failed) ends them
        // all; a grant it took is given back at once (the next round takes
        // every server together), and the other waits are dropped, which
        // hands any grant they may have taken to their releasers.
        let started = Instant::now();
        match tokio::time::timeout(bound, futures::future::select_all(waits)).await {
            Ok((Ok(Some(h)), _, _)) => {
                let _ = h.unlock().await;
            }
            // A refusal that waiting cannot mend (a channel the ACL does
            // not allow): the caller's, not a reason to go round again.
            Ok((Err(e), _, _)) if !e.is_retryable() => return Err(e),
            // Ended at once without a release (an error that passes): a
            // pause, so that the next round does not follow at once.
            _ if started.elapsed() < Duration::from_millis(1) => {
                tokio::time::sleep(bound.min(Duration::from_millis(20))).await;
            }
            _ => {}
        }
        Ok(())
    }

    async fn acquire(&self, lease: LeaseMode, wait: WaitMode) -> Result<Option<RedlockGuard>> {
        let ttl = match lease {
            LeaseMode::Fixed(d) => d,
            _ => self.ttl,
        };
        // A lease no longer than the clock-drift allowance is never valid
        // once granted: refused, rather than taken and given back for ever.
        // (One beyond the largest lease is refused by each server's
        // acquire, before anything is sent.)
        if ttl <= drift(ttl) {
            return Err(Error::InvalidArgument(format!(
                "a Redlock lease of {ttl:?} leaves no validity after the clock-drift allowance of {:?}",
                drift(ttl)
            )));
        }
        let deadline = wait.deadline();
        loop {
            let (wait_on, split) = match self.round(ttl).await? {
                Round::Won(holds, valid_until) => {
                    return Ok(Some(RedlockGuard::new(
                        holds,
                        valid_until,
                        ttl,
                        self.majority(),
                        lease != LeaseMode::Fixed(ttl),
                    )))
                }
                Round::Lost { wait_on, split } => (wait_on, split),
            };
            if wait == WaitMode::Try || deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
            // Wait for a release on the servers that answered "busy"
            // (their channels, bounded by the lease and the time left), or
            // when none did, for one that could not answer to come back.
            let bound = match left(deadline) {
                WaitMode::For(d) => d.min(ttl),
                _ => ttl,
            };
            self.wait_for_release(&wait_on, ttl, bound).await?;
            // Contenders split the servers between them: a random pause so
            // that they do not collide again.
            if split {
                let jitter = Duration::from_millis(rand::random_range(1..=20));
                tokio::time::sleep(jitter).await;
            }
        }
    }
}

/// How a [`Redlock`] round ended.
enum Round {
    /// A majority within validity: the holds and until when they count.
    Won(Vec<Hold>, Instant),
    /// Less than a majority (everything taken was given back): the
    /// servers to wait on (those that answered "held"; when none did,
    /// those that did not answer: never one that did not answer while
    /// another said "held", which would sleep out the bound), and whether
    /// some server granted (another contender holds the others for a
    /// moment).
    Lost { wait_on: Vec<usize>, split: bool },
}

/// A [`Redlock`] held on a majority of its servers.
#[must_use = "if unused the lock is released at once"]
#[derive(Debug)]
pub struct RedlockGuard {
    shared: Arc<RedShared>,
    renewal: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Debug)]
struct RedShared {
    /// An async mutex: a renewal round keeps it across its awaits, and
    /// `unlock` waits for the round instead of finding the holds away.
    holds: tokio::sync::Mutex<Vec<Hold>>,
    valid_until: Mutex<Instant>,
    state: watch::Sender<LeaseState>,
    token: u64,
}

impl Validity for RedShared {
    fn lease_state(&self) -> &watch::Sender<LeaseState> {
        &self.state
    }

    fn lease_until(&self) -> &Mutex<Instant> {
        &self.valid_until
    }
}

/// A Redlock's lease is the validity a majority confirmed.
impl HoldGuard for RedlockGuard {
    /// `Active` until the validity runs out or a renewal fails to reach a
    /// majority in time (`Lost`).
    fn state(&self) -> LeaseState {
        self.shared.current()
    }

    /// The validity computed at acquire (or at the last renewal that reached
    /// a majority): `TTL − elapsed − drift`, never more.
    fn valid_for(&self) -> Duration {
        Validity::valid_for(&*self.shared)
    }

    /// Resolves when the lock can no longer be counted on (`Lost`,
    /// `Unknown`); never for a release, as a `Hold`'s.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    fn lost(&self) -> impl Future<Output = LeaseState> + Send + 'static {
        lease_lost(self.shared.clone())
    }
}

impl RedlockGuard {
    fn new(
        holds: Vec<Hold>,
        valid_until: Instant,
        ttl: Duration,
        majority: usize,
        renew: bool,
    ) -> RedlockGuard {
        let token = holds.iter().map(Hold::fencing_token).max().unwrap_or(0);
        let shared = Arc::new(RedShared {
            holds: tokio::sync::Mutex::new(holds),
            valid_until: Mutex::new(valid_until),
            state: watch::channel(LeaseState::Active).0,
            token,
        });
        let renewal =
            renew.then(|| tokio::spawn(renew_loop(Arc::downgrade(&shared), ttl, majority)));
        RedlockGuard { shared, renewal }
    }

    /// The largest of the majority's fencing tokens. Each server's tokens
    /// rise on that server (counter and server clock); the largest of a
    /// majority rises across holds as long as the servers' clocks are within
    /// the lease of each other — it is a strong hint, not the guarantee a
    /// single server's counter gives (docs/safety.md).
    pub fn fencing_token(&self) -> u64 {
        self.shared.token
    }

    /// Release on every server that holds it.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when no server held it any more; otherwise the
    /// first error other than `NotHeld` (a server whose key was lost
    /// behind the holder's back is not an error while others held it),
    /// after trying them all; unconfirmed releases are finished by the
    /// background releasers.
    ///
    /// # Cancel safety
    /// If dropped, the remaining releases go to the background releasers.
    pub async fn unlock(mut self) -> Result<()> {
        self.shared.state.send_replace(LeaseState::Released);
        if let Some(t) = self.renewal.take() {
            // Not awaited: a round in flight holds `holds` (below) until
            // the abort drops it at its next await, so the release still
            // finds every hold; the task sees `Released` and starts no
            // other. Awaiting the task cost a cross-thread wake-up per
            // unlock (about a tenth of a Redlock lock+unlock's client CPU).
            t.abort();
        }
        let holds = std::mem::take(&mut *self.shared.holds.lock().await);
        let results = join_all(holds.into_iter().map(Hold::unlock)).await;
        if results.iter().all(|r| matches!(r, Err(Error::NotHeld))) {
            return Err(Error::NotHeld);
        }
        results
            .into_iter()
            .find(|r| matches!(r, Err(e) if !matches!(e, Error::NotHeld)))
            .unwrap_or(Ok(()))
    }
}

impl Drop for RedlockGuard {
    fn drop(&mut self) {
        if let Some(t) = self.renewal.take() {
            t.abort();
        }
        // Dropping the holds hands their releases to the releasers (or they
        // drop with the last reference, after an aborted round).
        if let Ok(mut holds) = self.shared.holds.try_lock() {
            holds.clear();
        }
    }
}

/// Extend every part a third into the lease; the extension counts only when
/// a majority accepts it within the validity left, else the guard is `Lost`.
async fn renew_loop(weak: std::sync::Weak<RedShared>, ttl: Duration, majority: usize) {
    loop {
        tokio::time::sleep(ttl / 3).await;
        let Some(shared) = weak.upgrade() else { return };
        if *shared.state.borrow() != LeaseState::Active {
            return;
        }
        let start = Instant::now();
        let valid_until = *shared.valid_until.lock();
        let holds = shared.holds.lock().await;
        let per_server = (ttl / 10).clamp(Duration::from_millis(5), Duration::from_secs(1));
        let results = join_all(
            holds
                .iter()
                .map(|h| tokio::time::timeout(per_server, h.extend(ttl))),
        )
        .await;
        let ok = results.iter().filter(|r| matches!(r, Ok(Ok(())))).count();
        drop(holds);
        if ok >= majority && Instant::now() < valid_until {
            *shared.valid_until.lock() = start + ttl.saturating_sub(drift(ttl));
        } else {
            shared.state.send_replace(LeaseState::Lost);
            return;
        }
    }
}

impl Acquire for MultiLock {
    type Guard = MultiGuard;

    /// Take every part, all or nothing. A part whose server cannot answer
    /// (`Unavailable`, `Indeterminate`) is waited for like a busy one,
    /// with nothing else held meanwhile: a wait rides out the outage, as
    /// `Lock::lock` does.
    ///
    /// # Errors
    /// A part's error ([`Error::WrongType`], [`Error::Shutdown`], ...):
    /// whatever was taken is released first.
    ///
    /// # Cancel safety
    /// If dropped, every part taken or possibly taken is released by its
    /// client's background releaser: no part stays held.
    fn acquire_with(
        &self,
        lease: LeaseMode,
        wait: WaitMode,
    ) -> impl std::future::Future<Output = Result<Option<MultiGuard>>> + Send {
        self.acquire(lease, wait)
    }
}

impl Acquire for Redlock {
    type Guard = RedlockGuard;

    /// Take the lock on a majority of the servers within the validity
    /// `TTL − elapsed − drift`; renewed while held (a renewal counts only
    /// when a majority accepts it within the remaining validity; otherwise
    /// the guard is `Lost`).
    ///
    /// # Errors
    /// A server's error that retrying cannot mend (`WrongType`,
    /// `Shutdown`); unreachable servers only count as refusals.
    ///
    /// # Cancel safety
    /// If dropped, every possible grant on every server is released by its
    /// client's background releaser.
    fn acquire_with(
        &self,
        lease: LeaseMode,
        wait: WaitMode,
    ) -> impl std::future::Future<Output = Result<Option<RedlockGuard>>> + Send {
        self.acquire(lease, wait)
    }
}
