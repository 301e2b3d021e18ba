//! The `deadbolt` command against real redis-server processes: argument
//! errors, inspect and force-unlock (through the library and the binary).
//!
//! Nothing asserts speed: the only time bounds catch hangs.

use deadbolt_core::Acquire as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser as _;
use deadbolt_cli::{
    Cli, FairState, ForceUnlockArgs, Hold, InspectArgs, Inspection, Leader, PrimitiveState,
    RwState, SemaphoreState,
};
use deadbolt_testkit::RedisServer;

/// Catches hangs, not speed.
const HANG: Duration = Duration::from_secs(60);

/// The hold of what `inspect` found, which must be a lock.
fn lock_hold(found: &Inspection) -> &Hold {
    match &found.state {
        PrimitiveState::Lock(hold) => hold,
        other => panic!("not a lock: {other:?}"),
    }
}

/// What `inspect` found, which must be a fair lock.
fn fair_state(found: &Inspection) -> &FairState {
    match &found.state {
        PrimitiveState::FairLock(fair) => fair,
        other => panic!("not a fair lock: {other:?}"),
    }
}

/// What `inspect` found, which must be a read-write lock.
fn rw_state(found: &Inspection) -> &RwState {
    match &found.state {
        PrimitiveState::RwLock(rw) => rw,
        other => panic!("not a read-write lock: {other:?}"),
    }
}

/// What `inspect` found, which must be a semaphore.
fn sem_state(found: &Inspection) -> &SemaphoreState {
    match &found.state {
        PrimitiveState::Semaphore(sem) => sem,
        other => panic!("not a semaphore: {other:?}"),
    }
}

/// The leader of what `inspect` found, which must be an election.
fn leader(found: &Inspection) -> Option<&Leader> {
    match &found.state {
        PrimitiveState::Election(leader) => leader.as_ref(),
        other => panic!("not an election: {other:?}"),
    }
}

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("deadbolt").chain(args.iter().copied()))
}

#[tokio::test]
async fn argument_errors() {
    assert!(parse(&["inspect", "x", "--kind", "queue"]).is_err());
    assert!(parse(&["frobnicate"]).is_err());
    // The bench left this command for deadbolt-bench.
    assert!(parse(&["bench", "--scenario", "idle"]).is_err());

    // force-unlock refuses without --yes, before connecting anywhere.
    let cli = parse(&[
        "force-unlock",
        "orders:42",
        "--redis",
        "redis://127.0.0.1:1/",
    ])
    .unwrap();
    let err = deadbolt_cli::run(cli).await.unwrap_err();
    assert!(err.to_string().contains("--yes"), "{err:#}");
}

