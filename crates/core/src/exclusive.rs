use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use std::marker::PhantomData;

use crate::composite::PlainLock;
use crate::guard::HoldGuard as _;
use crate::handle::{Acquire, Handle};
use crate::scripts::{ScriptCall, HOLD_INSPECT};
use crate::{AcquireSpec, Client, ExclusiveGuard as LockGuard, Keys, LeaseMode, Result, WaitMode};

/// What distinguishes one exclusive primitive from another: its key kind,
/// its scripts and its force-unlock. Implemented by `deadbolt-lock` and
/// `deadbolt-fair`; the handle type [`Exclusive`] does the rest.
pub trait ExclusiveKind: Send + Sync + 'static {
    /// The kind segment of the keys: `<ns>:{<name>}:<KIND>`.
    const KIND: &'static str;
    /// A plain reentrant lock: a hold hash and a fencing counter only, in the
    /// layout `hold_lib.lua` describes (no queue). Composites may take several
    /// such locks of one client in one script ([`Lockable::plain`](crate::Lockable::plain)).
    const PLAIN: bool = false;
    /// The acquire description for a handle on `keys`.
    fn spec(client: &Client, keys: &Keys) -> AcquireSpec;
    /// The call that deletes the hold whoever owns it and wakes the next waiter.
    fn force_unlock(client: &Client, keys: &Keys) -> ScriptCall;

    /// For kinds that queue their waiters on the server (a fair lock): the
    /// queue's ZSET, whose length [`Exclusive::inspect`] reports. `None`
    /// (the default) for kinds without a queue.
    fn queue_key(_keys: &Keys) -> Option<String> {
        None
    }

    /// The key that exists on the server while a waiter of the name is
    /// recorded there (registered for a grant, or queued): tools that
    /// check that a waiter is parked read it. The queue of a kind that has
    /// one (the default); a kind that records its waiters elsewhere says
    /// where.
    fn waiters_key(keys: &Keys) -> Option<String> {
        Self::queue_key(keys)
    }

    /// For kinds with a queue: the read-only call that lists its head, at
    /// most `limit` entries in queue order, each replied as
    /// `{attempt, owner, lease ms or -1, liveness ms}` (liveness: how long
    /// the waiter's client stays alive without a heartbeat; negative when
    /// past its deadline, -1 without a record). Run by
    /// [`Exclusive::queue`].
    fn queue_call(_client: &Client, _keys: &Keys, _limit: usize) -> Option<ScriptCall> {
        None
    }
}

/// One waiter in an exclusive lock's queue ([`Exclusive::queue`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueuedWaiter {
    /// The waiting acquire's attempt id.
    pub attempt: String,
    /// Owner id `<client id>:<handle id>` of the waiter.
    pub owner: String,
    /// The lease it asked for; `None` when not recorded.
    pub lease: Option<Duration>,
    /// How long its client counts as alive without another heartbeat;
    /// `None` when past its deadline or without a liveness record (the
    /// queue skips such a waiter when it comes to it).
    pub alive_for: Option<Duration>,
    /// How long ago its client's liveness deadline passed; `None` when
    /// alive or without a record.
    pub expired_ago: Option<Duration>,
}

impl QueuedWaiter {
    /// One entry of the queue call's reply (contract on
    /// [`ExclusiveKind::queue_call`]): `(attempt, owner, lease ms or -1,
    /// liveness ms)`.
    pub fn from_reply((attempt, owner, lease_ms, liveness_ms): (String, String, i64, i64)) -> Self {
        let ms = |v: i64| u64::try_from(v).ok().map(Duration::from_millis);
        QueuedWaiter {
            attempt,
            owner,
            lease: ms(lease_ms),
            alive_for: ms(liveness_ms),
            expired_ago: if liveness_ms < -1 {
                ms(liveness_ms.saturating_neg())
            } else {
                None
            },
        }
    }
}

/// A handle on an exclusive, reentrant distributed lock of kind `K`
/// (`deadbolt_lock::Lock`, `deadbolt_fair::FairLock`).
///
/// Reentrancy is per handle: a clone of this handle is the same owner and may
/// take the lock again while it holds it (each acquire needs its own unlock);
/// tasks that must exclude each other each make their own handle with
/// `Lock::new` / `client.lock(name)`.
///
/// # Examples
/// ```no_run
/// # use deadbolt_core::{Acquire, Client, Exclusive, ExclusiveKind};
/// // `K` is `deadbolt_lock::Reentrant` for a `Lock`, `deadbolt_fair::Fifo` for a `FairLock`.
/// async fn print_token<K: ExclusiveKind>(client: &Client) -> deadbolt_core::Result<()> {
/// let lock = Exclusive::<K>::new(client, "orders:42");
/// let guard = lock.lock().await?;
/// println!("fencing token {}", guard.fencing_token());
/// guard.unlock().await?;
/// Ok(())
/// }
/// ```
pub struct Exclusive<K> {
    inner: Arc<Handle<Parts>>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Exclusive<K> {
    fn clone(&self) -> Self {
        Exclusive {
            inner: self.inner.clone(),
            kind: PhantomData,
        }
    }
}

impl<K: ExclusiveKind> std::fmt::Debug for Exclusive<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exclusive")
            .field("kind", &K::KIND)
            .field("name", &self.inner.name())
            .field("owner", &self.inner.owner())
            .finish()
    }
}

