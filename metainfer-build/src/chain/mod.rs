//! The closed loop: plan → implement → review → verify → consolidate.
//!
//! [`run`] turns validated constraints into a [`Candidate`]: the files of a cache entry and
//! whether every gate passed. Nothing here writes to the cache; `cache` does, and only for a
//! candidate whose gates passed.

pub mod adopt;
pub mod consolidate;
pub mod extract;
pub mod implement;
pub mod llm_fill;
pub mod plan;
pub mod policy;
pub mod prompts;
pub mod provenance;
pub mod review;
pub mod sandbox;
pub mod verify;

use crate::ckb::Ckb;
use crate::constraints::Constraints;
use implement::{CkbImplementer, Implementer, SlotCode};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Where the chain may work.
#[derive(Debug, Clone)]
pub struct ChainOptions {
    /// The workspace the build belongs to (paths in messages are shown relative to it). The
    /// chain reads nothing from it: gates, fixtures and the lock file come with the generator.
    pub workspace_root: PathBuf,
    /// Scratch crates live in `<scratch_dir>/<key>/`, their shared target dir in
    /// `<scratch_dir>/target/`.
    pub scratch_dir: PathBuf,
    /// Print progress to stderr.
    pub progress: bool,
    /// The LLM endpoint for slots the CKB does not fill (`generator = "auto"` gaps, or every
    /// contract slot with `"llm"`); `None`: such slots are an error that says how to set one.
    pub llm: Option<crate::llm::LlmConfig>,
    /// What the LLM implementer may spend.
    pub budget: llm_fill::LlmBudget,
    /// Also run the LLM spec-reviewer (advisory; the static reviewer always runs).
    pub llm_review: bool,
    /// The limits each gate test runs under.
    pub gate_limits: sandbox::Limits,
    /// Wall time for one build of a candidate; past it, cargo and its compilers are killed.
    pub compile_timeout: std::time::Duration,
}

/// Default wall seconds for one build of a candidate (`METAINFER_COMPILE_TIMEOUT_S`).
pub const COMPILE_TIMEOUT_S: u64 = 1800;

impl ChainOptions {
    /// Options for `workspace_root` with scratch crates under `scratch_dir`, no LLM, the
    /// default limits (the environment is not read; [`crate::BuildContext::chain_options`]
    /// is the one that does).
    pub fn new(workspace_root: PathBuf, scratch_dir: PathBuf, progress: bool) -> ChainOptions {
        ChainOptions {
            workspace_root,
            scratch_dir,
            progress,
            llm: None,
            budget: llm_fill::LlmBudget::default(),
            llm_review: false,
            gate_limits: sandbox::Limits::gate(
                sandbox::Limits::GATE_WALL_S,
                sandbox::Limits::GATE_DATA_MIB,
            ),
            compile_timeout: std::time::Duration::from_secs(COMPILE_TIMEOUT_S),
        }
    }
}

pub use crate::manifest::{Candidate, SlotRecord};

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
    #[error("llm: {0}")]
    Llm(String),
    #[error(transparent)]
    FeatureOff(crate::feature::FeatureOff),
    /// A generator setting (`METAINFER_*` variable) with a value it cannot take.
    #[error(transparent)]
    Env(#[from] crate::env::EnvError),
    #[error(
        "llm: gave up on slot `{slot}` after {rounds} round(s): {why}; nothing was cached{}\nlast feedback to the implementer:\n{last_feedback}",
        if .transcript.is_empty() { String::new() } else { format!(" (transcript kept in {})", .transcript) }
    )]
    Budget {
        slot: String,
        rounds: u32,
        why: String,
        last_feedback: String,
        transcript: String,
    },
}

/// The plan for `c` (its key and canonical constraints baked in).
fn plan_for(c: &Constraints, ckb: &Ckb) -> Result<plan::Plan, ChainError> {
    plan::plan(c, ckb)
}

/// The slots of `c`'s plan that the LLM implementer would fill (empty with `generator = "ckb"`).
pub fn llm_slots(c: &Constraints, ckb: &Ckb) -> Result<Vec<String>, ChainError> {
    Ok(plan_for(c, ckb)?
        .slots
        .iter()
        .filter(|s| s.llm)
        .map(|s| s.id.clone())
        .collect())
}

