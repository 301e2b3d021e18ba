//! `CLUSTER NODES` replies, parsed, and the hash slot of a key.

/// Number of hash slots in a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

/// One line of `CLUSTER NODES`: one node as the answering node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeLine {
    pub(crate) id: String,
    /// Client port (`0` for a node without a known address).
    pub(crate) port: u16,
    /// The line describes the answering node itself.
    pub(crate) myself: bool,
    /// Flagged `master` (else `slave`).
    pub(crate) master: bool,
    /// Flagged `fail` or `fail?`.
    pub(crate) failed: bool,
    /// Flagged `handshake` or `noaddr`: not fully part of the cluster yet.
    pub(crate) joining: bool,
    /// The master a replica follows.
    pub(crate) master_id: Option<String>,
    /// Slot ranges served, inclusive; open migrations (`[slot->-id]`) are left out.
    pub(crate) slots: Vec<(u16, u16)>,
}

impl NodeLine {
    pub(crate) fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(lo, hi)| lo <= slot && slot <= hi)
    }

    pub(crate) fn slot_count(&self) -> usize {
        self.slots
            .iter()
            .map(|&(lo, hi)| usize::from(hi - lo) + 1)
            .sum()
    }
}

/// Parse a `CLUSTER NODES` reply.
pub(crate) fn parse_nodes(text: &str) -> Result<Vec<NodeLine>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| parse_line(line).ok_or_else(|| format!("bad CLUSTER NODES line {line:?}")))
        .collect()
}

fn parse_line(line: &str) -> Option<NodeLine> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 8 {
        return None;
    }
    // `ip:port@cport[,hostname]`
    let port = fields[1]
        .split('@')
        .next()?
        .rsplit(':')
        .next()?
        .parse()
        .ok()?;
    let flags: Vec<&str> = fields[2].split(',').collect();
    let has = |f: &str| flags.contains(&f);
    let slots = fields[8..]
        .iter()
        .filter(|s| !s.starts_with('['))
        .map(|s| match s.split_once('-') {
            Some((lo, hi)) => Some((lo.parse().ok()?, hi.parse().ok()?)),
            None => s.parse().ok().map(|n| (n, n)),
        })
        .collect::<Option<Vec<(u16, u16)>>>()?;
    Some(NodeLine {
        id: fields[0].to_owned(),
        port,
        myself: has("myself"),
        master: has("master"),
        failed: has("fail") || has("fail?"),
        joining: has("handshake") || has("noaddr"),
        master_id: (fields[3] != "-").then(|| fields[3].to_owned()),
        slots,
    })
}

/// CRC16/XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster hashes keys with.
fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &byte| {
        (0..8).fold(crc ^ (u16::from(byte) << 8), |crc, _| {
            if crc & 0x8000 == 0 {
                crc << 1
            } else {
                (crc << 1) ^ 0x1021
            }
        })
    })
}

/// The hash slot of `key`: CRC16 of the key, or of its hash tag (the part between the first
/// `{` and the next `}`, if not empty), modulo 16384.
pub(crate) fn keyslot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let len = rest.iter().position(|&b| b == b'}')?;
            (len > 0).then(|| &rest[..len])
        })
        .unwrap_or(key);
    crc16(hashed) % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_check_value() {
        // The standard check value of CRC-16/XMODEM, also in the Redis Cluster spec.
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn keyslots() {
        assert_eq!(keyslot(b"foo"), 12182);
        assert_eq!(keyslot(b"123456789"), 0x31C3 % SLOTS);
        assert_eq!(keyslot(b"{user1000}.following"), keyslot(b"user1000"));
        assert_eq!(keyslot(b"foo{}{bar}"), keyslot(b"foo{}{bar}"));
        assert_ne!(keyslot(b"foo{}{bar}"), keyslot(b"bar"));
        assert_eq!(keyslot(b"foo{{bar}}zap"), keyslot(b"{bar"));
        assert_eq!(keyslot(b"foo{bar}{zap}"), keyslot(b"bar"));
        assert_eq!(keyslot(b"{"), crc16(b"{") % SLOTS);
    }

    #[test]
    fn parses_cluster_nodes() {
        let text = "\
98d6 127.0.0.1:47016@48016 slave 33dd 0 1796069182670 3 connected
1667 127.0.0.1:47011@48011 myself,master - 0 1796069181000 1 connected 0-5460 [5461->-69ad]
69ad 127.0.0.1:47012@48012,host master,fail? - 0 1796069182067 2 connected 5461-10922 10923
beef :0@0 master,noaddr - 0 0 0 disconnected
";
        let nodes = parse_nodes(text).unwrap();
        assert_eq!(nodes.len(), 4);
        assert_eq!(nodes[0].id, "98d6");
        assert_eq!(nodes[0].port, 47016);
        assert!(!nodes[0].master && !nodes[0].myself);
        assert_eq!(nodes[0].master_id.as_deref(), Some("33dd"));
        assert!(nodes[0].slots.is_empty());
        assert!(nodes[1].myself && nodes[1].master && !nodes[1].failed);
        assert_eq!(nodes[1].master_id, None);
        assert_eq!(nodes[1].slots, vec![(0, 5460)]);
        assert!(nodes[1].serves(0) && nodes[1].serves(5460) && !nodes[1].serves(5461));
        assert_eq!(nodes[2].port, 47012);
        assert!(nodes[2].failed);
        assert_eq!(nodes[2].slots, vec![(5461, 10922), (10923, 10923)]);
        assert_eq!(nodes[2].slot_count(), 5463);
        assert!(nodes[3].joining);
        assert!(parse_nodes("garbage").is_err());
    }
}
