//! SVG plots of a bandwidth analysis (thesis Figs. 4.7, 4.16–4.19).
//!
//! * `curves`: `curve-<path>-<direction>.svg`, one per series that moved anything: the
//!   bandwidth curve of every thread (and of all threads at a merge point) against its limit,
//!   with the volume above the limit (V_L) hatched and its dominant part (V_L^Dom) in grey;
//! * `bars`: `dominance.svg`, the stacked bars of time per thread (and summed over threads)
//!   split by the limit that dominated each window.
//!
//! Each plot is drawn into a string with plotters' SVG backend and then written by the
//! caller's writer ([`write_all_with`]; the CLI replaces each file as a whole, see
//! `src/output.rs`) or with `std::fs` ([`write_all`]): plotters' own file target reports only
//! an `io::Error` without the path, and a half-drawn file would be left behind on a drawing
//! error.

mod bars;
mod curves;

use std::fmt::Display;
use std::fs;
use std::path::{Path, PathBuf};

use plotters::style::{FontStyle, IntoFont, RGBColor, TextStyle};

use super::{BandwidthAnalysis, SeriesSummary};

/// Why plots could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write plot {path}: {reason}")]
pub struct SvgError {
    /// The file (or the directory, when it cannot be created).
    pub path: PathBuf,
    /// What went wrong.
    pub reason: String,
}

/// Name of the dominance bar chart inside the output directory.
const DOMINANCE_FILE: &str = "dominance.svg";

/// Writes every plot into `dir` (created if missing) with `std::fs::write` and returns the
/// files written: one bandwidth-curve file per series with a nonzero volume, then
/// `DOMINANCE_FILE`. Curve files of an earlier run that this one does not write are removed.
pub fn write_all(a: &BandwidthAnalysis, dir: &Path) -> Result<Vec<PathBuf>, SvgError> {
    write_all_with(a, dir, |path, svg| {
        fs::write(path, svg).map_err(|e| e.to_string())
    })
}

/// [`write_all`], each file written by `write(path, contents)`, which returns why it failed.
pub fn write_all_with(
    a: &BandwidthAnalysis,
    dir: &Path,
    mut write: impl FnMut(&Path, &[u8]) -> Result<(), String>,
) -> Result<Vec<PathBuf>, SvgError> {
    prepare_dir(dir)?;
    let plots = render_all(a, dir)?;
    for (path, svg) in &plots {
        write_file(&mut write, path, svg)?;
    }
    let files: Vec<PathBuf> = plots.into_iter().map(|(p, _)| p).collect();
    remove_stale_curves(dir, &files)?;
    Ok(files)
}

/// Creates the plots' directory `dir` if missing (an existing file there is an error).
pub fn prepare_dir(dir: &Path) -> Result<(), SvgError> {
    if dir.exists() && !dir.is_dir() {
        return Err(SvgError {
            path: dir.to_path_buf(),
            reason: "exists and is not a directory (the plots go into a directory)".into(),
        });
    }
    fs::create_dir_all(dir).map_err(|e| SvgError {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    })
}

/// Draws every plot, without writing anything: `(path in dir, SVG text)` for one
/// bandwidth-curve file per series with a nonzero volume, then `DOMINANCE_FILE`. A caller
/// that writes them all before replacing any (the CLI) then calls [`remove_stale_curves`].
pub fn render_all(a: &BandwidthAnalysis, dir: &Path) -> Result<Vec<(PathBuf, String)>, SvgError> {
    let mut plots = Vec::new();
    for s in a.series.iter().filter(|s| has_volume(s)) {
        let path = dir.join(curve_file_name(s));
        let svg = curves::render(a, s).map_err(|reason| SvgError {
            path: path.clone(),
            reason,
        })?;
        plots.push((path, marked(&svg)));
    }
    let path = dir.join(DOMINANCE_FILE);
    let svg = bars::render(a).map_err(|reason| SvgError {
        path: path.clone(),
        reason,
    })?;
    plots.push((path, svg));
    Ok(plots)
}

/// The comment that marks a curve file as written by this module, so that a later run removes
/// only its own plots, never a file of the user's that happens to share the name pattern.
const CURVE_MARK: &str = "<!-- cachescope bandwidth curve -->";

/// `svg` with [`CURVE_MARK`] after its root element's start tag.
fn marked(svg: &str) -> String {
    match svg.find('>') {
        Some(end) => format!("{}\n{CURVE_MARK}{}", &svg[..=end], &svg[end + 1..]),
        None => svg.to_owned(),
    }
}

/// Whether the file at `path` is a curve an earlier run wrote: it carries [`CURVE_MARK`] near
/// its start.
fn is_our_curve(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 1024];
    let Ok(mut f) = fs::File::open(path) else {
        return false;
    };
    let n = f.read(&mut head).unwrap_or(0);
    String::from_utf8_lossy(&head[..n]).contains(CURVE_MARK)
}

