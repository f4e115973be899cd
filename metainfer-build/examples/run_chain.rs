//! Runs the whole chain (plan, ckb implementer, review, verify) for the demo's qwen2 q4_k_m
//! engine on one target and prints the gate report, without touching the cache. With
//! `METAINFER_REAL_MODEL_GATE=<model.gguf>` the real-model gates (greedy vs llama.cpp) run too.
//!
//! `cargo run -p metainfer-build --example run_chain -- [x86_64-avx2|generic] [QUANT]`

use metainfer_build::chain;
use metainfer_build::{Arg, Ckb, Constraints};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let hw = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "x86_64-avx2".into());
    let ckb = Ckb::load(Ckb::default_root())?;
    let quant = std::env::args().nth(2).unwrap_or_else(|| "q4_k_m".into());
    let args = [
        Arg::str("model", "qwen2"),
        Arg::str("hw", &hw),
        Arg::str("quant", &quant),
    ];
    let c = Constraints::from_args(&args, &ckb).map_err(|e| e.message)?;
    let root = ckb.workspace_root();
    let opts = chain::ChainOptions::new(root.clone(), root.join("target/metainfer"), true);
    let cand = chain::run(&c, &ckb, &opts)?;
    println!("passed={}", cand.gates_passed);
    println!("{}", String::from_utf8_lossy(&cand.files["gates.toml"]));
    if let Some(log) = cand.files.get("verify.log") {
        println!("{}", String::from_utf8_lossy(log));
    }
    Ok(())
}
