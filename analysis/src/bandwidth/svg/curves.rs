//! Bandwidth curves (thesis Fig. 4.7 and Fig. 4.16 left): one file per series, one panel per
//! thread plus one per merge-point limit.
//!
//! A panel shows the windows of one curve sorted by their requirement (x: cumulative run
//! time, y: required rate) as a step curve, its limit L as a horizontal line, the volume
//! above L (V_L; it costs T_L = V_L / L if L were the only limit) hatched, and the part of
//! it in windows where L dominated (V_L^Dom) in grey: for each step b > L the grey span is
//! p_b = (b − L) · Δt_b^Dom / Δt_b, so the grey area equals V_L^Dom.
//!
//! Thread panels share their y axis (the per-core limit sits at the same height in each);
//! every panel's x axis spans its own curve.

use std::iter::once;

use cachescope_sim::bandwidth::Scope;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{bold, draw_err, font, secs, sig, simplify, tick, TimeScale, GRID, INK, MUTED};
use crate::bandwidth::curve::{LimitCost, RateCurve};
use crate::bandwidth::{BandwidthAnalysis, SeriesSummary};

/// Marker colour of the hatched "above the limit" areas (replaced by the hatch pattern).
const HATCH_KEY: RGBColor = RGBColor(0xfe, 0xc9, 0xc9);
/// Hatch lines and background.
const HATCH_LINE: RGBColor = RGBColor(0xe8, 0x8a, 0x8a);
const HATCH_BACK: RGBColor = RGBColor(0xff, 0xf1, 0xf1);
const CURVE: RGBColor = RGBColor(0x1f, 0x4e, 0x9c);
const LIMIT: RGBColor = RGBColor(0xc0, 0x1c, 0x1c);
const DOMINANT: RGBColor = RGBColor(0x5f, 0x5f, 0x5f);

// Legend entries: the curve, the limit line, the hatched and the grey area.
const LEGEND_CURVE: &str = "requirement curve";
const LEGEND_LIMIT: &str = "limit L";
const LEGEND_OVER: &str = "above L: V_L, costs T_L alone";
const LEGEND_DOMINANT: &str = "L dominates: V_L^Dom, costs the dominant time";

const WIDTH: u32 = 1000;
/// Header height above the legend rows.
const HEADER: u32 = 74;
const LEGEND_ROW: u32 = 22;
const PANEL: u32 = 300;
const PANEL_SHORT: u32 = 250;
const FOOTER: u32 = 10;

/// One panel: a curve, maybe its limit.
struct Panel<'a> {
    caption: String,
    /// Who the curve belongs to, for notes (`thread 3`, `all threads`).
    who: String,
    curve: &'a RateCurve,
    limit: Option<PanelLimit>,
    /// Panels of one group share their y axis (all thread panels; each merge point alone).
    group: usize,
}

struct PanelLimit {
    value: f64,
    /// `per-core limit 14.9 GB/s`.
    label: String,
}

/// The y axis of a group of panels.
#[derive(Clone, Copy)]
struct YAxis {
    top: f64,
    /// False when the limit is far above every requirement and left out of the range (it
    /// would flatten the curves into the x axis); the panel says so instead.
    limit_shown: bool,
}

