//! deadbolt-rwlock: a distributed read-write lock kept in Redis.
//!
//! Any number of readers or one writer. Each read hold has a lease of its
//! own (a ZSET of readers scored by lease deadline, on the server clock), so
//! a dead client's readers expire with their own leases while other clients
//! keep reading, and the lock lives exactly as long as its longest reader.
//! A waiting writer holds new readers back (write preference), so readers
//! taking the lock in a loop cannot starve it; a writer that gives up removes
//! its mark at once, and a dead one's mark goes with its client's liveness.
//! A writer's release wakes every waiting reader at once; the last reader's
//! release wakes the waiting writers. Writers get fencing tokens; readers do
//! not (they do not write).
//!
//! Reentrant per handle on both sides. The writer may also read (downgrade:
//! it keeps reading after it releases the write hold); a reader that asks
//! for the write lock gets [`Error::UpgradeNotSupported`] at once (two
//! readers upgrading would wait for each other for ever).
//!
//! ```no_run
//! use deadbolt_core::Acquire; // lock, try_lock, try_lock_for, ...
//! # async fn f() -> deadbolt_core::Result<()> {
//! let client = deadbolt_core::Client::connect("redis://127.0.0.1/").await?;
//! let rw = deadbolt_rwlock::RwLock::new(&client, "catalog");
//! let r = rw.read_lock().lock().await?;   // shared with other readers
//! r.unlock().await?;
//! let w = rw.write_lock().lock().await?;  // alone; carries a fencing token
//! println!("writing with token {}", w.fencing_token());
//! w.unlock().await?;
//! # Ok(()) }
//! ```
//!
//! Data layout and messages: `lua/rw_lib.lua`; see also `docs/rwlock.md`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadbolt_core::primitive::{
    Acquire, AcquireSpec, Client, Error, ExclusiveGuard, Handle, Hold, HoldGuard, Keys, LeaseMode,
    LeaseState, Lockable, Result, ScriptCall, WaitMode, WakeAsTold,
};
use futures::future::BoxFuture;

/// The read-write lock's Lua scripts (files in this crate's `lua/`; the
/// key layout and shared rules are in `rw_lib.lua`, joined to each after core's libraries).
pub mod scripts {
    deadbolt_core::primitive::lua_scripts! {
        list pub SCRIPTS;
        libs [MSG_LIB, HOLD_LIB, QUEUE_LIB, LEASE_LIB, "rw_lib"];
        /// Take, re-enter or replay a read hold.
        pub RW_READ_ACQUIRE = "rw_read_acquire";
        /// Release one read hold.
        pub RW_READ_RELEASE = "rw_read_release";
        /// Renew many read holds (each its own lease).
        pub RW_READ_RENEW = "rw_read_renew";
        /// Take, re-enter or replay the write hold, or mark a waiting writer.
        pub RW_WRITE_ACQUIRE = "rw_write_acquire";
        /// Release one write hold, or remove a waiting writer's mark.
        pub RW_WRITE_RELEASE = "rw_write_release";
        /// Keep one client's waiting writers alive on many locks.
        pub RW_HEARTBEAT = "rw_heartbeat";
        /// Remove every hold, whoever holds it.
        pub RW_FORCE_UNLOCK = "rw_force_unlock";
        /// Remove the write hold, whoever holds it, and hand it on as a release.
        pub RW_FORCE_UNLOCK_WRITE = "rw_force_unlock_write";
        /// Remove every read hold, whoever holds it, and wake the writers.
        pub RW_FORCE_UNLOCK_READ = "rw_force_unlock_read";
        /// Read one owner's read and write hold counts atomically.
        pub RW_HOLDS = "rw_holds";
        /// Read the lock's state atomically.
        pub RW_INSPECT = "rw_inspect";
    }
}
pub use scripts::SCRIPTS;
use scripts::*;

/// The kind segment of a read-write lock's keys: `<ns>:{<name>}:rw`.
pub const KIND: &str = "rw";

/// Waiter classes on the lock's channel.
const READ: &str = "read";
const WRITE: &str = "write";