#[tokio::test]
async fn inspect_and_force_unlock() {
    let server = RedisServer::start().expect("redis-server (apt-get install -y redis-server)");
    let client = deadbolt_testkit::client_with(&server.url(), |b| b.namespace("it")).await;
    let lock = deadbolt_lock::Lock::new(&client, "orders:42");
    let inspect_args = InspectArgs {
        name: "orders:42".into(),
        kind: deadbolt_cli::PrimitiveKind::Lock,
        redis: server.url(),
        topology: deadbolt_cli::Topology::Standalone,
        sentinel_master: None,
        namespace: "it".into(),
        watch: false,
    };

    let free = deadbolt_cli::inspect(&inspect_args).await.unwrap();
    assert_eq!(lock_hold(&free).owner, None);
    assert_eq!(free.key, "it:{orders:42}:lock");

    let guard = lock.lock().await.unwrap();
    let held = deadbolt_cli::inspect(&inspect_args).await.unwrap();
    let hold = lock_hold(&held);
    assert_eq!(hold.owner.as_deref(), Some(lock.owner()));
    assert_eq!(hold.hold_count, 1);
    assert_eq!(hold.token, guard.fencing_token());
    assert_eq!(hold.fence, guard.fencing_token());
    assert!(hold.ttl.is_some_and(|t| t > Duration::ZERO));
    let shown = held.to_string();
    assert!(shown.contains(lock.owner()), "{shown}");
    assert!(shown.starts_with("lock orders:42  "), "{shown}");
    // Under the owner id, the name of its client.
    assert!(
        shown.contains(&format!(
            "  owner       {}\n  client      {}\n",
            lock.owner(),
            client.name()
        )),
        "{shown}"
    );
    // A plain lock has no queue: no "queued" line.
    assert!(!shown.contains("queued"), "{shown}");

    // A FairLock of the same name is a different lock: free, with its own keys.
    let mut fair = inspect_args.clone();
    fair.kind = deadbolt_cli::PrimitiveKind::Fair;
    let f = deadbolt_cli::inspect(&fair).await.unwrap();
    assert_eq!(f.key, "it:{orders:42}:fair");
    let fs = fair_state(&f);
    assert_eq!(fs.hold.owner, None);
    assert_eq!(fs.queued, 0);
    assert!(fs.queue.is_empty());
    let shown = f.to_string();
    assert!(shown.starts_with("fair lock orders:42  "), "{shown}");
    assert!(shown.contains("queued      0"), "{shown}");

    // A held fair lock with two waiters: inspect lists them in queue order.
    let fair_holder = deadbolt_fair::FairLock::new(&client, "orders:42");
    let fair_guard = fair_holder.lock().await.unwrap();
    let w1 = deadbolt_fair::FairLock::new(&client, "orders:42");
    let w2 = deadbolt_fair::FairLock::new(&client, "orders:42");
    let (o1, o2) = (w1.owner().to_string(), w2.owner().to_string());
    let t1 = tokio::spawn(async move { w1.lock().await.unwrap().unlock().await.unwrap() });
    let mut seen = deadbolt_cli::inspect(&fair).await.unwrap();
    while fair_state(&seen).queued < 1 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        seen = deadbolt_cli::inspect(&fair).await.unwrap();
    }
    let t2 = tokio::spawn(async move { w2.lock().await.unwrap().unlock().await.unwrap() });
    while fair_state(&seen).queued < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        seen = deadbolt_cli::inspect(&fair).await.unwrap();
    }
    let fs = fair_state(&seen);
    assert_eq!(fs.hold.owner.as_deref(), Some(fair_holder.owner()));
    let owners: Vec<&str> = fs.queue.iter().map(|q| q.owner.as_str()).collect();
    assert_eq!(owners, [o1.as_str(), o2.as_str()]);
    assert!(fs.queue.iter().all(|q| q.alive_for.is_some()));
    let shown = seen.to_string();
    assert!(shown.contains(&o2), "{shown}");
    assert!(shown.contains("queued      2"), "{shown}");
    assert!(shown.contains("liveness left "), "{shown}");
    fair_guard.unlock().await.unwrap();
    t1.await.unwrap();
    t2.await.unwrap();
    // A semaphore of the same name is a different thing, with its own keys.
    let mut other = inspect_args.clone();
    other.kind = deadbolt_cli::PrimitiveKind::Semaphore;
    let sem = deadbolt_cli::inspect(&other).await.unwrap();
    assert_eq!(sem.key, "it:{orders:42}:sem");
    assert_eq!(sem_state(&sem).permits, None);

    let mut force = ForceUnlockArgs {
        target: inspect_args.clone(),
        yes: false,
    };
    assert!(deadbolt_cli::force_unlock(&force).await.is_err());
    assert!(
        lock.is_locked().await.unwrap(),
        "refused force-unlock changed nothing"
    );
    force.yes = true;
    let unlocked = deadbolt_cli::force_unlock(&force).await.unwrap();
    assert!(unlocked.hold && unlocked.removed_anything());
    assert_eq!(
        unlocked.to_string(),
        "orders:42: unlocked (the hold was deleted)"
    );
    assert!(!lock.is_locked().await.unwrap());
    let again = deadbolt_cli::force_unlock(&force).await.unwrap();
    assert!(!again.removed_anything(), "nothing left to delete");
    assert_eq!(
        again.to_string(),
        "orders:42: was not locked; nothing deleted"
    );
    let after = deadbolt_cli::inspect(&inspect_args).await.unwrap();
    assert_eq!(lock_hold(&after).owner, None);
    drop(guard);
    client.shutdown().await;
}

