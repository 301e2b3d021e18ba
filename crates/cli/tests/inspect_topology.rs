//! `deadbolt inspect` and `deadbolt force-unlock` with `--topology cluster`
//! (seed URLs in `--redis`) and `--topology sentinel` (Sentinel URLs in
//! `--redis`, `--sentinel-master`): a lock held through the library is shown
//! and force-unlocked through the binary; on a cluster the lock's keys are on
//! another node than the first seed, and a key of another type there is
//! refused; the flags that do not go together are refused before anything
//! connects.
//!
//! Nothing asserts speed: the only time bounds catch hangs.

use deadbolt_core::Acquire as _;
use std::process::Command;

use clap::Parser as _;
use deadbolt_cli::{Cli, ForceUnlockArgs, InspectArgs, PrimitiveKind, Topology};
use deadbolt_testkit::support::output_within;
use deadbolt_testkit::{RedisCluster, RedisSentinelSet};

/// Run the binary off the runtime's thread (the test's clients keep
/// renewing meanwhile); its stdout, or a panic with its stderr.
async fn deadbolt_stdout(args: Vec<String>) -> String {
    let out = tokio::task::spawn_blocking(move || {
        output_within(
            &format!("deadbolt {args:?}"),
            Command::new(env!("CARGO_BIN_EXE_deadbolt")).args(&args),
        )
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

/// `deadbolt <cmd> <name> --namespace it <topology...> <extra...>`.
fn cli_args(cmd: &str, name: &str, topology: &[&str], extra: &[&str]) -> Vec<String> {
    [cmd, name, "--namespace", "it"]
        .iter()
        .chain(topology)
        .chain(extra)
        .map(|s| (*s).to_string())
        .collect()
}

/// Inspect shows the holder; force-unlock frees it; inspect shows it free.
async fn show_and_force_unlock(lock: &deadbolt_lock::Lock, name: &str, topology: &[&str]) {
    let guard = lock.lock().await.unwrap();
    let shown = deadbolt_stdout(cli_args("inspect", name, topology, &[])).await;
    assert!(
        shown.starts_with(&format!("lock {name}  (key it:{{{name}}}:lock)\n")),
        "{shown}"
    );
    for line in [
        "  state       held\n".to_string(),
        format!("  owner       {}\n", lock.owner()),
        "  hold count  1\n".to_string(),
        format!("  token       {}\n", guard.fencing_token()),
    ] {
        assert!(shown.contains(&line), "{line:?} in\n{shown}");
    }

    let printed = deadbolt_stdout(cli_args("force-unlock", name, topology, &["--yes"])).await;
    assert_eq!(
        printed,
        format!("{name}: unlocked (the hold was deleted)\n")
    );
    assert!(
        !lock.is_locked().await.unwrap(),
        "force-unlock left it held"
    );
    let shown = deadbolt_stdout(cli_args("inspect", name, topology, &[])).await;
    assert!(shown.contains("  state       free\n"), "{shown}");
    drop(guard);
}

/// A name whose lock key's slot is served by another master than node 0,
/// the first seed: a plain connection to the seed would get MOVED.
async fn name_off_first_seed(cluster: &RedisCluster, prefix: &str) -> String {
    for i in 0..1000 {
        let name = format!("{prefix}{i}");
        let slot = RedisCluster::keyslot(format!("it:{{{name}}}:lock"));
        if cluster.master_of_slot(slot).await.unwrap() != 0 {
            return name;
        }
    }
    panic!("every name fell on node 0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_and_force_unlock_on_a_cluster() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap()
        .expect("start a cluster (needs redis-server and redis-cli)");
    assert_eq!(cluster.urls()[0], cluster.node(0).url());
    let seeds = cluster.urls().join(",");
    let topology = ["--topology", "cluster", "--redis", &seeds];
    let client = deadbolt_core::Client::cluster(&cluster.urls())
        .namespace("it")
        .build()
        .await
        .unwrap();

    let name = name_off_first_seed(&cluster, "orders:").await;
    let lock = deadbolt_lock::Lock::new(&client, &name);
    show_and_force_unlock(&lock, &name, &topology).await;

    // A key of another type on a node other than the first seed: the TYPE
    // check reaches it there, refuses it, and nothing is deleted.
    let other = name_off_first_seed(&cluster, "user:").await;
    let key = format!("it:{{{other}}}:lock");
    let mut conn = redis::cluster::ClusterClient::new(cluster.urls())
        .unwrap()
        .get_async_connection()
        .await
        .unwrap();
    let () = redis::cmd("SET")
        .arg(&key)
        .arg("user data")
        .query_async(&mut conn)
        .await
        .unwrap();
    let target = InspectArgs {
        name: other,
        kind: PrimitiveKind::Lock,
        redis: seeds.clone(),
        topology: Topology::Cluster,
        sentinel_master: None,
        namespace: "it".into(),
        watch: false,
    };
    let force = ForceUnlockArgs {
        target: target.clone(),
        yes: true,
    };
    let refused = format!("refused: {key} holds a string, not a lock");
    let err = deadbolt_cli::force_unlock(&force).await.unwrap_err();
    assert_eq!(format!("{err:#}"), refused);
    let err = deadbolt_cli::inspect(&target).await.unwrap_err();
    assert_eq!(format!("{err:#}"), refused);
    let value: String = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "user data", "the refused key was changed");
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_and_force_unlock_behind_sentinel() {
    let set = tokio::task::spawn_blocking(RedisSentinelSet::start)
        .await
        .unwrap()
        .expect("start a Sentinel set (needs redis-server)");
    // A Sentinel that does not answer first: the next one is asked.
    let sentinels = std::iter::once("redis://127.0.0.1:1/".to_string())
        .chain(set.sentinel_urls())
        .collect::<Vec<_>>()
        .join(",");
    let topology = [
        "--topology",
        "sentinel",
        "--sentinel-master",
        set.master_name(),
        "--redis",
        &sentinels,
    ];
    let client = deadbolt_core::Client::sentinel(&set.sentinel_urls(), set.master_name())
        .namespace("it")
        .build()
        .await
        .unwrap();
    let lock = deadbolt_lock::Lock::new(&client, "orders:42");
    show_and_force_unlock(&lock, "orders:42", &topology).await;

    // A master the Sentinels do not know.
    let target = InspectArgs {
        name: "orders:42".into(),
        kind: PrimitiveKind::Lock,
        redis: set.sentinel_urls().join(","),
        topology: Topology::Sentinel,
        sentinel_master: Some("nope".into()),
        namespace: "it".into(),
        watch: false,
    };
    let err = format!("{:#}", deadbolt_cli::inspect(&target).await.unwrap_err());
    assert!(
        err.starts_with("connecting to the master \"nope\" of the Sentinels at "),
        "{err}"
    );
    client.shutdown().await;
}

fn parse(args: &[&str]) -> Cli {
    Cli::try_parse_from(std::iter::once("deadbolt").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Refused with the message, before anything connects (`--redis` names a
/// closed port: a connect would fail otherwise).
#[tokio::test]
async fn topology_flags_are_checked_before_anything_connects() {
    let deadbolt_cli::Command::Inspect(defaults) = parse(&["inspect", "x"]).command else {
        panic!("expected inspect");
    };
    assert_eq!(defaults.topology, Topology::Standalone);
    assert_eq!(defaults.sentinel_master, None);
    assert!(Cli::try_parse_from(["deadbolt", "inspect", "x", "--topology", "mesh"]).is_err());

    let cases: [(&[&str], &str); 5] = [
        (
            &["inspect", "x", "--sentinel-master", "m"],
            "--sentinel-master goes with --topology sentinel",
        ),
        (
            &["inspect", "x", "--topology", "sentinel"],
            "--topology sentinel: name the master with --sentinel-master NAME",
        ),
        (
            &[
                "force-unlock",
                "x",
                "--yes",
                "--topology",
                "sentinel",
                "--sentinel-master",
                "",
            ],
            "--topology sentinel: name the master with --sentinel-master NAME",
        ),
        (
            &["inspect", "x", "--topology", "cluster", "--redis", " , "],
            "--redis with --topology cluster: give the cluster's seed URLs, comma-separated",
        ),
        (
            &[
                "force-unlock",
                "x",
                "--yes",
                "--topology",
                "sentinel",
                "--sentinel-master",
                "m",
                "--redis",
                ",",
            ],
            "--redis with --topology sentinel: give the Sentinels' URLs, comma-separated",
        ),
    ];
    for (flags, expected) in cases {
        let mut flags = flags.to_vec();
        if !flags.contains(&"--redis") {
            flags.extend(["--redis", "redis://127.0.0.1:1/"]);
        }
        let err = match parse(&flags).command {
            deadbolt_cli::Command::Inspect(a) => deadbolt_cli::inspect(&a).await.unwrap_err(),
            deadbolt_cli::Command::ForceUnlock(a) => {
                deadbolt_cli::force_unlock(&a).await.unwrap_err()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(format!("{err:#}"), expected, "{flags:?}");
    }
}
