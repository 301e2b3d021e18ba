//! deadbolt-cli
