//! The example in README.md, kept here so that every build of the examples
//! compiles it: `tests/readme.rs` checks that README.md shows the code below
//! this header word for word. It expects a Redis at 127.0.0.1:6379.

use deadbolt::prelude::*;

#[tokio::main]
async fn main() -> deadbolt::Result<()> {
    let client = deadbolt::Client::connect("redis://127.0.0.1/").await?;
    let lock = client.lock("orders:42");
    // Waits on the unlock channel while another owner holds the lock.
    let guard = lock.lock().await?;
    // Pass the fencing token to the resource you protect (docs/safety.md).
    let token = guard.fencing_token();
    println!("holding orders:42 with fencing token {token}");
    // Data in the same Redis can be written only while the hold is live:
    // checked and written in one script, refused (Error::NotHeld) after it.
    let writes = guard.guarded();
    writes.incr_by(writes.key("retries"), 1).await?;
    guard.unlock().await?;
    client.shutdown().await;
    Ok(())
}
