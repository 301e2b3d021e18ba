//! A holder whose hold another client force-unlocks learns it within a
//! round trip: its guard turns `Lost` and `lost()` fires, for a watchdog
//! lease (whose next renewal is 10 s away here: it used to be the first to
//! tell) and for a fixed lease (which nothing told before it ended).

use deadbolt::prelude::*;
use std::time::Duration;

use deadbolt::{Client, LeaseState};
use deadbolt_testkit::support::{server, within};
use deadbolt_testkit::RedisServer;

/// Until the client listens on its own channel (it subscribes as it
/// starts, without waiting for the server).
async fn listening(srv: &RedisServer, c: &Client) {
    let channel = format!("deadbolt:client:{}", c.id());
    deadbolt_testkit::support::until("the client listens on its channel", || async {
        deadbolt_testkit::support::subscribers(srv, &channel).await == 1
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_unlocked_holder_learns_it_at_once() {
    let srv = server();
    let holder = Client::connect(&srv.url()).await.unwrap();
    let admin = Client::connect(&srv.url()).await.unwrap();
    listening(&srv, &holder).await;
    let bound = Duration::from_secs(3);

    let g = holder.lock("fl").lock().await.unwrap();
    assert!(admin.lock("fl").force_unlock().await.unwrap());
    let state = tokio::time::timeout(bound, g.lost()).await;
    assert_eq!(state, Ok(LeaseState::Lost), "the Lock's holder");
    assert_eq!(g.state(), LeaseState::Lost);
    let r = g.unlock().await;
    assert!(r.as_ref().is_err_and(deadbolt::Error::is_lost), "{r:?}");

    let g = holder
        .fair_lock("ff")
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    assert!(admin.fair_lock("ff").force_unlock().await.unwrap());
    let state = tokio::time::timeout(bound, g.lost()).await;
    assert_eq!(
        state,
        Ok(LeaseState::Lost),
        "the FairLock's fixed-lease holder"
    );

    let g = holder.rw_lock("fw").write_lock().lock().await.unwrap();
    assert!(admin.rw_lock("fw").force_unlock_write().await.unwrap());
    let state = tokio::time::timeout(bound, g.lost()).await;
    assert_eq!(state, Ok(LeaseState::Lost), "the RwLock's writer");

    // Another holder of the same name afterwards is left alone.
    let again = within("the lock again", holder.lock("fl").lock())
        .await
        .unwrap();
    assert_eq!(again.state(), LeaseState::Active);
    again.unlock().await.unwrap();
}
