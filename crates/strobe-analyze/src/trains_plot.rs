//! The convoy-of-packet-trains report: per-train head latency and bandwidth against the
//! train number (the study's figures), the convergence of their means, and for a sweep the
//! IDI against the swept value. One HTML file with inline SVG, as the latency report.

use maud::{html, Markup};

use crate::latency::LatencyStats;
use crate::plot::{inline_svg, page, PALETTE};
use crate::trains::{Convoy, Summary};
use crate::xy::{level, xy_svg, Mark, Series};

/// What the report shows.
#[derive(Clone, Debug)]
pub struct TrainsFigures {
    /// Where the expected bandwidth comes from, when a bottleneck is known.
    pub bottleneck: Option<String>,
    /// The swept quantity's axis title; None for a single convoy.
    pub sweep: Option<String>,
    pub steps: Vec<StepFigures>,
}

/// One convoy of the report.
#[derive(Clone, Debug)]
pub struct StepFigures {
    pub label: String,
    /// The step's value of the swept quantity (frame size or train length).
    pub swept_value: f64,
    pub convoy: Convoy,
    pub expected_l2_bps: Option<f64>,
    /// Every frame's latency (the naive method), for comparison with the heads'.
    pub every_frame_latency: Option<LatencyStats>,
    /// A constant-rate flow's latency at the heads' rate.
    pub baseline_latency: Option<LatencyStats>,
}

/// Head latency of each train, with the heads' mean and, when measured, the baseline's
/// and every frame's mean as levels.
fn latency_svg(step: &StepFigures) -> String {
    let points: Vec<(f64, f64)> = step
        .convoy
        .trains
        .iter()
        .filter_map(|t| Some((f64::from(t.train), t.head_latency_ns? / 1e3)))
        .collect();
    let span = x_span(&step.convoy);
    let mut series = vec![Series {
        label: "head of each train".into(),
        points,
        color: PALETTE[0],
        mark: Mark::Points,
    }];
    if let Some(s) = step.convoy.head_latency_ns {
        series.push(level("heads' mean".into(), s.mean / 1e3, span, PALETTE[0]));
    }
    if let Some(b) = step.baseline_latency {
        series.push(level(
            "constant-rate baseline, mean".into(),
            b.mean_ns / 1e3,
            span,
            PALETTE[2],
        ));
    }
    if let Some(e) = step.every_frame_latency {
        series.push(level(
            "every frame (naive), mean".into(),
            e.mean_ns / 1e3,
            span,
            PALETTE[1],
        ));
    }
    // Every frame's mean is often far above the heads': a log axis then shows both.
    let (lo, hi) = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|v| *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    let log = hi > 20.0 * lo;
    xy_svg(
        &format!("{}: head latency", step.label),
        "train",
        if log {
            "latency (µs, log)"
        } else {
            "latency (µs)"
        },
        &series,
        log,
    )
}

/// Bandwidth of each train (whole and second half, layer 2), with the expected rate.
fn bandwidth_svg(step: &StepFigures) -> String {
    let of = |f: fn(&crate::trains::TrainResult) -> Option<f64>| {
        step.convoy
            .trains
            .iter()
            .filter_map(|t| Some((f64::from(t.train), f(t)? / 1e6)))
            .collect::<Vec<_>>()
    };
    let mut series = vec![
        Series {
            label: "whole train".into(),
            points: of(|t| t.l2_bps),
            color: PALETTE[0],
            mark: Mark::Points,
        },
        Series {
            label: "second half".into(),
            points: of(|t| t.second_half_l2_bps),
            color: PALETTE[4],
            mark: Mark::Points,
        },
    ];
    if let Some(e) = step.expected_l2_bps {
        series.push(level(
            "expected".into(),
            e / 1e6,
            x_span(&step.convoy),
            PALETTE[6],
        ));
    }
    xy_svg(
        &format!("{}: bandwidth", step.label),
        "train",
        "layer 2 (Mbit/s)",
        &series,
        false,
    )
}

