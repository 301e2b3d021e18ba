//! How the inspect and force-unlock results read on a terminal.

use std::fmt;

use super::args::PrimitiveKind;
use super::state::{
    FairState, Hold, Inspection, Leader, PrimitiveState, QueueEntry, RwState, SemaphoreState,
    Unlocked,
};

/// A queued waiter's liveness in words: "liveness left 4.8 s", "expired
/// 1.2 s ago (will be skipped)".
pub(super) fn liveness(q: &QueueEntry) -> String {
    match (q.alive_for, q.expired_ago) {
        (Some(left), _) => format!("liveness left {:.1} s", left.as_secs_f64()),
        (None, Some(ago)) => {
            format!("expired {:.1} s ago (will be skipped)", ago.as_secs_f64())
        }
        (None, None) => "no liveness record (will be skipped)".to_string(),
    }
}

/// The line `<prefix><client name>` for `owner`, when its id carries a
/// client name ([`deadbolt_core::holder_name`]): who holds or waits, in the
/// words its process gave (`ClientBuilder::client_name`).
fn named(f: &mut fmt::Formatter<'_>, prefix: &str, owner: &str) -> fmt::Result {
    match deadbolt_core::holder_name(owner) {
        Some(name) => writeln!(f, "{prefix}{name}"),
        None => Ok(()),
    }
}

/// The line under an entry of a list: its client's name.
const ENTRY_CLIENT: &str = "         client ";

/// "1 writer", "2 writers".
fn writers(n: u64) -> String {
    format!("{n} writer{}", if n == 1 { "" } else { "s" })
}

/// "1 permit", "2 permits".
fn permits(n: u64) -> String {
    format!("{n} permit{}", if n == 1 { "" } else { "s" })
}

/// "… and 3 more" when `total` exceeds what was listed.
fn fmt_more(f: &mut fmt::Formatter<'_>, total: u64, listed: usize) -> fmt::Result {
    let listed = u64::try_from(listed).unwrap_or(u64::MAX);
    if total > listed {
        writeln!(f, "         … and {} more", total - listed)?;
    }
    Ok(())
}

impl SemaphoreState {
    /// The permits, the holders longest lease first, the waiters in order.
    fn fmt_lines(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.permits {
            Some(n) => writeln!(f, "  permits     {n}")?,
            None => writeln!(
                f,
                "  permits     never set (acquires wait until they are set)"
            )?,
        }
        if self.available < 0 {
            writeln!(
                f,
                "  available   {}  (the total was reduced below what holders hold)",
                self.available
            )?;
        } else {
            writeln!(f, "  available   {}", self.available)?;
        }
        writeln!(f, "  holders     {}", self.holds)?;
        for (i, h) in self.holders.iter().enumerate() {
            writeln!(
                f,
                "    {:>3}. {}  {}  lease left {:.1} s  attempt {}",
                i + 1,
                h.owner,
                permits(h.permits),
                h.lease_left.as_secs_f64(),
                h.attempt
            )?;
            named(f, ENTRY_CLIENT, &h.owner)?;
        }
        fmt_more(f, self.holds, self.holders.len())?;
        writeln!(f, "  waiting     {}", self.waiting)?;
        for (i, w) in self.waiters.iter().enumerate() {
            writeln!(
                f,
                "    {:>3}. {}  wants {}  attempt {}",
                i + 1,
                w.owner,
                permits(w.permits),
                w.attempt
            )?;
            named(f, ENTRY_CLIENT, &w.owner)?;
        }
        fmt_more(f, self.waiting, self.waiters.len())
    }
}

impl Hold {
    /// The hold lines: hold count, TTL, token.
    fn fmt_hold(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  hold count  {}", self.hold_count)?;
        match self.ttl {
            Some(ttl) => writeln!(f, "  ttl         {:.3} s", ttl.as_secs_f64())?,
            None => writeln!(f, "  ttl         none (the key never expires!)")?,
        }
        writeln!(f, "  token       {}", self.token)
    }

    /// A lock's or fair lock's state, holder and fencing counter.
    fn fmt_lines(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.owner {
            None => writeln!(f, "  state       free")?,
            Some(owner) => {
                writeln!(f, "  state       held")?;
                writeln!(f, "  owner       {owner}")?;
                named(f, "  client      ", owner)?;
                self.fmt_hold(f)?;
            }
        }
        self.fmt_fence(f)
    }

