//! Tests of `RedisCluster` and `RedisSentinelSet` against real redis-server processes.
//!
//! Each test starts its own topology; they take seconds each (a cluster is stable about
//! 2 s after start, a Sentinel failover takes about 10 s).

use std::time::Instant;

use deadbolt_testkit::support::{cmd, within};
use deadbolt_testkit::{RedisCluster, RedisSentinelSet, RedisServer};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;

fn start_cluster() -> RedisCluster {
    let t = Instant::now();
    let cluster = RedisCluster::start().expect("start a Redis Cluster");
    eprintln!("cluster stable after {:?}", t.elapsed());
    cluster
}

async fn cluster_conn(cluster: &RedisCluster) -> ClusterConnection {
    let client = ClusterClient::new(cluster.urls()).expect("cluster client");
    within("cluster connect", client.get_async_connection())
        .await
        .expect("cluster connection")
}

async fn set(conn: &mut ClusterConnection, key: &str, value: &str) {
    let () = within(
        "SET",
        redis::cmd("SET").arg(key).arg(value).query_async(conn),
    )
    .await
    .unwrap_or_else(|e| panic!("SET {key}: {e}"));
}

async fn get(conn: &mut ClusterConnection, key: &str) -> Option<String> {
    within("GET", redis::cmd("GET").arg(key).query_async(conn))
        .await
        .unwrap_or_else(|e| panic!("GET {key}: {e}"))
}

#[tokio::test]
async fn cluster_starts_with_documented_layout_and_serves_keys() {
    let cluster = start_cluster();
    assert_eq!(cluster.nodes().len(), 6);
    assert_eq!(cluster.urls().len(), 3);
    assert_eq!(cluster.masters().await.unwrap(), vec![0, 1, 2]);
    for m in 0..3 {
        assert_eq!(cluster.replica_of(m).await.unwrap(), m + 3);
    }
    assert_eq!(cluster.master_of_slot(0).await.unwrap(), 0);
    assert_eq!(cluster.master_of_slot(16383).await.unwrap(), 2);
    assert!(cluster.master_of_slot(16384).await.is_err());
    for i in 0..6 {
        let info: String = cmd(cluster.node(i), &["CLUSTER", "INFO"]).await;
        assert!(info.contains("cluster_state:ok"), "node {i}: {info}");
        let myid: String = cmd(cluster.node(i), &["CLUSTER", "MYID"]).await;
        assert_eq!(myid, cluster.node_id(i));
    }

    let mut conn = cluster_conn(&cluster).await;
    // Keys spread over all three masters.
    let keys: Vec<String> = (0..30).map(|i| format!("key:{i}")).collect();
    let mut owners = std::collections::HashSet::new();
    for k in &keys {
        set(&mut conn, k, &format!("v-{k}")).await;
        owners.insert(
            cluster
                .master_of_slot(RedisCluster::keyslot(k))
                .await
                .unwrap(),
        );
    }
    assert_eq!(owners.len(), 3, "30 keys should land on every master");
    for k in &keys {
        assert_eq!(get(&mut conn, k).await, Some(format!("v-{k}")));
    }
}

#[tokio::test]
async fn keyslot_matches_cluster_keyslot() {
    // CLUSTER KEYSLOT needs cluster mode, not a cluster: one node is enough.
    let node = RedisServer::builder().cluster(true).start().unwrap();
    assert!(node.cluster_port().is_some());
    let mut conn = node.conn().await;
    let mut keys: Vec<Vec<u8>> = [
        "",
        "a",
        "foo",
        "123456789",
        "{user1000}.following",
        "{user1000}.followers",
        "foo{}{bar}",
        "foo{{bar}}zap",
        "foo{bar}{zap}",
        "{",
        "}",
        "{}",
        "deadbolt:{lock}:queue",
        "ünïcødé",
    ]
    .iter()
    .map(|k| k.as_bytes().to_vec())
    .collect();
    keys.extend((0u16..300).map(|i| {
        let b = i.to_le_bytes();
        vec![b[0], b'{', b[1], b'}', 0xff]
    }));
    for key in &keys {
        let expected: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(RedisCluster::keyslot(key), expected, "key {key:?}");
    }
}

