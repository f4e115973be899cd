use metainfer_build::chain;
use metainfer_build::{Arg, Ckb, Constraints};
fn main() {
    let hw = std::env::args().nth(1).unwrap_or("x86_64-avx2".into());
    let ckb = Ckb::load(&Ckb::default_root()).unwrap();
    let c = Constraints::from_args(&[Arg::str("model", "qwen2"), Arg::str("hw", &hw), Arg::str("quant", "q4_k_m")], &ckb).unwrap();
    let root = ckb.workspace_root();
    let opts = chain::ChainOptions { workspace_root: root.clone(), scratch_dir: root.join("target/metainfer-scratch"), progress: true };
    match chain::run(&c, &ckb, &opts) {
        Ok(cand) => {
            println!("passed={}", cand.gates_passed);
            println!("{}", String::from_utf8_lossy(&cand.files["gates.toml"]));
            if let Some(l) = cand.files.get("verify.log") { println!("{}", String::from_utf8_lossy(l)); }
        }
        Err(e) => println!("{e}"),
    }
}
