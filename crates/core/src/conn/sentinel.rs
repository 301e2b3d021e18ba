//! Behind Sentinel: where the master is (asked at every connection), and
//! a watch of the sentinels' `+switch-master` that drops the connections
//! at once when they move it.

use std::sync::Weak;
use std::time::Duration;

use redis::ConnectionInfo;

use super::{resp3_info, Conn};

/// Ask the sentinels, in turn, where the master called `master` is, and
/// make a client for it with `node`'s settings. The first sentinel that
/// answers with an address wins.
pub(super) async fn resolve_master(
    sentinels: &[redis::Client],
    master: &str,
    node: &ConnectionInfo,
    timeout: Duration,
) -> std::result::Result<redis::Client, String> {
    let info = sentinel_master(sentinels, master, node, timeout).await?;
    redis::Client::open(resp3_info(info)).map_err(|e| format!("master address: {e}"))
}

/// Where the Sentinel set at `sentinels` says the master it monitors as
/// `master` is, as connection settings: `node`'s (credentials, database,
/// TLS) at the master's address. The sentinels are asked in turn, each
/// within `timeout`; the first that names an address wins. This is how a
/// client built with [`ClientBuilder::sentinel`](crate::ClientBuilder::sentinel)
/// finds the master at every (re)connection; tools that need their own
/// connection to the same master (`deadbolt inspect`) use it too.
///
/// # Errors
/// Why no sentinel named an address (the last sentinel's answer or
/// error), as text.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn sentinel_master(
    sentinels: &[redis::Client],
    master: &str,
    node: &ConnectionInfo,
    timeout: Duration,
) -> std::result::Result<ConnectionInfo, String> {
    let mut last = String::from("no sentinel given");
    for s in sentinels {
        let ask = async {
            let mut c = s.get_multiplexed_async_connection().await?;
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(master)
                .query_async::<Option<(String, u16)>>(&mut c)
                .await
        };
        let addr = match tokio::time::timeout(timeout, ask).await {
            Ok(Ok(Some(addr))) => addr,
            Ok(Ok(None)) => {
                last = format!(
                    "sentinel {} knows no master {master:?}",
                    s.get_connection_info().addr()
                );
                continue;
            }
            Ok(Err(e)) => {
                last = format!("sentinel {}: {e}", s.get_connection_info().addr());
                continue;
            }
            Err(_) => {
                last = format!(
                    "sentinel {} did not answer in time",
                    s.get_connection_info().addr()
                );
                continue;
            }
        };
        let (host, port) = addr;
        let addr = match node.addr() {
            redis::ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => redis::ConnectionAddr::TcpTls {
                host,
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => redis::ConnectionAddr::Tcp(host, port),
        };
        return Ok(node.clone().set_addr(addr));
    }
    Err(last)
}

/// Behind Sentinel: listen for `+switch-master` on one sentinel after
/// another, and when the sentinels move `master`, drop the connection (and
/// its peer) so that both reconnect to the new master at once. Without it a
/// client would keep writing to the old master, which goes on accepting
/// writes until the sentinels demote it (some seconds later), writes the
/// new master never sees.
pub(super) async fn watch_sentinels(
    conn: Weak<Conn>,
    sentinels: Vec<redis::Client>,
    master: String,
) {
    use futures::StreamExt;
    let mut backoff = Duration::from_millis(50);
    for s in sentinels.iter().cycle() {
        if conn.upgrade().is_none_or(|c| c.is_closed()) {
            return;
        }
        let listen = async {
            let mut ps = s.get_async_pubsub().await?;
            ps.subscribe("+switch-master").await?;
            let mut messages = ps.on_message();
            while let Some(msg) = messages.next().await {
                let text: String = msg.get_payload().unwrap_or_default();
                if text.split(' ').next() != Some(master.as_str()) {
                    continue;
                }
                let Some(c) = conn.upgrade() else { break };
                tracing::info!(master = %master, "sentinels switched the master; reconnecting");
                for c in std::iter::once(c.clone()).chain(c.peer.get().and_then(Weak::upgrade)) {
                    let epoch = c.epoch();
                    c.mark_down(epoch);
                }
            }
            Ok::<(), redis::RedisError>(())
        };
        let stop = async {
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if conn.upgrade().is_none_or(|c| c.is_closed()) {
                    return;
                }
            }
        };
        tokio::select! {
            r = listen => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "sentinel watch failed; trying the next sentinel");
                }
            }
            () = stop => return,
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}
