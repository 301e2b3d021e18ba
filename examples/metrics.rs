//! `cargo run --example metrics --features metrics [-- redis://...]`: the
//! figures deadbolt reports through the `metrics` facade
//! (docs/observability.md), printed from a debugging recorder after a few
//! acquisitions. Plug a Prometheus or OpenTelemetry exporter in the same
//! way: install it as the global recorder before connecting. Without a URL
//! it starts a throwaway redis-server.

use std::time::Duration;

use deadbolt::prelude::*;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let recorder = DebuggingRecorder::new();
    let snapshot = recorder.snapshotter();
    recorder.install()?;
    let (url, _server) = deadbolt_testkit::RedisServer::given_or_started(std::env::args().nth(1))?;
    let client = deadbolt::Client::connect(&url).await?;
    let (a, b) = (client.lock("report"), client.lock("report"));
    let guard = a.lock().await?;
    let busy = b.try_lock_for(Duration::from_millis(20)).await?;
    assert!(busy.is_none(), "held by a");
    guard.unlock().await?;
    b.lock().await?.unlock().await?;
    client.shutdown().await;
    for (key, _, _, value) in snapshot.snapshot().into_vec() {
        let labels: Vec<String> = key
            .key()
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let value = match value {
            DebugValue::Counter(c) => c.to_string(),
            DebugValue::Gauge(g) => g.to_string(),
            DebugValue::Histogram(h) => format!("{} samples", h.len()),
        };
        println!("{} {{{}}} {value}", key.key().name(), labels.join(", "));
    }
    Ok(())
}