/// The keys of one handle and what it built from them.
#[derive(Debug)]
struct Parts {
    spec: AcquireSpec,
    fence_key: String,
    force: ScriptCall,
    keys: Keys,
}

impl<K: ExclusiveKind> Exclusive<K> {
    /// A new handle (a new owner) on the lock `name`.
    ///
    /// An invalid name (empty) is reported as [`Error::InvalidArgument`](crate::Error::InvalidArgument) by
    /// every method, before anything is sent.
    pub fn new(client: &Client, name: &str) -> Self {
        // Each handle knows its own holds: its acquires tell the script
        // whether a re-entry is expected (see `AcquireBuilder::live`).
        let parts = Handle::new(client, K::KIND, name, |k| Parts {
            spec: K::spec(client, &k).with_live(Arc::default()),
            fence_key: k.fence().to_string(),
            force: K::force_unlock(client, &k),
            keys: k,
        });
        Exclusive {
            inner: Arc::new(parts),
            kind: PhantomData,
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// This handle's owner id, `<client id>:<handle id>`.
    pub fn owner(&self) -> &str {
        self.inner.owner()
    }

    /// The Redis key holding the lock.
    pub fn key(&self) -> Result<&str> {
        Ok(&self.spec()?.key)
    }

    /// The parts a composite needs to take this lock in its own script,
    /// when the kind is plain (see [`ExclusiveKind::PLAIN`]).
    pub(crate) fn plain(&self) -> Option<PlainLock> {
        if !K::PLAIN {
            return None;
        }
        let p = self.inner.parts().ok()?;
        let spec = &p.spec;
        Some(PlainLock {
            client: self.inner.client().clone(),
            kind: K::KIND,
            owner: self.inner.owner().to_string(),
            key: spec.key.clone(),
            fence: p.fence_key.clone(),
            channel: spec.release_extra.first().cloned().unwrap_or_default(),
            release: spec.release,
            renew: spec.renew,
            live: spec.live.clone(),
        })
    }

    fn spec(&self) -> Result<&AcquireSpec> {
        Ok(&self.inner.parts()?.spec)
    }

    /// Holder, hold count, token, remaining TTL, fencing counter and queue
    /// length (fair lock), read atomically.
    ///
    /// # Errors
    /// `Unavailable`, `Indeterminate`, `WrongType`.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn inspect(&self) -> Result<LockInfo> {
        let p = self.inner.parts()?;
        let call = ScriptCall::new(
            &HOLD_INSPECT,
            [p.spec.key.clone(), p.fence_key.clone()]
                .into_iter()
                .chain(K::queue_key(&p.keys))
                .collect(),
            vec![],
        );
        let (owner, n, token, pttl, fence, queued): (String, u64, u64, i64, i64, u64) =
            self.inner.client().run(&call).await?;
        let held = pttl != -2 && !owner.is_empty();
        Ok(LockInfo {
            holder_name: held.then(|| crate::holder_name(&owner)).flatten(),
            holder: held.then_some(owner),
            hold_count: if held { n } else { 0 },
            token: held.then_some(token),
            ttl: u64::try_from(pttl).ok().map(Duration::from_millis),
            fence: u64::try_from(fence).ok(),
            queued,
        })
    }

    /// The head of the lock's queue of waiters, in order, at most `limit`
    /// entries; empty for kinds without a queue (a `Lock`: its waiters are
    /// not ordered on the server). Read in one atomic step.
    ///
    /// # Errors
    /// `Unavailable`, `Indeterminate` (read-only: nothing changed),
    /// `WrongType` naming a key of the queue that has another type.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn queue(&self, limit: usize) -> Result<Vec<QueuedWaiter>> {
        let keys = &self.inner.parts()?.keys;
        let Some(call) = K::queue_call(self.inner.client(), keys, limit) else {
            return Ok(Vec::new());
        };
        let entries: Vec<(String, String, i64, i64)> = self.inner.client().run(&call).await?;
        Ok(entries.into_iter().map(QueuedWaiter::from_reply).collect())
    }

