//! deadbolt-fair: a strict-FIFO distributed lock with direct hand-off.
//!
//! Waiters queue in the order the server enqueued them. On release the lock
//! goes straight to the live head of the queue, and only that waiter is
//! woken (a message on its client's channel naming its attempt). Waiters stay
//! in the queue while their client proves it is alive, once per
//! `waiter_timeout/3` for all of its waiters on the server clock; a dead
//! waiter is skipped within `waiter_timeout`. `try_lock` never jumps the
//! queue. Everything else — reentrancy, leases, the watchdog, fencing tokens,
//! inspection — is as for `deadbolt_lock::Lock`. See `docs/fair.md`.
//!
//! ```no_run
//! # async fn f() -> deadbolt_core::Result<()> {
//! let client = deadbolt_core::Client::connect("redis://127.0.0.1/").await?;
//! let lock = deadbolt_fair::FairLock::new(&client, "printer");
//! let guard = lock.lock().await?; // served in arrival order
//! guard.unlock().await?;
//! # Ok(()) }
//! ```

use deadbolt_core::scripts::{
    ScriptCall, FAIR_ACQUIRE, FAIR_FORCE_UNLOCK, FAIR_HEARTBEAT, FAIR_RELEASE, HOLD_RENEW,
};
use deadbolt_core::{AcquireSpec, Client, Exclusive, ExclusiveKind, HeartbeatSpec, Keys};

/// The kind segment of a fair lock's keys: `<ns>:{<name>}:fair`.
pub const KIND: &str = "fair";

/// Marker for the strict-FIFO lock.
#[derive(Debug, Clone, Copy)]
pub struct Fifo;

/// A strict-FIFO reentrant distributed lock; see [`Exclusive`] for its methods.
pub type FairLock = Exclusive<Fifo>;

/// One hold of a [`FairLock`].
pub type FairLockGuard = deadbolt_core::ExclusiveGuard;

/// The six keys every fair-lock script takes, in order (see `lua/fair_lib.lua`).
pub fn fair_keys(k: &Keys) -> Vec<String> {
    vec![
        k.main().to_string(),
        k.sub("fence"),
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
        AcquireSpec {
            kind: KIND,
            acquire: &FAIR_ACQUIRE,
            keys: keys.clone(),
            extra_args: vec![wt.clone()],
            release: &FAIR_RELEASE,
            release_keys: keys.clone(),
            release_extra: vec![wt],
            renew: &HOLD_RENEW,
            renew_key: k.main().to_string(),
            // One channel per (client, name); hand-offs name the attempt.
            channel: format!("{}:ch:{}", k.main(), client.id()),
            tagged: true,
            heartbeat: Some(HeartbeatSpec {
                script: &FAIR_HEARTBEAT,
                keys,
            }),
        }
    }

    fn force_unlock(client: &Client, k: &Keys) -> ScriptCall {
        ScriptCall::new(
            &FAIR_FORCE_UNLOCK,
            fair_keys(k),
            vec![waiter_timeout_ms(client)],
        )
    }
}
