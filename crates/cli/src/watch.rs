//! `deadbolt inspect --watch`: every holder change of one primitive, a line
//! each, as it happens.

use std::time::Instant;

use deadbolt_core::watch::{HoldEvent, Holder};
use deadbolt_core::Client;
use futures::{Stream, StreamExt};

use crate::inspect::{on_checked_key, InspectArgs, PrimitiveKind};

fn who(h: &Holder) -> String {
    match &h.holder_name {
        Some(n) => format!("{n} (owner {}, token {})", h.owner, h.token),
        None => format!("owner {} (token {})", h.owner, h.token),
    }
}

/// One event as `inspect --watch` prints it.
pub fn describe(e: &HoldEvent) -> String {
    match e {
        HoldEvent::Held(h) => format!("held by {}", who(h)),
        HoldEvent::Free => "free".to_string(),
        HoldEvent::Acquired(h) => format!("acquired by {}", who(h)),
        HoldEvent::Released(h) => format!("released by {}", who(h)),
        HoldEvent::Expired(h) => format!("expired: {}", who(h)),
        HoldEvent::ForceUnlocked(h) => format!("force-unlocked: {}", who(h)),
        HoldEvent::Shared { holders } => format!("shared holds: {holders}"),
        other => format!("{other:?}"),
    }
}

type Events = std::pin::Pin<Box<dyn Stream<Item = deadbolt_core::Result<String>> + Send>>;

fn events(client: &Client, kind: PrimitiveKind, name: &str) -> Events {
    let text = |s: deadbolt_core::Result<HoldEvent>| s.map(|e| describe(&e));
    match kind {
        PrimitiveKind::Lock => Box::pin(deadbolt_lock::Lock::new(client, name).watch().map(text)),
        PrimitiveKind::Fair => {
            Box::pin(deadbolt_fair::FairLock::new(client, name).watch().map(text))
        }
        PrimitiveKind::Rw => Box::pin(deadbolt_rwlock::RwLock::new(client, name).watch().map(text)),
        PrimitiveKind::Semaphore => Box::pin(
            deadbolt_semaphore::Semaphore::new(client, name)
                .watch()
                .map(text),
        ),
        PrimitiveKind::Election => Box::pin(
            deadbolt_election::Election::new(client, name)
                .observe()
                .map(|r| {
                    r.map(|l| match l {
                        Some(l) => format!("leader: {} (term {})", l.info, l.term),
                        None => "no leader".to_string(),
                    })
                }),
        ),
    }
}

/// Watch the primitive `args` names and hand each change to `out` as a
/// line (`+<seconds> <what>`), until `out` returns false or the stream
/// ends; an error (Redis unreachable) is a line too, at most one a second.
///
/// # Errors
/// Bad arguments, an unreachable Redis at the start, a key of another type.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn watch(args: &InspectArgs, mut out: impl FnMut(String) -> bool) -> anyhow::Result<()> {
    on_checked_key(args, async |client| {
        let started = Instant::now();
        let mut s = events(client, args.kind, &args.name);
        while let Some(r) = s.next().await {
            let what = r.unwrap_or_else(|e| format!("error: {e}"));
            if !out(format!("+{:.3}s {what}", started.elapsed().as_secs_f64())) {
                break;
            }
        }
        Ok(())
    })
    .await
}
