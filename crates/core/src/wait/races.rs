//! Unit tests of the waiting engine's ordering races (`wait/mod.rs`), on a real
//! [`Engine`] (a client against a throwaway redis-server): wake-ups before
//! and during a wait, wake-ups passed on by waiters that leave, and the
//! local hand-off claim states (deliver, cancel, abandon, leave).
//!
//! Wake-ups are sent with [`Engine::nudge`] (`wake_any(ch, 1, None)`, the
//! same path as a release message decoded to `Wake::one()`), or with a
//! real `PUBLISH` where the delivery path itself matters. "Not woken" is
//! asserted with a short deadline ([`soon`]); "woken" with a long one
//! ([`LONG`]) and a bound on how long the wait took.

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use deadbolt_testkit::support::{cmd, server};
use deadbolt_testkit::RedisServer;
use tokio::time::Instant;

use crate::wait::fixtures::{local_waiter, plain};
use crate::wait::local::{Delivered, LocalGrant, LocalNow, LocalWaiter};
use crate::wait::{Engine, Subscription, Waiter, Woke};
use crate::Client;

/// A wait that must end by a wake-up gets this long; ending by its
/// deadline fails the test.
const LONG: Duration = Duration::from_secs(10);
/// A woken wait returns at once; this bound only absorbs a slow machine.
const PROMPT: Duration = Duration::from_secs(2);

/// A deadline for a wait that must not be woken.
fn soon() -> Instant {
    Instant::now() + Duration::from_millis(150)
}

async fn engine() -> (RedisServer, Client, Arc<Engine>) {
    let srv = server();
    let client = Client::connect(&srv.url()).await.expect("connect");
    let engine = client.inner.engine.clone();
    (srv, client, engine)
}

fn with_local(class: &'static str, local: &Arc<LocalWaiter>) -> Waiter {
    Waiter {
        local: Some(local.clone()),
        ..plain(class)
    }
}

fn grant(hold_id: u64) -> LocalGrant {
    LocalGrant {
        token: 7,
        pttl: 30_000,
        sent_at: Instant::now(),
        chain: 0,
        hold_id,
    }
}

/// Subscribe and wait for the server's confirmation, so no wake-up of the
/// subscription's own (a reconnect's) can blur a test.
async fn joined(engine: &Arc<Engine>, channel: &str, waiter: Waiter) -> Subscription {
    let sub = engine.subscribe(channel, waiter);
    assert!(sub.confirmed(Instant::now() + LONG).await, "not confirmed");
    sub
}

/// Two plain waiters on "ch", in that order, each with a try in flight.
async fn two_trying(engine: &Arc<Engine>) -> (Subscription, Subscription) {
    let first = joined(engine, "ch", plain("")).await;
    let next = joined(engine, "ch", plain("")).await;
    first.begin_try();
    next.begin_try();
    (first, next)
}

/// The wait must end by a wake-up, promptly.
async fn woken(sub: &Subscription, what: &str) {
    let t0 = Instant::now();
    assert_eq!(
        sub.wait(Instant::now() + LONG).await,
        Woke::Notified,
        "{what}"
    );
    assert!(
        t0.elapsed() < PROMPT,
        "{what}: woken late ({:?})",
        t0.elapsed()
    );
}

/// The wait must run to its (short) deadline.
async fn not_woken(sub: &Subscription, what: &str) {
    assert_eq!(sub.wait(soon()).await, Woke::Deadline, "{what}");
}

/// A wake-up that lands after the try started (`begin_try`) and before the
/// waiter sleeps is kept: the wait returns at once.
#[tokio::test]
async fn a_wake_up_before_the_wait_is_not_lost() {
    let (_srv, _client, engine) = engine().await;
    let sub = joined(&engine, "ch", plain("")).await;
    sub.begin_try();
    engine.nudge("ch");
    woken(&sub, "nudged between begin_try and wait").await;
}

/// A real message, delivered by the subscriber connection between the
/// waiter's `begin_try` and its `wait`, wakes it. The message on a second
/// channel, published after it on the same connection, is the proof that
/// the first was delivered before the wait began.
#[tokio::test]
async fn a_message_delivered_between_begin_try_and_wait_wakes() {
    let (srv, _client, engine) = engine().await;
    let a = joined(&engine, "a", plain("")).await;
    let b = joined(&engine, "b", plain("")).await;
    a.begin_try();
    b.begin_try();
    let _: i64 = cmd(&srv, &["PUBLISH", "a", "1"]).await;
    let _: i64 = cmd(&srv, &["PUBLISH", "b", "1"]).await;
    woken(&b, "b's message").await;
    // a's message came first on the same connection: it is in a's slot.
    woken(&a, "a's message, delivered before a waited").await;
}

