//! The synchronisation the notifier is built of, behind one small shim:
//! std's atomics, parking_lot's `Mutex` and tokio's `Notify` in every
//! build, loom's (and a `Notify` of loom's parts) in the loom build.
//!
//! Invariant: every atomic, mutex and notification the wake-up protocol
//! goes through (a [`Slot`](super::slot::Slot)'s flags, hints and grant,
//! the channel table, a local waiter's state) is a type of this module, so
//! the loom tests (`wait/loom.rs`) run the real code, not a restatement.
//!
//! The loom build is selected by `--cfg deadbolt_loom` (not `--cfg loom`,
//! which switches tokio's own internals to loom and breaks them outside
//! their test suites); `scripts/test` runs it in a target directory of its
//! own. In that build only the loom tests may run.

pub(crate) use std::sync::atomic::Ordering;

#[cfg(not(deadbolt_loom))]
pub(crate) use std::sync::atomic::AtomicBool;

#[cfg(not(deadbolt_loom))]
pub(crate) use parking_lot::Mutex;

#[cfg(not(deadbolt_loom))]
pub(crate) use tokio::sync::Notify;

#[cfg(deadbolt_loom)]
pub(crate) use self::model::{AtomicBool, Mutex, Notify};

use tokio::time::Instant;

/// Sleep until `notify` fires (true) or `until` passes (false).
///
/// # Cancel safety
///
/// Cancel safe: dropped, it takes nothing (a notification it was picked
/// for is forwarded by tokio's `Notified` drop).
#[cfg(not(deadbolt_loom))]
pub(crate) async fn notified_or_until(notify: &Notify, until: Instant) -> bool {
    tokio::select! {
        () = notify.notified() => true,
        () = tokio::time::sleep_until(until) => false,
    }
}

/// Sleep until `notify` fires; in the loom build a deadline never passes,
/// so this returns true or never: a waiter that only its deadline would
/// end is stuck, which loom reports as a deadlock. That is how a lost
/// wake-up fails a loom test.
///
/// # Cancel safety
///
/// As in the normal build.
#[cfg(deadbolt_loom)]
pub(crate) async fn notified_or_until(notify: &Notify, _until: Instant) -> bool {
    notify.notified().await;
    true
}

#[cfg(deadbolt_loom)]
mod model {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::Ordering;
    use std::task::{Context, Poll, Waker};

    /// std's `AtomicBool` surface (the operations the notifier uses, all
    /// `SeqCst`) over a loom mutex, not loom's atomic: a mutex per flag
    /// gives exactly `SeqCst`'s single total order, while loom 0.7 models
    /// `SeqCst` as acquire/release and lets a concurrent store fall between
    /// the read and the write of a `swap` (tokio-rs/loom#254, #389):
    /// `Seat::wait`'s `pending.swap(false)` read `false` while a delivery's
    /// `store(true)` was lost all the same, a schedule no `SeqCst` atomic
    /// allows. The first loom run of these tests hit exactly that.
    #[derive(Debug)]
    pub(crate) struct AtomicBool(loom::sync::Mutex<bool>);

    impl AtomicBool {
        pub(crate) fn new(value: bool) -> Self {
            AtomicBool(loom::sync::Mutex::new(value))
        }

        fn with<T>(&self, order: Ordering, f: impl FnOnce(&mut bool) -> T) -> T {
            assert_eq!(order, Ordering::SeqCst, "modelled as SeqCst only");
            f(&mut self.0.lock().expect("flag"))
        }

        pub(crate) fn load(&self, order: Ordering) -> bool {
            self.with(order, |v| *v)
        }

        pub(crate) fn store(&self, value: bool, order: Ordering) {
            self.with(order, |v| *v = value);
        }

        pub(crate) fn swap(&self, value: bool, order: Ordering) -> bool {
            self.with(order, |v| std::mem::replace(v, value))
        }
    }

    /// parking_lot's `Mutex` surface over loom's.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
            self.0
                .lock()
                .expect("a loom test panicked holding the lock")
        }
    }

    /// tokio's documented `Notify` contract, of loom parts: `notify_one`
    /// wakes one registered `notified()` or stores one permit; a permit is
    /// taken by the first poll of a `notified()`; a notified `Notified`
    /// dropped unpolled forwards its notification.
    #[derive(Debug, Default)]
    pub(crate) struct Notify {
        state: loom::sync::Mutex<State>,
    }

    #[derive(Debug, Default)]
    struct State {
        permit: bool,
        next_id: u64,
        /// Registered `Notified` futures, first registered first.
        waiters: Vec<Waiting>,
    }

    #[derive(Debug)]
    struct Waiting {
        id: u64,
        waker: Waker,
        notified: bool,
    }

    impl State {
        fn notify_one(&mut self) {
            match self.waiters.iter_mut().find(|w| !w.notified) {
                Some(w) => {
                    w.notified = true;
                    w.waker.wake_by_ref();
                }
                None => self.permit = true,
            }
        }
    }

    impl Notify {
        pub(crate) fn new() -> Self {
            Notify::default()
        }

        /// Wake one registered waiter, or store the permit.
        pub(crate) fn notify_one(&self) {
            self.state.lock().expect("notify").notify_one();
        }

        /// A future that completes on a notification.
        pub(crate) fn notified(&self) -> Notified<'_> {
            Notified {
                notify: self,
                id: None,
            }
        }
    }

    /// [`Notify::notified`]'s future.
    #[derive(Debug)]
    pub(crate) struct Notified<'a> {
        notify: &'a Notify,
        id: Option<u64>,
    }

    impl Future for Notified<'_> {
        type Output = ();

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            let this = self.get_mut();
            let mut st = this.notify.state.lock().expect("notified");
            match this.id {
                None => {
                    if std::mem::take(&mut st.permit) {
                        return Poll::Ready(());
                    }
                    let id = st.next_id;
                    st.next_id += 1;
                    st.waiters.push(Waiting {
                        id,
                        waker: cx.waker().clone(),
                        notified: false,
                    });
                    this.id = Some(id);
                    Poll::Pending
                }
                Some(id) => {
                    let at = st
                        .waiters
                        .iter()
                        .position(|w| w.id == id)
                        .expect("registered");
                    if st.waiters[at].notified {
                        st.waiters.remove(at);
                        this.id = None;
                        return Poll::Ready(());
                    }
                    st.waiters[at].waker = cx.waker().clone();
                    Poll::Pending
                }
            }
        }
    }

    impl Drop for Notified<'_> {
        fn drop(&mut self) {
            let Some(id) = self.id.take() else { return };
            let mut st = self.notify.state.lock().expect("notified drop");
            if let Some(at) = st.waiters.iter().position(|w| w.id == id) {
                if st.waiters.remove(at).notified {
                    // Picked, never taken: forward it (as tokio does).
                    st.notify_one();
                }
            }
        }
    }
}
