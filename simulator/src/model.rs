//! The machine model: cores, cache levels, coherence and the bandwidth model, read from TOML
//! (or an embedded preset) and validated with errors that name the field.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize};

/// An invalid or unreadable machine model.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[error("machine model {source_name}: {field}: {reason}")]
pub struct ModelError {
    /// Where the model came from (file path or preset name).
    pub source_name: String,
    /// The offending field, e.g. `levels.L2.assoc` (`levels[1].name` for a level's name).
    pub field: String,
    /// Why it is wrong.
    pub reason: String,
}

/// Cache line replacement policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Replacement {
    /// True least-recently-used.
    #[default]
    Lru,
    /// Tree pseudo-LRU (associativity must be a power of two).
    Plru,
    /// First in, first out.
    Fifo,
    /// Uniformly random victim from a seeded generator.
    Random,
}

/// What a store does at this level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum WritePolicy {
    /// Write-back with write-allocate.
    #[default]
    Back,
    /// Write-through without write-allocate.
    Through,
}

/// How a level's contents relate to the levels above it (closer to the core).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Inclusion {
    /// Filled on the way to the core; evictions do not touch the levels above.
    #[default]
    NonInclusive,
    /// Holds everything the levels above hold: evicting a line back-invalidates it above.
    Inclusive,
    /// Victim cache: holds only lines evicted from above; a hit moves the line up.
    Exclusive,
}

/// Coherence protocol among private caches (directory based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Modified / Shared / Invalid.
    #[default]
    Msi,
    /// MSI plus Exclusive: a read with no other sharer gets E, and a write to E needs no
    /// upgrade.
    Mesi,
}

fn de_size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    /// Accepts a non-negative integer or a size string; anything else is an error that says
    /// which field and what is expected (an untagged enum would only say "did not match").
    struct SizeVisitor;
    impl serde::de::Visitor<'_> for SizeVisitor {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a size in bytes like 32768, \"32K\" or \"3M\"")
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
            u64::try_from(v).map_err(|_| E::custom(format!("size: {v} is negative")))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<u64, E> {
            // TOML reads `1e3` and `32768.0` as floats: say so, since the value itself may
            // look whole.
            Err(E::custom(format!(
                "size: {v} is a floating-point number; write a size as an integer or a string \
                 (examples: 32768, \"32K\", \"3M\")"
            )))
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<u64, E> {
            parse_size(v).map_err(|e| E::custom(format!("size: {e}")))
        }
    }
    d.deserialize_any(SizeVisitor)
}

/// Parses `4096`, `32K`, `3M`, `1G` (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("not a size: {s:?} (examples: 32768, 32K, 3M)"))
}

/// One cache level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelConfig {
    /// Name used in reports and bandwidth paths, e.g. `L1`.
    pub name: String,
    /// Capacity in bytes (integer or `32K`-style string).
    #[serde(deserialize_with = "de_size")]
    pub size: u64,
    /// Ways per set.
    pub assoc: u32,
    /// Replacement policy.
    #[serde(default)]
    pub replacement: Replacement,
    /// Write policy.
    #[serde(default)]
    pub write: WritePolicy,
    /// Inclusion relative to the levels above.
    #[serde(default)]
    pub inclusion: Inclusion,
    /// Shared by all cores (otherwise one private instance per core).
    #[serde(default)]
    pub shared: bool,
    /// Load-to-use latency in cycles, for reports.
    #[serde(default)]
    pub latency: u32,
}

impl LevelConfig {
    /// Number of lines.
    pub fn lines(&self, line_size: u32) -> u64 {
        self.size / line_size as u64
    }

    /// Number of sets.
    pub fn sets(&self, line_size: u32) -> u64 {
        self.lines(line_size) / self.assoc as u64
    }
}

/// Bandwidth limits of one data path, GB/s (thesis Table 4.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PathLimit {
    /// Read (towards the core) limit per core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_gbs: Option<f64>,
    /// Write (away from the core) limit per core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_gbs: Option<f64>,
    /// Read limit summed over all cores (merge point), for paths below a shared level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_read_gbs: Option<f64>,
    /// Write limit summed over all cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_write_gbs: Option<f64>,
    /// Limit on read and write bytes together, per core (a bus both directions share, like
    /// a memory channel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub combined_gbs: Option<f64>,
    /// Limit on read and write bytes together, summed over all cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_combined_gbs: Option<f64>,
}

