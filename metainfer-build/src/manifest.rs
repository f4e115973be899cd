//! `cache/<key>/manifest.toml`: what a cache entry is, where it came from, and the blake3 of
//! every other file in it.

use crate::constraints::Constraints;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The files every entry has besides the manifest.
pub const REQUIRED_FILES: &[&str] = &["engine.rs", "gates.toml", "transcript.jsonl"];

/// The manifest's name inside an entry.
pub const MANIFEST: &str = "manifest.toml";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// blake3 hex of the canonical constraints; also the entry's directory name.
    pub key: String,
    /// `metainfer-build`'s version that generated the entry.
    pub generator_version: String,
    /// [`crate::ckb::Ckb::digest`] of the CKB it was generated from.
    pub ckb_digest: String,
    /// Whether every gate passed; an entry that did not is never served.
    pub gates_passed: bool,
    /// The LLM that filled slots, where one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_model: Option<String>,
    /// The LLM requests made, where any were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub llm_request_ids: Vec<String>,
    /// The canonical constraints (the collision guard compares them on every read).
    pub constraints: Constraints,
    /// blake3 hex of every other file, by path relative to the entry (`kernels/x.cu`).
    pub files: BTreeMap<String, String>,
    /// Which implementer filled each contract slot.
    #[serde(default)]
    pub slots: Vec<SlotRecord>,
}

impl Manifest {
    pub fn parse(text: &str) -> Result<Manifest, String> {
        toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a manifest always serializes")
    }
}

/// blake3 hex of `bytes`.
pub fn hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
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
#[derive(Debug, Clone, Default)]
pub struct Candidate {
    /// Relative path → content: `engine.rs`, `gates.toml`, `transcript.jsonl`.
    pub files: BTreeMap<String, Vec<u8>>,
    pub slots: Vec<SlotRecord>,
    pub gates_passed: bool,
    /// The model the LLM server reported, where an LLM filled slots.
    pub llm_model: Option<String>,
    /// Every LLM request id, in order.
    pub llm_request_ids: Vec<String>,
    /// Proposals written under `ckb/proposals/` (LLM sections that passed every gate).
    pub proposals: Vec<PathBuf>,
}
