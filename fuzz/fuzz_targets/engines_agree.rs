//! Differential fuzzing of the two engines: random accesses of up to 4 threads on 2–3 cores,
//! decoded from the input, through several small hierarchies. The exact engine's coherence
//! invariant must hold after every event, and the parallel engine's counters must equal the
//! exact engine's at the slack and host thread count the input picks (docs/parallel-engine.md:
//! "equals the exact engine at every slack").
#![no_main]

use std::collections::BTreeMap;

use cachescope_schema::{Access, AccessKind, Event, TimeUnit, TimedEvent};
use cachescope_sim::{ExactEngine, MachineModel, ParallelConfig, ParallelEngine};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;
use common::counters;

/// Private levels of every inclusion, shared levels non-inclusive and inclusive, LRU, PLRU,
/// FIFO and random replacement, odd set counts, no shared level at all.
const HIERARCHIES: [&str; 5] = [
    "[[levels]]\nname = \"L1\"\nsize = 512\nassoc = 2\n\
     [[levels]]\nname = \"L2\"\nsize = 2048\nassoc = 4\nshared = true\n",
    "[[levels]]\nname = \"L1\"\nsize = 256\nassoc = 2\nreplacement = \"plru\"\n\
     [[levels]]\nname = \"L2\"\nsize = 1024\nassoc = 4\ninclusion = \"inclusive\"\n\
     [[levels]]\nname = \"L3\"\nsize = 4096\nassoc = 4\nshared = true\nreplacement = \"random\"\n",
    "[[levels]]\nname = \"L1\"\nsize = 256\nassoc = 2\n\
     [[levels]]\nname = \"L2\"\nsize = 1024\nassoc = 2\nshared = true\ninclusion = \"inclusive\"\n\
     [[levels]]\nname = \"L3\"\nsize = 4096\nassoc = 4\nshared = true\ninclusion = \"inclusive\"\n",
    "[[levels]]\nname = \"L1\"\nsize = 192\nassoc = 1\nreplacement = \"fifo\"\n\
     [[levels]]\nname = \"L2\"\nsize = 1536\nassoc = 3\nshared = true\n",
    // A private non-inclusive FIFO outer level: its victims follow the order of its fills.
    "[[levels]]\nname = \"L1\"\nsize = 256\nassoc = 2\n\
     [[levels]]\nname = \"L2\"\nsize = 512\nassoc = 2\nreplacement = \"fifo\"\n",
];

const KINDS: [AccessKind; 4] = [
    AccessKind::Load,
    AccessKind::Store,
    AccessKind::AtomicRmw,
    AccessKind::Modify,
];
const SIZES: [u32; 5] = [1, 4, 8, 16, 100];
const SLACKS: [u64; 5] = [1, 2, 5, 50, u64::MAX];

fuzz_target!(|data: &[u8]| {
    let Some((&head, ops)) = data.split_first() else {
        return;
    };
    let cores = 2 + u32::from(head & 1);
    let threads = 2 + u32::from((head >> 1) & 3) % 3;
    let mesi = head & 8 != 0;
    let hierarchy = HIERARCHIES[usize::from(head >> 4) % HIERARCHIES.len()];
    let slack = SLACKS[usize::from(head >> 6) % SLACKS.len()];
    let host = 1 + usize::from(head >> 7);
    let text = format!(
        "name = \"fuzz\"\ncores = {cores}\nline_size = 64\ncoherence = \"{}\"\n{hierarchy}",
        if mesi { "mesi" } else { "msi" }
    );
    let m = MachineModel::from_toml(&text, "fuzz").expect("the fuzz models are valid");
    // Four bytes an access: thread and time step, kind and size, two address bytes (4 KiB:
    // 64 lines, so the threads share lines and the small caches evict).
    let mut time = 0u64;
    let mut events: Vec<TimedEvent> = ops
        .chunks_exact(4)
        .take(2000)
        .map(|b| {
            time += u64::from(b[0] >> 4) % 3;
            TimedEvent {
                time,
                thread: u32::from(b[0] & 3) % threads,
                event: Event::Access(Access {
                    kind: KINDS[usize::from(b[1] & 3)],
                    size: SIZES[usize::from(b[1] >> 2) % SIZES.len()],
                    addr: 0x10000 + (u64::from(u16::from_le_bytes([b[2], b[3]])) & 0xfff),
                    pc: None,
                }),
            }
        })
        .collect();
    events.sort_by_key(|e| (e.time, e.thread));
    let placement: BTreeMap<u32, u32> = (0..threads).map(|t| (t, t % cores)).collect();
    let mut exact = ExactEngine::new(&m, &placement, TimeUnit::Events);
    for (i, e) in events.iter().enumerate() {
        exact.process(e);
        if let Err(why) = exact.check_invariants() {
            panic!("invariant broken after event {i} ({e:?}): {why}");
        }
    }
    let cfg = ParallelConfig {
        slack,
        threads: host,
    };
    let Ok(mut parallel) = ParallelEngine::new(&m, &placement, TimeUnit::Events, cfg) else {
        return; // a model the parallel engine refuses (exclusive levels, write-through)
    };
    parallel.run_slice(&events);
    let (a, b) = (counters(&exact.report()), counters(&parallel.report()));
    assert!(
        a == b,
        "exact vs parallel (slack {slack}, {host} host threads):\n{a}\n{b}"
    );
});
