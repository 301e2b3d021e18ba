//! The figures deadbolt reports through the `metrics` facade (feature
//! `metrics`, docs/observability.md), read back from a debugging recorder
//! after real acquisitions against a real redis-server. Runs with
//! `cargo test -p deadbolt --features metrics --test metrics`
//! (scripts/test does).
#![cfg(feature = "metrics")]
// Counts here are small: f64 carries them exactly.
#![allow(clippy::cast_precision_loss)]

use std::time::Duration;

use deadbolt::prelude::*;
use deadbolt::LeaseState;
use deadbolt_testkit::support::{server, until, within};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;

/// The figures so far: the debugging recorder hands out what changed
/// since the last snapshot (counters and gauges as deltas, histograms'
/// new samples), so each reading is added up here.
struct Tally {
    snap: Snapshotter,
    seen: std::sync::Mutex<Vec<Reading>>,
}

/// One metric's change: its kind, name, labels and value.
type Reading = (MetricKind, String, Vec<(String, String)>, f64);

impl Tally {
    fn value(&self, name: &str, kind: MetricKind, label: Option<(&str, &str)>) -> f64 {
        let mut seen = self.seen.lock().unwrap();
        for (key, _, _, v) in self.snap.snapshot().into_vec() {
            let labels = key
                .key()
                .labels()
                .map(|l| (l.key().to_string(), l.value().to_string()))
                .collect();
            let v = match v {
                DebugValue::Counter(c) => c as f64,
                DebugValue::Gauge(g) => g.into_inner(),
                DebugValue::Histogram(h) => h.len() as f64,
            };
            seen.push((key.kind(), key.key().name().to_string(), labels, v));
        }
        seen.iter()
            .filter(|(k, n, _, _)| *k == kind && n == name)
            .filter(|(_, _, l, _)| {
                label.is_none_or(|(a, b)| l.iter().any(|(x, y)| x == a && y == b))
            })
            .map(|(_, _, _, v)| v)
            .sum()
    }
}

/// One test per binary: the recorder is process-wide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_waits_holds_renewals_losses_and_waiters_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snap = Tally {
        snap: recorder.snapshotter(),
        seen: Default::default(),
    };
    recorder
        .install()
        .expect("the only recorder of this binary");
    let srv = server();
    let c = deadbolt::Client::builder(&srv.url())
        .watchdog_timeout(Duration::from_millis(300))
        .build()
        .await
        .unwrap();
    let (a, b) = (c.lock("m"), c.lock("m"));
    let g = a.lock().await.unwrap();
    // A busy one-shot try: a timed-out acquire.
    assert!(b.try_lock().await.unwrap().is_none());
    // A waiter: counted while it waits.
    let waiter = tokio::spawn(async move { b.lock().await.unwrap() });
    until("a waiter is counted", || async {
        snap.value("deadbolt_waiters", MetricKind::Gauge, None) >= 1.0
    })
    .await;
    assert!(snap.value("deadbolt_subscriptions", MetricKind::Gauge, None) >= 1.0);
    // Held across a few watchdog rounds: renewals.
    until("renewals", || async {
        snap.value(
            "deadbolt_renewals_total",
            MetricKind::Counter,
            Some(("outcome", "renewed")),
        ) >= 2.0
    })
    .await;
    g.unlock().await.unwrap();
    let g2 = within("the waiter", waiter).await.unwrap();
    g2.unlock().await.unwrap();
    assert_eq!(
        snap.value("deadbolt_waiters", MetricKind::Gauge, None),
        0.0,
        "nobody waits now"
    );
    // A fixed lease that runs out: a lost hold.
    let short = c
        .lock("short")
        .lock_with_lease(Duration::from_millis(30))
        .await
        .unwrap();
    assert_eq!(
        within("the lease ends", short.lost()).await,
        LeaseState::Lost
    );
    drop(short);
    let acquired = snap.value(
        "deadbolt_acquires_total",
        MetricKind::Counter,
        Some(("outcome", "acquired")),
    );
    let timed_out = snap.value(
        "deadbolt_acquires_total",
        MetricKind::Counter,
        Some(("outcome", "timed_out")),
    );
    assert_eq!(acquired, 3.0, "a, the waiter, short");
    assert_eq!(timed_out, 1.0, "the busy try");
    assert_eq!(
        snap.value(
            "deadbolt_acquires_total",
            MetricKind::Counter,
            Some(("primitive", "lock"))
        ),
        4.0
    );
    assert_eq!(
        snap.value("deadbolt_acquire_wait_seconds", MetricKind::Histogram, None),
        3.0
    );
    assert_eq!(
        snap.value("deadbolt_hold_seconds", MetricKind::Histogram, None),
        3.0
    );
    assert!(
        snap.value(
            "deadbolt_holds_lost_total",
            MetricKind::Counter,
            Some(("primitive", "lock"))
        ) >= 1.0
    );
    c.shutdown().await;
}
