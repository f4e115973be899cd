//! The chain on the real CKB: plan, implement and review the demo's engines (fast), and the
//! generated engine's size budget.

use metainfer_build::chain;
use metainfer_build::{Arg, Ckb, Constraints};

fn constraints(ckb: &Ckb, hw: &str) -> Constraints {
    let args = [Arg::str("model", "qwen2"), Arg::str("hw", hw), Arg::str("quant", "q4_k_m")];
    Constraints::from_args(&args, ckb).expect("valid constraints")
}

#[test]
fn demo_engines_plan_implement_and_pass_review() {
    let ckb = Ckb::load(&Ckb::default_root()).expect("ckb loads");
    for hw in ["x86_64-avx2", "generic"] {
        let c = constraints(&ckb, hw);
        let (plan, codes, engine) = chain::implement_engine(&c, &ckb, false).expect("implements");
        let problems = chain::review_engine(&plan, &codes, &ckb);
        assert!(problems.is_empty(), "{hw}: review problems: {problems:#?}");
        // the budget counts lines of code: not blank, not only a comment
        let code = engine.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("//")).count();
        println!("{hw}: engine.rs has {} lines, {code} of code", engine.lines().count());
        assert!(code < 3000, "{hw}: engine.rs has {code} lines of code, over the 3,000-line budget");
        syn::parse_file(&engine).expect("engine.rs parses");
        // only the selected tensor types are compiled in
        assert!(engine.contains("mod dot_q4_k {") && !engine.contains("mod dot_bf16 {"), "{hw}: wrong kernels");
        if hw == "generic" {
            assert!(!engine.contains("_avx2"), "generic engine must not contain avx2 kernels");
        }
    }
}
