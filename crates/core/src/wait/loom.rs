//! loom tests of the real notifier: the slots, the delivery of a release's
//! message ([`Shared::deliver`]), a waiter's tries, waits and leaving
//! ([`Seat`]) and the local hand-off's claim ([`Shared::claim`],
//! [`Claim`]), every interleaving up to the preemption bound (the command
//! is in `wait/sync.rs`).
//!
//! The server is one word under a mutex (who holds): Redis runs one script
//! at a time, so a try or a release is one step under it. A release's
//! message reaches the engine after its script, as a call of
//! [`Shared::deliver`]; a waiter runs the acquire loop's steps around the
//! notifier as `acquire/wait_loop.rs` does.
//!
//! The property: a waiter that must get the lock gets it. Under loom a wait
//! has no deadline, so a lost wake-up is a deadlock loom reports, with the
//! schedule that lost it.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use loom::future::block_on;
use loom::sync::Mutex;
use loom::thread;
use tokio::time::Instant;

use super::fixtures::{local_waiter, plain};
use super::local::{Claim, Delivered, LocalGrant, LocalNow};
use super::slot::{Seat, Shared, Waiter, Woke};

const CH: &str = "lock:ch";
/// The lock's word on the server: who holds it.
const FREE: usize = 0;
/// The first holder (or the unlock of a local hand-off).
const HOLDER: usize = 1;

/// Run `f` under loom, with a preemption bound of 3 unless
/// `LOOM_MAX_PREEMPTIONS` says otherwise.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(f);
}

/// The server's side of the lock: who holds it, changed by scripts that
/// run one at a time.
struct Server {
    holder: Mutex<usize>,
    shared: Arc<Shared>,
}

impl Server {
    fn new(shared: &Arc<Shared>) -> Arc<Server> {
        Arc::new(Server {
            holder: Mutex::new(HOLDER),
            shared: shared.clone(),
        })
    }

    /// Run a script: `f` changes the holder and says what it answered.
    fn script<T>(&self, f: impl FnOnce(&mut usize) -> T) -> T {
        f(&mut self.holder.lock().unwrap())
    }

    /// An acquire script: takes the lock when free (or finds it already
    /// this attempt's: a replay of a hand-off that landed).
    fn try_take(&self, me: usize) -> bool {
        self.script(|h| {
            if *h == FREE {
                *h = me;
            }
            *h == me
        })
    }

    /// A release script (`DEL` + `PUBLISH` when `who` holds it), then
    /// the engine's delivery of its message.
    fn release(&self, who: usize) {
        if self.hand_over(who, FREE) {
            self.shared.deliver(CH.as_bytes(), b"1");
        }
    }

    /// The local hand-off script: the lock passes from `from` to `to`
    /// in one step, with no message.
    fn hand_over(&self, from: usize, to: usize) -> bool {
        self.script(|h| {
            let mine = *h == from;
            if mine {
                *h = to;
            }
            mine
        })
    }

    fn holder(&self) -> usize {
        self.script(|h| *h)
    }
}

/// Far enough never to matter (and under loom a wait never times out).
fn far() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

/// The acquire loop's try (`Loop::try_again`): true when granted.
fn try_once(seat: &Seat, server: &Server, me: usize) -> bool {
    seat.begin_try();
    let got = server.try_take(me);
    seat.set_registered(false);
    if got {
        seat.mark_acquired();
    } else {
        seat.tried();
    }
    got
}

/// A waiter that waits for as long as it takes: tries, and sleeps
/// between tries until a wake-up (`sleep_until_woken`), until it holds
/// the lock, by its own try or by a local hand-off. A lost wake-up leaves
/// it asleep for ever (loom: deadlock).
fn acquire(seat: &Seat, server: &Server, me: usize) {
    loop {
        if try_once(seat, server, me) {
            return;
        }
        loop {
            match block_on(seat.wait(far())) {
                Woke::Notified => {}
                Woke::Hint(_) => continue,
                Woke::Deadline => unreachable!("a loom wait has no deadline"),
            }
            match seat.local_wake() {
                LocalNow::Go => break,
                LocalNow::Passed(_) => {
                    seat.mark_acquired();
                    return;
                }
                LocalNow::Claimed => continue,
            }
        }
    }
}