/// Run the binary off the runtime's thread (the test's clients keep
/// renewing meanwhile); its stdout, or a panic with its stderr.
async fn deadbolt_stdout(args: Vec<String>) -> String {
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_deadbolt"))
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .expect("run deadbolt")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `--kind rw`: a free read-write lock, one with a writer (and a writer
/// waiting behind it), one with two readers listed longest lease first;
/// force-unlock removes the readers (their unlocks then say so) and the
/// writer, and says what it removed. Through the library and the binary.
#[tokio::test]
async fn inspect_and_force_unlock_a_read_write_lock() {
    use deadbolt_cli::PrimitiveKind;
    use deadbolt_rwlock::RwLock;

    let server = RedisServer::start().expect("redis-server (apt-get install -y redis-server)");
    let client = deadbolt_testkit::client_with(&server.url(), |b| b.namespace("it")).await;
    let target = InspectArgs {
        name: "catalog".into(),
        kind: PrimitiveKind::Rw,
        redis: server.url(),
        topology: deadbolt_cli::Topology::Standalone,
        sentinel_master: None,
        namespace: "it".into(),
        watch: false,
    };
    let cli_args = |cmd: &str, extra: &[&str]| -> Vec<String> {
        [
            cmd,
            "catalog",
            "--kind",
            "rw",
            "--namespace",
            "it",
            "--redis",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .chain([server.url()])
        .chain(extra.iter().map(|s| (*s).to_string()))
        .collect()
    };

    // Free.
    let free = deadbolt_cli::inspect(&target).await.unwrap();
    assert_eq!(free.key, "it:{catalog}:rw");
    let rw = rw_state(&free);
    assert_eq!(rw.writer.owner, None);
    assert_eq!((rw.readers, rw.waiting_writers), (0, 0));
    assert!(rw.reader_list.is_empty() && rw.longest_lease.is_none());
    let shown = free.to_string();
    assert!(
        shown.starts_with(
            "read-write lock catalog  (key it:{catalog}:rw)\n  state       free\n  \
             writer      none\n  readers     0\n  waiting     0 writers\n"
        ),
        "{shown}"
    );

    // A writer, and a second writer waiting behind it.
    let writer = RwLock::new(&client, "catalog");
    let guard = writer.write_lock().lock().await.unwrap();
    let next = RwLock::new(&client, "catalog");
    let waiting = tokio::spawn(async move {
        next.write_lock()
            .lock()
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap()
    });
    // Its mark is set by its first try: poll the state (no sleeping).
    let deadline = Instant::now() + HANG;
    while writer.inspect().await.unwrap().waiting_writers < 1 {
        assert!(Instant::now() < deadline, "the second writer never waited");
    }
    let held = deadbolt_cli::inspect(&target).await.unwrap();
    let rw = rw_state(&held);
    assert_eq!(rw.writer.owner.as_deref(), Some(writer.owner()));
    assert_eq!(rw.writer.hold_count, 1);
    assert_eq!(rw.writer.token, guard.fencing_token());
    assert_eq!(rw.writer.fence, guard.fencing_token());
    assert!(rw.writer.ttl.is_some_and(|t| t > Duration::ZERO));
    assert_eq!(rw.readers, 0);
    let shown = held.to_string();
    for line in [
        "  state       held (writing)\n".to_string(),
        format!("  writer      {}\n", writer.owner()),
        "  hold count  1\n".to_string(),
        format!("  token       {}\n", guard.fencing_token()),
        "  waiting     1 writer\n".to_string(),
    ] {
        assert!(shown.contains(&line), "{line:?} in\n{shown}");
    }
    let printed = deadbolt_stdout(cli_args("inspect", &[])).await;
    assert!(printed.contains("held (writing)"), "{printed}");
    assert!(printed.contains(writer.owner()), "{printed}");
    guard.unlock().await.unwrap();
    tokio::time::timeout(HANG, waiting).await.unwrap().unwrap();

    // Two readers with fixed leases: listed longest lease first.
    let long = RwLock::new(&client, "catalog");
    let short = RwLock::new(&client, "catalog");
    let r_long = long
        .read_lock()
        .lock_with_lease(Duration::from_secs(40))
        .await
        .unwrap();
    let r_short = short
        .read_lock()
        .lock_with_lease(Duration::from_secs(20))
        .await
        .unwrap();
    let reading = deadbolt_cli::inspect(&target).await.unwrap();
    let rw = rw_state(&reading);
    assert_eq!(rw.writer.owner, None);
    assert_eq!(rw.readers, 2);
    let owners: Vec<&str> = rw.reader_list.iter().map(|r| r.owner.as_str()).collect();
    assert_eq!(owners, [long.owner(), short.owner()]);
    let leases: Vec<Duration> = rw.reader_list.iter().map(|r| r.lease_left).collect();
    assert!(
        leases[0] > Duration::from_secs(20) && leases[0] <= Duration::from_secs(40),
        "{leases:?}"
    );
    assert!(
        leases[1] > Duration::ZERO && leases[1] <= Duration::from_secs(20),
        "{leases:?}"
    );
    assert_eq!(rw.longest_lease, Some(leases[0]));
    let shown = reading.to_string();
    for line in [
        "  state       held (reading)\n".to_string(),
        "  writer      none\n".to_string(),
        format!(
            "  readers     2  (longest lease left {:.1} s)\n",
            leases[0].as_secs_f64()
        ),
        format!(
            "      1. {}  attempt {}  lease left ",
            long.owner(),
            rw.reader_list[0].attempt
        ),
        format!("      2. {}  attempt ", short.owner()),
    ] {
        assert!(shown.contains(&line), "{line:?} in\n{shown}");
    }
    assert!(!shown.contains("hold count"), "{shown}");
    let printed = deadbolt_stdout(cli_args("inspect", &[])).await;
    assert!(
        printed.contains("  readers     2  (longest lease left "),
        "{printed}"
    );
    assert!(printed.contains(short.owner()), "{printed}");

    // force-unlock: refused without --yes, then removes both read holds.
    let mut force = ForceUnlockArgs {
        target: target.clone(),
        yes: false,
    };
    assert!(deadbolt_cli::force_unlock(&force).await.is_err());
    assert_eq!(
        long.reader_count().await.unwrap(),
        2,
        "refused changed nothing"
    );
    force.yes = true;
    let removed = deadbolt_cli::force_unlock(&force).await.unwrap();
    assert_eq!((removed.hold, removed.read_holds), (false, 2));
    assert_eq!(
        removed.to_string(),
        "catalog: unlocked (removed writer: no, read holds: 2)"
    );
    assert!(!long.is_locked().await.unwrap());
    assert!(matches!(
        r_long.unlock().await,
        Err(deadbolt_core::Error::NotHeld)
    ));
    assert!(matches!(
        r_short.unlock().await,
        Err(deadbolt_core::Error::NotHeld)
    ));

    // A writer, force-unlocked through the binary.
    let guard = writer.write_lock().lock().await.unwrap();
    let printed = deadbolt_stdout(cli_args("force-unlock", &["--yes"])).await;
    assert_eq!(
        printed,
        "catalog: unlocked (removed writer: yes, read holds: 0)\n"
    );
    assert!(!writer.is_locked().await.unwrap());
    assert!(matches!(
        guard.unlock().await,
        Err(deadbolt_core::Error::NotHeld)
    ));
    let printed = deadbolt_stdout(cli_args("force-unlock", &["--yes"])).await;
    assert_eq!(printed, "catalog: was not locked; nothing deleted\n");
    let after = deadbolt_cli::inspect(&target).await.unwrap();
    assert_eq!(rw_state(&after).writer.owner, None);
    assert_eq!(rw_state(&after).readers, 0);
    client.shutdown().await;
}

/// `--kind semaphore`: never set; then 3 permits with a holder of 2 (fixed
/// 40 s lease) and one of 1 (the watchdog's 30 s), listed longest lease
/// first, and a waiter for 2 behind them, asleep while 1 is free and served
/// once 2 are; force-unlock is refused. Through the library and the binary.
#[tokio::test]
async fn inspect_a_semaphore() {
    use deadbolt_cli::PrimitiveKind;
    use deadbolt_semaphore::Semaphore;

    let server = RedisServer::start().expect("redis-server (apt-get install -y redis-server)");
    let client = deadbolt_testkit::client_with(&server.url(), |b| b.namespace("it")).await;
    let target = InspectArgs {
        name: "pool".into(),
        kind: PrimitiveKind::Semaphore,
        redis: server.url(),
        topology: deadbolt_cli::Topology::Standalone,
        sentinel_master: None,
        namespace: "it".into(),
        watch: false,
    };
    let cli_args = |cmd: &str, extra: &[&str]| -> Vec<String> {
        [
            cmd,
            "pool",
            "--kind",
            "semaphore",
            "--namespace",
            "it",
            "--redis",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .chain([server.url()])
        .chain(extra.iter().map(|s| (*s).to_string()))
        .collect()
    };

    // Never set.
    let never = deadbolt_cli::inspect(&target).await.unwrap();
    assert_eq!(never.key, "it:{pool}:sem");
    // A semaphore only: no owner, no read-write details.
    let sem = sem_state(&never);
    assert_eq!(sem.permits, None);
    assert_eq!((sem.available, sem.holds, sem.waiting), (0, 0, 0));
    assert!(sem.holders.is_empty() && sem.waiters.is_empty());
    assert_eq!(
        never.to_string(),
        "semaphore pool  (key it:{pool}:sem)\n  permits     never set (acquires wait until \
         they are set)\n  available   0\n  holders     0\n  waiting     0\n"
    );
    let printed = deadbolt_stdout(cli_args("inspect", &[])).await;
    assert_eq!(printed, never.to_string());

    // Two holders and a waiter.
    let pool = Semaphore::new(&client, "pool");
    assert!(pool.try_set_permits(3).await.unwrap());
    let long = pool
        .acquire_with_lease(2, Duration::from_secs(40))
        .await
        .unwrap();
    let short = pool.acquire(1).await.unwrap();
    let other = Semaphore::new(&client, "pool");
    let waiting = tokio::spawn(async move { other.acquire(2).await.unwrap() });
    // Its entry is written by its first try: poll the state (no sleeping).
    let deadline = Instant::now() + HANG;
    while pool.inspect().await.unwrap().waiting < 1 {
        assert!(Instant::now() < deadline, "the waiter never queued");
    }
    let busy = deadbolt_cli::inspect(&target).await.unwrap();
    let sem = sem_state(&busy);
    assert_eq!(sem.permits, Some(3));
    assert_eq!((sem.available, sem.holds, sem.waiting), (0, 2, 1));
    let held: Vec<u64> = sem.holders.iter().map(|h| h.permits).collect();
    assert_eq!(held, [2, 1], "longest lease first");
    let leases: Vec<Duration> = sem.holders.iter().map(|h| h.lease_left).collect();
    assert!(
        leases[0] > Duration::from_secs(30) && leases[0] <= Duration::from_secs(40),
        "{leases:?}"
    );
    assert!(
        leases[1] > Duration::ZERO && leases[1] <= Duration::from_secs(30),
        "{leases:?}"
    );
    let holder_owner = &sem.holders[0].owner;
    assert!(holder_owner.starts_with(client.id()), "{holder_owner}");
    assert_eq!(&sem.holders[1].owner, holder_owner, "one handle took both");
    assert_eq!(sem.waiters.len(), 1);
    let w = &sem.waiters[0];
    assert_eq!(w.permits, 2);
    assert!(w.owner.starts_with(client.id()) && &w.owner != holder_owner);
    let shown = busy.to_string();
    for line in [
        "  permits     3\n".to_string(),
        "  available   0\n".to_string(),
        "  holders     2\n".to_string(),
        format!(
            "      1. {holder_owner}  2 permits  lease left {:.1} s  attempt {}\n",
            leases[0].as_secs_f64(),
            sem.holders[0].attempt
        ),
        format!("      2. {holder_owner}  1 permit  lease left "),
        "  waiting     1\n".to_string(),
        format!(
            "      1. {}  wants 2 permits  attempt {}\n",
            w.owner, w.attempt
        ),
    ] {
        assert!(shown.contains(&line), "{line:?} in\n{shown}");
    }
    assert!(!shown.contains("fence"), "{shown}");
    let printed = deadbolt_stdout(cli_args("inspect", &[])).await;
    for line in [
        "  holders     2\n",
        "  1 permit  ",
        "wants 2 permits  attempt ",
    ] {
        assert!(printed.contains(line), "{line:?} in\n{printed}");
    }

    // One permit back: not enough for the waiter, which stays asleep.
    short.release().await.unwrap();
    let one_free = deadbolt_cli::inspect(&target).await.unwrap();
    let sem = sem_state(&one_free);
    assert_eq!((sem.available, sem.holds, sem.waiting), (1, 1, 1));

    // Two more: the waiter takes its two.
    long.release().await.unwrap();
    let got = tokio::time::timeout(HANG, waiting).await.unwrap().unwrap();
    assert_eq!(got.count(), 2);
    let served = deadbolt_cli::inspect(&target).await.unwrap();
    let sem = sem_state(&served);
    assert_eq!((sem.available, sem.holds, sem.waiting), (1, 1, 0));
    assert_eq!(sem.holders[0].permits, 2);
    assert_ne!(&sem.holders[0].owner, holder_owner);

    // force-unlock does not take permits away: refused, nothing changed.
    let force = ForceUnlockArgs {
        target: target.clone(),
        yes: true,
    };
    let err = deadbolt_cli::force_unlock(&force).await.unwrap_err();
    assert!(
        format!("{err:#}").starts_with("force-unlock --kind semaphore is not supported: "),
        "{err:#}"
    );
    let out = tokio::task::spawn_blocking({
        let args = cli_args("force-unlock", &["--yes"]);
        move || {
            Command::new(env!("CARGO_BIN_EXE_deadbolt"))
                .args(&args)
                .stdin(Stdio::null())
                .output()
                .expect("run deadbolt")
        }
    })
    .await
    .unwrap();
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not supported"),
        "{out:?}"
    );
    assert_eq!(pool.available_permits().await.unwrap(), 1);
    got.release().await.unwrap();
    assert_eq!(pool.available_permits().await.unwrap(), 3);
    client.shutdown().await;
}

/// A key of another type where the lock's hold should be: inspect and
/// force-unlock refuse it, name the type they found, and delete nothing; the
/// binary exits non-zero.
#[tokio::test]
async fn a_key_of_another_type_is_refused() {
    let server = RedisServer::start().expect("redis-server (apt-get install -y redis-server)");
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("it:{x}:lock")
        .arg("user data")
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg("it:{x}:fair")
        .arg("user data")
        .query_async(&mut conn)
        .await
        .unwrap();
    let target = InspectArgs {
        name: "x".into(),
        kind: deadbolt_cli::PrimitiveKind::Lock,
        redis: server.url(),
        topology: deadbolt_cli::Topology::Standalone,
        sentinel_master: None,
        namespace: "it".into(),
        watch: false,
    };
    let force = ForceUnlockArgs {
        target: target.clone(),
        yes: true,
    };
    let err = deadbolt_cli::force_unlock(&force).await.unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "refused: it:{x}:lock holds a string, not a lock"
    );
    let err = deadbolt_cli::inspect(&target).await.unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "refused: it:{x}:lock holds a string, not a lock"
    );
    let mut fair = force.clone();
    fair.target.kind = deadbolt_cli::PrimitiveKind::Fair;
    let err = deadbolt_cli::force_unlock(&fair).await.unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "refused: it:{x}:fair holds a list, not a fair lock"
    );
    let _: () = redis::cmd("SADD")
        .arg("it:{x}:rw")
        .arg("user data")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut rw = force.clone();
    rw.target.kind = deadbolt_cli::PrimitiveKind::Rw;
    for err in [
        deadbolt_cli::force_unlock(&rw).await.unwrap_err(),
        deadbolt_cli::inspect(&rw.target).await.unwrap_err(),
    ] {
        assert_eq!(
            format!("{err:#}"),
            "refused: it:{x}:rw holds a set, not a read-write lock"
        );
    }

    let _: () = redis::cmd("SET")
        .arg("it:{x}:sem")
        .arg("user data")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut sem = target.clone();
    sem.kind = deadbolt_cli::PrimitiveKind::Semaphore;
    let err = deadbolt_cli::inspect(&sem).await.unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "refused: it:{x}:sem holds a string, not a semaphore"
    );

    // The binary: a message on stderr, a non-zero exit, nothing deleted.
    let out = Command::new(env!("CARGO_BIN_EXE_deadbolt"))
        .args([
            "force-unlock",
            "x",
            "--yes",
            "--namespace",
            "it",
            "--redis",
            &server.url(),
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run deadbolt");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        stderr.contains("refused: it:{x}:lock holds a string, not a lock"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("unlocked"));

    let value: String = redis::cmd("GET")
        .arg("it:{x}:lock")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "user data", "the refused key was changed");
    let len: u64 = redis::cmd("LLEN")
        .arg("it:{x}:fair")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(len, 1, "the refused fair key was changed");
    let members: u64 = redis::cmd("SCARD")
        .arg("it:{x}:rw")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(members, 1, "the refused read-write key was changed");
    let value: String = redis::cmd("GET")
        .arg("it:{x}:sem")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "user data", "the refused semaphore key was changed");
}

