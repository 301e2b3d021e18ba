//! Key and channel names.
//!
//! Every key and the channel of one primitive share the prefix
//! `<ns>:{<tag>}:<kind>`: one hash tag, so one cluster slot, and the kind keeps
//! a `Lock` "x" apart from a `FairLock` "x".
//!
//! The tag is the name with `%` written `%25` and `}` written `%7D`. Redis
//! takes a key's hash tag from its first `{` to the next `}`; a raw `}` in a
//! name would end the tag early (or leave it empty, so that Redis hashes
//! each whole key and one lock's keys land in different slots). Encoded,
//! the tag is the whole name, never empty, and two names never share one.
//!
//! Fencing counters are kept per hash slot, not per name:
//! `<ns>:{<slot tag>}:fence`, where the slot tag is the smallest decimal
//! number whose hash slot is the name's ([`slot_tag`]). A name's keys and
//! its slot's counter are in one slot (one script may use them all, on a
//! cluster too), and a namespace never has more than 16,384 counters
//! however many names were ever locked.

use std::sync::OnceLock;

use crate::error::{Error, Result};

/// The number of Redis Cluster hash slots.
const SLOTS: usize = 16_384;

/// The names of one primitive instance: `<ns>:{<name>}:<kind>` and suffixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
    fence: String,
}

impl Keys {
    /// Build the prefix for `name` of primitive `kind` in namespace `ns`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty name.
    pub fn new(ns: &str, kind: &str, name: &str) -> Result<Keys> {
        if name.is_empty() {
            return Err(Error::InvalidArgument("name is empty".into()));
        }
        let tag = encode_tag(name);
        // The tag has no `}`, so hash_slot hashes all of it: the slot of
        // every key `<ns>:{<tag>}:...`.
        let slot = hash_slot(&tag);
        Ok(Keys {
            prefix: format!("{ns}:{{{tag}}}:{kind}"),
            fence: format!("{ns}:{{{}}}:fence", slot_tag(slot)),
        })
    }

    /// The primitive's main key: the prefix itself.
    pub fn main(&self) -> &str {
        &self.prefix
    }

    /// A companion key in the same slot: `<prefix>:<suffix>`.
    pub fn sub(&self, suffix: &str) -> String {
        format!("{}:{suffix}", self.prefix)
    }

    /// Where a force-unlock records the token of the hold it removed, for
    /// the watches (`<prefix>:forced`): the last key of every force-unlock
    /// script.
    pub fn forced(&self) -> String {
        forced_key(&self.prefix)
    }

    /// The fencing counter of the name's hash slot in the namespace,
    /// `<ns>:{<slot tag>}:fence` (see the module docs): shared by every name
    /// (of every kind) whose keys are in that slot, so that tokens keep
    /// rising after a name's keys are gone without a key left per name.
    pub fn fence(&self) -> &str {
        &self.fence
    }

    /// The primitive's broadcast channel: `<prefix>:ch`.
    pub fn channel(&self) -> String {
        self.sub("ch")
    }
}

/// A client's own channel, `<ns>:client:<client id>`: every client listens
/// there from its start, and a force-unlock tells the holder's client there
/// (`msg_publish_client` in `lua/msg_lib.lua` builds the same name). It has
/// no hash tag: a classic channel, also on a Cluster.
pub(crate) fn client_channel(ns: &str, client_id: &str) -> String {
    format!("{ns}:client:{client_id}")
}

/// The hash tag of `name`: `%` → `%25`, `}` → `%7D` (see the module docs).
pub fn encode_tag(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '%' => out.push_str("%25"),
            '}' => out.push_str("%7D"),
            c => out.push(c),
        }
    }
    out
}

/// The smallest decimal number whose hash slot is `slot` (for `slot`
/// below 16,384; others wrap): a hash tag that puts a key in that slot.
/// The table of all 16,384 is worked out once, on first use (about 160,000
/// CRC16s of short strings: a few milliseconds).
pub fn slot_tag(slot: u16) -> u32 {
    static TAGS: OnceLock<Vec<u32>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        let mut tags = vec![u32::MAX; SLOTS];
        let mut left = SLOTS;
        let mut n = 0u32;
        while left > 0 {
            let s = usize::from(hash_slot(&n.to_string()));
            if tags[s] == u32::MAX {
                tags[s] = n;
                left -= 1;
            }
            n += 1;
        }
        tags
    });
    tags[usize::from(slot) % SLOTS]
}

