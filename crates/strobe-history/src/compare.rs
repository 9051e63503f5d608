//! Several runs' latency side by side: a percentile table (one column per run and flow) and
//! their CCDFs overlaid on one log-scale figure, from the stored histograms.

use std::fmt::Write as _;

use hdrhistogram::Histogram;
use strobe_analyze::latency::{LatencyStats, PERCENTILES};
use strobe_analyze::plot::ccdf_svg;

use crate::{rfc3339, StoredRun};

/// One distribution in a comparison: a flow of a run.
pub struct Series {
    pub run_id: i64,
    pub flow: String,
    /// `#ID flow`, with the run's label when it has one.
    pub name: String,
    pub hist: Histogram<u64>,
    pub stats: LatencyStats,
}

/// The distributions of the runs compared, in the order the runs were given.
pub struct Comparison {
    pub series: Vec<Series>,
    /// One line per run: id, when, what ran.
    pub runs: Vec<String>,
}

/// Collects the histograms of `runs` (only flow `flow` when given). Fails with a message
/// when a run has no latency to compare, or the flow asked for.
pub fn compare(runs: &[StoredRun], flow: Option<&str>) -> Result<Comparison, String> {
    let mut series = Vec::new();
    let mut lines = Vec::new();
    for run in runs {
        let r = &run.record;
        lines.push(format!(
            "#{} {} {}{}: {}",
            run.id,
            rfc3339(r.started_unix_ns),
            r.kind,
            r.label
                .as_deref()
                .map(|l| format!(" [{l}]"))
                .unwrap_or_default(),
            r.command
        ));
        let mut found = 0;
        for h in r
            .histograms
            .iter()
            .filter(|h| flow.is_none_or(|f| f == h.flow))
        {
            let hist = h.decode().ok_or_else(|| {
                format!(
                    "run {}: the histogram of flow {:?} does not decode",
                    run.id, h.flow
                )
            })?;
            let Some(stats) = LatencyStats::from_histogram(&hist) else {
                continue;
            };
            found += 1;
            let label = r
                .label
                .as_deref()
                .map(|l| format!(" ({l})"))
                .unwrap_or_default();
            series.push(Series {
                run_id: run.id,
                flow: h.flow.clone(),
                name: format!("#{} {}{label}", run.id, h.flow),
                hist,
                stats,
            });
        }
        if found == 0 {
            return Err(match flow {
                Some(f) => format!(
                    "run {} has no latency for flow {f:?} (its flows with latency: {})",
                    run.id,
                    flow_names(run)
                ),
                None => format!(
                    "run {} measured no latency (no flow of it had a receiver and \
                     instrumented frames), so there is nothing to compare",
                    run.id
                ),
            });
        }
    }
    Ok(Comparison {
        series,
        runs: lines,
    })
}

