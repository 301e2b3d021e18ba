//! Every retry path has a bound: a guard's `lost()` taken before an unlock
//! stays pending afterwards, without going round (it used to spin at full
//! speed once the released hold's lease end had passed).
mod common;

use deadbolt_core::Acquire as _;
use deadbolt_core::HoldGuard as _;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use deadbolt_lock::Lock;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_after_an_unlock_stays_pending_without_spinning() {
    let srv = server();
    let c = client(&srv.url()).await;
    let g = Lock::new(&c, "b")
        .lock_with_lease(Duration::from_millis(100))
        .await
        .unwrap();
    let polls = Arc::new(AtomicUsize::new(0));
    let mut lost = Box::pin(g.lost());
    let p = polls.clone();
    let watched = tokio::spawn(futures::future::poll_fn(move |cx| {
        p.fetch_add(1, Ordering::SeqCst);
        lost.as_mut().poll(cx)
    }));
    g.unlock().await.unwrap();
    // Past the released hold's lease end, then count.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = polls.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let polled = polls.load(Ordering::SeqCst) - before;
    assert!(polled <= 2, "lost() was polled {polled} times in 500 ms");
    assert!(!watched.is_finished(), "a released hold was not lost");
    watched.abort();
}
