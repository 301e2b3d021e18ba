//! Tests of `RedisServer` against a real redis-server.

use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

use deadbolt_testkit::{free_port, redis_server_path, RedisServer};
use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;

/// Generous bound that only catches hangs.
const HANG: Duration = Duration::from_secs(30);

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(HANG, f).await.expect("operation hung")
}

async fn conn_with_timeout(url: &str, response: Duration) -> MultiplexedConnection {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(10)))
        .set_response_timeout(Some(response));
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("connect")
}

async fn get(conn: &mut MultiplexedConnection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query_async(conn).await.unwrap()
}

async fn set(conn: &mut MultiplexedConnection, key: &str, value: &str) {
    let () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async(conn)
        .await
        .unwrap();
}

#[test]
fn redis_server_is_found() {
    assert!(redis_server_path().is_some());
}

#[test]
fn free_ports_differ() {
    let ports: HashSet<u16> = (0..200).map(|_| free_port()).collect();
    assert_eq!(ports.len(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_stop_restart() {
    let mut server = RedisServer::start().unwrap();
    assert!(server.is_running());
    assert_eq!(
        server.url(),
        format!("redis://127.0.0.1:{}/", server.port())
    );
    assert_eq!(server.addr().port(), server.port());
    let port = server.port();
    let pid = server.pid().expect("running server has a pid");

    bounded(async {
        let mut conn = server.conn().await;
        set(&mut conn, "k", "v").await;
        assert_eq!(get(&mut conn, "k").await.as_deref(), Some("v"));
    })
    .await;

    server.restart().unwrap();
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), Some(pid));
    assert!(server.is_running());
    bounded(async {
        let mut conn = server.conn().await;
        assert_eq!(get(&mut conn, "k").await, None, "no persistence");
    })
    .await;

    server.stop();
    assert!(!server.is_running());
    assert_eq!(server.pid(), None);
    server.stop(); // idempotent
    assert!(std::net::TcpStream::connect(server.addr()).is_err());

    server.restart().unwrap();
    assert!(server.is_running());
    bounded(async {
        let mut conn = server.conn().await;
        set(&mut conn, "k2", "v2").await;
        assert_eq!(get(&mut conn, "k2").await.as_deref(), Some("v2"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistence_survives_kill_and_restart() {
    let mut server = RedisServer::builder().persistence(true).start().unwrap();
    bounded(async {
        let mut conn = server.conn().await;
        set(&mut conn, "kept", "yes").await;
    })
    .await;
    server.restart().unwrap();
    bounded(async {
        let mut conn = server.conn().await;
        assert_eq!(get(&mut conn, "kept").await.as_deref(), Some("yes"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extra_args_are_applied() {
    let server = RedisServer::builder()
        .arg("maxmemory", "10mb")
        .arg("--maxmemory-policy", "allkeys-lru")
        .start()
        .unwrap();
    bounded(async {
        let mut conn = server.conn().await;
        let v: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(v, ["maxmemory", "10485760"]);
        let v: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory-policy")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(v, ["maxmemory-policy", "allkeys-lru"]);
        let v: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("appendonly")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(v, ["appendonly", "no"]);
        let v: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("save")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(v, ["save", ""]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume() {
    let server = RedisServer::start().unwrap();
    let mut conn = bounded(conn_with_timeout(&server.url(), Duration::from_millis(500))).await;
    let pong: String = bounded(redis::cmd("PING").query_async(&mut conn))
        .await
        .unwrap();
    assert_eq!(pong, "PONG");

    server.pause();
    let res: redis::RedisResult<String> = bounded(redis::cmd("PING").query_async(&mut conn)).await;
    let err = res.expect_err("a paused server must not answer");
    assert!(err.is_timeout(), "expected a timeout, got {err:?}");

    server.resume();
    bounded(async {
        let mut fresh = conn_with_timeout(&server.url(), Duration::from_secs(10)).await;
        let pong: String = redis::cmd("PING").query_async(&mut fresh).await.unwrap();
        assert_eq!(pong, "PONG");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_servers_use_different_ports() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let ports: HashSet<u16> = servers.iter().map(RedisServer::port).collect();
    assert_eq!(ports.len(), 3);
    for (i, server) in servers.iter().enumerate() {
        bounded(async {
            let mut conn = server.conn().await;
            set(&mut conn, "id", &i.to_string()).await;
        })
        .await;
    }
    for (i, server) in servers.iter().enumerate() {
        bounded(async {
            let mut conn = server.conn().await;
            assert_eq!(get(&mut conn, "id").await, Some(i.to_string()));
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commandstats_and_reset() {
    let server = RedisServer::start().unwrap();
    bounded(async {
        let mut conn = server.conn().await;
        server.reset_stats().await;
        for _ in 0..3 {
            let _: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
        }
        let _: i64 = redis::cmd("PUBLISH")
            .arg("ch")
            .arg("x")
            .query_async(&mut conn)
            .await
            .unwrap();
        let stats = server.commandstats().await;
        assert_eq!(stats.get("ping"), Some(&3), "{stats:?}");
        assert_eq!(stats.get("publish"), Some(&1), "{stats:?}");
        server.reset_stats().await;
        let stats = server.commandstats().await;
        assert_eq!(stats.get("ping"), None, "{stats:?}");
    })
    .await;
}

#[test]
fn drop_kills_the_process_and_removes_the_dir() {
    let server = RedisServer::start().unwrap();
    let dir = server.dir().to_path_buf();
    let addr = server.addr();
    let pid = server.pid().unwrap();
    assert!(dir.join("redis.log").exists());
    drop(server);
    assert!(!dir.exists());
    assert!(std::net::TcpStream::connect(addr).is_err());
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}