/// A wake-up while the waiter sleeps wakes it.
#[tokio::test]
async fn a_wake_up_during_the_wait_wakes() {
    let (_srv, _client, engine) = engine().await;
    let sub = joined(&engine, "ch", plain("")).await;
    sub.begin_try();
    let nudge = async {
        tokio::time::sleep(Duration::from_millis(30)).await;
        engine.nudge("ch");
    };
    let t0 = Instant::now();
    let (woke, ()) = tokio::join!(sub.wait(Instant::now() + LONG), nudge);
    assert_eq!(woke, Woke::Notified);
    assert!(t0.elapsed() < PROMPT);
}

/// A wake-up before `begin_try` is forgotten (the try sees what it was
/// about), and the `Notify` permit it left behind does not end the next
/// wait: it only makes the wait look at the flag once more.
#[tokio::test]
async fn a_wake_up_before_begin_try_is_forgotten_and_its_permit_is_harmless() {
    let (_srv, _client, engine) = engine().await;
    let sub = joined(&engine, "ch", plain("")).await;
    // Woken twice: the flag and a stored permit.
    engine.nudge("ch");
    sub.begin_try();
    not_woken(&sub, "stale permit").await;
}

/// A waiter that was woken and leaves without the lock (its wake-up not
/// yet seen) passes the wake-up to the next waiter of its class, skipping
/// a waiter of another class.
#[tokio::test]
async fn a_woken_waiter_that_leaves_passes_the_wake_up_to_its_class() {
    let (_srv, _client, engine) = engine().await;
    let first = joined(&engine, "ch", plain("x")).await;
    let other = joined(&engine, "ch", plain("y")).await;
    let next = joined(&engine, "ch", plain("x")).await;
    for s in [&first, &other, &next] {
        s.begin_try();
    }
    // Longest waiting first: `first` is woken.
    engine.nudge("ch");
    drop(first);
    woken(&next, "the next waiter of the class").await;
    not_woken(&other, "a waiter of another class").await;
}

/// A woken waiter that got the lock passes nothing on when it leaves.
#[tokio::test]
async fn a_woken_waiter_that_acquired_passes_nothing_on() {
    let (_srv, _client, engine) = engine().await;
    let (first, next) = two_trying(&engine).await;
    engine.nudge("ch");
    first.mark_acquired();
    drop(first);
    not_woken(&next, "after the woken waiter acquired").await;
}

/// A waiter cancelled in its wait after the wake-up reached it (its
/// `Notified` fired, the future was dropped before it looked) does not
/// swallow the wake-up: the next waiter gets it.
#[tokio::test]
async fn a_waiter_cancelled_in_its_wait_does_not_swallow_the_wake_up() {
    let (_srv, _client, engine) = engine().await;
    let (first, next) = two_trying(&engine).await;
    {
        let mut wait = pin!(first.wait(Instant::now() + LONG));
        assert!(futures::poll!(&mut wait).is_pending(), "asleep");
        // The release's wake-up goes to `first`, the longest waiting.
        engine.nudge("ch");
        // Cancelled before it is polled again.
    }
    drop(first);
    woken(&next, "the wake-up the cancelled waiter had").await;
}

/// A waiter that leaves without a wake-up wakes nobody, and wake-ups after
/// it left go to the waiters still there.
#[tokio::test]
async fn a_waiter_that_leaves_unwoken_wakes_nobody_and_is_skipped_after() {
    let (_srv, _client, engine) = engine().await;
    let (first, next) = two_trying(&engine).await;
    drop(first);
    not_woken(&next, "nobody was woken").await;
    next.begin_try();
    engine.nudge("ch");
    woken(&next, "the only waiter left").await;
}

