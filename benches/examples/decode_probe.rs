use cachescope_benches::{bench_params, generate_in_memory};
use cachescope_schema::chunk::ChunkDecoder;
use cachescope_schema::synth::Workload;
use std::time::Instant;
fn main() {
    for w in [Workload::Stream, Workload::Stencil, Workload::Random] {
        let t = generate_in_memory(&bench_params(w, 1));
        let mut raw = vec![0u8; 4 << 20];
        let start = Instant::now();
        let mut total = 0;
        for _ in 0..10 {
            for c in &t.chunks {
                let n: usize = c.column_lengths.iter().map(|&l| l as usize).sum();
                total += lz4_flex::block::decompress_into(&c.data, &mut raw[..n]).unwrap();
            }
        }
        let lz = start.elapsed().as_secs_f64() / 10.0;
        let mut d = ChunkDecoder::default();
        let mut out = Vec::new();
        let start = Instant::now();
        for _ in 0..10 {
            for c in &t.chunks {
                out.clear();
                d.decode(c, &mut out).unwrap();
            }
        }
        let all = start.elapsed().as_secs_f64() / 10.0;
        println!(
            "{w}: events {} raw bytes/ev {:.2} lz4 {:.1} Mev/s, full {:.1} Mev/s",
            t.events,
            total as f64 / 10.0 / t.events as f64,
            t.events as f64 / lz / 1e6,
            t.events as f64 / all / 1e6
        );
    }
}