/// The SVG of series `s`.
pub(super) fn render(a: &BandwidthAnalysis, s: &SeriesSummary) -> Result<String, String> {
    let panels = panels(s);

    let groups = panels.iter().map(|p| p.group).max().map_or(0, |g| g + 1);
    let axes: Vec<YAxis> = (0..groups)
        .map(|g| {
            let members = panels.iter().filter(|p| p.group == g);
            let max_rate = members
                .clone()
                .map(|p| p.curve.max_rate)
                .fold(0.0, f64::max);
            let limit = members
                .filter_map(|p| p.limit.as_ref().map(|l| l.value))
                .fold(None, |m: Option<f64>, l| Some(m.map_or(l, |m| m.max(l))));
            y_axis(max_rate, limit)
        })
        .collect();

    // The legend names only what some panel draws.
    let drawn: Vec<Drawn> = panels.iter().map(|p| drawn(p, axes[p.group])).collect();
    let mut entries: Vec<(&str, Swatch)> = vec![(LEGEND_CURVE, Swatch::Line(CURVE))];
    if drawn.iter().any(|d| d.limit) {
        entries.push((LEGEND_LIMIT, Swatch::Line(LIMIT)));
    }
    if drawn.iter().any(|d| d.over) {
        entries.push((LEGEND_OVER, Swatch::Fill(HATCH_KEY)));
    }
    if drawn.iter().any(|d| d.dominant) {
        entries.push((LEGEND_DOMINANT, Swatch::Fill(DOMINANT)));
    }
    let (legend, rows) = legend_layout(&entries);
    let header_height = HEADER + LEGEND_ROW * rows;
    // Many threads: shorter panels, so the file stays a scrollable page.
    let panel_height = if panels.len() > 4 { PANEL_SHORT } else { PANEL };

    let height = header_height + panel_height * panels.len().max(1) as u32 + FOOTER;
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let (head, body) = root.split_vertically(header_height);
        header(&head, a, s, &legend)?;
        let body = body.margin(0, FOOTER, 0, 0);
        if panels.is_empty() {
            body.draw(&Text::new(
                "no thread moved anything on this path",
                (WIDTH as i32 / 2, panel_height as i32 / 2),
                font(16.0).pos(Pos::new(HPos::Center, VPos::Center)),
            ))
            .map_err(draw_err)?;
        } else {
            let areas = body.split_evenly((panels.len(), 1));
            for (p, area) in panels.iter().zip(&areas) {
                let y_desc = match s.unit {
                    "GFLOP/s" => format!("FLOP rate [{}]", s.unit),
                    "Ginstr/s" => format!("instruction rate [{}]", s.unit),
                    _ => format!("bandwidth [{}]", s.unit),
                };
                draw_panel(area, p, &y_desc, s.unit, axes[p.group])?;
            }
        }
        root.present().map_err(draw_err)?;
    }
    Ok(super::add_hatch(buf, HATCH_KEY, HATCH_LINE, HATCH_BACK))
}

/// The panels of a series: every thread (against the per-core limit, if any), then every
/// merge-point limit against all threads' demand.
fn panels(s: &SeriesSummary) -> Vec<Panel<'_>> {
    let mut out = Vec::new();
    let per_core = s.limits.iter().find(|l| l.scope == Scope::PerCore);
    for t in &s.threads {
        let cost = per_core.and_then(|l| {
            l.costs
                .iter()
                .find(|c| c.thread == Some(t.thread))
                .map(|c| (l.limit, &c.cost))
        });
        let head = format!("{}, thread {}", s.label, t.thread);
        let caption = match cost {
            Some((limit, c)) => limit_caption(&head, limit, "per core", s.unit, c),
            None => format!(
                "{head} — no per-core limit; max {} {}, average {} {}",
                sig(t.curve.max_rate),
                s.unit,
                sig(t.curve.average_rate),
                s.unit
            ),
        };
        out.push(Panel {
            caption,
            who: format!("thread {}", t.thread),
            curve: &t.curve,
            limit: cost.map(|(value, _)| PanelLimit {
                value,
                label: format!("per-core limit {} {}", sig(value), s.unit),
            }),
            group: 0,
        });
    }
    let mut group = 1;
    for l in s.limits.iter().filter(|l| l.scope == Scope::Total) {
        for c in l.costs.iter().filter(|c| c.thread.is_none()) {
            let head = format!("{}, all threads (merge point)", s.label);
            out.push(Panel {
                caption: limit_caption(&head, l.limit, "total", s.unit, &c.cost),
                who: "all threads".into(),
                // The merge point's own curve carries its dominant shares; the plain demand
                // curve is the same requirement without them.
                curve: c.curve.as_ref().unwrap_or(&s.demand),
                limit: Some(PanelLimit {
                    value: l.limit,
                    label: format!("total limit {} {} (all cores)", sig(l.limit), s.unit),
                }),
                group,
            });
            group += 1;
        }
    }
    out
}

