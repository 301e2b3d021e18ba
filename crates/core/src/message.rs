//! The one schema of the messages deadbolt's scripts publish on a
//! primitive's channels, read in one place.
//!
//! A script publishes a short text (built by the Lua library's one function
//! per kind); the waiting engine hands its bytes to the channel's
//! [`WakePolicy`](crate::WakePolicy), which reads them with
//! [`Message::parse`] and chooses what the message asks of its waiters
//! ([`WakePolicy::wake`](crate::WakePolicy::wake)). No policy parses text.
//!
//! | wire form | [`Message`] | sent by |
//! |---|---|---|
//! | `g:<attempt> <token> <ttl> <secret> [<claim>]`, one line per waiter | [`Granted`](Message::Granted) | a release that grants to registered attempts, one or several |
//! | `t:<attempt>` / `t:<attempt> <ms>` | [`Turn`](Message::Turn) | a queue whose head changed |
//! | `l:<term>` | [`Term`](Message::Term) | a holder that changes by terms, at a change |
//! | `f:<hold key> <token>` | [`Forced`](Message::Forced) | a force-unlock, on `<hold key>:watch` |
//! | `1` | [`TryOne`](Message::TryOne) | a plain release: one waiter per client tries |
//! | `*`, `*:<class>` | [`TryAll`](Message::TryAll) | every waiter (of that class) tries |
//!
//! docs/architecture.md ("The grant protocol") says which primitive sends
//! which.
//!
//! A message of a known kind with bad fields is [`Malformed`](Message::Malformed);
//! anything else is [`Other`](Message::Other). Anyone allowed to publish on
//! a channel can send anything, so parsing never panics.

use std::time::Duration;

/// One message on a primitive's channel, decoded ([`Message::parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Message {
    /// The primitive was handed to each named waiter (its attempt id) with
    /// its grant; lines with bad fields are left out. Never empty.
    Granted(Vec<(String, Grant)>),
    /// The named waiter is at the head of its queue: try now, or (with
    /// `after`) not before this long from now (the holder's lease ends then).
    Turn {
        /// The waiter's attempt id.
        name: String,
        /// Nothing to try before this long from now.
        after: Option<Duration>,
    },
    /// A holder that changes by terms changed; the new term.
    Term(u64),
    /// A force-unlock removed the hold of `key` with fencing token `token`.
    Forced {
        /// The hold's key.
        key: String,
        /// The removed hold's fencing token.
        token: u64,
    },
    /// A plain release: one waiter per client tries, one of them wins.
    TryOne,
    /// Every waiter of the client tries, or (with `class`) every waiter of
    /// that class (`"read"`, `"write"`).
    TryAll {
        /// Only waiters of this class.
        class: Option<String>,
    },
    /// A message of a known kind (the prefix letter: `g`, `t`, `l`, `*`,
    /// `f`) whose fields do not parse.
    Malformed(u8),
    /// Anything else.
    Other,
}

impl Message {
    /// Decode a message's bytes. Never panics.
    pub fn parse(payload: &[u8]) -> Message {
        match payload {
            b"1" => Message::TryOne,
            b"*" => Message::TryAll { class: None },
            [b'*', b':', rest @ ..] => match std::str::from_utf8(rest) {
                Ok(class) if !class.is_empty() => Message::TryAll {
                    class: Some(class.to_string()),
                },
                _ => Message::Malformed(b'*'),
            },
            [b'g', b':', ..] => granted(payload),
            [b't', b':', rest @ ..] => turn(rest),
            [b'l', b':', rest @ ..] => {
                parse_u64(rest).map_or(Message::Malformed(b'l'), Message::Term)
            }
            [b'f', b':', rest @ ..] => forced(rest),
            _ => Message::Other,
        }
    }

