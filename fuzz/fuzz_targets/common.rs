//! Shared by the fuzz targets that compare the two engines.

/// The counters of a report as JSON, without the engine-specific fields (engine, slack,
/// quanta): what the parallel engine must have equal to the exact engine.
pub fn counters(r: &cachescope_sim::counters::SimReport) -> serde_json::Value {
    let mut v = serde_json::to_value(r).expect("report serializes");
    if let Some(o) = v.as_object_mut() {
        o.remove("engine");
        o.remove("slack");
        o.remove("quanta");
    }
    v
}