/// `L2-mem read, thread 0 — limit 14.9 GB/s per core: above it 120 ms, T_L 50 ms, dominant
/// 30 ms`.
fn limit_caption(head: &str, limit: f64, scope: &str, unit: &str, c: &LimitCost) -> String {
    if c.seconds_above <= 0.0 {
        return format!(
            "{head} — limit {} {unit} {scope}: never exceeded",
            sig(limit)
        );
    }
    format!(
        "{head} — limit {} {unit} {scope}: above it {}, T_L {}, dominant {}",
        sig(limit),
        secs(c.seconds_above),
        secs(c.t_l_seconds),
        secs(c.dominant_t_l_seconds)
    )
}

fn curve_seconds(c: &RateCurve) -> f64 {
    c.steps.iter().map(|s| s.seconds.max(0.0)).sum()
}

/// The y range for curves up to `max_rate` and a limit: the limit is included unless it is
/// more than 2.5 times the highest requirement.
fn y_axis(max_rate: f64, limit: Option<f64>) -> YAxis {
    let max_rate = if max_rate.is_finite() { max_rate } else { 0.0 };
    match limit {
        Some(l) if l.is_finite() && l > 0.0 && (max_rate <= 0.0 || l <= 2.5 * max_rate) => YAxis {
            top: max_rate.max(l) * 1.12,
            limit_shown: true,
        },
        _ => YAxis {
            top: if max_rate > 0.0 { max_rate * 1.12 } else { 1.0 },
            limit_shown: limit.is_none(),
        },
    }
}

/// Title, one line of explanation and the legend.
fn header(
    head: &DrawingArea<SVGBackend<'_>, Shift>,
    a: &BandwidthAnalysis,
    s: &SeriesSummary,
    legend: &[LegendItem<'_>],
) -> Result<(), String> {
    let what = match s.unit {
        "GFLOP/s" => "FLOP-rate requirement",
        "Ginstr/s" => "instruction-rate requirement",
        _ => "bandwidth requirement",
    };
    head.draw(&Text::new(
        format!(
            "{}: {what} — {}, window W = {} {}",
            s.label, a.machine, a.window, a.time_unit
        ),
        (16, 10),
        bold(22.0),
    ))
    .map_err(draw_err)?;
    let moved = match s.unit {
        "GFLOP/s" => "FLOPs executed",
        "Ginstr/s" => "instructions executed",
        _ => "data moved",
    };
    head.draw(&Text::new(
        format!(
            "Windows sorted by requirement, so the x axis is run time in that order; \
             the area under a curve is the {moved}."
        ),
        (16, 38),
        font(14.0).color(&MUTED),
    ))
    .map_err(draw_err)?;

    // The legend sits in the header, never over data.
    let style = font(14.0).pos(Pos::new(HPos::Left, VPos::Center));
    for item in legend {
        let (x, y) = (item.x, HEADER as i32 - 4 + (LEGEND_ROW * item.row) as i32);
        match item.swatch {
            Swatch::Line(c) => head.draw(&PathElement::new(
                vec![(x, y), (x + SWATCH, y)],
                c.stroke_width(3),
            )),
            Swatch::Fill(c) => head.draw(&Rectangle::new(
                [(x, y - 7), (x + SWATCH, y + 7)],
                c.filled(),
            )),
        }
        .map_err(draw_err)?;
        head.draw(&Text::new(item.text, (x + SWATCH + 6, y), style.clone()))
            .map_err(draw_err)?;
    }
    Ok(())
}

/// One legend entry placed in the header.
struct LegendItem<'a> {
    text: &'a str,
    swatch: Swatch,
    x: i32,
    row: u32,
}

const SWATCH: i32 = 26;

