//! How figures are printed: an aligned plain-text table, the number
//! formats of its cells, and the legend's entry type.

use comfy_table::{CellAlignment, ContentArrangement, LineStyle, TableStyle};

/// No borders or column lines; only the rule under the headings (`-`).
const RULE_UNDER_HEADINGS: TableStyle =
    TableStyle::new().header_separator(LineStyle::none().fill('-'));

/// An aligned plain-text table (comfy-table, with no borders): first column
/// left-aligned, the rest right-aligned two spaces apart, a rule of `-`
/// under the headings as wide as the table, no trailing spaces.
pub(crate) struct Table(comfy_table::Table);

impl Table {
    /// A table with these column headings.
    pub(crate) fn new(header: &[&str]) -> Table {
        let mut table = comfy_table::Table::new();
        table
            .load_style(RULE_UNDER_HEADINGS)
            .set_content_arrangement(ContentArrangement::Disabled)
            .set_header(header);
        Table(table)
    }

    /// Add a row, one cell per column.
    pub(crate) fn row(&mut self, row: Vec<String>) {
        self.0.add_row(row);
    }

    /// The table as text: headings, a rule, the rows.
    pub(crate) fn render(&mut self) -> String {
        for (i, column) in self.0.column_iter_mut().enumerate() {
            let (padding, align) = if i == 0 {
                ((0, 0), CellAlignment::Left)
            } else {
                ((2, 0), CellAlignment::Right)
            };
            column.set_padding(padding).set_cell_alignment(align);
        }
        format!("{}\n", self.0.trim_fmt())
    }
}

/// Microseconds for people: `85 µs`, `1.25 ms`, `56.1 ms`, `2.30 s`.
pub(crate) fn fmt_us(us: f64) -> String {
    if us < 1e3 {
        format!("{us:.0} µs")
    } else if us < 1e4 {
        format!("{:.2} ms", us / 1e3)
    } else if us < 1e6 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// A latency and its multiple of PING: `100 µs 2.1×`, `56.0 ms 832×`.
pub(crate) fn fmt_lat(us: f64, x_ping: Option<f64>) -> String {
    match x_ping {
        Some(x) if x < 10.0 => format!("{} {x:.1}×", fmt_us(us)),
        Some(x) => format!("{} {x:.0}×", fmt_us(us)),
        None => fmt_us(us),
    }
}

/// A share as a percentage: `10%`, `12.5%`.
pub(crate) fn fmt_percent(share: f64) -> String {
    let pct = share * 100.0;
    if (pct - pct.round()).abs() < 1e-9 {
        format!("{pct:.0}%")
    } else {
        format!("{pct:.1}%")
    }
}

/// A rate with thousands separators: `21 345`.
pub(crate) fn fmt_rate(rate: f64) -> String {
    if rate < 100.0 {
        return format!("{rate:.1}");
    }
    let whole = format!("{rate:.0}");
    let mut out = String::new();
    for (i, ch) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// One line of the legend: a column (or summary) and what it means.
#[derive(Debug)]
pub(crate) struct Entry {
    /// Place in the legend: entries are listed by rank, whichever scenario
    /// brings them.
    pub(crate) rank: u16,
    /// The column heading or term.
    pub(crate) term: &'static str,
    /// What it means and which way is better.
    pub(crate) text: &'static str,
}

/// A scenario's legend: its entries in groups (an entry in several groups,
/// or of several scenarios shown, is listed once).
pub(crate) type Legend = &'static [&'static [&'static Entry]];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(fmt_us(85.4), "85 µs");
        assert_eq!(fmt_us(1250.0), "1.25 ms");
        assert_eq!(fmt_us(56_100.0), "56.1 ms");
        assert_eq!(fmt_us(2_300_000.0), "2.30 s");
        assert_eq!(fmt_rate(21_345.2), "21,345");
        assert_eq!(fmt_rate(999.0), "999");
        assert_eq!(fmt_rate(12.34), "12.3");
        assert_eq!(fmt_lat(100.0, Some(2.13)), "100 µs 2.1×");
        assert_eq!(fmt_lat(56_000.0, Some(832.4)), "56.0 ms 832×");
        assert_eq!(fmt_percent(0.1), "10%");
        assert_eq!(fmt_percent(0.125), "12.5%");
        assert_eq!(fmt_percent(1.0), "100%");
    }

    #[test]
    fn table_aligns() {
        let mut t = Table::new(&["a", "bb"]);
        t.row(vec!["long".into(), "1".into()]);
        assert_eq!(t.render(), "a     bb\n--------\nlong   1\n");
    }
}
