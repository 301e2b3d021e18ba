//! An acquire's attempt: its id, its entry secret, and the guard that
//! hands its release to the background releaser when it may have left a
//! record on the server (in flight, `Indeterminate`, queued) and the
//! acquire ends without the hold, or is dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::time::Instant;

use super::reply::{decode, Reply};
use super::AcquireSpec;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::scripts::ScriptCall;
use crate::wait::local::LocalWaiter;

/// A fresh attempt id: 64 random bits in hex, then `s` and the attempt's
/// sequence number, which rises with every id this process draws (see
/// [`attempt_seq`](crate::hold::attempt_seq)). Short, because registrations carry it and stay in
/// Redis's compact encodings only while each value is at most 64 bytes.
pub(crate) fn new_attempt_id() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(1);
    let a: u64 = rand::random();
    let seq = SEQ.fetch_add(1, Ordering::SeqCst);
    format!("{a:016x}s{seq}")
}

/// The release-by-attempt call of `spec` for `attempt`.
pub(super) fn release_call(spec: &AcquireSpec, attempt: &str) -> ScriptCall {
    ScriptCall::new(
        spec.release,
        spec.release_keys.clone(),
        std::iter::once(attempt.to_string())
            .chain(spec.release_extra.iter().cloned())
            .collect(),
    )
}

/// A registration's secret: random, in 1 .. 2^32. It tells apart the
/// registrations of one attempt (a late grant of an earlier one is not
/// taken); a forger would need the attempt id too. At most ten digits, to
/// keep registrations short (see [`new_attempt_id`]).
pub(super) fn new_secret() -> u64 {
    rand::random_range(1..(1u64 << 32))
}

/// What the server may hold of an attempt. An attempt starts `Clear`;
/// sending a request makes it `InDoubt` until a reply says which way it
/// went (a queued attempt stays `Queued`: its entry is there or may be);
/// a definite "busy" clears it (the script dropped any queue entry);
/// `Won` and `Released` are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Standing {
    /// Nothing of the attempt is recorded.
    Clear,
    /// A request may have been recorded (in flight, `Indeterminate`, a
    /// raw error part way through a script).
    InDoubt,
    /// The server holds (or may hold) a queue entry for the attempt.
    Queued,
    /// The attempt holds the primitive: nothing of it is released here.
    Won,
    /// Its release ran: nothing is left.
    Released,
}

impl Standing {
    /// The standing while a request is in flight.
    fn sending(self) -> Standing {
        match self {
            Standing::Clear | Standing::InDoubt => Standing::InDoubt,
            other => other,
        }
    }

    /// The standing after `reply` to a request sent from `before`.
    fn after(self, before: Standing, reply: &Result<Reply>) -> Standing {
        match reply {
            Ok(Reply::Granted { .. }) => Standing::Won,
            // Nothing moves an attempt out of its end but a grant.
            _ if matches!(self, Standing::Won | Standing::Released) => self,
            // A definite "not granted" settles earlier doubts too; a
            // queue entry is dropped by the script when it answers busy.
            Ok(Reply::Busy { .. }) => Standing::Clear,
            Ok(Reply::Queued { .. }) => Standing::Queued,
            // It may have run. So may a script that failed with a raw error
            // of Redis: that can come from a command part way through it (a
            // later command refused: NOPERM, a value out of range), after it
            // queued the attempt, and a release may since have granted it.
            // Keep the doubt: the release by attempt finds nothing when
            // nothing was written.
            Err(Error::Indeterminate(_) | Error::Redis(_)) => self,
            // The scripts' own refusals come before their first write, and
            // a server that refused the call ran none of it: an earlier
            // request of the attempt may have been recorded all the same.
            Err(_) => before,
        }
    }
}

/// Hands the release of an attempt to the releaser if dropped while armed.
pub(super) struct Attempt<'a> {
    pub(super) client: &'a Client,
    pub(super) release: ScriptCall,
    /// The acquire records something on the server (false for condition
    /// waits, which only read: they are never released).
    pub(super) records: bool,
    /// What the server may hold of the attempt.
    pub(super) standing: Standing,
    /// Set when an unlock in this client may hand its hold to the attempt.
    pub(super) local: Option<Arc<LocalWaiter>>,
    /// The channel the attempt waits on (with `local`).
    pub(super) channel: Option<&'a str>,
    /// The attempt registers for grants beside unnamed wake-ups
    /// (`grants_by_name`): when it leaves queued, its client's next waiter
    /// is woken once the release cleared the registration (woken before,
    /// its try would find the registration still there and sleep
    /// unregistered).
    pub(super) wake_next_after_release: bool,
}