#[tokio::test]
async fn migrate_slot_moves_keys_to_new_owner() {
    let cluster = start_cluster();
    let mut conn = cluster_conn(&cluster).await;
    let keys: Vec<String> = (0..250).map(|i| format!("{{mig}}:{i}")).collect();
    for k in &keys {
        set(&mut conn, k, k).await;
    }
    let slot = RedisCluster::keyslot("{mig}");
    let from = cluster.master_of_slot(slot).await.unwrap();
    let to = (from + 1) % 3;
    let count = |i: usize| {
        let node = cluster.node(i);
        async move {
            let n: u64 = cmd(node, &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]).await;
            n
        }
    };
    assert_eq!(count(from).await, 250);

    let t = Instant::now();
    cluster.migrate_slot(slot, to).await.unwrap();
    eprintln!("migrate_slot (250 keys) took {:?}", t.elapsed());

    assert_eq!(cluster.master_of_slot(slot).await.unwrap(), to);
    assert_eq!(count(to).await, 250);
    assert_eq!(count(from).await, 0);
    for i in 0..6 {
        let nodes: String = cmd(cluster.node(i), &["CLUSTER", "NODES"]).await;
        assert!(
            !nodes.contains('['),
            "node {i} still has an open slot: {nodes}"
        );
    }
    // The old connection follows the MOVED redirect.
    for k in &keys {
        assert_eq!(get(&mut conn, k).await.as_deref(), Some(k.as_str()));
    }
    // Moving it to where it is does nothing.
    cluster.migrate_slot(slot, to).await.unwrap();
    assert!(cluster.begin_migration(slot, to).await.is_err());
}

#[tokio::test]
async fn migration_in_progress_redirects_with_ask() {
    let cluster = start_cluster();
    let mut conn = cluster_conn(&cluster).await;
    set(&mut conn, "{ask}:old", "1").await;
    let slot = RedisCluster::keyslot("{ask}");
    let from = cluster.master_of_slot(slot).await.unwrap();
    let to = (from + 2) % 3;

    let migration = cluster.begin_migration(slot, to).await.unwrap();
    assert_eq!(
        (migration.slot(), migration.source(), migration.target()),
        (slot, from, to)
    );
    let mut source = cluster.node(from).conn().await;
    let ask = |key: &'static str| {
        let mut c = source.clone();
        async move {
            redis::cmd("GET")
                .arg(key)
                .query_async::<Option<String>>(&mut c)
                .await
        }
    };
    // A key the source still holds is served there; a missing one is sent elsewhere.
    assert_eq!(ask("{ask}:old").await.unwrap().as_deref(), Some("1"));
    let target = cluster.node(to).addr().to_string();
    let err = ask("{ask}:new").await.unwrap_err();
    assert_eq!(err.code(), Some("ASK"), "{err}");
    assert_eq!(err.redirect_node(), Some((target.as_str(), slot)));
    // A client writes a new key through the ASK redirect (it lands on the target).
    set(&mut conn, "{ask}:new", "2").await;

    assert_eq!(migration.move_keys().await.unwrap(), 1);
    let err = ask("{ask}:old").await.unwrap_err();
    assert_eq!(err.code(), Some("ASK"), "{err}");
    assert_eq!(get(&mut conn, "{ask}:old").await.as_deref(), Some("1"));
    assert_eq!(get(&mut conn, "{ask}:new").await.as_deref(), Some("2"));

    migration.finish().await.unwrap();
    assert_eq!(cluster.master_of_slot(slot).await.unwrap(), to);
    let err = ask("{ask}:old").await.unwrap_err();
    assert_eq!(err.code(), Some("MOVED"), "{err}");
    assert_eq!(err.redirect_node(), Some((target.as_str(), slot)));
    let n: u64 = cmd(
        cluster.node(to),
        &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()],
    )
    .await;
    assert_eq!(n, 2);
    let () = redis::cmd("PING").query_async(&mut source).await.unwrap();
}