/// Places legend entries left to right, wrapping into rows that fit the width; returns them
/// and the number of rows.
fn legend_layout<'a>(entries: &[(&'a str, Swatch)]) -> (Vec<LegendItem<'a>>, u32) {
    let style = font(14.0);
    let (mut x, mut row) = (16, 0);
    let mut out = Vec::new();
    for &(text, swatch) in entries {
        // plotters' text metrics are a rough per-character estimate; real sans-serif fonts
        // run up to a tenth wider.
        let w = style
            .font
            .box_size(text)
            .map_or(text.len() as u32 * 7, |b| b.0);
        let w = (f64::from(w) * 1.1) as i32 + SWATCH + 6;
        if x > 16 && x + w > WIDTH as i32 - 16 {
            x = 16;
            row += 1;
        }
        out.push(LegendItem {
            text,
            swatch,
            x,
            row,
        });
        x += w + 24;
    }
    (out, row + 1)
}

/// What a panel draws besides its curve.
#[derive(Clone, Copy, Default)]
struct Drawn {
    limit: bool,
    over: bool,
    dominant: bool,
}

fn drawn(p: &Panel<'_>, y: YAxis) -> Drawn {
    let Some(l) = p.limit.as_ref().filter(|_| y.limit_shown) else {
        return Drawn::default();
    };
    let over = p
        .curve
        .steps
        .iter()
        .filter(|st| st.seconds > 0.0 && st.rate > l.value);
    Drawn {
        limit: true,
        over: over.clone().next().is_some(),
        dominant: over
            .into_iter()
            .any(|st| st.dominant_share.unwrap_or(0.0) > 0.0),
    }
}

#[derive(Clone, Copy)]
enum Swatch {
    Line(RGBColor),
    Fill(RGBColor),
}

/// One step of a curve placed on the x axis: `[x0, x1)` at `rate`, with its dominant share.
#[derive(Clone, Copy)]
struct Placed {
    x0: f64,
    x1: f64,
    rate: f64,
    share: f64,
}

