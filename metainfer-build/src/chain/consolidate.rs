//! Consolidate: turn a verified candidate into the files of a cache entry — `gates.toml` with
//! what every gate measured, and `transcript.jsonl`, the trace of the chain (for the ckb
//! implementer: the plan, the realization chosen for each slot, review and verify results).
//! Nothing here holds a timestamp or an absolute path, so regenerating an entry gives the same
//! bytes.

use super::implement::SlotCode;
use super::plan::Plan;
use super::review::Problem;
use super::verify::{GateResult, Verdict};
use serde::Serialize;

#[derive(Serialize)]
struct GatesFile<'a> {
    passed: bool,
    gate: &'a [GateResult],
}

/// `gates.toml`: the verdict of every gate, with the numbers it measured.
pub fn gates_toml(v: &Verdict) -> String {
    let body = toml::to_string(&GatesFile { passed: v.passed, gate: &v.gates }).unwrap_or_default();
    format!("# Gates run by metainfer-build's verifier on engine.rs: status and measured numbers.\n{body}")
}

/// `transcript.jsonl`: one JSON object per step.
pub fn transcript(plan: &Plan, codes: &[SlotCode], problems: &[Problem], v: &Verdict) -> String {
    let mut lines = Vec::new();
    lines.push(serde_json::json!({
        "step": "plan",
        "model": plan.family.family,
        "preset": plan.preset.as_ref().map(|p| p.name.clone()),
        "target": plan.target.id,
        "quant": plan.quant,
        "tensor_types": plan.tensor_types.iter().map(|t| t.id.clone()).collect::<Vec<_>>(),
        "slots": plan.slots.iter().map(|s| serde_json::json!({"slot": s.id, "contract": s.contract, "variants": s.variants})).collect::<Vec<_>>(),
    }));
    for c in codes {
        lines.push(serde_json::json!({
            "step": "implement",
            "slot": c.slot,
            "implementer": c.implementer,
            "realization": c.realization,
            "lines": c.code.lines().count(),
            "blake3": blake3::hash(c.code.as_bytes()).to_hex().to_string(),
        }));
    }
    lines.push(serde_json::json!({
        "step": "review",
        "problems": problems.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
    }));
    lines.push(serde_json::json!({
        "step": "verify",
        "passed": v.passed,
        "gates": v.gates.iter().map(|g| serde_json::json!({"id": g.id, "status": g.status})).collect::<Vec<_>>(),
    }));
    let mut out = String::new();
    for l in lines {
        out.push_str(&l.to_string());
        out.push('\n');
    }
    out
}
