//! Helpers shared by the simulator's integration tests.

use std::collections::BTreeMap;

use cachescope_schema::{Access, AccessKind, Event, TimeUnit, TraceFile, TraceHeader, TraceWriter};
use cachescope_sim::counters::SimReport;
use cachescope_sim::{ExactEngine, MachineModel};

/// A 64-byte-line model with `cores` cores, coherence `protocol` and the given `[[levels]]`.
pub fn model(levels: &str, cores: u32, protocol: &str) -> MachineModel {
    let text = format!(
        "name = \"test\"\ncores = {cores}\nline_size = 64\ncoherence = \"{protocol}\"\n{levels}"
    );
    MachineModel::from_toml(&text, "test").unwrap()
}

/// An exact engine with thread i on core i.
pub fn engine(m: &MachineModel) -> ExactEngine {
    let placement: BTreeMap<u32, u32> = (0..m.cores).map(|c| (c, c)).collect();
    ExactEngine::new(m, &placement, TimeUnit::Events)
}

/// Writes `streams` (thread i's events at index i) as a trace in `unit` and opens it.
pub fn trace_file(unit: TimeUnit, streams: &[Vec<Event>]) -> (tempfile::TempDir, TraceFile) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.cstrace");
    let w = TraceWriter::create(&path, &TraceHeader::new("test", "test", unit)).unwrap();
    for (t, events) in streams.iter().enumerate() {
        let mut tw = w.thread(t as u32).unwrap();
        tw.extend(events.iter().copied()).unwrap();
        tw.finish().unwrap();
    }
    w.finish().unwrap();
    let f = TraceFile::open(&path).unwrap();
    (dir, f)
}

/// An access without code position.
pub fn acc(kind: AccessKind, addr: u64, size: u32) -> Access {
    Access {
        kind,
        size,
        addr,
        pc: None,
    }
}

/// Hierarchies with private levels of any inclusion, non-inclusive and inclusive shared
/// levels, LRU, PLRU, FIFO and random replacement, a direct-mapped level, no shared level.
pub const RANDOM_HIERARCHIES: [&str; 5] = [
    r#"
[[levels]]
name = "L1"
size = 512
assoc = 2
[[levels]]
name = "L2"
size = 2048
assoc = 4
shared = true
"#,
    r#"
[[levels]]
name = "L1"
size = 256
assoc = 2
replacement = "plru"
[[levels]]
name = "L2"
size = 1024
assoc = 4
inclusion = "inclusive"
[[levels]]
name = "L3"
size = 4096
assoc = 4
shared = true
replacement = "random"
"#,
    r#"
[[levels]]
name = "L1"
size = 256
assoc = 2
[[levels]]
name = "L2"
size = 1024
assoc = 2
shared = true
inclusion = "inclusive"
[[levels]]
name = "L3"
size = 4096
assoc = 4
shared = true
inclusion = "inclusive"
replacement = "fifo"
"#,
    // Direct-mapped with an odd set count: cores lose and refill lines within a few accesses.
    r#"
[[levels]]
name = "L1"
size = 192
assoc = 1
replacement = "fifo"
[[levels]]
name = "L2"
size = 1536
assoc = 3
shared = true
"#,
    // A private, non-inclusive outer level with FIFO replacement: its victims depend on the
    // order of its fills alone (later hits do not restamp a line, as with LRU).
    r#"
[[levels]]
name = "L1"
size = 256
assoc = 2
[[levels]]
name = "L2"
size = 512
assoc = 2
replacement = "fifo"
"#,
];

/// A report as JSON without the engine-specific fields (engine, slack, quanta), for comparing
/// the parallel engine's counters with the exact engine's.
pub fn counters_json(r: &SimReport) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("engine");
    o.remove("slack");
    o.remove("quanta");
    v
}
