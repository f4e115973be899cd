//! The chain on the real CKB: plan, implement and review the demo's engines (fast), and the
//! generated engine's size budget.

use metainfer_build::chain;
use metainfer_build::{Arg, Ckb, Constraints};

fn constraints(ckb: &Ckb, model: &str, hw: &str) -> Constraints {
    let args = [
        Arg::str("model", model),
        Arg::str("hw", hw),
        Arg::str("quant", "q4_k_m"),
    ];
    Constraints::from_args(&args, ckb).expect("valid constraints")
}

#[test]
fn demo_engines_plan_implement_and_pass_review() {
    let ckb = Ckb::load(Ckb::default_root()).expect("ckb loads");
    // qwen2's engines, gemma3's (the decoder with every optional part of the family TOML) and
    // qwen3's (a family added as data alone)
    for (model, hw) in [
        ("qwen2", "x86_64-avx2"),
        ("qwen2", "x86_64-avx512"),
        ("qwen2", "generic"),
        ("gemma3", "x86_64-avx2"),
        ("qwen3", "x86_64-avx512"),
    ] {
        let c = constraints(&ckb, model, hw);
        let hw = format!("{model} {hw}");
        let (plan, codes, engine) = chain::implement_engine(&c, &ckb, false).expect("implements");
        let problems = chain::review_engine(&plan, &codes, &ckb);
        assert!(problems.is_empty(), "{hw}: review problems: {problems:#?}");
        // the budget counts lines of code: not blank, not only a comment, outside the generated
        // `header` module (the constraints and the family TOML's data as constants: tensor names,
        // metadata keys, pre-tokenizer regexes; it is reported beside the count)
        let header = engine
            .split("\nmod header {\n")
            .nth(1)
            .and_then(|h| h.split("\n}\n").next())
            .expect("a header module");
        let is_code = |l: &&str| !l.is_empty() && !l.starts_with("//");
        let header_code = header.lines().map(str::trim).filter(is_code).count() + 2;
        let code = engine.lines().map(str::trim).filter(is_code).count() - header_code;
        println!(
            "{hw}: engine.rs has {} lines, {code} of code and {header_code} of header",
            engine.lines().count()
        );
        // where the budget goes: code lines per section, largest first
        let mut per: Vec<(usize, &str)> = engine
            .split("\nmod ")
            .skip(1)
            .filter_map(|m| {
                let (name, body) = m.split_once(" {\n")?;
                Some((body.lines().map(str::trim).filter(is_code).count(), name))
            })
            .collect();
        per.sort_by(|a, b| b.cmp(a));
        println!("{hw}: {per:?}");
        // DESIGN.md's budget is 3,000; the engines stood at 2,994 before the tiled batch
        // attention issue 23 asks for (attend_many: the shared lane form plus its AVX2 kernels,
        // ~130 lines) and the per-token pool tasks of the forward pass (~25), so the limit is
        // 3,200 until the planner decides (see the issue notes of 2026-12-05); the four-row gemv
        // (dot_rows4: dispatch, Q8_0 and Q5_0 kernels, the shared reduction, ~65 lines; decode
        // +10-15% on gemma3) moved it to 3,300 (issue note of 2026-12-05, session 6); several
        // sequences in one pass for continuous batching (issue 22: Engine::step over KV slots,
        // attention over several works, matvec_toks; ~105 lines) to 3,400; prefill attention in
        // blocks with an online softmax for long prompts (issue 23: flash_attn, its lane form
        // with the AVX2 / AVX-512 tile products, ~155 lines; prefill of 16k tokens was 0.84x
        // llama.cpp's) to 3,560; ggml's expf without the underflows of its unused lanes (+4) and
        // the Q5_0 gemv's block sums made generic, for its VNNI form (+10 in every x86 engine,
        // +32 in the avx512 ones; decode +11-12%, issue 23's decode from an empty context was
        // 0.90-0.99x) to 3,580; the matmul's prefetch in its four-token path and its tile buffers
        // kept between tasks (+8 in every engine; the Q8_0 output matrix's share of a batched
        // step of four -35%, malloc ~3% -> <1%) and the Q5_0 8 x 4 tile with VNNI in the avx512
        // engines (+8; 512-token prefill +15%; issue 22, session 11) to 3,600; refusing the
        // parts of a file the engine does not implement instead of ignoring them (+24 in every
        // engine: a tensor the family does not name, such as Llama 3.x's rope_freqs.weight, rope
        // scaling, partial rope; each loaded and generated other text than llama.cpp's without a
        // word; session 14) to 3,625; Llama 3.x files in the llama family (rope frequency
        // factors in the loader and the rope table, the llama-bpe pre-tokenizer's ignore_merges
        // and BOS default: +17 in every engine, each branch folding away where the family lacks
        // the part; session 15) to 3,650; Q8_0's VNNI gemv and 8 x 4 tiles in llama.cpp's order
        // in the avx512 engines (+45 there, with its AVX2 four-token kernel, dead code in them,
        // moved out; prefill of an all-Q8_0 SmolLM2 +65%, from 0.70x llama.cpp's to 1.19x;
        // session 19) to 3,700; chat template variables (transformers' apply_chat_template
        // kwargs, the servers' chat_template_kwargs: Qwen3's enable_thinking; render_chat_with,
        // chat_with and the template's check of the engine's own names, +11 in every engine;
        // session 21) to 3,720. Session 22's set_chat_template / chat_template and the server's
        // chat_prompt (a reply that starts inside a think block the template opened) took +16 in
        // every engine and fit: qwen2 and qwen3 avx512 at 3,719. Session 23's OpenAI sampling
        // parameters that were accepted and ignored until then (frequency_penalty,
        // presence_penalty, logit_bias in the sampler: +6 in every engine, the message template
        // value moved into rt: -1) to 3,740: qwen2 avx512 at 3,724.
        assert!(
            code < 3740,
            "{hw}: engine.rs has {code} lines of code, over the 3,740-line budget"
        );
        // the header is data and the cpu check, not a place for code to hide from the budget
        assert!(
            header_code < 100,
            "{hw}: the generated header has {header_code} lines of code"
        );
        syn::parse_file(&engine).expect("engine.rs parses");
        // only the selected tensor types are compiled in
        assert!(
            engine.contains("mod dot_q4_k {") && !engine.contains("mod dot_bf16 {"),
            "{hw}: wrong kernels"
        );
        if hw.ends_with("generic") {
            assert!(
                !engine.contains("_avx2"),
                "generic engine must not contain avx2 kernels"
            );
        }
    }
}