fn flow_names(run: &StoredRun) -> String {
    let names: Vec<&str> = run
        .record
        .histograms
        .iter()
        .map(|h| h.flow.as_str())
        .collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// The table's rows for one series: (label, µs with 3 decimals, or "-" for a percentile
/// its frames are too few to resolve).
/// Up to this many series the table has a column each; more (the trials of one methodology
/// run) would make it hundreds of characters wide, so each gets a row instead.
const SERIES_AS_COLUMNS: usize = 4;

fn cells(stats: &LatencyStats) -> Vec<(&'static str, String)> {
    stats
        .rows()
        .iter()
        .map(|&(label, ns)| {
            let resolved = PERCENTILES
                .iter()
                .find(|(name, _)| *name == label)
                .is_none_or(|&(_, q)| stats.resolves(q));
            let cell = match resolved {
                true => format!("{:.3}", ns / 1e3),
                false => "-".to_owned(),
            };
            (label, cell)
        })
        .collect()
}

impl Series {
    /// The CCDF as (latency in ns, fraction of frames slower), one point per recorded
    /// bucket (its highest value); the last point's fraction is 0.
    pub fn ccdf(&self) -> Vec<(u64, f64)> {
        let total = self.hist.len().max(1);
        let mut at_or_below = 0u64;
        self.hist
            .iter_recorded()
            .map(|bucket| {
                at_or_below += bucket.count_since_last_iteration();
                let above = total.saturating_sub(at_or_below);
                (bucket.value_iterated_to(), above as f64 / total as f64)
            })
            .collect()
    }
}

impl Comparison {
    /// The comparison as JSON for a browser to draw: the runs, and per series its
    /// statistics and CCDF points (`[latency_ns, fraction slower]`).
    pub fn to_json(&self) -> serde_json::Value {
        let series: Vec<serde_json::Value> = self
            .series
            .iter()
            .map(|s| {
                serde_json::json!({
                    "run_id": s.run_id,
                    "flow": s.flow,
                    "name": s.name,
                    "stats": s.stats,
                    "ccdf": s.ccdf(),
                })
            })
            .collect();
        serde_json::json!({ "runs": self.runs, "series": series })
    }

    /// The percentile table as text, latencies in µs; a column per series.
    pub fn table(&self) -> String {
        if self.series.len() > SERIES_AS_COLUMNS {
            return self.table_by_series();
        }
        let width = self
            .series
            .iter()
            .map(|s| s.name.chars().count())
            .max()
            .unwrap_or(0)
            .clamp(12, 40);
        let mut out = String::new();
        let _ = write!(out, "{:<10}", "µs");
        for s in &self.series {
            let name: String = s.name.chars().take(width).collect();
            let _ = write!(out, " {name:>width$}");
        }
        out.push('\n');
        let _ = write!(out, "{:<10}", "frames");
        for s in &self.series {
            let _ = write!(out, " {:>width$}", s.stats.count);
        }
        out.push('\n');
        let columns: Vec<_> = self.series.iter().map(|s| cells(&s.stats)).collect();
        for (row, (name, _)) in columns.first().into_iter().flatten().enumerate() {
            let _ = write!(out, "{name:<10}");
            for column in &columns {
                let _ = write!(out, " {:>width$}", column[row].1);
            }
            out.push('\n');
        }
        out += "(\"-\": too few frames to resolve that percentile)\n";
        out
    }

    /// The table with a row per series (many trials of one methodology run): the statistics
    /// as columns of fixed width, each series' whole name at the end of its row.
    fn table_by_series(&self) -> String {
        let columns: Vec<_> = self.series.iter().map(|s| cells(&s.stats)).collect();
        let mut out = String::new();
        let _ = write!(out, "{:>10}", "frames");
        for (name, _) in columns.first().into_iter().flatten() {
            let _ = write!(out, " {name:>10}");
        }
        out += "  µs, per series\n";
        for (s, column) in self.series.iter().zip(&columns) {
            let _ = write!(out, "{:>10}", s.stats.count);
            for (_, cell) in column {
                let _ = write!(out, " {cell:>10}");
            }
            let _ = writeln!(out, "  {}", s.name);
        }
        out += "(\"-\": too few frames to resolve that percentile)\n";
        out
    }

    /// The CCDFs overlaid: one standalone SVG.
    pub fn svg(&self) -> String {
        let curves: Vec<(&str, &Histogram<u64>)> = self
            .series
            .iter()
            .map(|s| (s.name.as_str(), &s.hist))
            .collect();
        ccdf_svg("latency CCDF of the runs compared", &curves)
    }

    /// The percentile table as an HTML table, latencies in µs, a column per series.
    pub fn html_table(&self) -> String {
        let mut out = String::from("<table><tr><th></th>");
        for s in &self.series {
            let _ = write!(out, "<th>{}</th>", escape(&s.name));
        }
        out += "</tr>\n<tr><td>frames</td>";
        for s in &self.series {
            let _ = write!(out, "<td>{}</td>", s.stats.count);
        }
        out += "</tr>\n";
        let columns: Vec<_> = self.series.iter().map(|s| cells(&s.stats)).collect();
        for (row, (name, _)) in columns.first().into_iter().flatten().enumerate() {
            let _ = write!(out, "<tr><td>{name}</td>");
            for column in &columns {
                let _ = write!(out, "<td>{}</td>", column[row].1);
            }
            out += "</tr>\n";
        }
        out += "</table>\n";
        out
    }

    /// A self-contained page: the runs, the table and the overlaid CCDFs.
    pub fn html(&self) -> String {
        let mut out = page_start("runs compared", "Runs compared");
        out += "<ul>\n";
        for line in &self.runs {
            let _ = writeln!(out, "<li>{}</li>", escape(line));
        }
        out += "</ul>\n<p>Latency of every instrumented frame, from each run's stored \
                HdrHistogram (3 significant digits), in µs; \"-\": too few frames to resolve that \
                percentile.</p>\n";
        out += &self.html_table();
        out += &self.svg();
        out += "\n</body></html>\n";
        out
    }
}

/// The start of a self-contained page of latency tables and figures: its head (title
/// `strobe: TITLE`, the tables' style), then the body's `<h1>HEADING</h1>`.
pub fn page_start(title: &str, heading: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>strobe: {}</title><style>\
         body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}\
         th:first-child,td:first-child{{text-align:left}}</style></head><body>\n<h1>{}</h1>\n",
        escape(title),
        escape(heading)
    )
}

