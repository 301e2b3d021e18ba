//! deadbolt-semaphore: a leased distributed semaphore and a count-down
//! latch kept in Redis.
//!
//! **[`Semaphore`]**: permits are leased to their holder. The watchdog renews
//! them while held; when a holder dies its lease ends and the server gives
//! its permits back (an ended lease never counts as taken). A release or
//! added permits wake exactly the waiters whose demands now fit, from the
//! oldest on — no herd, no lost wake-up. Fairness: the oldest live waiter's
//! demand is reserved, so a request for many permits is served once enough
//! come back, however many single-permit requests arrive; requests that fit
//! beyond that reservation proceed at once. Every operation is O(log n) in
//! the holders and waiters.
//!
//! Beside the Redisson-style calls (`try_set_permits`, `set_permits`,
//! `add_permits`, `reduce_permits`, `drain_permits`, `delete`), a guard can
//! give back part of its permits ([`Permits::release_permits`]) and keep
//! the rest under its lease.
//!
//! **[`CountDownLatch`]**: `count_down` to zero wakes every waiter of every
//! client at once; the key is deleted at zero, so a finished latch leaves
//! nothing behind, and `try_set_count` arms it again.
//!
//! ```no_run
//! # async fn f() -> deadbolt_core::Result<()> {
//! let client = deadbolt_core::Client::connect("redis://127.0.0.1/").await?;
//! let sem = deadbolt_semaphore::Semaphore::new(&client, "db-connections");
//! sem.try_set_permits(10).await?;
//! let permits = sem.acquire(2).await?;   // waits until 2 are free at once
//! permits.release().await?;
//! # Ok(()) }
//! ```
//!
//! Data layout and policy: `lua/sem_lib.lua`; see also `docs/semaphore.md`.

use std::sync::Arc;
use std::time::Duration;

use deadbolt_core::primitive::{
    Acquire, AcquireSpec, Client, ConditionSpec, Error, Handle, Keys, LeaseMode, Result,
    ScriptCall, WaitMode, WakeAsTold,
};

mod permits;
pub use permits::Permits;

/// The semaphore's and the latch's Lua scripts (files in this crate's
/// `lua/`; the semaphore's layout and policy are in `sem_lib.lua`).
pub mod scripts {
    deadbolt_core::primitive::lua_scripts! {
        list pub SCRIPTS;
        libs [MSG_LIB, HOLD_LIB, QUEUE_LIB, LEASE_LIB, "sem_lib", "latch_lib"];
        /// Take n permits, replay, or queue for them.
        pub SEM_ACQUIRE = "sem_acquire";
        /// Give permits back or leave the queue.
        pub SEM_RELEASE = "sem_release";
        /// Give back part of one hold's permits, keeping the rest.
        pub SEM_RELEASE_PART = "sem_release_part";
        /// Delete a semaphore; its waiters try again (and queue anew).
        pub SEM_DELETE = "sem_delete";
        /// Renew many permit holds (each its own lease).
        pub SEM_RENEW = "sem_renew";
        /// Set, add, reduce, drain or read the permits.
        pub SEM_PERMITS = "sem_permits";
        /// Keep one client's waiters alive; give back ended leases.
        pub SEM_HEARTBEAT = "sem_heartbeat";
        /// Read the semaphore's state.
        pub SEM_INSPECT = "sem_inspect";
        /// Set, count down, read or delete a latch.
        pub LATCH_OP = "latch_op";
        /// Has the latch reached zero? (The try of a wait.)
        pub LATCH_WAIT = "latch_wait";
    }
}
pub use scripts::SCRIPTS;
use scripts::*;

/// The kind segment of a semaphore's keys: `<ns>:{<name>}:sem`.
pub const SEMAPHORE_KIND: &str = "sem";
/// The kind segment of a latch's key: `<ns>:{<name>}:latch`.
pub const LATCH_KIND: &str = "latch";

/// The largest number of permits (and latch count): 2^53 − 1, the largest
/// integer Lua numbers carry exactly.
pub const MAX_PERMITS: u64 = (1 << 53) - 1;

/// How many holders and waiters [`Semaphore::inspect`] lists.
const LISTED: usize = 100;