/// `--kind election`: nobody leads, then a leader with its term, lease,
/// info and client name; force-unlock is refused (a leader resigns).
#[tokio::test]
async fn inspect_an_election() {
    use deadbolt_cli::PrimitiveKind;

    let server = RedisServer::start().expect("redis-server (apt-get install -y redis-server)");
    let client =
        deadbolt_testkit::client_with(&server.url(), |b| b.namespace("it").client_name("sched-1"))
            .await;
    let target = InspectArgs {
        name: "nightly".into(),
        kind: PrimitiveKind::Election,
        redis: server.url(),
        topology: deadbolt_cli::Topology::Standalone,
        sentinel_master: None,
        namespace: "it".into(),
        watch: false,
    };
    let none = deadbolt_cli::inspect(&target).await.unwrap();
    assert_eq!(none.key, "it:{nightly}:elect");
    assert_eq!(leader(&none), None);
    assert_eq!(
        none.to_string(),
        "election nightly  (key it:{nightly}:elect)\n  state       no leader\n"
    );

    let leadership = deadbolt_election::Election::new(&client, "nightly")
        .campaign("10.0.0.9:7000")
        .await
        .unwrap();
    let led = deadbolt_cli::inspect(&target).await.unwrap();
    let leads = leader(&led).expect("a leader");
    assert_eq!(leads.term, leadership.term());
    assert_eq!(leads.info, "10.0.0.9:7000");
    let shown = led.to_string();
    for line in [
        "  state       led\n".to_string(),
        "  client      sched-1\n".to_string(),
        format!("  term        {}\n", leadership.term()),
        "  info        10.0.0.9:7000\n".to_string(),
    ] {
        assert!(shown.contains(&line), "{line:?} in\n{shown}");
    }
    let printed = deadbolt_stdout(vec![
        "inspect".into(),
        "nightly".into(),
        "--kind".into(),
        "election".into(),
        "--redis".into(),
        server.url(),
        "--namespace".into(),
        "it".into(),
    ])
    .await;
    assert!(printed.contains("  client      sched-1\n"), "{printed}");
    let refused = deadbolt_cli::force_unlock(&ForceUnlockArgs {
        target: target.clone(),
        yes: true,
    })
    .await
    .unwrap_err()
    .to_string();
    assert!(
        refused.starts_with("force-unlock --kind election is not supported"),
        "{refused}"
    );
    leadership.resign().await.unwrap();
    client.shutdown().await;
}

