//! The guarded-write API and the fenced value: what each call writes, what
//! it refuses, and that a batch commits together or not at all.

use deadbolt::Acquire as _;
use deadbolt::HoldGuard as _;
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

async fn untouched(srv: &RedisServer, a: &str, h: &str) {
    let n: i64 = cmd(srv, &["EXISTS", a, h]).await;
    assert_eq!(n, 0, "the batch wrote part of itself");
}

/// A batch whose later operation would fail, because of a value as it is
/// or as an earlier operation of the same batch leaves it, writes nothing
/// and says why; batches at the edge of the integer range commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_would_fail_part_way_writes_nothing() {
    let srv = RedisServer::start().unwrap();
    let c = Client::connect(&srv.url()).await.unwrap();
    let g = c.lock("batch").lock().await.unwrap();
    let w = g.guarded();
    let (a, n, h) = (w.key("a"), w.key("n"), w.key("h"));
    let max = i64::MAX.to_string();
    let () = cmd(&srv, &["SET", &n, &max]).await;
    let cases: Vec<(&str, Writes)> = vec![
        ("overflow", Writes::new().set(&a, "1").incr_by(&n, 1)),
        (
            "a 20-digit value",
            Writes::new()
                .set(&a, "1")
                .set(&n, "99999999999999999999")
                .incr_by(&n, 1),
        ),
        (
            "its own earlier write",
            Writes::new().set(&a, "abc").incr_by(&a, 1),
        ),
        (
            "a leading zero",
            Writes::new().set(&a, "1").set(&n, "007").incr_by(&n, 1),
        ),
        (
            "a sum past the range",
            Writes::new()
                .set(&a, "1")
                .set(&n, "-9223372036854775808")
                .incr_by(&n, -1),
        ),
    ];
    for (what, batch) in cases {
        let r = w.write(batch).await;
        assert!(matches!(r, Err(Error::BadValue { .. })), "{what}: {r:?}");
        untouched(&srv, &a, &h).await;
    }
    let r = w
        .write(Writes::new().hset(&h, "f", "1").incr_by(&h, 1))
        .await;
    assert!(matches!(r, Err(Error::WrongType { .. })), "{r:?}");
    untouched(&srv, &a, &h).await;
    let r = w.write(Writes::new().set(&a, "1").hset(&n, "f", "1")).await;
    assert!(matches!(r, Err(Error::WrongType { .. })), "{r:?}");
    untouched(&srv, &a, &h).await;
    assert_eq!(cmd::<String>(&srv, &["GET", &n]).await, max);

    // At the edges: each batch commits whole.
    let ok = w
        .write(
            Writes::new()
                .set(&a, "-9223372036854775807")
                .incr_by(&a, -1)
                .incr_by(&n, -1)
                .incr_by(&n, 1)
                .del(&h)
                .hset(&h, "f", "1")
                .incr_by(w.key("fresh"), 5),
        )
        .await
        .unwrap();
    assert_eq!(ok.len(), 7, "{ok:?}");
    assert_eq!(
        cmd::<String>(&srv, &["GET", &a]).await,
        i64::MIN.to_string()
    );
    assert_eq!(cmd::<String>(&srv, &["GET", &n]).await, max);
    g.unlock().await.unwrap();
}

/// Redis's own WRONGTYPE inside a caller's guarded script names no key:
/// the error names the script's only data key, or none, never the lock's
/// hold hash (which the client used to fill in).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guarded_scripts_wrong_type_never_blames_the_hold() {
    let srv = RedisServer::start().unwrap();
    let c = Client::connect(&srv.url()).await.unwrap();
    let g = c.lock("wt").lock().await.unwrap();
    let w = g.guarded();
    let (s, l) = (w.key("s"), w.key("l"));
    let () = cmd(&srv, &["RPUSH", &l, "x"]).await;
    let two =
        GuardedScript::new("redis.call('SET', KEYS[1], '1') return redis.call('INCR', KEYS[2])");
    match w.eval(&two, vec![s.clone(), l.clone()], vec![]).await {
        Err(Error::WrongType { key }) => assert_eq!(key, "", "none named"),
        other => panic!("{other:?}"),
    }
    let one = GuardedScript::new("return redis.call('INCR', KEYS[1])");
    match w.eval(&one, vec![l.clone()], vec![]).await {
        Err(Error::WrongType { key }) => assert_eq!(key, l),
        other => panic!("{other:?}"),
    }
    g.unlock().await.unwrap();
}
