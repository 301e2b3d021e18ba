//! Tasks contending for one lock, each printing the fencing token it got.
//!
//! `cargo run --example contend [-- redis://host:port/]`: with no URL a
//! throwaway redis-server is started on a free loopback port and stopped at
//! the end.

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut _server = None;
    let url = match std::env::args().nth(1) {
        Some(url) => url,
        None => {
            let srv = deadbolt_testkit::RedisServer::start()?;
            let url = srv.url();
            println!("started a throwaway redis-server at {url}");
            _server = Some(srv);
            url
        }
    };
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
