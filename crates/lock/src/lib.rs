//! deadbolt-lock: a reentrant distributed lock kept in Redis.
//!
//! A [`Lock`] is a handle on one lock name, owned by the handle: clones of a
//! handle are the same owner and may re-enter; separate handles (from
//! separate `Lock::new` / `client.lock(name)` calls) exclude each other. The
//! methods live on [`deadbolt_core::Exclusive`], shared with the fair lock;
//! this crate supplies the scripts. See `docs/lock.md`.
//!
//! ```no_run
//! use deadbolt_core::Acquire; // lock, try_lock, try_lock_for, ...
//! # async fn f() -> deadbolt_core::Result<()> {
//! let client = deadbolt_core::Client::connect("redis://127.0.0.1/").await?;
//! let lock = deadbolt_lock::Lock::new(&client, "orders:42");
//! let guard = lock.lock().await?;
//! println!("fencing token {}", guard.fencing_token());
//! guard.unlock().await?;
//! # Ok(()) }
//! ```

use deadbolt_core::primitive::{
    AcquireSpec, Client, Exclusive, ExclusiveKind, Keys, ScriptCall, WakeAsTold,
};

/// The lock's Lua scripts (files in this crate's `lua/`).
pub mod scripts {
    deadbolt_core::primitive::lua_scripts! {
        list pub SCRIPTS;
        libs [MSG_LIB, HOLD_LIB];
        /// Take, re-enter or replay an attempt on a reentrant lock.
        pub LOCK_ACQUIRE = "lock_acquire";
        /// Release one hold of a reentrant lock by attempt id.
        pub LOCK_RELEASE = "lock_release";
        /// Hand the last hold straight to a waiter of the same client.
        pub LOCK_PASS = "lock_pass";
        /// Delete a lock whoever holds it.
        pub LOCK_FORCE_UNLOCK = "lock_force_unlock";
    }
}
pub use scripts::SCRIPTS;
use scripts::{LOCK_ACQUIRE, LOCK_FORCE_UNLOCK, LOCK_PASS, LOCK_RELEASE};

/// The kind segment of a reentrant lock's keys: `<ns>:{<name>}:lock`.
pub const KIND: &str = "lock";

/// Marker for the reentrant, unfair lock: every waiter may take a free
/// lock; an unlock hands the lock straight to a waiter of its own client
/// when it can (within
/// [`Config::local_handoffs`](deadbolt_core::Config::local_handoffs) while
/// other clients wait), and a release lets the client that has waited
/// longest try first (see `docs/architecture.md`).
#[derive(Debug, Clone, Copy)]
pub struct Reentrant;

/// A reentrant distributed lock; see [`Exclusive`] for its methods.
pub type Lock = Exclusive<Reentrant>;

/// One hold of a [`Lock`].
pub type LockGuard = deadbolt_core::primitive::ExclusiveGuard;

/// The ZSET of the clients waiting for the lock (`lock_acquire.lua`).
fn waiting_clients(k: &Keys) -> String {
    k.sub("waiters")
}

impl ExclusiveKind for Reentrant {
    const KIND: &'static str = KIND;
    const PLAIN: bool = true;

    fn spec(client: &Client, k: &Keys) -> AcquireSpec {
        // A failed waiting try registers one waiter per client in the hold
        // (lock_acquire.lua); the release grants the lock to the waiter of
        // the client that has waited longest (`g:<attempt> ...`), else
        // publishes `1`: one waiter per client tries (lock_release.lua).
        AcquireSpec::builder(KIND, k, &LOCK_ACQUIRE, &LOCK_RELEASE, &WakeAsTold)
            .keys(vec![
                k.main().to_string(),
                k.fence().to_string(),
                waiting_clients(k),
            ])
            .extra_args(vec![client.config().claim_ms().to_string()])
            // Grants and sleep bounds name their waiter on the lock's
            // one channel.
            .grants_by_name()
            .release_with(
                vec![
                    k.main().to_string(),
                    waiting_clients(k),
                    k.fence().to_string(),
                ],
                vec![k.channel(), client.id().to_string()],
            )
            // An unlock hands the lock to a sleeping waiter of its own
            // client in one call, within the client's budget.
            .pass(&LOCK_PASS)
            .build()
    }

    /// The waiting clients' ZSET, which exists while a client waits.
    fn waiters_key(k: &Keys) -> Option<String> {
        Some(waiting_clients(k))
    }

    fn force_unlock(_client: &Client, k: &Keys) -> ScriptCall {
        ScriptCall::new(
            &LOCK_FORCE_UNLOCK,
            vec![k.main().to_string(), k.forced()],
            vec![k.channel()],
        )
    }
}