impl Attempt<'_> {
    /// A new attempt that has sent nothing yet.
    pub(super) fn new<'a>(
        client: &'a Client,
        release: ScriptCall,
        records: bool,
        local: Option<Arc<LocalWaiter>>,
        channel: Option<&'a str>,
        wake_next_after_release: bool,
    ) -> Attempt<'a> {
        Attempt {
            client,
            release,
            records,
            standing: Standing::Clear,
            local,
            channel,
            wake_next_after_release,
        }
    }

    /// Whether the attempt must be released if it ends now without the
    /// hold: a request of it may have been recorded, it is queued, or a
    /// local hand-off to it may have landed unseen (its unlock gave up on
    /// the answer: [`LocalWaiter::doubted`]).
    fn armed(&self) -> bool {
        self.records
            && match self.standing {
                Standing::InDoubt | Standing::Queued => true,
                Standing::Clear => self.local_doubted(),
                Standing::Won | Standing::Released => false,
            }
    }

    fn local_doubted(&self) -> bool {
        self.local.as_ref().is_some_and(|l| l.doubted())
    }

    /// The attempt holds the lock: nothing of it is ever released here.
    pub(super) fn win(&mut self) {
        self.standing = Standing::Won;
    }

    /// Leave the queue now (awaited), falling back to the releaser.
    pub(super) async fn give_up(&mut self) {
        if !self.armed() {
            return;
        }
        if self.client.run::<i64>(&self.release).await.is_ok() {
            self.standing = Standing::Released;
        }
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        // A hold handed over locally that the waiter did not take (it was
        // cancelled in between) is released like an armed attempt.
        let passed = self.local.as_ref().and_then(|l| l.leave());
        if let (Some(g), Some(channel)) = (passed, self.channel) {
            self.client.engine().unlist_hold(channel, g.hold_id);
        }
        let passed = passed.is_some();
        // A local hand-off claimed the waiter after its own release ran
        // (between its last wake-up and leaving the channel), and its unlock
        // gave up on the answer: the hold may be this attempt's now.
        let doubted_late = self.standing != Standing::Won && self.local_doubted();
        // Also during shutdown: the releaser runs until shutdown closes it,
        // so a waiter woken by shutdown leaves its queue.
        if self.armed() && self.standing == Standing::Queued && self.wake_next_after_release {
            if let Some(channel) = self.channel {
                let (client, channel) = (self.client.clone(), channel.to_string());
                self.client
                    .release_in_background_then(self.release.clone(), move || {
                        client.engine().nudge(&channel)
                    });
                return;
            }
        }
        if self.armed() || passed || doubted_late {
            self.client.release_in_background(self.release.clone());
        }
    }
}

/// One try. Returns when the request was sent and the decoded
/// reply or the error, keeping the attempt's standing right.
pub(super) async fn try_once(
    client: &Client,
    attempt: &mut Attempt<'_>,
    call: &ScriptCall,
) -> (Instant, Result<Reply>) {
    let before = attempt.standing;
    attempt.standing = before.sending();
    let sent_at = Instant::now();
    let r = match client.run::<Vec<i64>>(call).await {
        Ok(v) => decode(&v),
        Err(e) => Err(e),
    };
    attempt.standing = attempt.standing.after(before, &r);
    (sent_at, r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hold::attempt_seq;

    #[test]
    fn attempt_ids_are_unique_and_numbered_in_order() {
        let a = new_attempt_id();
        let b = new_attempt_id();
        assert_ne!(a, b);
        assert!(a.starts_with(|c: char| c.is_ascii_hexdigit()));
        assert!(attempt_seq(&a) > 0);
        assert!(attempt_seq(&b) > attempt_seq(&a));
        assert_eq!(attempt_seq("00ff"), 0);
    }

    #[test]
    fn a_reply_moves_the_standing_of_its_attempt() {
        use Standing::*;
        let granted = Ok(Reply::Granted { token: 1, pttl: 1 });
        let busy = Ok(Reply::Busy { pttl: 1 });
        let queued = Ok(Reply::Queued {
            pttl: 1,
            fresh: true,
            secret: 1,
        });
        let refused: Result<Reply> = Err(Error::InvalidArgument(String::new()));
        let unknown: Result<Reply> = Err(Error::Indeterminate(crate::error::Cause::msg("lost")));
        // (standing before the try, reply, standing after)
        let table = [
            (Clear, &granted, Won),
            (Clear, &busy, Clear),
            (Clear, &queued, Queued),
            (Clear, &unknown, InDoubt),
            (Clear, &refused, Clear),
            (InDoubt, &busy, Clear),
            (InDoubt, &refused, InDoubt),
            (Queued, &busy, Clear),
            (Queued, &unknown, Queued),
            (Queued, &refused, Queued),
            (Queued, &granted, Won),
            (Won, &busy, Won),
            (Released, &unknown, Released),
        ];
        for (before, reply, want) in table {
            let got = before.sending().after(before, reply);
            assert_eq!(got, want, "{before:?} then {reply:?}");
        }
    }

    #[test]
    fn secrets_stay_within_ten_digits() {
        for _ in 0..1000 {
            let s = new_secret();
            assert!(s > 0 && s < (1 << 32));
        }
    }
}
