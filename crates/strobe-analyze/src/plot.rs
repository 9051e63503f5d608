//! Latency figures as SVG and the self-contained HTML latency report.
//!
//! The figures are drawn with plotters' SVG backend, which writes text as `<text>` elements
//! for the viewer to render: no font files are read, so they draw the same on any machine.
//! The report is one HTML file with inline CSS and inline SVG and no external resource.

use hdrhistogram::Histogram;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::latency::{LatencyStats, LoadPoint, PERCENTILES};

/// The lowest level the CCDF shows: one sample in a million slower (the p99.9999 line).
pub const CCDF_FLOOR: f64 = 1e-6;

const WIDTH: u32 = 900;
const HEIGHT: u32 = 540;
pub(crate) const FONT: &str = "sans-serif";
/// Okabe–Ito colours: told apart also by colour-blind readers.
pub(crate) const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
];
pub(crate) const GREY: RGBColor = RGBColor(120, 120, 120);

/// Drawing into an in-memory SVG string has no I/O and plotters' built-in font metrics
/// cannot fail, so a drawing error can only be a bug in the chart code here.
pub(crate) const DRAWING_IS_INFALLIBLE: &str = "drawing an SVG into memory cannot fail";

/// One flow of an HTML latency report.
#[derive(Clone, Debug)]
pub struct FlowLatency<'a> {
    pub name: String,
    pub stats: LatencyStats,
    pub hist: &'a Histogram<u64>,
    /// Which timestamp source each side used, as shown to the reader, one line per side
    /// (for example "tx: strobe TSC clock\nrx: kernel software timestamp").
    pub sources: String,
    /// Calibrated constant to subtract from every value (the measurement path's own
    /// latency), in ns; the report then shows raw and corrected values.
    pub correction_ns: Option<f64>,
    /// What was sent and what came back, when known.
    pub traffic: Option<FlowTraffic>,
    /// Latency per interval of the run, in time order (empty: no intervals were kept).
    pub over_time: Vec<IntervalLatency>,
}

/// What the report says about the run as a whole, above the results.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunContext {
    /// (label, value) rows: date, command, ports, device under test, …; a value may span
    /// several lines.
    pub rows: Vec<(String, String)>,
    /// The scenario file the run was described by, as (name, text), shown folded.
    pub scenario: Option<(String, String)>,
}

/// A flow's traffic, for the report's context.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowTraffic {
    /// What the flow was asked to send, e.g. "20 kpps cbr, 64 B frames (FCS included)".
    pub offered: String,
    pub tx_frames: u64,
    pub rx_frames: u64,
    /// Sent minus received unique frames (None when what was sent is unknown).
    pub lost: Option<u64>,
    /// RFC 3550 interarrival jitter, ns.
    pub jitter_ns: f64,
}

/// One interval of a flow's latency over time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntervalLatency {
    /// Start of the interval, seconds since the run's first interval started.
    pub start_s: f64,
    pub duration_s: f64,
    pub stats: LatencyStats,
}

/// One curve of a CCDF figure: (latency in µs, fraction of samples at least that slow).
struct Curve {
    label: String,
    points: Vec<(f64, f64)>,
    color: RGBColor,
    dashed: bool,
}

/// The CCDF of `hist`, less `offset_ns`, as an exact staircase down to [`CCDF_FLOOR`]:
/// at each recorded bucket (its highest value, as the percentiles use) the curve drops
/// from the fraction of samples in or above the bucket to the fraction above it, and
/// runs level to the next bucket. Values at or below 0 after the offset are drawn at
/// `x_floor_us`, the axis's left end.
fn ccdf_staircase(hist: &Histogram<u64>, offset_ns: f64, x_floor_us: f64) -> Vec<(f64, f64)> {
    let total = hist.len();
    let mut below = 0u64;
    let mut points = Vec::new();
    for bucket in hist.iter_recorded() {
        let x = ((bucket.value_iterated_to() as f64 - offset_ns) / 1000.0).max(x_floor_us);
        points.push((x, (total - below) as f64 / total as f64));
        below += bucket.count_since_last_iteration();
        let above = (total - below) as f64 / total as f64;
        if above < CCDF_FLOOR {
            points.push((x, CCDF_FLOOR));
            break;
        }
        points.push((x, above));
    }
    points
}

/// Room right of a chart for the half of its last x label that lies past the axis
/// (`100000` at 14 px).
const RIGHT_MARGIN: u32 = 40;
/// Room left of the CCDF for its y labels (up to `1e-6 (p99.9999)`) and the axis title.
const CCDF_Y_LABEL_AREA: u32 = 150;
/// Room left of the latency-over-time figure for its decade labels and the axis title.
pub(crate) const TIME_Y_LABEL_AREA: u32 = 90;

/// Smallest latency (1 ns) a log axis starts at, in µs.
const MIN_AXIS_US: f64 = 1e-3;

fn decade_below(v: f64) -> f64 {
    10f64.powi((v.max(MIN_AXIS_US).log10() + 1e-9).floor() as i32)
}

fn decade_above(v: f64) -> f64 {
    10f64.powi((v.max(MIN_AXIS_US).log10() - 1e-9).ceil() as i32)
}

/// Whole decades spanning `lo..=hi` (at least one decade), with the decades as bold key
/// points and 2..9 × each decade as light ones.
fn log_axis(lo: f64, hi: f64) -> (f64, f64, Vec<f64>, Vec<f64>) {
    let lo = decade_below(lo);
    let hi = decade_above(hi).max(lo * 10.0);
    let decades = (hi / lo).log10().round() as i32;
    let bold: Vec<f64> = (0..=decades).map(|k| lo * 10f64.powi(k)).collect();
    let light = bold[..bold.len() - 1]
        .iter()
        .flat_map(|&d| (2..10).map(move |m| d * f64::from(m)))
        .collect();
    (lo, hi, bold, light)
}

/// The [`log_axis`] spanning `values` (those a log axis can show: finite and positive), or
/// 1 to 1000 when there are none.
pub(crate) fn log_axis_over(values: impl Iterator<Item = f64>) -> (f64, f64, Vec<f64>, Vec<f64>) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo.is_finite() {
        log_axis(lo, hi)
    } else {
        log_axis(1.0, 1000.0)
    }
}

