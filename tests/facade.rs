//! What a newcomer meets at the facade: every type in a public signature
//! can be named from `deadbolt` alone (a user who keeps an RwLock side, an
//! inspect result or an error's cause in a struct of their own needs no
//! other crate; this file compiles only while each name is there), and
//! errors say what is wrong once.

#![allow(dead_code)]

/// What users keep in their own structs and match on, each from `deadbolt`.
struct Named {
    read: deadbolt::ReadLock,
    write: deadbolt::WriteLock,
    read_guard: deadbolt::ReadGuard,
    write_guard: deadbolt::WriteGuard,
    rw_info: deadbolt::RwInfo,
    reader: deadbolt::ReaderInfo,
    forced: deadbolt::ForceUnlocked,
    sem_info: deadbolt::SemaphoreInfo,
    sem_holder: deadbolt::HolderInfo,
    sem_waiter: deadbolt::WaiterInfo,
    permits: deadbolt::Permits,
    lock_info: deadbolt::LockInfo,
    queued: deadbolt::QueuedWaiter,
    wait: deadbolt::WaitMode,
    cause: deadbolt::Cause,
    leader: deadbolt::Leader,
    leadership: deadbolt::Leadership,
    multi: deadbolt::MultiGuard,
    redlock: deadbolt::RedlockGuard,
    event: deadbolt::watch::HoldEvent,
    builder: deadbolt::ClientBuilder,
}

#[test]
fn every_public_type_is_named_from_the_facade() {
    assert_eq!(deadbolt::hash_slot("{a}x"), deadbolt::hash_slot("a"));
    assert!(std::mem::size_of::<Named>() > 0);
}

#[tokio::test]
async fn a_multi_lock_over_an_empty_name_says_so_once() {
    let srv = deadbolt_testkit::support::server();
    let c = deadbolt::Client::connect(&srv.url()).await.unwrap();
    use deadbolt::prelude::*;
    let err = c.multi_lock(&["ok", ""]).try_lock().await.unwrap_err();
    assert_eq!(err.to_string(), "invalid argument: name is empty");
}