#[tokio::test]
async fn failover_swaps_roles_and_keeps_replicated_data() {
    let cluster = start_cluster();
    let mut conn = cluster_conn(&cluster).await;
    set(&mut conn, "{fo}:k", "before").await;
    let slot = RedisCluster::keyslot("{fo}");
    let master = cluster.master_of_slot(slot).await.unwrap();
    let replica = cluster.replica_of(master).await.unwrap();
    cluster.wait_replicated(master).await.unwrap();
    let on_replica: u64 = cmd(
        cluster.node(replica),
        &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()],
    )
    .await;
    assert_eq!(on_replica, 1);

    let t = Instant::now();
    let new = cluster.failover(master).await.unwrap();
    eprintln!("CLUSTER FAILOVER took {:?}", t.elapsed());
    assert_eq!(new, replica);
    assert_eq!(cluster.master_of_slot(slot).await.unwrap(), new);
    assert_eq!(cluster.replica_of(new).await.unwrap(), master);
    assert!(cluster.masters().await.unwrap().contains(&new));
    assert!(!cluster.masters().await.unwrap().contains(&master));
    let role: String = cmd(cluster.node(master), &["INFO", "replication"]).await;
    assert!(role.contains("role:slave"), "{role}");

    assert_eq!(get(&mut conn, "{fo}:k").await.as_deref(), Some("before"));
    set(&mut conn, "{fo}:k", "after").await;
    let mut direct = cluster.node(new).conn().await;
    let v: Option<String> = redis::cmd("GET")
        .arg("{fo}:k")
        .query_async(&mut direct)
        .await
        .unwrap();
    assert_eq!(v.as_deref(), Some("after"));

    // And back, with the swapped roles.
    cluster.wait_replicated(new).await.unwrap();
    let t = Instant::now();
    assert_eq!(cluster.failover(new).await.unwrap(), master);
    eprintln!("CLUSTER FAILOVER back took {:?}", t.elapsed());
    assert_eq!(get(&mut conn, "{fo}:k").await.as_deref(), Some("after"));
}

#[tokio::test]
async fn failover_force_replaces_a_paused_master() {
    let cluster = start_cluster();
    let mut conn = cluster_conn(&cluster).await;
    set(&mut conn, "{pause}:k", "v").await;
    let slot = RedisCluster::keyslot("{pause}");
    let master = cluster.master_of_slot(slot).await.unwrap();
    cluster.wait_replicated(master).await.unwrap();

    cluster.pause_node(master);
    let t = Instant::now();
    let new = cluster.failover_force(master).await.unwrap();
    eprintln!("CLUSTER FAILOVER FORCE took {:?}", t.elapsed());
    assert_eq!(cluster.master_of_slot(slot).await.unwrap(), new);
    assert!(!cluster.urls().contains(&cluster.node(master).url()));
    // A fresh client: the old one would send the GET to the paused master it knows and, as
    // redis-rs sets no response timeout for clusters by default, wait for ever.
    drop(conn);
    let mut conn = cluster_conn(&cluster).await;
    assert_eq!(get(&mut conn, "{pause}:k").await.as_deref(), Some("v"));

    cluster.resume_node(master);
    let t = Instant::now();
    cluster.wait_stable().await.unwrap();
    eprintln!(
        "resumed old master rejoined as a replica after {:?}",
        t.elapsed()
    );
    assert_eq!(cluster.replica_of(new).await.unwrap(), master);
}

