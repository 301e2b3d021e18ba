//! The unlock that hands the lock to a waiter of its own client
//! (within a budget while other clients wait), and the release that grants
//! it to the client that has waited longest.
mod common;

use deadbolt_core::Acquire as _;
use deadbolt_core::HoldGuard as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use deadbolt_core::{Client, Error};
use deadbolt_lock::Lock;

async fn client_budget(url: &str, budget: u32) -> Client {
    deadbolt_testkit::client_with(url, |b| b.local_handoffs(budget)).await
}

/// The ids of the clients queued on a lock, longest waiting first.
async fn queued(srv: &RedisServer, name: &str) -> Vec<String> {
    cmd(
        srv,
        &[
            "ZRANGE",
            &format!("deadbolt:{{{name}}}:lock:waiters"),
            "0",
            "-1",
        ],
    )
    .await
}

/// Two tasks of one client loop on a name while a task of another client
/// waits: the waiter gets the lock after at most the budget's local
/// hand-offs (plus the hold in progress and the ones that land while its
/// first try travels), and fencing tokens rise strictly through local
/// hand-offs and releases alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_hand_offs_stop_at_the_budget_while_another_client_waits() {
    const BUDGET: u32 = 4;
    let srv = server();
    let busy = client_budget(&srv.url(), BUDGET).await;
    // A fresh client per round, each a new client to wait.
    let mut others = Vec::new();
    for _ in 0..5 {
        others.push(client_budget(&srv.url(), BUDGET).await);
    }
    // Tokens in the order the holds were taken (pushed while held).
    let tokens: Arc<Mutex<Vec<(u64, bool)>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut loops = Vec::new();
    for _ in 0..2 {
        let (c, tokens, stop) = (busy.clone(), tokens.clone(), stop.clone());
        loops.push(tokio::spawn(async move {
            let lock = Lock::new(&c, "budget");
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let g = within("loop lock", lock.lock()).await.unwrap();
                let token = g.fencing_token();
                tokens.lock().unwrap().push((token, false));
                let state = g.state();
                if let Err(e) = g.unlock().await {
                    // Seen once in CI (NotHeld), never reproduced since: say
                    // what the hold was and what came before it.
                    let t = tokens.lock().unwrap();
                    let last: Vec<_> = t.iter().rev().take(12).collect();
                    panic!("unlock of token {token} (state {state:?}) failed: {e}; last holds, newest first: {last:?}");
                }
            }
        }));
    }
    // Let the loops hand the lock back and forth a while first.
    until("local hand-offs", || async {
        tokens.lock().unwrap().len() >= 50
    })
    .await;
    let mut worst = 0;
    for other in &others {
        let before = tokens.lock().unwrap().len();
        let g = within(
            "the other client's waiter",
            Lock::new(other, "budget").lock(),
        )
        .await
        .unwrap();
        {
            let mut t = tokens.lock().unwrap();
            worst = worst.max(t.len() - before);
            t.push((g.fencing_token(), true));
        }
        g.unlock().await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for l in loops {
        within("loops end", l).await.unwrap();
    }
    // The hold in progress when the waiter arrived, the hand-offs that
    // landed before its first try set the mark, then the budget; the
    // release then grants the lock to the waiter its client registered.
    // Only a waiter not yet registered (a fresh client still subscribing
    // on a loaded machine) loses that turn and waits one more budget:
    // bounded, never starved (without the budget the waiter starves and
    // this test hangs).
    eprintln!("worst: {worst} holds of the busy client (budget {BUDGET})");
    assert!(
        worst <= 3 * (BUDGET as usize + 1),
        "the waiter waited through {worst} holds of the busy client (budget {BUDGET})"
    );
    let t = tokens.lock().unwrap();
    assert!(t.iter().filter(|x| x.1).count() == 5);
    for w in t.windows(2) {
        assert!(w[0].0 < w[1].0, "token {} then {}", w[0].0, w[1].0);
    }
}

