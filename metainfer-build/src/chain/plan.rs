//! Plan: from the constraints and the CKB, the ordered list of slots the engine needs, the
//! realization chosen for each, and the constants to bake in.

use super::ChainError;
use crate::ckb::schema::{
    Contract, Format, ModelFamily, Preset, Quant, QuantKind, RealizationRef, Target, TargetKind,
};
use crate::ckb::Ckb;
use crate::constraints::{Constraints, Feature, Generator};
use serde::Serialize;

/// What the chain builds, resolved from the constraints.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub key: String,
    pub canonical: String,
    pub family: ModelFamily,
    pub preset: Option<Preset>,
    pub target: Target,
    pub quant: String,
    /// The model file format, from the quant.
    pub format: Format,
    /// Tensor types compiled in, in the order of `ckb/quants` ids.
    pub tensor_types: Vec<Quant>,
    pub max_seq: Option<u32>,
    /// Sequences the engine's server runs at once (`batch`; one KV slot each).
    pub batch: u32,
    pub features: Vec<Feature>,
    pub slots: Vec<Slot>,
}

/// One section of the engine.
#[derive(Debug, Clone, Serialize)]
pub struct Slot {
    /// Module name in `engine.rs` (the contract id, or `header` / `dispatch`).
    pub id: String,
    pub title: String,
    /// `None` for sections the generator writes itself (`header`, `dispatch`).
    pub contract: Option<String>,
    pub version: u32,
    /// Realization variants to include, in order (e.g. `scalar` then `avx2`).
    pub variants: Vec<String>,
    /// For dot kernels: the function the dispatch calls and whether the call is unsafe.
    pub entry: Option<(String, bool)>,
    /// For dot kernels with a four-token form: the function the dispatch's `dot_row4` calls
    /// (unsafe exactly when `entry` is).
    pub entry4: Option<String>,
    /// For dot kernels with a four-row gemv form: the function the dispatch's `dot_rows4` calls
    /// (unsafe exactly when `entry` is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry_rows4: Option<String>,
    /// For dot kernels with a tiled prefill form: the decoder of a tile's rows (`dec_rows`), the
    /// rows x 4 kernel on a decoded tile (`dot_dec`), unsafe exactly when `entry` is, and the
    /// rows of a tile (2, 4 or 8).
    pub entry_tile: Option<(String, String, usize)>,
    /// Filled by the LLM implementer (a gap in the CKB, or every contract slot with
    /// `generator = "llm"`); `variants` then names the one variant a proposal would add.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub llm: bool,
    /// For an LLM slot the CKB also covers: the CKB's slot, which stands in for it while
    /// other slots are verified before it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Box<Slot>>,
    /// Device code (a `.cu` realization): not part of `engine.rs` but compiled with NVRTC into
    /// the entry's `kernels/`, which the host code loads.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub device: bool,
}

/// The plan for validated constraints `c` (every id in them is one the CKB knows; a CKB that
/// changed since they were validated is reported, not assumed).
pub fn plan(c: &Constraints, ckb: &Ckb) -> Result<Plan, ChainError> {
    let no = |what: &str, id: &str| ChainError::Plan(format!("the ckb has no {what} '{id}'"));
    let (family, preset) = ckb
        .resolve_model(&c.model)
        .ok_or_else(|| no("model family or preset", &c.model))?;
    let (family, preset) = (family.clone(), preset.cloned());
    let target = ckb
        .targets
        .get(&c.hw)
        .ok_or_else(|| no("target", &c.hw))?
        .clone();
    let q = ckb
        .quants
        .get(&c.quant)
        .ok_or_else(|| no("quant", &c.quant))?;
    let base_graph = match family.target_graphs.get(&target.kind) {
        Some(g) => g,
        None if target.kind == TargetKind::Cpu => &family.graph,
        None => {
            return Err(ChainError::Plan(format!(
                "target '{}' is a {} target, and model family '{}' has no graph for {} targets (target_graphs.{} in ckb/models/{}.toml)",
                target.id, target.kind, family.family, target.kind, target.kind, family.family
            )))
        }
    };
    let mut type_ids: Vec<String> = match q.kind {
        QuantKind::Mixture => q.tensor_types.clone(),
        QuantKind::TensorType if q.tensor_types.is_empty() => vec![q.id.clone(), "f32".into()],
        QuantKind::TensorType => q.tensor_types.clone(),
    };
    type_ids.sort();
    type_ids.dedup();
    let tensor_types: Vec<Quant> = type_ids
        .iter()
        .map(|t| {
            ckb.quants
                .get(t)
                .cloned()
                .ok_or_else(|| no("tensor type", t))
        })
        .collect::<Result<_, _>>()?;

    let mut slots = Vec::new();
    let extra = c
        .features
        .iter()
        .filter_map(|f| family.feature_sections.get(f.as_str()))
        .flatten();
    let swaps = family.format_sections.get(&q.format);
    if q.format != Format::Gguf && swaps.is_none() {
        return Err(ChainError::Plan(format!(
            "quant '{}' reads {} model files, and model family '{}' knows only GGUF files (no format_sections.{} in ckb/models/{}.toml); use a GGUF quant such as q4_k_m or q8_0",
            q.id, q.format.as_str(), family.family, q.format.as_str(), family.family
        )));
    }
    let graph: Vec<&String> = base_graph
        .iter()
        .map(|s| {
            swaps
                .and_then(|m| m.get(s.trim_end_matches('?')))
                .unwrap_or(s)
        })
        .chain(extra)
        .collect();
    for section in graph {
        match section.as_str() {
            "header" => slots.push(generated("header", "Constants and configuration")),
            "dispatch" => slots.push(generated(
                "dispatch",
                "Kernel dispatch over the compiled tensor types",
            )),
            "dot_kernels" => {
                for t in &tensor_types {
                    let cid = t.contract.as_deref().ok_or_else(|| {
                        ChainError::Plan(format!(
                            "tensor type '{}' names no dot-kernel contract",
                            t.id
                        ))
                    })?;
                    slots.push(contract_slot(ckb, cid, &target, c.generator, true)?);
                }
            }
            optional if optional.ends_with('?') => {
                // Shared helpers some targets' realizations use: only where the CKB has one.
                let cid = optional.trim_end_matches('?');
                let c = ckb.contracts.get(cid).ok_or_else(|| no("contract", cid))?;
                if let Ok(slot) = ckb_slot(c, &target) {
                    slots.push(slot);
                }
            }
            cid => slots.push(contract_slot(ckb, cid, &target, c.generator, false)?),
        }
    }
    Ok(Plan {
        key: c.key(),
        canonical: c.canonical_toml(),
        family,
        preset,
        target,
        quant: c.quant.clone(),
        format: q.format,
        tensor_types,
        max_seq: c.max_seq,
        batch: c.batch,
        features: c.features.clone(),
        slots,
    })
}

