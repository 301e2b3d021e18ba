//! A release that has waiters of other clients grants the lock
//! to the waiter the longest-waiting client registered, inside the release
//! (one hop: no try of the waiter's own), under a claim that the waiter
//! extends to its lease; a waiter that leaves takes its registration with
//! it.
mod common;

use deadbolt_core::Acquire as _;
use deadbolt_core::HoldGuard as _;
use std::time::{Duration, Instant};

use common::*;
use deadbolt_core::Client;
use deadbolt_lock::Lock;

/// The registration a client's waiter left in the hold (`d:<client id>`),
/// if any.
async fn registration(srv: &RedisServer, name: &str, client: &Client) -> Option<String> {
    cmd(
        srv,
        &[
            "HGET",
            &format!("deadbolt:{{{name}}}:lock"),
            &format!("d:{}", client.id()),
        ],
    )
    .await
}

async fn until_registered(srv: &RedisServer, name: &str, client: &Client) {
    until("the waiter registers", || async {
        registration(srv, name, client).await.is_some()
    })
    .await;
}

/// Two clients wait, one after the other: each release hands the lock to
/// the next of them inside the release, so from an unlock to the next
/// holder's guard Redis runs exactly one script (the release), and tokens
/// rise through the hand-offs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_grants_to_the_longest_waiting_client_in_one_hop() {
    let srv = server();
    // Scripts loaded at connect: a first EVALSHA would meet NOSCRIPT and
    // count twice.
    let h = deadbolt_testkit::client_with(&srv.url(), |b| b.preload(deadbolt_lock::SCRIPTS)).await;
    let a = client(&srv.url()).await;
    let b = client(&srv.url()).await;
    let g = Lock::new(&h, "hop").lock().await.unwrap();
    srv.reset_stats().await;
    let la = Lock::new(&a, "hop");
    let ta = tokio::spawn(async move { la.lock().await });
    until_registered(&srv, "hop", &a).await;
    let lb = Lock::new(&b, "hop");
    let tb = tokio::spawn(async move { lb.lock().await });
    until_registered(&srv, "hop", &b).await;
    // Each waiter tries, subscribes and tries once more, then sleeps.
    until("both waiters sleep", || async {
        evalsha_calls(&srv).await == 4
    })
    .await;

    srv.reset_stats().await;
    let t0 = g.fencing_token();
    g.unlock().await.unwrap();
    let ga = within("a's guard", ta).await.unwrap().unwrap();
    assert_eq!(
        evalsha_calls(&srv).await,
        1,
        "a took the lock without a try"
    );
    assert!(ga.fencing_token() > t0);
    assert!(registration(&srv, "hop", &a).await.is_none());
    assert!(
        registration(&srv, "hop", &b).await.is_some(),
        "b still waits"
    );

    let ta_token = ga.fencing_token();
    ga.unlock().await.unwrap();
    let gb = within("b's guard", tb).await.unwrap().unwrap();
    assert_eq!(
        evalsha_calls(&srv).await,
        2,
        "b took the lock without a try"
    );
    assert!(gb.fencing_token() > ta_token);
    let owner: String = cmd(&srv, &["HGET", "deadbolt:{hop}:lock", "o"]).await;
    assert!(owner.starts_with(b.id()), "the hold names b: {owner}");
    gb.unlock().await.unwrap();
    assert!(!exists(&srv, "deadbolt:{hop}:lock").await);
}