/// Removes the curve files in `dir` that an earlier run wrote and this one did not (a trace
/// or model with other data paths): left there, they would read as this run's plots, since a
/// plot names its path, not its trace. Other files are left alone: those without the mark
/// (the user's own `curve-*.svg`) and read-only ones (kept on purpose).
pub fn remove_stale_curves(dir: &Path, written: &[PathBuf]) -> Result<(), SvgError> {
    let listing = fs::read_dir(dir).map_err(|e| SvgError {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    })?;
    for entry in listing.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        let named = name.starts_with("curve-") && name.ends_with(".svg");
        let stale = named
            && !written.contains(&path)
            && fs::metadata(&path).is_ok_and(|m| m.is_file() && !m.permissions().readonly())
            && is_our_curve(&path);
        if stale {
            fs::remove_file(&path).map_err(|e| SvgError {
                reason: format!("a plot of an earlier run, which cannot be removed: {e}"),
                path,
            })?;
        }
    }
    Ok(())
}

/// `curve-<path>-<direction>.svg`, with characters that are unsafe in file names (a level
/// may be named anything in the machine model) replaced by `_`.
fn curve_file_name(s: &SeriesSummary) -> String {
    let clean = |t: &str| -> String {
        t.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("curve-{}-{}.svg", clean(&s.path), clean(s.direction))
}

/// Whether a series moved anything (only those get a curve file).
fn has_volume(s: &SeriesSummary) -> bool {
    s.demand.volume > 0 || s.threads.iter().any(|t| t.curve.volume > 0)
}

fn write_file(
    write: &mut impl FnMut(&Path, &[u8]) -> Result<(), String>,
    path: &Path,
    svg: &str,
) -> Result<(), SvgError> {
    write(path, svg.as_bytes()).map_err(|reason| SvgError {
        path: path.to_path_buf(),
        reason,
    })
}

/// Plotters' drawing errors as the reason of an [`SvgError`].
fn draw_err<E: Display>(e: E) -> String {
    format!("drawing failed: {e}")
}

// ---- shared style -------------------------------------------------------------------------

const FONT: &str = "sans-serif";

/// Near-black for text and axes.
const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
/// Secondary text.
const MUTED: RGBColor = RGBColor(0x55, 0x55, 0x55);
/// Grid lines.
const GRID: RGBColor = RGBColor(0xe4, 0xe4, 0xe4);

fn font(size: f64) -> TextStyle<'static> {
    (FONT, size).into_font().color(&INK)
}

fn bold(size: f64) -> TextStyle<'static> {
    (FONT, size, FontStyle::Bold).into_font().color(&INK)
}

/// A text colour readable on `fill`.
fn text_on(fill: RGBColor) -> RGBColor {
    let RGBColor(r, g, b) = fill;
    let luma = 0.299 * f64::from(r) + 0.587 * f64::from(g) + 0.114 * f64::from(b);
    if luma < 140.0 {
        RGBColor(0xff, 0xff, 0xff)
    } else {
        INK
    }
}

// ---- numbers ------------------------------------------------------------------------------

/// Three significant digits without trailing zeros: `14.9`, `23`, `0.125`, `1230`.
fn sig(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v.is_finite() {
            "0".into()
        } else {
            v.to_string()
        };
    }
    let decimals = (2 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
    trim(format!("{v:.decimals$}"))
}

