//! x–y figures of a few series (points, lines, dashed levels) on a linear or log y axis,
//! shared by the methodology reports.

use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::plot::{
    decade_label, draw_grid, finish_figure, legend_sample, log_axis_over, sized_figure,
    titled_chart, Figure, DRAWING_IS_INFALLIBLE, SIDE_BY_SIDE, TIME_Y_LABEL_AREA,
};

/// How a series is drawn.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Mark {
    Points,
    Line,
    Dashed,
}

pub(crate) struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub color: RGBColor,
    pub mark: Mark,
}

/// A horizontal line across `x` labelled `label`.
pub(crate) fn level(label: String, y: f64, x: (f64, f64), color: RGBColor) -> Series {
    Series {
        label,
        points: vec![(x.0, y), (x.1, y)],
        color,
        mark: Mark::Dashed,
    }
}

/// An x–y figure of `series` over whole-number x (trains, frames, bytes), the y axis linear
/// from below the lowest value (or log).
pub(crate) fn xy_svg(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    log_y: bool,
) -> String {
    let all = || series.iter().flat_map(|s| s.points.iter().copied());
    let (x_lo, x_hi) = all().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (x, _)| {
        (lo.min(x), hi.max(x))
    });
    let (x_lo, x_hi) = if x_lo.is_finite() && x_hi > x_lo {
        (x_lo, x_hi)
    } else {
        (0.0, 1.0)
    };
    let mut svg = String::new();
    {
        let root = sized_figure(&mut svg, SIDE_BY_SIDE);
        let mut builder = titled_chart(&root, title);
        builder.y_label_area_size(TIME_Y_LABEL_AREA);
        if log_y {
            let (lo, hi, bold, light) = log_axis_over(all().map(|p| p.1));
            let mut chart = builder
                .build_cartesian_2d(
                    x_lo..x_hi,
                    (lo..hi)
                        .log_scale()
                        .with_key_points(bold)
                        .with_light_points(light),
                )
                .expect(DRAWING_IS_INFALLIBLE);
            let y_label = |&v: &f64| decade_label(v);
            draw_chart(&root, &mut chart, (x_desc, y_desc), Some(&y_label), series);
        } else {
            let (y_lo, y_hi) = all().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
                (lo.min(p.1), hi.max(p.1))
            });
            let (y_lo, y_hi) = if y_lo.is_finite() {
                let pad = ((y_hi - y_lo) * 0.1).max(y_hi.abs() * 0.01).max(1e-9);
                ((y_lo - pad).max(0.0), y_hi + pad)
            } else {
                (0.0, 1.0)
            };
            let mut chart = builder
                .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
                .expect(DRAWING_IS_INFALLIBLE);
            draw_chart(&root, &mut chart, (x_desc, y_desc), None, series);
        }
    }
    svg
}

/// Draws the grid (whole-number x labels; `y_label` formats the y ticks, plotters' default
/// when `None`), every series, and the legend or the "no samples" note.
fn draw_chart<'a, Y>(
    root: &Figure<'_>,
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    (x_desc, y_desc): (&str, &str),
    y_label: Option<&dyn Fn(&f64) -> String>,
    series: &[Series],
) where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let x_label = |&x: &f64| format!("{x:.0}");
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&x_label);
    if let Some(y_label) = y_label {
        mesh.y_label_formatter(y_label);
    }
    draw_grid(&mut mesh);
    for s in series {
        draw(chart, s);
    }
    let has_data = series.iter().any(|s| !s.points.is_empty());
    finish_figure(root, chart, has_data, SeriesLabelPosition::UpperRight);
}

fn draw<'a, CT>(chart: &mut ChartContext<'a, SVGBackend<'a>, CT>, s: &Series)
where
    CT: CoordTranslate<From = (f64, f64)>,
{
    let color = s.color;
    let anno = match s.mark {
        Mark::Points => chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .expect(DRAWING_IS_INFALLIBLE),
        Mark::Line => chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))
            .expect(DRAWING_IS_INFALLIBLE),
        Mark::Dashed => chart
            .draw_series(DashedLineSeries::new(
                s.points.iter().copied(),
                8,
                5,
                color.stroke_width(2),
            ))
            .expect(DRAWING_IS_INFALLIBLE),
    };
    anno.label(s.label.clone()).legend(legend_sample(color));
}
