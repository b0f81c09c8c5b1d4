//! Series and limits of a machine's bandwidth model (thesis Fig. 4.15).

use serde::Serialize;

use crate::model::MachineModel;

/// Direction of a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Bytes towards the core.
    Read,
    /// Bytes away from the core.
    Write,
    /// Bytes in both directions together (a bus both share).
    Combined,
    /// Floating-point operations (the ALU "path").
    Flops,
    /// Instructions (time units) executed: the issue "path" of a core.
    Instructions,
}

impl Direction {
    /// `read`, `write` or `flops`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Read => "read",
            Direction::Write => "write",
            Direction::Combined => "read+write",
            Direction::Flops => "flops",
            Direction::Instructions => "instructions",
        }
    }
}

/// One quantity kept per thread per window: a data path in one direction, or FLOPs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Series {
    /// Data path (`core-L1`, `L1-L2`, `L2-mem`, `L1-L1`, ...) or `ALU`.
    pub path: String,
    /// Direction.
    pub direction: Direction,
    /// Index of the path in the engine's path list (`None` for the ALU).
    #[serde(skip)]
    pub path_index: Option<usize>,
}

impl Series {
    /// `L2-mem read`, `ALU flops`.
    pub fn label(&self) -> String {
        format!("{} {}", self.path, self.direction.name())
    }
}

/// Whom a limit applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Each core on its own.
    PerCore,
    /// All cores together (a merge point): when the summed demand exceeds the limit, every
    /// core using the path is slowed by the same factor, i.e. gets bandwidth in proportion to
    /// its demand (the thesis's fairness scheme, §4.4.1).
    Total,
}

/// One limit checked in every window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Channel {
    /// E.g. `L2-mem read (total)`.
    pub name: String,
    /// The series it limits.
    pub series: usize,
    /// Per core or summed over cores.
    pub scope: Scope,
    /// The limit in GB/s (GFLOP/s for the ALU).
    pub limit_gbs: f64,
    /// The same limit in bytes (FLOPs) per time unit at peak rate.
    pub limit_per_unit: f64,
}

/// Why the machine model cannot be used for bandwidth analysis.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// No `[bandwidth]` table.
    #[error("machine model {0:?} has no [bandwidth] section (peak GHz, IPC and path limits); use a model with one, e.g. ivybridge-4c, or `cachescope calibrate --bandwidth -o host.toml`")]
    NoBandwidthModel(String),
    /// The thread placement puts several threads on one core.
    #[error("bandwidth analysis needs one core per thread (thesis §4.3.1), but the placement puts {threads} threads on core {core}; use a model with at least {needed} cores (e.g. --set cores={needed}) and the one-to-one mapping")]
    SharedCore {
        /// The core.
        core: u32,
        /// Threads placed on it.
        threads: usize,
        /// Threads in the trace.
        needed: usize,
    },
    /// Nothing is limited.
    #[error(
        "machine model {0:?} sets no bandwidth limit ([bandwidth.paths.*] or flops_per_cycle)"
    )]
    NoLimits(String),
}

