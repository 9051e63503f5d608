//! The RFC 2544 report: throughput in frames per second and bits per second against the
//! frame size, latency percentiles against the frame size and against the load, the frame
//! loss rate curves, and a table of every result. One HTML file with inline SVG, as the
//! latency report.

use maud::{html, Markup};

use crate::latency::LatencyStats;
use crate::plot::{inline_svg, page, PALETTE};
use crate::xy::{xy_svg, Mark, Series};

/// What the report shows.
#[derive(Clone, Debug, Default)]
pub struct Rfc2544Figures {
    /// Lines of prose above the figures (the settings, how latency was measured).
    pub notes: Vec<String>,
    pub throughput: Vec<ThroughputFigure>,
    pub latency: Vec<LatencyFigure>,
    pub loss: Vec<LossFigure>,
    /// Further tables (back-to-back), after the figures.
    pub tables: Vec<Table>,
}

/// One frame size's throughput.
#[derive(Clone, Debug)]
pub struct ThroughputFigure {
    /// `64`, `imix`, …
    pub size: String,
    /// Mean frame length, FCS included (the x axis).
    pub mean_bytes: f64,
    pub ndr_pps: Option<f64>,
    pub pdr_pps: Option<f64>,
    /// The highest rate tried and where it came from, in words.
    pub max_pps: f64,
    pub max_source: String,
    pub line_rate_pps: f64,
    pub trials: usize,
    pub seconds: f64,
}

/// One frame size's latency at each load.
#[derive(Clone, Debug)]
pub struct LatencyFigure {
    pub size: String,
    pub mean_bytes: f64,
    /// (load in % of the throughput, rate in pps, every frame's latency).
    pub points: Vec<(f64, f64, LatencyStats)>,
}

/// One frame size's loss curve: (load in % of the highest rate, loss in %).
#[derive(Clone, Debug)]
pub struct LossFigure {
    pub size: String,
    pub points: Vec<(f64, f64)>,
}

/// Bits per second of `pps` frames of `mean_bytes` on the wire (layer 1).
fn l1_bps(pps: f64, mean_bytes: f64) -> f64 {
    pps * (mean_bytes + 20.0) * 8.0
}

fn throughput_svgs(t: &[ThroughputFigure]) -> (String, String) {
    let line =
        |label: &str, f: fn(&ThroughputFigure) -> Option<f64>, k: usize, mark: Mark| Series {
            label: label.into(),
            points: t
                .iter()
                .filter_map(|p| Some((p.mean_bytes, f(p)?)))
                .collect(),
            color: PALETTE[k],
            mark,
        };
    let pps = [
        line("NDR", |p| p.ndr_pps.map(|v| v / 1e6), 0, Mark::Line),
        line("PDR", |p| p.pdr_pps.map(|v| v / 1e6), 1, Mark::Points),
        line(
            "highest rate tried",
            |p| Some(p.max_pps / 1e6),
            6,
            Mark::Dashed,
        ),
    ];
    let bps = [
        line(
            "NDR, layer 1",
            |p| p.ndr_pps.map(|v| l1_bps(v, p.mean_bytes) / 1e9),
            0,
            Mark::Line,
        ),
        line(
            "line rate",
            |p| Some(l1_bps(p.line_rate_pps, p.mean_bytes) / 1e9),
            6,
            Mark::Dashed,
        ),
    ];
    // The highest rate is often far above the throughput (a shaper): a log axis shows both.
    let spread = |s: &[Series]| {
        let (lo, hi) = s
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .filter(|v| *v > 0.0)
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            });
        hi > 20.0 * lo
    };
    let log_pps = spread(&pps);
    let log_bps = spread(&bps);
    (
        xy_svg(
            "throughput: frames",
            "frame size (bytes, FCS included)",
            if log_pps { "Mpps (log)" } else { "Mpps" },
            &pps,
            log_pps,
        ),
        xy_svg(
            "throughput: bits",
            "frame size (bytes, FCS included)",
            if log_bps {
                "Gbit/s, layer 1 (log)"
            } else {
                "Gbit/s, layer 1"
            },
            &bps,
            log_bps,
        ),
    )
}