fn draw_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    p: &Panel<'_>,
    y_desc: &str,
    unit: &str,
    y: YAxis,
) -> Result<(), String> {
    // Each panel's x axis spans its own curve: a master thread that runs much longer than
    // the workers would otherwise squash their curves into the left edge. (The durations
    // compare in dominance.svg.)
    let seconds = curve_seconds(p.curve);
    let ts = TimeScale::for_max(seconds);
    let x_max = if seconds > 0.0 && seconds.is_finite() {
        seconds * ts.factor
    } else {
        1.0
    };
    let top = y.top;
    let mut chart = ChartBuilder::on(area)
        .caption(&p.caption, bold(16.0))
        .margin_left(12)
        .margin_right(28)
        .margin_top(6)
        .margin_bottom(4)
        .x_label_area_size(46)
        .y_label_area_size(68)
        .build_cartesian_2d(0f64..x_max, 0f64..top)
        .map_err(draw_err)?;
    let x_fmt = |v: &f64| tick(*v, x_max);
    let y_fmt = |v: &f64| tick(*v, top);
    chart
        .configure_mesh()
        .x_desc(format!("run time, reordered by requirement [{}]", ts.unit))
        .y_desc(y_desc)
        .x_labels(10)
        .y_labels(6)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(MUTED)
        .axis_desc_style(font(15.0))
        .label_style(font(14.0))
        .draw()
        .map_err(draw_err)?;

    let mut x = 0.0;
    let steps: Vec<Placed> = p
        .curve
        .steps
        .iter()
        .filter(|st| st.seconds > 0.0 && st.rate.is_finite())
        .map(|st| {
            let x0 = x;
            x += st.seconds * ts.factor;
            Placed {
                x0,
                x1: x,
                rate: st.rate,
                share: st.dominant_share.unwrap_or(0.0).clamp(0.0, 1.0),
            }
        })
        .collect();
    // The pixel mapping, detached from `chart` so that drawing can borrow it mutably.
    let coords = chart.as_coord_spec().clone();
    let to_px = |pt: &(f64, f64)| coords.translate(pt);
    let (plot_w, plot_h) = chart.plotting_area().dim_in_pixel();
    let px_x = x_max / f64::from(plot_w.max(1));
    let px_y = top / f64::from(plot_h.max(1));

    let shown_limit = p.limit.as_ref().filter(|_| y.limit_shown);
    if let Some(l) = shown_limit {
        let lv = l.value;
        let first_over = steps.iter().position(|st| st.rate > lv);
        if let Some(i) = first_over {
            let tail = &steps[i..];
            let (start, end) = (tail[0].x0, tail[tail.len() - 1].x1);
            let over = once((start, lv))
                .chain(
                    tail.iter()
                        .flat_map(|st| [(st.x0, st.rate), (st.x1, st.rate)]),
                )
                .chain(once((end, lv)));
            chart
                .draw_series(once(Polygon::new(
                    simplify(over, to_px),
                    HATCH_KEY.filled(),
                )))
                .map_err(draw_err)?;
            // Buckets of two pixels: narrower ones only add noise to the grey outline.
            let dominant = dominant_outline(tail, lv, 2.0 * px_x);
            if dominant.iter().any(|&(_, h)| h > lv) {
                chart
                    .draw_series(once(Polygon::new(
                        simplify(dominant, to_px),
                        DOMINANT.filled(),
                    )))
                    .map_err(draw_err)?;
            }
        }
    }

    // Limit line under the curve, so that a curve running along the limit stays visible.
    if let Some(l) = shown_limit {
        chart
            .draw_series(once(PathElement::new(
                vec![(0.0, l.value), (x_max, l.value)],
                LIMIT.stroke_width(2),
            )))
            .map_err(draw_err)?;
    }

    if p.curve.volume > 0 || !steps.is_empty() {
        let line = steps
            .iter()
            .flat_map(|st| [(st.x0, st.rate), (st.x1, st.rate)]);
        chart
            .draw_series(once(PathElement::new(
                simplify(line, to_px),
                CURVE.stroke_width(2),
            )))
            .map_err(draw_err)?;
    }

    if let Some(l) = shown_limit {
        let style = font(14.0).color(&LIMIT);
        let (w, h) = area
            .estimate_text_size(&l.label, &style)
            .map_err(draw_err)?;
        let (w, h) = (w as i32 + 12, h as i32 + 6);
        let place = label_place(&steps, l.value, x_max, top, w, h, px_x, px_y);
        let (anchor, rect, text_at, v) = match place {
            Place::LeftAbove => (
                (0.0, l.value),
                [(4, -h - 3), (4 + w, -3)],
                (10, -6),
                VPos::Bottom,
            ),
            Place::LeftBelow => ((0.0, l.value), [(4, 3), (4 + w, h + 3)], (10, 6), VPos::Top),
            Place::RightAbove => (
                (x_max, l.value),
                [(-4 - w, -h - 3), (-4, -3)],
                (-w + 2, -6),
                VPos::Bottom,
            ),
            Place::RightBelow => (
                (x_max, l.value),
                [(-4 - w, 3), (-4, h + 3)],
                (-w + 2, 6),
                VPos::Top,
            ),
            // Detached from the line, so a short red line in front says what it names.
            Place::TopLeft => (
                (0.0, top),
                [(4, 3), (4 + w + LABEL_SWATCH, h + 3)],
                (10 + LABEL_SWATCH, 6),
                VPos::Top,
            ),
        };
        chart
            .draw_series(once(
                EmptyElement::at(anchor)
                    + Rectangle::new(rect, WHITE.mix(0.85).filled())
                    + Text::new(l.label.clone(), text_at, style.pos(Pos::new(HPos::Left, v))),
            ))
            .map_err(draw_err)?;
        if place == Place::TopLeft {
            let y = rect[0].1 + h / 2;
            chart
                .draw_series(once(
                    EmptyElement::at(anchor)
                        + PathElement::new(
                            vec![(10, y), (4 + LABEL_SWATCH, y)],
                            LIMIT.stroke_width(2),
                        ),
                ))
                .map_err(draw_err)?;
        }
    } else if let Some(l) = &p.limit {
        // Left out of the y range: say where it is rather than flatten the curve.
        chart
            .draw_series(once(Text::new(
                format!(
                    "{} is above the plotted range (max requirement {} {unit})",
                    l.label,
                    sig(p.curve.max_rate)
                ),
                (x_max * 0.01, top * 0.97),
                font(14.0)
                    .color(&LIMIT)
                    .pos(Pos::new(HPos::Left, VPos::Top)),
            )))
            .map_err(draw_err)?;
    }

    if p.curve.volume == 0 {
        let nothing = match unit {
            "GB/s" => "moved nothing on this path",
            "Ginstr/s" => "executed nothing",
            _ => "executed no FLOPs",
        };
        chart
            .draw_series(once(Text::new(
                format!("{} {nothing}", p.who),
                (x_max / 2.0, top / 2.0),
                font(16.0)
                    .color(&INK)
                    .pos(Pos::new(HPos::Center, VPos::Center)),
            )))
            .map_err(draw_err)?;
    }
    Ok(())
}