/// A registered waiter that leaves (its wait runs out, or its acquire is
/// cancelled) clears its registration, so the next release does not grant
/// to it: the next client's waiter gets the lock at once, not after a
/// claim that nobody picks up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_leaves_takes_its_registration_with_it() {
    let srv = server();
    let h = client(&srv.url()).await;
    let a = client(&srv.url()).await;
    let b = client(&srv.url()).await;
    let c = client(&srv.url()).await;
    let g = Lock::new(&h, "leave").lock().await.unwrap();

    // a's bounded wait runs out: its registration is gone when it returns.
    let la = Lock::new(&a, "leave");
    let timed_out = tokio::spawn(async move { la.try_lock_for(Duration::from_millis(300)).await });
    until_registered(&srv, "leave", &a).await;
    assert!(within("a's wait", timed_out)
        .await
        .unwrap()
        .unwrap()
        .is_none());
    assert!(registration(&srv, "leave", &a).await.is_none());

    // b's acquire is cancelled: its release clears the registration.
    let lb = Lock::new(&b, "leave");
    let cancelled = tokio::spawn(async move { lb.lock().await.map(|_| ()) });
    until_registered(&srv, "leave", &b).await;
    let lc = Lock::new(&c, "leave");
    let waiter = tokio::spawn(async move { lc.lock().await });
    until_registered(&srv, "leave", &c).await;
    cancelled.abort();
    until("b's registration goes", || async {
        registration(&srv, "leave", &b).await.is_none()
    })
    .await;

    // The claim of a grant is 2 s with the default command timeout: c gets
    // the lock well before a claim given to a gone waiter would end.
    let released = Instant::now();
    g.unlock().await.unwrap();
    let gc = within("c's guard", waiter).await.unwrap().unwrap();
    assert!(
        released.elapsed() < Duration::from_millis(1000),
        "c waited {:?}",
        released.elapsed()
    );
    gc.unlock().await.unwrap();
}

/// A grant comes under a claim (twice the waiter's command timeout), which
/// the new holder extends to its lease in the background: the hold lives
/// on past the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_off_hold_outlives_its_claim() {
    let srv = server();
    let h = client(&srv.url()).await;
    let w = fast_client(&srv.url(), 100).await; // claim 200 ms
    let g = Lock::new(&h, "claim").lock().await.unwrap();
    srv.reset_stats().await;
    let lw = Lock::new(&w, "claim");
    let handle = lw.clone();
    let waiter = tokio::spawn(async move { lw.lock().await });
    until_registered(&srv, "claim", &w).await;
    // The waiter tries, subscribes and tries once more, then sleeps (a
    // release before its second try would let that try take the lock).
    until("the waiter sleeps", || async {
        evalsha_calls(&srv).await == 2
    })
    .await;
    g.unlock().await.unwrap();
    let gw = within("w's guard", waiter).await.unwrap().unwrap();
    let pttl: i64 = cmd(&srv, &["PTTL", "deadbolt:{claim}:lock"]).await;
    assert!((0..=200).contains(&pttl), "granted under the claim: {pttl}");
    // Past the claim (a bound of time, not a synchronisation: the claim
    // must have been extended by then).
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        handle.is_held().await.unwrap(),
        "the hold outlived its claim"
    );
    assert_eq!(gw.state(), deadbolt_core::LeaseState::Active);
    assert!(
        gw.valid_for() > Duration::from_secs(10),
        "{:?}",
        gw.valid_for()
    );
    let pttl: i64 = cmd(&srv, &["PTTL", "deadbolt:{claim}:lock"]).await;
    assert!(pttl > 10_000, "extended to the 30 s lease: {pttl}");
    gw.unlock().await.unwrap();
}