/// The six keys every semaphore script takes, in order (see
/// `lua/sem_lib.lua`).
pub fn semaphore_keys(k: &Keys) -> Vec<String> {
    vec![
        k.main().to_string(),
        k.sub("h"),
        k.sub("hn"),
        k.sub("q"),
        k.sub("qo"),
        k.sub("alive"),
    ]
}

fn check_n(what: &str, n: u64, zero_ok: bool) -> Result<u64> {
    if n == 0 && !zero_ok {
        return Err(Error::InvalidArgument(format!("{what} 0 means nothing")));
    }
    if n > MAX_PERMITS {
        return Err(Error::InvalidArgument(format!(
            "{what} {n} is beyond the largest accepted ({MAX_PERMITS})"
        )));
    }
    Ok(n)
}

/// A handle on a distributed semaphore with leased permits.
///
/// Each handle is an owner (as for locks); permits belong to the [`Permits`]
/// guard that took them, each with its own lease.
#[derive(Debug, Clone)]
pub struct Semaphore {
    inner: Arc<SemHandle>,
}

/// A semaphore handle's insides: its six keys and its acquire.
type SemHandle = Handle<(Vec<String>, AcquireSpec)>;

/// One holder as [`Semaphore::inspect`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HolderInfo {
    /// The hold's attempt id.
    pub attempt: String,
    /// Its owner id.
    pub owner: String,
    /// Permits it holds.
    pub permits: u64,
    /// How long its lease still runs.
    pub ttl: Duration,
}

/// One waiter as [`Semaphore::inspect`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaiterInfo {
    /// The waiting attempt id.
    pub attempt: String,
    /// Its owner id.
    pub owner: String,
    /// Permits it waits for.
    pub permits: u64,
}

/// A semaphore's state, read in one step (ended leases purged first).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreInfo {
    /// The permits set; `None` when never set.
    pub permits: Option<u64>,
    /// Permits free now (negative after a reduction below what live holds
    /// take, until they give permits back).
    pub available: i64,
    /// Live holds.
    pub holds: u64,
    /// Queued waiters.
    pub waiting: u64,
    /// Holders, longest lease first (at most 100).
    pub holders: Vec<HolderInfo>,
    /// Waiters in queue order (at most 100).
    pub waiters: Vec<WaiterInfo>,
}

/// A request for a number of a [`Semaphore`]'s permits
/// ([`Semaphore::permits`]): acquiring it takes them all at once.
#[derive(Debug, Clone, Copy)]
pub struct PermitRequest<'a> {
    sem: &'a Semaphore,
    n: u64,
}

impl Acquire for PermitRequest<'_> {
    type Guard = Permits;

    /// Take the permits with `lease` and `wait`; `Ok(None)` when the wait
    /// ended without them.
    ///
    /// # Errors
    /// As [`Semaphore::acquire`].
    ///
    /// # Cancel safety
    /// As [`Semaphore::acquire`].
    fn acquire_with(
        &self,
        lease: LeaseMode,
        wait: WaitMode,
    ) -> impl std::future::Future<Output = Result<Option<Permits>>> + Send {
        self.sem.take(self.n, lease, wait)
    }
}

type SemInspectReply = (
    i64,
    i64,
    u64,
    u64,
    Vec<(String, String, u64, i64)>,
    Vec<(String, String, u64)>,
);