/// A waiter that was woken and then leaves before its next try is
/// answered (out of time at the acquire loop's deadline check, or
/// cancelled before its request is written) passes the wake-up on
/// (`Slot::woken`). Before, `wait` had cleared the flag and the next waiter
/// slept to its own bound (issue 23; the loom test
/// `wait::loom::a_cancelled_waiter_passes_its_wake_up_on` explores its
/// schedules up to three preemptions).
#[tokio::test]
async fn a_waiter_leaving_after_its_wait_returned_passes_the_wake_up_on() {
    let (_srv, _client, engine) = engine().await;
    let (first, next) = two_trying(&engine).await;
    engine.nudge("ch");
    woken(&first, "the longest waiting").await;
    // Out of time before its try: the acquire loop drops the subscription.
    // The wake-up it took (Slot::woken) goes to the next waiter.
    drop(first);
    assert_eq!(next.wait(soon()).await, Woke::Notified);
}

/// A woken waiter whose try was answered (busy) used its wake-up: its
/// leaving passes nothing on.
#[tokio::test]
async fn a_waiter_whose_try_was_answered_passes_nothing_on() {
    let (_srv, _client, engine) = engine().await;
    let (first, next) = two_trying(&engine).await;
    engine.nudge("ch");
    woken(&first, "the longest waiting").await;
    first.begin_try();
    first.tried();
    drop(first);
    assert_eq!(next.wait(soon()).await, Woke::Deadline);
}

/// Claimed, then the waiter leaves: the delivery finds it gone (the
/// unlock releases the hold) and wakes nobody.
#[tokio::test]
async fn claim_then_leave_makes_deliver_return_left() {
    let (_srv, _client, engine) = engine().await;
    let local = local_waiter("a1");
    let sub = joined(&engine, "ch", with_local("", &local)).await;
    sub.begin_try();
    let claim = engine.claim("ch", "", 1, true).expect("claimed");
    assert!(local.leave().is_none(), "nothing handed over yet");
    assert_eq!(claim.deliver(grant(1)), Delivered::Left);
    not_woken(&sub, "a delivery to a waiter that left").await;
}

/// Claimed, then abandoned (the hand-off's outcome unknown) with the
/// waiter still there: it is woken to ask the server, its attempt in
/// doubt, and can be claimed again.
#[tokio::test]
async fn claim_then_abandon_wakes_the_waiter_in_doubt() {
    let (_srv, _client, engine) = engine().await;
    let local = local_waiter("a1");
    let sub = joined(&engine, "ch", with_local("", &local)).await;
    sub.begin_try();
    let claim = engine.claim("ch", "", 1, true).expect("claimed");
    assert!(!local.doubted());
    assert!(!claim.abandon(), "the waiter is still there");
    assert!(
        local.doubted(),
        "its attempt must be released if it ends without the lock"
    );
    woken(&sub, "abandoned claim").await;
    assert!(matches!(sub.local_wake(), LocalNow::Go), "asks the server");
    let again = engine.claim("ch", "", 1, true).expect("waiting again");
    again.cancel(false);
}

/// Abandoned after the waiter left: the caller must release the waiter's
/// attempt (true), and nobody is marked in doubt.
#[tokio::test]
async fn abandon_after_leave_returns_true() {
    let (_srv, _client, engine) = engine().await;
    let local = local_waiter("a1");
    let _sub = joined(&engine, "ch", with_local("", &local)).await;
    let claim = engine.claim("ch", "", 1, true).expect("claimed");
    assert!(local.leave().is_none());
    assert!(claim.abandon());
    assert!(!local.doubted());
}

/// A claim dropped unsettled is abandoned: the waiter is woken in doubt.
#[tokio::test]
async fn a_claim_dropped_unsettled_is_abandoned() {
    let (_srv, _client, engine) = engine().await;
    let local = local_waiter("a1");
    let sub = joined(&engine, "ch", with_local("", &local)).await;
    sub.begin_try();
    drop(engine.claim("ch", "", 1, true).expect("claimed"));
    assert!(local.doubted());
    woken(&sub, "dropped claim").await;
}

/// Delivered to a waiter still there: it is woken and finds the hold
/// (once); had it left before taking it, `leave` returns the hold for the
/// caller to release.
#[tokio::test]
async fn a_delivery_wakes_the_waiter_with_the_hold() {
    let (_srv, _client, engine) = engine().await;
    let local = local_waiter("a1");
    let sub = joined(&engine, "ch", with_local("", &local)).await;
    sub.begin_try();
    let claim = engine.claim("ch", "", 1, true).expect("claimed");
    assert_eq!(claim.deliver(grant(1)), Delivered::Yes);
    woken(&sub, "delivered").await;
    match sub.local_wake() {
        LocalNow::Passed(g) => assert_eq!((g.token, g.hold_id), (7, 1)),
        other => panic!("expected the hold, got {other:?}"),
    }
    assert!(matches!(sub.local_wake(), LocalNow::Go), "taken once");
    assert!(local.leave().is_none(), "taken: nothing to release");

    let local = local_waiter("a2");
    let _sub = joined(&engine, "ch2", with_local("", &local)).await;
    let claim = engine.claim("ch2", "", 2, true).expect("claimed");
    assert_eq!(claim.deliver(grant(2)), Delivered::Yes);
    let left = local.leave().expect("handed over, not taken");
    assert_eq!(left.hold_id, 2);
}

