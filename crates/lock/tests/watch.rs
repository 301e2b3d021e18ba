//! Watching a lock: every holder change of a name, for any client's holds
//! (acquired by whom; released, expired or force-unlocked), woken by the
//! server's keyspace notifications when they are on, and within the
//! catch-up bound when they are off.
mod common;

use deadbolt_core::Acquire as _;
use std::time::{Duration, Instant};

use common::*;
use deadbolt_core::watch::HoldEvent;
use deadbolt_core::CATCH_UP;
use deadbolt_lock::Lock;
use futures::{Stream, StreamExt};

fn notifying_server() -> RedisServer {
    RedisServer::builder()
        .arg("notify-keyspace-events", "Kghx")
        .start()
        .expect("redis-server")
}

/// The next event, and how long it took to come.
async fn next<S: Stream<Item = deadbolt_core::Result<HoldEvent>> + Unpin>(
    s: &mut S,
) -> (HoldEvent, Duration) {
    let t = Instant::now();
    let e = within("a holder change", s.next()).await.unwrap().unwrap();
    (e, t.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_reports_every_holder_change_by_its_kind() {
    let srv = notifying_server();
    let a = client(&srv.url()).await;
    let w = client(&srv.url()).await;
    let mut seen = Box::pin(Lock::new(&w, "w").watch());
    let mine = Lock::new(&a, "w");
    assert_eq!(next(&mut seen).await.0, HoldEvent::Free);
    let g = mine.lock().await.unwrap();
    let (e, _) = next(&mut seen).await;
    let HoldEvent::Acquired(h) = e else {
        panic!("{e:?}")
    };
    assert_eq!(h.token, g.fencing_token());
    assert!(h.owner.starts_with(a.id()));
    // Each change arrives by notification: well within the catch-up bound.
    let t = g.fencing_token();
    g.unlock().await.unwrap();
    let (e, took) = next(&mut seen).await;
    assert!(
        matches!(&e, HoldEvent::Released(h) if h.token == t),
        "{e:?}"
    );
    assert!(took < CATCH_UP / 2, "{took:?}");

    let g = mine
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    let t = g.fencing_token();
    assert!(matches!(next(&mut seen).await.0, HoldEvent::Acquired(h) if h.token == t));
    let (e, _) = next(&mut seen).await;
    assert!(matches!(&e, HoldEvent::Expired(h) if h.token == t), "{e:?}");
    drop(g);

    let g = mine.lock().await.unwrap();
    let t = g.fencing_token();
    assert!(matches!(next(&mut seen).await.0, HoldEvent::Acquired(h) if h.token == t));
    assert!(Lock::new(&w, "w").force_unlock().await.unwrap());
    let (e, took) = next(&mut seen).await;
    assert!(
        matches!(&e, HoldEvent::ForceUnlocked(h) if h.token == t),
        "{e:?}"
    );
    assert!(took < CATCH_UP / 2, "{took:?}");
    drop(g);

    // A watch that starts while the lock is held reports the holder first.
    let g = mine.lock().await.unwrap();
    let mut late = Box::pin(Lock::new(&w, "w").watch());
    assert!(matches!(next(&mut late).await.0, HoldEvent::Held(h) if h.token == g.fencing_token()));
    g.unlock().await.unwrap();
}

/// A force-unlock is reported as one even when the watch reads the hold
/// gone before it hears the announcement: its subscriber connection (the
/// client's second through the proxy) is slowed past the catch-up bound,
/// so the read the bound brings sees the hold gone first. (Reading the
/// token from the announcement alone reported this `Released`; under load
/// it happened without a proxy.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_unlock_read_before_its_announcement_is_still_one() {
    let srv = notifying_server();
    let proxy = FaultProxy::start(srv.addr()).await.expect("proxy");
    let a = client(&srv.url()).await;
    let w = client(&proxy.url()).await;
    let mine = Lock::new(&a, "slow");
    let mut seen = Box::pin(Lock::new(&w, "slow").watch());
    assert_eq!(next(&mut seen).await.0, HoldEvent::Free);
    let g = mine.lock().await.unwrap();
    let t = g.fencing_token();
    assert!(matches!(next(&mut seen).await.0, HoldEvent::Acquired(h) if h.token == t));
    let slowed = (1..8)
        .filter(|&id| proxy.set_connection_reply_delay(id, CATCH_UP * 3))
        .count();
    assert!(slowed >= 1, "no subscriber connection to slow");
    assert!(Lock::new(&a, "slow").force_unlock().await.unwrap());
    let (e, _) = next(&mut seen).await;
    assert!(
        matches!(&e, HoldEvent::ForceUnlocked(h) if h.token == t),
        "{e:?}"
    );
    drop(g);
}

/// Without keyspace notifications (Redis's default) a change is still
/// seen, within the catch-up bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_notifications_a_watch_catches_up_within_its_bound() {
    let srv = server();
    let a = client(&srv.url()).await;
    let mut seen = Box::pin(Lock::new(&a, "quiet").watch());
    assert_eq!(next(&mut seen).await.0, HoldEvent::Free);
    let g = Lock::new(&a, "quiet").lock().await.unwrap();
    let (e, took) = next(&mut seen).await;
    assert!(matches!(e, HoldEvent::Acquired(_)), "{e:?}");
    assert!(took < CATCH_UP * 3, "{took:?}");
    g.unlock().await.unwrap();
    let (e, _) = next(&mut seen).await;
    assert!(matches!(e, HoldEvent::Released(_)), "{e:?}");
}