#[tokio::test]
async fn paused_master_is_failed_over_automatically() {
    let cluster = start_cluster();
    let mut conn = cluster_conn(&cluster).await;
    set(&mut conn, "{auto}:k", "v").await;
    let slot = RedisCluster::keyslot("{auto}");
    let master = cluster.master_of_slot(slot).await.unwrap();
    let replica = cluster.replica_of(master).await.unwrap();
    cluster.wait_replicated(master).await.unwrap();

    cluster.pause_node(master);
    let t = Instant::now();
    cluster.wait_stable().await.unwrap();
    eprintln!(
        "automatic failover of a paused master took {:?}",
        t.elapsed()
    );
    assert_eq!(cluster.master_of_slot(slot).await.unwrap(), replica);

    let mut cluster = cluster;
    cluster.kill_node(master);
    cluster.wait_stable().await.unwrap();
    drop(conn);
    let mut conn = cluster_conn(&cluster).await;
    assert_eq!(get(&mut conn, "{auto}:k").await.as_deref(), Some("v"));
    assert!(cluster.replica_of(replica).await.is_err());
}

#[tokio::test]
async fn sentinel_failover_moves_the_master() {
    let t = Instant::now();
    let set = RedisSentinelSet::start().expect("start Sentinels");
    eprintln!("sentinel set ready after {:?}", t.elapsed());
    assert_eq!(set.sentinel_urls().len(), 3);
    assert_eq!(set.sentinel_addrs().len(), 3);
    assert_eq!(set.master().await.unwrap(), 0);
    for s in set.sentinels() {
        let addr: (String, u16) = cmd(
            s,
            &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", set.master_name()],
        )
        .await;
        assert_eq!(addr, ("127.0.0.1".to_owned(), set.node(0).port()));
    }

    let mut old = set.node(0).conn().await;
    let () = redis::cmd("SET")
        .arg("k")
        .arg("before")
        .query_async(&mut old)
        .await
        .unwrap();
    set.wait_replicated().await.unwrap();

    let t = Instant::now();
    let new = set.failover().await.unwrap();
    eprintln!("SENTINEL FAILOVER took {:?}", t.elapsed());
    assert_eq!(new, 1);
    assert_eq!(set.master().await.unwrap(), 1);
    let mut conn = set.node(1).conn().await;
    let v: Option<String> = redis::cmd("GET")
        .arg("k")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(v.as_deref(), Some("before"));
    let () = redis::cmd("SET")
        .arg("k")
        .arg("after")
        .query_async(&mut conn)
        .await
        .unwrap();
    // Sentinel closed the old master's client connections when it made it a replica.
    assert!(redis::cmd("PING")
        .query_async::<()>(&mut old)
        .await
        .is_err());
    let mut old = set.node(0).conn().await;
    let err = redis::cmd("SET")
        .arg("k")
        .arg("stale")
        .query_async::<()>(&mut old)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("READONLY"), "{err}");
    set.wait_replicated().await.unwrap();
    let v: Option<String> = redis::cmd("GET")
        .arg("k")
        .query_async(&mut old)
        .await
        .unwrap();
    assert_eq!(
        v.as_deref(),
        Some("after"),
        "the old master replicates the new one"
    );
}

#[tokio::test]
async fn sentinels_fail_a_paused_master_over_on_their_own() {
    let set = RedisSentinelSet::start().expect("start Sentinels");
    let mut conn = set.node(0).conn().await;
    let () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query_async(&mut conn)
        .await
        .unwrap();
    set.wait_replicated().await.unwrap();

    set.pause_node(0);
    let t = Instant::now();
    set.wait_master(1).await.unwrap();
    eprintln!(
        "automatic Sentinel failover of a paused master took {:?}",
        t.elapsed()
    );
    assert_eq!(set.master().await.unwrap(), 1);
    let mut new = set.node(1).conn().await;
    let v: Option<String> = redis::cmd("GET")
        .arg("k")
        .query_async(&mut new)
        .await
        .unwrap();
    assert_eq!(v.as_deref(), Some("v"));

    set.resume_node(0);
    let t = Instant::now();
    set.wait_master(1).await.unwrap();
    eprintln!(
        "resumed old master became a replica after {:?}",
        t.elapsed()
    );
}
