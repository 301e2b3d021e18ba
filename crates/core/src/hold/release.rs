//! The background releaser: finishes releases nobody waits for.
//!
//! Guards dropped without `unlock().await`, acquires cancelled after their
//! request may have reached Redis, and acquires that ended `Indeterminate` hand
//! a release-by-attempt call here. Release scripts are idempotent (they remove
//! the attempt's record), so a release is retried after faults until it gets
//! an answer or its bound passes, when the lease's own TTL takes over.
//! Submitting never blocks and never panics.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::conn::run_on;
use crate::conn::Conn;
use crate::error::Error;
use crate::scripts::ScriptCall;

#[derive(Debug)]
pub(crate) struct Releaser {
    conn: Arc<Conn>,
    pending: Arc<AtomicUsize>,
    idle: Arc<Notify>,
    /// The releases still running, by their call's main key: an acquire
    /// of this client on that key waits for them first
    /// ([`settled`](Releaser::settled)).
    by_key: Arc<Mutex<HashMap<String, PendingKey>>>,
    closed: AtomicBool,
    rt: tokio::runtime::Handle,
}

/// How many releases of one key are running, and who waits for them.
#[derive(Debug, Default)]
struct PendingKey {
    running: usize,
    done: Arc<Notify>,
}

impl Releaser {
    pub(crate) fn new(conn: Arc<Conn>) -> Releaser {
        Releaser {
            conn,
            pending: Arc::new(AtomicUsize::new(0)),
            idle: Arc::new(Notify::new()),
            by_key: Arc::default(),
            closed: AtomicBool::new(false),
            rt: tokio::runtime::Handle::current(),
        }
    }

    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Hand over a release; it runs in the background until answered or
    /// `deadline`. After [`close`](Releaser::close) (the end of shutdown)
    /// nothing more is taken: the lease's TTL frees what is left.
    pub(crate) fn submit(&self, call: ScriptCall, deadline: Instant) {
        self.submit_then(call, deadline, || {});
    }

    /// [`submit`](Releaser::submit), then `then` once the release ran (or
    /// its time ran out): for what must follow it, such as waking the next
    /// waiter only once a registration the release clears is gone.
    pub(crate) fn submit_then(
        &self,
        call: ScriptCall,
        deadline: Instant,
        then: impl FnOnce() + Send + 'static,
    ) {
        if self.closed.load(Ordering::SeqCst) {
            tracing::debug!(
                key = call.main_key(),
                "client shut down; the lease's TTL frees it"
            );
            return;
        }
        self.pending.fetch_add(1, Ordering::SeqCst);
        let key = call.main_key().to_string();
        self.by_key.lock().entry(key.clone()).or_default().running += 1;
        let conn = self.conn.clone();
        let pending = self.pending.clone();
        let idle = self.idle.clone();
        let by_key = self.by_key.clone();
        self.rt.spawn(async move {
            release_until(&conn, &call, deadline).await;
            {
                let mut map = by_key.lock();
                if let Some(p) = map.get_mut(&key) {
                    p.running -= 1;
                    if p.running == 0 {
                        p.done.notify_waiters();
                        map.remove(&key);
                    }
                }
            }
            then();
            if pending.fetch_sub(1, Ordering::SeqCst) == 1 {
                idle.notify_waiters();
            }
        });
    }

    /// Wait until no release of `key` handed here is running, or
    /// `deadline`: an acquire of this client on `key` goes after them, so a
    /// hold this client dropped a moment ago (its release still on the
    /// way) is gone from the server before the acquire looks. Without it,
    /// `drop(read_guard); rw.write_lock().lock()` could find the client's
    /// own read hold and report an upgrade. Returns at once when nothing
    /// of `key` is pending (one atomic load when nothing at all is).
    /// Returns whether none is left (false: `deadline` came first).
    pub(crate) async fn settled(&self, key: &str, deadline: Option<Instant>) -> bool {
        if self.pending() == 0 {
            return true;
        }
        loop {
            let done = {
                let map = self.by_key.lock();
                let Some(p) = map.get(key) else { return true };
                // Created under the lock, before the release's task can
                // notify: `notify_waiters` reaches it from here on.
                Box::pin(p.done.clone().notified_owned())
            };
            match deadline {
                Some(d) => {
                    if tokio::time::timeout_at(d, done).await.is_err() {
                        return !self.pending_for(key);
                    }
                }
                None => done.await,
            }
        }
    }

    /// Whether a release of `key` handed here is still running.
    pub(crate) fn pending_for(&self, key: &str) -> bool {
        self.pending() != 0 && self.by_key.lock().contains_key(key)
    }

    /// Take no more releases.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Wait until nothing is pending, or `deadline`. Returns whether idle.
    pub(crate) async fn drain(&self, deadline: Instant) -> bool {
        loop {
            let notified = self.idle.notified();
            if self.pending() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.pending() == 0;
            }
        }
    }
}

/// Until when a release handed to the background is retried: the
/// configured `release_timeout`, else about as long as the hold could last
/// (the watchdog timeout; a fixed lease, at most the longer of the watchdog
/// timeout and 5 s). `None` for an attempt that holds no lease yet (a
/// cancelled or uncertain acquire): the watchdog timeout. The one place
/// this bound is worked out.
pub(crate) fn deadline(cfg: &crate::Config, lease: Option<crate::LeaseMode>) -> Instant {
    let bound = cfg.release_timeout.unwrap_or(match lease {
        Some(crate::LeaseMode::Fixed(d)) => {
            d.min(cfg.watchdog_timeout.max(std::time::Duration::from_secs(5)))
        }
        Some(crate::LeaseMode::Watchdog) | None => cfg.watchdog_timeout,
    });
    crate::config::after(bound)
}

async fn release_until(conn: &Arc<Conn>, call: &ScriptCall, deadline: Instant) {
    let mut backoff = std::time::Duration::from_millis(10);
    loop {
        match run_on::<i64>(conn, call).await {
            Ok(_) => return,
            Err(Error::Unavailable(_)) | Err(Error::Indeterminate(_)) if !conn.is_closed() => {
                if conn.is_up() {
                    // Up but refusing (LOADING, BUSY) or slow: a growing
                    // pause instead of asking again at once.
                    tokio::time::sleep_until(deadline.min(crate::config::after(backoff))).await;
                    backoff = (backoff * 2).min(std::time::Duration::from_millis(500));
                }
                if Instant::now() >= deadline || !conn.wait_up(Some(deadline)).await {
                    tracing::warn!(
                        key = call.main_key(),
                        "background release gave up; the lease's TTL will free it"
                    );
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(key = call.main_key(), error = %e.report(), "background release failed");
                return;
            }
        }
    }
}
