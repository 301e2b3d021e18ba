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

use crate::error::{Error, Result};

/// The names of one primitive instance: `<ns>:{<name>}:<kind>` and suffixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
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
        Ok(Keys {
            prefix: format!("{ns}:{{{}}}:{kind}", encode_tag(name)),
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

    /// The primitive's broadcast channel: `<prefix>:ch`.
    pub fn channel(&self) -> String {
        self.sub("ch")
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let k = Keys::new("deadbolt", "lock", "orders:42").unwrap();
        assert_eq!(k.main(), "deadbolt:{orders:42}:lock");
        assert_eq!(k.sub("fence"), "deadbolt:{orders:42}:lock:fence");
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
    fn braces_stay_inside_one_tag() {
        let k = Keys::new("ns", "lock", "}a{b}%").unwrap();
        assert_eq!(k.main(), "ns:{%7Da{b%7D%25}:lock");
        // Distinct names stay distinct.
        assert_ne!(
            Keys::new("ns", "lock", "%7D").unwrap(),
            Keys::new("ns", "lock", "}").unwrap()
        );
    }
}