/// Peak performance and data path limits for bandwidth and runtime analysis (thesis §4.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BandwidthModel {
    /// Core clock, GHz.
    pub ghz: f64,
    /// Instructions per cycle at peak.
    pub ipc: f64,
    /// Floating-point operations per cycle at peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops_per_cycle: Option<f64>,
    /// Instructions per cycle of all cores together at peak, when cores share execution
    /// resources (SMT siblings, vCPUs of one physical core): a merge point for instruction
    /// issue. Unset: every core reaches `ipc` on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipc_total: Option<f64>,
    /// Cost of one false-sharing event, cycles (τ of thesis §4.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub false_sharing_penalty_cycles: Option<f64>,
    /// Cost of the first touch of a 4 KiB page (the kernel's page fault and zeroing), ns:
    /// time the touching thread cannot overlap with anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_fault_ns: Option<f64>,
    /// Cost of one barrier episode for each thread that passes it (the runtime's signalling
    /// and wake-up, not the wait for a slower thread), ns; an OpenMP region's end is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barrier_ns: Option<f64>,
    /// Cost of forking one parallel region for each thread of the team, beyond the barrier at
    /// its end, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region_ns: Option<f64>,
    /// Limits by path name: `core-L1`, `L1-L2`, ..., `<last>-mem`, and `<last private
    /// level>-<same>` for cache-to-cache transfers (e.g. `L1-L1`).
    #[serde(default)]
    pub paths: BTreeMap<String, PathLimit>,
}

/// A whole machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineModel {
    /// Model name.
    pub name: String,
    /// Simulated cores (1..=64).
    pub cores: u32,
    /// Line size in bytes, the same for every level (power of two, 8..=512).
    pub line_size: u32,
    /// Coherence protocol among the private levels.
    #[serde(default)]
    pub coherence: Protocol,
    /// Seed for random replacement.
    #[serde(default)]
    pub seed: u64,
    /// Cache levels from the core outwards: private levels first, then shared ones.
    pub levels: Vec<LevelConfig>,
    /// Bandwidth model, when the analysis needs one.
    #[serde(default)]
    pub bandwidth: Option<BandwidthModel>,
}

/// Largest number of simulated cores (sharer sets are 64-bit masks).
pub const MAX_CORES: u32 = 64;

/// Largest capacity of one cache level. The simulator keeps about 40 bytes of state per line
/// (tags, replacement, classification), so 1 GiB of 64-byte lines costs under 1 GiB.
pub const MAX_LEVEL_BYTES: u64 = 1 << 30;

/// Largest machine model file read (presets are about 1 KiB).
const MAX_MODEL_BYTES: u64 = 1 << 20;

/// Largest number of lines the whole hierarchy may hold: every core's private levels plus the
/// shared ones (two 1 GiB levels of 64-byte lines; a model of 8-byte lines or many cores
/// reaches it with less). The per-line state of all of them stays within about 1.5 GB.
pub const MAX_TOTAL_LINES: u64 = 1 << 25;

/// Largest associativity: a lookup compares every way of a set, so the work per access grows
/// with it (16 M ways took minutes for 65 K accesses). 4096 ways make a 256 KiB level of
/// 64-byte lines fully associative.
pub const MAX_ASSOC: u32 = 4096;

const PRESETS: [(&str, &str); 2] = [
    ("ivybridge-4c", include_str!("../presets/ivybridge-4c.toml")),
    ("cachegrind", include_str!("../presets/cachegrind.toml")),
];

/// Names of the embedded presets (plus `host`).
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).chain(["host"]).collect()
}

impl MachineModel {
    /// Lines the whole hierarchy holds: each core's copy of the private levels and the
    /// shared ones (what a replay's memory grows with; at most [`MAX_TOTAL_LINES`]).
    pub fn total_lines(&self) -> u64 {
        self.levels
            .iter()
            .map(|l| {
                let copies = if l.shared { 1 } else { u64::from(self.cores) };
                l.lines(self.line_size).saturating_mul(copies)
            })
            .fold(0, u64::saturating_add)
    }