    /// Whether anyone holds the lock.
    ///
    /// # Errors
    /// `Unavailable`, `Indeterminate` (read-only: nothing changed), `WrongType`.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.inspect().await?.holder.is_some())
    }

    /// Whether this handle (or a clone of it) holds the lock.
    ///
    /// # Errors
    /// As [`Self::is_locked`].
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn is_held(&self) -> Result<bool> {
        Ok(self.inspect().await?.holder.as_deref() == Some(self.owner()))
    }

    /// How many times this handle holds the lock (0 when it does not).
    ///
    /// # Errors
    /// As [`Self::is_locked`].
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn hold_count(&self) -> Result<u64> {
        let info = self.inspect().await?;
        Ok(if info.holder.as_deref() == Some(self.owner()) {
            info.hold_count
        } else {
            0
        })
    }

    /// The lock key's remaining TTL, whoever holds it; `None` when free.
    ///
    /// # Errors
    /// As [`Self::is_locked`].
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        let info = self.inspect().await?;
        Ok(info.holder.and(info.ttl))
    }

    /// Delete the lock whoever holds it and wake a waiter. Returns whether a
    /// hold was removed. The former holder's client is told on its own
    /// channel: its guard turns `Lost` (and `lost()` fires) within a round
    /// trip, or at its next renewal at the latest if the message is lost;
    /// its unlock returns [`Error::NotHeld`](crate::Error::NotHeld).
    ///
    /// # Errors
    /// `Unavailable`, `Indeterminate`.
    ///
    /// # Cancel safety
    /// If dropped, the delete may or may not have happened; calling it again is harmless.
    pub async fn force_unlock(&self) -> Result<bool> {
        let call = &self.inner.parts()?.force;
        Ok(self.inner.client().run::<i64>(call).await? == 1)
    }

    /// A stream of this lock's holder changes, for any client's holds:
    /// the holder when it starts ([`HoldEvent::Held`](crate::watch::HoldEvent::Held),
    /// or `Free`),
    /// then every new holder (`Acquired`) and how each hold ended
    /// (`Released`, `Expired`, `ForceUnlocked`) — what Redisson's lock
    /// listeners give, without polling when the server's
    /// `notify-keyspace-events` includes `Kghzx`. Without notifications
    /// the stream samples: it reads the lock every
    /// [`CATCH_UP`](crate::CATCH_UP) and when a lease ends, so a hold taken
    /// and released between two reads is not seen at all. Errors are yielded at most once per `CATCH_UP`, and the
    /// stream goes on. See [`watch`](crate::watch) for the details.
    ///
    /// # Examples
    /// ```no_run
    /// # use deadbolt_core::{Client, Exclusive, ExclusiveKind};
    /// # async fn f<K: ExclusiveKind>(client: &Client) {
    /// use futures::StreamExt;
    /// let lock = Exclusive::<K>::new(client, "orders:42");
    /// let mut changes = Box::pin(lock.watch());
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
    ) -> impl futures::Stream<Item = Result<crate::watch::HoldEvent>> + Send + 'static {
        let parts = self.inner.parts().map(|p| {
            (
                vec![p.spec.key.clone()],
                crate::watch::hold_watch_call(p.keys.main(), vec![], vec![]),
            )
        });
        crate::watch::watch(self.inner.client(), parts)
    }

    /// Take the lock, run `work` with the fencing token, and unlock.
    ///
    /// `work` is raced against the hold's [`lost`](crate::ExclusiveGuard::lost): if the
    /// hold is lost first, `work` is dropped and [`Error::LeaseLost`](crate::Error::LeaseLost)
    /// returned, as the guard's `run` returns it.
    ///
    /// # Errors
    /// As [`Self::lock`]; [`Error::LeaseLost`](crate::Error::LeaseLost) when the hold was lost
    /// while the work ran, [`Error::NotHeld`](crate::Error::NotHeld) when the unlock after it
    /// found the hold gone: both are [`Error::is_lost`](crate::Error::is_lost).
    ///
    /// # Cancel safety
    /// If dropped, `work` is dropped and the hold goes to the releaser.
    pub async fn run<F, Fut, T>(&self, work: F) -> Result<T>
    where
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = self.lock().await?;
        // The guard's `run` races the work against the loss (one mechanism
        // for every guard, one error for a loss).
        let out = guard.run(work(guard.fencing_token())).await?;
        guard.unlock().await?;
        Ok(out)
    }
}

impl<K: ExclusiveKind> crate::Acquire for Exclusive<K> {
    type Guard = LockGuard;

    async fn acquire_with(&self, lease: LeaseMode, wait: WaitMode) -> Result<Option<LockGuard>> {
        let spec = self.spec()?;
        let hold = self
            .inner
            .client()
            .acquire(spec, self.inner.owner(), lease, wait)
            .await?;
        Ok(hold.map(LockGuard::new))
    }
}

/// An exclusive lock's state, read in one atomic step by
/// [`Exclusive::inspect`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockInfo {
    /// The holder's owner id (`<client id>:<handle id>`); `None` when free.
    pub holder: Option<String>,
    /// The holder's client name ([`ClientBuilder::client_name`](crate::ClientBuilder::client_name)),
    /// decoded from its owner id; `None` when free (or for an owner id
    /// without a name).
    pub holder_name: Option<String>,
    /// How many times the holder holds it (re-entries count); 0 when free.
    pub hold_count: u64,
    /// The fencing token of the current hold; `None` when free.
    pub token: Option<u64>,
    /// The hold's remaining TTL; `None` when free.
    pub ttl: Option<Duration>,
    /// The fencing counter of the lock's hash slot (the last token issued
    /// to any name of that slot, 0 when none is recorded: see
    /// [`Keys::fence`](crate::Keys::fence)); `None` when it holds a value the
    /// acquire would refuse ([`Error::BadValue`](crate::Error::BadValue)).
    pub fence: Option<u64>,
    /// Waiters in the queue (fair lock; always 0 for a plain lock).
    pub queued: u64,
}