/// A watch of an invalid name yields its error once per catch-up bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_of_an_invalid_name_paces_its_error() {
    let srv = server();
    let a = client(&srv.url()).await;
    let mut seen = Box::pin(Lock::new(&a, "").watch());
    let mut n = 0;
    let _ = tokio::time::timeout(Duration::from_millis(2500), async {
        while let Some(r) = seen.next().await {
            assert!(r.is_err());
            n += 1;
        }
    })
    .await;
    assert!((1..=3).contains(&n), "{n} errors in 2.5 s");
}

/// With keyspace notifications on (`Kghzx`), idle watches send nothing
/// between changes (a backstop read every 30 s): 20 idle watches sent
/// about 20 reads a second when they sampled every second regardless.
/// A change still arrives at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_watches_with_notifications_do_not_poll() {
    let srv = RedisServer::builder()
        .arg("notify-keyspace-events", "Kghzx")
        .start()
        .expect("redis-server");
    let w = client(&srv.url()).await;
    // Each watch consumed by a task of its own, as a service would.
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..20 {
        let (mut s, tx) = (
            Box::pin(Lock::new(&w, &format!("idle{i}")).watch()),
            tx.clone(),
        );
        tokio::spawn(async move {
            while let Some(e) = s.next().await {
                if tx.send((i, e.unwrap(), Instant::now())).is_err() {
                    return;
                }
            }
        });
    }
    for _ in 0..20 {
        let (_, e, _) = within("a first read", events.recv()).await.unwrap();
        assert_eq!(e, HoldEvent::Free);
    }
    srv.reset_stats().await;
    // A window of idleness: what the watches send in it is the measure.
    tokio::time::sleep(CATCH_UP * 3).await;
    // What a watch sends: its read script (and the commands inside it),
    // and its one CONFIG GET. The test's own connections (INFO, CONFIG
    // RESETSTAT, and on Valkey the CLIENT SETINFO of each new one) are
    // not the watches'.
    let stats = srv.commandstats().await;
    let sent: u64 = stats
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "info" | "config|resetstat" | "client|setinfo" | "hello"
            )
        })
        .map(|(_, n)| n)
        .sum();
    assert_eq!(sent, 0, "idle watches sent commands: {stats:?}");
    let a = client(&srv.url()).await;
    let t = Instant::now();
    let g = Lock::new(&a, "idle7").lock().await.unwrap();
    let (i, e, at) = within("the change", events.recv()).await.unwrap();
    assert_eq!(i, 7);
    assert!(matches!(e, HoldEvent::Acquired(_)), "{e:?}");
    assert!(at - t < CATCH_UP, "{:?}: woken by the notification", at - t);
    g.unlock().await.unwrap();
}
