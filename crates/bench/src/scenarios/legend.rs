//! The legend under the table.
//!
//! Its entry type, the entries several scenarios share, and how the
//! entries of the scenarios shown are put together.

use std::fmt::Write as _;

use crate::scenarios::Scenario;
pub(crate) use crate::table::{Entry, Legend};

/// Declares legend entries, each `NAME = rank, "term", "text";` a constant
/// [`Entry`] (doc comments and visibility before the name).
macro_rules! entries {
    ($($(#[$doc:meta])* $vis:vis $name:ident = $rank:literal, $term:literal, $text:literal;)*) => {
        $(
            $(#[$doc])*
            $vis const $name: $crate::table::Entry = $crate::table::Entry {
                rank: $rank,
                term: $term,
                text: $text,
            };
        )*
    };
}
pub(crate) use entries;

entries! {
    /// The `N.N×` of every latency.
    pub(crate) X_PING = 0, "N.N×", "latency over the PING p50 of the same run (1× = one round \
        trip); lower is better";

    /// What the redisson rows are and are not.
    pub(crate) REDISSON = 5, "redisson(-fair)", "Redisson's RLock (RFairLock) algorithm: its \
        server-side scripts, Pub/Sub wait and watchdog, rewritten for this bench and driven by \
        its Rust client (no Netty, no JVM): the Redis-side cost is Redisson's, the client side \
        ours; its unlock's latch DEL (one per release, not waited for) is not in cmds/acq";

    /// What the lock-incr rows are.
    pub(crate) LOCK_INCR = 6, "lock-incr", "the Lock with a plain INCRBY of a counter under each \
        hold, on a redis-rs connection of its own, made at the start of the release: in \
        lock+unlock, not in acquire; the baseline of lock-guarded";

    /// What the lock-guarded rows are.
    pub(crate) LOCK_GUARDED = 7, "lock-guarded", "the Lock with the same increment as a guarded \
        write (guarded().incr_by: one EVALSHA that checks the hold and writes), made at the same \
        point; against lock-incr, the price of the check";

    /// The acquisition rate.
    pub(crate) ACQ_S = 10, "acq/s", "acquisitions per second, all workers together; higher is \
        better (see least/most)";

    /// The longest wait of the many-waiter scenarios.
    pub(crate) LONGEST_WAIT = 20, "longest wait", "the longest single wait for the lock (or a \
        permit); lower is better";

    /// Jain's fairness index.
    pub(crate) JAIN = 30, "Jain", "Jain's index of acquisitions per waiter: 1 = equal, 1/n = one \
        got all; higher is better";

    /// The least- over the most-served waiter.
    pub(crate) LEAST_MOST = 40, "least/most", "least-served waiter's acquisitions over the \
        most-served's: 0.00 = one starved; higher is better";

    /// Commands per acquisition.
    pub(crate) CMDS_ACQ = 50, "cmds/acq", "commands the clients sent per acquisition (not those \
        inside scripts; multi: to all its servers); lower is better";

    /// Redis CPU per acquisition.
    pub(crate) REDIS_CPU = 52, "Redis µs/acq", "Redis CPU per acquisition (per operation on \
        read-mostly): the server's own CPU time over the run when the bench started it (its \
        event loop and system calls included), else (--redis) the commandstats µs of the \
        commands the clients sent; lower is better";

    /// Client CPU per acquisition.
    pub(crate) CLIENT_CPU = 54, "client µs/acq", "the bench process's CPU time (rusage) over the \
        run per acquisition: the contender's clients plus the bench's PING task, the same for \
        every row; lower is better";

    /// The ceiling of a many-waiter row.
    pub(crate) CEILING = 56, "ceiling", "the most acq/s the row could make: holders at once (1, \
        or the permits) / (hold + hand-off floor), the floor measured at the start of the run (a \
        token relayed by PUBLISH between the clients: one command and one message a hop)";

    /// A row's share of its ceiling.
    pub(crate) OF_CEILING = 57, "of ceiling", "acq/s as a share of the ceiling; higher is better";

    /// An acquire and its release.
    pub(crate) LOCK_UNLOCK = 60, "lock+unlock", "one acquire and its release, back to back; \
        lower is better";

    /// Release to the next holder.
    pub(crate) HAND_OFF = 90, "hand-off", "from the start of the release to the waiter holding \
        the lock; lower is better";

    /// The PING floor of each run.
    pub(crate) PING_P50 = 1000, "PING p50", "the round-trip floor during that run (to server 1); \
        a high one means a loaded machine";
}

/// The columns of every throughput table besides the cost: the latencies'
/// multiples of PING, acq/s, cmds/acq and the run's PING.
pub(crate) const THROUGHPUT: &[&Entry] = &[&X_PING, &ACQ_S, &CMDS_ACQ, &PING_P50];

/// The cost columns, Redis and client CPU (`COST_HEADER`).
pub(crate) const COST: &[&Entry] = &[&REDIS_CPU, &CLIENT_CPU];

/// The columns of the many-waiter tables (`WAITERS_HEADER`) besides the
/// throughput and cost ones.
pub(crate) const WAITERS: &[&Entry] = &[&LONGEST_WAIT, &JAIN, &LEAST_MOST, &CEILING, &OF_CEILING];

/// What the columns mean and which way is better, for the scenarios shown:
/// the entries of every one of them, each once, by rank.
pub(crate) fn render<'a>(shown: impl IntoIterator<Item = &'a dyn Scenario>) -> String {
    let mut entries: Vec<&Entry> = Vec::new();
    for s in shown {
        for e in s.legend().iter().copied().flatten() {
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
