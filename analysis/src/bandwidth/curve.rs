//! Bandwidth curves in physical units and what a limit costs (thesis §4.3.2, §4.4.3).

use cachescope_sim::bandwidth::Curve;
use serde::Serialize;

/// One step of a monotone bandwidth curve: `seconds` of run time needed `rate`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Step {
    /// GB/s (GFLOP/s for the ALU).
    pub rate: f64,
    /// Seconds at that rate.
    pub seconds: f64,
    /// Share of these seconds in which the limit being looked at dominated (0..=1); only in
    /// curves paired with a dominance curve.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dominant_share: Option<f64>,
}

/// A curve converted to GB/s and seconds, ascending by rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateCurve {
    /// Bytes (FLOPs) moved: the area under the curve.
    pub volume: u64,
    /// Seconds covered.
    pub seconds: f64,
    /// Average over the covered time.
    pub average_rate: f64,
    /// Highest window rate.
    pub max_rate: f64,
    /// The steps.
    pub steps: Vec<Step>,
}

/// Converts between a curve's window values and physical units.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    /// Window length W, time units.
    pub window: u64,
    /// Seconds per time unit at peak.
    pub seconds_per_unit: f64,
}

impl Scale {
    /// GB/s of a window value (bytes per W units).
    pub fn rate(&self, value: u64) -> f64 {
        value as f64 / self.window as f64 / self.seconds_per_unit / 1e9
    }
}

impl RateCurve {
    /// `curve` in GB/s; with `dominance` (the same quantity recorded only in windows where a
    /// limit dominated), each step carries the dominant share of its time.
    pub fn new(curve: &Curve, dominance: Option<&Curve>, scale: Scale) -> Self {
        let dom: Vec<(u64, u64)> = dominance.map(Curve::steps).unwrap_or_default();
        let steps: Vec<Step> = curve
            .steps()
            .into_iter()
            .map(|(value, units)| Step {
                rate: scale.rate(value),
                seconds: units as f64 * scale.seconds_per_unit,
                dominant_share: dominance.map(|_| {
                    let d = dom
                        .binary_search_by_key(&value, |&(v, _)| v)
                        .map(|i| dom[i].1)
                        .unwrap_or(0);
                    (d as f64 / units.max(1) as f64).min(1.0)
                }),
            })
            .collect();
        let seconds = curve.units as f64 * scale.seconds_per_unit;
        let volume_rate = curve.volume as f64 / 1e9;
        RateCurve {
            volume: curve.volume,
            seconds,
            average_rate: if seconds > 0.0 {
                volume_rate / seconds
            } else {
                0.0
            },
            max_rate: steps.last().map_or(0.0, |s| s.rate),
            steps,
        }
    }

    /// What limit `limit` (GB/s) costs on this curve.
    pub fn cost(&self, limit: f64) -> LimitCost {
        let mut c = LimitCost::default();
        for s in self.steps.iter().filter(|s| s.rate > limit) {
            // V_L = Σ_{b>L} Δt_b (b − L), in GB; T_L = V_L / L.
            let over = (s.rate - limit) * s.seconds;
            c.seconds_above += s.seconds;
            c.volume_over_gb += over;
            if let Some(share) = s.dominant_share {
                c.dominant_seconds_above += s.seconds * share;
                c.dominant_volume_over_gb += over * share;
            }
        }
        c.t_l_seconds = c.volume_over_gb / limit;
        c.dominant_t_l_seconds = c.dominant_volume_over_gb / limit;
        c
    }
}

/// A limit against a curve (thesis §4.3.2 and Fig. 4.16).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LimitCost {
    /// Time the requirement is above the limit (T − t'_L), seconds.
    pub seconds_above: f64,
    /// V_L: the volume above the limit line, GB.
    pub volume_over_gb: f64,
    /// T_L = V_L / L: the time the limit adds if it were the only one, seconds.
    pub t_l_seconds: f64,
    /// The part of `seconds_above` in which the limit dominated.
    pub dominant_seconds_above: f64,
    /// V_L^Dom: the part of V_L in dominant windows, GB.
    pub dominant_volume_over_gb: f64,
    /// V_L^Dom / L: the time the limit really adds, seconds.
    pub dominant_t_l_seconds: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// W = 10 units at 1 GHz × 1 IPC: a window value v is v/10 GB/s, a unit 1 ns.
    fn hand_curve(windows: &[(u64, u64)]) -> Curve {
        let mut c = Curve::new();
        for &(value, count) in windows {
            c.record(value, 10 * count);
            c.volume += value * count;
        }
        c
    }

    const SCALE: Scale = Scale {
        window: 10,
        seconds_per_unit: 1e-9,
    };

    #[test]
    fn limit_cost_matches_hand_computation() {
        // 5 idle windows, 3 at 20 B (2 GB/s), 2 at 60 B (6 GB/s): 100 ns, 180 bytes.
        let curve = hand_curve(&[(0, 5), (20, 3), (60, 2)]);
        // One of the two 60 B windows was dominated by the limit.
        let dom = hand_curve(&[(60, 1)]);
        let r = RateCurve::new(&curve, Some(&dom), SCALE);
        assert_eq!(r.volume, 180);
        assert!((r.seconds - 100e-9).abs() < 1e-18);
        // The area under the curve is the volume: Σ rate × seconds = 2·30 + 6·20 = 180 bytes.
        let area_gb: f64 = r.steps.iter().map(|s| s.rate * s.seconds).sum();
        assert!((area_gb * 1e9 - 180.0).abs() < 1e-9, "{area_gb}");
        assert!((r.max_rate - 6.0).abs() < 1e-12);
        assert!((r.average_rate - 1.8).abs() < 1e-12);
        // L = 3 GB/s: above it 20 ns at 6 GB/s; V_L = (6 − 3) · 20 ns = 60 bytes;
        // T_L = V_L / L = 20 ns. Half of it dominant: V_L^Dom = 30 bytes, T_L^Dom = 10 ns.
        let c = r.cost(3.0);
        assert!((c.seconds_above - 20e-9).abs() < 1e-18);
        assert!((c.volume_over_gb - 60e-9).abs() < 1e-18);
        assert!((c.t_l_seconds - 20e-9).abs() < 1e-18);
        assert!((c.dominant_seconds_above - 10e-9).abs() < 1e-18);
        assert!((c.dominant_volume_over_gb - 30e-9).abs() < 1e-18);
        assert!((c.dominant_t_l_seconds - 10e-9).abs() < 1e-18);
        // L = 1 GB/s: both non-idle steps are above it: V_L = 1·30 + 5·20 = 130 bytes.
        let c = r.cost(1.0);
        assert!((c.seconds_above - 50e-9).abs() < 1e-18);
        assert!((c.volume_over_gb - 130e-9).abs() < 1e-18);
        assert!((c.t_l_seconds - 130e-9).abs() < 1e-18);
        // A limit above every requirement costs nothing.
        assert_eq!(r.cost(7.0), LimitCost::default());
    }
}