impl Semaphore {
    /// A new handle on the semaphore `name`.
    ///
    /// An invalid name (empty) is reported as [`Error::InvalidArgument`] by
    /// every method, before anything is sent.
    pub fn new(client: &Client, name: &str) -> Semaphore {
        let parts = Handle::new(client, SEMAPHORE_KIND, name, |k| {
            let keys = semaphore_keys(&k);
            let spec =
                AcquireSpec::builder("semaphore", &k, &SEM_ACQUIRE, &SEM_RELEASE, &WakeAsTold)
                    .keys(keys.clone())
                    .extra_args(vec![client.config().waiter_timeout.as_millis().to_string()])
                    .release_with(keys.clone(), vec![])
                    .renew(&SEM_RENEW, keys[..3].to_vec())
                    // One channel per (client, semaphore); wakes name the waiter.
                    .channel(format!("{}:ch:{}", k.main(), client.id()))
                    .grants_by_name_only()
                    .heartbeat(&SEM_HEARTBEAT, keys.clone())
                    .build();
            (keys, spec)
        });
        Semaphore {
            inner: Arc::new(parts),
        }
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    fn parts(&self) -> Result<&(Vec<String>, AcquireSpec)> {
        self.inner.parts()
    }

    async fn permits_op(&self, op: &str, n: u64) -> Result<i64> {
        let (keys, _) = self.parts()?;
        let call = ScriptCall::new(
            &SEM_PERMITS,
            keys.clone(),
            vec![op.to_string(), n.to_string()],
        );
        self.inner.client().run(&call).await
    }

    /// Set the number of permits, only if it was never set. Returns whether
    /// it set them. Waiters that now fit are granted their permits.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for more than [`MAX_PERMITS`];
    /// `Unavailable`, `Indeterminate`, `WrongType`.
    ///
    /// # Cancel safety
    /// If dropped, the permits may or may not have been set; calling it
    /// again is harmless.
    pub async fn try_set_permits(&self, n: u64) -> Result<bool> {
        check_n("permits", n, true)?;
        Ok(self.permits_op("set", n).await? == 1)
    }

    /// Set the total number of permits to `n`, whether it was set before
    /// or not (Redisson `setPermits`); returns the permits available then:
    /// `n` minus what live holds take, before the waiters it serves take
    /// theirs (as [`add_permits`](Self::add_permits) counts).
    ///
    /// Live holds keep what they hold: when they take more than `n`, the
    /// result is negative, and available stays at or below zero until they
    /// give enough back (no permit is taken from a holder). Waiters that now
    /// fit are granted their permits inside the call, from the oldest on,
    /// and no more (as for [`add_permits`](Self::add_permits)).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: deadbolt_core::Client) -> deadbolt_core::Result<()> {
    /// let sem = deadbolt_semaphore::Semaphore::new(&client, "db-connections");
    /// sem.set_permits(10).await?;            // the pool was resized
    /// assert_eq!(sem.available_permits().await?, 10);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for more than [`MAX_PERMITS`], nothing
    /// sent; `Unavailable`, `Indeterminate`, `WrongType` (nothing written).
    ///
    /// # Cancel safety
    /// If dropped after sending, the total may or may not have been set
    /// (and the waiters it serves granted); calling it again with the same
    /// `n` is harmless.
    pub async fn set_permits(&self, n: u64) -> Result<i64> {
        check_n("permits", n, true)?;
        self.permits_op("force", n).await
    }

    /// Add `n` permits (setting them when never set); returns the permits
    /// available after. Waiters that now fit are granted their permits, and
    /// no more.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0, or for a total beyond
    /// [`MAX_PERMITS`] (nothing written); `Unavailable`, `Indeterminate`,
    /// `WrongType`.
    ///
    /// # Cancel safety
    /// Not idempotent: if dropped after sending, the permits may have been
    /// added.
    pub async fn add_permits(&self, n: u64) -> Result<i64> {
        check_n("permits to add", n, false)?;
        self.permits_op("add", n).await
    }

    /// Take `n` permits away from the total; returns the permits available
    /// after, which is negative when live holds take more than the new total
    /// (they keep what they hold and give it back as usual).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0 and when the total would go below
    /// zero: refused, nothing written (no Redisson-style debt on the total);
    /// `Unavailable`, `Indeterminate`, `WrongType`.
    ///
    /// # Cancel safety
    /// Not idempotent: if dropped after sending, the permits may have been
    /// taken away.
    pub async fn reduce_permits(&self, n: u64) -> Result<i64> {
        check_n("permits to reduce", n, false)?;
        self.permits_op("reduce", n).await
    }

    /// Permits free now. An ended lease never counts as taken.
    ///
    /// # Errors
    /// `Unavailable`, `Indeterminate`, `WrongType`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only gives back ended leases, which is due anyway.
    pub async fn available_permits(&self) -> Result<i64> {
        self.permits_op("available", 0).await
    }

    /// Take every free permit away from the total; returns how many.
    ///
    /// # Errors
    /// `Unavailable`, `Indeterminate`, `WrongType`.
    ///
    /// # Cancel safety
    /// If dropped, the permits may or may not have been drained.
    pub async fn drain_permits(&self) -> Result<u64> {
        Ok(self.permits_op("drain", 0).await?.unsigned_abs())
    }

    async fn take(&self, n: u64, lease: LeaseMode, wait: WaitMode) -> Result<Option<Permits>> {
        check_n("permits", n, false)?;
        let (_, base) = self.parts()?;
        let spec = base.with_arg(n.to_string());
        let hold = self
            .inner
            .client()
            .acquire(&spec, self.inner.owner(), lease, wait)
            .await?;
        Ok(hold.map(|hold| Permits::new(hold, n, self.inner.clone())))
    }

    /// A request for `n` permits: an [`Acquire`], so it has the five
    /// acquire calls of every primitive (`lock`, `try_lock`,
    /// `try_lock_for`, `lock_with_lease`, `try_lock_with`), each returning
    /// [`Permits`]. The methods below are the same calls under the
    /// semaphore's own names.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: deadbolt_core::Client) -> deadbolt_core::Result<()> {
    /// use deadbolt_core::Acquire as _;
    /// let s = deadbolt_semaphore::Semaphore::new(&client, "workers");
    /// if let Some(two) = s.permits(2).try_lock_for(std::time::Duration::from_secs(1)).await? {
    ///     two.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn permits(&self, n: u64) -> PermitRequest<'_> {
        PermitRequest { sem: self, n }
    }

