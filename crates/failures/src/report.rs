//! One table of what went wrong, counted, for every scenario that ran.

use std::fmt;

/// One line of the table: a scenario, what is counted, and each side's
/// figure.
#[derive(Debug, Clone)]
pub struct Row {
    /// The scenario's short name (first column; printed once per group).
    pub scenario: &'static str,
    /// What the figures count.
    pub what: String,
    /// The textbook lock's figure.
    pub textbook: String,
    /// deadbolt's figure.
    pub deadbolt: String,
}

impl Row {
    /// A row of `scenario`.
    pub fn new(
        scenario: &'static str,
        what: impl Into<String>,
        textbook: impl fmt::Display,
        deadbolt: impl fmt::Display,
    ) -> Row {
        Row {
            scenario,
            what: what.into(),
            textbook: textbook.to_string(),
            deadbolt: deadbolt.to_string(),
        }
    }
}

/// Rows of every scenario, printed as a Markdown table.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Row>,
}

impl Table {
    /// Adds a scenario's rows.
    pub fn extend(&mut self, rows: impl IntoIterator<Item = Row>) {
        self.rows.extend(rows);
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "| scenario | counted | textbook lock | deadbolt |")?;
        writeln!(f, "|---|---|---|---|")?;
        let mut last = "";
        for r in &self.rows {
            let name = if r.scenario == last { "" } else { r.scenario };
            last = r.scenario;
            writeln!(
                f,
                "| {name} | {} | {} | {} |",
                r.what, r.textbook, r.deadbolt
            )?;
        }
        Ok(())
    }
}

/// One scenario's counts: the configuration that ran, and each side's
/// (every scenario's `Counts` is this, with its own config and side).
#[derive(Debug, Clone)]
pub struct Sides<C, S> {
    /// The configuration that ran.
    pub config: C,
    /// The textbook lock's (or textbook Redlock's).
    pub textbook: S,
    /// deadbolt's.
    pub deadbolt: S,
}

/// A duration for the table: µs below 1 ms, ms below 10 s, else s.
pub(crate) fn dur(d: std::time::Duration) -> String {
    if d < std::time::Duration::from_millis(1) {
        format!("{} µs", d.as_micros())
    } else if d < std::time::Duration::from_secs(1) {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// An integer with thousands separators.
pub(crate) fn num(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn thousands() {
        assert_eq!(num(0), "0");
        assert_eq!(num(999), "999");
        assert_eq!(num(1000), "1,000");
        assert_eq!(num(1_234_567), "1,234,567");
    }

    #[test]
    fn durations() {
        assert_eq!(dur(Duration::from_micros(310)), "310 µs");
        assert_eq!(dur(Duration::from_micros(34_500)), "34.5 ms");
        assert_eq!(dur(Duration::from_millis(1500)), "1.5 s");
    }
}