/// Plans and implements the engine for `c`: the slots' code and the assembled `engine.rs`.
pub fn implement_engine(
    c: &Constraints,
    ckb: &Ckb,
    progress: bool,
) -> Result<(plan::Plan, Vec<SlotCode>, String), ChainError> {
    let plan = plan_for(c, ckb)?;
    if progress {
        crate::progress::line(&format!(
            "metainfer: plan: {} slots for model={} hw={} quant={} ({} tensor types)",
            plan.slots.len(),
            plan.family.family,
            plan.target.id,
            plan.quant,
            plan.tensor_types.len()
        ));
    }
    let mut implementer = CkbImplementer { ckb };
    let mut codes = Vec::with_capacity(plan.slots.len());
    if let Some(s) = plan.slots.iter().find(|s| s.llm) {
        return Err(ChainError::Gap(format!("slot `{}` is for the llm implementer; implement_engine uses the ckb only (use chain::run)", s.id)));
    }
    for slot in &plan.slots {
        let code = implementer.implement(&plan, slot, None)?;
        if progress {
            crate::progress::line(&format!(
                "metainfer: implement: {:<16} {} ({})",
                slot.id, code.realization, code.implementer
            ));
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
        if slot.device {
            problems.extend(review_device(slot, &code.code, contract));
            continue;
        }
        problems.extend(llm_fill::review_slot(slot, &code.code, contract));
    }
    problems
}

/// Device code is CUDA C, not Rust: every kernel the contract's interface names must be
/// defined as `extern "C" __global__ void <name>(` (directly or through the file's macros,
/// whose expansions NVRTC's gate checks in the PTX).
fn review_device(
    slot: &plan::Slot,
    code: &str,
    contract: Option<&crate::ckb::Contract>,
) -> Vec<review::Problem> {
    let mut problems = Vec::new();
    for item in contract.map(|c| c.interface.as_slice()).unwrap_or_default() {
        let Some(name) = implement::kernel_name(item) else {
            continue;
        };
        let direct = code.contains(&format!("void {name}("));
        // `GGUF_KERNELS(q4_k, ...)` defines gemv_q4_k, gemm_q4_k, get_rows_q4_k.
        let via_macro = ["gemv_", "gemm_", "get_rows_"]
            .iter()
            .filter_map(|p| name.strip_prefix(p))
            .any(|t| code.contains(&format!("_KERNELS({t},")));
        if !direct && !via_macro {
            problems.push(review::Problem {
                slot: slot.id.clone(),
                line: None,
                message: format!("missing kernel `{name}` of interface item `{item}`"),
            });
        }
    }
    problems
}

/// The entry's `kernels/` files for the plan's device slots: each slot's CUDA source as
/// `<slot>.cu` and its PTX for the target's arch as `<slot>.<arch>.ptx`, compiled with NVRTC
/// here, at generation time (the engine loads the PTX; nothing compiles at run time).
pub fn kernel_files(plan: &plan::Plan, ckb: &Ckb) -> Result<Vec<(String, Vec<u8>)>, ChainError> {
    let mut files = Vec::new();
    let mut ckb_impl = CkbImplementer { ckb };
    for slot in plan.slots.iter().filter(|s| s.device) {
        let code = ckb_impl.implement(plan, slot, None)?;
        let name = format!("{}.cu", slot.id);
        let ptx = crate::nvrtc::compile_ptx(&code.code, &name, &plan.target.arch).map_err(|e| {
            ChainError::Verify(format!(
                "cannot compile the device code of slot `{}` for {}: {e}",
                slot.id, plan.target.arch
            ))
        })?;
        files.push((format!("kernels/{name}"), code.code.into_bytes()));
        files.push((
            format!("kernels/{}.{}.ptx", slot.id, plan.target.arch),
            ptx.into_bytes(),
        ));
    }
    Ok(files)
}

/// The gates of every contract in the plan, in plan order, each once.
pub fn gate_ids(plan: &plan::Plan, ckb: &Ckb) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let applies = |g: &String| {
        ckb.gates
            .get(g)
            .is_none_or(|g| g.target_kinds.is_empty() || g.target_kinds.contains(&plan.target.kind))
    };
    for s in &plan.slots {
        if let Some(c) = s.contract.as_ref().and_then(|id| ckb.contracts.get(id)) {
            for g in c.gates.iter().filter(|g| applies(g)) {
                if !ids.contains(g) {
                    ids.push(g.clone());
                }
            }
        }
    }
    ids
}