/// A client's registered waiter is cancelled while another waiter of the
/// same client waits: that waiter registers in its place once the
/// cancelled attempt's release cleared the registration (woken before
/// that, its try would find the old registration, and it would sleep
/// unregistered and unqueued for as long as the holder's lease while the
/// lock went to other clients), so the lock comes to it by the hand-offs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_registered_waiter_passes_the_registration_to_its_clients_next_waiter() {
    let srv = server();
    let h = client(&srv.url()).await;
    let a = client(&srv.url()).await;
    let b = client(&srv.url()).await;
    let g = Lock::new(&h, "pass-reg").lock().await.unwrap();

    let la = Lock::new(&a, "pass-reg");
    let first = tokio::spawn(async move { la.lock().await.map(|_| ()) });
    until_registered(&srv, "pass-reg", &a).await;
    let before = registration(&srv, "pass-reg", &a).await.unwrap();
    let la2 = Lock::new(&a, "pass-reg");
    let second = tokio::spawn(async move { la2.lock().await });
    until("a's second waiter sleeps", || async { a.waiters() == 2 }).await;
    let lb = Lock::new(&b, "pass-reg");
    let other = tokio::spawn(async move { lb.lock().await });
    until_registered(&srv, "pass-reg", &b).await;

    let cancelled = Instant::now();
    first.abort();
    let _ = first.await;
    until("a's second waiter registers", || async {
        registration(&srv, "pass-reg", &a)
            .await
            .is_some_and(|r| r != before)
    })
    .await;
    // Not at its sleep bound (the holder's 30 s lease), but at once.
    assert!(
        cancelled.elapsed() < Duration::from_secs(5),
        "a's second waiter registered {:?} after the cancel",
        cancelled.elapsed()
    );

    // The holder's lease is 30 s: the waiters get the lock by hand-offs,
    // long before it.
    let released = Instant::now();
    g.unlock().await.unwrap();
    let gb = within("b's guard", other).await.unwrap().unwrap();
    gb.unlock().await.unwrap();
    let ga = within("a's second waiter's guard", second)
        .await
        .unwrap()
        .unwrap();
    assert!(
        released.elapsed() < Duration::from_secs(5),
        "a's waiter got the lock {:?} after the release",
        released.elapsed()
    );
    ga.unlock().await.unwrap();
}

/// A grant is published once per token, and a published grant is never
/// handed to anyone else while it may still be taken. A release cannot
/// tell from Pub/Sub whether its grant was heard: PUBLISH (SPUBLISH on a
/// Cluster) counts only the subscribers of the server it runs on, while a
/// subscriber at a replica, or at a former master after a failover, hears
/// it through replication. Here the grant's only listener is at a replica
/// and the registered client is gone from the master: the release grants
/// to it all the same, the live waiter of another client takes the lock
/// once that claim ends (1 s), with a token above the grant's. The release
/// used to pass over a registration older than its claim when the master
/// counted no listener, and grant the same token to the next client: two
/// holders with one token (Cluster, after a coordinated failover).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_heard_only_through_a_replica_is_never_granted_again() {
    use futures::StreamExt as _;
    let srv = server();
    let replica = RedisServer::builder()
        .arg("replicaof", format!("127.0.0.1 {}", srv.port()))
        .arg("repl-diskless-sync-delay", "0")
        .start()
        .unwrap();
    until("the replica is in sync", || async {
        let info: String = cmd(&replica, &["INFO", "replication"]).await;
        info.contains("master_link_status:up")
    })
    .await;
    let name = "gone";
    let channel = format!("deadbolt:{{{name}}}:lock:ch");
    // Every grant published for the name, as a subscriber at the replica
    // hears it: (the attempt it names, token).
    let mut ps = replica.client().get_async_pubsub().await.unwrap();
    ps.subscribe(&channel).await.unwrap();
    let (heard_tx, mut heard) = tokio::sync::mpsc::unbounded_channel::<(String, u64)>();
    tokio::spawn(async move {
        let mut stream = ps.on_message();
        while let Some(m) = stream.next().await {
            let payload: String = m.get_payload().unwrap();
            if let Some(grant) = payload.strip_prefix("g:") {
                let mut words = grant.split(' ');
                let attempt = words.next().unwrap().to_string();
                let token = words.next().unwrap().parse().unwrap();
                let _ = heard_tx.send((attempt, token));
            }
        }
    });
    until("the replica's subscriber is in place", || async {
        let n: (String, i64) = cmd(&replica, &["PUBSUB", "NUMSUB", &channel]).await;
        n.1 == 1
    })
    .await;

    let h = client(&srv.url()).await;
    let held = Lock::new(&h, name).lock().await.unwrap();
    let (die, die_rx) = tokio::sync::oneshot::channel::<()>();
    let (id_tx, id_rx) = tokio::sync::oneshot::channel::<String>();
    let url = srv.url();
    let doomed = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            // A claim of 2 × 500 ms.
            let c = fast_client(&url, 500).await;
            id_tx.send(c.id().to_string()).unwrap();
            let l = Lock::new(&c, "gone");
            tokio::spawn(async move { l.lock().await });
            let _ = die_rx.await;
            std::mem::forget(c);
        });
        drop(rt);
    });
    let dead = id_rx.await.unwrap();
    let field = format!("d:{dead}");
    let key = format!("deadbolt:{{{name}}}:lock");
    until("the doomed waiter registers", || async {
        cmd::<Option<String>>(&srv, &["HGET", &key, &field])
            .await
            .is_some()
    })
    .await;
    die.send(()).unwrap();
    tokio::task::block_in_place(|| doomed.join()).unwrap();

    let live = client(&srv.url()).await;
    let l = Lock::new(&live, name);
    let waiter = tokio::spawn(async move { l.lock().await });
    until_registered(&srv, name, &live).await;
    let dead_reg: String = cmd(&srv, &["HGET", &key, &field]).await;
    let dead_attempt = dead_reg.split(' ').nth(1).unwrap().to_string();
    let at: u64 = dead_reg.rsplit(' ').next().unwrap().parse().unwrap();
    until("the dead registration is older than its claim", || async {
        let (s, us): (String, String) = cmd(&srv, &["TIME"]).await;
        let now_ms = s.parse::<u64>().unwrap() * 1000 + us.parse::<u64>().unwrap() / 1000;
        now_ms > at + 1000
    })
    .await;
    held.unlock().await.unwrap();
    let (to, granted) = within("the release's grant, heard at the replica", heard.recv())
        .await
        .unwrap();
    assert_eq!(
        to, dead_attempt,
        "the grant went to the client that waited longest"
    );
    let g = within("the live waiter", waiter).await.unwrap().unwrap();
    assert!(
        g.fencing_token() > granted,
        "the live waiter's token {} is above the grant's {granted}",
        g.fencing_token()
    );
    // Every grant the release published reached the replica before the
    // live waiter's lock (replication keeps the order); none came after
    // the first: one token, one grant.
    if let Ok(other) = heard.try_recv() {
        panic!("a second grant was published: {other:?} after ({to}, {granted})");
    }
    assert_eq!(
        cmd::<Option<String>>(&srv, &["HGET", &key, &field]).await,
        None,
        "the dead registration was used up by its grant"
    );
    g.unlock().await.unwrap();
}

