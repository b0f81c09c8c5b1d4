//! Dominance bars (thesis Figs. 4.17–4.19): each thread's estimated time, and the sum over
//! threads, stacked by what limited it: windows without a bottleneck (at peak) at the bottom,
//! then the windows each limit dominated. The segments add up to the estimate.

use std::iter::once;

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{bold, draw_err, font, secs, sig, text_on, tick, TimeScale, GRID, INK, MUTED};
use crate::bandwidth::{BandwidthAnalysis, Breakdown, PAGE_FAULTS, SYNCHRONIZATION};

/// Label of the bar summed over threads.
const ALL_THREADS: &str = "all threads";
/// Legend entry of the bottom segment.
const PEAK: &str = "no bottleneck (peak)";
/// Legend entry of the program-estimate marker.
const ESTIMATE: &str = "program estimate (wall clock)";

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 620;
const HEADER: u32 = 70;
const LEGEND: u32 = 250;
const TOTAL_PANEL: u32 = 190;

const PEAK_FILL: RGBColor = RGBColor(0xee, 0xee, 0xee);
const OUTLINE: RGBColor = RGBColor(0x70, 0x70, 0x70);
/// Page faults are not a limit of the model: a colour outside the palette.
const PAGE_FAULT_FILL: RGBColor = RGBColor(0x8c, 0x6d, 0x31);
/// Barriers and forks: grey, the runtime's time rather than a data path's.
const SYNC_FILL: RGBColor = RGBColor(0x7f, 0x7f, 0x7f);
/// One colour per limit of the machine model, in channel order, so that a limit keeps its
/// colour from one run (or program variant) to the next (Tableau 10 with an indigo for its
/// grey, which would read as "peak").
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xed, 0xc9, 0x48),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0xff, 0x9d, 0xa7),
    RGBColor(0x9c, 0x75, 0x5f),
    RGBColor(0x6b, 0x6e, 0xcf),
];

/// One stacked bar.
struct Bar<'a> {
    label: String,
    breakdown: &'a Breakdown,
}

/// The SVG of the dominance bars.
pub(super) fn render(a: &BandwidthAnalysis) -> Result<String, String> {
    // Every channel that dominated anywhere, in channel order (the total is their union).
    let mut channels: Vec<&str> = a.total.parts.iter().map(|p| p.channel.as_str()).collect();
    for t in &a.threads {
        for p in &t.breakdown.parts {
            if !channels.contains(&p.channel.as_str()) {
                channels.push(&p.channel);
            }
        }
    }
    // Colours by position among all the model's limits (series order, then limit order).
    let all: Vec<&str> = a
        .series
        .iter()
        .flat_map(|s| s.limits.iter().map(|l| l.channel.as_str()))
        .collect();
    let colour = |name: &str| -> RGBColor {
        if name == PAGE_FAULTS {
            return PAGE_FAULT_FILL;
        }
        if name == SYNCHRONIZATION {
            return SYNC_FILL;
        }
        let i = all
            .iter()
            .position(|c| *c == name)
            .or_else(|| channels.iter().position(|c| *c == name))
            .unwrap_or(0);
        PALETTE[i % PALETTE.len()]
    };

    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let (head, body) = root.split_vertically(HEADER);
        header(&head, a)?;
        if a.threads.is_empty() {
            body.draw(&Text::new(
                "no threads in the trace: nothing to break down",
                (WIDTH as i32 / 2, (HEIGHT - HEADER) as i32 / 2),
                font(16.0).pos(Pos::new(HPos::Center, VPos::Center)),
            ))
            .map_err(draw_err)?;
        } else {
            body_panels(&body, a, &channels, &colour)?;
        }
        root.present().map_err(draw_err)?;
    }
    Ok(buf)
}

/// The thread panel, the all-threads panel and the legend.
fn body_panels(
    body: &DrawingArea<SVGBackend<'_>, Shift>,
    a: &BandwidthAnalysis,
    channels: &[&str],
    colour: &dyn Fn(&str) -> RGBColor,
) -> Result<(), String> {
    let body = body.margin(0, 10, 0, 0);
    let (charts, legend_area) = body.split_horizontally(WIDTH - LEGEND);
    let (thread_area, total_area) = charts.split_horizontally(WIDTH - LEGEND - TOTAL_PANEL);

    let bars: Vec<Bar<'_>> = a
        .threads
        .iter()
        .map(|t| Bar {
            label: format!("thread {}", t.thread),
            breakdown: &t.breakdown,
        })
        .collect();
    let tallest = bars
        .iter()
        .map(|b| b.breakdown.estimated_seconds)
        .fold(0.0, f64::max);
    // The program estimate is at least every thread's time (it adds the slowest thread
    // of each barrier segment), so it bounds the thread panel.
    let estimate = a.program.estimated_seconds;
    let marker = (estimate.is_finite() && estimate > 0.0).then_some(estimate);
    draw_bars(
        &thread_area,
        "per thread",
        "time",
        &bars,
        tallest.max(marker.unwrap_or(0.0)),
        marker,
        colour,
    )?;
    let total = [Bar {
        label: ALL_THREADS.into(),
        breakdown: &a.total,
    }];
    draw_bars(
        &total_area,
        "summed (user time)",
        "time summed over threads",
        &total,
        a.total.estimated_seconds,
        None,
        colour,
    )?;
    legend(&legend_area, channels, colour, marker.is_some())?;
    Ok(())
}

