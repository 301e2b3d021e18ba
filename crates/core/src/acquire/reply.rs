//! The acquire scripts' reply codec (the contract is on
//! [`AcquireSpec`](super::AcquireSpec)), and what a try or a hand-off by name got: a [`Granted`].

use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::hold::valid_until;
use crate::wait::Subscription;

/// A decoded acquire reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reply {
    Granted { token: u64, pttl: u64 },
    Busy { pttl: i64 },
    Queued { pttl: i64, fresh: bool, secret: u64 },
}

pub(super) fn decode(v: &[i64]) -> Result<Reply> {
    match v {
        [1, token, pttl, ..] => Ok(Reply::Granted {
            token: token.unsigned_abs(),
            pttl: pttl.unsigned_abs(),
        }),
        [0, pttl, ..] => Ok(Reply::Busy { pttl: *pttl }),
        [2, pttl, rest @ ..] => Ok(Reply::Queued {
            pttl: *pttl,
            fresh: rest.first() == Some(&1),
            secret: rest.get(1).map_or(0, |s| s.unsigned_abs()),
        }),
        _ => Err(Error::InvalidArgument(format!(
            "unexpected acquire reply {v:?}"
        ))),
    }
}

/// What the loop got: a grant, with the instant its validity counts from.
pub(super) struct Granted {
    pub(super) token: u64,
    pub(super) pttl: u64,
    pub(super) sent_at: Instant,
    /// A hand-off under a claim lease shorter than the lease asked for:
    /// extend to this many ms in the background.
    pub(super) extend_to: Option<u64>,
    /// Local hand-offs in a row while other clients waited (0 for a grant
    /// from the server).
    pub(super) chain: u32,
    /// A local hand-off's hold id, already listed.
    pub(super) hold_id: Option<u64>,
}

impl Granted {
    /// A grant in an acquire script's reply.
    pub(super) fn from_server(token: u64, pttl: u64, sent_at: Instant) -> Granted {
        Granted {
            token,
            pttl,
            sent_at,
            extend_to: None,
            chain: 0,
            hold_id: None,
        }
    }
}

/// For hand-offs by name: a message that names this attempt
/// carries the token, the claim lease and the entry's secret. The lock is
/// taken without a round trip when the grant is for the current queue
/// entry (`entry`: its secret, and an instant no later than when the
/// request that created it was sent) and its claim is still good counted
/// from then. Anything else (a late grant for a lost entry, a forgery) is
/// left to the next try. A claim whose validity is mostly gone is not
/// worth a guard that turns `Lost` at once: the next try (a pick-up call)
/// extends it to the real lease instead.
pub(super) fn take_named_grant(
    sub: &Subscription,
    entry: Option<(u64, Instant)>,
    ms: u64,
) -> Option<Granted> {
    let (g, (current, t0)) = (sub.take_grant()?, entry?);
    let (token, ttl) = (g.token, g.ttl_ms);
    let useful = Duration::from_millis(g.claim_ms / 3).max(Duration::from_millis(1));
    (g.secret == current && valid_until(t0, ttl) > Instant::now() + useful).then_some(Granted {
        token,
        pttl: ttl,
        sent_at: t0,
        extend_to: (ms > g.claim_ms).then_some(ms),
        chain: 0,
        hold_id: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_replies() {
        assert_eq!(
            decode(&[1, 7, 100]).unwrap(),
            Reply::Granted {
                token: 7,
                pttl: 100
            }
        );
        assert_eq!(decode(&[0, 50]).unwrap(), Reply::Busy { pttl: 50 });
        assert_eq!(
            decode(&[2, 50, 1, 9]).unwrap(),
            Reply::Queued {
                pttl: 50,
                fresh: true,
                secret: 9
            }
        );
        assert!(decode(&[]).is_err());
    }
}