/// `text` made safe inside HTML elements and attribute values.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::record;

    #[test]
    fn the_table_reads_each_runs_histogram() {
        let a = StoredRun {
            id: 1,
            record: record("gen", "a", &[("f1", &[1_000, 2_000, 3_000])]),
        };
        let b = StoredRun {
            id: 2,
            record: record(
                "gen",
                "b",
                &[("f1", &[10_000, 10_000]), ("f2", &[20_000, 20_000])],
            ),
        };
        let c = compare(&[a, b], None).unwrap();
        assert_eq!(
            c.series.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["#1 f1", "#2 f1", "#2 f2"]
        );
        let table = c.table();
        let p50: Vec<&str> = table
            .lines()
            .find(|l| l.starts_with("p50 "))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(p50, ["p50", "2.000", "10.007", "20.015"]);
        // Three frames resolve p50 and p90, not p99 (it would just be the maximum).
        let p99 = table.lines().find(|l| l.starts_with("p99 ")).unwrap();
        assert_eq!(
            p99.split_whitespace().collect::<Vec<_>>(),
            ["p99", "-", "-", "-"]
        );
        assert!(c.html().contains("<svg") && c.svg().contains("#2 f2"));
        // The CCDF: every frame above the first bucket but the last, none above the last.
        let ccdf = c.series[0].ccdf();
        assert_eq!(ccdf.len(), 3);
        assert_eq!(ccdf[0], (1000, 2.0 / 3.0));
        assert_eq!(ccdf[2].1, 0.0);
        let j = c.to_json();
        assert_eq!(j["series"][2]["name"], "#2 f2");
        assert_eq!(j["series"][0]["ccdf"][1][1], 1.0 / 3.0);
    }

    #[test]
    fn many_series_get_a_row_each_with_their_whole_names() {
        let flows: Vec<(String, Vec<u64>)> = (1..=6)
            .map(|k| {
                (
                    format!("trial {k}: throughput 1518 B at 4.1 kpps: f0"),
                    vec![k * 1_000; 5],
                )
            })
            .collect();
        let latencies: Vec<(&str, &[u64])> = flows
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        let run = StoredRun {
            id: 7,
            record: record("rfc2544", "r", &latencies),
        };
        let table = compare(std::slice::from_ref(&run), None).unwrap().table();
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].split_whitespace().any(|w| w == "p50"), "{table}");
        for (k, (name, _)) in flows.iter().enumerate() {
            let row = lines[k + 1];
            assert!(row.ends_with(&format!("#7 {name}")), "{table}");
            assert_eq!(row.split_whitespace().next(), Some("5"), "{table}");
        }
        assert!(lines.iter().all(|l| l.chars().count() < 200), "{table}");
    }

    #[test]
    fn a_run_without_latency_or_flow_is_named() {
        let a = StoredRun {
            id: 4,
            record: record("rfc2544", "a", &[]),
        };
        let err = compare(std::slice::from_ref(&a), None).err().unwrap();
        assert!(err.contains("run 4 measured no latency"), "{err}");
        let b = StoredRun {
            id: 5,
            record: record("gen", "b", &[("f1", &[5])]),
        };
        let err = compare(&[b], Some("f9")).err().unwrap();
        assert!(err.contains("flow \"f9\"") && err.contains("f1"), "{err}");
    }
}
