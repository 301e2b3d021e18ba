//! A writer's release admits every waiting reader in one
//! message. A reader that fails a waiting try registers in the writer's
//! hold hash (`q:<attempt>`); the release it waits for gives each
//! registered reader a read hold under a claim, inside the release, and
//! one message names them all, so no reader needs a try of its own; a
//! reader that leaves takes its registration with it.

use deadbolt_core::Acquire as _;
use std::time::{Duration, Instant};

use deadbolt_core::Client;
use deadbolt_rwlock::RwLock;
use deadbolt_testkit::support::{cmd, fill_memory, server, until, within};
use deadbolt_testkit::RedisServer;

/// A client whose scripts are loaded at connect (a first EVALSHA would
/// meet NOSCRIPT and count twice).
async fn client(srv: &RedisServer) -> Client {
    deadbolt_testkit::client_with(&srv.url(), |b| b.preload(deadbolt_rwlock::SCRIPTS)).await
}

fn main_key(name: &str) -> String {
    format!("deadbolt:{{{name}}}:rw")
}

/// The readers registered in the writer's hold hash.
async fn registrations(srv: &RedisServer, name: &str) -> usize {
    let fields: Vec<String> = cmd(srv, &["HKEYS", &main_key(name)]).await;
    fields.iter().filter(|f| f.starts_with("q:")).count()
}

async fn keys(srv: &RedisServer) -> Vec<String> {
    cmd(srv, &["KEYS", "*"]).await
}

/// Six readers of three clients wait behind a writer, each registered:
/// the writer's unlock is the only script Redis runs until every reader
/// holds its read lock, with one PUBLISH for all of them; the reads
/// outlive their claim (each reader extends it to its lease), and when
/// they are released nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writers_release_admits_every_registered_reader_in_one_message() {
    let srv = server();
    let h = client(&srv).await;
    // Claims of 2 × 150 ms: short enough to see the readers outlive them.
    let mut cs = Vec::new();
    for _ in 0..3 {
        let c = deadbolt_testkit::client_with(&srv.url(), |b| {
            b.preload(deadbolt_rwlock::SCRIPTS)
                .command_timeout(Duration::from_millis(150))
        })
        .await;
        cs.push(c);
    }
    let w = RwLock::new(&h, "admit").write_lock().lock().await.unwrap();
    srv.reset_stats().await;
    let mut tasks = Vec::new();
    let mut calls = 0;
    for round in 0..2 {
        for c in &cs {
            let l = RwLock::new(c, "admit");
            tasks.push(tokio::spawn(async move { l.read_lock().lock().await }));
            // A client's first waiter tries, subscribes and tries once
            // more; its later waiters, on a channel already joined, try once.
            calls += if round == 0 { 2 } else { 1 };
            until("the reader registers and sleeps", || async {
                srv.evalsha_calls().await == calls
            })
            .await;
        }
    }
    assert_eq!(registrations(&srv, "admit").await, 6);

    srv.reset_stats().await;
    w.unlock().await.unwrap();
    let mut guards = Vec::new();
    for t in tasks {
        guards.push(within("a reader", t).await.unwrap().unwrap());
    }
    let stats = srv.commandstats().await;
    assert_eq!(
        stats.get("evalsha").copied(),
        Some(1),
        "the readers got in without a try: {stats:?}"
    );
    assert_eq!(
        stats.get("publish").copied(),
        Some(1),
        "one message: {stats:?}"
    );
    let probe = RwLock::new(&h, "admit");
    assert_eq!(probe.reader_count().await.unwrap(), 6);
    assert_eq!(registrations(&srv, "admit").await, 0);

    // The readers were admitted under a 300 ms claim: they extend it to
    // their lease (the watchdog's) well before it ends.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let info = probe.inspect().await.unwrap();
    assert_eq!(info.readers, 6, "no read hold ran out with its claim");
    for r in &info.reader_list {
        assert!(r.ttl > Duration::from_secs(5), "{r:?}");
    }
    for g in guards {
        g.unlock().await.unwrap();
    }
    assert!(keys(&srv).await.iter().all(|k| !k.contains("{admit}")));
}

type Task<T> = tokio::task::JoinHandle<deadbolt_core::Result<T>>;