/// A name held with a registered waiter of another client stays small on
/// the server: the hold hash keeps Redis's compact listpack encoding (every
/// value, the registration included, at most 64 bytes, for client names
/// up to 40 bytes), and the waiter listens on one channel, the lock's,
/// where its grant comes by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_waiter_keeps_the_hold_compact_on_one_channel() {
    let srv = server();
    let named = |url: &str| Client::builder(url).client_name("n".repeat(40)).build();
    let h = named(&srv.url()).await.unwrap();
    let a = named(&srv.url()).await.unwrap();
    let g = Lock::new(&h, "compact").lock().await.unwrap();
    let la = Lock::new(&a, "compact");
    let ta = tokio::spawn(async move { la.lock().await });
    until_registered(&srv, "compact", &a).await;
    let encoding: String = cmd(&srv, &["OBJECT", "ENCODING", "deadbolt:{compact}:lock"]).await;
    assert_eq!(encoding, "listpack");
    let channels: Vec<String> = cmd(&srv, &["PUBSUB", "CHANNELS", "deadbolt:{compact}*"]).await;
    assert_eq!(channels, ["deadbolt:{compact}:lock:ch"]);
    g.unlock().await.unwrap();
    let ga = within("a's guard", ta).await.unwrap().unwrap();
    let owner: String = cmd(&srv, &["HGET", "deadbolt:{compact}:lock", "o"]).await;
    assert!(owner.starts_with(a.id()), "the hold names a: {owner}");
    ga.unlock().await.unwrap();
}
