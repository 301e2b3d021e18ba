//! The printed table of a whole run: a header, one section per scenario
//! (each scenario draws its own), the sweep, the notes and the legend. It
//! sits above the scenarios, as the one place besides `plan` that looks
//! them up in the registry.

use std::fmt::Write as _;

use crate::model::{plural, ContenderKind, Report, RunResult, ScenarioKind, Sweep};
use crate::scenarios;
use crate::table::{fmt_rate, fmt_us, Table};

impl Report {
    /// The results as an aligned plain-text table, one section per scenario.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "deadbolt bench: Redis {} at {}{}, {} CPUs, {}",
            self.redis.version,
            self.redis.url,
            if self.redis.embedded {
                " (embedded)"
            } else {
                ""
            },
            self.host.cpus,
            if self.host.pinned {
                "redis-server on CPU 0, bench on CPU 1"
            } else {
                "not pinned"
            },
        );
        if let Some(p) = &self.ping {
            let _ = writeln!(
                out,
                "PING p50 over the run: {} (p99 {}). Each latency is also shown as a multiple \
                 of the PING p50 timed during its own run (\"2.1×\").",
                fmt_us(p.p50_us),
                fmt_us(p.p99_us)
            );
        }
        if self.interrupted {
            let _ = writeln!(out, "INTERRUPTED: partial results.");
        }
        for scenario in scenarios::all() {
            let rows: Vec<&RunResult> = self
                .results
                .iter()
                .filter(|r| r.scenario == scenario.kind())
                .collect();
            if rows.is_empty() {
                continue;
            }
            out.push('\n');
            out.push_str(&scenario.section(self, &rows));
        }
        if !self.sweep.is_empty() {
            out.push('\n');
            out.push_str(&self.sweep_table());
        }
        let notes = self.notes();
        if !notes.is_empty() {
            out.push('\n');
            for n in notes {
                let _ = writeln!(out, "{n}");
            }
        }
        let shown: Vec<ScenarioKind> = ScenarioKind::ALL
            .into_iter()
            .filter(|s| self.results.iter().any(|r| r.scenario == *s))
            .collect();
        out.push_str(&legend(&shown));
        out
    }

    /// The notes under the table: exclusion violations, errors, and the
    /// contenders left out that no section notes.
    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for r in &self.results {
            if r.exclusion_violations > 0 {
                let what = scenarios::get(r.scenario).violation(&self.settings);
                notes.push(format!(
                    "!! {}: {what} {} times",
                    r.name(),
                    r.exclusion_violations
                ));
            }
            if let Some(e) = &r.first_error {
                notes.push(format!("{}: {} errors, first: {e}", r.name(), r.errors));
            }
        }
        for s in &self.skipped {
            // A table that notes its own skipped rows (multi's) has them.
            if self.skipped_noted_in_a_section(s.contender) {
                continue;
            }
            notes.push(format!("{} not run: {}", s.contender.name(), s.reason));
        }
        notes
    }

    /// Whether a section shown notes `contender` as left out: the one
    /// scenario that measures it shows, and notes its own skipped rows.
    fn skipped_noted_in_a_section(&self, contender: ContenderKind) -> bool {
        let mut measuring = scenarios::all().filter(|s| s.measures(contender));
        match (measuring.next(), measuring.next()) {
            (Some(only), None) => {
                only.notes_own_skipped() && self.results.iter().any(|r| r.scenario == only.kind())
            }
            _ => false,
        }
    }

    /// The `--plot` sweep as a table: a row per contender and sweep, a
    /// column per waiter count.
    fn sweep_table(&self) -> String {
        let mut counts: Vec<u32> = self.sweep.iter().map(|p| p.waiters).collect();
        counts.sort_unstable();
        counts.dedup();
        let mut contenders: Vec<ContenderKind> = Vec::new();
        for p in &self.sweep {
            if !contenders.contains(&p.contender) {
                contenders.push(p.contender);
            }
        }
        let sweeps: &[Sweep] = if self.has_own_client_sweep() {
            &[Sweep::Spread, Sweep::OwnClient]
        } else {
            &[Sweep::Spread]
        };
        let header: Vec<String> = ["contender".to_string(), "clients".to_string()]
            .into_iter()
            .chain(counts.iter().map(|&w| format!("{w} waiter{}", plural(w))))
            .collect();
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let mut table = Table::new(&header);
        for c in contenders {
            for &sweep in sweeps {
                let mut row = vec![c.name().to_string(), self.sweep_label(sweep)];
                for w in &counts {
                    row.push(
                        self.sweep_points(sweep)
                            .find(|p| p.contender == c && p.waiters == *w)
                            .map_or_else(|| "-".into(), |p| fmt_rate(p.acquisitions_per_s)),
                    );
                }
                table.row(row);
            }
        }
        let n = self.settings.clients;
        let note = if sweeps.len() > 1 {
            format!(
                "over {n} client{s}: the waiters spread over at most {n} client{s} (--clients)\n\
                 one per waiter: each waiter its own client (the same runs up to {n} waiter{s})\n",
                s = plural(n)
            )
        } else {
            String::new()
        };
        format!(
            "throughput sweep (contended, acquisitions/s; drawn by --plot)\n{}{note}",
            table.render()
        )
    }
}

/// What the columns mean and which way is better, for the scenarios shown.
fn legend(shown: &[ScenarioKind]) -> String {
    scenarios::legend::render(shown.iter().map(|k| scenarios::get(*k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legend_covers_the_columns_shown() {
        let all = legend(&ScenarioKind::ALL);
        for term in [
            "N.N×",
            "acq/s",
            "Jain",
            "least/most",
            "cmds/acq",
            "cmds/waiter/s",
            "hand-off",
            "ops/s",
            "read p50",
            "cmds/op",
            "rw / lock",
            "sem / sem-poll",
            "longest wait",
            "lock+unlock",
            "p50 / lock",
            "redlock / rslock-3",
        ] {
            assert!(all.contains(&format!("\n  {term} ")), "{term}:\n{all}");
        }
        assert!(all.contains("higher is better") && all.contains("lower is better"));
        let idle = legend(&[ScenarioKind::Idle]);
        assert!(
            idle.contains("cmds/waiter/s") && !idle.contains("Jain"),
            "{idle}"
        );
        let mixed = legend(&[ScenarioKind::ReadMostly]);
        assert!(
            mixed.contains("\n  ops/s ") && !mixed.contains("\n  acq/s "),
            "{mixed}"
        );
        let sem = legend(&[ScenarioKind::Semaphore]);
        assert!(
            sem.contains("\n  acq/s ")
                && sem.contains("\n  sem / sem-poll ")
                && !sem.contains("rw / lock"),
            "{sem}"
        );
        assert_eq!(legend(&[]), "");
    }
}