fn scratch<'a>(
    opts: &'a ChainOptions,
    ckb: &'a Ckb,
    plan: &plan::Plan,
    kernels: Vec<(String, Vec<u8>)>,
) -> verify::Scratch<'a> {
    let key = &plan.key;
    let mut rt_features = vec!["server"];
    if plan.format == crate::ckb::Format::Safetensors {
        rt_features.push("hf");
    }
    if plan.target.kind == crate::ckb::TargetKind::Cuda {
        rt_features.push("cuda");
    }
    verify::Scratch {
        rt_features,
        kernels,
        limits: &opts.gate_limits,
        compile_timeout: opts.compile_timeout,
        dir: opts.scratch_dir.join(&key[..16.min(key.len())]),
        target_dir: opts.scratch_dir.join("target"),
        ckb,
    }
}

/// Runs the whole chain: the `ckb` implementer for the slots the CKB covers, the LLM loop
/// for the others (each verified on its own gates), then review and every gate on the whole
/// engine. LLM sections of an engine that passed are written as proposals under
/// `ckb/proposals/`.
pub fn run(c: &Constraints, ckb: &Ckb, opts: &ChainOptions) -> Result<Candidate, ChainError> {
    let plan = plan_for(c, ckb)?;
    let llm_slots: Vec<usize> = plan
        .slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.llm)
        .map(|(i, _)| i)
        .collect();
    if opts.progress {
        crate::progress::line(&format!(
            "metainfer: plan: {} slots for model={} hw={} quant={} ({} tensor types), {} for the llm",
            plan.slots.len(),
            plan.family.family,
            plan.target.id,
            plan.quant,
            plan.tensor_types.len(),
            llm_slots.len()
        ));
    }
    let mut ckb_impl = CkbImplementer { ckb };
    let mut chosen: Vec<Option<SlotCode>> = vec![None; plan.slots.len()];
    for (i, slot) in plan.slots.iter().enumerate() {
        if !slot.llm {
            let code = ckb_impl.implement(&plan, slot, None)?;
            if opts.progress {
                crate::progress::line(&format!(
                    "metainfer: implement: {:<16} {} ({})",
                    slot.id, code.realization, code.implementer
                ));
            }
            chosen[i] = Some(code);
        }
    }
    let kernels = kernel_files(&plan, ckb)?;
    let scratch = scratch(opts, ckb, &plan, kernels.clone());
    let mut session_out: Option<(Vec<serde_json::Value>, Vec<String>, Vec<String>)> = None;
    let mut rounds: BTreeMap<usize, u32> = BTreeMap::new();
    if !llm_slots.is_empty() {
        let names: Vec<&str> = llm_slots
            .iter()
            .map(|&i| plan.slots[i].id.as_str())
            .collect();
        let cfg = opts.llm.clone().ok_or_else(|| {
            ChainError::Llm(format!(
                "generator = \"{}\" needs an llm for slot(s) {}, and none is configured; set METAINFER_LLM_BASE_URL and METAINFER_LLM_MODEL (and METAINFER_LLM_API_KEY if the server wants one), or METAINFER_LLM_CONFIG=<file.toml>, or use generator = \"ckb\" where the ckb covers every slot",
                c.generator.as_str(),
                names.join(", ")
            ))
        })?;
        let client = crate::llm::Client::new(cfg);
        let mut session =
            llm_fill::LlmSession::new(&client, opts.budget.clone(), opts.llm_review, opts.progress);
        let reference = prompts::Reference::parse(c.reference.as_str());
        for &i in &llm_slots {
            match session.fill(&plan, i, &chosen, ckb, reference, &scratch) {
                Ok(f) => {
                    rounds.insert(i, f.rounds);
                    chosen[i] = Some(f.code);
                }
                Err(e) => return Err(keep_transcript(opts, &plan.key, &session.transcript, e)),
            }
        }
        session_out = Some((session.transcript, session.request_ids, session.models));
    }
    let codes: Vec<SlotCode> = chosen
        .into_iter()
        .map(|c| c.expect("every slot is filled"))
        .collect();
    let engine = implement::assemble(&plan, &codes);
    let problems = review_engine(&plan, &codes, ckb);
    if !problems.is_empty() {
        return Err(ChainError::Review(problems));
    }
    if opts.progress {
        crate::progress::line(&format!(
            "metainfer: review: {} sections match their contracts and the code policy",
            codes.len()
        ));
    }
    let gates = gate_ids(&plan, ckb);
    let verdict = verify::verify(&scratch, &engine, &gates, opts.progress)?;
    if opts.progress {
        for g in &verdict.gates {
            crate::progress::line(&format!(
                "metainfer: verify: gate {:<12} {}",
                g.id, g.status
            ));
        }
    }
    let mut transcript = consolidate::transcript(&plan, &codes, &problems, &verdict);
    let (llm_model, llm_request_ids) = match &session_out {
        Some((lines, ids, models)) => {
            transcript.extend(lines.iter().map(consolidate::json_line));
            (models.first().cloned(), ids.clone())
        }
        None => (None, Vec::new()),
    };
    let mut files = BTreeMap::new();
    files.insert("engine.rs".to_string(), engine.into_bytes());
    files.insert(
        "gates.toml".to_string(),
        consolidate::gates_toml(&verdict).into_bytes(),
    );
    files.insert("transcript.jsonl".to_string(), transcript.into_bytes());
    files.extend(kernels);
    if !verdict.passed {
        files.insert("verify.log".to_string(), verdict.log.clone().into_bytes());
    }
    let mut proposals = Vec::new();
    if verdict.passed {
        for (&i, &r) in &rounds {
            let p = consolidate::Evidence {
                rounds: r,
                model: llm_model.as_deref(),
                request_ids: &llm_request_ids,
                verdict: &verdict,
            };
            match consolidate::write_proposal(ckb, &plan, &plan.slots[i], &codes[i], &p) {
                Ok(dir) => {
                    if opts.progress {
                        crate::progress::line(&format!("metainfer: consolidate: proposal {} (adopt it with `cargo metainfer ckb adopt`)", dir.display()));
                    }
                    proposals.push(dir);
                }
                Err(e) => {
                    return Err(ChainError::Verify(format!(
                        "cannot write the proposal for slot `{}`: {e}",
                        plan.slots[i].id
                    )))
                }
            }
        }
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
    Ok(Candidate {
        files,
        slots,
        gates_passed: verdict.passed,
        llm_model,
        llm_request_ids,
        proposals,
    })
}

