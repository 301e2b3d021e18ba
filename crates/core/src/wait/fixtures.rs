//! What the engine's unit tests (`races.rs`) and its loom tests (`loom.rs`)
//! both build: a plain waiter and a local hand-off waiter.

use std::sync::Arc;

use super::local::LocalWaiter;
use super::slot::Waiter;
use crate::scripts::{ScriptCall, HOLD_RENEW};

/// A waiter of `class` woken by unnamed wake-ups only, with no local
/// hand-off.
pub(super) fn plain(class: &'static str) -> Waiter {
    Waiter {
        policy: &crate::wake::WakeAsTold,
        class,
        tag: None,
        wakeable: false,
        local: None,
    }
}

/// A local hand-off waiter of attempt `attempt` (owner `client:1`, a 30 s
/// lease; its release-by-attempt call is never run by these tests).
pub(super) fn local_waiter(attempt: &str) -> Arc<LocalWaiter> {
    Arc::new(LocalWaiter::new(
        "client:1",
        attempt,
        30_000,
        ScriptCall::new(&HOLD_RENEW, vec![], vec![]),
    ))
}