    /// Wait until `n` permits are free at once and take them; the watchdog
    /// renews their lease until release. Rides out reconnects.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0 or more than [`MAX_PERMITS`];
    /// [`Error::WrongType`], [`Error::SubscribeRefused`],
    /// [`Error::Shutdown`], [`Error::Redis`].
    ///
    /// # Cancel safety
    /// If dropped after its request may have reached Redis, a possible grant
    /// or queue entry is released once by the background releaser: no
    /// permit stays taken.
    pub async fn acquire(&self, n: u64) -> Result<Permits> {
        self.permits(n).lock().await
    }

    /// One attempt at `n` permits, no waiting (never queues); watchdog lease.
    ///
    /// # Errors
    /// As [`Self::acquire`], plus `Unavailable` / `Indeterminate` when Redis
    /// could not answer.
    ///
    /// # Cancel safety
    /// As [`Self::acquire`].
    pub async fn try_acquire(&self, n: u64) -> Result<Option<Permits>> {
        self.permits(n).try_lock().await
    }

    /// Wait up to `wait` for `n` permits; `Ok(None)` when the wait ends
    /// without them (the queue entry is removed at once).
    ///
    /// # Errors
    /// As [`Self::try_acquire`].
    ///
    /// # Cancel safety
    /// As [`Self::acquire`].
    pub async fn try_acquire_for(&self, n: u64, wait: Duration) -> Result<Option<Permits>> {
        self.permits(n).try_lock_for(wait).await
    }

    /// Wait until `n` permits are free, with a fixed `lease` (not renewed):
    /// the server takes them back when it ends.
    ///
    /// # Errors
    /// As [`Self::acquire`], and `InvalidArgument` for a lease under 1 ms or
    /// over `MAX_LEASE_MS`.
    ///
    /// # Cancel safety
    /// As [`Self::acquire`]; an unreleased grant also ends with its lease.
    pub async fn acquire_with_lease(&self, n: u64, lease: Duration) -> Result<Permits> {
        self.permits(n).lock_with_lease(lease).await
    }