    /// Loads a preset by name or a TOML file by path.
    pub fn load(name_or_path: &str) -> Result<Self, ModelError> {
        if let Some((_, text)) = PRESETS.iter().find(|(n, _)| *n == name_or_path) {
            return Self::from_toml(text, name_or_path);
        }
        if name_or_path == "host" {
            return Self::host();
        }
        let path = Path::new(name_or_path);
        let err = |reason: String| ModelError {
            source_name: name_or_path.to_string(),
            field: "(file)".into(),
            reason,
        };
        // Read up to a bound: a device like /dev/zero would be read without end. Any kind of
        // file is read (a process substitution `<(…)` is a pipe).
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_MODEL_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| {
                err(format!(
                    "{e}; not a file, and not a preset ({})",
                    preset_names().join(", ")
                ))
            })?;
        if bytes.len() as u64 > MAX_MODEL_BYTES {
            return Err(err(format!(
                "more than {MAX_MODEL_BYTES} bytes; a machine model is a small TOML file"
            )));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            err(format!(
                "not UTF-8 text (the first bad byte is at offset {})",
                e.utf8_error().valid_up_to()
            ))
        })?;
        Self::from_toml(&text, name_or_path)
    }

    /// Parses and validates a TOML model.
    pub fn from_toml(text: &str, source_name: &str) -> Result<Self, ModelError> {
        let model: MachineModel = toml::from_str(text).map_err(|e| ModelError {
            source_name: source_name.to_string(),
            field: e
                .span()
                // Lines end with '\n': a key at the start of a line has only the lines before
                // it in `text[..start]`.
                .map(|s| format!("line {}", text[..s.start].matches('\n').count() + 1))
                .unwrap_or_else(|| "(toml)".into()),
            reason: e.message().to_string(),
        })?;
        model.validate(source_name)?;
        Ok(model)
    }

    /// The model as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    /// Index of the first shared level (= number of private levels).
    pub fn private_levels(&self) -> usize {
        self.levels.iter().take_while(|l| !l.shared).count()
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self, source_name: &str) -> Result<(), ModelError> {
        let bad = |field: String, reason: String| {
            Err(ModelError {
                source_name: source_name.to_string(),
                field,
                reason,
            })
        };
        // The name heads every report and names `BASE-calibrated` models.
        if self.name.trim().is_empty() {
            return bad("name".into(), "must not be empty".into());
        }
        if !(1..=MAX_CORES).contains(&self.cores) {
            return bad(
                "cores".into(),
                format!("must be 1..={MAX_CORES}, not {}", self.cores),
            );
        }
        if !self.line_size.is_power_of_two() || !(8..=512).contains(&self.line_size) {
            return bad(
                "line_size".into(),
                format!("must be a power of two in 8..=512, not {}", self.line_size),
            );
        }
        if self.levels.is_empty() {
            return bad("levels".into(), "at least one cache level is needed".into());
        }
        let mut seen_shared = false;
        for (i, l) in self.levels.iter().enumerate() {
            // By name, as `--set levels.L1.size=…` spells it (the name is checked first, and
            // its own errors name the level by index).
            let f = |field: &str| format!("levels.{}.{field}", l.name);
            if l.name.is_empty()
                || l.name.contains(['-', ' '])
                || l.name == "core"
                || l.name == "mem"
            {
                return bad(
                    format!("levels[{i}].name"),
                    format!(
                        "{:?}: use a short name like L1 (no '-', spaces, 'core' or 'mem')",
                        l.name
                    ),
                );
            }
            if self.levels[..i].iter().any(|o| o.name == l.name) {
                return bad(
                    format!("levels[{i}].name"),
                    format!("{:?} is used twice", l.name),
                );
            }
            if l.assoc == 0 || l.assoc > MAX_ASSOC {
                return bad(
                    f("assoc"),
                    format!("must be in 1..={MAX_ASSOC}, not {}", l.assoc),
                );
            }
            if l.size > MAX_LEVEL_BYTES {
                return bad(
                    f("size"),
                    format!(
                        "{} bytes exceeds the simulator's limit of 1 GiB per level",
                        l.size
                    ),
                );
            }
            if l.size == 0 || l.size % self.line_size as u64 != 0 {
                return bad(
                    f("size"),
                    format!(
                        "{} is not a positive multiple of the line size {}",
                        l.size, self.line_size
                    ),
                );
            }
            let lines = l.lines(self.line_size);
            if lines % l.assoc as u64 != 0 {
                return bad(
                    f("assoc"),
                    format!(
                        "{lines} lines cannot be split into sets of {} ways",
                        l.assoc
                    ),
                );
            }
            if l.replacement == Replacement::Plru && (!l.assoc.is_power_of_two() || l.assoc > 64) {
                return bad(
                    f("replacement"),
                    format!(
                        "tree PLRU needs a power-of-two associativity ≤ 64, not {}",
                        l.assoc
                    ),
                );
            }
            if l.shared {
                seen_shared = true;
            } else if seen_shared {
                return bad(
                    f("shared"),
                    "a private level cannot come after a shared one".into(),
                );
            }
            if i == 0 && l.inclusion != Inclusion::NonInclusive {
                return bad(
                    f("inclusion"),
                    "the first level has no level above it; use non-inclusive".into(),
                );
            }
            if l.inclusion == Inclusion::Exclusive && l.write == WritePolicy::Through {
                return bad(
                    f("write"),
                    "an exclusive (victim) level must be write-back".into(),
                );
            }
        }
        let total_lines = self.total_lines();
        if total_lines > MAX_TOTAL_LINES {
            return bad(
                "levels".into(),
                format!(
                    "the hierarchy holds {total_lines} lines in all ({} cores' private levels \
                     and the shared ones, of {} bytes); the simulator's limit is \
                     {MAX_TOTAL_LINES}: fewer cores, smaller levels or longer lines",
                    self.cores, self.line_size
                ),
            );
        }
        if let Some(bw) = &self.bandwidth {
            // Positive, and within bounds no machine comes near, so that no estimate
            // overflows to infinity or rounds to zero (a limit of 1e-300 GB/s made the
            // estimates 1e293 s).
            let plausible = |name: String, v: f64, (lo, hi): (f64, f64), unit: &str| {
                if !(v.is_finite() && v > 0.0) {
                    return bad(name, format!("must be a positive finite number, not {v}"));
                }
                if !(lo..=hi).contains(&v) {
                    return bad(name, format!("{v:e} is outside {lo:e}..={hi:e}{unit}"));
                }
                Ok(())
            };
            plausible("bandwidth.ghz".into(), bw.ghz, (1e-3, 1e3), " GHz")?;
            plausible("bandwidth.ipc".into(), bw.ipc, (1e-3, 1e3), "")?;
            for (name, v, range, unit) in [
                (
                    "bandwidth.flops_per_cycle",
                    bw.flops_per_cycle,
                    (1e-3, 1e4),
                    "",
                ),
                (
                    "bandwidth.page_fault_ns",
                    bw.page_fault_ns,
                    (1e-3, 1e9),
                    " ns",
                ),
                ("bandwidth.barrier_ns", bw.barrier_ns, (1e-3, 1e9), " ns"),
                ("bandwidth.region_ns", bw.region_ns, (1e-3, 1e9), " ns"),
                ("bandwidth.ipc_total", bw.ipc_total, (1e-3, 1e4), ""),
                (
                    "bandwidth.false_sharing_penalty_cycles",
                    bw.false_sharing_penalty_cycles,
                    (1e-6, 1e9),
                    " cycles",
                ),
            ] {
                if let Some(v) = v {
                    plausible(name.into(), v, range, unit)?;
                }
            }
            let known = self.path_names();
            for (name, limit) in &bw.paths {
                if !known.contains(name) {
                    return bad(
                        format!("bandwidth.paths.{name}"),
                        format!("no such path; this hierarchy has {}", known.join(", ")),
                    );
                }
                for (field, v) in [
                    ("read_gbs", limit.read_gbs),
                    ("write_gbs", limit.write_gbs),
                    ("total_read_gbs", limit.total_read_gbs),
                    ("total_write_gbs", limit.total_write_gbs),
                    ("combined_gbs", limit.combined_gbs),
                    ("total_combined_gbs", limit.total_combined_gbs),
                ] {
                    if let Some(v) = v {
                        plausible(
                            format!("bandwidth.paths.{name}.{field}"),
                            v,
                            (1e-3, 1e6),
                            " GB/s",
                        )?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Names of the data paths: `core-L1`, one per adjacent level pair, `<last>-mem`, and the
    /// cache-to-cache path `<last private>-<last private>` when there are private levels.
    pub fn path_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        let mut upper = "core".to_string();
        for l in &self.levels {
            names.push(format!("{upper}-{}", l.name));
            upper = l.name.clone();
        }
        names.push(format!("{upper}-mem"));
        if let Some(p) = self.levels.iter().take_while(|l| !l.shared).last() {
            names.push(format!("{0}-{0}", p.name));
        }
        names
    }

    /// Applies `key=value` overrides, e.g. `cores=2`, `levels.L1.size=64K`,
    /// `levels.0.assoc=4`, `coherence=mesi`, then validates again.
    pub fn apply_overrides(
        &mut self,
        overrides: &[String],
        source_name: &str,
    ) -> Result<(), ModelError> {
        let mut value = toml::Value::try_from(&*self).map_err(|e| ModelError {
            source_name: source_name.into(),
            field: "(model)".into(),
            reason: e.to_string(),
        })?;
        for o in overrides {
            let bad = |reason: String| ModelError {
                source_name: source_name.into(),
                field: o.clone(),
                reason,
            };
            let (key, raw) = o
                .split_once('=')
                .ok_or_else(|| bad("an override is KEY=VALUE".into()))?;
            let mut slot = &mut value;
            let parts: Vec<&str> = key.trim().split('.').collect();
            for (depth, part) in parts.iter().enumerate() {
                slot = match slot {
                    toml::Value::Table(t) => {
                        let last = depth + 1 == parts.len();
                        // A path's limits may be set where the model has none yet (a path
                        // another override creates, or a model without a bandwidth section).
                        let new_limits = match depth {
                            0 => *part == "bandwidth",
                            1 => parts[0] == "bandwidth" && *part == "paths",
                            2 => parts[..2] == ["bandwidth", "paths"],
                            _ => false,
                        };
                        if !t.contains_key(*part) && !last && new_limits {
                            t.insert(part.to_string(), toml::Value::Table(Default::default()));
                        }
                        if !t.contains_key(*part) && !last {
                            let level = self.levels.iter().any(|l| l.name == *part);
                            return Err(bad(if depth == 0 && level {
                                format!(
                                    "no field {part:?}; a level's fields are levels.{part}.FIELD"
                                )
                            } else {
                                let fields: Vec<&str> = t.keys().map(String::as_str).collect();
                                format!("no field {part:?} (fields here: {})", fields.join(", "))
                            }));
                        }
                        t.entry(part.to_string()).or_insert(toml::Value::Integer(0))
                    }
                    toml::Value::Array(a) => {
                        let idx = part.parse::<usize>().ok().or_else(|| {
                            a.iter()
                                .position(|l| l.get("name").and_then(|n| n.as_str()) == Some(part))
                        });
                        match idx.and_then(|i| a.get_mut(i)) {
                            Some(v) => v,
                            None => return Err(bad(format!("no level {part:?}"))),
                        }
                    }
                    _ => return Err(bad(format!("{part:?} is not inside a table"))),
                };
            }
            let raw = raw.trim();
            // Digits only, yet no i64: a float would silently stand for it.
            if !raw.is_empty()
                && raw.bytes().all(|b| b.is_ascii_digit())
                && raw.parse::<i64>().is_err()
            {
                return Err(bad(format!("{raw} is too large for an integer setting")));
            }
            *slot = raw
                .parse::<i64>()
                .map(toml::Value::Integer)
                .or_else(|_| raw.parse::<f64>().map(toml::Value::Float))
                .or_else(|_| raw.parse::<bool>().map(toml::Value::Boolean))
                .unwrap_or_else(|_| toml::Value::String(raw.to_string()));
            // Checked one override at a time, so that a value of the wrong type is reported
            // with the override that set it (the text below is generated, its line numbers
            // mean nothing to the user).
            if let Err(e) = value.clone().try_into::<MachineModel>() {
                return Err(bad(e.message().trim().to_string()));
            }
        }
        let before: Vec<&str> = self.levels.iter().map(|l| l.name.as_str()).collect();
        carry_or_drop_stale_paths(&mut value, &before, overrides, source_name);
        let text = toml::to_string(&value).map_err(|e| ModelError {
            source_name: source_name.into(),
            field: "(overrides)".into(),
            reason: e.to_string(),
        })?;
        *self = Self::from_toml(&text, &format!("{source_name} with overrides"))?;
        Ok(())
    }

    /// The machine this process runs on, from /sys/devices/system/cpu/cpu0/cache: private
    /// data/unified levels, shared levels by `shared_cpu_list`.
    pub fn host() -> Result<Self, ModelError> {
        let err = |reason: String| ModelError {
            source_name: "host".into(),
            field: "/sys/devices/system/cpu/cpu0/cache".into(),
            reason,
        };
        let base = Path::new("/sys/devices/system/cpu/cpu0/cache");
        let read = |p: &Path| std::fs::read_to_string(p).map(|s| s.trim().to_string());
        let mut found = Vec::new();
        let entries = std::fs::read_dir(base).map_err(|e| err(e.to_string()))?;
        for entry in entries.flatten() {
            let dir = entry.path();
            if !dir
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("index"))
            {
                continue;
            }
            let get = |f: &str| {
                read(&dir.join(f)).map_err(|e| err(format!("{}/{f}: {e}", dir.display())))
            };
            let kind = get("type")?;
            if kind == "Instruction" {
                continue;
            }
            let level: u32 = get("level")?.parse().map_err(|_| err("bad level".into()))?;
            let size = parse_size(&get("size")?).map_err(err)?;
            let assoc: u32 = get("ways_of_associativity")?.parse().unwrap_or(1);
            let line: u32 = get("coherency_line_size")?.parse().unwrap_or(64);
            let shared_list = get("shared_cpu_list").unwrap_or_default();
            let shared = shared_list.contains(['-', ',']);
            found.push((level, size, assoc.max(1), line, shared));
        }
        found.sort_by_key(|f| f.0);
        if found.is_empty() {
            return Err(err("no cache levels found".into()));
        }
        let line_size = found[0].3;
        let cores = std::thread::available_parallelism()
            .map_or(1, |n| n.get() as u32)
            .min(MAX_CORES);
        let model = MachineModel {
            name: "host".into(),
            cores,
            line_size,
            coherence: Protocol::Mesi,
            seed: 0,
            levels: found
                .iter()
                .map(|&(level, size, assoc, _, shared)| LevelConfig {
                    name: format!("L{level}"),
                    size,
                    assoc,
                    replacement: Replacement::Lru,
                    write: WritePolicy::Back,
                    inclusion: Inclusion::NonInclusive,
                    shared,
                    latency: 0,
                })
                .collect(),
            bandwidth: None,
        };
        model.validate("host")?;
        Ok(model)
    }
}

impl fmt::Display for MachineModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} cores, {} B lines, {:?}",
            self.name, self.cores, self.line_size, self.coherence
        )?;
        for l in &self.levels {
            write!(
                f,
                "; {} {} KiB {}-way {}{:?}",
                l.name,
                l.size / 1024,
                l.assoc,
                if l.shared { "shared " } else { "" },
                l.replacement
            )?;
            // Policies other than the defaults (write-back, non-inclusive), which change
            // what the counts mean.
            if l.write == WritePolicy::Through {
                f.write_str(" write-through")?;
            }
            match l.inclusion {
                Inclusion::NonInclusive => {}
                Inclusion::Inclusive => f.write_str(" inclusive")?,
                Inclusion::Exclusive => f.write_str(" exclusive")?,
            }
        }
        Ok(())
    }
}

