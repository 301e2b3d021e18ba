//! Work that stops when the lease is lost: `guard.run`
//! drops the work when the hold can no longer be counted on, before a
//! second holder can start, for every kind of guard.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadbolt::prelude::*;
use deadbolt::{Error, LeaseState};
use deadbolt_testkit::support::{server, within};
use tokio::time::Instant;

/// Work that notes the instant of each step until it is dropped.
async fn steps(log: Arc<Mutex<Vec<Instant>>>) {
    loop {
        log.lock().unwrap().push(Instant::now());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn client(url: &str, watchdog: Duration) -> deadbolt::Client {
    deadbolt::Client::builder(url)
        .watchdog_timeout(watchdog)
        .command_timeout(Duration::from_millis(200))
        .build()
        .await
        .expect("connect")
}

/// Redis stopped (SIGSTOP) for longer than the lease: the work under the
/// hold is dropped with `LeaseLost` (its last step before the lease could
/// have ended on the server), and only then does a second holder get the
/// lock once Redis runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_longer_than_the_lease_cancels_the_work_before_a_second_holder_starts() {
    let srv = server();
    let lease = Duration::from_millis(800);
    let (a, b) = (
        client(&srv.url(), lease).await,
        client(&srv.url(), lease).await,
    );
    let (lock, other) = (a.lock("job"), b.lock("job"));
    let guard = lock.lock().await.unwrap();
    let granted = Instant::now();
    let log: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let work = {
        let log = log.clone();
        async move {
            let r = guard.run(steps(log)).await;
            (r, Instant::now(), guard)
        }
    };
    let work = tokio::spawn(work);
    // Let it run, then stop Redis for three leases.
    tokio::time::sleep(Duration::from_millis(100)).await;
    srv.pause();
    let (r, stopped, guard) = within("the work is dropped", work).await.unwrap();
    assert!(
        matches!(
            r,
            Err(Error::LeaseLost {
                state: LeaseState::Lost | LeaseState::Unknown
            })
        ),
        "{r:?}"
    );
    // Dropped within about a lease of the grant (renewals failed from
    // the pause on); the server keeps the key at least that long.
    assert!(
        stopped <= granted + lease * 2,
        "dropped {:?} after the grant, lease {lease:?}",
        stopped - granted
    );
    tokio::time::sleep(lease * 2).await;
    srv.resume();
    let second = within("a second holder", other.lock()).await.unwrap();
    let started = Instant::now();
    let last = *log.lock().unwrap().last().expect("the work ran");
    assert!(
        last < stopped && stopped < started,
        "the work stepped after it was dropped or while another held the lock"
    );
    let steps_before = log.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        log.lock().unwrap().len(),
        steps_before,
        "the work stays dropped"
    );
    second.unlock().await.unwrap();
    drop(guard);
    a.shutdown().await;
    b.shutdown().await;
}

/// Work that ends while the hold is good returns its output, for every
/// guard; the hold stays and unlocks normally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_that_ends_in_time_returns_its_output_on_every_guard() {
    let srv = server();
    let c = client(&srv.url(), Duration::from_secs(5)).await;
    let g = c.lock("l").lock().await.unwrap();
    assert_eq!(g.run(async { 1 }).await.unwrap(), 1);
    g.unlock().await.unwrap();
    let g = c.fair_lock("f").lock().await.unwrap();
    assert_eq!(g.run(async { 2 }).await.unwrap(), 2);
    g.unlock().await.unwrap();
    let rw = c.rw_lock("rw");
    let r = rw.read_lock().lock().await.unwrap();
    assert_eq!(r.run(async { 3 }).await.unwrap(), 3);
    r.unlock().await.unwrap();
    let w = rw.write_lock().lock().await.unwrap();
    assert_eq!(w.run(async { 4 }).await.unwrap(), 4);
    w.unlock().await.unwrap();
    let sem = c.semaphore("s");
    assert!(sem.try_set_permits(2).await.unwrap());
    let p = sem.acquire(1).await.unwrap();
    assert_eq!(p.run(async { 5 }).await.unwrap(), 5);
    p.release().await.unwrap();
    let m = c.multi_lock(&["m1", "m2"]).lock().await.unwrap();
    assert_eq!(m.run(async { 6 }).await.unwrap(), 6);
    m.unlock().await.unwrap();
    c.shutdown().await;
}

/// A hold that is already lost (its fixed lease ended) drops the work at
/// once, whatever it would have done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_already_lost_runs_nothing() {
    let srv = server();
    let c = client(&srv.url(), Duration::from_secs(5)).await;
    let g = c
        .lock("short")
        .lock_with_lease(Duration::from_millis(50))
        .await
        .unwrap();
    within("the lease ends", g.lost()).await;
    let ran = Arc::new(Mutex::new(false));
    let r = g
        .run({
            let ran = ran.clone();
            async move {
                *ran.lock().unwrap() = true;
            }
        })
        .await;
    assert!(
        matches!(
            r,
            Err(Error::LeaseLost {
                state: LeaseState::Lost
            })
        ),
        "{r:?}"
    );
    assert!(!*ran.lock().unwrap(), "the work never ran");
    c.shutdown().await;
}
