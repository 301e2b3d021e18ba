//! Tasks contending for one lock, each printing the fencing token it got.
//!
//! `cargo run --example contend [-- redis://host:port/]`: with no URL a
//! throwaway redis-server is started on a free loopback port and stopped at
//! the end.

use deadbolt::Acquire as _;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, server) = deadbolt_testkit::RedisServer::given_or_started(std::env::args().nth(1))?;
    if server.is_some() {
        println!("started a throwaway redis-server at {url}");
    }
    let client = deadbolt::Client::connect(&url).await?;
    let mut tasks = Vec::new();
    for worker in 0..4 {
        let lock = client.lock("example:printer");
        tasks.push(tokio::spawn(async move {
            for round in 0..3 {
                let guard = lock.lock().await?;
                println!(
                    "worker {worker} round {round}: holds the lock with fencing token {}",
                    guard.fencing_token()
                );
                tokio::time::sleep(Duration::from_millis(20)).await; // the protected work
                guard.unlock().await?;
            }
            Ok::<_, deadbolt::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    client.shutdown().await;
    Ok(())
}
