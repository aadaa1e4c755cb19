//! The loss/accuracy curve of a run as a PNG. Drawn without text (no font dependency): train
//! loss in red, test loss in blue, test accuracy in green, all on one 0..max scale; the epoch
//! summary lines in the log carry the numbers.

use std::path::Path;

use plotters::prelude::*;

use super::metrics::EpochSummary;
use crate::error::{Error, Result};

/// Writes the curves of `history` to `path` (PNG, 800 x 480).
pub fn write_curve(history: &[EpochSummary], path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let fail = |e: &dyn std::fmt::Display| Error::Io {
        path: path.display().to_string(),
        message: format!("cannot draw the curve: {e}"),
    };
    let series: [(Vec<f64>, RGBColor); 3] = [
        (history.iter().map(|s| s.train.mean_loss()).collect(), RED),
        (history.iter().map(|s| s.eval.mean_loss()).collect(), BLUE),
        (history.iter().map(|s| s.eval.accuracy()).collect(), GREEN),
    ];
    let top = series
        .iter()
        .flat_map(|(v, _)| v.iter().copied())
        .filter(|v| v.is_finite())
        .fold(1.0f64, f64::max);
    let epochs = history.len().max(2) as f64;
    let root = BitMapBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let area = root.margin(20, 20, 20, 20);
    let mut chart = ChartBuilder::on(&area)
        .build_cartesian_2d(1.0..epochs, 0.0..top * 1.05)
        .map_err(|e| fail(&e))?;
    chart
        .plotting_area()
        .draw(&Rectangle::new(
            [(1.0, 0.0), (epochs, top * 1.05)],
            BLACK.stroke_width(1),
        ))
        .map_err(|e| fail(&e))?;
    for (values, color) in &series {
        let points = values.iter().enumerate().map(|(i, &v)| ((i + 1) as f64, v));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(3)))
            .map_err(|e| fail(&e))?;
    }
    root.present().map_err(|e| fail(&e))
}