fn generated(id: &str, title: &str) -> Slot {
    Slot {
        id: id.into(),
        title: title.into(),
        contract: None,
        version: 1,
        variants: vec![],
        entry: None,
        entry4: None,
        entry_rows4: None,
        entry_tile: None,
        llm: false,
        fallback: None,
        device: false,
    }
}

/// The variant name an LLM realization of a contract takes on `target`: the target's first
/// (most preferred) variant, so that once adopted the planner picks it for this target.
pub fn llm_variant(target: &Target) -> String {
    target
        .variants
        .first()
        .cloned()
        .unwrap_or_else(|| "scalar".into())
}

/// The first realization (in the target's variant preference order) whose ISA needs the
/// target meets, with the variants it must be included with; or, where the generator says so
/// (`llm`: always; `auto`: when the CKB has none), a slot for the LLM implementer.
fn contract_slot(
    ckb: &Ckb,
    cid: &str,
    target: &Target,
    generator: Generator,
    dot_kernel: bool,
) -> Result<Slot, ChainError> {
    let c: &Contract = ckb.contracts.get(cid).ok_or_else(|| {
        ChainError::Plan(format!(
            "the model graph names contract '{cid}', which the ckb lacks"
        ))
    })?;
    let from_ckb = ckb_slot(c, target).map(|mut slot| {
        slot.device = slot.variants.iter().any(|v| {
            crate::ckb::realization_file(&ckb.root, cid, v)
                .is_some_and(|p| p.extension().is_some_and(|e| e == "cu"))
        });
        slot
    });
    let want_llm = match generator {
        // Device code (CUDA C) always comes from the ckb: the llm implementer writes Rust.
        _ if from_ckb.as_ref().is_ok_and(|s| s.device) => false,
        Generator::Llm => true,
        Generator::Auto => from_ckb.is_err(),
        Generator::Ckb => false,
    };
    if !want_llm {
        return from_ckb;
    }
    let variant = llm_variant(target);
    // A dot kernel's entry: safe for portable targets, a `#[target_feature]` fn otherwise.
    let entry = dot_kernel.then(|| (format!("{}_{variant}", c.id), !target.features.is_empty()));
    Ok(Slot {
        id: c.id.clone(),
        title: c.title.clone(),
        contract: Some(c.id.clone()),
        version: c.version,
        variants: vec![variant],
        entry,
        entry4: None,
        entry_rows4: None,
        entry_tile: None,
        llm: true,
        fallback: from_ckb.ok().map(Box::new),
        device: false,
    })
}

fn ckb_slot(c: &Contract, target: &Target) -> Result<Slot, ChainError> {
    let cid = c.id.as_str();
    let fits = |r: &RealizationRef| r.isa.iter().all(|f| target.features.contains(f));
    let chosen = target
        .variants
        .iter()
        .find_map(|v| c.realizations.iter().find(|r| &r.variant == v && fits(r)))
        .ok_or_else(|| {
            ChainError::Gap(format!(
                "contract '{cid}' has no realization for target '{}' (it has: {}); use generator = \"auto\" or \"llm\" to fill the gap",
                target.id,
                c.realizations.iter().map(|r| r.variant.as_str()).collect::<Vec<_>>().join(", ")
            ))
        })?;
    let mut variants = chosen.with.clone();
    variants.push(chosen.variant.clone());
    let entry_tile = match (&chosen.entry_dec, &chosen.entry_tiled, chosen.tile_rows.unwrap_or(2)) {
        (Some(d), Some(k), rows @ (2 | 4 | 8)) => Some((d.clone(), k.clone(), rows)),
        (Some(_), Some(_), rows) => {
            return Err(ChainError::Plan(format!(
                "realization '{}' of contract '{cid}' has tile_rows = {rows}; a tile has 2, 4 or 8 rows",
                chosen.variant
            )))
        }
        (None, None, _) if chosen.tile_rows.is_none() => None,
        _ => {
            return Err(ChainError::Plan(format!(
                "realization '{}' of contract '{cid}' names only some of entry_dec, entry_tiled and tile_rows (a tiled form needs entry_dec and entry_tiled; tile_rows defaults to 2)",
                chosen.variant
            )))
        }
    };
    Ok(Slot {
        id: c.id.clone(),
        title: c.title.clone(),
        contract: Some(c.id.clone()),
        version: c.version,
        variants,
        entry: chosen.entry.clone().map(|e| (e, chosen.entry_unsafe)),
        entry4: chosen.entry4.clone(),
        entry_rows4: chosen.entry_rows4.clone(),
        entry_tile,
        llm: false,
        fallback: None,
        device: false,
    })
}