/// `h` reads "behind"; a writer of `c` waits (up to `wait`), and then a
/// reader of `d`, held back by it, registers.
async fn held_back(
    srv: &RedisServer,
    [h, c, d]: [&Client; 3],
    wait: Duration,
) -> (
    deadbolt_rwlock::ReadGuard,
    Task<Option<deadbolt_rwlock::WriteGuard>>,
    Task<deadbolt_rwlock::ReadGuard>,
) {
    let r1 = RwLock::new(h, "behind").read_lock().lock().await.unwrap();
    let lw = RwLock::new(c, "behind");
    let writer = tokio::spawn(async move { lw.write_lock().try_lock_for(wait).await });
    until("the writer waits", || async {
        RwLock::new(h, "behind")
            .inspect()
            .await
            .unwrap()
            .waiting_writers
            == 1
    })
    .await;
    let lr = RwLock::new(d, "behind");
    let reader = tokio::spawn(async move { lr.read_lock().lock().await });
    until("the reader registers", || async {
        registrations(srv, "behind").await == 1
    })
    .await;
    (r1, writer, reader)
}

/// Readers that wait behind a waiting writer (readers hold; write
/// preference) register in a hash without a writer; the writer gets in
/// when the readers leave, and its release admits them. When the waiting
/// writer gives up instead, its give-up admits them at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_held_back_by_a_waiting_writer_are_admitted_when_it_is_done() {
    let srv = server();
    let h = client(&srv).await;
    let c = client(&srv).await;
    let d = client(&srv).await;

    // The writer gets in after the reader, and its release admits.
    let (r1, writer, reader) = held_back(&srv, [&h, &c, &d], Duration::from_secs(60)).await;
    r1.unlock().await.unwrap();
    let wg = within("the writer", writer)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        registrations(&srv, "behind").await,
        1,
        "the registration stays with the writer's hold"
    );
    srv.reset_stats().await;
    wg.unlock().await.unwrap();
    let rg = within("the reader", reader).await.unwrap().unwrap();
    assert_eq!(srv.evalsha_calls().await, 1, "admitted without a try");
    rg.unlock().await.unwrap();

    // The waiting writer gives up: its give-up admits the reader.
    let (r1, writer, reader) = held_back(&srv, [&h, &c, &d], Duration::from_millis(800)).await;
    assert!(within("the writer", writer)
        .await
        .unwrap()
        .unwrap()
        .is_none());
    let rg = within("the reader", reader).await.unwrap().unwrap();
    assert_eq!(registrations(&srv, "behind").await, 0);
    rg.unlock().await.unwrap();
    r1.unlock().await.unwrap();
    // Only the waiting writers' records (ww, alive) stay, for 3 ×
    // waiter_timeout past their client's last heartbeat.
    let left: Vec<String> = keys(&srv)
        .await
        .into_iter()
        .filter(|k| k.contains("{behind}") && !k.ends_with(":ww") && !k.ends_with(":alive"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A registered reader that leaves (its wait runs out, or its acquire is
/// cancelled) takes its registration with it: the writer's release then
/// admits nobody, leaves nothing behind, and a reader that still waits
/// gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_reader_that_leaves_takes_its_registration_with_it() {
    let srv = server();
    let h = client(&srv).await;
    let c = client(&srv).await;
    let w = RwLock::new(&h, "leave").write_lock().lock().await.unwrap();

    let l = RwLock::new(&c, "leave");
    let timed_out =
        tokio::spawn(async move { l.read_lock().try_lock_for(Duration::from_millis(300)).await });
    until("the reader registers", || async {
        registrations(&srv, "leave").await == 1
    })
    .await;
    assert!(within("the timed-out reader", timed_out)
        .await
        .unwrap()
        .unwrap()
        .is_none());
    assert_eq!(registrations(&srv, "leave").await, 0);

    let l = RwLock::new(&c, "leave");
    let cancelled = tokio::spawn(async move { l.read_lock().lock().await });
    until("the reader registers", || async {
        registrations(&srv, "leave").await == 1
    })
    .await;
    cancelled.abort();
    let _ = cancelled.await;
    until("the cancelled reader's registration goes", || async {
        registrations(&srv, "leave").await == 0
    })
    .await;

    let l = RwLock::new(&c, "leave");
    let stays = tokio::spawn(async move { l.read_lock().lock().await });
    until("the reader registers", || async {
        registrations(&srv, "leave").await == 1
    })
    .await;
    w.unlock().await.unwrap();
    let g = within("the reader that stayed", stays)
        .await
        .unwrap()
        .unwrap();
    let probe = RwLock::new(&h, "leave");
    assert_eq!(probe.reader_count().await.unwrap(), 1);
    g.unlock().await.unwrap();
    assert!(keys(&srv).await.iter().all(|k| !k.contains("{leave}")));
}

/// Under maxmemory (every write that adds memory refused), a writer's
/// release still admits the registered readers, and what they are told
/// is what the server records: every admitted reader holds a read hold
/// that a writer cannot pass (no reader is told it holds while the server
/// refused its hold).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_under_maxmemory_admits_only_readers_whose_holds_are_recorded() {
    let srv = server();
    let h = client(&srv).await;
    let cs = [client(&srv).await, client(&srv).await];
    let w = RwLock::new(&h, "oom").write_lock().lock().await.unwrap();
    let mut tasks = Vec::new();
    for (i, c) in cs.iter().enumerate() {
        let l = RwLock::new(c, "oom");
        tasks.push(tokio::spawn(async move { l.read_lock().lock().await }));
        until("the reader registers", || async {
            registrations(&srv, "oom").await == i + 1
        })
        .await;
    }
    fill_memory(&srv).await;
    w.unlock().await.unwrap();
    let mut guards = Vec::new();
    for t in tasks {
        guards.push(within("a reader", t).await.unwrap().unwrap());
    }
    let probe = RwLock::new(&h, "oom");
    assert_eq!(
        probe.reader_count().await.unwrap(),
        2,
        "both reads recorded"
    );
    assert!(
        probe.write_lock().try_lock().await.unwrap().is_none(),
        "a writer cannot pass the readers"
    );
    let () = cmd(&srv, &["CONFIG", "SET", "maxmemory", "0"]).await;
    for g in guards {
        g.unlock().await.unwrap();
    }
    assert!(!probe.is_locked().await.unwrap());
}

/// A process dies while its reader waits registered (no release runs: its
/// runtime is dropped): the writer's release admits the dead reader under
/// its claim (twice its client's command timeout), which nobody extends,
/// so the next writer gets in once the claim ends, not after a lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_processes_registered_reader_keeps_a_writer_out_no_longer_than_its_claim() {
    let srv = server();
    let h = client(&srv).await;
    let w = RwLock::new(&h, "dead").write_lock().lock().await.unwrap();
    let (die, die_rx) = tokio::sync::oneshot::channel::<()>();
    let url = srv.url();
    let doomed = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            // Claims of 2 × 150 ms.
            let c = deadbolt_testkit::client_with(&url, |b| {
                b.command_timeout(Duration::from_millis(150))
            })
            .await;
            let l = RwLock::new(&c, "dead");
            tokio::spawn(async move { l.read_lock().lock().await });
            let _ = die_rx.await;
            std::mem::forget(c);
        });
        drop(rt);
    });
    until("the doomed reader registers", || async {
        registrations(&srv, "dead").await == 1
    })
    .await;
    die.send(()).unwrap();
    tokio::task::block_in_place(|| doomed.join()).unwrap();

    w.unlock().await.unwrap();
    let probe = RwLock::new(&h, "dead");
    assert_eq!(probe.reader_count().await.unwrap(), 1, "admitted, dead");
    let started = Instant::now();
    let c = client(&srv).await;
    let g = within(
        "the next writer",
        RwLock::new(&c, "dead").write_lock().lock(),
    )
    .await
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the next writer waited {:?} (the claim is 300 ms)",
        started.elapsed()
    );
    g.unlock().await.unwrap();
    assert_eq!(registrations(&srv, "dead").await, 0);
}