/// Local hand-off keeps inspection true: the key names the owner that
/// holds it now, under its own attempt and a larger token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_hand_off_shows_the_new_holder() {
    let srv = server();
    // Scripts loaded up front: a first call would add a NOSCRIPT round.
    let c = deadbolt_testkit::client_with(&srv.url(), |b| b.preload(deadbolt_lock::SCRIPTS)).await;
    let a = Lock::new(&c, "shown");
    let b = Lock::new(&c, "shown");
    let ga = a.lock().await.unwrap();
    let evals = evalsha_calls(&srv).await;
    let waiter = tokio::spawn({
        let b = b.clone();
        async move { b.lock().await }
    });
    // b's two tries: the first, and the one after its subscription.
    until("b waits", || async {
        c.waiters() == 1 && evalsha_calls(&srv).await == evals + 2
    })
    .await;
    let evals = evalsha_calls(&srv).await;
    let ta = ga.fencing_token();
    ga.unlock().await.unwrap();
    let gb = within("hand-off", waiter).await.unwrap().unwrap();
    assert!(gb.fencing_token() > ta);
    let owner: String = cmd(&srv, &["HGET", "deadbolt:{shown}:lock", "o"]).await;
    assert_eq!(owner, b.owner());
    // a's unlock handed the lock over in one script: no release, no
    // message, no acquire by b.
    assert_eq!(
        evalsha_calls(&srv).await - evals,
        1,
        "one hand-off call, no try"
    );
    // A third owner of the same client now sleeps at once, without a
    // try: b's hold is this client's and will be handed over or released.
    let c3 = Lock::new(&c, "shown");
    let third = tokio::spawn(async move { c3.lock().await.map(|g| g.fencing_token()) });
    until("third waits", || async { c.waiters() == 1 }).await;
    assert_eq!(
        evalsha_calls(&srv).await - evals,
        1,
        "the third owner sent no try"
    );
    let tb = gb.fencing_token();
    gb.unlock().await.unwrap();
    let t3 = within("second hand-off", third).await.unwrap().unwrap();
    assert!(t3 > tb);
    // The third guard was dropped: released in the background.
    assert!(c.releases_settled(HANG).await);
    // The second hand-off, then that release.
    assert_eq!(evalsha_calls(&srv).await - evals, 3);
    assert!(!exists(&srv, "deadbolt:{shown}:lock").await);
}

/// The client a release names died while it waited: another client's
/// waiter still gets the lock promptly after the release, not after the
/// holder's lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_client_that_died_does_not_swallow_the_release() {
    let srv = server();
    let proxy = FaultProxy::start(srv.addr()).await.unwrap();
    let holder = client(&srv.url()).await;
    let doomed = client(&proxy.url()).await;
    let alive = client(&srv.url()).await;
    let g = Lock::new(&holder, "named").lock().await.unwrap();
    let d = Lock::new(&doomed, "named");
    let dead_waiter = tokio::spawn(async move { d.lock().await.map(|_| ()) });
    until("the doomed client queues", || async {
        queued(&srv, "named").await.len() == 1
    })
    .await;
    let a = Lock::new(&alive, "named");
    let live_waiter = tokio::spawn(async move { a.lock().await });
    until("the live client queues", || async {
        queued(&srv, "named").await.len() == 2
    })
    .await;
    assert_eq!(
        queued(&srv, "named").await[0],
        doomed.id(),
        "doomed waited longest"
    );
    // The doomed client's connections go and cannot come back.
    proxy.set_refuse(true);
    proxy.reset_all();
    proxy.wait_for_connections(0).await;
    let released = Instant::now();
    g.unlock().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), live_waiter)
        .await
        .expect("the live waiter got the lock long before the 30 s lease")
        .unwrap()
        .unwrap();
    assert!(released.elapsed() < Duration::from_secs(5));
    got.unlock().await.unwrap();
    dead_waiter.abort();
}

/// How a waiter claimed by a local hand-off ends while the hand-off's
/// outcome is not known to its unlock.
#[derive(Debug, Clone, Copy)]
enum Uncertain {
    /// The waiter is cancelled, then the unlock is cancelled.
    WaiterThenUnlockCancelled,
    /// The waiter's bounded wait runs out while claimed, then the unlock is
    /// cancelled: the waiter wakes past its deadline.
    WaitEndsThenUnlockCancelled,
    /// The waiter's bounded wait runs out while claimed, and the unlock's
    /// reply comes too late (`Indeterminate`).
    WaitEndsThenUnlockIndeterminate,
}

