//! What `deadbolt inspect` found and what `deadbolt force-unlock`
//! removed, as values (printed by `print.rs`).

use std::time::Duration;

use super::args::PrimitiveKind;

/// What `deadbolt inspect` found for one lock, read in one atomic script.
///
/// For a read-write lock (`--kind rw`) the hold fields (`owner`,
/// `hold_count`, `token`, `ttl`) describe the writer, and [`LockState::rw`]
/// the readers and waiting writers. For a semaphore (`--kind semaphore`)
/// [`LockState::semaphore`] holds everything; the hold fields stay empty
/// (no owner, counts 0: permits carry no fencing token).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockState {
    /// The lock's name.
    pub name: String,
    /// Which kind of lock it is.
    pub kind: PrimitiveKind,
    /// The hold hash, `<ns>:{<name>}:lock` (or `:fair`, or `:rw` for the
    /// writer's hold of a read-write lock).
    pub key: String,
    /// Owner id `<client id>:<handle id>` of the holder (the writer, for a
    /// read-write lock); `None` when nobody holds it (writes).
    pub owner: Option<String>,
    /// How many times the holder holds it (re-entries count).
    pub hold_count: u64,
    /// Fencing token of the current hold (0 when free).
    pub token: u64,
    /// Remaining TTL of the hold; `None` when free or when the key has no TTL.
    pub ttl: Option<Duration>,
    /// The fencing counter: the last token handed out for this name (0 when
    /// the counter key is absent).
    pub fence: u64,
    /// Waiters queued (fair lock; always 0 for a `Lock`, which has no queue
    /// and does not print this line).
    pub queued: u64,
    /// The head of the fair lock's queue, in order (at most
    /// [`QUEUE_LISTED`] entries; empty for a `Lock`).
    pub queue: Vec<QueueEntry>,
    /// Readers and waiting writers of a read-write lock; `None` for the
    /// other kinds.
    pub rw: Option<RwState>,
    /// Permits, holders and waiters of a semaphore; `None` for the other
    /// kinds.
    pub semaphore: Option<SemaphoreState>,
    /// The leader's info (what it campaigned with), for an election (the
    /// hold fields are the leader's: `owner`, `token` is its term, `ttl`);
    /// `None` for the other kinds and when nobody leads.
    pub info: Option<String>,
}

/// A semaphore as `deadbolt inspect --kind semaphore` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreState {
    /// The permits set; `None` when never set (every acquire waits until
    /// they are).
    pub permits: Option<u64>,
    /// Permits free now (negative after the total was reduced below what
    /// live holds take, until they give permits back). Ended leases were
    /// given back first.
    pub available: i64,
    /// Live holds.
    pub holds: u64,
    /// Queued waiters.
    pub waiting: u64,
    /// Holders, longest lease first (at most 100: the library lists no more).
    pub holders: Vec<PermitHolder>,
    /// Waiters in queue order (at most 100).
    pub waiters: Vec<PermitWaiter>,
}

/// One hold of a semaphore's permits.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PermitHolder {
    /// The hold's attempt id.
    pub attempt: String,
    /// Owner id `<client id>:<handle id>` of the holder.
    pub owner: String,
    /// Permits it holds.
    pub permits: u64,
    /// How long its lease still runs.
    pub lease_left: Duration,
}

/// One waiter in a semaphore's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PermitWaiter {
    /// The waiting attempt id.
    pub attempt: String,
    /// Owner id `<client id>:<handle id>` of the waiter.
    pub owner: String,
    /// Permits it waits for (all at once).
    pub permits: u64,
}

/// The read side of a read-write lock, as `deadbolt inspect --kind rw`
/// shows it (the writer is in [`LockState`]'s hold fields).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RwState {
    /// Live read holds (re-entries count: each hold has its own lease).
    pub readers: u64,
    /// Until the longest read lease ends; `None` without readers.
    pub longest_lease: Option<Duration>,
    /// Read holds, longest lease first (at most as many as
    /// `RwLock::inspect` lists: 100).
    pub reader_list: Vec<ReaderEntry>,
    /// Writers marked as waiting (while a live one waits, new readers wait
    /// behind it).
    pub waiting_writers: u64,
}

/// One read hold of a read-write lock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReaderEntry {
    /// The read hold's attempt id.
    pub attempt: String,
    /// Owner id `<client id>:<handle id>` of the reader.
    pub owner: String,
    /// How long its lease still runs.
    pub lease_left: Duration,
}

/// How many queue entries `deadbolt inspect` lists.
pub const QUEUE_LISTED: usize = 20;

/// One waiter in a fair lock's queue: core's own record of it.
pub use deadbolt_core::QueuedWaiter as QueueEntry;

impl From<deadbolt_semaphore::HolderInfo> for PermitHolder {
    fn from(h: deadbolt_semaphore::HolderInfo) -> PermitHolder {
        PermitHolder {
            attempt: h.attempt,
            owner: h.owner,
            permits: h.permits,
            lease_left: h.ttl,
        }
    }
}

impl From<deadbolt_semaphore::WaiterInfo> for PermitWaiter {
    fn from(w: deadbolt_semaphore::WaiterInfo) -> PermitWaiter {
        PermitWaiter {
            attempt: w.attempt,
            owner: w.owner,
            permits: w.permits,
        }
    }
}

impl From<deadbolt_rwlock::ReaderInfo> for ReaderEntry {
    fn from(r: deadbolt_rwlock::ReaderInfo) -> ReaderEntry {
        ReaderEntry {
            attempt: r.attempt,
            owner: r.owner,
            lease_left: r.ttl,
        }
    }
}

impl LockState {
    /// `name` of `kind` at `key` with nothing held, queued or counted: what
    /// each kind's reader (and each test) fills in.
    pub(super) fn empty(name: &str, kind: PrimitiveKind, key: &str) -> LockState {
        LockState {
            name: name.to_string(),
            kind,
            key: key.to_string(),
            owner: None,
            hold_count: 0,
            token: 0,
            ttl: None,
            fence: 0,
            queued: 0,
            queue: Vec::new(),
            rw: None,
            semaphore: None,
            info: None,
        }
    }

    /// The hold fields (the writer's, for a read-write lock) as the library
    /// read them: a TTL only while held, and a missing token or fence shown
    /// as 0 (a fence of `None` is a counter the acquire would refuse,
    /// BADVALUE).
    pub(super) fn with_hold(
        self,
        owner: Option<String>,
        hold_count: u64,
        token: Option<u64>,
        ttl: Option<Duration>,
        fence: Option<u64>,
    ) -> LockState {
        LockState {
            ttl: owner.as_ref().and(ttl),
            owner,
            hold_count,
            token: token.unwrap_or(0),
            fence: fence.unwrap_or(0),
            ..self
        }
    }
}

/// What `deadbolt force-unlock` removed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unlocked {
    /// The lock's name.
    pub name: String,
    /// Which kind of lock it is.
    pub kind: PrimitiveKind,
    /// Whether a hold was deleted: the lock's (lock, fair) or the writer's
    /// (rw).
    pub hold: bool,
    /// Read holds removed (rw; always 0 for the other kinds).
    pub read_holds: u64,
}

impl Unlocked {
    /// Whether anything was deleted.
    pub fn removed_anything(&self) -> bool {
        self.hold || self.read_holds > 0
    }
}