/// Poll `fut` once, with a waker that does nothing: the await point at
/// which an acquire future is dropped (cancelled).
fn poll_once<F: std::future::Future>(fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

/// A release racing a subscription: the holder's release (and its
/// message) may land before the waiter's slot is on the channel, between
/// its try and its sleep, or while it sleeps. Every way, the waiter gets
/// the lock: a message before the slot joined finds nobody, and the try
/// after joining sees the lock free; one after `begin_try` leaves the
/// flag set (or `notify_one`'s permit) for `wait` to see.
#[test]
fn a_release_racing_a_subscription_wakes_the_waiter() {
    model(|| {
        let (shared, _ops) = Shared::new();
        let server = Server::new(&shared);
        let holder = {
            let server = server.clone();
            thread::spawn(move || server.release(HOLDER))
        };
        let seat = shared.subscribe(CH, plain(""));
        acquire(&seat, &server, 2);
        assert_eq!(server.holder(), 2);
        drop(seat);
        holder.join().unwrap();
    });
}

/// A cancelled waiter passes its wake-up on. `C` joined first, so the
/// release's one wake-up goes to it; `C` is then dropped at an await
/// point: asleep in `wait` (its flag set or not yet), or right after
/// `wait` returned `Notified` and before its next try was answered (its
/// `woken` mark). Its seat's drop must hand the wake-up to `W`, or `W`
/// sleeps while the lock is free. (`C`'s try may also find the lock
/// free: it then holds it and its unlock releases it again.)
#[test]
fn a_cancelled_waiter_passes_its_wake_up_on() {
    model(|| {
        let (shared, _ops) = Shared::new();
        let server = Server::new(&shared);
        let c_seat = shared.subscribe(CH, plain(""));
        let w_seat = shared.subscribe(CH, plain(""));
        let holder = {
            let server = server.clone();
            thread::spawn(move || server.release(HOLDER))
        };
        let cancelled = {
            let server = server.clone();
            thread::spawn(move || {
                if try_once(&c_seat, &server, 3) {
                    drop(c_seat);
                    server.release(3);
                    return;
                }
                // Asleep (or woken already): the acquire future is
                // dropped here, its seat with it.
                let _ = poll_once(c_seat.wait(far()));
                drop(c_seat);
            })
        };
        acquire(&w_seat, &server, 2);
        assert_eq!(server.holder(), 2);
        drop(w_seat);
        holder.join().unwrap();
        cancelled.join().unwrap();
    });
}

/// A waiter cancelled with its try in flight: `C`'s request was sent
/// (`begin_try`, no answer yet) when its acquire future was dropped. The
/// seat goes at once; the request still lands on the server, before or
/// after the release, and when it took the lock the armed attempt's drop
/// has the releaser free it (after the seat's drop), which publishes
/// again. `W` must get the lock either way: from the release's wake-up
/// (passed on by `C`'s seat if it had reached `C`) or from the releaser's.
#[test]
fn a_waiter_cancelled_with_its_try_in_flight_loses_no_wake_up() {
    model(|| {
        let (shared, _ops) = Shared::new();
        let server = Server::new(&shared);
        let c_seat = shared.subscribe(CH, plain(""));
        let w_seat = shared.subscribe(CH, plain(""));
        let holder = {
            let server = server.clone();
            thread::spawn(move || server.release(HOLDER))
        };
        let cancelled = {
            let server = server.clone();
            thread::spawn(move || {
                c_seat.begin_try();
                let lands = {
                    let server = server.clone();
                    thread::spawn(move || server.try_take(3))
                };
                drop(c_seat);
                // The releaser: `Attempt::drop` handed it the armed attempt.
                if lands.join().unwrap() {
                    server.release(3);
                }
            })
        };
        acquire(&w_seat, &server, 2);
        assert_eq!(server.holder(), 2);
        drop(w_seat);
        holder.join().unwrap();
        cancelled.join().unwrap();
    });
}

/// A local hand-off racing a cancel. `U` holds the lock and unlocks: it
/// claims the local waiter `L` ([`Shared::claim`]), passes the lock to
/// `L`'s attempt on the server, and delivers the grant. `L` is cancelled
/// meanwhile (asleep, or woken): its seat drops, then its attempt leaves
/// ([`LocalWaiter::leave`]); a hold handed to it and not taken is
/// released by whoever finds it last (`U` on `Delivered::Left`, or `L`'s
/// leaving on a `Passed` it never took). `W`, a second waiter, must get
/// the lock in every schedule: neither a hold lost to the cancelled
/// waiter nor a wake-up lost with it.
#[test]
fn a_local_hand_off_racing_a_cancel_loses_neither_hold_nor_wake_up() {
    const L: usize = 3;
    const W: usize = 2;
    model(|| {
        let (shared, _ops) = Shared::new();
        let server = Server::new(&shared);
        let l_local = local_waiter("attempt:L");
        let l_seat = shared.subscribe(
            CH,
            Waiter {
                local: Some(l_local.clone()),
                ..plain("")
            },
        );
        let w_seat = shared.subscribe(CH, plain(""));
        let unlock = {
            let (server, shared) = (server.clone(), shared.clone());
            thread::spawn(move || unlock_locally(&shared, &server, L))
        };
        let cancelled = {
            let server = server.clone();
            thread::spawn(move || {
                // Its own try may find the hand-off landed (a replay).
                let mut took = try_once(&l_seat, &server, L);
                if !took && poll_once(l_seat.wait(far())).is_some() {
                    took = matches!(l_seat.local_wake(), LocalNow::Passed(_));
                    if took {
                        l_seat.mark_acquired();
                    }
                }
                // Cancelled here (unless it took the lock): the seat
                // drops, then the attempt (`Attempt::drop`), which
                // releases a hold handed over and not taken. A hold it
                // took is its guard's, whose drop releases it.
                drop(l_seat);
                if l_local.leave().is_some() || took {
                    server.release(L);
                }
            })
        };
        acquire(&w_seat, &server, W);
        assert_eq!(server.holder(), W);
        drop(w_seat);
        unlock.join().unwrap();
        cancelled.join().unwrap();
    });
}

/// `Hold::pass_locally` on the notifier's side: claim a local waiter of
/// the channel, hand the lock over, settle the claim; with no waiter to
/// claim, release as usual.
fn unlock_locally(shared: &Shared, server: &Server, to: usize) {
    let Some(claim) = shared.claim(CH, "", true, || {}) else {
        server.release(HOLDER);
        return;
    };
    assert!(server.hand_over(HOLDER, to), "the unlock held the lock");
    settle(claim, server, to);
}

fn settle(claim: Claim, server: &Server, to: usize) {
    let grant = LocalGrant {
        token: 2,
        pttl: 30_000,
        sent_at: Instant::now(),
        chain: 0,
        hold_id: 1,
    };
    match claim.deliver(grant) {
        Delivered::Yes | Delivered::Took => {}
        // The waiter left while the call ran: give its hold back.
        Delivered::Left => server.release(to),
    }
}
