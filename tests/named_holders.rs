//! Holders you can name: `ClientBuilder::client_name`
//! goes into every owner id the client makes, at no cost in round trips, so
//! `LockInfo`, the inspections and `deadbolt inspect` tell who holds or
//! waits; and `CLIENT LIST` shows it on the client's connections.

use std::time::Duration;

use deadbolt::prelude::*;
use deadbolt::{holder_name, Client, Error};
use deadbolt_testkit::RedisServer;

const HANG: Duration = Duration::from_secs(10);

async fn named(url: &str, name: &str) -> Client {
    Client::builder(url)
        .client_name(name)
        .build()
        .await
        .unwrap()
}

async fn client_list(srv: &RedisServer) -> String {
    redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut srv.conn().await)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hold_and_waiter_carries_its_clients_name() {
    let srv = RedisServer::start().unwrap();
    // Any text: colons, spaces, non-ASCII, an at sign.
    let web = named(&srv.url(), "web-1:4242 (blue) ü@x").await;
    let batch = named(&srv.url(), "batch").await;
    assert_eq!(web.name(), "web-1:4242 (blue) ü@x");
    assert_eq!(holder_name(web.id()).as_deref(), Some(web.name()));

    // A Lock: its holder's name, decoded from the owner id.
    let lock = web.lock("orders:42");
    let g = lock.lock().await.unwrap();
    let info = lock.inspect().await.unwrap();
    assert_eq!(info.holder.as_deref(), Some(lock.owner()));
    assert_eq!(info.holder_name.as_deref(), Some(web.name()));
    // Re-entry, waiting and hand-off work with names in the ids.
    let again = lock.lock().await.unwrap();
    let other = batch.lock("orders:42");
    let waiting = tokio::spawn(async move { other.lock().await.map(|g| g.fencing_token()) });
    tokio::time::sleep(Duration::from_millis(50)).await;
    again.unlock().await.unwrap();
    g.unlock().await.unwrap();
    let token = tokio::time::timeout(HANG, waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(token > 0);

    // A FairLock's queue: each waiter's owner id names its client.
    let fair = web.fair_lock("jobs");
    let held = fair.lock().await.unwrap();
    let queued = batch.fair_lock("jobs");
    let q2 = queued.clone();
    let w = tokio::spawn(async move { q2.lock().await.map(drop) });
    let entries = tokio::time::timeout(HANG, async {
        loop {
            let q = fair.queue(10).await.unwrap();
            if !q.is_empty() {
                return q;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    assert_eq!(holder_name(&entries[0].owner).as_deref(), Some("batch"));
    held.unlock().await.unwrap();
    tokio::time::timeout(HANG, w)
        .await
        .unwrap()
        .unwrap()
        .unwrap();

    web.shutdown().await;
    batch.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_named_and_the_default_is_host_and_pid() {
    let srv = RedisServer::start().unwrap();
    let c = named(&srv.url(), "api.7").await;
    let list = client_list(&srv).await;
    // The command and the subscriber connection.
    assert_eq!(list.matches(" name=api.7 ").count(), 2, "{list}");
    c.shutdown().await;

    let d = Client::connect(&srv.url()).await.unwrap();
    let pid = std::process::id().to_string();
    assert!(d.name().ends_with(&format!(":{pid}")), "{}", d.name());
    let held = d.lock("x").lock().await.unwrap();
    let info = d.lock("x").inspect().await.unwrap();
    assert_eq!(info.holder_name.as_deref(), Some(d.name()));
    held.unlock().await.unwrap();
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_are_refused_before_anything_is_sent() {
    let srv = RedisServer::start().unwrap();
    for bad in [String::new(), "a\nb".to_string(), "x".repeat(65)] {
        let r = Client::builder(&srv.url())
            .client_name(bad.clone())
            .build()
            .await;
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{bad:?}");
    }
    // A user the ACL denies CLIENT SETNAME still connects and locks.
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER", "noname", "on", ">pw", "~*", "&*", "+@all", "-client",
        ])
        .query_async(&mut srv.conn().await)
        .await
        .unwrap();
    let url = format!("redis://noname:pw@127.0.0.1:{}/", srv.port());
    let c = named(&url, "quiet").await;
    c.lock("y").lock().await.unwrap().unlock().await.unwrap();
    c.shutdown().await;
}
