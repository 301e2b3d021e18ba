//! The model's state: the server's keys (abstracted), the clients, their
//! waiters, the messages in flight and a few ghost variables that only the
//! properties read.

/// An acquire call's attempt id: the waiter that makes it and its round
/// (the waiter's n-th acquire). The round plays the attempt's sequence
/// number (`hold_seq` in hold_lib.lua).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Attempt {
    /// The waiter (each waiter is its own handle, so also the owner id).
    pub waiter: u8,
    /// Which of the waiter's acquires.
    pub round: u8,
}

/// Where a waiter is in the acquire loop (crates/core/src/acquire/wait_loop.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// No acquire running; the next one starts with a first try.
    Idle,
    /// The first try failed unsubscribed: subscribe, then try again.
    NeedSub,
    /// About to try again (woken, or just subscribed).
    Ready,
    /// Asleep until a message, a local wake-up or its timer.
    Sleeping,
    /// Believes it holds, with this fencing token (0 for permits).
    /// `forced`: a ghost flag, set when a force-unlock removed the hold
    /// (the holder learns it from the `f:` message).
    Holding {
        /// The fencing token it was granted.
        token: u32,
        /// Its hold was force-unlocked (ghost).
        forced: bool,
    },
    /// The client crashed.
    Crashed,
}

impl Phase {
    /// In an acquire, not yet holding.
    pub fn waiting(self) -> bool {
        matches!(self, Phase::NeedSub | Phase::Ready | Phase::Sleeping)
    }
}

/// One waiter (a task calling `lock()` in a loop of `rounds` acquires).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Waiter {
    /// Acquires started and finished so far.
    pub round: u8,
    /// Where it is.
    pub phase: Phase,
    /// Listening on its primitive's channels (and its client's grant channel).
    pub subscribed: bool,
    /// The secret of its current queue entry or registration, as replies told it.
    pub entry: Option<u8>,
    /// Entries this waiter's calls created so far: the next one's secret
    /// (a per-call random secret in deadbolt; only their distinctness matters).
    pub secrets: u8,
}

/// A message published by a script.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Msg {
    /// `g:<attempt> <token> <ttl> <secret> [<claim>]`: a grant by name.
    /// `valid`: the claim it carries has not run out (the waiter's local
    /// validity check in take_named_grant); time passing clears it.
    Grant {
        /// The attempt granted.
        attempt: Attempt,
        /// Its token (0 for permits).
        token: u32,
        /// The entry's secret.
        secret: u8,
        /// Still within its claim.
        valid: bool,
    },
    /// `1` on the lock's unlock channel: one waiter per client tries.
    Notice,
    /// `f:<key> <token>` on the holder's client channel: force-unlocked.
    Forced,
}

/// A message on its way to one client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Envelope {
    /// The receiving client.
    pub to: u8,
    /// What it carries.
    pub msg: Msg,
}

/// A client: its liveness and its background releaser's queue.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Crashed (its keys stay until their TTLs end).
    pub crashed: bool,
    /// Attempts handed to the background releaser, not yet released.
    pub pending: Vec<Attempt>,
}

/// A registration `d:<client>` in the lock's hold hash (reg_entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reg {
    /// The client that registered.
    pub client: u8,
    /// The registered waiter's attempt.
    pub attempt: Attempt,
    /// The secret of the call that registered.
    pub secret: u8,
}

/// The Lock's hold hash (fields o, t, n, a:, x, w, d:) and TTL.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockHold {
    /// The attempt holding (o and a:; n is always 1: no re-entry).
    pub attempt: Attempt,
    /// Field t.
    pub token: u32,
    /// Mark x: a waiter of another client failed a try.
    pub x: bool,
    /// Mark w: a waiter of the holder's client failed a try.
    pub w: bool,
    /// The TTL is a claim (granted inside a release) not yet extended.
    pub claim: bool,
    /// Registrations `d:<client>`.
    pub regs: Vec<Reg>,
}

/// The Lock's keys: hold hash, fencing counter, waiting clients.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct LockKeys {
    /// `KEYS[1]`, absent when free.
    pub hold: Option<LockHold>,
    /// The slot's fencing counter.
    pub fence: u32,
    /// The waiting clients' ZSET, in order.
    pub queue: Vec<u8>,
}

/// A queue entry (fair lock and semaphore): the registration in qo.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The queued attempt (member of q).
    pub attempt: Attempt,
    /// Its secret.
    pub secret: u8,
}

/// The FairLock's hold hash (o, t, a:, c) and TTL.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FairHold {
    /// The holding attempt.
    pub attempt: Attempt,
    /// Its token.
    pub token: u32,
    /// Field c: an unclaimed hand-off (the TTL is the claim).
    pub unclaimed: bool,
    /// The TTL is still the claim (not yet extended by pick-up or renewal).
    pub claim: bool,
}

/// The FairLock's keys.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct FairKeys {
    /// The hold hash.
    pub hold: Option<FairHold>,
    /// The fencing counter.
    pub fence: u32,
    /// q and qo, in queue order.
    pub queue: Vec<Entry>,
    /// Clients whose liveness record is in `alive` and not past its deadline.
    pub alive: Vec<u8>,
}

/// One semaphore hold (h and hn): attempt, permits (1), claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SemHold {
    /// The holding attempt.
    pub attempt: Attempt,
    /// Its lease is still the claim of a grant made inside a release.
    pub claim: bool,
}

/// The Semaphore's keys (every request is for one permit).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct SemKeys {
    /// h / hn: the holds with live leases.
    pub holds: Vec<SemHold>,
    /// q / qo in order.
    pub queue: Vec<Entry>,
    /// Live liveness records.
    pub alive: Vec<u8>,
}

/// The server: one primitive's keys.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Server {
    /// A reentrant Lock.
    Lock(LockKeys),
    /// A FairLock.
    Fair(FairKeys),
    /// A Semaphore.
    Sem(SemKeys),
}

/// The whole state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The primitive's keys.
    pub server: Server,
    /// The clients.
    pub clients: Vec<Client>,
    /// The waiters (waiter i belongs to client i / waiters_per_client).
    pub waiters: Vec<Waiter>,
    /// Messages in flight (a sorted multiset: any may be delivered next).
    pub net: Vec<Envelope>,
    /// Fault steps left (loss, duplication, crash, reconnect, cancel,
    /// Indeterminate reply, a live lease running out).
    pub faults: u8,
    /// Ghost: the largest token a waiter took so far.
    pub last_taken: u32,
    /// Ghost: a waiter took a token not larger than one taken before.
    pub token_repeat: bool,
    /// Ghost: tokens of holds a force-unlock removed (their takers are
    /// not held to the properties: force-unlock ends a hold by design).
    pub forced: Vec<u32>,
}