/// The series of `model` (every path both ways, plus read+write where a combined limit is
/// set, then FLOPs, then instruction issue when `ipc_total` is set) and its limits, in a fixed
/// order.
pub fn channels(model: &MachineModel) -> Result<(Vec<Series>, Vec<Channel>), ChannelError> {
    let bw = model
        .bandwidth
        .as_ref()
        .ok_or_else(|| ChannelError::NoBandwidthModel(model.name.clone()))?;
    let per_unit = 1.0 / (bw.ghz * bw.ipc);
    let mut series = Vec::new();
    let mut chans = Vec::new();
    for (j, path) in model.path_names().into_iter().enumerate() {
        let limit = bw.paths.get(&path);
        let mut directions = vec![
            (
                Direction::Read,
                limit.and_then(|l| l.read_gbs),
                limit.and_then(|l| l.total_read_gbs),
            ),
            (
                Direction::Write,
                limit.and_then(|l| l.write_gbs),
                limit.and_then(|l| l.total_write_gbs),
            ),
        ];
        let combined = (
            limit.and_then(|l| l.combined_gbs),
            limit.and_then(|l| l.total_combined_gbs),
        );
        if combined.0.is_some() || combined.1.is_some() {
            directions.push((Direction::Combined, combined.0, combined.1));
        }
        for (dir, own, total) in directions {
            let s = series.len();
            series.push(Series {
                path: path.clone(),
                direction: dir,
                path_index: Some(j),
            });
            for (scope, gbs, suffix) in
                [(Scope::PerCore, own, ""), (Scope::Total, total, " (total)")]
            {
                if let Some(gbs) = gbs {
                    chans.push(Channel {
                        name: format!("{path} {}{suffix}", dir.name()),
                        series: s,
                        scope,
                        limit_gbs: gbs,
                        limit_per_unit: gbs * per_unit,
                    });
                }
            }
        }
    }
    let s = series.len();
    series.push(Series {
        path: "ALU".into(),
        direction: Direction::Flops,
        path_index: None,
    });
    if let Some(fpc) = bw.flops_per_cycle {
        chans.push(Channel {
            name: "ALU flops".into(),
            series: s,
            scope: Scope::PerCore,
            limit_gbs: fpc * bw.ghz,
            limit_per_unit: fpc / bw.ipc,
        });
    }
    if let Some(total) = bw.ipc_total {
        // Each core's own issue rate is the peak itself; only the sum over cores can limit.
        let s = series.len();
        series.push(Series {
            path: "issue".into(),
            direction: Direction::Instructions,
            path_index: None,
        });
        chans.push(Channel {
            name: "issue instructions (total)".into(),
            series: s,
            scope: Scope::Total,
            limit_gbs: total * bw.ghz,
            limit_per_unit: total / bw.ipc,
        });
    }
    if chans.is_empty()
        && bw.page_fault_ns.is_none()
        && bw.barrier_ns.is_none()
        && bw.region_ns.is_none()
    {
        return Err(ChannelError::NoLimits(model.name.clone()));
    }
    Ok((series, chans))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ivybridge_channels_follow_table_4_3() {
        let m = MachineModel::load("ivybridge-4c").expect("preset");
        let (series, chans) = channels(&m).expect("bandwidth model");
        let labels: Vec<_> = series.iter().map(Series::label).collect();
        assert_eq!(
            labels,
            [
                "core-L1 read",
                "core-L1 write",
                "L1-L2 read",
                "L1-L2 write",
                "L2-mem read",
                "L2-mem write",
                "L1-L1 read",
                "L1-L1 write",
                "ALU flops"
            ]
        );
        let names: Vec<_> = chans.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "core-L1 read",
                "core-L1 write",
                "L1-L2 read",
                "L1-L2 write",
                "L2-mem read",
                "L2-mem read (total)",
                "L2-mem write",
                "L2-mem write (total)",
                "L1-L1 read",
                "ALU flops"
            ]
        );
        // 23 GB/s at 2.7 GHz × 4 instructions per cycle: 23 / 10.8 bytes per instruction.
        let total_read = &chans[5];
        assert_eq!(total_read.scope, Scope::Total);
        assert!((total_read.limit_per_unit - 23.0 / 10.8).abs() < 1e-12);
        // 4 FLOPs per cycle at 4 instructions per cycle: 1 FLOP per instruction.
        assert!((chans[9].limit_per_unit - 1.0).abs() < 1e-12);
    }

    #[test]
    fn model_without_bandwidth_is_an_error() {
        let m = MachineModel::load("cachegrind").expect("preset");
        let e = channels(&m).expect_err("no bandwidth section");
        assert!(e.to_string().contains("no [bandwidth] section"), "{e}");
    }
}
