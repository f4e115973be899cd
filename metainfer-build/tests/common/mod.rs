//! Helpers shared by metainfer-build's integration tests.
#![allow(dead_code)]

use metainfer_build::chain::{Candidate, SlotRecord};
use metainfer_build::{Arg, ArgValue, Ckb, Constraints};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The small CKB metainfer-build's tests use (also from metainfer-cli's tests).
pub fn fixture_ckb_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../metainfer-build/tests/fixtures/ckb")
}

pub fn ckb() -> Ckb {
    Ckb::load(fixture_ckb_dir()).unwrap()
}

pub fn constraints(pairs: &[(&str, &str)]) -> Constraints {
    let args: Vec<Arg> = pairs.iter().map(|(k, v)| Arg::str(*k, *v)).collect();
    Constraints::from_args(&args, &ckb()).unwrap()
}

pub fn list(v: &[&str]) -> ArgValue {
    ArgValue::List(v.iter().map(|s| s.to_string()).collect())
}

/// A tiny hand-written engine with the interface the expansion expects.
pub const TINY_ENGINE: &str = "pub struct Engine { path: std::path::PathBuf }\n\nimpl Engine {\n    pub fn load(path: &std::path::Path) -> rt::Result<Engine> {\n        Ok(Engine { path: path.to_path_buf() })\n    }\n    pub fn path(&self) -> &std::path::Path {\n        &self.path\n    }\n}\n";

pub fn candidate(tag: &str, passed: bool) -> Candidate {
    let mut files = BTreeMap::new();
    files.insert(
        "engine.rs".to_string(),
        format!("{TINY_ENGINE}// {tag}\n").into_bytes(),
    );
    let status = if passed { "pass" } else { "fail" };
    files.insert(
        "gates.toml".to_string(),
        format!("[gate.dot_f32]\nstatus = \"{status}\"\nmax_abs_rel = 0.5\n").into_bytes(),
    );
    files.insert(
        "transcript.jsonl".to_string(),
        format!("{{\"tag\":\"{tag}\"}}\n").into_bytes(),
    );
    Candidate {
        files,
        slots: vec![SlotRecord {
            slot: "dot_f32".into(),
            contract: "dot_f32".into(),
            version: 1,
            implementer: "ckb".into(),
            realization: "dot_f32/scalar".into(),
        }],
        gates_passed: passed,
        ..Default::default()
    }
}
