//! The closed loop: plan → implement → review → verify → consolidate.
//!
//! [`run`] turns validated constraints into a [`Candidate`]: the files of a cache entry and
//! whether every gate passed. Nothing here writes to the cache; `cache` does, and only for a
//! candidate whose gates passed.

pub mod consolidate;
pub mod implement;
pub mod plan;
pub mod review;
pub mod verify;

use crate::ckb::Ckb;
use crate::constraints::Constraints;
use implement::{CkbImplementer, Implementer, SlotCode};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Where the chain may work.
#[derive(Debug, Clone)]
pub struct ChainOptions {
    /// The workspace whose `tests/fixtures` and `Cargo.lock` the verifier uses.
    pub workspace_root: PathBuf,
    /// Scratch crates live in `<scratch_dir>/<key>/`, their shared target dir in
    /// `<scratch_dir>/target/`.
    pub scratch_dir: PathBuf,
    /// Print progress to stderr.
    pub progress: bool,
}

/// Who filled a slot, recorded in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotRecord {
    pub slot: String,
    pub contract: String,
    pub version: u32,
    pub implementer: String,
    pub realization: String,
}

/// The outcome of the chain: the files of a cache entry and the verdict.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Relative path → content: `engine.rs`, `gates.toml`, `transcript.jsonl`.
    pub files: BTreeMap<String, Vec<u8>>,
    pub slots: Vec<SlotRecord>,
    pub gates_passed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("plan: {0}")]
    Plan(String),
    #[error("gap: {0}")]
    Gap(String),
    #[error("review found {} problem(s):\n{}", .0.len(), .0.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Review(Vec<review::Problem>),
    #[error("the candidate engine does not compile:\n{log}")]
    Compile { log: String },
    #[error("verify: {0}")]
    Verify(String),
}

/// The plan for `c` (its key and canonical constraints baked in).
fn plan_for(c: &Constraints, ckb: &Ckb) -> Result<plan::Plan, ChainError> {
    let (key, canonical) = (c.key(), c.canonical_toml());
    plan::plan(&plan_input(c, &key, &canonical), ckb)
}

fn plan_input<'a>(c: &'a Constraints, key: &'a str, canonical: &'a str) -> plan::PlanInput<'a> {
    plan::PlanInput {
        key,
        canonical,
        model: c.model.as_str(),
        hw: c.hw.as_str(),
        quant: c.quant.as_str(),
        max_seq: c.max_seq,
        features: c.features.iter().map(|f| f.as_str().to_string()).collect(),
    }
}

/// Plans and implements the engine for `c`: the slots' code and the assembled `engine.rs`.
pub fn implement_engine(c: &Constraints, ckb: &Ckb, progress: bool) -> Result<(plan::Plan, Vec<SlotCode>, String), ChainError> {
    let plan = plan_for(c, ckb)?;
    if progress {
        eprintln!(
            "metainfer: plan: {} slots for model={} hw={} quant={} ({} tensor types)",
            plan.slots.len(),
            plan.family.family,
            plan.target.id,
            plan.quant,
            plan.tensor_types.len()
        );
    }
    let mut implementer = CkbImplementer { ckb };
    let mut codes = Vec::with_capacity(plan.slots.len());
    for slot in &plan.slots {
        let code = implementer.implement(&plan, slot, None)?;
        if progress {
            eprintln!("metainfer: implement: {:<16} {} ({})", slot.id, code.realization, code.implementer);
        }
        codes.push(code);
    }
    let engine = implement::assemble(&plan, &codes);
    Ok((plan, codes, engine))
}