/// A hand-off that lands while its unlock no longer waits for the answer
/// (cancelled mid-call, or `Indeterminate`) must not leave the lock held
/// by a waiter that left without it. Before the fix, each order left the
/// hold under the waiter's attempt until its lease ran out (found by the
/// churn test in tests/churn.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_whose_unlock_gave_up_is_not_left_with_a_waiter_that_left() {
    for case in [
        Uncertain::WaiterThenUnlockCancelled,
        Uncertain::WaitEndsThenUnlockCancelled,
        Uncertain::WaitEndsThenUnlockIndeterminate,
    ] {
        let srv = server();
        let proxy = FaultProxy::start(srv.addr()).await.expect("proxy");
        // Scripts loaded at connect: a first EVALSHA would meet NOSCRIPT
        // late, past the command timeout.
        let c = deadbolt_testkit::client_with(&proxy.url(), |b| {
            b.command_timeout(Duration::from_millis(400))
                .preload(deadbolt_lock::SCRIPTS)
        })
        .await;
        let name = "uncertain";
        let key = format!("deadbolt:{{{name}}}:lock");
        let (a, b) = (Lock::new(&c, name), Lock::new(&c, name));
        // A hand-off first, so the channel is subscribed and lingers: the
        // waiter below then sleeps at once on the listed hold, without a
        // try whose late reply would end its wait `Indeterminate`.
        let g = a.lock().await.unwrap();
        let first = tokio::spawn({
            let b = b.clone();
            async move { b.lock().await }
        });
        until("the first waiter sleeps", || async { c.waiters() == 1 }).await;
        g.unlock().await.unwrap();
        within("first waiter", first)
            .await
            .unwrap()
            .unwrap()
            .unlock()
            .await
            .unwrap();
        let g = a.lock().await.unwrap();
        let waiter = {
            let b = b.clone();
            tokio::spawn(async move {
                match case {
                    Uncertain::WaiterThenUnlockCancelled => b.lock().await.map(Some),
                    _ => b.try_lock_for(Duration::from_millis(300)).await,
                }
            })
        };
        until("the waiter sleeps", || async { c.waiters() == 1 }).await;
        // Replies come late from now on: the hand-off lands on the server,
        // its answer is on the way.
        proxy.set_reply_delay(Duration::from_secs(2));
        let unlock = tokio::spawn(g.unlock());
        until("the hand-off lands", || async {
            let o: Option<String> = cmd(&srv, &["HGET", &key, "o"]).await;
            o.as_deref() == Some(b.owner())
        })
        .await;
        match case {
            Uncertain::WaiterThenUnlockCancelled => {
                waiter.abort();
                let _ = waiter.await;
                unlock.abort();
                let _ = unlock.await;
            }
            Uncertain::WaitEndsThenUnlockCancelled => {
                tokio::time::sleep(Duration::from_millis(350)).await;
                unlock.abort();
                let _ = unlock.await;
                proxy.set_reply_delay(Duration::ZERO);
                let got = within("waiter", waiter).await.unwrap().unwrap();
                assert!(got.is_none(), "{case:?}: the wait ended");
            }
            Uncertain::WaitEndsThenUnlockIndeterminate => {
                let r = within("unlock", unlock).await.unwrap();
                assert!(matches!(r, Err(Error::Indeterminate(_))), "{case:?}: {r:?}");
                proxy.set_reply_delay(Duration::ZERO);
                let got = within("waiter", waiter).await.unwrap().unwrap();
                assert!(got.is_none(), "{case:?}: the wait ended");
            }
        }
        proxy.set_reply_delay(Duration::ZERO);
        assert!(c.releases_settled(HANG).await, "{case:?}: releases settle");
        let held: Vec<(String, String)> = cmd(&srv, &["HGETALL", &key]).await;
        assert!(
            held.is_empty(),
            "{case:?}: the lock is held by nobody's attempt: {held:?}"
        );
        // And another client takes it at once.
        let other = client(&srv.url()).await;
        let g = Lock::new(&other, name).try_lock().await.unwrap();
        assert!(g.is_some(), "{case:?}: free for another client");
        g.unwrap().unlock().await.unwrap();
        other.shutdown().await;
        c.shutdown().await;
    }
}