/// Carries the base model's limits over to renamed levels (`levels.L2.name=LLC`: `L1-L2`
/// becomes `L1-LLC`) and drops those of data paths that the overridden hierarchy no longer has
/// (`levels.L2.shared=false` on a preset: its `L1-L1` path becomes `L2-L2`), with a warning;
/// a limit an override sets itself is kept, and validation names it if its path is unknown.
/// `before`: the base model's level names.
fn carry_or_drop_stale_paths(
    value: &mut toml::Value,
    before: &[&str],
    overrides: &[String],
    source_name: &str,
) {
    let Ok(model) = value.clone().try_into::<MachineModel>() else {
        return;
    };
    let known = model.path_names();
    // Level i's name before and after, where the overrides renamed it (and kept the count).
    let renamed: Vec<(&str, &str)> = if before.len() == model.levels.len() {
        before
            .iter()
            .zip(&model.levels)
            .filter(|(old, new)| **old != new.name)
            .map(|(old, new)| (*old, new.name.as_str()))
            .collect()
    } else {
        Vec::new()
    };
    let rename = |path: &str| -> Option<String> {
        let (upper, lower) = path.split_once('-')?;
        let map = |end: &str| {
            renamed
                .iter()
                .find(|(old, _)| *old == end)
                .map_or(end.to_string(), |(_, new)| new.to_string())
        };
        let moved = format!("{}-{}", map(upper), map(lower));
        (moved != path && known.contains(&moved)).then_some(moved)
    };
    let set_here = |name: &str| {
        overrides.iter().any(|o| {
            o.split_once('=')
                .map_or(o.as_str(), |(k, _)| k)
                .trim()
                .strip_prefix("bandwidth.paths.")
                .is_some_and(|rest| rest == name || rest.starts_with(&format!("{name}.")))
        })
    };
    let Some(paths) = value
        .get_mut("bandwidth")
        .and_then(|b| b.get_mut("paths"))
        .and_then(toml::Value::as_table_mut)
    else {
        return;
    };
    let stale: Vec<String> = paths
        .keys()
        .filter(|name| !known.contains(name) && !set_here(name))
        .cloned()
        .collect();
    let mut dropped = Vec::new();
    for name in stale {
        let Some(limits) = paths.remove(&name) else {
            continue;
        };
        match rename(&name) {
            // What an override sets for the new name wins over the carried value.
            Some(moved) => {
                let merged = match (limits, paths.remove(&moved)) {
                    (toml::Value::Table(mut carried), Some(toml::Value::Table(set))) => {
                        carried.extend(set);
                        toml::Value::Table(carried)
                    }
                    (carried, _) => carried,
                };
                paths.insert(moved, merged);
            }
            None => dropped.push(name),
        }
    }
    if !dropped.is_empty() {
        tracing::warn!(
            "{source_name}: the overrides leave no data path {}; its bandwidth limits are \
             dropped (this hierarchy has {})",
            dropped.join(", "),
            known.join(", ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_load() {
        for name in preset_names() {
            if name == "host" && !Path::new("/sys/devices/system/cpu/cpu0/cache").exists() {
                continue;
            }
            let m = MachineModel::load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!m.levels.is_empty());
        }
        let ivb = MachineModel::load("ivybridge-4c").unwrap();
        assert_eq!((ivb.cores, ivb.line_size), (4, 64));
        assert_eq!(ivb.levels[0].size, 32 << 10);
        assert_eq!(ivb.levels[1].sets(64), 4096);
    }

    #[test]
    fn errors_name_the_field() {
        let base = include_str!("../presets/ivybridge-4c.toml");
        let e = MachineModel::from_toml(&base.replace("assoc = 12", "assoc = 7"), "t").unwrap_err();
        assert_eq!(e.field, "levels.L2.assoc");
        let e = MachineModel::from_toml(&base.replace("line_size = 64", "line_size = 48"), "t")
            .unwrap_err();
        assert_eq!(e.field, "line_size");
        let e = MachineModel::from_toml(&base.replace("cores = 4", "cores = 0"), "t").unwrap_err();
        assert_eq!(e.field, "cores");
        let e = MachineModel::from_toml(
            &base.replace("replacement = \"lru\"", "replacement = \"mru\""),
            "t",
        )
        .unwrap_err();
        assert!(e.reason.contains("mru"), "{e}");
        assert!(e.field.starts_with("line "), "{e}");
        // The line of an unknown key that starts a line, and of one on the first line.
        let line_of = |key: &str| base.lines().position(|l| l.starts_with(key)).unwrap() + 1;
        let e = MachineModel::from_toml(&base.replace("cores = 4", "coress = 4"), "t").unwrap_err();
        assert_eq!(e.field, format!("line {}", line_of("cores = 4")), "{e}");
        let e = MachineModel::from_toml(&format!("colour = 1\n{base}"), "t").unwrap_err();
        assert_eq!(e.field, "line 1", "{e}");
        let e = MachineModel::from_toml(&base.replacen("assoc = 8", "associativity = 8", 1), "t")
            .unwrap_err();
        assert_eq!(e.field, format!("line {}", line_of("assoc = 8")), "{e}");
    }

    #[test]
    fn non_power_of_two_sets_are_fine() {
        let base = include_str!("../presets/ivybridge-4c.toml");
        let m = MachineModel::from_toml(&base.replace("size = \"3M\"", "size = \"2880K\""), "t")
            .unwrap();
        assert_eq!(m.levels[1].sets(64), 3840);
    }

    #[test]
    fn models_whose_state_or_lookups_would_not_fit_are_refused() {
        let base = MachineModel::load("ivybridge-4c").unwrap();
        let refused = |sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            base.clone().apply_overrides(&sets, "t").unwrap_err()
        };
        // 64 cores with a private 1 GiB level: 2^30 lines, which took 4.8 GB and aborted.
        let e = refused(&["cores=64", "levels.L1.size=1G"]);
        assert_eq!(e.field, "levels", "{e}");
        assert!(e.reason.contains("lines in all (64 cores"), "{e}");
        // 8-byte lines: one 1 GiB level is 2^27 lines.
        let e = refused(&["line_size=8", "levels.L2.size=1G", "levels.L2.assoc=16"]);
        assert_eq!(e.field, "levels", "{e}");
        // 16 M ways: minutes per few thousand accesses.
        let e = refused(&["levels.L2.size=1G", "levels.L2.assoc=16777216"]);
        assert_eq!(e.field, "levels.L2.assoc", "{e}");
        // At the limits, accepted.
        let mut m = base.clone();
        m.apply_overrides(
            &[
                "cores=1".into(),
                "levels.L1.size=1G".into(),
                "levels.L1.assoc=4096".into(),
            ],
            "t",
        )
        .unwrap();
    }

    #[test]
    fn overrides_that_change_the_paths_keep_the_limits_that_still_apply() {
        let base = MachineModel::load("ivybridge-4c").unwrap();
        let limits = |m: &MachineModel| -> Vec<String> {
            m.bandwidth
                .as_ref()
                .map(|b| b.paths.keys().cloned().collect())
                .unwrap_or_default()
        };
        assert!(limits(&base).contains(&"L1-L1".to_string()));
        // A private L2: the preset's L1-L1 limits have no path any more and go; the others stay.
        let mut m = base.clone();
        m.apply_overrides(&["levels.L2.shared=false".into()], "t")
            .unwrap();
        assert!(!m.levels[1].shared);
        let kept = limits(&m);
        assert!(!kept.contains(&"L1-L1".to_string()), "{kept:?}");
        assert!(kept.contains(&"L1-L2".to_string()), "{kept:?}");
        // Limits for the new path can be set in the same run, though the preset has none.
        let mut m = base.clone();
        m.apply_overrides(
            &[
                "levels.L2.shared=false".into(),
                "bandwidth.paths.L2-L2.read_gbs=5".into(),
            ],
            "t",
        )
        .unwrap();
        assert!(limits(&m).contains(&"L2-L2".to_string()));
        // A limit set for a path the hierarchy does not have is still an error.
        let e = base
            .clone()
            .apply_overrides(&["bandwidth.paths.L9-L9.read_gbs=5".into()], "t")
            .unwrap_err();
        assert!(e.reason.contains("no such path"), "{e}");
    }

    #[test]
    fn a_renamed_level_keeps_its_paths_limits() {
        let base = MachineModel::load("ivybridge-4c").unwrap();
        let b = base.bandwidth.as_ref().unwrap();
        let (l1_l2, l2_mem) = (b.paths["L1-L2"].clone(), b.paths["L2-mem"].clone());
        let mut m = base.clone();
        m.apply_overrides(
            &[
                "levels.L2.name=LLC".into(),
                "bandwidth.paths.LLC-mem.read_gbs=7".into(),
            ],
            "t",
        )
        .unwrap();
        let paths = &m.bandwidth.as_ref().unwrap().paths;
        let names: Vec<&String> = paths.keys().collect();
        assert!(!names.iter().any(|n| n.contains("L2")), "{names:?}");
        assert_eq!(paths["L1-LLC"], l1_l2);
        // The override's value wins; the preset's other limits of that path are carried.
        assert_eq!(paths["LLC-mem"].read_gbs, Some(7.0));
        assert_eq!(paths["LLC-mem"].write_gbs, l2_mem.write_gbs);
        assert_eq!(paths["LLC-mem"].total_read_gbs, l2_mem.total_read_gbs);
    }

    #[test]
    fn an_empty_name_or_an_integer_too_large_is_refused() {
        let base = MachineModel::load("ivybridge-4c").unwrap();
        let e = base
            .clone()
            .apply_overrides(&["name=".into()], "t")
            .unwrap_err();
        assert_eq!(e.field, "name", "{e}");
        let e = base
            .clone()
            .apply_overrides(&["levels.L1.size=18446744073709551616".into()], "t")
            .unwrap_err();
        assert!(e.reason.contains("too large for an integer"), "{e}");
    }

    #[test]
    fn overrides() {
        let mut m = MachineModel::load("ivybridge-4c").unwrap();
        m.apply_overrides(
            &[
                "levels.L1.size=64K".into(),
                "cores=2".into(),
                "coherence=mesi".into(),
            ],
            "t",
        )
        .unwrap();
        assert_eq!(
            (m.levels[0].size, m.cores, m.coherence),
            (64 << 10, 2, Protocol::Mesi)
        );
        let e = m
            .apply_overrides(&["levels.L9.size=1".into()], "t")
            .unwrap_err();
        assert!(e.reason.contains("L9"), "{e}");
        let e = m
            .apply_overrides(&["levels.L1.assoc=0".into()], "t")
            .unwrap_err();
        assert_eq!(e.field, "levels.L1.assoc");
        // A level named at the top, or an unknown field inside a table: the message says
        // where the fields are.
        let e = m.apply_overrides(&["L1.size=1".into()], "t").unwrap_err();
        assert!(e.reason.contains("levels.L1.FIELD"), "{e}");
        let e = m
            .apply_overrides(&["levels.L1.bogus.x=1".into()], "t")
            .unwrap_err();
        assert!(e.reason.contains("fields here: assoc,"), "{e}");
    }
}