/// Drops trailing zeros (and a trailing point) of a fixed-point number; `-0` becomes `0`.
fn trim(mut s: String) -> String {
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// An axis tick on an axis spanning `range`: enough decimals for plotters' tick steps
/// (1, 2, 2.5 or 5 times a power of ten, at least a hundredth of the range), rounded so
/// that float noise never shows (`0.30000000000000004`).
fn tick(v: f64, range: f64) -> String {
    let decimals = if range > 0.0 && range.is_finite() {
        (3 - range.log10().floor() as i32).clamp(0, 12) as usize
    } else {
        3
    };
    trim(format!("{v:.decimals$}"))
}

/// Seconds with a unit that fits, three significant digits: `1.23 s`, `120 ms`, `15 µs`.
fn secs(s: f64) -> String {
    let t = TimeScale::for_max(s);
    format!("{} {}", sig(s * t.factor), t.unit)
}

/// The time unit of an axis: values are multiplied by `factor` and shown in `unit`.
#[derive(Debug, Clone, Copy)]
struct TimeScale {
    factor: f64,
    unit: &'static str,
}

impl TimeScale {
    /// The largest unit in which `max` is at least 1 (seconds for 0).
    fn for_max(max: f64) -> Self {
        let (factor, unit) = match max.abs() {
            m if m == 0.0 || m >= 1.0 || !m.is_finite() => (1.0, "s"),
            m if m >= 1e-3 => (1e3, "ms"),
            m if m >= 1e-6 => (1e6, "µs"),
            _ => (1e9, "ns"),
        };
        TimeScale { factor, unit }
    }
}

/// Keeps the points of a path that land on distinct device pixels, dropping the middle of
/// straight horizontal or vertical runs: a curve of thousands of steps becomes at most a
/// few points per pixel column without any visible change (files stay small).
fn simplify(
    points: impl IntoIterator<Item = (f64, f64)>,
    to_px: impl Fn(&(f64, f64)) -> (i32, i32),
) -> Vec<(f64, f64)> {
    let mut out: Vec<((f64, f64), (i32, i32))> = Vec::new();
    // The last input point when it was skipped: the path still ends exactly there.
    let mut skipped_end = None;
    for p in points {
        let q = to_px(&p);
        if out.last().is_some_and(|&(_, last)| last == q) {
            skipped_end = Some((p, q));
            continue;
        }
        skipped_end = None;
        if out.len() >= 2 {
            let a = out[out.len() - 2].1;
            let b = out[out.len() - 1].1;
            // b is redundant only when it lies between a and q on one straight line; a
            // turning point (a spike of one pixel column) is kept.
            let between = |a: i32, b: i32, q: i32| (a <= b && b <= q) || (a >= b && b >= q);
            let vertical = a.0 == b.0 && b.0 == q.0 && between(a.1, b.1, q.1);
            let horizontal = a.1 == b.1 && b.1 == q.1 && between(a.0, b.0, q.0);
            if vertical || horizontal {
                out.pop();
            }
        }
        out.push((p, q));
    }
    if let Some(end) = skipped_end {
        if out.len() > 1 {
            out.pop();
        }
        out.push(end);
    }
    out.into_iter().map(|(p, _)| p).collect()
}

/// Adds the pattern that fills the "above the limit" areas: plotters has no pattern fills,
/// so those areas are drawn in a marker colour (`key`, used for nothing else) and the colour is
/// replaced by a reference to a diagonal hatch here (the thesis's hatched V_L).
fn add_hatch(svg: String, key: RGBColor, line: RGBColor, background: RGBColor) -> String {
    let hex = |RGBColor(r, g, b): RGBColor| format!("#{r:02X}{g:02X}{b:02X}");
    let key = format!("fill=\"{}\"", hex(key));
    if !svg.contains(&key) {
        return svg;
    }
    let defs = format!(
        "<defs><pattern id=\"hatch\" patternUnits=\"userSpaceOnUse\" width=\"7\" height=\"7\" \
         patternTransform=\"rotate(45)\"><rect width=\"7\" height=\"7\" fill=\"{}\"/>\
         <line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"7\" stroke=\"{}\" stroke-width=\"2.2\"/>\
         </pattern></defs>\n",
        hex(background),
        hex(line)
    );
    let svg = svg.replace(&key, "fill=\"url(#hatch)\"");
    // Right after the root element's opening tag (plotters writes it on the first line).
    match svg.find(">\n") {
        Some(i) => format!("{}{}{}", &svg[..i + 2], defs, &svg[i + 2..]),
        None => svg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(sig(14.9), "14.9");
        assert_eq!(sig(23.0), "23");
        assert_eq!(sig(0.125), "0.125");
        assert_eq!(sig(1234.0), "1234");
        assert_eq!(sig(0.0), "0");
        assert_eq!(tick(0.30000000000000004, 1.0), "0.3");
        assert_eq!(tick(2.5, 25.0), "2.5");
        assert_eq!(tick(-0.0, 25.0), "0");
        assert_eq!(secs(0.123), "123 ms");
        assert_eq!(secs(1.5), "1.5 s");
        assert_eq!(secs(1.5e-5), "15 µs");
        assert_eq!(secs(0.0), "0 s");
    }

    #[test]
    fn simplify_keeps_shape_and_drops_redundant_points() {
        let px = |p: &(f64, f64)| (p.0.round() as i32, p.1.round() as i32);
        // A staircase sampled far below pixel size collapses to its corners.
        let pts: Vec<_> = (0..1000).map(|i| (i as f64 / 100.0, 0.0)).collect();
        assert_eq!(simplify(pts, px), vec![(0.0, 0.0), (9.99, 0.0)]);
        // A one-column spike survives.
        let pts = vec![(0.0, 0.0), (5.0, 0.0), (5.0, 9.0), (5.0, 2.0), (8.0, 2.0)];
        assert_eq!(simplify(pts.clone(), px), pts);
    }
}
