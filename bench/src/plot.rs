//! benchmarks.svg: capacity units and calls per page against the project's size.

use std::path::Path;

use anyhow::Result;

use crate::report::Results;
use crate::{Stat, baselines};

/// The plot's lines: the grid's two pages and the three other designs.
const SERIES: [(&str, (u8, u8, u8)); 5] = [
    (crate::ALL_STATES, (31, 119, 180)),
    ("grid page of missing values (same position)", (44, 160, 44)),
    (baselines::SORT_IN_MEMORY, (214, 39, 40)),
    (baselines::VALUES_TABLE, (148, 103, 189)),
    (baselines::GSI_WITH_FILTER, (255, 127, 14)),
];

/// Two log-log panels side by side: capacity units per page, and calls per page.
pub(crate) fn plot_svg(r: &Results, path: &Path) -> Result<()> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1100, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (left, right) = root.split_horizontally(550);
    draw_panel(&left, r, "capacity units per page", |s| s.capacity, true)?;
    draw_panel(&right, r, "DynamoDB calls per page", |s| s.calls, false)?;
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// One panel: `value` of each series against the project's size; the legend when `legend`.
fn draw_panel(
    area: &plotters::drawing::DrawingArea<
        plotters::prelude::SVGBackend<'_>,
        plotters::coord::Shift,
    >,
    r: &Results,
    title: &str,
    value: fn(&Stat) -> f64,
    legend: bool,
) -> Result<()> {
    use plotters::prelude::*;
    let xs: Vec<f64> = r.patterns.iter().map(|(n, _)| *n as f64).collect();
    let (xmin, xmax) = (
        xs.first().copied().unwrap_or(1.0) * 0.8,
        xs.last().copied().unwrap_or(10.0) * 1.25,
    );
    let ymax = r
        .patterns
        .iter()
        .flat_map(|(_, m)| m.values().map(value))
        .fold(1.0, f64::max)
        * 2.0;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d((xmin..xmax).log_scale(), (0.1..ymax).log_scale())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("issues in the project")
        .x_label_formatter(&|x| format!("{:.0}", x))
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    for (name, (red, green, blue)) in SERIES {
        let color = RGBColor(red, green, blue);
        let points: Vec<(f64, f64)> = r
            .patterns
            .iter()
            .filter_map(|(n, m)| m.get(name).map(|s| (*n as f64, value(s).max(0.1))))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(name.trim_start_matches("baseline: "))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        chart
            .draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    if legend {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 11))
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(())
}