fn header(head: &DrawingArea<SVGBackend<'_>, Shift>, a: &BandwidthAnalysis) -> Result<(), String> {
    head.draw(&Text::new(
        format!(
            "Time by dominant limit — program estimated {}, {} at peak",
            secs(a.program.estimated_seconds),
            secs(a.program.peak_seconds)
        ),
        (16, 10),
        bold(22.0),
    ))
    .map_err(draw_err)?;
    let segments = match a.program.segments {
        1 => "1 barrier segment".to_string(),
        n => format!("{n} barrier segments"),
    };
    head.draw(&Text::new(
        format!(
            "{}, window W = {} {}, {segments}; the limit adding the most time: {}",
            a.machine,
            a.window,
            a.time_unit,
            a.program.dominant.as_deref().unwrap_or("none"),
        ),
        (16, 40),
        font(14.0).color(&MUTED),
    ))
    .map_err(draw_err)?;
    Ok(())
}

/// A panel of stacked bars with its own time axis; `marker` draws a dashed line at that time.
#[allow(clippy::too_many_arguments)]
fn draw_bars(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    caption: &str,
    y_what: &str,
    bars: &[Bar<'_>],
    max_seconds: f64,
    marker: Option<f64>,
    colour: &dyn Fn(&str) -> RGBColor,
) -> Result<(), String> {
    let ts = TimeScale::for_max(max_seconds);
    // Headroom for the total printed above each bar.
    let top = if max_seconds > 0.0 && max_seconds.is_finite() {
        max_seconds * ts.factor * 1.12
    } else {
        1.0
    };
    let n = bars.len();
    let (w, _) = area.dim_in_pixel();
    // Full labels when they fit under their bar, else just the thread number.
    let long_fits = bars.iter().all(|b| {
        area.estimate_text_size(&b.label, &font(14.0))
            .is_ok_and(|(tw, _)| (tw as f64) * 1.2 < f64::from(w.saturating_sub(90)) / n as f64)
    });
    let x_name = |i: usize| -> String {
        match bars.get(i) {
            Some(b) if long_fits => b.label.clone(),
            Some(b) => b.label.trim_start_matches("thread ").to_string(),
            None => String::new(),
        }
    };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, bold(16.0))
        .margin_left(10)
        .margin_right(14)
        .margin_top(12)
        .x_label_area_size(if long_fits { 36 } else { 52 })
        .y_label_area_size(72)
        .build_cartesian_2d(0f64..n as f64, 0f64..top)
        .map_err(draw_err)?;
    let y_fmt = |v: &f64| tick(*v, top);
    let mut mesh = chart.configure_mesh();
    // Bar names are drawn under each bar below: plotters places ticks at round numbers.
    mesh.disable_x_mesh()
        .x_labels(0)
        .y_desc(format!("{y_what} [{}]", ts.unit))
        .y_label_formatter(&y_fmt)
        .y_labels(8)
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(MUTED)
        .axis_desc_style(font(15.0))
        .label_style(font(14.0));
    if !long_fits {
        mesh.x_desc("thread");
    }
    mesh.draw().map_err(draw_err)?;

    let coords = chart.as_coord_spec().clone();
    let px_height =
        |y0: f64, y1: f64| (coords.translate(&(0.0, y0)).1 - coords.translate(&(0.0, y1)).1).abs();
    // Bars take 60% of their slot, but no more than 120 pixels (a lone bar would fill the
    // panel).
    let slot_px = f64::from(
        (coords.translate(&(1.0, 0.0)).0 - coords.translate(&(0.0, 0.0)).0).unsigned_abs(),
    );
    let x_pad = if slot_px > 0.0 {
        (0.5 - 60.0 / slot_px).max(0.2)
    } else {
        0.2
    };
    let label_size = 13.0;
    let bar_px =
        (coords.translate(&(1.0 - x_pad, 0.0)).0 - coords.translate(&(x_pad, 0.0)).0).abs();
    for (i, bar) in bars.iter().enumerate() {
        let (x0, x1) = (i as f64 + x_pad, i as f64 + 1.0 - x_pad);
        chart
            .draw_series(once(
                EmptyElement::at((i as f64 + 0.5, 0.0))
                    + Text::new(
                        x_name(i),
                        (0, 8),
                        font(14.0).pos(Pos::new(HPos::Center, VPos::Top)),
                    ),
            ))
            .map_err(draw_err)?;
        let mut segments: Vec<(Option<&str>, f64)> = vec![(None, bar.breakdown.peak_seconds)];
        segments.extend(
            bar.breakdown
                .parts
                .iter()
                .map(|p| (Some(p.channel.as_str()), p.seconds)),
        );
        let mut y = 0.0;
        for (channel, seconds) in segments {
            let h = seconds.max(0.0) * ts.factor;
            if h <= 0.0 || !h.is_finite() {
                continue;
            }
            let fill = channel.map_or(PEAK_FILL, colour);
            let rect = [(x0, y), (x1, y + h)];
            chart
                .draw_series([
                    Rectangle::new(rect, fill.filled()),
                    Rectangle::new(rect, OUTLINE.stroke_width(1)),
                ])
                .map_err(draw_err)?;
            // The segment's time inside it when it has room.
            let text = format!("{} {}", sig(h), ts.unit);
            let ink = text_on(fill);
            let style = font(label_size)
                .color(&ink)
                .pos(Pos::new(HPos::Center, VPos::Center));
            let fits = area
                .estimate_text_size(&text, &style)
                .is_ok_and(|(tw, th)| {
                    tw as i32 + 6 <= bar_px && th as i32 + 4 <= px_height(y, y + h)
                });
            if fits {
                chart
                    .draw_series(once(Text::new(text, ((x0 + x1) / 2.0, y + h / 2.0), style)))
                    .map_err(draw_err)?;
            }
            y += h;
        }
        // The estimate on top of the bar, clear of the marker line when they coincide.
        let total = bar.breakdown.estimated_seconds * ts.factor;
        let text = format!("{} {}", sig(total), ts.unit);
        let style = bold(14.0).pos(Pos::new(HPos::Center, VPos::Bottom));
        // Only when it fits over its bar without running into the neighbours' labels.
        let fits = area
            .estimate_text_size(&text, &style)
            .is_ok_and(|(tw, _)| f64::from(tw) * 1.1 + 6.0 <= slot_px);
        if total > 0.0 && total.is_finite() && fits {
            chart
                .draw_series(once(
                    EmptyElement::at(((x0 + x1) / 2.0, total)) + Text::new(text, (0, -5), style),
                ))
                .map_err(draw_err)?;
        }
    }

    let note = font(15.0)
        .color(&MUTED)
        .pos(Pos::new(HPos::Center, VPos::Center));
    let note_fits = area
        .estimate_text_size("no time recorded", &note)
        .is_ok_and(|(tw, _)| f64::from(tw) * 1.1 + 8.0 <= slot_px * n as f64);
    if (max_seconds.is_nan() || max_seconds <= 0.0) && note_fits {
        chart
            .draw_series(once(Text::new(
                "no time recorded",
                (n as f64 / 2.0, top / 2.0),
                note,
            )))
            .map_err(draw_err)?;
    }

    if let Some(m) = marker {
        let y = m * ts.factor;
        chart
            .draw_series(once(DashedPathElement::new(
                vec![(0.0, y), (n as f64, y)],
                7,
                5,
                INK.stroke_width(2),
            )))
            .map_err(draw_err)?;
    }
    Ok(())
}

