//! SARIF 2.1.0 output of the false-sharing audit, in the shape GitHub code scanning accepts:
//! stable rule ids with descriptions, repo-relative `artifactLocation.uri` against
//! `%SRCROOT%`, `region.startLine`, the other thread's access as a related location, and
//! `partialFingerprints` that do not depend on addresses.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{json, Value};

use crate::audit::{AuditReport, Finding, FindingKind, Site};
use crate::symbols::{file_uri, relative_path};

/// Rule id of recorded false sharing.
pub const RULE_FALSE_SHARING: &str = "CS0001";
/// Rule id of latent false sharing (only under a predicted layout).
pub const RULE_LATENT: &str = "CS0002";

fn rules() -> Value {
    json!([
        {
            "id": RULE_FALSE_SHARING,
            "name": "FalseSharing",
            "shortDescription": { "text": "Threads write disjoint data in the same cache line" },
            "fullDescription": { "text": "Two or more threads access different bytes of the same cache lines and at least one writes, so the line moves between their caches although no data is exchanged (false sharing). Estimated by cachescope from the recorded accesses (worst-case Pluto estimate minus possible data exchanges) per barrier segment." },
            "help": { "text": "Give each thread's data its own cache line: pad per-thread elements to the line size or align them (alignas(64)), or hand out larger contiguous chunks per thread (e.g. a bigger OpenMP schedule chunk).", "markdown": "Give each thread's data its own cache line: pad per-thread elements to the line size or align them (`alignas(64)`), or hand out larger contiguous chunks per thread (e.g. a bigger OpenMP `schedule` chunk)." },
            "defaultConfiguration": { "level": "error" },
            "properties": { "tags": ["performance", "concurrency", "false-sharing"], "precision": "medium" }
        },
        {
            "id": RULE_LATENT,
            "name": "LatentFalseSharing",
            "shortDescription": { "text": "False sharing under another cache-line size or alignment" },
            "fullDescription": { "text": "With the recorded placement and line size the threads' data lies in different cache lines, but with another line size (e.g. 128 bytes) or with the object placed at another offset within a line, the same accesses would falsely share lines. The recorded layout happens to hide the problem." },
            "help": { "text": "Align the object to the cache-line size (alignas(64) or posix_memalign) and pad per-thread parts to a full line, so the layout does not depend on where the object lands." },
            "defaultConfiguration": { "level": "warning" },
            "properties": { "tags": ["performance", "concurrency", "false-sharing"], "precision": "low" }
        }
    ])
}

/// A SARIF log and the source files it could not place under the repository root.
#[derive(Debug, Clone)]
pub struct SarifLog {
    /// The log.
    pub sarif: Value,
    /// Absolute source paths outside the root, named by absolute `file://` URIs instead (code
    /// scanning cannot show them in the repository; the caller should say so).
    pub outside_root: BTreeSet<String>,
}

/// The location of `site`: repo-relative against `%SRCROOT%`, or an absolute `file://` URI
/// for a source outside the root (a result without any location makes GitHub reject the
/// whole upload, so the location is kept and the file reported in `outside`).
fn location(site: &Site, root: &Path, outside: &mut BTreeSet<String>) -> Option<Value> {
    source_location(site.file.as_deref()?, site.line?, root, outside)
}

/// The location of line `line` of `file` (see [`location`]).
fn source_location(
    file: &str,
    line: u32,
    root: &Path,
    outside: &mut BTreeSet<String>,
) -> Option<Value> {
    if line == 0 {
        return None;
    }
    let artifact = match relative_path(file, root) {
        Some(uri) => json!({ "uri": uri, "uriBaseId": "%SRCROOT%" }),
        None => {
            let uri = file_uri(Path::new(file), false)?;
            outside.insert(file.to_owned());
            json!({ "uri": uri })
        }
    };
    Some(json!({
        "physicalLocation": {
            "artifactLocation": artifact,
            "region": { "startLine": line }
        }
    }))
}

