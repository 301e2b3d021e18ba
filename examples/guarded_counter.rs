//! Guarded writes: a counter in Redis that changes only while the
//! lock guarding it is held. `cargo run --example guarded_counter` against
//! a redis-server on 127.0.0.1:6379.

use deadbolt::prelude::*;

#[tokio::main]
async fn main() -> deadbolt::Result<()> {
    let client = deadbolt::Client::connect("redis://127.0.0.1/").await?;
    let guard = client.lock("orders:42").lock().await?;
    let writes = guard.guarded();
    // Checked and written in one script: refused (Error::NotHeld) once the
    // hold is gone, say after a pause longer than its lease.
    let n = writes.incr_by(writes.key("retries"), 1).await?;
    println!("orders:42 retried {n} times");
    guard.unlock().await?;
    client.shutdown().await;
    Ok(())
}
