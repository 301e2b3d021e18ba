//! The legend under the table.
//!
//! Its entry type, the entries several scenarios share, and how the
//! entries of the scenarios shown are put together.

use std::fmt::Write as _;

use crate::scenario::Scenario;
pub(crate) use crate::table::Entry;

/// The `N.N×` of every latency.
pub(crate) const X_PING: Entry = Entry {
    rank: 0,
    term: "N.N×",
    text: "latency over the PING p50 of the same run (1× = one round trip); lower is better",
};

/// What the redisson rows are and are not.
pub(crate) const REDISSON: Entry = Entry {
    rank: 5,
    term: "redisson(-fair)",
    text: "Redisson's RLock (RFairLock) algorithm: its server-side scripts, Pub/Sub wait and \
           watchdog, rewritten for this bench and driven by its Rust client (no Netty, no JVM): \
           the Redis-side cost is Redisson's, the client side ours; its unlock's latch DEL (one \
           per release, not waited for) is not in cmds/acq",
};

/// What the lock-incr rows are.
pub(crate) const LOCK_INCR: Entry = Entry {
    rank: 6,
    term: "lock-incr",
    text: "the Lock with a plain INCRBY of a counter under each hold, on a redis-rs connection of \
           its own, made at the start of the release: in lock+unlock, not in acquire; the \
           baseline of lock-guarded",
};

/// What the lock-guarded rows are.
pub(crate) const LOCK_GUARDED: Entry = Entry {
    rank: 7,
    term: "lock-guarded",
    text: "the Lock with the same increment as a guarded write (guarded().incr_by: one EVALSHA \
           that checks the hold and writes), made at the same point; against lock-incr, the price \
           of the check",
};

/// The acquisition rate.
pub(crate) const ACQ_S: Entry = Entry {
    rank: 10,
    term: "acq/s",
    text: "acquisitions per second, all workers together; higher is better (see least/most)",
};

/// The longest wait of the many-waiter scenarios.
pub(crate) const LONGEST_WAIT: Entry = Entry {
    rank: 20,
    term: "longest wait",
    text: "the longest single wait for the lock (or a permit); lower is better",
};

/// Jain's fairness index.
pub(crate) const JAIN: Entry = Entry {
    rank: 30,
    term: "Jain",
    text: "Jain's index of acquisitions per waiter: 1 = equal, 1/n = one got all; higher is better",
};

/// The least- over the most-served waiter.
pub(crate) const LEAST_MOST: Entry = Entry {
    rank: 40,
    term: "least/most",
    text: "least-served waiter's acquisitions over the most-served's: 0.00 = one starved; higher \
           is better",
};

/// Commands per acquisition.
pub(crate) const CMDS_ACQ: Entry = Entry {
    rank: 50,
    term: "cmds/acq",
    text: "commands the clients sent per acquisition (not those inside scripts; multi: to all \
           its servers); lower is better",
};

/// Redis CPU per acquisition.
pub(crate) const REDIS_CPU: Entry = Entry {
    rank: 52,
    term: "Redis µs/acq",
    text: "Redis CPU per acquisition (per operation on read-mostly): the server's own CPU time \
           over the run when the bench started it (its event loop and system calls included), \
           else (--redis) the commandstats µs of the commands the clients sent; lower is better",
};

/// Client CPU per acquisition.
pub(crate) const CLIENT_CPU: Entry = Entry {
    rank: 54,
    term: "client µs/acq",
    text: "the bench process's CPU time (rusage) over the run per acquisition: the contender's \
           clients plus the bench's PING task, the same for every row; lower is better",
};

/// The ceiling of a many-waiter row.
pub(crate) const CEILING: Entry = Entry {
    rank: 56,
    term: "ceiling",
    text: "the most acq/s the row could make: holders at once (1, or the permits) / (hold + \
           hand-off floor), the floor measured at the start of the run (a token relayed by \
           PUBLISH between the clients: one command and one message a hop)",
};

/// A row's share of its ceiling.
pub(crate) const OF_CEILING: Entry = Entry {
    rank: 57,
    term: "of ceiling",
    text: "acq/s as a share of the ceiling; higher is better",
};

/// An acquire and its release.
pub(crate) const LOCK_UNLOCK: Entry = Entry {
    rank: 60,
    term: "lock+unlock",
    text: "one acquire and its release, back to back; lower is better",
};

/// Release to the next holder.
pub(crate) const HAND_OFF: Entry = Entry {
    rank: 90,
    term: "hand-off",
    text: "from the start of the release to the waiter holding the lock; lower is better",
};

/// The PING floor of each run.
pub(crate) const PING_P50: Entry = Entry {
    rank: 1000,
    term: "PING p50",
    text: "the round-trip floor during that run (to server 1); a high one means a loaded machine",
};

/// What the columns mean and which way is better, for the scenarios shown:
/// the entries of every one of them, each once, by rank.
pub(crate) fn render<'a>(shown: impl IntoIterator<Item = &'a dyn Scenario>) -> String {
    let mut entries: Vec<&Entry> = Vec::new();
    for s in shown {
        for e in s.legend() {
            if !entries.iter().any(|have| have.term == e.term) {
                entries.push(e);
            }
        }
    }
    if entries.is_empty() {
        return String::new();
    }
    entries.sort_by_key(|e| e.rank);
    let width = entries
        .iter()
        .map(|e| e.term.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::from("\nHow to read it:\n");
    for e in entries {
        let pad = width - e.term.chars().count();
        let _ = writeln!(out, "  {}{}  {}", e.term, " ".repeat(pad), e.text);
    }
    out
}