/// Whether `key` is a hash slot's fencing counter in namespace `ns`
/// (`<ns>:{<slot tag>}:fence`, the tag being [`slot_tag`] of the key's own
/// slot): the one kind of key deadbolt leaves behind after every release, at
/// most one per slot, without a TTL.
pub fn is_fence_key(ns: &str, key: &str) -> bool {
    key.strip_prefix(ns)
        .and_then(|r| r.strip_prefix(":{"))
        .and_then(|r| r.strip_suffix("}:fence"))
        .and_then(|t| t.parse::<u32>().ok())
        .is_some_and(|t| slot_tag(hash_slot(key)) == t)
}

/// The Redis Cluster hash slot of `key` (CRC16/XMODEM of its hash tag, or
/// of the whole key without one, mod 16384). Core batches work per slot, so
/// one script call never spans slots.
pub fn hash_slot(key: &str) -> u16 {
    let b = key.as_bytes();
    let tagged = b.iter().position(|c| *c == b'{').and_then(|open| {
        let rest = &b[open + 1..];
        rest.iter()
            .position(|c| *c == b'}')
            .filter(|len| *len > 0)
            .map(|len| &rest[..len])
    });
    // The crc16 crate is the one redis-rs computes slots with.
    crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(b)) % 16384
}

/// Where a force-unlock script records the token of the hold it removed,
/// for 10 s: `<hold key>:forced` (`hold_forced` in `lua/hold_lib.lua`).
/// A watch reads it beside the hold, so that it tells a force-unlock from
/// a release whatever the order in which its read and the announcement on
/// the hold's watch channel arrive (two connections).
pub(crate) fn forced_key(hold_key: &str) -> String {
    format!("{hold_key}:forced")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let k = Keys::new("deadbolt", "lock", "orders:42").unwrap();
        assert_eq!(k.main(), "deadbolt:{orders:42}:lock");
        assert_eq!(k.sub("next"), "deadbolt:{orders:42}:lock:next");
        assert_eq!(hash_slot(k.fence()), hash_slot(k.main()));
        assert!(k.fence().starts_with("deadbolt:{") && k.fence().ends_with("}:fence"));
        // Every kind of a name, and every name of a slot, share one counter.
        let fair = Keys::new("deadbolt", "fair", "orders:42").unwrap();
        assert_eq!(fair.fence(), k.fence());
        assert!(is_fence_key("deadbolt", k.fence()));
        assert!(!is_fence_key("other", k.fence()));
        assert!(!is_fence_key("deadbolt", &k.sub("fence")));
        assert!(!is_fence_key("deadbolt", "deadbolt:{0}:fence") || slot_tag(hash_slot("0")) == 0);
        assert_eq!(k.channel(), "deadbolt:{orders:42}:lock:ch");
        assert!(Keys::new("deadbolt", "lock", "").is_err());
        assert_ne!(
            Keys::new("n", "lock", "x").unwrap(),
            Keys::new("n", "fair", "x").unwrap()
        );
    }

    #[test]
    fn slots_match_redis() {
        // Values from CLUSTER KEYSLOT on Redis 7.0.
        assert_eq!(hash_slot("foo"), 12182);
        assert_eq!(hash_slot("{user1000}.following"), hash_slot("user1000"));
        assert_eq!(hash_slot("a{}b"), hash_slot("a{}b"));
        assert_ne!(hash_slot("a{}b"), hash_slot("{}"));
        assert_eq!(hash_slot("123456789"), 0x31C3); // the CRC16/XMODEM check value
    }

    #[test]
    fn every_slot_has_a_tag_of_its_own() {
        for slot in 0..16_384u16 {
            let tag = slot_tag(slot);
            assert_eq!(hash_slot(&format!("ns:{{{tag}}}:fence")), slot);
        }
        // Small numbers: the counters' keys stay short.
        assert!((0..16_384u16).all(|s| slot_tag(s) < 1_000_000));
    }

    #[test]
    fn braces_stay_inside_one_tag() {
        let k = Keys::new("ns", "lock", "}a{b}%").unwrap();
        assert_eq!(k.main(), "ns:{%7Da{b%7D%25}:lock");
        // Its slot's fencing counter is in its slot, braces and all.
        for name in ["}a{b}%", "{x", "a{", "{}"] {
            let k = Keys::new("ns", "lock", name).unwrap();
            assert_eq!(hash_slot(k.fence()), hash_slot(k.main()), "{name}");
        }
        // Distinct names stay distinct.
        assert_ne!(
            Keys::new("ns", "lock", "%7D").unwrap(),
            Keys::new("ns", "lock", "}").unwrap()
        );
    }
}
