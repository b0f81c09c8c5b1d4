//! Quick decode throughput probe: LZ4 alone and full `ChunkDecoder::decode`, per workload.
use cachescope_benches::{bench_params, generate_in_memory};
use cachescope_schema::chunk::ChunkDecoder;
use cachescope_schema::synth::Workload;
use std::time::Instant;
fn main() {
    for w in [
        Workload::Stream,
        Workload::Strided,
        Workload::Stencil,
        Workload::Random,
    ] {
        let t = generate_in_memory(&bench_params(w, 1));
        let mut raw = vec![0u8; 4 << 20];
        let reps = 20;
        let mut lz = f64::MAX;
        let mut total = 0;
        for _ in 0..reps {
            let start = Instant::now();
            total = 0;
            for c in &t.chunks {
                let n: usize = c.column_lengths.iter().map(|&l| l as usize).sum();
                total += lz4_flex::block::decompress_into(&c.data, &mut raw[..n]).unwrap();
            }
            lz = lz.min(start.elapsed().as_secs_f64());
        }
        let mut d = ChunkDecoder::default();
        let mut out = Vec::new();
        let mut all = f64::MAX;
        for _ in 0..reps {
            let start = Instant::now();
            for c in &t.chunks {
                out.clear();
                d.decode(c, &mut out).unwrap();
            }
            all = all.min(start.elapsed().as_secs_f64());
        }
        let ev = t.events as f64;
        println!(
            "{w:<8} events {} file {:.3} B/ev raw {:.2} B/ev  lz4 {:.0} Mev/s  full {:.1} Mev/s (best of {reps})",
            t.events,
            t.bytes_per_event(),
            total as f64 / ev,
            ev / lz / 1e6,
            ev / all / 1e6
        );
    }
}
