//! The guarded-write API and the fenced value: what each call writes, what
//! it refuses, and that a batch commits together or not at all.

use deadbolt::Acquire as _;
use std::time::Duration;

use deadbolt::fence::Fenced;
use deadbolt::guarded::{GuardedScript, Writes};
use deadbolt::{Client, Error, LeaseState};
use deadbolt_testkit::support::cmd;
use deadbolt_testkit::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_writes_commit_while_held_and_are_refused_after() {
    let srv = RedisServer::start().unwrap();
    let c = Client::connect(&srv.url()).await.unwrap();
    let g = c
        .lock("g")
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    let w = g.guarded();
    let (k, h) = (w.key("n"), w.key("h"));
    assert_eq!(k, "deadbolt:{g}:lock:data:n");
    assert_eq!(w.incr_by(&k, 2).await.unwrap(), 2);
    w.set(w.key("s"), "v").await.unwrap();
    assert_eq!(w.get(w.key("s")).await.unwrap().as_deref(), Some("v"));
    assert!(w.hset(&h, "f", "1").await.unwrap());
    assert!(w.del(w.key("s")).await.unwrap());
    let script = GuardedScript::new("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    let v = w
        .eval(&script, vec![k.clone()], vec!["5".into()])
        .await
        .unwrap();
    assert_eq!(v, redis::Value::Int(7));

    // A key of another slot: refused before anything is sent.
    match w.set("elsewhere", "x").await {
        Err(Error::CrossSlot { key }) => assert_eq!(key, "elsewhere"),
        other => panic!("{other:?}"),
    }
    // A batch with an operation that cannot succeed writes nothing.
    let r = w
        .write(Writes::new().incr_by(&k, 1).hset(&k, "f", "x"))
        .await;
    assert!(matches!(r, Err(Error::WrongType { .. })), "{r:?}");
    assert_eq!(cmd::<String>(&srv, &["GET", &k]).await, "7");

    // Once the lease ran out and another holder took the lock, nothing is
    // written: NotHeld, and the guard reads Lost.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let other = c.lock("g").lock().await.unwrap();
    let r = w.incr_by(&k, 100).await;
    assert!(matches!(r, Err(Error::NotHeld)), "{r:?}");
    assert_eq!(g.state(), LeaseState::Lost);
    assert_eq!(cmd::<String>(&srv, &["GET", &k]).await, "7");
    assert_eq!(other.guarded().incr_by(&k, 1).await.unwrap(), 8);
    other.unlock().await.unwrap();
    // After an unlock nothing is sent at all.
    let r = other_after_unlock(&c).await;
    assert!(matches!(r, Err(Error::NotHeld)), "{r:?}");
}

async fn other_after_unlock(c: &Client) -> deadbolt::Result<i64> {
    let g = c.lock("g2").lock().await?;
    let key = g.guarded().key("n");
    // A guard whose hold was force-unlocked behind its back.
    assert!(c.lock("g2").force_unlock().await?);
    g.guarded().incr_by(key, 1).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_value_takes_writes_only_with_a_token_at_least_the_last() {
    let srv = RedisServer::start().unwrap();
    let c = Client::connect(&srv.url()).await.unwrap();
    let f = Fenced::new(&c, "report");
    assert_eq!(f.get().await.unwrap(), None);
    assert!(f.set(10, "a").await.unwrap());
    assert!(f.set(10, "b").await.unwrap(), "the same holder again");
    assert!(!f.set(9, "stale").await.unwrap());
    assert_eq!(f.get().await.unwrap(), Some((10, "b".into())));
    assert!(f.delete(11).await.unwrap());
    assert!(
        !f.set(10, "late").await.unwrap(),
        "the token outlives the value"
    );
    assert_eq!(f.get().await.unwrap(), None);
    assert!(f.set(12, "c").await.unwrap());
}