    /// Wait up to `wait` for `n` permits with a fixed `lease`.
    ///
    /// # Errors
    /// As [`Self::acquire_with_lease`] and [`Self::try_acquire_for`].
    ///
    /// # Cancel safety
    /// As [`Self::acquire`].
    pub async fn try_acquire_with(
        &self,
        n: u64,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<Permits>> {
        self.permits(n).try_lock_with(wait, lease).await
    }

    /// A stream of this semaphore's permits in use, for any client's holds:
    /// `Free` and the permits taken (`Shared`, when not 0) when it starts,
    /// then every change of that number (`Shared`). Woken by keyspace
    /// notifications when the server's `notify-keyspace-events` includes
    /// `Kghzx`, else within [`deadbolt_core::CATCH_UP`]; errors at most
    /// once per `CATCH_UP`. See [`deadbolt_core::watch`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: deadbolt_core::Client) {
    /// use futures::StreamExt;
    /// let s = deadbolt_semaphore::Semaphore::new(&client, "workers");
    /// let mut changes = Box::pin(s.watch());
    /// while let Some(change) = changes.next().await {
    ///     println!("{change:?}");
    /// }
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// Dropping the stream stops it; it records nothing on the server.
    pub fn watch(
        &self,
    ) -> impl futures::Stream<Item = Result<deadbolt_core::primitive::HoldEvent>> + Send + 'static
    {
        // No exclusive holder: the configuration hash stands in for the
        // hold hash (it has no owner field).
        let parts = self.parts().map(|(keys, _)| {
            let read = deadbolt_core::primitive::hold_watch_call(
                &keys[0],
                vec![keys[1].clone(), keys[2].clone()],
                vec!["permits".to_string()],
            );
            (vec![keys[1].clone(), keys[2].clone()], read)
        });
        deadbolt_core::primitive::watch(self.inner.client(), parts)
    }

    /// Delete the semaphore: its permit count, holds and queue. Returns
    /// whether anything was there to delete.
    ///
    /// Afterwards the semaphore is as if never set. Holders are not told
    /// at once: their next renewal finds their hold gone (`lost()`
    /// resolves, `state()` is `Lost`), and `release` reports
    /// [`Error::NotHeld`]; until then (up to a third of the watchdog
    /// timeout) they may still act on permits that no longer exist, so
    /// delete a semaphore nobody holds. Waiters do not sleep on: every
    /// client with one is told to try again; they find no permits set,
    /// queue anew (in the order they try), and are granted once the
    /// permits are set again ([`try_set_permits`](Self::try_set_permits),
    /// [`set_permits`](Self::set_permits), [`add_permits`](Self::add_permits));
    /// a bounded wait ends at its bound as usual.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: deadbolt_core::Client) -> deadbolt_core::Result<()> {
    /// let sem = deadbolt_semaphore::Semaphore::new(&client, "batch-slots");
    /// sem.try_set_permits(4).await?;
    /// assert!(sem.delete().await?);
    /// assert_eq!(sem.inspect().await?.permits, None);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` (a bad name), `Unavailable`, `Indeterminate`;
    /// `WrongType` when one of the keys is of another type: nothing
    /// deleted.
    ///
    /// # Cancel safety
    /// If dropped after sending, the semaphore may or may not have been
    /// deleted; calling it again is harmless (it then returns `false`).
    pub async fn delete(&self) -> Result<bool> {
        let (keys, _) = self.parts()?;
        let call = ScriptCall::new(&SEM_DELETE, keys.clone(), vec![]);
        Ok(self.inner.client().run::<i64>(&call).await? == 1)
    }

    /// Permits set and available, holders with their leases, waiters.
    ///
    /// # Errors
    /// `InvalidArgument`, `Unavailable`, `Indeterminate`, `WrongType`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only gives back ended leases.
    pub async fn inspect(&self) -> Result<SemaphoreInfo> {
        let (keys, _) = self.parts()?;
        let call = ScriptCall::new(&SEM_INSPECT, keys.clone(), vec![LISTED.to_string()]);
        let (total, available, holds, waiting, holders, waiters): SemInspectReply =
            self.inner.client().run(&call).await?;
        Ok(SemaphoreInfo {
            permits: u64::try_from(total).ok(),
            available,
            holds,
            waiting,
            holders: holders
                .into_iter()
                .map(|(attempt, owner, permits, ms)| HolderInfo {
                    attempt,
                    owner,
                    permits,
                    ttl: Duration::from_millis(u64::try_from(ms).unwrap_or(0)),
                })
                .collect(),
            waiters: waiters
                .into_iter()
                .map(|(attempt, owner, permits)| WaiterInfo {
                    attempt,
                    owner,
                    permits,
                })
                .collect(),
        })
    }
}

/// A handle on a distributed count-down latch.
#[derive(Debug, Clone)]
pub struct CountDownLatch {
    inner: Arc<Handle<(String, String, ConditionSpec)>>,
}

impl CountDownLatch {
    /// A new handle on the latch `name`.
    ///
    /// An invalid name (empty) is reported as [`Error::InvalidArgument`] by
    /// every method, before anything is sent.
    pub fn new(client: &Client, name: &str) -> CountDownLatch {
        let parts = Handle::new(client, LATCH_KIND, name, |k| {
            let key = k.main().to_string();
            let channel = k.channel();
            // A wait records nothing: there is nothing to release or renew.
            let spec = ConditionSpec::builder("latch", &k, &LATCH_WAIT, &WakeAsTold).build();
            (key, channel, spec)
        });
        CountDownLatch {
            inner: Arc::new(parts),
        }
    }