/// How many readers [`RwLock::inspect`] lists.
const LISTED: usize = 100;

/// The six keys every read-write-lock script takes, in order (see
/// `lua/rw_lib.lua`).
pub fn rw_keys(k: &Keys) -> Vec<String> {
    vec![
        k.main().to_string(),
        k.fence().to_string(),
        k.sub("r"),
        k.sub("ro"),
        k.sub("ww"),
        k.sub("alive"),
    ]
}

/// A handle on a distributed read-write lock.
///
/// Reentrancy is per handle, as for `Lock`: clones of a handle are one owner
/// and may re-enter either side; tasks that must exclude each other each
/// make their own handle (`RwLock::new` / `client.rw_lock(name)`).
#[derive(Debug, Clone)]
pub struct RwLock {
    inner: Arc<Handle<Parts>>,
}

#[derive(Debug)]
struct Parts {
    keys: Vec<String>,
    channel: String,
    read: AcquireSpec,
    write: AcquireSpec,
    /// The lock's key names, for its watch.
    names: Keys,
}

impl Parts {
    /// The keys of a force-unlock: the six.
    fn forcing_keys(&self) -> Vec<String> {
        let mut k = self.keys.clone();
        k.push(self.names.forced());
        k
    }
}

/// What [`RwLock::force_unlock`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForceUnlocked {
    /// Whether a write hold was removed.
    pub writer: bool,
    /// How many read holds were removed.
    pub readers: u64,
}

/// One reader as [`RwLock::inspect`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReaderInfo {
    /// The read hold's attempt id.
    pub attempt: String,
    /// Its owner id (`<client id>:<handle id>`).
    pub owner: String,
    /// How long its lease still runs.
    pub ttl: Duration,
}

/// A read-write lock's state, read in one atomic step.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RwInfo {
    /// The writer's owner id; `None` when nobody writes.
    pub writer: Option<String>,
    /// The writer's hold count (re-entries count); 0 without a writer.
    pub write_holds: u64,
    /// The writer's fencing token.
    pub token: Option<u64>,
    /// The write hold's remaining TTL.
    pub write_ttl: Option<Duration>,
    /// Live read holds.
    pub readers: u64,
    /// Until the longest read lease ends; `None` without readers.
    pub read_ttl: Option<Duration>,
    /// Writers marked as waiting (new readers wait behind a live one).
    pub waiting_writers: u64,
    /// The fencing counter; `None` when it holds an unusable value.
    pub fence: Option<u64>,
    /// Read holds, longest lease first (at most 100).
    pub reader_list: Vec<ReaderInfo>,
}

type InspectReply = (
    String,
    u64,
    u64,
    i64,
    u64,
    i64,
    u64,
    i64,
    Vec<(String, String, i64)>,
);

