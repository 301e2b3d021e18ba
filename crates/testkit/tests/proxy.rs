//! Tests of `FaultProxy` in front of a real redis-server.

use std::future::Future;
use std::time::{Duration, Instant};

use deadbolt_testkit::{FaultProxy, RedisServer};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisResult};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Generous bound that only catches hangs.
const HANG: Duration = Duration::from_secs(30);

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(HANG, f).await.expect("operation hung")
}

async fn try_conn(url: &str, response: Duration) -> RedisResult<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(response));
    redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

async fn conn(url: &str, response: Duration) -> MultiplexedConnection {
    try_conn(url, response).await.expect("connect")
}

async fn ping(conn: &mut MultiplexedConnection) -> RedisResult<String> {
    redis::cmd("PING").query_async(conn).await
}

async fn setup() -> (RedisServer, FaultProxy) {
    let server = RedisServer::start().unwrap();
    let proxy = FaultProxy::start(server.addr()).await.unwrap();
    (server, proxy)
}

/// Read from `sock` until the bytes received contain `needle`.
async fn read_until(sock: &mut TcpStream, buf: &mut Vec<u8>, needle: &[u8]) {
    let mut chunk = [0u8; 4096];
    while !buf.windows(needle.len()).any(|w| w == needle) {
        let n = sock.read(&mut chunk).await.unwrap();
        assert!(
            n > 0,
            "closed before {:?} arrived; got {:?}",
            String::from_utf8_lossy(needle),
            String::from_utf8_lossy(buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwards_commands() {
    let (_server, proxy) = setup().await;
    assert_eq!(
        proxy.url(),
        format!("redis://127.0.0.1:{}/", proxy.addr().port())
    );
    assert_eq!(proxy.connections(), 0);
    bounded(async {
        let mut c = conn(&proxy.url(), Duration::from_secs(10)).await;
        proxy.wait_for_connections(1).await;
        let () = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query_async(&mut c)
            .await
            .unwrap();
        let v: String = redis::cmd("GET")
            .arg("k")
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(v, "v");
        // A large value crosses many reads in both directions.
        let big = "x".repeat(1 << 20);
        let () = redis::cmd("SET")
            .arg("big")
            .arg(&big)
            .query_async(&mut c)
            .await
            .unwrap();
        let v: String = redis::cmd("GET")
            .arg("big")
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(v.len(), big.len());
        let mut c2 = conn(&proxy.url(), Duration::from_secs(10)).await;
        proxy.wait_for_connections(2).await;
        assert_eq!(ping(&mut c2).await.unwrap(), "PONG");
        drop(c);
        drop(c2);
        proxy.wait_for_connections(0).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resp3_through_the_proxy() {
    let (_server, proxy) = setup().await;
    bounded(async {
        let url = format!("{}?protocol=resp3", proxy.url());
        let mut c = conn(&url, Duration::from_secs(10)).await;
        let v: std::collections::HashMap<String, String> = redis::cmd("HELLO")
            .arg("3")
            .query_async(&mut c)
            .await
            .map(|v: redis::Value| {
                let redis::Value::Map(pairs) = v else {
                    panic!("HELLO 3 must answer a map, got {v:?}")
                };
                pairs
                    .into_iter()
                    .filter_map(|(k, v)| {
                        Some((
                            redis::from_redis_value::<String>(k).ok()?,
                            redis::from_redis_value::<String>(v).ok()?,
                        ))
                    })
                    .collect()
            })
            .unwrap();
        assert_eq!(v.get("proto").map(String::as_str), Some("3"));
        assert_eq!(ping(&mut c).await.unwrap(), "PONG");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_delay_is_applied_and_keeps_order() {
    let (_server, proxy) = setup().await;
    bounded(async {
        let mut c = conn(&proxy.url(), Duration::from_secs(20)).await;
        assert_eq!(ping(&mut c).await.unwrap(), "PONG");

        let delay = Duration::from_millis(400);
        proxy.set_reply_delay(delay);
        let started = Instant::now();
        assert_eq!(ping(&mut c).await.unwrap(), "PONG");
        assert!(
            started.elapsed() >= delay,
            "reply came after {:?}",
            started.elapsed()
        );

        // Many replies in flight while the delay changes still arrive in order.
        let mut pipe = redis::pipe();
        for _ in 0..200 {
            pipe.cmd("INCR").arg("counter");
        }
        let mut c2 = c.clone();
        let pending = tokio::spawn(async move { pipe.query_async::<Vec<i64>>(&mut c2).await });
        proxy.set_reply_delay(Duration::ZERO);
        let n: i64 = redis::cmd("INCR")
            .arg("counter")
            .query_async(&mut c)
            .await
            .unwrap();
        let results = pending.await.unwrap().unwrap();
        assert_eq!(results.len(), 200);
        assert!(results.windows(2).all(|w| w[1] == w[0] + 1), "{results:?}");
        assert!(n == 1 || n == 201, "n = {n}");

        let started = Instant::now();
        assert_eq!(ping(&mut c).await.unwrap(), "PONG");
        assert!(started.elapsed() < Duration::from_secs(10));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_reply_times_out_but_command_executes() {
    let (server, proxy) = setup().await;
    bounded(async {
        let mut direct = server.conn().await;
        let mut c = conn(&proxy.url(), Duration::from_millis(500)).await;
        let () = redis::cmd("SET")
            .arg("before")
            .arg("1")
            .query_async(&mut c)
            .await
            .unwrap();

        proxy.drop_reply_matching(b"victim", 1, Duration::from_secs(1));
        let res: RedisResult<()> = redis::cmd("SET")
            .arg("victim")
            .arg("42")
            .query_async(&mut c)
            .await;
        let err = res.expect_err("the reply must be withheld");
        assert!(err.is_timeout(), "expected a timeout, got {err:?}");

        // The command reached the server.
        let v: Option<String> = redis::cmd("GET")
            .arg("victim")
            .query_async(&mut direct)
            .await
            .unwrap();
        assert_eq!(v.as_deref(), Some("42"));

        // The silent connection is reset after the hold.
        proxy.wait_for_connections(0).await;
        assert!(ping(&mut c).await.is_err());

        // The rule is used up: a new connection works, even for the same key.
        let mut c = conn(&proxy.url(), Duration::from_secs(10)).await;
        let v: String = redis::cmd("GET")
            .arg("victim")
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(v, "42");
        let () = redis::cmd("SET")
            .arg("victim")
            .arg("43")
            .query_async(&mut c)
            .await
            .unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_reply_in_a_pipeline_delivers_earlier_replies_only() {
    let (server, proxy) = setup().await;
    bounded(async {
        let mut sock = TcpStream::connect(proxy.addr()).await.unwrap();
        proxy.drop_reply_matching(b"$6\r\nvictim", 1, Duration::from_millis(300));
        sock.write_all(
            b"*3\r\n$3\r\nSET\r\n$5\r\nfirst\r\n$1\r\n1\r\n\
              *3\r\n$3\r\nSET\r\n$6\r\nvictim\r\n$1\r\n2\r\n\
              *3\r\n$3\r\nSET\r\n$5\r\nthird\r\n$1\r\n3\r\n",
        )
        .await
        .unwrap();
        let mut got = Vec::new();
        let mut chunk = [0u8; 1024];
        loop {
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
        }
        assert_eq!(got, b"+OK\r\n", "only the first reply may arrive");
        let mut direct = server.conn().await;
        let vals: Vec<Option<String>> = redis::cmd("MGET")
            .arg("first")
            .arg("victim")
            .arg("third")
            .query_async(&mut direct)
            .await
            .unwrap();
        assert_eq!(vals, [Some("1".into()), Some("2".into()), Some("3".into())]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pubsub_frames_do_not_count_as_replies_resp2() {
    let (server, proxy) = setup().await;
    bounded(async {
        let mut direct = server.conn().await;
        let mut sock = TcpStream::connect(proxy.addr()).await.unwrap();
        let mut buf = Vec::new();
        sock.write_all(b"*3\r\n$9\r\nSUBSCRIBE\r\n$3\r\nch1\r\n$3\r\nch2\r\n")
            .await
            .unwrap();
        read_until(&mut sock, &mut buf, b"ch2\r\n:2\r\n").await;
        let _: i64 = redis::cmd("PUBLISH")
            .arg("ch1")
            .arg("hello")
            .query_async(&mut direct)
            .await
            .unwrap();
        read_until(&mut sock, &mut buf, b"hello\r\n").await;
        // PING in subscribed RESP2 mode answers `*2 pong ""`; withhold exactly that one.
        proxy.drop_reply_matching(b"PING", 1, Duration::from_millis(300));
        sock.write_all(b"*2\r\n$4\r\nPING\r\n$3\r\nabc\r\n")
            .await
            .unwrap();
        let before = buf.len();
        let mut chunk = [0u8; 1024];
        loop {
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        assert_eq!(&buf[before..], b"", "the PING reply must be withheld");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_frames_do_not_count_as_replies_resp3() {
    let (server, proxy) = setup().await;
    bounded(async {
        let mut direct = server.conn().await;
        let mut sock = TcpStream::connect(proxy.addr()).await.unwrap();
        let mut buf = Vec::new();
        sock.write_all(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n")
            .await
            .unwrap();
        read_until(&mut sock, &mut buf, b"modules").await;
        sock.write_all(b"*2\r\n$9\r\nSUBSCRIBE\r\n$3\r\nch1\r\n")
            .await
            .unwrap();
        read_until(
            &mut sock,
            &mut buf,
            b">3\r\n$9\r\nsubscribe\r\n$3\r\nch1\r\n:1\r\n",
        )
        .await;
        let _: i64 = redis::cmd("PUBLISH")
            .arg("ch1")
            .arg("hello")
            .query_async(&mut direct)
            .await
            .unwrap();
        read_until(&mut sock, &mut buf, b"hello\r\n").await;
        sock.write_all(b"*2\r\n$4\r\nECHO\r\n$4\r\nkeep\r\n")
            .await
            .unwrap();
        read_until(&mut sock, &mut buf, b"keep\r\n").await;
        // In one write: a PUBLISH this connection itself receives (a push frame and the
        // PUBLISH reply) and an ECHO whose reply is withheld.
        proxy.drop_reply_matching(b"gone", 1, Duration::from_millis(300));
        sock.write_all(
            b"*3\r\n$7\r\nPUBLISH\r\n$3\r\nch1\r\n$5\r\nagain\r\n\
              *2\r\n$4\r\nECHO\r\n$4\r\ngone\r\n",
        )
        .await
        .unwrap();
        let before = buf.len();
        let mut chunk = [0u8; 1024];
        loop {
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        // RESP3 does not order a push frame against the replies around it: Redis 7 sends
        // the push before the PUBLISH reply, Valkey 8 after it. In either order both must
        // arrive: had the proxy counted the push as a reply, the PUBLISH reply or the push
        // would have been taken for the ECHO reply and withheld instead of it.
        let push = ">3\r\n$7\r\nmessage\r\n$3\r\nch1\r\n$5\r\nagain\r\n";
        let reply = ":1\r\n";
        let got = String::from_utf8_lossy(&buf[before..]);
        assert!(
            got == format!("{push}{reply}") || got == format!("{reply}{push}"),
            "the push and the PUBLISH reply arrive (in either order), the ECHO reply is \
             withheld; got {got:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackhole_swallows_then_resets() {
    let (server, proxy) = setup().await;
    bounded(async {
        let mut c = conn(&proxy.url(), Duration::from_millis(500)).await;
        assert_eq!(ping(&mut c).await.unwrap(), "PONG");
        proxy.wait_for_connections(1).await;
        server.reset_stats().await;

        proxy.set_blackhole(true);
        let err = ping(&mut c).await.expect_err("blackholed");
        assert!(err.is_timeout(), "expected a timeout, got {err:?}");
        // A new connection cannot complete its handshake either.
        assert!(try_conn(&proxy.url(), Duration::from_millis(500))
            .await
            .is_err());
        // Nothing reached the server.
        let stats = server.commandstats().await;
        assert_eq!(stats.get("ping"), None, "{stats:?}");

        proxy.set_blackhole(false);
        proxy.wait_for_connections(0).await;
        assert!(ping(&mut c).await.is_err(), "the old connection is reset");

        let mut c = conn(&proxy.url(), Duration::from_secs(10)).await;
        assert_eq!(ping(&mut c).await.unwrap(), "PONG");
        let stats = server.commandstats().await;
        assert_eq!(stats.get("ping"), Some(&1), "{stats:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_all_closes_every_connection() {
    let (_server, proxy) = setup().await;
    bounded(async {
        let mut a = conn(&proxy.url(), Duration::from_secs(10)).await;
        let mut b = conn(&proxy.url(), Duration::from_secs(10)).await;
        assert_eq!(ping(&mut a).await.unwrap(), "PONG");
        assert_eq!(ping(&mut b).await.unwrap(), "PONG");
        proxy.wait_for_connections(2).await;

        proxy.reset_all();
        proxy.wait_for_connections(0).await;
        assert!(ping(&mut a).await.is_err());
        assert!(ping(&mut b).await.is_err());

        let mut c = conn(&proxy.url(), Duration::from_secs(10)).await;
        assert_eq!(ping(&mut c).await.unwrap(), "PONG");
        assert_eq!(proxy.connections(), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuse_rejects_new_connections_only() {
    let (_server, proxy) = setup().await;
    bounded(async {
        let mut a = conn(&proxy.url(), Duration::from_secs(10)).await;
        proxy.set_refuse(true);
        assert!(try_conn(&proxy.url(), Duration::from_secs(2))
            .await
            .is_err());
        assert_eq!(
            ping(&mut a).await.unwrap(),
            "PONG",
            "existing connections stay"
        );
        proxy.set_refuse(false);
        let mut b = conn(&proxy.url(), Duration::from_secs(10)).await;
        assert_eq!(ping(&mut b).await.unwrap(), "PONG");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_proxy_closes_connections() {
    let (_server, proxy) = setup().await;
    bounded(async {
        let mut sock = TcpStream::connect(proxy.addr()).await.unwrap();
        sock.write_all(b"*1\r\n$4\r\nPING\r\n").await.unwrap();
        let mut buf = Vec::new();
        read_until(&mut sock, &mut buf, b"+PONG\r\n").await;
        drop(proxy);
        let mut chunk = [0u8; 64];
        // EOF or reset, but no hang.
        assert!(matches!(sock.read(&mut chunk).await, Ok(0) | Err(_)));
    })
    .await;
}