/// The outline of the grey area: from L up by (b − L) · share per step. Steps narrower than
/// a pixel are merged into pixel-wide buckets of the same area, so the grey area still
/// equals V_L^Dom and the outline has at most a few points per pixel column.
fn dominant_outline(tail: &[Placed], limit: f64, min_width: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let Some(first) = tail.first() else {
        return out;
    };
    out.push((first.x0, limit));
    // Pending bucket: start, width, area.
    let mut pending: Option<(f64, f64, f64)> = None;
    let flush = |b: (f64, f64, f64), out: &mut Vec<(f64, f64)>| {
        let (x0, w, area) = b;
        let h = if w > 0.0 { area / w } else { 0.0 };
        out.push((x0, limit + h));
        out.push((x0 + w, limit + h));
    };
    for st in tail {
        let w = st.x1 - st.x0;
        let area = (st.rate - limit).max(0.0) * st.share * w;
        if w >= min_width {
            if let Some(b) = pending.take() {
                flush(b, &mut out);
            }
            flush((st.x0, w, area), &mut out);
        } else {
            let b = pending.get_or_insert((st.x0, 0.0, 0.0));
            b.1 += w;
            b.2 += area;
            if b.1 >= min_width {
                if let Some(b) = pending.take() {
                    flush(b, &mut out);
                }
            }
        }
    }
    if let Some(b) = pending.take() {
        flush(b, &mut out);
    }
    out.push((tail[tail.len() - 1].x1, limit));
    out
}

/// Where the limit label goes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Place {
    LeftAbove,
    LeftBelow,
    RightAbove,
    RightBelow,
    /// In the top left corner, when the line has no free space next to it.
    TopLeft,
}

/// Width of the line drawn in front of a label that is not next to its line, pixels.
const LABEL_SWATCH: i32 = 24;

/// The first label position (left above the line first: the curve is lowest at the left;
/// the top left corner last) whose box of `w`×`h` pixels touches neither the curve, the
/// hatched area nor (in the corner) the line; left above (with its white background) when
/// none is free.
#[allow(clippy::too_many_arguments)]
fn label_place(
    steps: &[Placed],
    limit: f64,
    x_max: f64,
    top: f64,
    w: i32,
    h: i32,
    px_x: f64,
    px_y: f64,
) -> Place {
    let bw = f64::from(w + 8) * px_x;
    let bh = f64::from(h + 6) * px_y;
    let corner_w = f64::from(w + 8 + LABEL_SWATCH) * px_x;
    let candidates = [
        (Place::LeftAbove, 0.0, bw, limit, limit + bh),
        (Place::LeftBelow, 0.0, bw, limit - bh, limit),
        (Place::RightAbove, x_max - bw, x_max, limit, limit + bh),
        (Place::RightBelow, x_max - bw, x_max, limit - bh, limit),
        (Place::TopLeft, 0.0, corner_w, top - bh, top),
    ];
    candidates
        .into_iter()
        .find(|&(place, xa, xb, ya, yb)| {
            let crosses_line = place == Place::TopLeft && ya <= limit && limit <= yb;
            ya >= 0.0 && yb <= top && !crosses_line && !box_hits_curve(steps, limit, xa, xb, ya, yb)
        })
        .map_or(Place::LeftAbove, |c| c.0)
}

