//! The progress line of a long run: events decoded so far (all readers of the process, see
//! `cachescope_schema::progress`) against the trace's total, on stderr when it is a terminal
//! (indicatif draws nothing otherwise), from a thread of its own so the work is not slowed.
//! Shown only once a run has taken a second: short runs print nothing extra.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cachescope_schema::progress::events_decoded;
use cachescope_schema::TraceFile;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a run goes before its progress line appears.
const SHOW_AFTER: Duration = Duration::from_secs(1);
/// How often the line is updated.
const TICK: Duration = Duration::from_millis(200);

/// A progress line, cleared when dropped.
pub struct Progress {
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts the line for `what` (e.g. "simulating") over `trace`'s events. The total is the
    /// trailer's; a reader that passes over the trace twice (the audit) moves the total up.
    pub fn start(what: &str, trace: &TraceFile) -> Progress {
        let total: Option<u64> = trace
            .trailer()
            .map(|t| t.threads.iter().map(|t| t.events).sum());
        let base = events_decoded();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let what = what.to_string();
        let ticker = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || tick(&what, total, base, &flag))
            .ok();
        Progress { stop, ticker }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

fn tick(what: &str, total: Option<u64>, base: u64, stop: &AtomicBool) {
    let started = Instant::now();
    let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::hidden());
    let style = match total {
        Some(_) => ProgressStyle::with_template(
            "{msg} {wide_bar} {human_pos}/{human_len} events, {elapsed} so far, about {eta} left",
        ),
        None => {
            ProgressStyle::with_template("{msg} {spinner} {human_pos} events, {elapsed} so far")
        }
    };
    if let Ok(style) = style {
        bar.set_style(style);
    }
    bar.set_message(what.to_string());
    let mut shown = false;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(TICK);
        if !shown && started.elapsed() >= SHOW_AFTER {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            shown = true;
        }
        let done = events_decoded().saturating_sub(base);
        if let Some(len) = bar.length() {
            if done > len {
                bar.set_length(done);
            }
        }
        bar.set_position(done);
    }
    bar.finish_and_clear();
}