/// The legend column: segments from the top of a bar down, then the marker.
fn legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    channels: &[&str],
    colour: &dyn Fn(&str) -> RGBColor,
    marker: bool,
) -> Result<(), String> {
    let x = 12;
    let mut y = 36;
    area.draw(&Text::new("dominant limit", (x, y), bold(15.0)))
        .map_err(draw_err)?;
    y += 30;
    let style = font(14.0).pos(Pos::new(HPos::Left, VPos::Center));
    let entries = channels
        .iter()
        .rev()
        .map(|c| (*c, colour(c)))
        .chain(once((PEAK, PEAK_FILL)));
    for (name, fill) in entries {
        area.draw(&Rectangle::new(
            [(x, y - 8), (x + 18, y + 8)],
            fill.filled(),
        ))
        .map_err(draw_err)?;
        area.draw(&Rectangle::new(
            [(x, y - 8), (x + 18, y + 8)],
            OUTLINE.stroke_width(1),
        ))
        .map_err(draw_err)?;
        area.draw(&Text::new(name, (x + 26, y), style.clone()))
            .map_err(draw_err)?;
        y += 26;
    }
    if marker {
        y += 10;
        area.draw(&DashedPathElement::new(
            vec![(x, y), (x + 18, y)],
            5,
            3,
            INK.stroke_width(2),
        ))
        .map_err(draw_err)?;
        area.draw(&Text::new(ESTIMATE, (x + 26, y), style))
            .map_err(draw_err)?;
    }
    // How to read the bars, in short lines that fit the column.
    y += 40;
    for line in [
        "Each window counts for the limit",
        "that slowed it most; a bar's",
        "segments add up to its estimate.",
    ] {
        area.draw(&Text::new(line, (x, y), font(13.0).color(&MUTED)))
            .map_err(draw_err)?;
        y += 18;
    }
    Ok(())
}
