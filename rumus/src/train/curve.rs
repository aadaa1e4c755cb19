//! The curves of a run as a PNG: a loss panel (train and evaluation) beside a panel of the
//! trainer's first metric (train and evaluation), each with a title, axes, tick labels, axis
//! labels, a marker per epoch and a legend. The text is drawn with DejaVu Sans embedded in the binary (`assets/`, its licence
//! beside it) through plotters' `ab_glyph` backend, so no system font or fontconfig is
//! needed.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::register_font;

use super::summary::EpochSummary;
use crate::error::{Error, Result};

/// Width and height of the image, in pixels.
pub const CURVE_SIZE: (u32, u32) = (1200, 480);

/// The colour (RGB) of the training lines: red.
pub const TRAIN_COLOR: (u8, u8, u8) = (214, 39, 40);
/// The colour (RGB) of the evaluation lines: blue.
pub const EVAL_COLOR: (u8, u8, u8) = (31, 119, 180);

/// The family name the embedded font is registered under.
const FAMILY: &str = "sans-serif";
static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// Writes the curves of `history` to `path` (PNG, [`CURVE_SIZE`]): loss on the left, the
/// first metric (accuracy, F1, ...) on the right when the run measured one, train in
/// [`TRAIN_COLOR`], evaluation in [`EVAL_COLOR`]. Each axis spans its values (a loss from
/// 0). Non-finite values (a diverged loss) are left out of the lines.
pub fn write_curve(history: &[EpochSummary], path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let fail = |e: &dyn std::fmt::Display| Error::Io {
        path: path.display().to_string(),
        message: format!("cannot draw the curves: {e}"),
    };
    register_embedded_font().map_err(|e| fail(&e))?;
    let root = BitMapBackend::new(path, CURVE_SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let title = format!("Training: {} epochs", history.len());
    let body = root.titled(&title, (FAMILY, 26)).map_err(|e| fail(&e))?;
    let metric = history
        .first()
        .and_then(|s| s.train.values.first())
        .map(|(n, _)| n.clone());
    let panels = body.split_evenly((1, if metric.is_some() { 2 } else { 1 }));
    let loss = [
        ("train loss", series(history, |s| Some(s.train.mean_loss()))),
        ("eval loss", series(history, |s| Some(s.eval.mean_loss()))),
    ];
    let (_, top) = span(&loss);
    let loss_range = 0.0..if top > 0.0 { top * 1.1 } else { 1.0 };
    let legend = SeriesLabelPosition::UpperRight;
    panel(&panels[0], ("Loss", "loss"), loss_range, &loss, legend).map_err(|e| fail(&e))?;
    if let Some(name) = metric {
        let values = [
            (
                format!("train {name}"),
                series(history, |s| s.train.get(&name)),
            ),
            (
                format!("eval {name}"),
                series(history, |s| s.eval.get(&name)),
            ),
        ];
        let values = values
            .each_ref()
            .map(|(label, points)| (label.as_str(), points.clone()));
        let (low, high) = span(&values);
        let margin = ((high - low) * 0.1).max(1e-3);
        let mut words = name.chars().map(|c| if c == '_' { ' ' } else { c });
        let caption: String = words
            .next()
            .into_iter()
            .flat_map(char::to_uppercase)
            .chain(words)
            .collect();
        let range = low - margin..high + margin;
        let legend = SeriesLabelPosition::LowerRight;
        panel(&panels[1], (&caption, &name), range, &values, legend).map_err(|e| fail(&e))?;
    }
    root.present().map_err(|e| fail(&e))
}

/// Registers the embedded font once per process.
fn register_embedded_font() -> std::result::Result<(), String> {
    static REGISTERED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            register_font(FAMILY, FontStyle::Normal, FONT)
                .map_err(|_| "the embedded font does not parse".to_string())
        })
        .clone()
}

/// `(epoch, value)` for every epoch whose value exists and is finite.
fn series(
    history: &[EpochSummary],
    value: impl Fn(&EpochSummary) -> Option<f64>,
) -> Vec<(f64, f64)> {
    history
        .iter()
        .filter_map(|s| Some((s.epoch as f64, value(s)?)))
        .filter(|(_, v)| v.is_finite())
        .collect()
}

/// The lowest and highest value of the lines (`(0, 0)` with no points).
fn span(lines: &[(&str, Vec<(f64, f64)>); 2]) -> (f64, f64) {
    let values = || {
        lines
            .iter()
            .flat_map(|(_, points)| points.iter().map(|&(_, v)| v))
    };
    match values().next() {
        None => (0.0, 0.0),
        Some(first) => (
            values().fold(first, f64::min),
            values().fold(first, f64::max),
        ),
    }
}

type Panel<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

/// One chart: its caption, epochs 1..n on x, `range` on y, a train and an eval line with a
/// marker per epoch, and a legend where the lines usually are not (upper right for falling
/// losses, lower right for rising accuracies).
fn panel(
    area: &Panel<'_>,
    (caption, y_label): (&str, &str),
    range: std::ops::Range<f64>,
    lines: &[(&str, Vec<(f64, f64)>); 2],
    legend: SeriesLabelPosition,
) -> std::result::Result<
    (),
    DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>,
> {
    let last = lines
        .iter()
        .flat_map(|(_, points)| points.iter().map(|&(e, _)| e))
        .fold(2.0f64, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FAMILY, 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(1.0..last, range)?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc(y_label)
        .x_labels(10.min(last as usize))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.2}"))
        .label_style((FAMILY, 15))
        .axis_desc_style((FAMILY, 17))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for ((name, points), color) in lines
        .iter()
        .zip([TRAIN_COLOR, EVAL_COLOR].map(|(r, g, b)| RGBColor(r, g, b)))
    {
        chart
            .draw_series(
                LineSeries::new(points.clone(), color.filled().stroke_width(3)).point_size(4),
            )?
            .label(*name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
            });
    }
    chart
        .configure_series_labels()
        .position(legend)
        .label_font((FAMILY, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
}