/// The standard deviation of the running mean, in % of the mean, against the trains so far.
fn convergence_svg(step: &StepFigures) -> String {
    let relative = |points: &[crate::trains::ConvergencePoint]| {
        points
            .iter()
            .filter(|p| p.mean.abs() > 0.0)
            .map(|p| (p.trains as f64, p.stddev_of_mean / p.mean.abs() * 100.0))
            .filter(|p| p.1 > 0.0)
            .collect::<Vec<_>>()
    };
    let series = [
        Series {
            label: "head latency".into(),
            points: relative(&step.convoy.latency_convergence),
            color: PALETTE[0],
            mark: Mark::Line,
        },
        Series {
            label: "bandwidth".into(),
            points: relative(&step.convoy.bandwidth_convergence),
            color: PALETTE[1],
            mark: Mark::Line,
        },
    ];
    xy_svg(
        &format!("{}: convergence", step.label),
        "trains",
        "std. dev. of the mean (% of it, log)",
        &series,
        true,
    )
}

/// A line of a sweep figure: its label, and each step's value (None: no point).
type SweepLine = (&'static str, fn(&StepFigures) -> Option<f64>);

/// One figure of a sweep: `value` of each step against the swept quantity.
fn sweep_svg(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    steps: &[StepFigures],
    lines: &[SweepLine],
) -> String {
    let series: Vec<Series> = lines
        .iter()
        .zip(PALETTE.iter())
        .map(|((label, value), &color)| Series {
            label: (*label).to_string(),
            points: steps
                .iter()
                .filter_map(|s| Some((s.swept_value, value(s)?)))
                .collect(),
            color,
            mark: Mark::Line,
        })
        .collect();
    xy_svg(title, x_desc, y_desc, &series, false)
}

fn x_span(c: &Convoy) -> (f64, f64) {
    (0.0, c.trains.len().saturating_sub(1).max(1) as f64)
}

fn cell(s: &Option<Summary>, unit: f64, f: fn(&Summary) -> Option<f64>) -> String {
    s.as_ref()
        .and_then(f)
        .map_or("-".into(), |v| format!("{:.3}", v / unit))
}

fn steps_table(steps: &[StepFigures]) -> Markup {
    html! {
        table {
            thead {
                tr {
                    th { "convoy" } th { "trains" } th { "loss %" }
                    th { "head µs mean" } th { "95 % CI" } th { "IDI µs" }
                    th { "every frame µs mean" } th { "baseline µs mean" }
                    th { "L2 Mbit/s mean (with FCS)" } th { "IDI Mbit/s" }
                    th { "second halves Mbit/s" }
                    th { "expected Mbit/s (layer 2 with FCS, as measured here)" }
                }
            }
            tbody {
                @for s in steps {
                    @let c = &s.convoy;
                    tr {
                        td { (s.label) }
                        td { (c.trains.len()) }
                        td { (format!("{:.4}", c.loss_ratio * 100.0)) }
                        td { (cell(&c.head_latency_ns, 1e3, |s| Some(s.mean))) }
                        td { (c.head_latency_ns.and_then(|s| s.ci95).map_or("-".into(), |(lo, hi)| format!("{:.3} to {:.3}", lo / 1e3, hi / 1e3))) }
                        td { (cell(&c.head_latency_ns, 1e3, |s| s.idi)) }
                        td { (s.every_frame_latency.map_or("-".into(), |l| format!("{:.3}", l.mean_ns / 1e3))) }
                        td { (s.baseline_latency.map_or("-".into(), |l| format!("{:.3}", l.mean_ns / 1e3))) }
                        td { (cell(&c.l2_bps, 1e6, |s| Some(s.mean))) }
                        td { (cell(&c.l2_bps, 1e6, |s| s.idi)) }
                        td { (cell(&c.second_half_l2_bps, 1e6, |s| Some(s.mean))) }
                        td { (s.expected_l2_bps.map_or("-".into(), |e| format!("{:.3}", e / 1e6))) }
                    }
                }
            }
        }
    }
}

/// The self-contained HTML report of a convoy or a sweep of convoys.
pub fn html_report(title: &str, figures: &TrainsFigures) -> String {
    let body = html! {
                p.note {
                    "Trains of frames sent back to back; only each train's head is judged for \
                     latency (the frames behind it queued in the sender), the train's \
                     dispersion at the receiver gives its bandwidth (the bits of its frames after \
                     the first over the time from its first to its last arrival; layer 2 counts \
                     frames with their FCS), its missing frames the loss. IDI = variance / mean \
                     across trains."
                }
                @if let Some(b) = &figures.bottleneck {
                    p { "Expected bandwidth from " (b) "." }
                }
                (steps_table(&figures.steps))
                @if let Some(x_desc) = &figures.sweep {
                    h2 { "Sweep" }
                    div.figures {
                        figure {
                            (inline_svg(sweep_svg("IDI of head latency", x_desc, "IDI (µs)", &figures.steps,
                                &[("head latency", |s| s.convoy.head_latency_ns.and_then(|l| l.idi).map(|v| v / 1e3))])))
                        }
                        figure {
                            (inline_svg(sweep_svg("IDI of bandwidth", x_desc, "IDI (Mbit/s)", &figures.steps,
                                &[("bandwidth, layer 2", |s| s.convoy.l2_bps.and_then(|l| l.idi).map(|v| v / 1e6))])))
                        }
                        figure {
                            (inline_svg(sweep_svg("bandwidth", x_desc, "layer 2 (Mbit/s)", &figures.steps,
                                &[("measured, whole trains", |s| s.convoy.l2_bps.map(|l| l.mean / 1e6)),
                                  ("measured, second halves", |s| s.convoy.second_half_l2_bps.map(|l| l.mean / 1e6)),
                                  ("expected", |s| s.expected_l2_bps.map(|e| e / 1e6))])))
                        }
                    }
                }
                @for step in &figures.steps {
                    section {
                        h2 { (step.label) }
                        div.figures {
                            figure { (inline_svg(latency_svg(step))) }
                            figure { (inline_svg(bandwidth_svg(step))) }
                            figure {
                                (inline_svg(convergence_svg(step)))
                                figcaption { "How the mean settles: its standard deviation (s / √N) after N trains." }
                            }
                        }
                    }
                }
    };
    page(title, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trains::TrainArrival;

    fn step(label: &str, value: f64, trains: u32) -> StepFigures {
        let arrivals: Vec<TrainArrival> = (0..trains)
            .map(|k| TrainArrival {
                train: k,
                frames_sent: 10,
                frames_rx: 10,
                head_latency_ns: Some(20_000.0 + f64::from(k % 3) * 100.0),
                first_rx_ns: Some(1_000_000),
                last_rx_ns: Some(1_000_000 + 9 * (1_600 + u64::from(k % 2) * 10)),
                mid_rx_ns: Some(1_000_000 + 5 * 1_600),
                second_half_rx: 5,
                frame_bytes: 1000,
                ..TrainArrival::default()
            })
            .collect();
        StepFigures {
            label: label.into(),
            swept_value: value,
            convoy: Convoy::of(&arrivals),
            expected_l2_bps: Some(5e9),
            every_frame_latency: None,
            baseline_latency: None,
        }
    }

    #[test]
    fn a_sweep_report_has_its_figures_and_no_external_resource() {
        let figures = TrainsFigures {
            bottleneck: Some("a 5 Gbit/s shaper".into()),
            sweep: Some("frame size".into()),
            steps: vec![step("64 B", 64.0, 20), step("1518 B", 1518.0, 20)],
        };
        let html = html_report("strobe trains", &figures);
        // Three sweep figures, then three per step.
        assert_eq!(html.matches("<svg").count(), 3 + 2 * 3, "{html}");
        for title in [
            "IDI of head latency",
            "IDI of bandwidth",
            "64 B: head latency",
            "1518 B: convergence",
        ] {
            assert!(html.contains(title), "{title}");
        }
        assert!(!html.contains("http://") && !html.contains("https://"));
        // One table row per step, with the expected rate.
        assert_eq!(html.matches("<td>5000.000</td>").count(), 2);
    }

    #[test]
    fn an_empty_convoy_draws_without_samples() {
        let mut s = step("x", 1.0, 0);
        s.expected_l2_bps = None;
        let html = html_report(
            "t",
            &TrainsFigures {
                bottleneck: None,
                sweep: None,
                steps: vec![s],
            },
        );
        assert_eq!(html.matches("no samples").count(), 3);
    }
}