/// A decade tick in µs: `0.001`, `1`, `1000`.
pub(crate) fn decade_label(us: f64) -> String {
    if us >= 1.0 {
        format!("{us:.0}")
    } else {
        format!("{us}")
    }
}

/// A CCDF level with the percentile it marks: `0.01 (p99)`, `1e-6 (p99.9999)`.
fn level_label(level: f64) -> String {
    let exponent = (-level.log10()).round() as i32;
    let value = if exponent <= 2 {
        format!("{level}")
    } else {
        format!("1e-{exponent}")
    };
    match PERCENTILES
        .iter()
        .find(|(_, q)| ((1.0 - q) / level - 1.0).abs() < 1e-6)
    {
        Some((label, _)) => format!("{value} ({label})"),
        None => value,
    }
}

/// A standalone SVG of the CCDF of each flow's latency: x is latency in µs on a log scale,
/// y the fraction of packets slower (1 − quantile) on a log scale from 1 down to 1e-6, with
/// the p90 … p99.9999 levels labelled.
pub fn ccdf_svg(title: &str, flows: &[(&str, &Histogram<u64>)]) -> String {
    let curves = flows
        .iter()
        .filter(|(_, hist)| !hist.is_empty())
        .zip(PALETTE.iter().cycle())
        .map(|(&(name, hist), &color)| Curve {
            label: name.to_owned(),
            points: ccdf_staircase(hist, 0.0, MIN_AXIS_US),
            color,
            dashed: false,
        })
        .collect::<Vec<_>>();
    render_ccdf(title, &curves)
}

/// One flow's raw CCDF and, when it has a correction, the corrected one (dashed), at
/// `size` pixels.
fn flow_ccdf_svg(flow: &FlowLatency<'_>, size: (u32, u32)) -> String {
    let mut curves = Vec::new();
    if !flow.hist.is_empty() {
        curves.push(Curve {
            label: "raw".to_owned(),
            points: ccdf_staircase(flow.hist, 0.0, MIN_AXIS_US),
            color: PALETTE[0],
            dashed: false,
        });
        if let Some(correction) = flow.correction_ns {
            curves.push(Curve {
                label: format!("corrected (− {correction:.0} ns)"),
                points: ccdf_staircase(flow.hist, correction, MIN_AXIS_US),
                color: PALETTE[1],
                dashed: true,
            });
        }
    }
    render_ccdf_sized(&format!("{}: CCDF", flow.name), &curves, size)
}

/// Label, statistic and colour of one curve of the latency-over-time figure.
type StatSeries = (&'static str, fn(&LatencyStats) -> f64, RGBColor);

/// Size of the per-flow figures, drawn side by side.
pub(crate) const SIDE_BY_SIDE: (u32, u32) = (640, 480);

/// Latency over the run: p50, p99 and the maximum of each interval (µs, log scale) against
/// the time since the run's first interval began, each value drawn at its interval's
/// middle.
pub fn latency_over_time_svg(
    title: &str,
    intervals: &[IntervalLatency],
    size: (u32, u32),
) -> String {
    let series: [StatSeries; 3] = [
        ("p50", |s| s.p50_ns, PALETTE[0]),
        ("p99", |s| s.p99_ns, PALETTE[1]),
        ("max", |s| s.max_ns, PALETTE[6]),
    ];
    let values_us = intervals.iter().flat_map(|i| {
        series
            .iter()
            .map(move |(_, value, _)| value(&i.stats) / 1000.0)
    });
    let (y_lo, y_hi, y_bold, y_light) = log_axis_over(values_us);
    let x_end = intervals
        .iter()
        .map(|i| i.start_s + i.duration_s)
        .fold(0.0f64, f64::max);
    let x_end = if x_end > 0.0 { x_end } else { 1.0 };

    let mut svg = String::new();
    {
        let root = sized_figure(&mut svg, size);
        let mut chart = titled_chart(&root, title)
            .y_label_area_size(TIME_Y_LABEL_AREA)
            .build_cartesian_2d(
                0.0..x_end,
                (y_lo..y_hi)
                    .log_scale()
                    .with_key_points(y_bold)
                    .with_light_points(y_light),
            )
            .expect(DRAWING_IS_INFALLIBLE);
        draw_grid(
            chart
                .configure_mesh()
                .x_desc("time since the start (s)")
                .y_desc("latency (µs, log scale)")
                .x_label_formatter(&|&s| format_seconds(s))
                .y_label_formatter(&|&us| decade_label(us)),
        );
        for (label, value, color) in series {
            let points = intervals
                .iter()
                .map(|i| (i.start_s + i.duration_s / 2.0, value(&i.stats) / 1000.0));
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)).point_size(3))
                .expect(DRAWING_IS_INFALLIBLE)
                .label(label)
                .legend(legend_sample(color));
        }
        finish_figure(
            &root,
            &mut chart,
            !intervals.is_empty(),
            SeriesLabelPosition::UpperRight,
        );
    }
    svg
}

