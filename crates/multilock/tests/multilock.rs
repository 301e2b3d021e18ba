//! MultiLock and Redlock against real redis-server processes.

use deadbolt_core::Acquire as _;
use deadbolt_core::HoldGuard as _;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadbolt_core::{Client, LeaseMode, LeaseState, Lockable, WaitMode};
use deadbolt_fair::FairLock;
use deadbolt_lock::Lock;
use deadbolt_multilock::{MultiLock, Redlock};
use deadbolt_rwlock::RwLock;
use deadbolt_testkit::client;
use deadbolt_testkit::support::{cmd, server, until, within, HANG};
use deadbolt_testkit::RedisServer;

async fn client_with(url: &str, wd: Duration, command: Duration) -> Client {
    deadbolt_testkit::client_with(url, |b| b.watchdog_timeout(wd).command_timeout(command)).await
}

fn mixed(c: &Client) -> MultiLock {
    MultiLock::new(vec![
        Arc::new(Lock::new(c, "a")) as Arc<dyn Lockable>,
        Arc::new(FairLock::new(c, "b")),
        Arc::new(RwLock::new(c, "c").write_lock()),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_kinds_exclude_each_part() {
    let srv = server();
    let c = client(&srv.url()).await;
    let other = client(&srv.url()).await;
    let m = mixed(&c);
    let g = m.lock().await.unwrap();
    assert_eq!(g.fencing_tokens().len(), 3);
    assert!(Lock::new(&other, "a").try_lock().await.unwrap().is_none());
    assert!(FairLock::new(&other, "b")
        .try_lock()
        .await
        .unwrap()
        .is_none());
    assert!(RwLock::new(&other, "c")
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .is_none());
    // Reentrant per handle (a clone is the same owner of every part).
    let again = m.clone().try_lock().await.unwrap().unwrap();
    again.unlock().await.unwrap();
    // Another multi-lock cannot get in, and leaves nothing of its own held.
    let m2 = mixed(&other);
    assert!(m2.try_lock().await.unwrap().is_none());
    // One part held elsewhere: the whole set waits for it.
    g.unlock().await.unwrap();
    let b = FairLock::new(&other, "b").lock().await.unwrap();
    let t = tokio::spawn(async move { m.lock().await });
    until("the multi-lock waits", || async { c.waiters() == 1 }).await;
    assert!(
        Lock::new(&other, "a")
            .try_lock()
            .await
            .unwrap()
            .is_some_and(|g| {
                drop(g);
                true
            }),
        "the waiting multi-lock holds no part while it waits"
    );
    b.unlock().await.unwrap();
    let g = within("multi-lock", t).await.unwrap().unwrap();
    assert_eq!(g.state(), LeaseState::Active);
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_sets_in_either_order_never_deadlock() {
    let srv = server();
    let cs = [client(&srv.url()).await, client(&srv.url()).await];
    let inside = Arc::new(AtomicI64::new(0));
    let mut tasks = Vec::new();
    for (i, names) in [["x", "y"], ["y", "x"]].iter().enumerate() {
        let m = MultiLock::of_locks(&cs[i], names);
        let inside = inside.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..200 {
                let g = m.lock().await.unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "both inside");
                inside.fetch_sub(1, Ordering::SeqCst);
                g.unlock().await.unwrap();
            }
        }));
    }
    for t in tasks {
        within("200 rounds each", t).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_leave_no_part_held() {
    let srv = server();
    let c = client(&srv.url()).await;
    let other = client(&srv.url()).await;
    for round in 0..40u64 {
        let blocker = if round % 2 == 0 {
            Some(
                Lock::new(&other, ["p", "q", "r"][(round % 3) as usize])
                    .lock()
                    .await
                    .unwrap(),
            )
        } else {
            None
        };
        let m = MultiLock::of_locks(&c, &["p", "q", "r"]);
        let cut = Duration::from_micros(200 * (round % 13));
        let _ = tokio::time::timeout(cut, m.lock()).await;
        drop(blocker);
    }
    assert!(c.releases_settled(HANG).await);
    assert!(other.releases_settled(HANG).await);
    let keys: Vec<String> = cmd(&srv, &["KEYS", "*"]).await;
    // Fencing counters are bookkeeping, not holds.
    assert!(keys.iter().all(|k| k.ends_with(":fence")), "left: {keys:?}");
}

async fn servers(n: usize) -> (Vec<RedisServer>, Vec<Client>) {
    let mut srvs = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..n {
        let s = server();
        clients
            .push(client_with(&s.url(), Duration::from_secs(3), Duration::from_millis(300)).await);
        srvs.push(s);
    }
    (srvs, clients)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_works_with_a_minority_down_and_fails_cleanly_without_a_majority() {
    let (mut srvs, clients) = servers(5).await;
    assert!(Redlock::new(&clients[..2], "r").is_err());
    let r = Redlock::new(&clients, "r").unwrap();
    srvs[0].stop();
    srvs[1].stop();
    let g = within("3 of 5", r.lock()).await.unwrap();
    assert!(g.valid_for() > Duration::ZERO);
    assert!(g.valid_for() <= Duration::from_secs(3));
    let r2 = Redlock::new(&clients, "r").unwrap();
    assert!(r2.try_lock().await.unwrap().is_none());
    g.unlock().await.unwrap();
    srvs[2].stop();
    assert!(r
        .try_lock_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    for c in &clients[3..] {
        assert!(c.releases_settled(HANG).await);
    }
    for s in &srvs[3..] {
        let n: i64 = cmd(s, &["EXISTS", "deadbolt:{r}:lock"]).await;
        assert_eq!(n, 0, "a minority grant was left behind");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_rides_out_one_paused_server_and_a_deleted_key() {
    let (srvs, clients) = servers(5).await;
    let r = Redlock::new(&clients, "p").unwrap();
    srvs[4].pause();
    let started = Instant::now();
    let g = within("majority with one server paused", r.lock())
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(g.valid_for() > Duration::from_secs(1));
    srvs[4].resume();
    // One server's key deleted behind the holder's back: a majority still
    // holds, through the next renewals.
    let _: i64 = cmd(&srvs[0], &["DEL", "deadbolt:{p}:lock"]).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(g.state(), LeaseState::Active);
    let r2 = Redlock::new(&clients, "p").unwrap();
    assert!(r2.try_lock().await.unwrap().is_none());
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_counts_exactly_across_four_sets_of_clients() {
    let mut srvs = Vec::new();
    for _ in 0..3 {
        srvs.push(server());
    }
    let counter = server();
    let _: () = cmd(&counter, &["SET", "n", "0"]).await;
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let mut clients = Vec::new();
        for s in &srvs {
            clients.push(client(&s.url()).await);
        }
        let r = Redlock::new(&clients, "count").unwrap();
        let url = counter.url();
        tasks.push(tokio::spawn(async move {
            let raw = redis::Client::open(url).unwrap();
            let mut c = raw.get_multiplexed_async_connection().await.unwrap();
            for _ in 0..25 {
                let g = r.lock().await.unwrap();
                let v: i64 = redis::cmd("GET")
                    .arg("n")
                    .query_async(&mut c)
                    .await
                    .unwrap();
                let _: () = redis::cmd("SET")
                    .arg("n")
                    .arg(v + 1)
                    .query_async(&mut c)
                    .await
                    .unwrap();
                g.unlock().await.unwrap();
            }
        }));
    }
    for t in tasks {
        within("redlock counting", t).await.unwrap();
    }
    let n: i64 = cmd(&counter, &["GET", "n"]).await;
    assert_eq!(n, 100);
}

/// Found while benchmarking: an unlock during a renewal round (the round
/// waiting on a paused server) found the holds away and said `NotHeld`
/// while every server still held the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_unlock_during_a_renewal_round_releases() {
    let (srvs, clients) = servers(3).await;
    let g = Redlock::new(&clients, "race")
        .unwrap()
        .lock()
        .await
        .unwrap();
    srvs[2].pause();
    // The first renewal round starts a third into the 3 s lease and waits
    // up to the 300 ms command timeout on the paused server: land in it.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = g.unlock().await;
    srvs[2].resume();
    assert!(!matches!(r, Err(deadbolt_core::Error::NotHeld)), "{r:?}");
    for s in &srvs[..2] {
        let n: i64 = cmd(s, &["EXISTS", "deadbolt:{race}:lock"]).await;
        assert_eq!(n, 0, "released on the servers that answer");
    }
}

/// A Redlock's `lost()` means what a `Hold`'s does: it resolves for a loss,
/// never for a release, not even when the released lease's end passes
/// (before, it resolved with `Released` at the unlock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_lost_never_resolves_for_a_release() {
    let (_srvs, clients) = servers(3).await;
    let lease = Duration::from_millis(400);
    let g = Redlock::new(&clients, "kept")
        .unwrap()
        .acquire_with(LeaseMode::Fixed(lease), WaitMode::Try)
        .await
        .unwrap()
        .expect("free");
    let lost = g.lost();
    g.unlock().await.unwrap();
    let r = tokio::time::timeout(lease * 2, lost).await;
    assert!(r.is_err(), "lost() resolved after a release: {r:?}");
}

/// Plain locks of one client are taken in one script (one round trip), all
/// or none: a busy part leaves the others untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_locks_of_one_client_are_taken_in_one_script() {
    let srv = server();
    let c = deadbolt_testkit::client_with(&srv.url(), |b| {
        b.preload(deadbolt_multilock::SCRIPTS)
            .preload(deadbolt_lock::SCRIPTS)
    })
    .await;
    let other = client(&srv.url()).await;
    let m = MultiLock::of_locks(&c, &["s1", "s2", "s3"]);
    srv.reset_stats().await;
    let g = m.lock().await.unwrap();
    let stats = srv.commandstats().await;
    assert_eq!(stats.get("evalsha").copied(), Some(1), "{stats:?}");
    let tokens = g.fencing_tokens();
    assert_eq!(tokens.len(), 3);
    // Re-entry through a clone (same owners) works in the one script too.
    let again = m.clone().try_lock().await.unwrap().unwrap();
    assert_eq!(again.fencing_tokens(), tokens);
    again.unlock().await.unwrap();
    assert!(Lock::new(&other, "s2").try_lock().await.unwrap().is_none());
    g.unlock().await.unwrap();
    // A busy part: nothing of the set is written.
    let s2 = Lock::new(&other, "s2").lock().await.unwrap();
    assert!(m.try_lock().await.unwrap().is_none());
    for name in ["s1", "s3"] {
        let n: i64 = cmd(&srv, &["EXISTS", &format!("deadbolt:{{{name}}}:lock")]).await;
        assert_eq!(n, 0, "{name} was taken by a refused set");
    }
    let t = tokio::spawn(async move { m.lock().await });
    s2.unlock().await.unwrap();
    let g = within("the set after s2's release", t)
        .await
        .unwrap()
        .unwrap();
    assert!(g.fencing_tokens().iter().zip(&tokens).all(|(a, b)| a > b));
    g.unlock().await.unwrap();
}

/// A stale hold of a part's own handle (a late grant; see the lock's test
/// of the same name) is not re-entered by the one-script path: the part is
/// taken afresh and is free for others after the unlock. A real re-entry
/// (the part's handle holds it) still counts on the hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_part_hold_of_the_own_handle_is_replaced_not_re_entered() {
    let srv = server();
    let c = client(&srv.url()).await;
    let a = Lock::new(&c, "stale-a");
    let b = Lock::new(&c, "stale-b");
    let key = a.key().unwrap().to_string();
    let owner = a.owner().to_string();
    let _: () = cmd(
        &srv,
        &["HSET", &key, "o", &owner, "t", "5", "n", "1", "a:gone", "1"],
    )
    .await;
    let _: () = cmd(&srv, &["PEXPIRE", &key, "30000"]).await;
    let parts = |a: &Lock, b: &Lock| {
        vec![
            Arc::new(a.clone()) as Arc<dyn Lockable>,
            Arc::new(b.clone()) as Arc<dyn Lockable>,
        ]
    };
    let m = MultiLock::new(parts(&a, &b));
    let g = m.try_lock().await.unwrap().expect("granted");
    assert!(g.fencing_tokens()[0] > 5, "re-entered the stale hold");
    g.unlock().await.unwrap();
    let other = Lock::new(&c, "stale-a").try_lock().await.unwrap();
    other
        .expect("free for another handle")
        .unlock()
        .await
        .unwrap();
    // The part's handle holds it: the multi-lock re-enters it.
    let ga = a.lock().await.unwrap();
    let g = m.try_lock().await.unwrap().expect("re-entered");
    assert_eq!(g.fencing_tokens()[0], ga.fencing_token());
    g.unlock().await.unwrap();
    assert!(Lock::new(&c, "stale-a").try_lock().await.unwrap().is_none());
    ga.unlock().await.unwrap();
}

/// One of three servers is dead (killed: connection refused). A waiting
/// Redlock must wait on the servers that answered "held", so the holder's
/// unlock hands it the lock within a few round trips; waiting on the dead
/// one (as a random pick did, two times in three) slept out the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_redlock_with_a_dead_server_wakes_on_the_unlock() {
    let (mut srvs, clients) = servers(3).await;
    srvs[0].stop();
    let mut delays = Vec::new();
    for i in 0..20 {
        let name = format!("dead{i}");
        let a = Redlock::new(&clients, &name).unwrap();
        let g = within("A takes it", a.lock()).await.unwrap();
        let b = Redlock::new(&clients, &name).unwrap();
        let before = [srvs[1].evalsha_calls().await, srvs[2].evalsha_calls().await];
        let waiter = tokio::spawn(async move {
            let g = b.lock().await;
            (Instant::now(), g)
        });
        // B has tried both live servers (and found them held): from here
        // on it waits, wherever it placed its wait.
        for (s, n) in srvs[1..].iter().zip(before) {
            until("B tries every live server", || async {
                s.evalsha_calls().await > n
            })
            .await;
        }
        let unlocked = Instant::now();
        g.unlock().await.unwrap();
        let (at, got) = within("B gets it", waiter).await.unwrap();
        let got = got.unwrap();
        delays.push(at.duration_since(unlocked));
        got.unlock().await.unwrap();
    }
    delays.sort();
    eprintln!(
        "unlock to the next holder, 20 tries: p50 {:?}, max {:?}",
        delays[delays.len() / 2],
        delays[delays.len() - 1]
    );
    // The lease is 3 s: a wait on the dead server would take about that.
    assert!(
        delays[delays.len() - 1] < Duration::from_secs(1),
        "delays {delays:?}"
    );
}