    /// The wire form of this message (what the Lua library's function for
    /// its kind publishes); `Malformed` and `Other` have none.
    pub fn encode(&self) -> Option<Vec<u8>> {
        Some(match self {
            Message::Granted(grants) => grants
                .iter()
                .map(|(name, g)| {
                    format!(
                        "g:{name} {} {} {} {}",
                        g.token, g.ttl_ms, g.secret, g.claim_ms
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
                .into_bytes(),
            Message::Turn { name, after: None } => format!("t:{name}").into_bytes(),
            Message::Turn {
                name,
                after: Some(d),
            } => format!("t:{name} {}", d.as_millis()).into_bytes(),
            Message::Term(term) => format!("l:{term}").into_bytes(),
            Message::Forced { key, token } => format!("f:{key} {token}").into_bytes(),
            Message::TryOne => b"1".to_vec(),
            Message::TryAll { class: None } => b"*".to_vec(),
            Message::TryAll { class: Some(c) } => format!("*:{c}").into_bytes(),
            Message::Malformed(_) | Message::Other => return None,
        })
    }
}

/// `g:<name> <grant fields>` lines; malformed lines are left out.
fn granted(payload: &[u8]) -> Message {
    let grants: Vec<(String, Grant)> = payload
        .split(|b| *b == b'\n')
        .filter_map(grant_line)
        .collect();
    if grants.is_empty() {
        Message::Malformed(b'g')
    } else {
        Message::Granted(grants)
    }
}

/// One `g:<name> <grant fields>` line ([`Grant::parse`] reads the fields).
fn grant_line(line: &[u8]) -> Option<(String, Grant)> {
    let rest = line.strip_prefix(b"g:")?;
    let i = rest.iter().position(|b| *b == b' ')?;
    let name = std::str::from_utf8(&rest[..i]).ok()?;
    let grant = Grant::parse(&rest[i + 1..])?;
    (!name.is_empty()).then(|| (name.to_string(), grant))
}

/// `t:<name>` or `t:<name> <ms>`.
fn turn(rest: &[u8]) -> Message {
    let (name, after) = match rest.iter().position(|b| *b == b' ') {
        Some(i) => match parse_u64(&rest[i + 1..]) {
            Some(ms) => (&rest[..i], Some(Duration::from_millis(ms))),
            None => return Message::Malformed(b't'),
        },
        None => (rest, None),
    };
    match std::str::from_utf8(name) {
        Ok(name) if !name.is_empty() => Message::Turn {
            name: name.to_string(),
            after,
        },
        _ => Message::Malformed(b't'),
    }
}

/// `f:<hold key> <token>` (the key may hold spaces: the token is the last field).
fn forced(rest: &[u8]) -> Message {
    let parsed = std::str::from_utf8(rest)
        .ok()
        .and_then(|p| p.rsplit_once(' '))
        .and_then(|(key, token)| Some((key.to_string(), token.parse::<u64>().ok()?)));
    match parsed {
        Some((key, token)) => Message::Forced { key, token },
        None => Message::Malformed(b'f'),
    }
}

/// A hand-off: the waiter holds the lock from this message on, if the
/// secret is the one of its current queue entry and the claim is still
/// good (the acquire loop checks both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The fencing token of the hold.
    pub token: u64,
    /// How long the hold is valid in milliseconds, counted from when the
    /// request that created the queue entry was sent (the waiter's only
    /// safe lower bound on when the grant was made): the claim, plus the
    /// time the entry had waited on the server clock when the grant was
    /// made, for scripts that record it; else the claim alone.
    pub ttl_ms: u64,
    /// The claim lease in milliseconds: the hold's TTL on the server from
    /// the grant on, until its taker extends it to its lease.
    pub claim_ms: u64,
    /// The secret stored with the queue entry the grant is for.
    pub secret: u64,
}

impl Grant {
    /// Decode `<token> <ttl ms> <secret>` (claim = ttl) or `<token> <ttl
    /// ms> <secret> <claim ms>` (the fields after a hand-off message's
    /// attempt id); `None` for anything else.
    pub fn parse(fields: &[u8]) -> Option<Grant> {
        let mut parts = fields.split(|b| *b == b' ');
        let token = parts.next().and_then(parse_u64)?;
        let ttl_ms = parts.next().and_then(parse_u64)?;
        let secret = parts.next().and_then(parse_u64)?;
        let claim_ms = match parts.next() {
            Some(c) => parse_u64(c)?.min(ttl_ms),
            None => ttl_ms,
        };
        parts.next().is_none().then_some(Grant {
            token,
            ttl_ms,
            claim_ms,
            secret,
        })
    }
}

/// Parse a decimal `u64` from message bytes (for policies); `None` for
/// anything else.
pub fn parse_u64(b: &[u8]) -> Option<u64> {
    std::str::from_utf8(b).ok()?.trim().parse().ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A grant with these fields (tests of the messages and their wake-ups).
    pub(crate) fn grant(token: u64, ttl_ms: u64, secret: u64, claim_ms: u64) -> Grant {
        Grant {
            token,
            ttl_ms,
            claim_ms,
            secret,
        }
    }

    #[test]
    fn every_kind_round_trips() {
        let all = [
            Message::Granted(vec![("a1".into(), grant(7, 350, 9, 300))]),
            Message::Granted(vec![
                ("a1".into(), grant(7, 350, 9, 300)),
                ("b2".into(), grant(0, 300, 4, 300)),
            ]),
            Message::Turn {
                name: "a1".into(),
                after: None,
            },
            Message::Turn {
                name: "a1".into(),
                after: Some(Duration::from_millis(25)),
            },
            Message::Term(12),
            Message::Forced {
                key: "ns:{a b}:lock".into(),
                token: 5,
            },
            Message::TryOne,
            Message::TryAll { class: None },
            Message::TryAll {
                class: Some("write".into()),
            },
        ];
        for m in all {
            let wire = m.encode().expect("a kind with a wire form");
            assert_eq!(
                Message::parse(&wire),
                m,
                "{}",
                String::from_utf8_lossy(&wire)
            );
        }
    }

    #[test]
    fn the_wire_forms_are_the_scripts() {
        assert_eq!(
            Message::parse(b"g:a1 7 350 9"),
            Message::Granted(vec![("a1".into(), grant(7, 350, 9, 350))])
        );
        assert_eq!(
            Message::parse(b"g:a1 7 350 9 300\ng:bad\ng:b2 0 300 4 300"),
            Message::Granted(vec![
                ("a1".into(), grant(7, 350, 9, 300)),
                ("b2".into(), grant(0, 300, 4, 300)),
            ])
        );
        assert_eq!(Message::parse(b"0"), Message::Other);
        assert_eq!(Message::parse(b"*:"), Message::Malformed(b'*'));
        assert_eq!(Message::parse(b"l:3"), Message::Term(3));
        assert_eq!(Message::parse(b"c:"), Message::Other);
        assert_eq!(Message::parse(b"rr"), Message::Other);
        assert_eq!(Message::parse(b""), Message::Other);
    }

    #[test]
    fn bad_fields_are_malformed_never_a_panic() {
        for (wire, kind) in [
            (&b"g:bad\ng:"[..], b'g'),
            (b"g:", b'g'),
            (b"t:", b't'),
            (b"t:a x", b't'),
            (b"l:", b'l'),
            (b"f:key", b'f'),
            (b"f:key x", b'f'),
        ] {
            assert_eq!(Message::parse(wire), Message::Malformed(kind));
        }
        for n in 0..=255u8 {
            let _ = Message::parse(&[b'g', b':', n, b' ', n]);
            let _ = Message::parse(&[b't', b':', n, 0xff]);
        }
    }
}