fn result(report: &AuditReport, f: &Finding, root: &Path, outside: &mut BTreeSet<String>) -> Value {
    let (rule, index) = match f.kind {
        FindingKind::FalseSharing => (RULE_FALSE_SHARING, 0),
        FindingKind::LatentFalseSharing => (RULE_LATENT, 1),
    };
    let level = if f.baselined {
        // Accepted by the baseline: still listed, as a note.
        "note"
    } else if report.finding_fails(f) {
        "error"
    } else {
        "warning"
    };
    let mut text = format!(
        "{} on '{}': about {} false-sharing events on {} cache line(s) of {} bytes, threads {:?}, estimated cost {:.2}% of a thread's time.",
        if f.kind == FindingKind::FalseSharing { "False sharing" } else { "Latent false sharing" },
        f.object.name,
        f.events,
        f.lines,
        f.layout.line_size,
        f.threads,
        f.time_share * 100.0
    );
    if f.layout.shift > 0 {
        text.push_str(&format!(
            " (with the data shifted by {} bytes)",
            f.layout.shift
        ));
    }
    if !f.line_parts.is_empty() {
        text.push_str(&format!(
            " On {}: {}.",
            if f.lines > 1 {
                "its busiest line"
            } else {
                "the line"
            },
            crate::audit::describe_line_parts(&f.line_parts)
        ));
    }
    text.push(' ');
    text.push_str(&f.suggestion);
    let mut locations = Vec::new();
    let mut related = Vec::new();
    if let Some(w) = f.writer.as_ref().and_then(|w| location(w, root, outside)) {
        locations.push(w);
    }
    if let Some(v) = &f.victim {
        if let Some(mut loc) = location(v, root, outside) {
            loc["id"] = json!(1);
            loc["message"] = json!({
                "text": format!("thread {} {} here", v.thread, if v.store { "writes" } else { "reads" })
            });
            if locations.is_empty() {
                locations.push(json!({ "physicalLocation": loc["physicalLocation"].clone() }));
            } else {
                related.push(loc);
            }
        }
    }
    let object_line = [(&f.allocated_at, "allocated"), (&f.declared_at, "declared")]
        .into_iter()
        .find_map(|(at, what)| Some((at.as_ref()?, what)));
    if let Some((a, what)) = object_line {
        if let Some(mut loc) = source_location(&a.file, a.line, root, outside) {
            loc["id"] = json!(2);
            loc["message"] = json!({
                "text": format!("'{}' is {what} here", f.object.name)
            });
            // Neither access has a line (code without DWARF lines): the object's own line
            // still gives the result a location, which code scanning needs.
            if locations.is_empty() {
                locations.push(json!({ "physicalLocation": loc["physicalLocation"].clone() }));
            }
            related.push(loc);
        }
    }
    let mut r = json!({
        "ruleId": rule,
        "ruleIndex": index,
        "level": level,
        "message": { "text": text },
        "locations": locations,
        "partialFingerprints": { "cachescopeFinding/v3": f.fingerprint },
        "properties": {
            "object": f.object.name,
            "objectKind": f.object.kind,
            "events": f.events,
            "threads": f.threads,
            "lineSize": f.layout.line_size,
            "shift": f.layout.shift,
            "timeShare": f.time_share,
            // Every part of the busiest line (the message shows up to four per thread).
            "lineParts": f.line_parts
        }
    });
    if !related.is_empty() {
        r["relatedLocations"] = json!(related);
    }
    r
}

/// The SARIF log of `report`; source paths are made relative to `repo_root` (absolute).
pub fn to_sarif(report: &AuditReport, repo_root: &Path, version: &str) -> SarifLog {
    let mut outside = BTreeSet::new();
    let results: Vec<Value> = report
        .findings
        .iter()
        .map(|f| result(report, f, repo_root, &mut outside))
        .collect();
    let mut run = json!({
        "tool": {
            "driver": {
                "name": "cachescope",
                "version": version,
                "rules": rules()
            }
        },
        "results": results
    });
    if let Some(root_uri) = file_uri(repo_root, true) {
        run["originalUriBaseIds"] = json!({ "%SRCROOT%": { "uri": root_uri } });
    }
    SarifLog {
        sarif: json!({
            "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
            "version": "2.1.0",
            "runs": [run]
        }),
        outside_root: outside,
    }
}
