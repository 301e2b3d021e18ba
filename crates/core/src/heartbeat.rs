//! Waiter liveness: one task per client keeping queued waiters alive.
//!
//! A fair queue drops waiters whose client stopped proving it is alive. While
//! at least one local waiter is queued on a primitive, the client refreshes
//! one liveness record per (client, name) every `waiter_timeout/3`, for all
//! of its waiters and names in one script call per batch, on the server
//! clock. A client that dies stops refreshing, and its waiters are skipped
//! within `waiter_timeout`.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::StreamExt as _;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::conn::run_on;
use crate::conn::Conn;
use crate::scripts::{LuaScript, ScriptCall};

/// How a primitive keeps its queued waiters alive: the script and the keys
/// of one name. The script's contract: `KEYS` = the keys of many names, one
/// group after another; `ARGV = [client id, waiter_timeout_ms]`.
#[derive(Debug, Clone)]
pub(crate) struct HeartbeatSpec {
    /// The heartbeat script.
    pub(crate) script: &'static LuaScript,
    /// The keys of this name, passed as one group.
    pub(crate) keys: Vec<String>,
}

/// Groups of keys per call (the script runs O(log n) work per group).
const BATCH: usize = 64;

/// Heartbeat calls in flight at once (one per hash slot and batch).
const IN_FLIGHT: usize = 32;

#[derive(Debug)]
pub(crate) struct Heartbeat {
    entries: Mutex<HashMap<String, (HeartbeatSpec, usize)>>,
    changed: Arc<Notify>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Registration of one queued waiter; dropping it ends the refreshes for it.
#[derive(Debug)]
pub(crate) struct HeartbeatReg {
    hb: Arc<Heartbeat>,
    id: String,
}

impl Drop for HeartbeatReg {
    fn drop(&mut self) {
        let mut e = self.hb.entries.lock();
        if let Some((_, n)) = e.get_mut(&self.id) {
            *n -= 1;
            if *n == 0 {
                e.remove(&self.id);
            }
        }
    }
}

impl Heartbeat {
    pub(crate) fn start(conn: Arc<Conn>, client_id: String, waiter_timeout: Duration) -> Arc<Self> {
        let hb = Arc::new(Heartbeat {
            entries: Mutex::new(HashMap::new()),
            changed: Arc::new(Notify::new()),
            task: Mutex::new(None),
        });
        let t = tokio::spawn(run(Arc::downgrade(&hb), conn, client_id, waiter_timeout));
        *hb.task.lock() = Some(t);
        hb
    }

    pub(crate) fn register(self: &Arc<Self>, spec: &HeartbeatSpec) -> HeartbeatReg {
        let id = spec.keys.join("\n");
        let first = {
            let mut e = self.entries.lock();
            let entry = e.entry(id.clone()).or_insert_with(|| (spec.clone(), 0));
            entry.1 += 1;
            let new = entry.1 == 1;
            new && e.len() == 1
        };
        if first {
            self.changed.notify_one();
        }
        HeartbeatReg {
            hb: self.clone(),
            id,
        }
    }

    pub(crate) fn stop(&self) {
        if let Some(t) = self.task.lock().take() {
            t.abort();
        }
    }
}

async fn run(weak: Weak<Heartbeat>, conn: Arc<Conn>, client_id: String, wt: Duration) {
    let interval = wt / 3;
    let wt_ms = wt.as_millis().to_string();
    let mut next = tokio::time::Instant::now() + interval;
    loop {
        let specs: Vec<HeartbeatSpec> = {
            let Some(hb) = weak.upgrade() else { return };
            let specs: Vec<HeartbeatSpec> =
                hb.entries.lock().values().map(|(s, _)| s.clone()).collect();
            if specs.is_empty() {
                let changed = hb.changed.clone();
                drop(hb);
                changed.notified().await;
                continue;
            }
            specs
        };
        // Rounds start every `interval` (a round's own time is not added to
        // the period, so a record refreshed in one round is refreshed again
        // `interval` later whatever the round took).
        tokio::time::sleep_until(next).await;
        next = tokio::time::Instant::now() + interval;
        // One call per script, hash slot and batch: never across slots.
        let mut groups: HashMap<(&'static str, u16), Vec<&HeartbeatSpec>> = HashMap::new();
        for s in &specs {
            let slot = s.keys.first().map_or(0, |k| conn.batch_group(k));
            groups.entry((s.script.name(), slot)).or_default().push(s);
        }
        let calls: Vec<(ScriptCall, usize)> = groups
            .values()
            .flat_map(|group| {
                group.chunks(BATCH).map(|batch| {
                    let call = ScriptCall::new(
                        batch[0].script,
                        batch.iter().flat_map(|s| s.keys.iter().cloned()).collect(),
                        vec![client_id.clone(), wt_ms.clone()],
                    );
                    (call, batch.len())
                })
            })
            .collect();
        drop(groups);
        // Many calls in flight at once: on a cluster the names fall in
        // thousands of hash slots, one call each, and awaited one after
        // another they once took longer than a waiter's liveness lasts
        // (10,000 names over 3 masters: waiters were dropped as dead).
        futures::stream::iter(calls)
            .for_each_concurrent(IN_FLIGHT, |(call, names)| {
                let conn = &conn;
                async move {
                    if let Err(e) = run_on::<i64>(conn, &call).await {
                        tracing::warn!(error = %e.report(), names, "waiter heartbeat failed");
                    }
                }
            })
            .await;
    }
}
