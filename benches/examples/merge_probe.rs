//! Merge throughput probe: drains `TraceFile::merged` in batches (the global order), or with
//! `WINDOW=SLACK` in whole quanta with each thread's events apart (`next_quanta`).
//!
//! Run: `cargo run --release -p cachescope-benches --example merge_probe -- TRACE`
use std::time::Instant;

use cachescope_schema::{QuantaSizes, TraceFile};

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: merge_probe TRACE");
        std::process::exit(2);
    };
    let trace = TraceFile::open(std::path::Path::new(&path)).expect("open");
    let window: Option<u64> = std::env::var("WINDOW").ok().and_then(|v| v.parse().ok());
    for _ in 0..5 {
        let start = Instant::now();
        let mut m = trace.merged().expect("merged");
        let mut n = 0;
        match window {
            None => {
                let mut out = Vec::with_capacity(1 << 17);
                loop {
                    out.clear();
                    let more = m.next_batch(&mut out, 1 << 16).expect("batch");
                    n += out.len();
                    if !more {
                        break;
                    }
                }
            }
            Some(slack) => {
                let mut out = vec![Vec::new(); m.thread_ids().len()];
                let mut ties = vec![Vec::new(); out.len()];
                loop {
                    out.iter_mut().for_each(Vec::clear);
                    ties.iter_mut().for_each(Vec::clear);
                    let more = m
                        .next_quanta(slack, QuantaSizes::whole(1 << 16), &mut out, &mut ties)
                        .expect("quanta");
                    n += out.iter().map(Vec::len).sum::<usize>();
                    if !more {
                        break;
                    }
                }
            }
        }
        println!("{n} events {:.4} s", start.elapsed().as_secs_f64());
    }
}