/// A percentile's name and how to read it from a distribution.
type Percentile = (&'static str, fn(&LatencyStats) -> f64);

/// Percentiles of `stats` that a latency figure draws.
const PERCENTILES: [Percentile; 4] = [
    ("p50", |s| s.p50_ns),
    ("p99", |s| s.p99_ns),
    ("p99.9", |s| s.p99_9_ns),
    ("max", |s| s.max_ns),
];

/// Percentiles against the frame size at the highest load measured (the throughput).
fn latency_by_size_svg(l: &[LatencyFigure]) -> String {
    let series: Vec<Series> = PERCENTILES
        .iter()
        .zip(PALETTE.iter())
        .map(|(&(label, f), &color)| Series {
            label: label.into(),
            points: l
                .iter()
                .filter_map(|s| {
                    let top = s.points.iter().max_by(|a, b| a.0.total_cmp(&b.0))?;
                    Some((s.mean_bytes, f(&top.2) / 1e3))
                })
                .collect(),
            color,
            mark: Mark::Line,
        })
        .collect();
    xy_svg(
        "latency at the throughput",
        "frame size (bytes, FCS included)",
        "latency (µs, log)",
        &series,
        true,
    )
}

/// One line per frame size through its (x, y) points, in x order.
fn line_per_size<'a>(sizes: impl Iterator<Item = (&'a str, Vec<(f64, f64)>)>) -> Vec<Series> {
    sizes
        .zip(PALETTE.iter().cycle())
        .map(|((size, mut points), &color)| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                label: format!("{size} B"),
                points,
                color,
                mark: Mark::Line,
            }
        })
        .collect()
}

/// One percentile against the load, one line per frame size.
fn latency_by_load_svg(l: &[LatencyFigure], label: &str, f: fn(&LatencyStats) -> f64) -> String {
    let series = line_per_size(l.iter().map(|s| {
        let points = s.points.iter().map(|p| (p.0, f(&p.2) / 1e3)).collect();
        (s.size.as_str(), points)
    }));
    xy_svg(
        &format!("latency {label} against the load"),
        "load (% of the throughput)",
        "latency (µs, log)",
        &series,
        true,
    )
}

fn loss_svg(c: &[LossFigure]) -> String {
    let series = line_per_size(c.iter().map(|s| (s.size.as_str(), s.points.clone())));
    xy_svg(
        "frame loss rate",
        "load (% of the highest rate)",
        "frames lost (%)",
        &series,
        false,
    )
}

fn rate_cell(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

fn throughput_table(t: &[ThroughputFigure]) -> Markup {
    let header = [
        "frame",
        "NDR pps",
        "NDR Mbit/s, L1",
        "% of line",
        "PDR pps",
        "highest rate pps",
        "trials",
        "time s",
    ];
    let rows = t.iter().map(|p| {
        let thousandths = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
        vec![
            format!("{} B", p.size),
            rate_cell(p.ndr_pps),
            thousandths(p.ndr_pps.map(|v| l1_bps(v, p.mean_bytes) / 1e6)),
            thousandths(p.ndr_pps.map(|v| 100.0 * v / p.line_rate_pps)),
            rate_cell(p.pdr_pps),
            format!("{:.1} ({})", p.max_pps, p.max_source),
            p.trials.to_string(),
            format!("{:.1}", p.seconds),
        ]
    });
    html_table(&header, rows.map(|cells| (cells, None)))
}

fn latency_table(l: &[LatencyFigure]) -> Markup {
    let header = [
        "frame",
        "load %",
        "rate pps",
        "frames",
        "min µs",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "p99.99 µs",
        "max µs",
    ];
    let rows = l.iter().flat_map(|s| {
        s.points.iter().map(|(load, pps, st)| {
            let mut cells = vec![
                format!("{} B", s.size),
                format!("{load:.0}"),
                format!("{pps:.1}"),
                st.count.to_string(),
            ];
            let percentiles = [
                st.min_ns,
                st.p50_ns,
                st.p99_ns,
                st.p99_9_ns,
                st.p99_99_ns,
                st.max_ns,
            ];
            cells.extend(percentiles.map(|v| format!("{:.3}", v / 1e3)));
            (cells, None)
        })
    });
    html_table(&header, rows)
}

/// The self-contained HTML report of RFC 2544 benchmarks.
pub fn html_report(title: &str, f: &Rfc2544Figures) -> String {
    let body = html! {
        @for note in &f.notes {
            p.note { (note) }
        }
        @if !f.throughput.is_empty() {
            h2 { "Throughput" }
            (throughput_table(&f.throughput))
            @let (pps, bps) = throughput_svgs(&f.throughput);
            div.figures {
                figure { (inline_svg(pps)) }
                figure { (inline_svg(bps)) }
            }
        }
        @if !f.latency.is_empty() {
            h2 { "Latency" }
            (latency_table(&f.latency))
            div.figures {
                figure { (inline_svg(latency_by_size_svg(&f.latency))) }
                figure { (inline_svg(latency_by_load_svg(&f.latency, "p50", |s| s.p50_ns))) }
                figure { (inline_svg(latency_by_load_svg(&f.latency, "p99", |s| s.p99_ns))) }
            }
        }
        @if !f.loss.is_empty() {
            h2 { "Frame loss rate" }
            div.figures {
                figure { (inline_svg(loss_svg(&f.loss))) }
            }
        }
        @for t in &f.tables {
            (table_markup(t))
        }
    };
    page(title, body)
}

/// A table of a report: its title, column heads, and rows each marked passing or failing.
#[derive(Clone, Debug)]
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<(Vec<String>, bool)>,
}

