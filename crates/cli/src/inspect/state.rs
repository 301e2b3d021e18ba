//! What `deadbolt inspect` found (an [`Inspection`]: the name, its key and
//! a [`PrimitiveState`] variant per kind) and what `deadbolt force-unlock`
//! removed, as values (printed by `print.rs`).

use std::time::Duration;

use super::args::PrimitiveKind;

/// What `deadbolt inspect` found under one name, read in one atomic script
/// (a fair lock's queue in a second read).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Inspection {
    /// The primitive's name.
    pub name: String,
    /// Its main key, `<ns>:{<name>}:<kind>` (`lock`, `fair`, `rw`, `sem`,
    /// `elect`).
    pub key: String,
    /// What the name is, and its state.
    pub state: PrimitiveState,
}

/// What a name is, as `deadbolt inspect --kind` was asked to read it, and
/// what was found there: one variant per kind.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PrimitiveState {
    /// A reentrant `Lock`: its hold (its waiters wait on their own clients,
    /// so there is no queue to show).
    Lock(Hold),
    /// A strict-FIFO `FairLock`: its hold and its queue.
    FairLock(FairState),
    /// A read-write `RwLock`: its writer, readers and waiting writers.
    RwLock(RwState),
    /// A leased semaphore: permits, holders and waiters (no single holder,
    /// no fencing counter).
    Semaphore(SemaphoreState),
    /// A leader election: who leads it, `None` when nobody does.
    Election(Option<Leader>),
}

/// The exclusive hold of a lock, a fair lock or a read-write lock's writer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Hold {
    /// Owner id `<client id>:<handle id>` of the holder; `None` when free
    /// (then `hold_count` and `token` are 0 and `ttl` is `None`).
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
}

/// A fair lock as `deadbolt inspect --kind fair` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FairState {
    /// Its hold.
    pub hold: Hold,
    /// Waiters queued.
    pub queued: u64,
    /// The head of the queue, in order (at most [`QUEUE_LISTED`] entries).
    pub queue: Vec<QueueEntry>,
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

/// A read-write lock as `deadbolt inspect --kind rw` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RwState {
    /// The writer's hold (its `fence` is the lock's fencing counter).
    pub writer: Hold,
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

/// Who leads an election: the election crate's own record of it.
pub use deadbolt_election::Leader;

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

impl PrimitiveState {
    /// Which kind of primitive this is.
    pub fn kind(&self) -> PrimitiveKind {
        match self {
            PrimitiveState::Lock(_) => PrimitiveKind::Lock,
            PrimitiveState::FairLock(_) => PrimitiveKind::Fair,
            PrimitiveState::RwLock(_) => PrimitiveKind::Rw,
            PrimitiveState::Semaphore(_) => PrimitiveKind::Semaphore,
            PrimitiveState::Election(_) => PrimitiveKind::Election,
        }
    }
}

impl Hold {
    /// The hold as the library read it: a TTL only while held, and a
    /// missing token or fence shown as 0 (a fence of `None` is a counter
    /// the acquire would refuse, BADVALUE).
    pub(super) fn read(
        owner: Option<String>,
        hold_count: u64,
        token: Option<u64>,
        ttl: Option<Duration>,
        fence: Option<u64>,
    ) -> Hold {
        Hold {
            ttl: owner.as_ref().and(ttl),
            owner,
            hold_count,
            token: token.unwrap_or(0),
            fence: fence.unwrap_or(0),
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
