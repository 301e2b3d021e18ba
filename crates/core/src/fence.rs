//! The resource side of fencing, for a value kept in Redis apart from the
//! lock that protects it (another hash slot, another server): [`Fenced`]
//! keeps the largest fencing token applied beside the value and applies a
//! write only with a token at least as large.
//!
//! Use it where a [guarded write](crate::guarded) cannot reach: the value
//! lives in another slot or on another server than the hold. Where the
//! value shares the hold's slot, a guarded write is the stronger tool (it
//! refuses a holder whose hold is gone even before anyone else wrote).
//! For a database, the same rule is one `UPDATE ... WHERE last_token <=
//! $token` (docs/safety.md).

use crate::client::Client;
use crate::error::Result;
use crate::scripts::{ScriptCall, FENCE_WRITE};

/// A value in Redis that takes writes only with a fencing token at least
/// the largest applied so far (a hash at `key`: `v` the value, `t` the
/// token).
///
/// # Examples
/// ```no_run
/// # async fn f(client: deadbolt_core::Client, token: u64) -> deadbolt_core::Result<()> {
/// let report = deadbolt_core::fence::Fenced::new(&client, "reports:daily");
/// if !report.set(token, "…").await? {
///     // A holder with a newer token wrote already: this hold is stale.
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Fenced {
    client: Client,
    key: String,
}

impl Fenced {
    /// The fenced value at `key` (any key: it need not share a lock's slot),
    /// through `client` (a core client or the facade's).
    pub fn new<C: AsRef<Client>>(client: &C, key: impl Into<String>) -> Fenced {
        Fenced {
            client: client.as_ref().clone(),
            key: key.into(),
        }
    }

    /// Write `value` with `token`; whether it was applied (`false`: a write
    /// with a larger token came first, and nothing was written).
    ///
    /// # Errors
    /// [`Error::WrongType`](crate::Error::WrongType) for a key of another
    /// type; `Unavailable`, `Indeterminate` as for any call.
    ///
    /// # Cancel safety
    /// If dropped, the write may or may not have been applied.
    pub async fn set(&self, token: u64, value: impl Into<String>) -> Result<bool> {
        self.apply(token, vec!["set".into(), value.into()]).await
    }

    /// Delete the value with `token` (the token stays recorded, so an
    /// older writer is still refused); whether it was applied.
    ///
    /// # Errors
    /// As [`set`](Self::set).
    ///
    /// # Cancel safety
    /// If dropped, the delete may or may not have been applied.
    pub async fn delete(&self, token: u64) -> Result<bool> {
        self.apply(token, vec!["del".into()]).await
    }

    /// The value and the token that wrote it; `None` when nothing was
    /// written (or the value was deleted: then the token is kept, and
    /// reads `None` here).
    ///
    /// # Errors
    /// `WrongType` for a key of another type; `Unavailable`,
    /// `Indeterminate`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn get(&self) -> Result<Option<(u64, String)>> {
        let call = ScriptCall::new(
            &FENCE_WRITE,
            vec![self.key.clone()],
            vec!["0".into(), "get".into()],
        );
        let (_, t, v): (i64, u64, Option<String>) = self.client.run(&call).await?;
        Ok(v.map(|v| (t, v)))
    }

    async fn apply(&self, token: u64, op: Vec<String>) -> Result<bool> {
        let args = std::iter::once(token.to_string()).chain(op).collect();
        let call = ScriptCall::new(&FENCE_WRITE, vec![self.key.clone()], args);
        let (ok, _): (i64, u64) = self.client.run(&call).await?;
        Ok(ok == 1)
    }
}
