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
    let body = toml::to_string(&GatesFile {
        passed: v.passed,
        gate: &v.gates,
    })
    .unwrap_or_default();
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
    lines.iter().map(json_line).collect()
}

/// One transcript line: `v` as compact JSON with every object's keys sorted, then a newline.
/// Sorted explicitly because serde_json's map order is a cargo feature (`preserve_order`, which
/// metainfer-rt turns on): a build of metainfer-build beside the runtime (the workspace's tests)
/// and one without it (the CLI, a user's proc macro) must write the same bytes, or a regenerated
/// entry's hash would depend on how the tool was built.
pub fn json_line(v: &serde_json::Value) -> String {
    fn write(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::from(k.as_str()).to_string());
                    out.push(':');
                    write(&m[k], out);
                }
                out.push('}');
            }
            serde_json::Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(x, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out.push('\n');
    out
}

/// What an LLM section went through before it became a proposal.
pub struct Evidence<'a> {
    pub rounds: u32,
    pub model: Option<&'a str>,
    pub request_ids: &'a [String],
    /// The whole engine's verdict (every gate), which the section is part of.
    pub verdict: &'a Verdict,
}

/// `ckb/proposals/<contract>/<variant>-<hash>/proposal.toml`: an LLM realization that passed
/// every gate of an engine, awaiting `cargo metainfer ckb adopt`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Proposal {
    pub contract: String,
    pub contract_version: u32,
    /// The variant it becomes when adopted (`realizations/<contract>/<variant>.rs`).
    pub variant: String,
    /// The target it was verified on, and the instruction sets it may use.
    pub target: String,
    pub isa: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    #[serde(default)]
    pub entry_unsafe: bool,
    /// The engine (cache key) whose gates it passed.
    pub engine_key: String,
    pub implementer: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub rounds: u32,
    #[serde(default)]
    pub request_ids: Vec<String>,
    /// blake3 of `realization.rs`.
    pub blake3: String,
    /// The gates of its contract, as the verifier left them.
    pub gate: Vec<GateResult>,
}

/// Writes the proposal for LLM `code` in `slot` (atomically: a temp dir, then a rename);
/// returns its directory. An identical proposal already there is left as it is.
pub fn write_proposal(
    ckb: &crate::ckb::Ckb,
    plan: &Plan,
    slot: &super::plan::Slot,
    code: &SlotCode,
    ev: &Evidence<'_>,
) -> std::io::Result<std::path::PathBuf> {
    let contract = slot.contract.clone().unwrap_or_else(|| slot.id.clone());
    let variant = slot
        .variants
        .first()
        .cloned()
        .unwrap_or_else(|| "llm".into());
    let hash = blake3::hash(code.code.as_bytes()).to_hex().to_string();
    let parent = ckb.root.join("proposals").join(&contract);
    let dir = parent.join(format!("{variant}-{}", &hash[..12]));
    if dir.join("proposal.toml").exists() {
        return Ok(dir);
    }
    let gates: Vec<String> = ckb
        .contracts
        .get(&contract)
        .map(|c| c.gates.clone())
        .unwrap_or_default();
    let p = Proposal {
        contract: contract.clone(),
        contract_version: slot.version,
        variant,
        target: plan.target.id.clone(),
        isa: plan.target.features.clone(),
        entry: slot.entry.as_ref().map(|e| e.0.clone()),
        entry_unsafe: slot.entry.as_ref().is_some_and(|e| e.1),
        engine_key: plan.key.clone(),
        implementer: code.implementer.clone(),
        model: ev.model.map(String::from),
        rounds: ev.rounds,
        request_ids: ev.request_ids.to_vec(),
        blake3: hash.clone(),
        gate: ev
            .verdict
            .gates
            .iter()
            .filter(|g| gates.contains(&g.id))
            .cloned()
            .collect(),
    };
    std::fs::create_dir_all(&parent)?;
    let tmp = parent.join(format!(".tmp-{}-{}", &hash[..12], std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    let header = format!(
        "# A realization of `{contract}` written by the llm implementer; it passed every gate of engine {}.\n# Adopt it with `cargo metainfer ckb adopt {}/{}`.\n",
        plan.key,
        contract,
        dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()
    );
    let body = toml::to_string(&p).map_err(std::io::Error::other)?;
    std::fs::write(tmp.join("realization.rs"), &code.code)?;
    std::fs::write(tmp.join("proposal.toml"), format!("{header}{body}"))?;
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => Ok(dir),
        Err(_) if dir.join("proposal.toml").exists() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(dir)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn transcript_lines_sort_keys_at_every_level_whatever_the_map_order() {
        let v = serde_json::json!({"step": "plan", "b": [{"z": 1, "a": null}], "a": "x\"y"});
        assert_eq!(
            super::json_line(&v),
            "{\"a\":\"x\\\"y\",\"b\":[{\"a\":null,\"z\":1}],\"step\":\"plan\"}\n"
        );
    }
}