    fn fmt_fence(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  fence       {}  (fencing counter: last token handed out)",
            self.fence
        )
    }
}

impl FairState {
    /// The hold, then the queue in order.
    fn fmt_lines(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.hold.fmt_lines(f)?;
        writeln!(f, "  queued      {}", self.queued)?;
        for (i, q) in self.queue.iter().enumerate() {
            writeln!(
                f,
                "    {:>3}. {}  attempt {}  {}",
                i + 1,
                q.owner,
                q.attempt,
                liveness(q)
            )?;
            named(f, ENTRY_CLIENT, &q.owner)?;
        }
        fmt_more(f, self.queued, self.queue.len())
    }
}

/// An election's leader: owner, client name, term, lease left, info.
fn fmt_election(leader: Option<&Leader>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let Some(leader) = leader else {
        return writeln!(f, "  state       no leader");
    };
    writeln!(f, "  state       led")?;
    writeln!(f, "  leader      {}", leader.owner)?;
    named(f, "  client      ", &leader.owner)?;
    writeln!(f, "  term        {}", leader.term)?;
    writeln!(f, "  lease left  {:.3} s", leader.ttl.as_secs_f64())?;
    writeln!(f, "  info        {}", leader.info)
}

impl RwState {
    /// The writer, readers, waiting writers and fencing counter.
    fn fmt_lines(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match (self.writer.owner.is_some(), self.readers > 0) {
            (false, false) => "free",
            (true, false) => "held (writing)",
            (false, true) => "held (reading)",
            // The writer's own reads (a downgrade in progress).
            (true, true) => "held (writing and reading)",
        };
        writeln!(f, "  state       {state}")?;
        match &self.writer.owner {
            None => writeln!(f, "  writer      none")?,
            Some(owner) => {
                writeln!(f, "  writer      {owner}")?;
                named(f, "  client      ", owner)?;
                self.writer.fmt_hold(f)?;
            }
        }
        match self.longest_lease {
            Some(left) if self.readers > 0 => writeln!(
                f,
                "  readers     {}  (longest lease left {:.1} s)",
                self.readers,
                left.as_secs_f64()
            )?,
            _ => writeln!(f, "  readers     {}", self.readers)?,
        }
        for (i, r) in self.reader_list.iter().enumerate() {
            writeln!(
                f,
                "    {:>3}. {}  attempt {}  lease left {:.1} s",
                i + 1,
                r.owner,
                r.attempt,
                r.lease_left.as_secs_f64()
            )?;
            named(f, ENTRY_CLIENT, &r.owner)?;
        }
        fmt_more(f, self.readers, self.reader_list.len())?;
        writeln!(f, "  waiting     {}", writers(self.waiting_writers))?;
        self.writer.fmt_fence(f)
    }
}

impl fmt::Display for Inspection {
    /// A header naming the kind, the name and the key, then a line a field.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let title = self.state.kind().title();
        writeln!(f, "{title} {}  (key {})", self.name, self.key)?;
        match &self.state {
            PrimitiveState::Lock(hold) => hold.fmt_lines(f),
            PrimitiveState::FairLock(fair) => fair.fmt_lines(f),
            PrimitiveState::RwLock(rw) => rw.fmt_lines(f),
            PrimitiveState::Semaphore(sem) => sem.fmt_lines(f),
            PrimitiveState::Election(leader) => fmt_election(leader.as_ref(), f),
        }
    }
}

impl fmt::Display for Unlocked {
    /// "x: unlocked (the hold was deleted)"; for a read-write lock "x:
    /// unlocked (removed writer: yes, read holds: 2)"; "x: was not locked;
    /// nothing deleted".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.removed_anything() {
            return write!(f, "{}: was not locked; nothing deleted", self.name);
        }
        if self.kind == PrimitiveKind::Rw {
            write!(
                f,
                "{}: unlocked (removed writer: {}, read holds: {})",
                self.name,
                if self.hold { "yes" } else { "no" },
                self.read_holds
            )
        } else {
            write!(f, "{}: unlocked (the hold was deleted)", self.name)
        }
    }
}