/// Whether the box `[xa, xb] × [ya, yb]` touches the monotone step curve or the area between
/// the limit and the curve above it.
fn box_hits_curve(steps: &[Placed], limit: f64, xa: f64, xb: f64, ya: f64, yb: f64) -> bool {
    let inside: Vec<&Placed> = steps.iter().filter(|st| st.x1 > xa && st.x0 < xb).collect();
    let (Some(lo), Some(hi)) = (inside.first(), inside.last()) else {
        return false;
    };
    let (cmin, cmax) = (lo.rate, hi.rate);
    // The staircase covers every value between its lowest and highest point in the box; the
    // hatched area covers [L, curve] where the curve is above L.
    let line = cmax >= ya && cmin <= yb;
    let hatch = ya >= limit && cmax > ya;
    line || hatch
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(v: &[(f64, f64, f64)]) -> Vec<Placed> {
        let mut x = 0.0;
        v.iter()
            .map(|&(w, rate, share)| {
                let x0 = x;
                x += w;
                Placed {
                    x0,
                    x1: x,
                    rate,
                    share,
                }
            })
            .collect()
    }

    #[test]
    fn grey_area_equals_dominant_volume() {
        // Many narrow steps above L = 1 with half of their time dominant.
        let steps = placed(
            &(0..1000)
                .map(|i| (0.001, 1.0 + i as f64 / 100.0, 0.5))
                .collect::<Vec<_>>(),
        );
        let expected: f64 = steps
            .iter()
            .map(|s| (s.rate - 1.0) * s.share * (s.x1 - s.x0))
            .sum();
        let outline = dominant_outline(&steps, 1.0, 0.01);
        // Shoelace-free area of a staircase: pairs of points at the same height.
        let area: f64 = outline[1..outline.len() - 1]
            .chunks(2)
            .map(|p| (p[1].0 - p[0].0) * (p[0].1 - 1.0))
            .sum();
        assert!(
            (area - expected).abs() < 1e-9 * expected.max(1.0),
            "{area} vs {expected}"
        );
        assert!(outline.len() <= 2 * 100 + 4, "{}", outline.len());
    }

    #[test]
    fn label_avoids_the_curve() {
        // Curve below L on the left: the label goes above the line on the left.
        let steps = placed(&[(5.0, 1.0, 0.0), (5.0, 10.0, 0.0)]);
        assert_eq!(
            label_place(&steps, 5.0, 10.0, 12.0, 100, 20, 0.01, 0.05),
            Place::LeftAbove
        );
        // Always above L: the hatched area fills everything above the line, so below it.
        let steps = placed(&[(5.0, 6.0, 0.0), (5.0, 10.0, 0.0)]);
        assert_eq!(
            label_place(&steps, 5.0, 10.0, 12.0, 100, 20, 0.01, 0.05),
            Place::LeftBelow
        );
    }

    #[test]
    fn label_goes_to_the_corner_when_the_line_is_crowded() {
        // Limit near the bottom, curve far above it from early on (a merge point that is
        // always saturated): no room next to the line, but the top left is free.
        let steps = placed(&[(1.0, 0.0, 0.0), (9.0, 110.0, 1.0)]);
        assert_eq!(
            label_place(&steps, 10.0, 10.0, 140.0, 200, 20, 0.01, 0.6),
            Place::TopLeft
        );
    }

    #[test]
    fn far_limits_leave_the_range() {
        let y = y_axis(2.0, Some(86.4));
        assert!(!y.limit_shown && (y.top - 2.24).abs() < 1e-9);
        let y = y_axis(10.0, Some(14.9));
        assert!(y.limit_shown && y.top > 14.9);
        let y = y_axis(0.0, None);
        assert_eq!(y.top, 1.0);
    }
}
