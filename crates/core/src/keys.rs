//! Key and channel names.
//!
//! Every key and the channel of one primitive share the prefix
//! `<ns>:{<name>}:<kind>`: one hash tag, so one cluster slot, and the kind keeps
//! a `Lock` "x" apart from a `FairLock` "x".

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
            prefix: format!("{ns}:{{{name}}}:{kind}"),
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
}
