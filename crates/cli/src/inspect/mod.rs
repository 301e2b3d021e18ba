//! `deadbolt inspect` (lock, fair lock, read-write lock, semaphore,
//! election) and `deadbolt force-unlock` (the three locks); on one server,
//! a Redis Cluster or a master behind Sentinel (`--topology`).
//!
//! `args.rs` says what is asked, `read.rs` reads it from Redis (and
//! force-unlocks), `state.rs` holds what was found, `print.rs` prints it.

/// The Redis used when `--redis` is not given.
pub(crate) const DEFAULT_REDIS: &str = "redis://127.0.0.1:6379/";

mod args;
mod print;
mod read;
mod state;

pub use args::{ForceUnlockArgs, InspectArgs, PrimitiveKind};
pub(crate) use read::on_checked_key;
pub use read::{force_unlock, inspect};
pub use state::{
    FairState, Hold, Inspection, Leader, PermitHolder, PermitWaiter, PrimitiveState, QueueEntry,
    ReaderEntry, RwState, SemaphoreState, Unlocked, QUEUE_LISTED,
};

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::args::*;
    use super::print::*;
    use super::read::*;
    use super::state::*;
    use super::*;
    use crate::target::Topology;

    fn entry(liveness_ms: i64) -> QueueEntry {
        QueueEntry::from_reply(("a1".into(), "c:1".into(), 30_000, liveness_ms))
    }

    #[test]
    fn liveness_says_which_way() {
        assert_eq!(liveness(&entry(4_800)), "liveness left 4.8 s");
        assert_eq!(liveness(&entry(0)), "liveness left 0.0 s");
        assert_eq!(
            liveness(&entry(-1_200)),
            "expired 1.2 s ago (will be skipped)"
        );
        assert_eq!(liveness(&entry(-1)), "no liveness record (will be skipped)");
        assert_eq!(entry(-1).lease, Some(Duration::from_secs(30)));
    }

    fn shown(name: &str, key: &str, state: PrimitiveState) -> String {
        Inspection {
            name: name.into(),
            key: key.into(),
            state,
        }
        .to_string()
    }

    #[test]
    fn header_names_the_kind_and_only_a_fair_lock_shows_a_queue() {
        let hold = Hold {
            fence: 7,
            ..Hold::default()
        };
        let lock = shown("x", "ns:{x}:k", PrimitiveState::Lock(hold.clone()));
        assert!(lock.starts_with("lock x  (key ns:{x}:k)\n"), "{lock}");
        assert!(!lock.contains("queued"), "{lock}");
        let queue = vec![entry(2_000), entry(-3_000)];
        let fair = shown(
            "x",
            "ns:{x}:k",
            PrimitiveState::FairLock(FairState {
                hold,
                queued: u64::try_from(queue.len()).unwrap(),
                queue,
            }),
        );
        assert!(fair.starts_with("fair lock x  (key ns:{x}:k)\n"), "{fair}");
        assert!(fair.contains("  queued      2\n"), "{fair}");
        assert!(
            fair.contains("  1. c:1  attempt a1  liveness left 2.0 s\n"),
            "{fair}"
        );
        assert!(
            fair.contains("  2. c:1  attempt a1  expired 3.0 s ago (will be skipped)\n"),
            "{fair}"
        );
    }

    fn rw_state(owner: Option<&str>, readers: &[(&str, u64)], count: u64) -> String {
        let writer = Hold {
            owner: owner.map(str::to_string),
            hold_count: u64::from(owner.is_some()),
            token: if owner.is_some() { 3 } else { 0 },
            ttl: owner.map(|_| Duration::from_millis(29_500)),
            fence: 3,
        };
        let rw = RwState {
            writer,
            readers: count,
            longest_lease: readers.first().map(|(_, ms)| Duration::from_millis(*ms)),
            reader_list: readers
                .iter()
                .enumerate()
                .map(|(i, (o, ms))| ReaderEntry {
                    attempt: format!("a{i}"),
                    owner: (*o).to_string(),
                    lease_left: Duration::from_millis(*ms),
                })
                .collect(),
            waiting_writers: 1,
        };
        shown("cat", "ns:{cat}:rw", PrimitiveState::RwLock(rw))
    }

    fn sem_state(sem: SemaphoreState) -> String {
        shown("pool", "ns:{pool}:sem", PrimitiveState::Semaphore(sem))
    }

    #[test]
    fn a_semaphore_shows_its_permits_holders_and_waiters() {
        let never = sem_state(SemaphoreState {
            permits: None,
            available: 0,
            holds: 0,
            waiting: 0,
            holders: Vec::new(),
            waiters: Vec::new(),
        });
        assert_eq!(
            never,
            "semaphore pool  (key ns:{pool}:sem)\n  permits     never set (acquires wait until \
             they are set)\n  available   0\n  holders     0\n  waiting     0\n"
        );
        let holder = |owner: &str, n, ms| PermitHolder {
            attempt: format!("h{n}"),
            owner: owner.into(),
            permits: n,
            lease_left: Duration::from_millis(ms),
        };
        let waiter = |owner: &str, n| PermitWaiter {
            attempt: format!("w{n}"),
            owner: owner.into(),
            permits: n,
        };
        let busy = sem_state(SemaphoreState {
            permits: Some(4),
            available: 1,
            holds: 3,
            waiting: 2,
            holders: vec![holder("c:1", 2, 39_000), holder("c:2", 1, 12_500)],
            waiters: vec![waiter("c:3", 2), waiter("c:4", 1)],
        });
        assert_eq!(
            busy,
            "semaphore pool  (key ns:{pool}:sem)\n  permits     4\n  available   1\n  \
             holders     3\n      1. c:1  2 permits  lease left 39.0 s  attempt h2\n      \
             2. c:2  1 permit  lease left 12.5 s  attempt h1\n         … and 1 more\n  \
             waiting     2\n      1. c:3  wants 2 permits  attempt w2\n      \
             2. c:4  wants 1 permit  attempt w1\n"
        );
        assert!(!busy.contains("fence"), "{busy}");
        let reduced = sem_state(SemaphoreState {
            permits: Some(1),
            available: -2,
            holds: 1,
            waiting: 0,
            holders: vec![holder("c:1", 3, 1_000)],
            waiters: Vec::new(),
        });
        assert!(
            reduced.contains("  available   -2  (the total was reduced below what holders hold)\n"),
            "{reduced}"
        );
    }

    #[test]
    fn a_semaphore_cannot_be_force_unlocked_and_has_its_own_keys() {
        let err = PrimitiveKind::Semaphore
            .require_force_unlock()
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("force-unlock --kind semaphore is not supported: "),
            "{err}"
        );
        assert!(PrimitiveKind::Rw.require_force_unlock().is_ok());
        assert_eq!(PrimitiveKind::Semaphore.key_kind(), "sem");
        assert_eq!(PrimitiveKind::Fair.key_kind(), "fair");
    }

    #[test]
    fn a_read_write_lock_shows_its_writer_readers_and_waiting_writers() {
        let free = rw_state(None, &[], 0);
        assert_eq!(
            free,
            "read-write lock cat  (key ns:{cat}:rw)\n  state       free\n  writer      none\n  \
             readers     0\n  waiting     1 writer\n  fence       3  (fencing counter: last \
             token handed out)\n"
        );
        let writing = rw_state(Some("c:1"), &[], 0);
        for line in [
            "  state       held (writing)\n",
            "  writer      c:1\n",
            "  hold count  1\n",
            "  ttl         29.500 s\n",
            "  token       3\n",
            "  readers     0\n",
        ] {
            assert!(writing.contains(line), "{line:?} in\n{writing}");
        }
        let reading = rw_state(None, &[("c:2", 9_000), ("c:3", 4_000)], 3);
        for line in [
            "  state       held (reading)\n",
            "  writer      none\n",
            "  readers     3  (longest lease left 9.0 s)\n",
            "      1. c:2  attempt a0  lease left 9.0 s\n",
            "      2. c:3  attempt a1  lease left 4.0 s\n",
            "         … and 1 more\n",
        ] {
            assert!(reading.contains(line), "{line:?} in\n{reading}");
        }
        assert!(!reading.contains("hold count"), "{reading}");
        let both = rw_state(Some("c:1"), &[("c:1", 9_000)], 1);
        assert!(both.contains("held (writing and reading)"), "{both}");
    }

    #[test]
    fn the_public_futures_are_send() {
        fn send<T: Send>(_: T) {}
        let args = InspectArgs {
            name: "x".into(),
            kind: PrimitiveKind::Lock,
            redis: DEFAULT_REDIS.into(),
            topology: Topology::Standalone,
            sentinel_master: None,
            namespace: "ns".into(),
            watch: false,
        };
        send(inspect(&args));
        let force = ForceUnlockArgs {
            target: args.clone(),
            yes: false,
        };
        send(force_unlock(&force));
    }

    #[test]
    fn force_unlock_says_what_it_removed() {
        let unlocked = |kind, hold, read_holds| {
            Unlocked {
                name: "x".into(),
                kind,
                hold,
                read_holds,
            }
            .to_string()
        };
        assert_eq!(
            unlocked(PrimitiveKind::Lock, true, 0),
            "x: unlocked (the hold was deleted)"
        );
        assert_eq!(
            unlocked(PrimitiveKind::Rw, false, 2),
            "x: unlocked (removed writer: no, read holds: 2)"
        );
        assert_eq!(
            unlocked(PrimitiveKind::Rw, true, 0),
            "x: unlocked (removed writer: yes, read holds: 0)"
        );
        assert_eq!(
            unlocked(PrimitiveKind::Rw, false, 0),
            "x: was not locked; nothing deleted"
        );
    }
}
