//! `cargo run --example simple_lock [-- redis://...]`: the non-reentrant
//! lock of `lock.rs` (built on `deadbolt::primitive` alone) between two
//! handles. Without a URL it starts a throwaway redis-server.

mod lock;

use deadbolt::primitive::Acquire as _;
use lock::SimpleLock;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = deadbolt_testkit::RedisServer::given_or_started(std::env::args().nth(1))?;
    let client = deadbolt::Client::connect(&url).await?;
    let (a, b) = (
        SimpleLock::new(&client, "report"),
        SimpleLock::new(&client, "report"),
    );
    let first = a.lock().await?;
    println!(
        "a holds report with fencing token {}",
        first.fencing_token()
    );
    assert!(b.try_lock().await?.is_none(), "one holder at a time");
    // b waits on the unlock channel; a's unlock wakes it.
    let waiter = tokio::spawn(async move { b.lock().await });
    first.unlock().await?;
    let second = waiter.await??;
    println!(
        "b holds report with fencing token {}",
        second.fencing_token()
    );
    second.unlock().await?;
    client.shutdown().await;
    Ok(())
}
