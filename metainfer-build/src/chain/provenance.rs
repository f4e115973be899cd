//! What a cache entry's origin can prove beyond its manifest's hashes (which whoever edits a
//! file can recompute).
//!
//! - An entry whose every section came from the deterministic implementers (`ckb` and
//!   `generated`) is re-derived: planning and implementing the manifest's constraints with the
//!   CKB it was made from gives `engine.rs` and the `kernels/*.cu` sources again, and they must
//!   equal the entry's byte for byte ([`rederive`]; `cargo metainfer prepare --check`).
//! - An entry with LLM-written sections cannot be re-derived; every section of it is put through
//!   the code policy again, on every cache hit as well ([`recheck_policy`]), so an entry written
//!   before a policy change, or edited since, is refused.

use super::implement::{CkbImplementer, Implementer};
use super::review::{self, Allowances, Problem};
use crate::cache::Entry;
use crate::ckb::Ckb;

/// Checks what the entry's origin proves, deciding by the plan of its constraints (not by what
/// its manifest claims): a plan the deterministic implementers cover is re-derived
/// ([`rederive`]); a plan with LLM slots has every section put through the policy again
/// ([`recheck_policy`]). `Err` says what is wrong, naming the file or section.
pub fn check(entry: &Entry, ckb: &Ckb) -> Result<(), String> {
    let plan = super::plan_for(&entry.manifest.constraints, ckb)
        .map_err(|e| format!("cannot plan its constraints with this ckb: {e}"))?;
    if !plan.slots.iter().any(|s| s.llm) {
        return rederive(entry, ckb);
    }
    let engine = std::fs::read_to_string(entry.engine_path())
        .map_err(|e| format!("cannot read engine.rs: {e}"))?;
    let problems = recheck_policy(&plan, &engine, ckb);
    if problems.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    Err(format!(
        "its LLM-written code fails the code policy: {}",
        lines.join("; ")
    ))
}

/// Whether the plan of `entry`'s constraints has slots the LLM fills (so the entry cannot be
/// re-derived, and a cache hit re-checks its policy).
pub fn needs_policy_on_hit(entry: &Entry, ckb: &Ckb) -> bool {
    super::plan_for(&entry.manifest.constraints, ckb)
        .map_or(true, |p| p.slots.iter().any(|s| s.llm))
}

/// Re-derives an entry of the deterministic implementers and compares it with the files on disk;
/// `Err` names the first file that differs (and where). Entries with LLM sections are checked
/// with [`recheck_policy`] instead.
pub fn rederive(entry: &Entry, ckb: &Ckb) -> Result<(), String> {
    let c = &entry.manifest.constraints;
    let (plan, _, engine) = super::implement_engine(c, ckb, false)
        .map_err(|e| format!("cannot re-derive it from the ckb: {e}"))?;
    let mut expected: Vec<(String, Vec<u8>)> = vec![("engine.rs".into(), engine.into_bytes())];
    let mut imp = CkbImplementer { ckb };
    for slot in plan.slots.iter().filter(|s| s.device) {
        let code = imp
            .implement(&plan, slot, None)
            .map_err(|e| format!("cannot re-derive kernels/{}.cu: {e}", slot.id))?;
        expected.push((format!("kernels/{}.cu", slot.id), code.code.into_bytes()));
    }
    for (name, want) in expected {
        let have =
            std::fs::read(entry.path(&name)).map_err(|e| format!("cannot read {name}: {e}"))?;
        if have != want {
            let line = first_difference(&have, &want);
            return Err(format!(
                "{name} differs from what the ckb implementer generates for its constraints (first at line {line}): the entry was edited after it was generated, and its manifest rehashed"
            ));
        }
    }
    Ok(())
}

/// The 1-based line of the first byte where `a` and `b` differ.
fn first_difference(a: &[u8], b: &[u8]) -> usize {
    let at = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    1 + a[..at].iter().filter(|&&c| c == b'\n').count()
}

/// The code policy on every host section of `plan` in `engine_rs`, each with its contract's
/// allowlist; the problems found (a section the plan has and the file lacks is one).
pub fn recheck_policy(plan: &super::plan::Plan, engine_rs: &str, ckb: &Ckb) -> Vec<Problem> {
    let mut problems = Vec::new();
    for s in plan.slots.iter().filter(|s| !s.device) {
        let Some((first, last)) = super::extract::section_lines(engine_rs, &s.id) else {
            problems.push(Problem {
                slot: s.id.clone(),
                line: None,
                message: "the plan has this section but engine.rs has no `mod` for it".into(),
            });
            continue;
        };
        let code: String = engine_rs
            .lines()
            .skip(first.saturating_sub(1))
            .take(last + 1 - first)
            .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
            .collect();
        let contract = s.contract.as_ref().and_then(|id| ckb.contracts.get(id));
        let allow = match contract {
            Some(c) => Allowances::of(Some(c)),
            None => Allowances {
                unsafe_code: s.id == "dispatch",
                ..Default::default()
            },
        };
        problems.extend(review::review_section(&s.id, &code, None, allow, &[]));
    }
    problems
}