impl RwLock {
    /// A new handle (a new owner) on the read-write lock `name`.
    ///
    /// An invalid name (empty) is reported as [`Error::InvalidArgument`] by
    /// every method, before anything is sent.
    pub fn new(client: &Client, name: &str) -> RwLock {
        let parts = Handle::new(client, KIND, name, |k| parts(client, &k));
        RwLock {
            inner: Arc::new(parts),
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

    /// The Redis key of the write hold (the other keys share its prefix).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty name.
    pub fn key(&self) -> Result<&str> {
        Ok(&self.parts()?.keys[0])
    }

    fn parts(&self) -> Result<&Parts> {
        self.inner.parts()
    }

    async fn take(&self, write: bool, lease: LeaseMode, wait: WaitMode) -> Result<Option<Hold>> {
        let p = self.parts()?;
        let spec = if write { &p.write } else { &p.read };
        self.inner
            .client()
            .acquire(spec, self.inner.owner(), lease, wait)
            .await
    }

    async fn read_for(&self, lease: LeaseMode, wait: WaitMode) -> Result<Option<ReadGuard>> {
        Ok(self.take(false, lease, wait).await?.map(ReadGuard))
    }

    async fn write_for(&self, lease: LeaseMode, wait: WaitMode) -> Result<Option<WriteGuard>> {
        Ok(self.take(true, lease, wait).await?.map(ExclusiveGuard::new))
    }

    /// The read side: shared holds, each with a lease of its own. A read
    /// waits while another owner writes or a live writer waits (unless this
    /// handle already reads); the last reader's release wakes the writers.
    pub fn read_lock(&self) -> ReadLock {
        ReadLock(self.clone())
    }

    /// The write side: one holder, reentrant per handle, with a fencing
    /// token; waiting writers go before new readers. Also a [`Lockable`],
    /// so a `MultiLock` can hold it beside other locks.
    pub fn write_lock(&self) -> WriteLock {
        WriteLock(self.clone())
    }

    /// Writer, readers (with their leases), waiting writers and fencing
    /// counter, read atomically.
    ///
    /// # Errors
    /// `InvalidArgument`, `Unavailable`, `Indeterminate`, `WrongType`.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn inspect(&self) -> Result<RwInfo> {
        let p = self.parts()?;
        let call = ScriptCall::new(&RW_INSPECT, p.keys.clone(), vec![LISTED.to_string()]);
        let (writer, n, token, wpttl, readers, left, waiting, fence, list): InspectReply =
            self.inner.client().run(&call).await?;
        let ms = |v: i64| u64::try_from(v).ok().map(Duration::from_millis);
        let writing = wpttl != -2 && !writer.is_empty();
        Ok(RwInfo {
            writer: writing.then_some(writer),
            write_holds: if writing { n } else { 0 },
            token: writing.then_some(token),
            write_ttl: if writing { ms(wpttl) } else { None },
            readers,
            read_ttl: if readers > 0 { ms(left) } else { None },
            waiting_writers: waiting,
            fence: u64::try_from(fence).ok(),
            reader_list: list
                .into_iter()
                .map(|(attempt, owner, left)| ReaderInfo {
                    attempt,
                    owner,
                    ttl: ms(left).unwrap_or_default(),
                })
                .collect(),
        })
    }

    /// Whether anyone holds the lock, reading or writing.
    ///
    /// # Errors
    /// As [`Self::inspect`].
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn is_locked(&self) -> Result<bool> {
        let i = self.inspect().await?;
        Ok(i.writer.is_some() || i.readers > 0)
    }

    /// Whether someone holds the write lock.
    ///
    /// # Errors
    /// As [`Self::inspect`].
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn is_write_locked(&self) -> Result<bool> {
        Ok(self.inspect().await?.writer.is_some())
    }

    /// How many read holds are live (re-entries count).
    ///
    /// # Errors
    /// As [`Self::inspect`].
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn reader_count(&self) -> Result<u64> {
        Ok(self.inspect().await?.readers)
    }

    /// Whether anyone holds the read lock (any owner, the writer's own
    /// downgraded reads included).
    ///
    /// # Examples
    /// ```no_run
    /// # use deadbolt_core::Acquire as _;
    /// # async fn f(client: &deadbolt_core::Client) -> deadbolt_core::Result<()> {
    /// let rw = deadbolt_rwlock::RwLock::new(client, "catalog");
    /// let r = rw.read_lock().lock().await?;
    /// assert!(rw.is_read_locked().await?);
    /// r.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Self::inspect`].
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn is_read_locked(&self) -> Result<bool> {
        Ok(self.inspect().await?.readers > 0)
    }

    /// How many live read holds this handle (or a clone of it) has
    /// (re-entries count; 0 when it does not read). [`Self::reader_count`]
    /// counts every owner's.
    ///
    /// Read holds whose lease ended do not count (exact unless more than
    /// 64 ended leases of the lock await their purge by the next acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # use deadbolt_core::Acquire as _;
    /// # async fn f(client: &deadbolt_core::Client) -> deadbolt_core::Result<()> {
    /// let rw = deadbolt_rwlock::RwLock::new(client, "catalog");
    /// let r1 = rw.read_lock().lock().await?;
    /// let r2 = rw.read_lock().lock().await?; // re-entry
    /// assert_eq!(rw.read_hold_count().await?, 2);
    /// r2.unlock().await?;
    /// r1.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Self::inspect`].
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn read_hold_count(&self) -> Result<u64> {
        Ok(self.holds().await?.0)
    }

    /// How many times this handle (or a clone of it) holds the write lock
    /// (its re-entry count; 0 when another owner or nobody writes), as
    /// `Lock::hold_count`. [`RwInfo::write_holds`] is the writer's, whoever
    /// it is.
    ///
    /// # Examples
    /// ```no_run
    /// # use deadbolt_core::Acquire as _;
    /// # async fn f(client: &deadbolt_core::Client) -> deadbolt_core::Result<()> {
    /// let rw = deadbolt_rwlock::RwLock::new(client, "catalog");
    /// let w = rw.write_lock().lock().await?;
    /// assert_eq!(rw.write_hold_count().await?, 1);
    /// let other = deadbolt_rwlock::RwLock::new(client, "catalog");
    /// assert_eq!(other.write_hold_count().await?, 0);
    /// w.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Self::inspect`].
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn write_hold_count(&self) -> Result<u64> {
        Ok(self.holds().await?.1)
    }

    /// This owner's (read holds, write holds), read atomically.
    async fn holds(&self) -> Result<(u64, u64)> {
        let p = self.parts()?;
        let call = ScriptCall::new(&RW_HOLDS, p.keys.clone(), vec![self.owner().to_string()]);
        self.inner.client().run(&call).await
    }

    /// How long until the lock is free if nobody renews or releases: the
    /// longer of the write hold's TTL and the longest read lease; `None`
    /// when free.
    ///
    /// # Errors
    /// As [`Self::inspect`].
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        let i = self.inspect().await?;
        Ok(i.write_ttl.max(i.read_ttl))
    }