/// Seconds on a time axis: `0`, `2.5`, `10`.
fn format_seconds(s: f64) -> String {
    let text = format!("{s:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn render_ccdf(title: &str, curves: &[Curve]) -> String {
    render_ccdf_sized(title, curves, (WIDTH, HEIGHT))
}

fn render_ccdf_sized(title: &str, curves: &[Curve], size: (u32, u32)) -> String {
    let xs = curves.iter().flat_map(|c| c.points.iter().map(|p| p.0));
    let (x_lo, x_hi, x_bold, x_light) = log_axis_over(xs);
    let levels: Vec<f64> = (0..=6).map(|k| 10f64.powi(-k)).collect();

    let mut svg = String::new();
    {
        let root = sized_figure(&mut svg, size);
        let mut chart = titled_chart(&root, title)
            .y_label_area_size(CCDF_Y_LABEL_AREA)
            .build_cartesian_2d(
                (x_lo..x_hi)
                    .log_scale()
                    .with_key_points(x_bold)
                    .with_light_points(x_light),
                (CCDF_FLOOR..1.0).log_scale().with_key_points(levels),
            )
            .expect(DRAWING_IS_INFALLIBLE);
        draw_grid(
            chart
                .configure_mesh()
                .x_desc("latency (µs, log scale)")
                .y_desc("fraction of packets slower (1 − quantile)")
                .x_label_formatter(&|&us| decade_label(us))
                .y_label_formatter(&|&level| level_label(level)),
        );
        for curve in curves {
            let style = curve.color.stroke_width(2);
            let color = curve.color;
            let series = if curve.dashed {
                chart.draw_series(DashedLineSeries::new(curve.points.clone(), 8, 5, style))
            } else {
                chart.draw_series(LineSeries::new(curve.points.clone(), style))
            };
            series
                .expect(DRAWING_IS_INFALLIBLE)
                .label(curve.label.as_str())
                .legend(legend_sample(color));
        }
        finish_figure(
            &root,
            &mut chart,
            !curves.is_empty(),
            SeriesLabelPosition::UpperRight,
        );
    }
    svg
}

/// The figures share one look; these helpers hold what every figure draws the same way.
pub(crate) type Figure<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// A white figure of the standard size drawing into `svg`.
fn blank_figure(svg: &mut String) -> Figure<'_> {
    sized_figure(svg, (WIDTH, HEIGHT))
}

/// A white figure of `size` pixels drawing into `svg`.
pub(crate) fn sized_figure(svg: &mut String, size: (u32, u32)) -> Figure<'_> {
    let root = SVGBackend::with_string(svg, size).into_drawing_area();
    root.fill(&WHITE).expect(DRAWING_IS_INFALLIBLE);
    root
}

/// A chart builder with the figures' caption, margin and x label room.
pub(crate) fn titled_chart<'a, 'b>(
    root: &'a Figure<'b>,
    title: &str,
) -> ChartBuilder<'a, 'a, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(title, (FONT, 22))
        .margin(16)
        // The last x label is centred on the axis's end: leave room for half of it.
        .margin_right(RIGHT_MARGIN)
        .x_label_area_size(48);
    builder
}

/// Draws the grid and tick labels in the figures' style.
pub(crate) fn draw_grid<X, Y>(mesh: &mut MeshStyle<'_, '_, X, Y, SVGBackend<'_>>)
where
    X: Ranged + ValueFormatter<X::ValueType>,
    Y: Ranged + ValueFormatter<Y::ValueType>,
{
    mesh.label_style((FONT, 14))
        .bold_line_style(BLACK.mix(0.25))
        .light_line_style(BLACK.mix(0.07))
        .draw()
        .expect(DRAWING_IS_INFALLIBLE);
}

/// The legend's sample of a series: a 24-pixel stroke in its colour.
pub(crate) fn legend_sample(color: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(2))
}

/// Ends a figure: the legend at `legend_at` when it has data, else a "no samples" note.
pub(crate) fn finish_figure<'a, CT: CoordTranslate>(
    root: &Figure<'_>,
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    has_data: bool,
    legend_at: SeriesLabelPosition,
) {
    if has_data {
        chart
            .configure_series_labels()
            .position(legend_at)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()
            .expect(DRAWING_IS_INFALLIBLE);
    } else {
        let style = TextStyle::from((FONT, 18).into_font()).color(&GREY).pos(
            plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Center,
            ),
        );
        let (width, height) = root.dim_in_pixel();
        root.draw_text("no samples", &style, (width as i32 / 2, height as i32 / 2))
            .expect(DRAWING_IS_INFALLIBLE);
    }
    root.present().expect(DRAWING_IS_INFALLIBLE);
}

/// `1500000` → `1.5M`, `250000` → `250k`.
fn format_pps(pps: f64) -> String {
    let (scale, suffix) = [(1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|&(scale, _)| pps.abs() >= scale)
        .unwrap_or((1.0, ""));
    let value = pps / scale;
    // Up to 3 significant digits, without trailing zeros.
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{suffix}")
}

/// Label, value in ns and colour of one latency curve of a load sweep.
type LatencySeries = (&'static str, fn(&LoadPoint) -> f64, RGBColor);

/// Latency against offered load: p50, p99 and p99.99 in µs (log scale, left axis) and
/// the received rate (right axis), one marker per point, points in order of offered load.
pub fn load_sweep_svg(points: &[LoadPoint]) -> String {
    let mut points = points.to_vec();
    points.sort_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps));
    let latencies_us = points
        .iter()
        .flat_map(|p| [p.p50_ns, p.p99_ns, p.p9999_ns])
        .map(|ns| ns / 1000.0);
    let (y_lo, y_hi, y_bold, y_light) = log_axis_over(latencies_us);
    let finite_max = |values: &mut dyn Iterator<Item = f64>| {
        values.filter(|v| v.is_finite()).fold(0.0f64, f64::max)
    };
    let x_max = match finite_max(&mut points.iter().map(|p| p.offered_pps)) {
        max if max > 0.0 => max * 1.05,
        _ => 1.0,
    };
    let rate_max = match finite_max(
        &mut points
            .iter()
            .flat_map(|p| [p.offered_pps, p.sent_pps, p.received_pps]),
    ) {
        max if max > 0.0 => max * 1.05,
        _ => 1.0,
    };

    let mut svg = String::new();
    {
        let root = blank_figure(&mut svg);
        let mut chart = titled_chart(&root, "latency against offered load")
            .y_label_area_size(80)
            .right_y_label_area_size(80)
            .build_cartesian_2d(
                0.0..x_max,
                (y_lo..y_hi)
                    .log_scale()
                    .with_key_points(y_bold)
                    .with_light_points(y_light),
            )
            .expect(DRAWING_IS_INFALLIBLE)
            .set_secondary_coord(0.0..x_max, 0.0..rate_max);
        draw_grid(
            chart
                .configure_mesh()
                .x_desc("offered load (packets/s)")
                .y_desc("latency (µs, log scale)")
                .x_label_formatter(&|&pps| format_pps(pps))
                .y_label_formatter(&|&us| decade_label(us)),
        );
        chart
            .configure_secondary_axes()
            .y_desc("received rate (packets/s)")
            .y_label_formatter(&|&pps| format_pps(pps))
            .label_style((FONT, 14))
            .draw()
            .expect(DRAWING_IS_INFALLIBLE);

        let clamp = |ns: f64| (ns / 1000.0).clamp(y_lo, y_hi);
        let latency_series: [LatencySeries; 3] = [
            ("p50", |p| p.p50_ns, PALETTE[0]),
            ("p99", |p| p.p99_ns, PALETTE[1]),
            ("p99.99", |p| p.p9999_ns, PALETTE[2]),
        ];
        for (label, value, color) in latency_series {
            let data = points.iter().map(|p| (p.offered_pps, clamp(value(p))));
            chart
                .draw_series(LineSeries::new(data, color.stroke_width(2)).point_size(3))
                .expect(DRAWING_IS_INFALLIBLE)
                .label(label)
                .legend(legend_sample(color));
        }
        let received = points.iter().map(|p| (p.offered_pps, p.received_pps));
        chart
            .draw_secondary_series(LineSeries::new(received, GREY.stroke_width(2)).point_size(3))
            .expect(DRAWING_IS_INFALLIBLE)
            .label("received rate (right axis)")
            .legend(legend_sample(GREY));
        finish_figure(
            &root,
            &mut chart,
            !points.is_empty(),
            SeriesLabelPosition::UpperLeft,
        );
    }
    svg
}