/// Reviews every slot against its contract and the code policy.
pub fn review_engine(plan: &plan::Plan, codes: &[SlotCode], ckb: &Ckb) -> Vec<review::Problem> {
    let mut problems = Vec::new();
    for (slot, code) in plan.slots.iter().zip(codes) {
        let contract = slot.contract.as_ref().and_then(|id| ckb.contracts.get(id));
        // the kernels the dispatch calls must exist with the dispatch's signatures
        let unsafe_kw = if matches!(slot.entry, Some((_, true))) { "unsafe " } else { "" };
        let mut extra: Vec<String> = Vec::new();
        if let Some((e, _)) = &slot.entry {
            extra.push(format!("pub(crate) {unsafe_kw}fn {e}(row: &[u8], x: &Act) -> f32"));
        }
        if let Some(e4) = &slot.entry4 {
            extra.push(format!("pub(crate) {unsafe_kw}fn {e4}(row: &[u8], xs: [&Act; 4]) -> [f32; 4]"));
        }
        // the generated dispatch calls `#[target_feature]` kernels, the one unsafe it needs
        let allow = match contract {
            Some(c) => review::Allowances::of(Some(c)),
            None => review::Allowances { unsafe_code: slot.id == "dispatch", file_access: false },
        };
        problems.extend(review::review_section(&slot.id, &code.code, contract, allow, &extra));
    }
    problems
}

/// The gates of every contract in the plan, in plan order, each once.
pub fn gate_ids(plan: &plan::Plan, ckb: &Ckb) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for s in &plan.slots {
        if let Some(c) = s.contract.as_ref().and_then(|id| ckb.contracts.get(id)) {
            for g in &c.gates {
                if !ids.contains(g) {
                    ids.push(g.clone());
                }
            }
        }
    }
    ids
}

fn scratch<'a>(opts: &'a ChainOptions, ckb: &'a Ckb, key: &str) -> verify::Scratch<'a> {
    verify::Scratch {
        dir: opts.scratch_dir.join(&key[..16.min(key.len())]),
        target_dir: opts.scratch_dir.join("target"),
        workspace_root: &opts.workspace_root,
        ckb,
    }
}

/// Runs the whole chain with the `ckb` implementer.
pub fn run(c: &Constraints, ckb: &Ckb, opts: &ChainOptions) -> Result<Candidate, ChainError> {
    let (plan, codes, engine) = implement_engine(c, ckb, opts.progress)?;
    let problems = review_engine(&plan, &codes, ckb);
    if !problems.is_empty() {
        return Err(ChainError::Review(problems));
    }
    if opts.progress {
        eprintln!("metainfer: review: {} sections match their contracts and the code policy", codes.len());
    }
    let gates = gate_ids(&plan, ckb);
    let verdict = verify::verify(&scratch(opts, ckb, &plan.key), &engine, &gates, opts.progress)?;
    if opts.progress {
        for g in &verdict.gates {
            eprintln!("metainfer: verify: gate {:<12} {}", g.id, g.status);
        }
    }
    let mut files = BTreeMap::new();
    files.insert("engine.rs".to_string(), engine.into_bytes());
    files.insert("gates.toml".to_string(), consolidate::gates_toml(&verdict).into_bytes());
    files.insert("transcript.jsonl".to_string(), consolidate::transcript(&plan, &codes, &problems, &verdict).into_bytes());
    if !verdict.passed {
        files.insert("verify.log".to_string(), verdict.log.into_bytes());
    }
    let slots = plan
        .slots
        .iter()
        .zip(&codes)
        .map(|(s, c)| SlotRecord {
            slot: s.id.clone(),
            contract: s.contract.clone().unwrap_or_else(|| "generated".into()),
            version: s.version,
            implementer: c.implementer.clone(),
            realization: c.realization.clone(),
        })
        .collect();
    Ok(Candidate { files, slots, gates_passed: verdict.passed })
}

/// Re-runs the gates of `c`'s plan on an existing `engine.rs`; returns the new `gates.toml`
/// and whether every gate passed.
pub fn reverify(c: &Constraints, ckb: &Ckb, engine_rs: &str, opts: &ChainOptions) -> Result<(Vec<u8>, bool), ChainError> {
    let plan = plan_for(c, ckb)?;
    let gates = gate_ids(&plan, ckb);
    let verdict = verify::verify(&scratch(opts, ckb, &plan.key), engine_rs, &gates, opts.progress)?;
    Ok((consolidate::gates_toml(&verdict).into_bytes(), verdict.passed))
}