    /// A stream of this lock's holder changes, for any client's holds:
    /// the writer when it starts (`Held`, or `Free`) and the number of read
    /// holds (`Shared`, when not 0), then every new writer (`Acquired`), how
    /// each write hold ended (`Released`, `Expired`, `ForceUnlocked`) and
    /// every change of the number of read holds (`Shared`). Woken by
    /// keyspace notifications when the server's `notify-keyspace-events`
    /// includes `Kghzx`, else within [`deadbolt_core::CATCH_UP`]; errors
    /// at most once per `CATCH_UP`. See [`deadbolt_core::watch`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: deadbolt_core::Client) {
    /// use futures::StreamExt;
    /// let rw = deadbolt_rwlock::RwLock::new(&client, "config");
    /// let mut changes = Box::pin(rw.watch());
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
        let parts = self.parts().map(|p| {
            (
                vec![p.keys[0].clone(), p.keys[2].clone()],
                deadbolt_core::primitive::hold_watch_call(
                    p.names.main(),
                    vec![p.keys[2].clone()],
                    vec![],
                ),
            )
        });
        deadbolt_core::primitive::watch(self.inner.client(), parts)
    }

    /// Remove every hold, write and read, whoever holds it, and wake every
    /// waiter. Waiting writers keep their place. The former holders' guards
    /// turn `Lost` at their next renewal; their unlocks return
    /// [`Error::NotHeld`]. One side only: [`Self::force_unlock_write`],
    /// [`Self::force_unlock_read`].
    ///
    /// # Errors
    /// `InvalidArgument`, `Unavailable`, `Indeterminate`, `WrongType`
    /// (nothing is deleted).
    ///
    /// # Cancel safety
    /// If dropped, the removal may or may not have happened; calling it
    /// again is harmless.
    pub async fn force_unlock(&self) -> Result<ForceUnlocked> {
        let p = self.parts()?;
        let call = ScriptCall::new(&RW_FORCE_UNLOCK, p.forcing_keys(), vec![p.channel.clone()]);
        let (w, r): (u64, u64) = self.inner.client().run(&call).await?;
        Ok(ForceUnlocked {
            writer: w > 0,
            readers: r,
        })
    }

    /// Remove the write hold, whoever holds it (all its re-entries), and
    /// hand the write side on exactly as the writer's last release would;
    /// read holds stay. Returns whether a write hold was removed.
    ///
    /// The hand-on: readers registered for admission are admitted (one
    /// message) unless a live writer waits; a live waiting writer is woken
    /// (write preference: the registered readers wait for its release);
    /// with neither, every waiter is woken. The writer's own read holds (a
    /// downgrade) stay, as do waiting writers' marks. The former writer's
    /// guard turns `Lost` at its next renewal; its unlock returns
    /// [`Error::NotHeld`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: &deadbolt_core::Client) -> deadbolt_core::Result<()> {
    /// // An administrator frees a write lock whose holder is stuck.
    /// let rw = deadbolt_rwlock::RwLock::new(client, "catalog");
    /// if rw.force_unlock_write().await? {
    ///     println!("the writer was removed; readers kept reading");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument`, `Unavailable`, `Indeterminate`, `WrongType`
    /// (nothing is removed).
    ///
    /// # Cancel safety
    /// If dropped, the removal (and its hand-on, in the same script) may or
    /// may not have happened on the server; calling it again is harmless
    /// (it then removes a writer that took the lock since, if any).
    pub async fn force_unlock_write(&self) -> Result<bool> {
        let p = self.parts()?;
        let call = ScriptCall::new(
            &RW_FORCE_UNLOCK_WRITE,
            p.forcing_keys(),
            vec![p.channel.clone()],
        );
        Ok(self.inner.client().run::<u64>(&call).await? > 0)
    }

    /// Remove every read hold, whoever holds it, and wake the waiting
    /// writers exactly as the last reader's release would; a write hold
    /// stays. Returns whether a live read hold was removed.
    ///
    /// Readers registered for admission behind a writer stay registered
    /// (that writer's release admits them), and waiting writers keep their
    /// marks. The former readers' guards turn `Lost` at their next
    /// renewal; their unlocks return [`Error::NotHeld`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: &deadbolt_core::Client) -> deadbolt_core::Result<()> {
    /// // An administrator lets a starved writer in past stuck readers.
    /// let rw = deadbolt_rwlock::RwLock::new(client, "catalog");
    /// if rw.force_unlock_read().await? {
    ///     println!("the readers were removed; a waiting writer gets in");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument`, `Unavailable`, `Indeterminate`, `WrongType`
    /// (nothing is removed).
    ///
    /// # Cancel safety
    /// If dropped, the removal may or may not have happened on the server;
    /// calling it again is harmless (it then removes readers that got in
    /// since, if any).
    pub async fn force_unlock_read(&self) -> Result<bool> {
        let p = self.parts()?;
        let call = ScriptCall::new(
            &RW_FORCE_UNLOCK_READ,
            p.keys.clone(),
            vec![p.channel.clone()],
        );
        Ok(self.inner.client().run::<u64>(&call).await? > 0)
    }

    /// Take the read lock, run `work`, and unlock; `work` is dropped and
    /// [`Error::NotHeld`] returned if the hold is lost first.
    ///
    /// # Errors
    /// As a read acquire ([`RwLock::read_lock`]), `NotHeld`, and the unlock's error.
    ///
    /// # Cancel safety
    /// If dropped, `work` is dropped and the hold goes to the releaser.
    pub async fn run_read<F, Fut, T>(&self, work: F) -> Result<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = self.read_lock().lock().await?;
        // The guard's `run` races the work against the loss; a loss is
        // reported as `NotHeld`, as this call always did.
        match guard.run(work()).await {
            Ok(out) => {
                guard.unlock().await?;
                Ok(out)
            }
            Err(Error::LeaseLost { .. }) => Err(Error::NotHeld),
            Err(e) => Err(e),
        }
    }
}

