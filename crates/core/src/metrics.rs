//! What deadbolt reports through the `metrics` facade (feature `metrics`):
//! each function here is the one place a figure is recorded, and compiles
//! to nothing without the feature. Names and labels: docs/observability.md.

use std::time::Duration;

#[cfg(feature = "metrics")]
mod on {
    use std::time::Duration;

    pub(crate) fn acquire(primitive: &'static str, outcome: &'static str, waited: Duration) {
        metrics::counter!("deadbolt_acquires_total", "primitive" => primitive, "outcome" => outcome)
            .increment(1);
        if outcome == "acquired" {
            metrics::histogram!("deadbolt_acquire_wait_seconds", "primitive" => primitive)
                .record(waited.as_secs_f64());
        }
    }

    pub(crate) fn held(primitive: &'static str, held: Duration) {
        metrics::histogram!("deadbolt_hold_seconds", "primitive" => primitive)
            .record(held.as_secs_f64());
    }

    pub(crate) fn lost(primitive: &'static str) {
        metrics::counter!("deadbolt_holds_lost_total", "primitive" => primitive).increment(1);
    }

    pub(crate) fn renewals(ok: u64, failed: u64) {
        metrics::counter!("deadbolt_renewals_total", "outcome" => "renewed").increment(ok);
        metrics::counter!("deadbolt_renewals_total", "outcome" => "failed").increment(failed);
    }

    pub(crate) fn waiters(delta: f64) {
        metrics::gauge!("deadbolt_waiters").increment(delta);
    }

    pub(crate) fn subscriptions(delta: f64) {
        metrics::gauge!("deadbolt_subscriptions").increment(delta);
    }
}

/// An acquire ended: `outcome` is `acquired`, `timed_out` or the error's
/// kind ([`crate::Error::kind`]); `waited` counts from the call.
#[inline]
pub(crate) fn acquire(primitive: &'static str, outcome: &'static str, waited: Duration) {
    #[cfg(feature = "metrics")]
    on::acquire(primitive, outcome, waited);
    #[cfg(not(feature = "metrics"))]
    let _ = (primitive, outcome, waited);
}

/// A hold ended (unlocked, dropped, handed on) after `held`.
#[inline]
pub(crate) fn held(primitive: &'static str, held: Duration) {
    #[cfg(feature = "metrics")]
    on::held(primitive, held);
    #[cfg(not(feature = "metrics"))]
    let _ = (primitive, held);
}

/// A hold became `Lost` or `Unknown`.
#[inline]
pub(crate) fn lost(primitive: &'static str) {
    #[cfg(feature = "metrics")]
    on::lost(primitive);
    #[cfg(not(feature = "metrics"))]
    let _ = primitive;
}

/// A watchdog round renewed `ok` holds and failed to renew `failed`.
#[inline]
pub(crate) fn renewals(ok: u64, failed: u64) {
    #[cfg(feature = "metrics")]
    on::renewals(ok, failed);
    #[cfg(not(feature = "metrics"))]
    let _ = (ok, failed);
}

/// Waiters waiting on a channel: one more (`1.0`) or one fewer (`-1.0`).
#[inline]
pub(crate) fn waiters(delta: f64) {
    #[cfg(feature = "metrics")]
    on::waiters(delta);
    #[cfg(not(feature = "metrics"))]
    let _ = delta;
}

/// Channels subscribed: one more or one fewer.
#[inline]
pub(crate) fn subscriptions(delta: f64) {
    #[cfg(feature = "metrics")]
    on::subscriptions(delta);
    #[cfg(not(feature = "metrics"))]
    let _ = delta;
}