/// Keeps the transcript of a failed LLM run under `<scratch>/failed/<key>/` and says where.
fn keep_transcript(
    opts: &ChainOptions,
    key: &str,
    lines: &[serde_json::Value],
    e: ChainError,
) -> ChainError {
    let dir = opts.scratch_dir.join("failed").join(key);
    let path = dir.join("transcript.jsonl");
    let text: String = lines.iter().map(consolidate::json_line).collect();
    let kept = std::fs::create_dir_all(&dir)
        .and_then(|_| std::fs::write(&path, text))
        .is_ok();
    let shown = if kept {
        path.display().to_string()
    } else {
        String::new()
    };
    match e {
        ChainError::Budget {
            slot,
            rounds,
            why,
            last_feedback,
            ..
        } => ChainError::Budget {
            slot,
            rounds,
            why,
            last_feedback,
            transcript: shown,
        },
        ChainError::Llm(m) if kept => ChainError::Llm(format!(
            "{m}; nothing was cached (transcript kept in {shown})"
        )),
        other => other,
    }
}

/// Re-runs the gates of `c`'s plan on an existing entry's `engine.rs` and `kernels/` files
/// (path, bytes), the ones it ships, not freshly compiled ones; returns the new `gates.toml`
/// and whether every gate passed.
pub fn reverify(
    c: &Constraints,
    ckb: &Ckb,
    engine_rs: &str,
    kernels: Vec<(String, Vec<u8>)>,
    opts: &ChainOptions,
) -> Result<(Vec<u8>, bool), ChainError> {
    let plan = plan_for(c, ckb)?;
    let gates = gate_ids(&plan, ckb);
    let verdict = verify::verify(
        &scratch(opts, ckb, &plan, kernels),
        engine_rs,
        &gates,
        opts.progress,
    )?;
    Ok((
        consolidate::gates_toml(&verdict).into_bytes(),
        verdict.passed,
    ))
}