fn parts(client: &Client, k: &Keys) -> Parts {
    let keys = rw_keys(k);
    let channel = k.channel();
    let wt = client.config().waiter_timeout.as_millis().to_string();
    // A waiting reader registers on its failed try; the release it waits
    // for admits every registered reader in one message (rw_lib.lua).
    let read = AcquireSpec::builder(
        "rw-read",
        k,
        &RW_READ_ACQUIRE,
        &RW_READ_RELEASE,
        &WakeAsTold,
    )
    .keys(keys.clone())
    .extra_args(vec![client.config().claim_ms().to_string()])
    .grants_by_name()
    .release_with(keys.clone(), vec![channel.clone()])
    .renew(&RW_READ_RENEW, vec![keys[2].clone(), keys[3].clone()])
    .class(READ)
    .build();
    let write = AcquireSpec::builder(
        "rw-write",
        k,
        &RW_WRITE_ACQUIRE,
        &RW_WRITE_RELEASE,
        &WakeAsTold,
    )
    .keys(keys.clone())
    .extra_args(vec![wt])
    .release_with(keys.clone(), vec![channel.clone(), client.id().to_string()])
    .class(WRITE)
    // One set per handle (`parts` runs in `RwLock::new`): a stale write
    // hold of this owner is not re-entered (see `AcquireBuilder::live`).
    .live(Arc::default())
    .heartbeat(&RW_HEARTBEAT, keys.clone())
    .build();
    Parts {
        keys,
        channel,
        read,
        write,
        names: k.clone(),
    }
}