/// An SVG for inlining in HTML. HTML parsers put `<svg>` in the SVG namespace themselves,
/// so the namespace declaration goes: it is the only URL in the figure, and the report
/// should contain none.
pub(crate) fn inline_svg(svg: String) -> PreEscaped<String> {
    PreEscaped(svg.replacen(r#" xmlns="http://www.w3.org/2000/svg""#, "", 1))
}

const CSS: &str = "
body { font-family: sans-serif; margin: 2em auto; max-width: 1320px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; }
h2 { font-size: 1.25em; margin-top: 2em; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.3em 0.6em; text-align: right; }
th:first-child, td:first-child, th.text, td.text { text-align: left; }
tr.corrected td { color: #a04000; }
td.unresolved { color: #aaa; }
table.context { background: #f6f7f9; border: 1px solid #dde; }
table.context th { text-align: left; vertical-align: top; white-space: nowrap; color: #555; font-weight: normal; }
table.context td { text-align: left; white-space: pre-line; }
table.context code { white-space: pre-wrap; word-break: break-all; }
p.note { color: #555; font-size: 0.9em; }
p.sources { font-size: 0.9em; line-height: 1.5; white-space: pre-line; }
details { margin: 0.6em 0; font-size: 0.9em; }
details pre { background: #f6f7f9; border: 1px solid #dde; padding: 0.6em; overflow-x: auto; }
.figures { display: flex; flex-wrap: wrap; gap: 1em; }
.figures figure { flex: 1 1 560px; }
figure { margin: 1em 0; }
figcaption { color: #555; font-size: 0.9em; }
svg { max-width: 100%; height: auto; }
";

/// Microseconds with nanosecond digits.
fn us(ns: f64) -> String {
    format!("{:.3}", ns / 1000.0)
}

fn stats_row(name: &str, kind: &str, stats: &LatencyStats, class: &str) -> Markup {
    let unresolved: Vec<&str> = stats
        .percentiles()
        .iter()
        .filter(|&&(_, q, _)| !stats.resolves(q))
        .map(|&(label, _, _)| label)
        .collect();
    html! {
        tr class=(class) {
            td { (name) }
            td.text { (kind) }
            td { (stats.count) }
            @for (label, value) in stats.rows() {
                @if unresolved.contains(&label) {
                    td.unresolved title="too few samples to resolve this percentile: it is the maximum" { (us(value)) }
                } @else {
                    td { (us(value)) }
                }
            }
        }
    }
}

/// The run's context: one row per (label, value); a value that looks like a command line
/// is set in code.
fn context_table(context: &[(String, String)]) -> Markup {
    html! {
        table.context {
            tbody {
                @for (label, value) in context {
                    tr {
                        th scope="row" { (label) }
                        @if label == "command" {
                            td { code { (value) } }
                        } @else {
                            td { (value) }
                        }
                    }
                }
            }
        }
    }
}

/// What each flow sent and received, with its jitter and timestamp sources.
fn traffic_table(flows: &[FlowLatency<'_>]) -> Markup {
    html! {
        table {
            thead {
                tr {
                    th { "flow" }
                    th.text { "offered" }
                    th { "tx frames" }
                    th { "rx frames" }
                    th { "lost" }
                    th { "loss %" }
                    th { "jitter µs" }
                }
            }
            tbody {
                @for flow in flows {
                    @if let Some(t) = &flow.traffic {
                        tr {
                            td { (flow.name) }
                            td.text { (t.offered) }
                            td { (t.tx_frames) }
                            td { (t.rx_frames) }
                            td { (t.lost.map_or("-".to_owned(), |l| l.to_string())) }
                            td { (t.lost.map_or("-".to_owned(), |l| format!("{:.4}", l as f64 * 100.0 / t.tx_frames.max(1) as f64))) }
                            td { (us(t.jitter_ns)) }
                        }
                    }
                }
            }
        }
    }
}

/// A self-contained HTML report: the run's context (date, command, ports, DUT, …, and the
/// scenario file), each flow's traffic, a table of each flow's latency statistics
/// (raw and, where the flow has a correction, corrected), a CCDF figure of all flows
/// together (when there is more than one) and, per flow, its CCDF (the corrected curve
/// dashed) beside its latency over time. One file, no external resource: inline CSS and
/// inline SVG.
pub fn html_report(title: &str, context: &RunContext, flows: &[FlowLatency<'_>]) -> String {
    let combined: Vec<(&str, &Histogram<u64>)> =
        flows.iter().map(|f| (f.name.as_str(), f.hist)).collect();
    let body = html! {
                @if !context.rows.is_empty() || context.scenario.is_some() {
                    section.context {
                        h2 { "Run" }
                        (context_table(&context.rows))
                        @if let Some((name, text)) = &context.scenario {
                            details {
                                summary { "Scenario file " code { (name) } }
                                pre { (text) }
                            }
                        }
                    }
                }
                @if flows.iter().any(|f| f.traffic.is_some()) {
                    h2 { "Traffic" }
                    p.note {
                        "Frames as sent and as received (unique frames); loss is final after \
                         the drain. Jitter: RFC 3550 interarrival jitter."
                    }
                    (traffic_table(flows))
                }
                h2 { "Latency (µs)" }
                p.note {
                    "Latencies in microseconds. Each percentile is the top of its HdrHistogram \
                     bucket (3 significant digits); grey ones have too few samples beyond them \
                     to be resolved and equal the maximum. Corrected rows subtract the \
                     calibrated latency of the measurement path itself."
                }
                table {
                    thead {
                        tr {
                            th { "flow" }
                            th { "values" }
                            th { "count" }
                            @for (label, _) in flows.first().map(|f| f.stats.rows()).unwrap_or_default() {
                                th { (label) }
                            }
                        }
                    }
                    tbody {
                        @for flow in flows {
                            (stats_row(&flow.name, "raw", &flow.stats, "raw"))
                            @if let Some(correction) = flow.correction_ns {
                                (stats_row(
                                    &flow.name,
                                    &format!("corrected (− {correction:.0} ns)"),
                                    &flow.stats.subtract(correction),
                                    "corrected",
                                ))
                            }
                        }
                    }
                }
                @if flows.len() > 1 {
                    h2 { "All flows" }
                    figure { (inline_svg(ccdf_svg("all flows", &combined))) }
                }
                @for flow in flows {
                    section {
                        h2 { "Flow " (flow.name) }
                        p.sources { "Timestamps:\n" (flow.sources) }
                        @if let Some(correction) = flow.correction_ns {
                            p { "Calibration: " (format!("{correction:.1}")) " ns subtracted from corrected values." }
                        }
                        div.figures {
                            figure {
                                (inline_svg(flow_ccdf_svg(flow, SIDE_BY_SIDE)))
                                figcaption { "How many packets were slower than each latency (log scales)." }
                            }
                            figure {
                                (inline_svg(latency_over_time_svg(
                                    &format!("{}: latency over time", flow.name),
                                    &flow.over_time,
                                    SIDE_BY_SIDE,
                                )))
                                figcaption {
                                    @if flow.over_time.is_empty() {
                                        "No intervals were kept for this run."
                                    } @else {
                                        "p50, p99 and maximum of each "
                                        (format_seconds(flow.over_time[0].duration_s))
                                        " s interval (--hdr-interval)."
                                    }
                                }
                            }
                        }
                    }
                }
    };
    page(title, body)
}

/// A self-contained HTML page: inline CSS, `title` as its heading, then `body`.
pub(crate) fn page(title: &str, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(CSS)) }
            }
            body {
                h1 { (title) }
                (body)
            }
        }
    }
    .into_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::tests::{engine_histogram, tailed};

    /// What the test reads back from a chart: its tick labels and its data polylines.
    struct ParsedChart {
        /// (text, x, y, text-anchor) of every text element.
        texts: Vec<(String, f64, f64, String)>,
        /// (stroke colour, points) of every 2-pixel-wide polyline but the legend's samples.
        curves: Vec<(String, Vec<(f64, f64)>)>,
    }

    fn parse_svg(svg: &str) -> ParsedChart {
        let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        let number = |node: roxmltree::Node, attr: &str| -> f64 {
            node.attribute(attr).unwrap_or("0").parse().unwrap()
        };
        let texts = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .map(|n| {
                (
                    n.text().unwrap_or("").trim().to_owned(),
                    number(n, "x"),
                    number(n, "y"),
                    n.attribute("text-anchor").unwrap_or("").to_owned(),
                )
            })
            .collect();
        let curves = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke-width") == Some("2"))
            .map(|n| {
                let points: Vec<(f64, f64)> = n
                    .attribute("points")
                    .unwrap()
                    .split_whitespace()
                    .map(|p| {
                        let (x, y) = p.split_once(',').unwrap();
                        (x.parse().unwrap(), y.parse().unwrap())
                    })
                    .collect();
                (n.attribute("stroke").unwrap().to_owned(), points)
            })
            .filter(|(_, points)| !is_legend_sample(points))
            .collect();
        ParsedChart { texts, curves }
    }

    /// The legend draws each series as a 24-pixel horizontal stroke.
    fn is_legend_sample(points: &[(f64, f64)]) -> bool {
        matches!(points, [a, b] if a.1 == b.1 && b.0 - a.0 == 24.0)
    }

    /// Maps a pixel back to a value on a log axis, fitted on two tick labels.
    struct LogAxis {
        px0: f64,
        decade0: f64,
        px_per_decade: f64,
    }

    impl LogAxis {
        fn fit(ticks: &[(f64, f64)]) -> LogAxis {
            assert!(ticks.len() >= 2, "need two ticks: {ticks:?}");
            let (v0, p0) = ticks[0];
            let (v1, p1) = ticks[ticks.len() - 1];
            LogAxis {
                px0: p0,
                decade0: v0.log10(),
                px_per_decade: (p1 - p0) / (v1.log10() - v0.log10()),
            }
        }
        fn value(&self, px: f64) -> f64 {
            10f64.powf(self.decade0 + (px - self.px0) / self.px_per_decade)
        }
        fn px(&self, value: f64) -> f64 {
            self.px0 + (value.log10() - self.decade0) * self.px_per_decade
        }
        /// Relative error one pixel amounts to.
        fn relative_per_px(&self) -> f64 {
            10f64.powf(1.0 / self.px_per_decade.abs()) - 1.0
        }
    }

    fn x_axis(chart: &ParsedChart) -> LogAxis {
        let mut ticks: Vec<(f64, f64)> = chart
            .texts
            .iter()
            .filter(|(_, _, _, anchor)| anchor == "middle")
            .filter_map(|(text, x, _, _)| text.parse::<f64>().ok().map(|v| (v, *x)))
            .collect();
        ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
        LogAxis::fit(&ticks)
    }

    /// The CCDF levels labelled on the y axis, as (percentile label, pixel row).
    fn level_rows(chart: &ParsedChart) -> Vec<(String, f64)> {
        chart
            .texts
            .iter()
            .filter_map(|(text, _, y, _)| {
                let label = text.strip_suffix(')')?.split_once(" (")?.1;
                let is_percentile = label
                    .strip_prefix('p')
                    .is_some_and(|digits| digits.parse::<f64>().is_ok());
                is_percentile.then(|| (label.to_owned(), *y))
            })
            .collect()
    }

    /// The x pixel where the curve's first vertical drop crosses pixel row `row`.
    fn crossing(points: &[(f64, f64)], row: f64) -> f64 {
        points
            .windows(2)
            .find(|w| w[0].0 == w[1].0 && w[0].1 <= row && row <= w[1].1)
            .map(|w| w[0].0)
            .unwrap_or_else(|| panic!("no drop crosses row {row}"))
    }

    /// A Pareto tail from 10 µs, P(latency > x) = (10 µs / x)²: every level from p90 to
    /// p99.999 falls inside a steep stretch of the curve (p99 = 100 µs, p99.99 = 1 ms).
    fn pareto(samples: u64) -> Histogram<u64> {
        let mut h = engine_histogram();
        for i in 0..samples {
            let survival = (i as f64 + 0.5) / samples as f64;
            h.record((10_000.0 / survival.sqrt()) as u64).unwrap();
        }
        h
    }

    #[test]
    fn ccdf_curve_matches_the_histogram_quantiles() {
        let hist = pareto(200_000);
        let svg = ccdf_svg("one flow", &[("a", &hist)]);
        let chart = parse_svg(&svg);
        assert_eq!(chart.curves.len(), 1, "one data curve");
        let points = &chart.curves[0].1;
        // A CCDF never turns back: latency grows left to right, the fraction falls
        // (pixel rows grow downwards).
        assert!(points
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));

        let x = x_axis(&chart);
        let rows = level_rows(&chart);
        let labels: Vec<&str> = rows.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(
            labels,
            ["p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999"]
        );
        // The y labels sit on a log scale: equal spacing per decade.
        let spacing: Vec<f64> = rows.windows(2).map(|w| w[1].1 - w[0].1).collect();
        assert!(
            spacing.iter().all(|s| (s - spacing[0]).abs() <= 1.0),
            "{spacing:?}"
        );

        // Where the curve crosses each labelled level is the histogram's percentile. Both
        // axes are rounded to whole pixels, so allow the percentiles of the levels 1.5
        // pixel rows above and below, and 1.5 pixels of latency either side.
        let levels: Vec<(f64, f64)> = rows
            .iter()
            .map(|(label, row)| {
                let q = PERCENTILES.iter().find(|(l, _)| l == label).unwrap().1;
                (1.0 - q, *row)
            })
            .rev()
            .collect();
        let y = LogAxis::fit(&levels);
        let slack = 1.5 * x.relative_per_px();
        let percentile_us = |level: f64| hist.value_at_quantile(1.0 - level) as f64 / 1000.0;
        for (label, row) in &rows[..5] {
            let got = x.value(crossing(points, *row));
            let lo = percentile_us(y.value(row - 1.5)) * (1.0 - slack);
            let hi = percentile_us(y.value(row + 1.5)) * (1.0 + slack);
            assert!(
                (lo..=hi).contains(&got),
                "{label}: curve at {got} µs, histogram between {lo} and {hi} µs"
            );
        }
        let tolerance = 1.5 * x.relative_per_px();
        // The curve starts at the minimum with every packet slower or equal (level 1) and
        // ends at the maximum, dropping to the floor.
        let top_row = rows[0].1 - spacing[0];
        let (first, last) = (points[0], points[points.len() - 1]);
        assert!((first.1 - top_row).abs() <= 1.0);
        assert!((x.value(first.0) / (hist.min() as f64 / 1000.0) - 1.0).abs() <= tolerance);
        assert!((x.value(last.0) / (hist.max() as f64 / 1000.0) - 1.0).abs() <= tolerance);
        assert!((last.1 - rows[5].1).abs() <= 1.0);
        assert!((x.px(hist.max() as f64 / 1000.0) - last.0).abs() <= 1.5);
    }

    #[test]
    fn ccdf_draws_one_labelled_curve_per_flow() {
        let (a, b) = (tailed(10_000), {
            let mut h = engine_histogram();
            h.record_n(300_000, 50).unwrap();
            h.record_n(700, 50).unwrap();
            h
        });
        let svg = ccdf_svg(
            "two <flows> & more",
            &[
                ("flow a", &a),
                ("flow b", &b),
                ("idle", &engine_histogram()),
            ],
        );
        let chart = parse_svg(&svg);
        assert_eq!(chart.curves.len(), 2, "an empty flow draws no curve");
        assert_ne!(chart.curves[0].0, chart.curves[1].0, "distinct colours");
        let texts: Vec<&str> = chart.texts.iter().map(|t| t.0.as_str()).collect();
        for wanted in ["two <flows> & more", "flow a", "flow b"] {
            assert!(texts.contains(&wanted), "{wanted} missing from {texts:?}");
        }
        // The x axis spans both flows: 0.7 µs .. 300 µs → 0.1 .. 1000 µs.
        let x = x_axis(&chart);
        let b_curve = &chart.curves[1].1;
        assert!((x.value(b_curve[0].0) / 0.7 - 1.0).abs() < 0.02);
        // Half of flow b is slower than 0.7 µs: its first drop ends at level 0.5.
        let rows = level_rows(&chart);
        let decade = rows[1].1 - rows[0].1;
        let level_half = rows[0].1 - decade + decade * 2f64.log10();
        assert!((b_curve[1].1 - level_half).abs() <= 1.0, "{b_curve:?}");

        let empty = parse_svg(&ccdf_svg("nothing", &[]));
        assert!(empty.curves.is_empty());
        assert!(empty.texts.iter().any(|t| t.0 == "no samples"));
    }

    fn sweep() -> Vec<LoadPoint> {
        [
            (4e5, 4e5, 9.0, 15.0, 40.0),
            (1e5, 1e5, 8.0, 12.0, 30.0),
            (8e5, 7.2e5, 200.0, 900.0, 4000.0),
            (6e5, 6e5, 11.0, 30.0, 120.0),
        ]
        .into_iter()
        .map(|(offered, received, p50, p99, p9999)| LoadPoint {
            offered_pps: offered,
            sent_pps: offered,
            received_pps: received,
            loss_pct: (offered - received) * 100.0 / offered,
            p50_ns: p50 * 1000.0,
            p99_ns: p99 * 1000.0,
            p9999_ns: p9999 * 1000.0,
        })
        .collect()
    }

    #[test]
    fn load_sweep_plots_each_percentile_at_its_value() {
        let points = sweep();
        let chart = parse_svg(&load_sweep_svg(&points));
        assert_eq!(
            chart.curves.len(),
            4,
            "p50, p99, p99.99 and the received rate"
        );
        let mut sorted = points.clone();
        sorted.sort_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps));
        let mut ticks: Vec<(f64, f64)> = chart
            .texts
            .iter()
            .filter(|(_, _, _, anchor)| anchor == "end")
            .filter_map(|(text, _, y, _)| text.parse::<f64>().ok().map(|v| (v, *y)))
            .collect();
        ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
        let y = LogAxis::fit(&ticks);
        let tolerance = 2.0 * y.relative_per_px();
        let series: [fn(&LoadPoint) -> f64; 3] = [|p| p.p50_ns, |p| p.p99_ns, |p| p.p9999_ns];
        for ((_, curve), value) in chart.curves.iter().zip(series) {
            assert_eq!(curve.len(), points.len());
            assert!(
                curve.windows(2).all(|w| w[0].0 < w[1].0),
                "ordered by offered load"
            );
            for (&(_, row), point) in curve.iter().zip(&sorted) {
                let want = value(point) / 1000.0;
                assert!(
                    (y.value(row) / want - 1.0).abs() <= tolerance,
                    "{} vs {want}",
                    y.value(row)
                );
            }
        }
        // Higher percentiles sit higher (smaller pixel rows) at every load.
        for i in 0..points.len() {
            assert!(chart.curves[0].1[i].1 > chart.curves[1].1[i].1);
            assert!(chart.curves[1].1[i].1 > chart.curves[2].1[i].1);
        }
        let texts: Vec<&str> = chart.texts.iter().map(|t| t.0.as_str()).collect();
        assert!(texts.contains(&"received rate (right axis)") && texts.contains(&"p99.99"));

        let empty = parse_svg(&load_sweep_svg(&[]));
        assert!(empty.curves.is_empty());
    }

    /// Every text of an SVG, as (text, x, y, anchor, font size, rotated).
    fn texts_with_fonts(svg: &str) -> Vec<(String, f64, f64, String, f64, bool)> {
        let doc = roxmltree::Document::parse(svg).unwrap();
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .map(|n| {
                let number = |attr: &str| n.attribute(attr).unwrap_or("0").parse().unwrap();
                (
                    n.text().unwrap_or("").trim().to_owned(),
                    number("x"),
                    number("y"),
                    n.attribute("text-anchor").unwrap_or("start").to_owned(),
                    number("font-size"),
                    n.attribute("transform").is_some(),
                )
            })
            .collect()
    }

    /// No label runs past the edge of its figure (where a browser would cut it off): each
    /// text's extent, estimated generously at 0.6 em per character, lies inside the figure.
    fn assert_no_text_clipped(svg: &str, what: &str) {
        let doc = roxmltree::Document::parse(svg).unwrap();
        let root = doc.root_element();
        let size = |attr: &str| -> f64 { root.attribute(attr).unwrap().parse().unwrap() };
        let (width, height) = (size("width"), size("height"));
        for (text, x, y, anchor, font, rotated) in texts_with_fonts(svg) {
            let length = text.chars().count() as f64 * 0.6 * font;
            // A rotated label (the y axis title) runs along y, centred on its anchor.
            let (centre, limit) = if rotated { (y, height) } else { (x, width) };
            let (from, to) = match anchor.as_str() {
                "middle" => (centre - length / 2.0, centre + length / 2.0),
                "end" => (centre - length, centre),
                _ => (centre, centre + length),
            };
            assert!(
                from >= 0.0 && to <= limit,
                "{what}: {text:?} spans {from:.0}..{to:.0} of 0..{limit}"
            );
        }
    }

    #[test]
    fn no_axis_label_is_clipped() {
        // From 2.5 µs to 20 ms: the x axis runs from 1 to 100000 µs, the widest labels.
        let mut wide = engine_histogram();
        wide.record_n(2_500, 1000).unwrap();
        wide.record_n(20_000_000, 1).unwrap();
        let stats = LatencyStats::from_histogram(&wide).unwrap();
        let flow = FlowLatency {
            name: "a flow with a long name".into(),
            stats,
            hist: &wide,
            sources: String::new(),
            correction_ns: Some(1_000.0),
            traffic: None,
            over_time: Vec::new(),
        };
        let over_time: Vec<IntervalLatency> = (0..12)
            .map(|k| IntervalLatency {
                start_s: f64::from(k) * 1.5,
                duration_s: 1.5,
                stats,
            })
            .collect();
        assert_no_text_clipped(&ccdf_svg("all flows", &[("a", &wide)]), "combined CCDF");
        assert_no_text_clipped(&flow_ccdf_svg(&flow, SIDE_BY_SIDE), "flow CCDF");
        assert_no_text_clipped(
            &latency_over_time_svg("latency over time", &over_time, SIDE_BY_SIDE),
            "latency over time",
        );
        let mut points = sweep();
        points.push(LoadPoint {
            offered_pps: 1.5e6,
            sent_pps: 1.4e6,
            received_pps: 1.2e6,
            loss_pct: 14.0,
            p50_ns: 2e4,
            p99_ns: 2e6,
            p9999_ns: 2e7,
        });
        assert_no_text_clipped(&load_sweep_svg(&points), "load sweep");
    }

    #[test]
    fn latency_over_time_draws_each_interval_at_its_middle() {
        let mut h = engine_histogram();
        let intervals: Vec<IntervalLatency> = [10_000u64, 20_000, 400_000]
            .iter()
            .enumerate()
            .map(|(k, &ns)| {
                h.reset();
                h.record_n(ns, 100).unwrap();
                IntervalLatency {
                    start_s: k as f64 * 0.5,
                    duration_s: 0.5,
                    stats: LatencyStats::from_histogram(&h).unwrap(),
                }
            })
            .collect();
        let chart = parse_svg(&latency_over_time_svg("t", &intervals, SIDE_BY_SIDE));
        assert_eq!(chart.curves.len(), 3, "p50, p99 and max");
        let mut y_ticks: Vec<(f64, f64)> = chart
            .texts
            .iter()
            .filter(|(_, _, _, anchor)| anchor == "end")
            .filter_map(|(text, _, y, _)| text.parse::<f64>().ok().map(|v| (v, *y)))
            .collect();
        y_ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
        let y = LogAxis::fit(&y_ticks);
        let x_ticks: Vec<(f64, f64)> = chart
            .texts
            .iter()
            .filter(|(_, _, _, anchor)| anchor == "middle")
            .filter_map(|(text, x, _, _)| text.parse::<f64>().ok().map(|v| (v, *x)))
            .collect();
        let (t0, t1) = (x_ticks[0], x_ticks[x_ticks.len() - 1]);
        let seconds = |px: f64| t0.0 + (px - t0.1) * (t1.0 - t0.0) / (t1.1 - t0.1);
        for (_, curve) in &chart.curves {
            assert_eq!(curve.len(), 3);
            for (k, &(px, row)) in curve.iter().enumerate() {
                assert!((seconds(px) - (k as f64 * 0.5 + 0.25)).abs() < 0.02);
                let want_us = [10.0, 20.0, 400.0][k];
                assert!(
                    (y.value(row) / want_us - 1.0).abs() < 0.03,
                    "{} vs {want_us}",
                    y.value(row)
                );
            }
        }
        let empty = parse_svg(&latency_over_time_svg("t", &[], SIDE_BY_SIDE));
        assert!(empty.curves.is_empty());
        assert!(empty.texts.iter().any(|t| t.0 == "no samples"));
    }

    #[test]
    fn html_report_is_self_contained_and_shows_every_flow() {
        let a = tailed(100_000);
        let mut b = engine_histogram();
        b.record_n(25_000, 1000).unwrap();
        let flows = [
            FlowLatency {
                name: "flow <a> & co".into(),
                stats: LatencyStats::from_histogram(&a).unwrap(),
                hist: &a,
                sources: "tx: TSC\nrx: kernel software".into(),
                correction_ns: Some(4_000.0),
                traffic: None,
                over_time: Vec::new(),
            },
            FlowLatency {
                name: "b".into(),
                stats: LatencyStats::from_histogram(&b).unwrap(),
                hist: &b,
                sources: "tx: TSC\nrx: AF_XDP ring".into(),
                correction_ns: None,
                traffic: None,
                over_time: Vec::new(),
            },
        ];
        let context = RunContext {
            rows: vec![("command".into(), "strobe gen <x> & y".into())],
            scenario: Some(("s.toml".into(), "[[flows]]\nname = \"<b>\"".into())),
        };
        let html = html_report("latency <report>", &context, &flows);
        assert!(html.starts_with("<!DOCTYPE html>"));
        for forbidden in [
            "http://", "https://", "<script", "<link", " src=", "@import", "url(",
        ] {
            assert!(!html.contains(forbidden), "{forbidden} in the report");
        }
        assert!(html.contains("<title>latency &lt;report&gt;</title>"));
        assert!(html.contains("<td><code>strobe gen &lt;x&gt; &amp; y</code></td>"));
        assert!(html.contains("<pre>[[flows]]\nname = &quot;&lt;b&gt;&quot;</pre>"));
        assert!(html.contains("flow &lt;a&gt; &amp; co") && !html.contains("flow <a>"));

        // Figures: all flows together, then one per flow; each is well-formed SVG.
        let svgs: Vec<&str> = html
            .match_indices("<svg")
            .map(|(start, _)| {
                let end = html[start..].find("</svg>").unwrap() + start + "</svg>".len();
                &html[start..end]
            })
            .collect();
        // The combined CCDF, then per flow its CCDF and its latency over time.
        assert_eq!(svgs.len(), 5);
        let charts: Vec<ParsedChart> = svgs.iter().map(|s| parse_svg(s)).collect();
        assert_eq!(charts[0].curves.len(), 2, "combined figure");
        assert_eq!(charts[3].curves.len(), 1, "flow b: raw only");
        assert!(charts[2].texts.iter().any(|t| t.0 == "no samples"));
        // Flow a's figure adds the corrected curve, dashed (drawn as short segments in
        // its own colour), 4 µs to the left: it starts at 10 − 4 = 6 µs.
        let (raw_colour, raw) = &charts[1].curves[0];
        let dashes: Vec<&Vec<(f64, f64)>> = charts[1].curves[1..]
            .iter()
            .map(|(colour, points)| {
                assert_ne!(colour, raw_colour);
                points
            })
            .collect();
        assert!(dashes.len() > 10, "{} dashes", dashes.len());
        let x = x_axis(&charts[1]);
        assert!((x.value(raw[0].0) / 10.0 - 1.0).abs() < 0.02);
        assert!((x.value(dashes[0][0].0) / 6.0 - 1.0).abs() < 0.02);
        assert!(charts[1]
            .texts
            .iter()
            .any(|t| t.0 == "corrected (− 4000 ns)"));

        // The table: raw and corrected values of flow a, raw of flow b, in µs.
        let stats = flows[0].stats;
        let corrected = stats.subtract(4_000.0);
        for value in [
            stats.p99_ns,
            corrected.p99_ns,
            stats.max_ns,
            corrected.p99_99_ns,
            flows[1].stats.p50_ns,
        ] {
            let cell = format!("<td>{}</td>", us(value));
            assert!(html.contains(&cell), "{cell} missing");
        }
        assert_eq!(html.matches("<tr class=\"corrected\">").count(), 1);
        // 100 000 samples cannot resolve p99.9999.
        assert!(html.contains(&format!("class=\"unresolved\" title=\"too few samples to resolve this percentile: it is the maximum\">{}", us(stats.p99_9999_ns))));
    }
}
