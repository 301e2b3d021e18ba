//! A model of deadbolt's grant protocol, checked by [stateright].
//!
//! **Modelled.** Each Lua script is one atomic step over an abstract
//! model of its keys, named after the script ([`script`]): the Lock's
//! `lock_acquire`, `lock_release`, `lock_pass`, `lock_force_unlock`
//! (hold hash with marks `x`/`w` and registrations `d:<client>`, the
//! fencing counter, the waiting clients' ZSET); the
//! FairLock's `fair_acquire`, `fair_release`, `fair_heartbeat`,
//! `fair_force_unlock` (hold with its claim field `c`, queue and entries,
//! liveness records); the Semaphore's `sem_acquire`, `sem_release`,
//! `sem_heartbeat`, `sem_renew`; and `hold_renew`. Clients have waiters
//! that run the acquire loop of crates/core/src/acquire (first try,
//! subscribe, try again, sleep, take a grant by name only for the current
//! entry and while its claim lasts), a background releaser (releases by
//! attempt after a cancel), a heartbeat, and may crash or reconnect.
//! Pub/Sub messages may be lost, duplicated, delivered in any order, or
//! heard by a client at a replica that PUBLISH's count leaves out.
//! Leases, claims and liveness records run out by
//! nondeterministic time steps.
//!
//! **Abstracted.** Time is not a clock: a TTL ends when a time step says
//! so, and a holder's local validity ends with its lease (it never
//! outlives the server's TTL, as deadbolt's drift margin ensures). Tokens
//! are `counter + 1` (the clock floor of `hold_token` is left out: no
//! counter is lost). Each waiter is its own handle and never re-enters;
//! every semaphore request is for one permit; only waiting acquires
//! (`'wait'`/`'again'`), no one-shot `'try'`. Secrets are counters.
//! Key type errors, OOM, ACL refusals, queue and counter TTLs, `t:`
//! hints, MultiLock marks and the request that lingers in a paused
//! server (stale holds: modelled only as the acquire's repair) are left
//! out. A fault budget bounds loss, duplication, crashes, reconnects,
//! cancels, lost replies and force-unlocks per run.
//!
//! **Properties** ([`props`]): [`MUTUAL_EXCLUSION`] (at most one
//! holder, at most N permits), [`TOKENS_RISE`], [`HOLDERS_MATCH_SERVER`]
//! and [`GRANT_TAKEN_ONCE`] are stateright `always` invariants;
//! [`NO_LOST_WAKEUP`] is a bounded check ([`no_lost_wakeup`]): in a run
//! without faults or time, from every reachable state where nobody holds
//! and a live waiter waits, a holder is reachable by prompt steps (no
//! timer). Mutations ([`Mutation`]) show that the properties catch bugs.
//!
//! **Running.** `cargo test -p deadbolt-model` checks every primitive
//! and every mutation; `cargo run -p deadbolt-model --example counts`
//! prints the states explored and the time.
//!
//! [stateright]: https://docs.rs/stateright

mod config;
mod fair;
mod lock;
mod model;
mod net;
pub mod props;
mod sem;
mod state;

pub use config::{Config, Mutation, Primitive};
pub use model::{modelled_scripts, script, Action, GrantModel};
pub use props::{
    no_lost_wakeup, LivenessReport, GRANT_TAKEN_ONCE, HOLDERS_MATCH_SERVER, MUTUAL_EXCLUSION,
    NO_LOST_WAKEUP, TOKENS_RISE,
};
pub use state::{
    Attempt, Client, Entry, Envelope, FairHold, FairKeys, LockHold, LockKeys, Msg, Phase, Reg,
    SemHold, SemKeys, Server, State, Waiter,
};

use std::time::{Duration, Instant};

use stateright::{Checker, Model};

/// An acquire script's reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    /// `{1, token, pttl}`.
    Granted(u32),
    /// `{0, pttl}`.
    Busy,
    /// `{2, pttl, fresh, secret}`.
    Queued { fresh: bool, secret: u8 },
}

/// What one stateright run found.
#[derive(Debug)]
pub struct Run {
    /// States generated.
    pub states: usize,
    /// Distinct states.
    pub unique: usize,
    /// Its longest path.
    pub depth: usize,
    /// How long it took.
    pub elapsed: Duration,
    /// The names of the properties with a discovery (a counterexample
    /// for `always`, an example for `sometimes`).
    pub discoveries: Vec<&'static str>,
}

/// Check `config` with stateright (breadth first, two threads).
pub fn check(config: Config) -> Run {
    let started = Instant::now();
    let checker = GrantModel::new(config)
        .checker()
        .threads(2)
        .spawn_bfs()
        .join();
    let mut discoveries: Vec<_> = checker.discoveries().into_keys().collect();
    discoveries.sort_unstable();
    Run {
        states: checker.state_count(),
        unique: checker.unique_state_count(),
        depth: checker.max_depth(),
        elapsed: started.elapsed(),
        discoveries,
    }
}