/// The write side of an [`RwLock`] ([`RwLock::write_lock`]): its acquire
/// calls come from [`Acquire`]; it is also a [`Lockable`], so a `MultiLock`
/// can hold it beside other locks.
#[derive(Debug, Clone)]
pub struct WriteLock(RwLock);

/// The read side of an [`RwLock`] ([`RwLock::read_lock`]); its acquire
/// calls come from [`Acquire`].
#[derive(Debug, Clone)]
pub struct ReadLock(RwLock);

impl Acquire for ReadLock {
    type Guard = ReadGuard;

    async fn acquire_with(&self, lease: LeaseMode, wait: WaitMode) -> Result<Option<ReadGuard>> {
        self.0.read_for(lease, wait).await
    }
}

impl Acquire for WriteLock {
    type Guard = WriteGuard;

    async fn acquire_with(&self, lease: LeaseMode, wait: WaitMode) -> Result<Option<WriteGuard>> {
        self.0.write_for(lease, wait).await
    }
}

impl Lockable for WriteLock {
    fn lock_key(&self) -> Result<String> {
        self.0.key().map(str::to_string)
    }

    fn acquire_hold(
        &self,
        lease: LeaseMode,
        wait: WaitMode,
    ) -> BoxFuture<'_, Result<Option<Hold>>> {
        Box::pin(self.0.take(true, lease, wait))
    }
}

/// One write hold of an [`RwLock`]: the same guard as a `Lock`'s, with a
/// fencing token.
pub type WriteGuard = ExclusiveGuard;

/// One read hold of an [`RwLock`], with a lease of its own.
///
/// Release it with [`unlock`](ReadGuard::unlock) to see the outcome;
/// dropping it releases it in the background.
#[must_use = "if unused the read lock is released at once"]
#[derive(Debug)]
pub struct ReadGuard(Hold);

/// A read hold's lease is its own.
impl HoldGuard for ReadGuard {
    fn state(&self) -> LeaseState {
        self.0.state()
    }

    fn valid_for(&self) -> Duration {
        self.0.valid_for()
    }

    fn lost(&self) -> impl Future<Output = LeaseState> + Send + 'static {
        self.0.lost()
    }
}

impl ReadGuard {
    /// Extend the lease to at least `lease` from now.
    ///
    /// # Errors
    /// `InvalidArgument`, `NotHeld` (state becomes `Lost`),
    /// `Indeterminate` (state becomes `Unknown`), `Unavailable`.
    ///
    /// # Cancel safety
    /// If dropped, the extension may or may not have applied.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        self.0.extend(lease).await
    }

    /// Release this read hold and wait for the answer; the last reader's
    /// release wakes the waiting writers.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when its lease had ended; `Unavailable` /
    /// `Indeterminate` when unconfirmed (the release then continues in the
    /// background releaser).
    ///
    /// # Cancel safety
    /// If dropped, the release may or may not have run; the background
    /// releaser runs it (idempotently).
    pub async fn unlock(self) -> Result<()> {
        self.0.unlock().await
    }
}
