//! The SVG charts: capacity by server and workload, answered % against
//! offered rate.

use std::path::Path;

use plotters::prelude::*;

use super::figures::{SERVERS, capped, workloads};
use crate::results::Results;

fn palette(i: usize) -> RGBColor {
    [
        RGBColor(140, 140, 140),
        RGBColor(214, 96, 26),
        RGBColor(31, 119, 180),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
    ][i % 5]
}

pub fn chart_capacity(r: &Results, path: &Path) -> Result<(), String> {
    let ws = workloads(r);
    let n = ws.len().max(1);
    let mut ymax: f64 = 1.0;
    for (id, _) in &ws {
        for sv in SERVERS {
            if let Some(p) = capped(r, sv, id) {
                ymax = ymax.max(p.per_cpu_s.max / 1000.0);
            }
        }
    }
    let root = SVGBackend::new(path, (960, 520)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Answered queries per server CPU-second (k), CPU capped at {:.0}%",
                r.meta.quota * 100.0
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..n as f64, 0f64..ymax * 1.15)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("k answered / CPU-s")
        .draw()
        .map_err(|e| err(&e))?;
    let width = 0.8 / SERVERS.len() as f64;
    for (j, sv) in SERVERS.iter().enumerate() {
        let color = palette(j);
        let mut bars = Vec::new();
        let mut whiskers = Vec::new();
        for (i, (id, _)) in ws.iter().enumerate() {
            if let Some(p) = capped(r, sv, id) {
                let x0 = i as f64 + 0.1 + j as f64 * width;
                bars.push(Rectangle::new(
                    [(x0, 0.0), (x0 + width * 0.9, p.per_cpu_s.median / 1000.0)],
                    color.filled(),
                ));
                let xc = x0 + width * 0.45;
                whiskers.push(PathElement::new(
                    vec![
                        (xc, p.per_cpu_s.min / 1000.0),
                        (xc, p.per_cpu_s.max / 1000.0),
                    ],
                    BLACK.stroke_width(1),
                ));
            }
        }
        chart
            .draw_series(bars)
            .map_err(|e| err(&e))?
            .label(*sv)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        chart.draw_series(whiskers).map_err(|e| err(&e))?;
    }
    // Workload names under their groups of bars.
    for (i, (id, _)) in ws.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        root.draw(&Text::new(
            id.clone(),
            (px - 4 * id.len() as i32, py + 8),
            ("sans-serif", 15),
        ))
        .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

pub fn chart_answered(r: &Results, path: &Path) -> Result<(), String> {
    let sweeps: Vec<_> = r.sweeps.iter().filter(|s| s.workload == "root").collect();
    let xmax = sweeps
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0f64, f64::max)
        / 1000.0;
    let root = SVGBackend::new(path, (960, 520)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Answered % against offered rate, root-like zone, CPU capped at {:.0}%",
                r.meta.quota * 100.0
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..xmax * 1.05, 0f64..105f64)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("offered k queries/s")
        .y_desc("answered %")
        .draw()
        .map_err(|e| err(&e))?;
    for (j, sv) in SERVERS.iter().enumerate() {
        let Some(sw) = sweeps.iter().find(|s| s.server == *sv) else {
            continue;
        };
        let color = palette(j);
        let pts: Vec<(f64, f64)> = sw.points.iter().map(|p| (p.0 / 1000.0, p.2)).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(*sv)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