/// A reader held back by a waiting writer registers in a hash that holds
/// no writer; when it leaves, that hash goes with its registration (and its
/// mark), rather than lingering until its TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_without_a_writer_leaves_nothing_when_its_reader_leaves() {
    let srv = server();
    let h = client(&srv).await;
    let c = client(&srv).await;
    let d = client(&srv).await;
    let r1 = RwLock::new(&h, "bare").read_lock().lock().await.unwrap();
    let lw = RwLock::new(&c, "bare");
    let writer =
        tokio::spawn(async move { lw.write_lock().try_lock_for(Duration::from_secs(60)).await });
    until("the writer waits", || async {
        RwLock::new(&h, "bare")
            .inspect()
            .await
            .unwrap()
            .waiting_writers
            == 1
    })
    .await;
    let lr = RwLock::new(&d, "bare");
    let reader = tokio::spawn(async move {
        lr.read_lock()
            .try_lock_for(Duration::from_millis(300))
            .await
    });
    until("the reader registers", || async {
        registrations(&srv, "bare").await == 1
    })
    .await;
    assert!(within("the reader", reader)
        .await
        .unwrap()
        .unwrap()
        .is_none());
    let exists: i64 = cmd(&srv, &["EXISTS", &main_key("bare")]).await;
    assert_eq!(exists, 0, "no hash without a writer or a registration");
    r1.unlock().await.unwrap();
    let wg = within("the writer", writer)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    wg.unlock().await.unwrap();
    let exists: i64 = cmd(&srv, &["EXISTS", &main_key("bare")]).await;
    assert_eq!(exists, 0);
}
