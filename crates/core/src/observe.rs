//! One observer loop for every stream of changes (a holder that changes by
//! terms, a lock's holder): read, yield what changed, wait for a message or the
//! catch-up bound, read again.
//!
//! # Implementation notes
//! Every path of the loop that goes round again has a bound:
//! * a wait for a change ends on a message or after [`CATCH_UP`] (a
//!   missed message is caught up within that bound);
//! * an error (the first read's included, and permanent ones such as an
//!   invalid name or a key of another type) is yielded, and the next read
//!   waits until [`CATCH_UP`] after it: a consumer that loops over the
//!   stream sees at most one error per [`CATCH_UP`], never a tight loop;
//! * a read that finds nothing new goes back to waiting, which is bounded
//!   by the message or [`CATCH_UP`] as above; when that wait ended at once
//!   (a wait and a read that disagree), the loop pauses first, 10 ms and
//!   doubling up to [`CATCH_UP`], so no disagreement makes it spin.

use std::future::Future;
use std::time::Duration;

use futures::Stream;
use tokio::time::Instant;

use crate::error::Result;

/// How long an observer waits for a message before it reads anyway: the
/// bound on catching up with a missed message, and the least time between
/// two errors an observer yields.
pub const CATCH_UP: Duration = Duration::from_secs(1);

/// Where the loop is.
struct State<R, W, K> {
    read: R,
    wait: W,
    /// The key of what was yielded last; `None` until the first read.
    seen: Option<K>,
    /// Not before this instant: set after an error.
    pause_until: Option<Instant>,
}

/// A stream of what `read` returns, each time its key (`key`) changes:
/// the first read at once, then after every change that `wait` reports
/// (given the last key, it returns on a message or within [`CATCH_UP`],
/// saying whether it saw a change), reading anyway when it returns. Errors
/// are yielded, at most one per [`CATCH_UP`] (the module notes), and the
/// stream goes on.
///
/// # Cancel safety
/// Dropping the stream (or a pending `next()`) stops it; it records
/// nothing on the server as long as `read` and `wait` record nothing.
pub fn observe<T, K, R, RF, W, WF>(
    read: R,
    key: fn(&T) -> K,
    wait: W,
) -> impl Stream<Item = Result<T>> + Send + 'static
where
    T: Send + 'static,
    K: PartialEq + Clone + Send + Sync + 'static,
    R: Fn() -> RF + Send + Sync + 'static,
    RF: Future<Output = Result<T>> + Send,
    W: Fn(K) -> WF + Send + Sync + 'static,
    WF: Future<Output = Result<bool>> + Send,
{
    let state = State {
        read,
        wait,
        seen: None,
        pause_until: None,
    };
    futures::stream::unfold(state, move |mut st| async move {
        let item = step(&mut st, key).await;
        if item.is_err() {
            st.pause_until = Some(Instant::now() + CATCH_UP);
        }
        Some((item, st))
    })
}

/// One item: pause after an error, then read (first) or wait and read
/// until the key changes.
async fn step<T, K, R, RF, W, WF>(st: &mut State<R, W, K>, key: fn(&T) -> K) -> Result<T>
where
    K: PartialEq + Clone,
    R: Fn() -> RF,
    RF: Future<Output = Result<T>>,
    W: Fn(K) -> WF,
    WF: Future<Output = Result<bool>>,
{
    if let Some(at) = st.pause_until.take() {
        tokio::time::sleep_until(at).await;
    }
    // A lap that finds nothing new after a wait that ended at once (a
    // wait and a read that disagree, a condition already past) pauses,
    // 10 ms and doubling up to CATCH_UP, before it waits again.
    let mut idle = Duration::ZERO;
    loop {
        if let Some(seen) = st.seen.clone() {
            let started = Instant::now();
            (st.wait)(seen).await?;
            if started.elapsed() < QUICK {
                if !idle.is_zero() {
                    tokio::time::sleep(idle).await;
                }
                idle = (idle * 2).clamp(QUICK * 10, CATCH_UP);
            } else {
                idle = Duration::ZERO;
            }
        }
        let now = (st.read)().await?;
        let k = key(&now);
        let changed = st.seen.as_ref() != Some(&k);
        // The newest read is kept even when it compares equal: what the
        // key carries beyond equality (a lease's end) stays current.
        st.seen = Some(k);
        if changed {
            return Ok(now);
        }
    }
}

/// A wait that ends sooner than this found nothing to wait for.
const QUICK: Duration = Duration::from_millis(1);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use futures::StreamExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A read that always fails yields one error per CATCH_UP, not a
    /// tight loop (paused clock: the stream's sleeps are what advance it).
    #[tokio::test(start_paused = true)]
    async fn errors_are_paced_by_catch_up() {
        let reads = Arc::new(AtomicUsize::new(0));
        let r = reads.clone();
        let s = observe(
            move || {
                r.fetch_add(1, Ordering::SeqCst);
                async { Err::<u64, _>(Error::InvalidArgument("no".into())) }
            },
            |v: &u64| *v,
            |_| async { Ok(true) },
        );
        let started = Instant::now();
        let items: Vec<_> = s.take(4).collect().await;
        assert!(items.iter().all(Result::is_err));
        assert_eq!(reads.load(Ordering::SeqCst), 4);
        assert!(started.elapsed() >= CATCH_UP * 3);
    }

    /// Only changes are yielded; a wait that reports nothing new reads
    /// again without yielding.
    #[tokio::test(start_paused = true)]
    async fn only_changes_are_yielded() {
        let n = Arc::new(AtomicUsize::new(0));
        let r = n.clone();
        let s = observe(
            move || {
                let i = r.fetch_add(1, Ordering::SeqCst);
                async move { Ok::<u64, Error>([1, 1, 1, 2, 2, 3][i.min(5)]) }
            },
            |v: &u64| *v,
            |_| async {
                tokio::time::sleep(Duration::from_millis(10)).await;
                Ok(false)
            },
        );
        let items: Vec<u64> = s.take(3).map(|r| r.unwrap()).collect().await;
        assert_eq!(items, vec![1, 2, 3]);
    }

    /// A wait that says "changed" at once while the read finds the same
    /// (they disagree) does not make the loop spin: it backs off.
    #[tokio::test(start_paused = true)]
    async fn a_wait_that_ends_at_once_backs_off() {
        let reads = Arc::new(AtomicUsize::new(0));
        let r = reads.clone();
        let s = observe(
            move || {
                r.fetch_add(1, Ordering::SeqCst);
                async { Ok::<u64, Error>(7) }
            },
            |v: &u64| *v,
            |_| async { Ok(true) },
        );
        let mut s = Box::pin(s);
        assert_eq!(s.next().await.unwrap().unwrap(), 7);
        let _ = tokio::time::timeout(Duration::from_secs(10), s.next()).await;
        let n = reads.load(Ordering::SeqCst);
        assert!(n < 30, "{n} reads in 10 s");
    }
}
