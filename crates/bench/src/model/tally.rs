//! One worker's counts, and the float conversion every figure goes through.

/// Errors in a row after which a worker gives up and the run fails.
const MAX_ERRORS_IN_A_ROW: u32 = 50;

/// `v` as a float; the figures here are far below 2^53.
pub(crate) fn float(v: u64) -> f64 {
    #[allow(
        clippy::cast_precision_loss,
        reason = "counts and nanoseconds stay far below 2^53"
    )]
    let f = v as f64;
    f
}

/// One worker's counts.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) acquisitions: u64,
    pub(crate) errors: u64,
    in_a_row: u32,
    pub(crate) first_error: Option<String>,
}

impl Tally {
    pub(crate) fn ok(&mut self) {
        self.acquisitions += 1;
        self.in_a_row = 0;
    }

    /// Count an error; fail when there were too many in a row.
    pub(crate) fn error(&mut self, e: anyhow::Error) -> anyhow::Result<()> {
        self.errors += 1;
        self.in_a_row += 1;
        if self.first_error.is_none() {
            self.first_error = Some(format!("{e:#}"));
        }
        if self.in_a_row >= MAX_ERRORS_IN_A_ROW {
            return Err(e.context(format!("{MAX_ERRORS_IN_A_ROW} errors in a row")));
        }
        Ok(())
    }

    pub(crate) fn merge(&mut self, other: &Tally) {
        self.acquisitions += other.acquisitions;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }
}