#[test]
fn cuda_engines_plan_host_code_and_device_code_apart() {
    let ckb = Ckb::load(Ckb::default_root()).expect("ckb loads");
    for (hw, quant) in [("sm_80", "q4_k_m"), ("sm_89", "q4_k_m"), ("sm_90", "awq")] {
        let args = [
            Arg::str("model", "qwen2"),
            Arg::str("hw", hw),
            Arg::str("quant", quant),
        ];
        let c = Constraints::from_args(&args, &ckb).expect("valid constraints");
        let (plan, codes, engine) = chain::implement_engine(&c, &ckb, false).expect("implements");
        let problems = chain::review_engine(&plan, &codes, &ckb);
        assert!(problems.is_empty(), "{hw}: review problems: {problems:#?}");
        let ids: Vec<&str> = plan.slots.iter().map(|s| s.id.as_str()).collect();
        // the device code is a slot of its own, kept out of engine.rs
        let device: Vec<&str> = plan
            .slots
            .iter()
            .filter(|s| s.device)
            .map(|s| s.id.as_str())
            .collect();
        assert_eq!(device, ["kernels_cuda"], "{hw}: device slots");
        assert!(
            !engine.contains("__global__") && !engine.contains("mod kernels_cuda {"),
            "{hw}: cuda c in engine.rs"
        );
        // no CPU compute path: no matvec, CPU KV cache or dot kernels (the dot slots give blocks only)
        for cpu_only in ["matvec", "state_kv", "simd_avx2"] {
            assert!(
                !ids.contains(&cpu_only),
                "{hw}: cpu section {cpu_only} in a cuda plan: {ids:?}"
            );
        }
        assert!(
            plan.slots
                .iter()
                .filter(|s| s.id.starts_with("dot_"))
                .all(|s| s.variants == ["blocks"]),
            "{hw}: dot slots beyond blocks"
        );
        assert!(
            !engine.contains("fn dot_row("),
            "{hw}: a CPU dispatch in a cuda engine"
        );
        assert!(
            engine.contains("forward_decoder/cuda")
                && engine.contains(&format!("pub(crate) const CUDA_ARCH: &str = \"{hw}\";")),
            "{hw}: header / forward"
        );
        assert!(
            engine.contains(&format!(
                "pub(crate) const KERNELS_CUDA_PTX: &str = \"kernels_cuda.{hw}.ptx\";"
            )),
            "{hw}: PTX name"
        );
        if quant == "awq" {
            assert!(
                ids.contains(&"hf_reader") && ids.contains(&"tokenizer_hf"),
                "{hw} awq: format swaps: {ids:?}"
            );
            assert!(
                engine.contains("GgmlType::AWQ_INT4 => \"awq_int4\""),
                "{hw} awq: kernel suffix"
            );
        }
        // the CPU dot-kernel gate does not apply; the nvrtc gate does
        let gates = chain::gate_ids(&plan, &ckb);
        assert!(
            !gates.contains(&"kernels".to_string()) && gates.contains(&"nvrtc".to_string()),
            "{hw}: gates {gates:?}"
        );
        syn::parse_file(&engine).expect("engine.rs parses");
        // with NVRTC: the entry's kernels/ holds the source and PTX for the arch
        if metainfer_build::nvrtc::available().is_ok() {
            let files = chain::kernel_files(&plan, &ckb).expect("nvrtc compiles the kernels");
            let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
            assert_eq!(
                names,
                [
                    "kernels/kernels_cuda.cu".to_string(),
                    format!("kernels/kernels_cuda.{hw}.ptx")
                ],
                "{hw}"
            );
            let ptx = String::from_utf8(files[1].1.clone()).unwrap();
            assert!(
                ptx.contains(&format!(".target {hw}")) && ptx.contains(".entry gemv_awq_int4"),
                "{hw}: ptx"
            );
        }
    }
}
