//! Shared by the demo's integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The real model (Qwen2.5-Coder Q4_K_M, or `METAINFER_REAL_MODEL`), or `None` with the reason
/// printed (the test then skips).
pub fn real_model() -> Option<PathBuf> {
    model_file(
        "METAINFER_REAL_MODEL",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    )
}

/// The real llama-family model (SmolLM2-135M-Instruct Q4_1, or `METAINFER_REAL_MODEL_LLAMA`), or
/// `None` with the reason printed.
pub fn smollm2() -> Option<PathBuf> {
    model_file(
        "METAINFER_REAL_MODEL_LLAMA",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
    )
}

/// The file `var` names, else `models/<default>`, when it exists.
fn model_file(var: &str, default: &str) -> Option<PathBuf> {
    let p = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("models").join(default));
    if p.exists() {
        Some(p)
    } else {
        println!(
            "skipped: {} is absent; run scripts/fetch-model.sh",
            p.display()
        );
        None
    }
}

pub fn tiny_model() -> PathBuf {
    root().join("ckb/gates/fixtures/tiny-qwen2.gguf")
}

/// The engine this machine runs best.
pub fn which() -> demo_engine::Which {
    demo_engine::Which::Auto
}
