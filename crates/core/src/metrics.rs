//! What deadbolt reports through the `metrics` facade (feature `metrics`):
//! each function here is the one place a figure is recorded, and compiles
//! to nothing without the feature. Names and labels: docs/observability.md.

use std::time::Duration;

/// Declares each recorder once: its docs, its arguments and what it
/// records with the feature on; without the feature it only takes its
/// arguments.
macro_rules! recorders {
    ($($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) $body:block)*) => {$(
        $(#[$doc])*
        #[inline]
        pub(crate) fn $name($($arg: $ty),*) {
            #[cfg(feature = "metrics")]
            $body
            #[cfg(not(feature = "metrics"))]
            let _ = ($($arg,)*);
        }
    )*};
}

recorders! {
    /// An acquire ended: `outcome` is `acquired`, `timed_out` or the error's
    /// kind ([`crate::Error::kind`]); `waited` counts from the call.
    fn acquire(primitive: &'static str, outcome: &'static str, waited: Duration) {
        metrics::counter!("deadbolt_acquires_total", "primitive" => primitive, "outcome" => outcome)
            .increment(1);
        if outcome == "acquired" {
            metrics::histogram!("deadbolt_acquire_wait_seconds", "primitive" => primitive)
                .record(waited.as_secs_f64());
        }
    }

    /// A hold ended (unlocked, dropped, handed on) after `held`.
    fn held(primitive: &'static str, held: Duration) {
        metrics::histogram!("deadbolt_hold_seconds", "primitive" => primitive)
            .record(held.as_secs_f64());
    }

    /// A hold became `Lost` or `Unknown`.
    fn lost(primitive: &'static str) {
        metrics::counter!("deadbolt_holds_lost_total", "primitive" => primitive).increment(1);
    }

    /// A watchdog round renewed `ok` holds and failed to renew `failed`.
    fn renewals(ok: u64, failed: u64) {
        metrics::counter!("deadbolt_renewals_total", "outcome" => "renewed").increment(ok);
        metrics::counter!("deadbolt_renewals_total", "outcome" => "failed").increment(failed);
    }

    /// Waiters waiting on a channel: one more (`1.0`) or one fewer (`-1.0`).
    fn waiters(delta: f64) {
        metrics::gauge!("deadbolt_waiters").increment(delta);
    }

    /// Channels subscribed: one more or one fewer.
    fn subscriptions(delta: f64) {
        metrics::gauge!("deadbolt_subscriptions").increment(delta);
    }
}