/// A claim in progress reports `Claimed` to the woken waiter; a waiter
/// that took the lock from the server meanwhile makes the delivery say
/// `Took` (the same hold: the unlock keeps it).
#[tokio::test]
async fn a_waiter_that_acquired_during_the_claim_makes_deliver_return_took() {
    let (_srv, _client, engine) = engine().await;
    let local = local_waiter("a1");
    let sub = joined(&engine, "ch", with_local("", &local)).await;
    let claim = engine.claim("ch", "", 1, true).expect("claimed");
    assert!(matches!(sub.local_wake(), LocalNow::Claimed));
    sub.mark_acquired();
    assert_eq!(claim.deliver(grant(1)), Delivered::Took);
}

/// Cancelled without a wake-up, the waiter sleeps on; with one, it tries.
/// Either way it can be claimed again.
#[tokio::test]
async fn a_cancelled_claim_wakes_only_when_asked() {
    let (_srv, _client, engine) = engine().await;
    let local = local_waiter("a1");
    let sub = joined(&engine, "ch", with_local("", &local)).await;
    sub.begin_try();
    engine
        .claim("ch", "", 1, true)
        .expect("claimed")
        .cancel(false);
    not_woken(&sub, "cancel(false)").await;
    engine
        .claim("ch", "", 1, true)
        .expect("claimed again")
        .cancel(true);
    woken(&sub, "cancel(true)").await;
    assert!(!local.doubted(), "a cancelled claim handed nothing over");
}

/// A claim takes the longest-waiting local waiter of the class, skipping
/// waiters of another class and waiters that cannot take a local hand-off,
/// and never a waiter claimed already. When none is left, the hold is
/// taken off the list in the same step, so a waiter that comes later asks
/// the server.
#[tokio::test]
async fn claims_pick_free_local_waiters_of_the_class_in_order() {
    let (_srv, _client, engine) = engine().await;
    let (wrong_class, first, second) = (local_waiter("w"), local_waiter("l1"), local_waiter("l2"));
    let _p = joined(&engine, "ch", plain("")).await;
    let _w = joined(&engine, "ch", with_local("write", &wrong_class)).await;
    let _a = joined(&engine, "ch", with_local("", &first)).await;
    let _b = joined(&engine, "ch", with_local("", &second)).await;
    let until = Instant::now() + LONG;
    engine.list_hold("ch", 9, "owner-a", until);
    assert_eq!(engine.held_elsewhere("ch", "owner-b"), Some(until));

    let c1 = engine.claim("ch", "", 9, true).expect("first");
    assert_eq!(c1.waiter().attempt, "l1");
    let c2 = engine.claim("ch", "", 9, true).expect("second");
    assert_eq!(c2.waiter().attempt, "l2");
    assert_eq!(
        engine.held_elsewhere("ch", "owner-b"),
        Some(until),
        "still listed"
    );
    assert!(engine.claim("ch", "", 9, true).is_none(), "none left");
    assert_eq!(
        engine.held_elsewhere("ch", "owner-b"),
        None,
        "unlisted with the failed claim"
    );
    c1.cancel(false);
    c2.cancel(false);
}

/// A waiter that takes a handed-over hold from the server as well (its try
/// replayed the same hold) takes the hand-off's listing off too.
#[tokio::test]
async fn acquiring_after_a_delivery_unlists_the_handed_over_hold() {
    let (_srv, _client, engine) = engine().await;
    let local = local_waiter("a1");
    let sub = joined(&engine, "ch", with_local("", &local)).await;
    engine.list_hold("ch", 5, "owner-a", Instant::now() + LONG);
    let claim = engine.claim("ch", "", 5, true).expect("claimed");
    assert_eq!(claim.deliver(grant(5)), Delivered::Yes);
    sub.mark_acquired();
    assert_eq!(engine.held_elsewhere("ch", "owner-b"), None);
}