/// `deadbolt inspect --watch` prints each holder change as a line, live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_watch_prints_each_change() {
    use std::io::{BufRead, BufReader};
    let server = RedisServer::builder()
        .arg("notify-keyspace-events", "Kghx")
        .start()
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_deadbolt"))
        .args(["inspect", "jobs", "--watch", "--redis", &server.url()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let line = || rx.recv_timeout(HANG).expect("a line from inspect --watch");
    assert!(line().ends_with(" free"));
    let client = deadbolt_testkit::client_with(&server.url(), |b| b.client_name("billing")).await;
    let g = deadbolt_lock::Lock::new(&client, "jobs")
        .lock()
        .await
        .unwrap();
    let l = tokio::task::block_in_place(line);
    assert!(l.contains("acquired by billing"), "{l}");
    g.unlock().await.unwrap();
    let l = tokio::task::block_in_place(line);
    assert!(l.contains("released by billing"), "{l}");
    let _ = child.kill();
    let _ = child.wait();
}

/// `inspect NAME` of a held fair lock, without `--kind fair`, says what the
/// name is instead of printing "free"; the Redis URL can come from
/// `DEADBOLT_REDIS_URL`.
#[tokio::test]
async fn inspect_of_another_kind_names_the_kind() {
    let server = RedisServer::start().expect("redis-server");
    let client = deadbolt_testkit::client(&server.url()).await;
    let guard = deadbolt_fair::FairLock::new(&client, "f")
        .lock()
        .await
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_deadbolt"))
        .args(["inspect", "f"])
        .env("DEADBOLT_REDIS_URL", server.url())
        .stdin(Stdio::null())
        .output()
        .expect("run deadbolt");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        stderr.contains("f is a fair lock, not a lock: use --kind fair"),
        "{stderr}"
    );
    guard.unlock().await.unwrap();
}
