//! A slot on its way from one master to another.

use std::io;

use super::{RedisCluster, CHANGE_TIMEOUT, MIGRATE_BATCH, MIGRATE_TIMEOUT_MS};
use crate::topology::{cmd, query, wait};

/// A slot in the middle of a live migration, from
/// [`RedisCluster::begin_migration`]: MIGRATING on its owner (the source), IMPORTING on the
/// target.
///
/// Meanwhile the source serves the keys it still holds and answers `-ASK <target>` for any
/// other key of the slot; the target serves such a key only to a client that sent `ASKING`
/// first. [`move_keys`](Self::move_keys) moves the keys the source holds;
/// [`finish`](Self::finish) moves the rest and hands the slot over.
///
/// Dropping the handle without [`finish`](Self::finish) leaves the slot in this state.
///
/// # Examples
///
/// ```no_run
/// # async fn example() -> std::io::Result<()> {
/// use deadbolt_testkit::RedisCluster;
///
/// let cluster = RedisCluster::start()?;
/// let slot = RedisCluster::keyslot("lock:a");
/// let to = (cluster.master_of_slot(slot).await? + 1) % 3;
/// let migration = cluster.begin_migration(slot, to).await?;
/// // ... clients run against a slot that answers -ASK ...
/// migration.move_keys().await?;
/// // ... and now against keys that live on the target ...
/// migration.finish().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "the slot stays MIGRATING/IMPORTING until finish() is called"]
pub struct SlotMigration<'a> {
    cluster: &'a RedisCluster,
    slot: u16,
    from: usize,
    to: usize,
}

impl<'a> SlotMigration<'a> {
    pub(super) fn new(cluster: &'a RedisCluster, slot: u16, from: usize, to: usize) -> Self {
        Self {
            cluster,
            slot,
            from,
            to,
        }
    }

    /// The slot being moved.
    pub fn slot(&self) -> u16 {
        self.slot
    }

    /// Index of the node the slot moves away from.
    pub fn source(&self) -> usize {
        self.from
    }

    /// Index of the node the slot moves to.
    pub fn target(&self) -> usize {
        self.to
    }

    /// Move every key of the slot the source holds to the target: `CLUSTER GETKEYSINSLOT`
    /// then one `MIGRATE ... KEYS` per batch of up to 100 keys, until the source holds none.
    /// Returns how many keys were moved.
    ///
    /// # Errors
    ///
    /// If a node does not answer or `MIGRATE` fails (for example `-BUSYKEY`: a client created
    /// the key on the target through `ASKING` while the source still held it).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: each `MIGRATE` moves its keys atomically; a dropped call leaves some keys
    /// on either side, which is a state the migration passes through anyway.
    pub async fn move_keys(&self) -> io::Result<usize> {
        let source = self.cluster.node(self.from);
        let slot = self.slot.to_string();
        let batch = MIGRATE_BATCH.to_string();
        let mut moved = 0;
        loop {
            let keys: Vec<Vec<u8>> =
                query(source, &cmd(&["CLUSTER", "GETKEYSINSLOT", &slot, &batch])).await?;
            if keys.is_empty() {
                return Ok(moved);
            }
            let mut migrate = redis::cmd("MIGRATE");
            migrate
                .arg("127.0.0.1")
                .arg(self.cluster.node(self.to).port())
                .arg("")
                .arg(0)
                .arg(MIGRATE_TIMEOUT_MS)
                .arg("KEYS")
                .arg(&keys);
            // `OK`, or `NOKEY` when the keys expired or were deleted meanwhile.
            let _: redis::Value = query(source, &migrate).await?;
            moved += keys.len();
        }
    }

    /// Finish the migration: [`move_keys`](Self::move_keys), then `CLUSTER SETSLOT <slot>
    /// NODE <target>` on the target, the source and every other master that answers, and
    /// wait until every node that answers sees the target as the slot's owner.
    ///
    /// # Errors
    ///
    /// As [`move_keys`](Self::move_keys); also if a node refuses `SETSLOT` or the nodes do
    /// not agree within 30 s.
    ///
    /// # Cancel safety
    ///
    /// **Not** cancel safe: dropped half-way, some nodes may already see the target as the
    /// owner and others not; gossip settles that within a few seconds, but the source may stay
    /// MIGRATING.
    pub async fn finish(self) -> io::Result<()> {
        self.move_keys().await?;
        let cluster = self.cluster;
        let target_id = cluster.node_id(self.to);
        let setslot = cmd(&[
            "CLUSTER",
            "SETSLOT",
            &self.slot.to_string(),
            "NODE",
            target_id,
        ]);
        let others = cluster
            .masters()
            .await?
            .into_iter()
            .filter(|&m| m != self.from && m != self.to && cluster.procs.is_live(m));
        for node in [self.to, self.from].into_iter().chain(others) {
            let () = query(cluster.node(node), &setslot).await?;
        }
        let (slot, to) = (self.slot, self.to);
        wait(
            &format!("nodes agreeing that node {to} serves slot {slot}"),
            CHANGE_TIMEOUT,
            || cluster.procs.logs(),
            || async move {
                for i in cluster.procs.live() {
                    let text: String = query(cluster.node(i), &cmd(&["CLUSTER", "NODES"]))
                        .await
                        .map_err(|e| e.to_string())?;
                    let view = super::parse_nodes(&text)?;
                    let owner = view.iter().find(|n| n.master && n.serves(slot));
                    if owner.map(|n| n.id.as_str()) != Some(target_id) {
                        return Err(format!("node {i} sees slot {slot} on {owner:?}"));
                    }
                }
                Ok(())
            },
        )
        .await
    }
}
