//! The watchdog: one task per client renewing every watchdog-leased hold.
//!
//! Every third of the watchdog timeout it renews all registered holds, many
//! per round trip (one script call per renew script, hash slot and batch of
//! up to 256 holds; each hold brings its own keys). A reply saying a hold is gone or taken over marks it `Lost`; a
//! round that fails leaves holds `Active` while their local validity lasts
//! and retries sooner; a hold whose validity runs out is marked `Lost`.
//! `unlock` unregisters a hold before it sends the release, and the renew
//! script only extends a hold whose attempt is still recorded, so a renewal
//! can never outlive or revive a released hold.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::conn::run_on;
use crate::conn::Conn;
use crate::hold::lease::{HoldInner, LeaseState, Renewal};
use crate::scripts::ScriptCall;

const BATCH: usize = 256;

#[derive(Debug)]
pub(crate) struct Watchdog {
    holds: Mutex<HashMap<u64, Arc<HoldInner>>>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Watchdog {
    pub(crate) fn start(conn: Arc<Conn>, timeout: Duration) -> Arc<Watchdog> {
        let wd = Arc::new(Watchdog {
            holds: Mutex::new(HashMap::new()),
            task: Mutex::new(None),
        });
        let handle = tokio::spawn(run(Arc::downgrade(&wd), conn, timeout));
        *wd.task.lock() = Some(handle);
        wd
    }

    pub(crate) fn register(&self, hold: Arc<HoldInner>) {
        // No wake-up of the task: it ticks on its own, and a hold registered
        // just after a tick is renewed at the next one, a third of its lease
        // later. (Waking the task per registration cost a context switch on
        // every uncontended acquire.)
        hold.in_watchdog.store(true, Ordering::SeqCst);
        self.holds.lock().insert(hold.id, hold);
    }

    pub(crate) fn unregister(&self, hold: &HoldInner) {
        if hold.in_watchdog.swap(false, Ordering::SeqCst) {
            self.holds.lock().remove(&hold.id);
        }
    }

    pub(crate) fn stop(&self) {
        if let Some(t) = self.task.lock().take() {
            t.abort();
        }
    }

    /// Holds currently renewed (for tests and inspection).
    pub(crate) fn len(&self) -> usize {
        self.holds.lock().len()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn run(weak: Weak<Watchdog>, conn: Arc<Conn>, timeout: Duration) {
    let interval = timeout / 3;
    let lease_ms = timeout.as_millis().to_string();
    let mut next = Instant::now() + interval;
    loop {
        // Tick every third of the lease; a round with no holds sends nothing.
        tokio::time::sleep_until(next).await;
        let Some(wd) = weak.upgrade() else { return };
        let holds: Vec<Arc<HoldInner>> = wd.holds.lock().values().cloned().collect();
        drop(wd);
        if holds.is_empty() {
            next = Instant::now() + interval;
            continue;
        }
        let mut failed = false;
        // Group by renew script and hash slot (a script call never spans
        // slots, so this works on a Redis Cluster); one call per batch.
        let mut groups: HashMap<(&'static str, u16), Vec<Arc<HoldInner>>> = HashMap::new();
        for h in holds {
            let slot = h.spec.renew_keys.first().map_or(0, |k| conn.batch_group(k));
            groups
                .entry((h.spec.renew.name(), slot))
                .or_default()
                .push(h);
        }
        for group in groups.values() {
            for batch in group.chunks(BATCH) {
                let call = ScriptCall::new(
                    batch[0].spec.renew,
                    batch
                        .iter()
                        .flat_map(|h| h.spec.renew_keys.iter().cloned())
                        .collect(),
                    std::iter::once(lease_ms.clone())
                        .chain(batch.iter().map(|h| h.attempt.clone()))
                        .collect(),
                );
                let sent = Instant::now();
                match run_on::<Vec<i64>>(&conn, &call).await {
                    Ok(replies) => {
                        tracing::debug!(holds = batch.len(), elapsed = ?sent.elapsed(), "renewal round");
                        for (h, r) in batch.iter().zip(replies) {
                            if !h.in_watchdog.load(Ordering::SeqCst) {
                                continue; // unlocked meanwhile
                            }
                            let lost = match Renewal::of(r) {
                                Renewal::Renewed(ms) => {
                                    h.renewed(sent, ms);
                                    crate::metrics::renewals(1, 0);
                                    false
                                }
                                Renewal::Gone => {
                                    crate::metrics::renewals(0, 1);
                                    true
                                }
                                // A failed renewal of this hold alone: it
                                // stays while its validity lasts.
                                Renewal::WrongType(j) => {
                                    crate::metrics::renewals(0, 1);
                                    tracing::warn!(key = %h.renew_key(j), "renewal found a key of another type");
                                    h.expired(Instant::now())
                                }
                            };
                            if lost && h.finish(LeaseState::Lost) {
                                if let Some(wd) = weak.upgrade() {
                                    wd.unregister(h);
                                }
                            }
                        }
                    }
                    Err(e) => {
                        failed = true;
                        crate::metrics::renewals(0, batch.len() as u64);
                        tracing::warn!(error = %e.report(), holds = batch.len(), "watchdog renewal failed");
                        let now = Instant::now();
                        for h in batch {
                            if h.expired(now) && h.finish(LeaseState::Lost) {
                                if let Some(wd) = weak.upgrade() {
                                    wd.unregister(h);
                                }
                            }
                        }
                    }
                }
            }
        }
        next = Instant::now() + if failed { interval / 4 } else { interval };
    }
}