    /// The latch's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    fn parts(&self) -> Result<&(String, String, ConditionSpec)> {
        self.inner.parts()
    }

    async fn op(&self, op: &str, arg: String) -> Result<u64> {
        let (key, _, _) = self.parts()?;
        let call = ScriptCall::new(&LATCH_OP, vec![key.clone()], vec![op.to_string(), arg]);
        self.inner.client().run(&call).await
    }

    /// Arm the latch with `count`, unless it is armed already (count > 0).
    /// Returns whether it set the count. A latch that reached zero can be
    /// armed again.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0 or more than [`MAX_PERMITS`];
    /// `Unavailable`, `Indeterminate`, `WrongType`, `BadValue`.
    ///
    /// # Cancel safety
    /// If dropped, the count may or may not have been set; calling it again
    /// is harmless.
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        check_n("count", count, false)?;
        Ok(self.op("set", count.to_string()).await? == 1)
    }

    /// Count down by one; returns the count after. Reaching zero wakes every
    /// waiter of every client at once and deletes the latch's key.
    ///
    /// # Errors
    /// `Unavailable`, `Indeterminate`, `WrongType`, `BadValue`.
    ///
    /// # Cancel safety
    /// Not idempotent: if dropped after sending, it may have counted down.
    pub async fn count_down(&self) -> Result<u64> {
        let (_, channel, _) = self.parts()?;
        self.op("count_down", channel.clone()).await
    }

    /// The current count (0 when it reached zero or was never set).
    ///
    /// # Errors
    /// `Unavailable`, `Indeterminate`, `WrongType`, `BadValue`.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn count(&self) -> Result<u64> {
        self.op("count", String::new()).await
    }

    /// Delete the latch; returns whether there was a key to delete. An
    /// armed latch opens: every waiter of every client goes at once, as at
    /// zero (a deleted latch reads 0, and waits take 0 for open). Redisson
    /// `delete` of an `RCountDownLatch` does the same.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: deadbolt_core::Client) -> deadbolt_core::Result<()> {
    /// let latch = deadbolt_semaphore::CountDownLatch::new(&client, "batch-7");
    /// latch.try_set_count(3).await?;
    /// assert!(latch.delete().await?);       // the batch was abandoned
    /// assert_eq!(latch.count().await?, 0);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` (a bad name), `Unavailable`, `Indeterminate`;
    /// `WrongType`, `BadValue` (a key that is no count): nothing deleted.
    ///
    /// # Cancel safety
    /// If dropped after sending, the latch may or may not have been
    /// deleted (and its waiters released); calling it again is harmless.
    pub async fn delete(&self) -> Result<bool> {
        let (_, channel, _) = self.parts()?;
        Ok(self.op("delete", channel.clone()).await? == 1)
    }

    /// Wait until the count is zero (at once if it is). A latch whose key
    /// is gone reads 0, so a server that loses its data (a restart without
    /// persistence, a failover to a replica that missed the writes) opens
    /// every latch it kept: its waiters go as at zero. Waits on the
    /// latch's channel; rides out reconnects.
    ///
    /// # Errors
    /// `InvalidArgument`, `WrongType`, `BadValue`, `SubscribeRefused`,
    /// `Shutdown`.
    ///
    /// # Cancel safety
    /// Cancel safe: a wait records nothing.
    pub async fn wait(&self) -> Result<()> {
        let (_, _, spec) = self.parts()?;
        self.inner
            .client()
            .wait_until(spec, self.inner.owner(), WaitMode::Forever)
            .await
            .map(|_| ())
    }

    /// Wait up to `wait` for the count to reach zero; returns whether it did.
    ///
    /// # Errors
    /// As [`Self::wait`], plus `Unavailable` / `Indeterminate` when the time
    /// ran out while Redis could not answer.
    ///
    /// # Cancel safety
    /// Cancel safe: a wait records nothing.
    pub async fn wait_for(&self, wait: Duration) -> Result<bool> {
        let (_, _, spec) = self.parts()?;
        self.inner
            .client()
            .wait_until(spec, self.inner.owner(), WaitMode::up_to(wait))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert!(check_n("n", 0, false).is_err());
        assert!(check_n("n", 0, true).is_ok());
        assert!(check_n("n", MAX_PERMITS, false).is_ok());
        assert!(check_n("n", MAX_PERMITS + 1, true).is_err());
    }
}
