//! Shared by the demo's integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The real model, or `None` with the reason printed (the test then skips).
pub fn real_model() -> Option<PathBuf> {
    let p = std::env::var_os("METAINFER_REAL_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"));
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

/// The real llama-family model (SmolLM2-135M-Instruct Q4_1), or `None` with the reason printed.
pub fn smollm2() -> Option<PathBuf> {
    let p = std::env::var_os("METAINFER_REAL_MODEL_LLAMA")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
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
