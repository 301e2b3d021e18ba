//! deadbolt-fair: a strict-FIFO distributed lock with direct hand-off.
//!
//! Waiters queue in the order the server enqueued them. On release the lock
//! goes straight to the live head of the queue, and only that waiter is
//! woken (a message on its client's channel naming its attempt). Waiters stay
//! in the queue while their client proves it is alive, once per
//! `waiter_timeout/3` for all of its waiters on the server clock; a dead
//! waiter is skipped within `waiter_timeout` (one that died just after the
//! lock was handed to it: within its claim, at most its `waiter_timeout`,
//! plus one heartbeat period of the clients still waiting). `try_lock` never jumps the
//! queue. Everything else — reentrancy, leases, the watchdog, fencing tokens,
//! inspection — is as for `deadbolt_lock::Lock`. See `docs/fair.md`.
//!
//! ```no_run
//! use deadbolt_core::Acquire; // lock, try_lock, try_lock_for, ...
//! # async fn f() -> deadbolt_core::Result<()> {
//! let client = deadbolt_core::Client::connect("redis://127.0.0.1/").await?;
//! let lock = deadbolt_fair::FairLock::new(&client, "printer");
//! let guard = lock.lock().await?; // served in arrival order
//! guard.unlock().await?;
//! # Ok(()) }
//! ```

use deadbolt_core::primitive::{
    AcquireSpec, Client, Exclusive, ExclusiveKind, Keys, ScriptCall, WakeAsTold,
};

/// The fair lock's Lua scripts (files in this crate's `lua/`; the queue
/// rules are in `fair_lib.lua`, joined to each after core's libraries).
pub mod scripts {
    deadbolt_core::primitive::lua_scripts! {
        list pub SCRIPTS;
        libs [MSG_LIB, HOLD_LIB, QUEUE_LIB, "fair_lib"];
        /// Take, re-enter, pick up or queue for a fair lock.
        pub FAIR_ACQUIRE = "fair_acquire";
        /// Leave a fair lock's queue or release a hold, passing the lock on.
        pub FAIR_RELEASE = "fair_release";
        /// Delete a fair lock whoever holds it, passing it on.
        pub FAIR_FORCE_UNLOCK = "fair_force_unlock";
        /// Keep one client's fair-lock waiters alive; hand off expired holds.
        pub FAIR_HEARTBEAT = "fair_heartbeat";
        /// List the head of a fair lock's queue (read-only).
        pub FAIR_QUEUE = "fair_queue";
    }
}
pub use scripts::SCRIPTS;
use scripts::{FAIR_ACQUIRE, FAIR_FORCE_UNLOCK, FAIR_HEARTBEAT, FAIR_QUEUE, FAIR_RELEASE};

/// The kind segment of a fair lock's keys: `<ns>:{<name>}:fair`.
pub const KIND: &str = "fair";

/// Marker for the strict-FIFO lock.
#[derive(Debug, Clone, Copy)]
pub struct Fifo;

/// A strict-FIFO reentrant distributed lock; see [`Exclusive`] for its methods.
pub type FairLock = Exclusive<Fifo>;

/// One hold of a [`FairLock`].
pub type FairLockGuard = deadbolt_core::primitive::ExclusiveGuard;

/// The six keys every fair-lock script takes, in order (see `lua/fair_lib.lua`).
pub fn fair_keys(k: &Keys) -> Vec<String> {
    vec![
        k.main().to_string(),
        k.fence().to_string(),
        k.sub("q"),
        k.sub("qo"),
        k.sub("alive"),
        k.sub("seq"),
    ]
}

fn waiter_timeout_ms(client: &Client) -> String {
    client.config().waiter_timeout.as_millis().to_string()
}

impl ExclusiveKind for Fifo {
    const KIND: &'static str = KIND;

    fn spec(client: &Client, k: &Keys) -> AcquireSpec {
        let keys = fair_keys(k);
        let wt = waiter_timeout_ms(client);
        AcquireSpec::builder(KIND, k, &FAIR_ACQUIRE, &FAIR_RELEASE, &WakeAsTold)
            .keys(keys.clone())
            .extra_args(vec![wt.clone()])
            .release_with(keys.clone(), vec![wt])
            // One channel per (client, name); hand-offs name the attempt.
            .channel(format!("{}:ch:{}", k.main(), client.id()))
            .grants_by_name_only()
            .heartbeat(&FAIR_HEARTBEAT, keys)
            .build()
    }

    fn force_unlock(client: &Client, k: &Keys) -> ScriptCall {
        ScriptCall::new(
            &FAIR_FORCE_UNLOCK,
            [fair_keys(k), vec![k.forced()]].concat(),
            vec![waiter_timeout_ms(client)],
        )
    }

    fn queue_key(k: &Keys) -> Option<String> {
        Some(k.sub("q"))
    }

    fn queue_call(_client: &Client, k: &Keys, limit: usize) -> Option<ScriptCall> {
        Some(ScriptCall::new(
            &FAIR_QUEUE,
            fair_keys(k),
            vec![limit.to_string()],
        ))
    }
}