/// A self-contained HTML report of notes and pass/fail tables (the Y.1564 step tables):
/// failing rows are marked so that they stand out.
pub fn table_report(title: &str, notes: &[String], tables: &[Table]) -> String {
    let body = html! {
        @for note in notes {
            p.note { (note) }
        }
        @for t in tables {
            (table_markup(t))
        }
    };
    page(title, body)
}

fn table_markup(t: &Table) -> Markup {
    let rows = t.rows.iter().map(|(cells, pass)| {
        let style = if *pass { "" } else { "background: #fde2e1" };
        (cells.clone(), Some(style))
    });
    html! {
        h2 { (t.title) }
        (html_table(&t.header, rows))
    }
}

/// A table of text cells under column heads; a row with a style carries it (a failing
/// step's colour).
fn html_table(
    header: &[impl AsRef<str>],
    rows: impl Iterator<Item = (Vec<String>, Option<&'static str>)>,
) -> Markup {
    html! {
        table {
            thead { tr { @for h in header { th { (h.as_ref()) } } } }
            tbody {
                @for (cells, style) in rows {
                    tr style=[style] {
                        @for c in cells { td { (c) } }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(p50: f64) -> LatencyStats {
        LatencyStats {
            count: 1000,
            min_ns: p50 / 2.0,
            mean_ns: p50,
            stddev_ns: 1.0,
            p50_ns: p50,
            p90_ns: p50 * 1.5,
            p99_ns: p50 * 2.0,
            p99_9_ns: p50 * 3.0,
            p99_99_ns: p50 * 4.0,
            p99_999_ns: p50 * 5.0,
            p99_9999_ns: p50 * 6.0,
            max_ns: p50 * 7.0,
        }
    }

    fn figures() -> Rfc2544Figures {
        let sizes = [("64", 64.0, 1.0e6), ("1518", 1518.0, 81_000.0)];
        Rfc2544Figures {
            notes: vec!["every frame's latency".into()],
            throughput: sizes
                .iter()
                .map(|&(size, bytes, ndr)| ThroughputFigure {
                    size: size.into(),
                    mean_bytes: bytes,
                    ndr_pps: Some(ndr),
                    pdr_pps: Some(ndr * 1.01),
                    max_pps: ndr * 2.0,
                    max_source: "line rate".into(),
                    line_rate_pps: 10e9 / ((bytes + 20.0) * 8.0),
                    trials: 5,
                    seconds: 12.0,
                })
                .collect(),
            latency: sizes
                .iter()
                .map(|&(size, bytes, ndr)| LatencyFigure {
                    size: size.into(),
                    mean_bytes: bytes,
                    points: vec![
                        (100.0, ndr, stats(20_000.0)),
                        (50.0, ndr / 2.0, stats(5_000.0)),
                    ],
                })
                .collect(),
            loss: vec![LossFigure {
                size: "64".into(),
                points: vec![(100.0, 50.0), (90.0, 44.0), (50.0, 0.0), (40.0, 0.0)],
            }],
            tables: Vec::new(),
        }
    }

    #[test]
    fn the_report_has_every_standard_chart_and_no_external_resource() {
        let html = html_report("strobe rfc2544", &figures());
        // Throughput in frames and in bits, latency by size and by load (p50, p99), loss.
        assert_eq!(html.matches("<svg").count(), 2 + 3 + 1, "{html}");
        for title in [
            "throughput: frames",
            "throughput: bits",
            "latency at the throughput",
            "latency p99 against the load",
            "frame loss rate",
        ] {
            assert!(html.contains(title), "{title}");
        }
        assert!(!html.contains("http://") && !html.contains("https://"));
        // One throughput row per size, one latency row per size and load.
        assert!(html.contains("<td>1000000.0</td>"));
        assert_eq!(html.matches("<td>100</td>").count(), 2);
        // 64-byte frames at 1 Mpps are 672 Mbit/s on the wire, 6.72 % of 10 GbE's 14.88 Mpps.
        assert!(html.contains("<td>672.000</td>") && html.contains("<td>6.720</td>"));
    }

    #[test]
    fn a_table_report_marks_its_failing_rows() {
        let table = Table {
            title: "service `data`".into(),
            header: vec!["step".into(), "verdict".into()],
            rows: vec![
                (vec!["25 %".into(), "PASS".into()], true),
                (vec!["100 %".into(), "FAIL (FLR)".into()], false),
            ],
        };
        let html = table_report("y", &["note".into()], &[table]);
        assert_eq!(html.matches("<tr").count(), 3);
        assert_eq!(html.matches("#fde2e1").count(), 1);
        assert!(html.contains("<td>FAIL (FLR)</td>") && html.contains("service `data`"));
    }

    #[test]
    fn an_empty_report_has_no_figure() {
        let html = html_report("t", &Rfc2544Figures::default());
        assert_eq!(html.matches("<svg").count(), 0);
    }
}
