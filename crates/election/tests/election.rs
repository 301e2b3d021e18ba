//! Leader election against real redis-server processes: campaign, leader,
//! resign, observe across clients, a leader that dies (its connection
//! black-holed: no renewal, no resignation), Redis stopped for longer than
//! the lease, an observer of a dead Redis, a key of another type, and a
//! cancelled campaign.

use deadbolt_core::HoldGuard as _;
use std::time::Duration;

use deadbolt_core::{Client, Error, LeaseState};
use deadbolt_election::{Election, Leader};
use deadbolt_testkit::{FaultProxy, RedisServer};
use futures::StreamExt;
use tokio::time::{timeout, Instant};

/// Bound on every wait: catches hangs, never speed.
const HANG: Duration = Duration::from_secs(15);

async fn client(url: &str, name: &str, lease: Duration) -> Client {
    deadbolt_testkit::client_with(url, |b| {
        b.client_name(name)
            .watchdog_timeout(lease)
            .command_timeout(Duration::from_millis(500))
    })
    .await
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    timeout(HANG, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {HANG:?}"))
}

async fn waiting(c: &Client, n: usize) {
    within("waiters", async {
        while c.waiters() < n {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_leads_until_it_resigns_and_terms_rise() {
    let srv = RedisServer::start().unwrap();
    let a = client(&srv.url(), "node-a", Duration::from_secs(5)).await;
    let b = client(&srv.url(), "node-b", Duration::from_secs(5)).await;
    let ea = Election::new(&a, "scheduler");
    let eb = Election::new(&b, "scheduler");
    assert_eq!(ea.leader().await.unwrap(), None);

    let first = within("a campaigns", ea.campaign("10.0.0.1:8080"))
        .await
        .unwrap();
    assert_eq!(first.info(), "10.0.0.1:8080");
    let now = eb.leader().await.unwrap().expect("a leads");
    assert_eq!(
        (now.term, now.info.as_str()),
        (first.term(), "10.0.0.1:8080")
    );
    assert_eq!(now.client_name.as_deref(), Some("node-a"));
    assert!(now.ttl > Duration::ZERO && now.ttl <= Duration::from_secs(5));

    // b waits (no polling: it sleeps on the candidates' channel) ...
    let second = tokio::spawn(async move { eb.campaign("10.0.0.2:8080").await });
    waiting(&b, 1).await;
    assert!(!second.is_finished());
    // ... and a second campaign of a's own waits too.
    let again = tokio::time::timeout(
        Duration::from_millis(200),
        ea.campaign_for("again", Duration::from_millis(100)),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(again.is_none(), "a leader's own second campaign waits");

    let t1 = first.term();
    first.resign().await.unwrap();
    let second = within("b is elected", second).await.unwrap().unwrap();
    assert!(
        second.term() > t1,
        "terms rise: {} then {}",
        t1,
        second.term()
    );
    let now = ea.leader().await.unwrap().unwrap();
    assert_eq!(
        (now.term, now.info.as_str()),
        (second.term(), "10.0.0.2:8080")
    );
    second.resign().await.unwrap();
    assert_eq!(ea.leader().await.unwrap(), None);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_on_other_clients_see_each_change_in_order() {
    let srv = RedisServer::start().unwrap();
    let a = client(&srv.url(), "a", Duration::from_secs(5)).await;
    let b = client(&srv.url(), "b", Duration::from_secs(5)).await;
    let o = client(&srv.url(), "observer", Duration::from_secs(5)).await;
    let mut seen = Box::pin(Election::new(&o, "jobs").observe());
    // The current leader first: nobody.
    assert_eq!(within("first", seen.next()).await.unwrap().unwrap(), None);

    let la = Election::new(&a, "jobs").campaign("a").await.unwrap();
    let got = within("a elected", seen.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!((got.term, got.info.as_str()), (la.term(), "a"));

    let t_a = la.term();
    la.resign().await.unwrap();
    assert_eq!(
        within("a resigned", seen.next()).await.unwrap().unwrap(),
        None
    );

    let lb = Election::new(&b, "jobs").campaign("b").await.unwrap();
    let got = within("b elected", seen.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!((got.term, got.info.as_str()), (lb.term(), "b"));
    assert!(lb.term() > t_a);

    // A second observer, joining late, starts from the current leader.
    let mut late = Box::pin(Election::new(&a, "jobs").observe());
    let now = within("late first", late.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(now.term, lb.term());
    lb.resign().await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
    o.shutdown().await;
}

/// A leader that stops answering (its connections black-holed, as after a
/// SIGKILL: no renewal, no resignation) is replaced once its lease has run
/// out, and an observer sees the hand-over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_leader_is_replaced_within_its_lease() {
    let srv = RedisServer::start().unwrap();
    let lease = Duration::from_millis(900);
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let dying = client(&proxy.url(), "dying", lease).await;
    let heir = client(&srv.url(), "heir", lease).await;
    let old = Election::new(&dying, "leader")
        .campaign("old")
        .await
        .unwrap();
    let mut seen = Box::pin(Election::new(&heir, "leader").observe());
    let first = within("first", seen.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.term, old.term());

    let next = {
        let e = Election::new(&heir, "leader");
        tokio::spawn(async move { e.campaign("new").await })
    };
    waiting(&heir, 1).await;
    proxy.set_blackhole(true);
    let died = Instant::now();
    let new = within("the heir is elected", next).await.unwrap().unwrap();
    let took = died.elapsed();
    assert!(new.term() > old.term());
    assert!(
        took <= lease + Duration::from_millis(1500),
        "hand-over after a death took {took:?} with a {lease:?} lease"
    );
    // The observer saw the lease end (nobody) and the heir, in that order
    // or the heir at once.
    let mut last = first.term;
    loop {
        if let Some(l) = within("observed", seen.next()).await.unwrap().unwrap() {
            assert!(l.term > last);
            last = l.term;
            if l.term == new.term() {
                break;
            }
        }
    }
    // The dead leader's own handle learns it lost the lease.
    let state = within("the old leader learns", old.lost()).await;
    assert!(
        matches!(state, LeaseState::Lost | LeaseState::Unknown),
        "{state:?}"
    );
    std::mem::forget(old);
    new.resign().await.unwrap();
    heir.shutdown().await;
}

/// Redis stopped (SIGSTOP) for longer than the lease: the old leader's
/// `lost()` fires before anyone else is elected, and work run under the
/// leadership is stopped; after the resume another candidate leads with a
/// higher term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_longer_than_the_lease_hands_over_without_two_leaders() {
    let srv = RedisServer::start().unwrap();
    let lease = Duration::from_millis(600);
    let a = client(&srv.url(), "a", lease).await;
    let b = client(&srv.url(), "b", lease).await;
    let old = Election::new(&a, "paused").campaign("a").await.unwrap();
    let next = {
        let e = Election::new(&b, "paused");
        tokio::spawn(async move {
            let l = e.campaign("b").await;
            (Instant::now(), l)
        })
    };
    waiting(&b, 1).await;
    let work = old.run(std::future::pending::<()>());
    srv.pause();
    let stopped = within("the work is stopped", work).await;
    let lost_at = Instant::now();
    assert!(
        matches!(stopped, Err(Error::LeaseLost { .. })),
        "{stopped:?}"
    );
    tokio::time::sleep(lease * 2).await;
    srv.resume();
    let (elected_at, new) = within("b is elected", next).await.unwrap();
    let new = new.unwrap();
    assert!(
        lost_at < elected_at,
        "the old leader still counted on its lease"
    );
    assert!(new.term() > old.term());
    assert!(
        old.resign().await.is_err(),
        "a lost leadership cannot resign"
    );
    new.resign().await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_of_a_dead_redis_gets_an_error_not_silence() {
    let mut srv = RedisServer::start().unwrap();
    let o = client(&srv.url(), "o", Duration::from_secs(2)).await;
    let mut seen = Box::pin(Election::new(&o, "gone").observe());
    assert_eq!(within("first", seen.next()).await.unwrap().unwrap(), None);
    srv.stop();
    let started = Instant::now();
    let r = within("an answer", seen.next()).await.unwrap();
    assert!(r.is_err(), "{r:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    o.shutdown().await;
}

/// Count what an observer yields in `span`, consuming as fast as it can
/// (yielding to the runtime between items).
async fn items_in<S>(mut seen: std::pin::Pin<Box<S>>, span: Duration) -> (usize, usize)
where
    S: futures::Stream<Item = deadbolt_core::Result<Option<Leader>>>,
{
    let (mut items, mut errors) = (0, 0);
    let _ = timeout(span, async {
        while let Some(r) = seen.next().await {
            items += 1;
            errors += usize::from(r.is_err());
            tokio::task::yield_now().await;
        }
    })
    .await;
    (items, errors)
}

/// An observer created while Redis is down (killed) yields one error per
/// CATCH_UP, as one that was running does: the first read's failure used
/// to be read again at once, about a million errors in 3 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_started_while_redis_is_down_paces_its_errors() {
    let mut srv = RedisServer::start().unwrap();
    let o = client(&srv.url(), "o", Duration::from_secs(2)).await;
    srv.stop();
    let seen = Box::pin(Election::new(&o, "down").observe());
    let (items, errors) = items_in(seen, Duration::from_secs(3)).await;
    eprintln!("observer started with Redis down: {items} items in 3 s");
    assert_eq!(items, errors);
    assert!((1..=4).contains(&items), "{items} items in 3 s");
    o.shutdown().await;
}

/// A permanent error (an empty name; a key of another type) is yielded
/// once per CATCH_UP too, not in a tight loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_with_a_permanent_error_paces_it() {
    let srv = RedisServer::start().unwrap();
    let c = client(&srv.url(), "c", Duration::from_secs(2)).await;
    let key = c.keys("elect", "typed").unwrap().main().to_string();
    let () = redis::cmd("SET")
        .arg(&key)
        .arg("x")
        .query_async(&mut srv.conn().await)
        .await
        .unwrap();
    for name in ["", "typed"] {
        let seen = Box::pin(Election::new(&c, name).observe());
        let (items, errors) = items_in(seen, Duration::from_millis(2500)).await;
        assert_eq!(items, errors);
        assert!((1..=3).contains(&items), "{name:?}: {items} items in 2.5 s");
    }
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_is_refused_by_name_and_nothing_is_written() {
    let srv = RedisServer::start().unwrap();
    let c = client(&srv.url(), "c", Duration::from_secs(2)).await;
    let e = Election::new(&c, "typed");
    let key = c.keys("elect", "typed").unwrap().main().to_string();
    let mut raw = srv.conn().await;
    let () = redis::cmd("SET")
        .arg(&key)
        .arg("x")
        .query_async(&mut raw)
        .await
        .unwrap();
    for r in [
        e.campaign_for("c", Duration::from_millis(100))
            .await
            .map(drop),
        e.leader().await.map(drop),
    ] {
        match r {
            Err(Error::WrongType { key: k }) => assert_eq!(k, key),
            other => panic!("expected WrongType naming {key}, got {other:?}"),
        }
    }
    let mut seen = Box::pin(e.observe());
    assert!(matches!(
        seen.next().await,
        Some(Err(Error::WrongType { .. }))
    ));
    let v: String = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(v, "x");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_campaign_leaves_no_leader_behind() {
    let srv = RedisServer::start().unwrap();
    let a = client(&srv.url(), "a", Duration::from_secs(5)).await;
    let b = client(&srv.url(), "b", Duration::from_secs(5)).await;
    let leader = Election::new(&a, "c").campaign("a").await.unwrap();
    let eb = Election::new(&b, "c");
    // Cancelled while it waits, and cancelled around the hand-over.
    assert!(timeout(Duration::from_millis(50), eb.campaign("b"))
        .await
        .is_err());
    let racing = tokio::spawn({
        let eb = eb.clone();
        async move { eb.campaign("b").await.map(drop) }
    });
    waiting(&b, 1).await;
    leader.resign().await.unwrap();
    racing.abort();
    let _ = racing.await;
    assert!(within("settled", b.releases_settled(HANG)).await);
    // Whatever the race did, nobody leads once the campaigns are gone.
    let deadline = Instant::now() + HANG;
    loop {
        match eb.leader().await.unwrap() {
            None => break,
            Some(Leader { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Some(l) => panic!("a leader left behind: {l:?}"),
        }
    }
    a.shutdown().await;
    b.shutdown().await;
}
