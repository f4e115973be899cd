// Gate greedy_real: greedy tokens on the real Qwen2.5-Coder-0.5B-Instruct Q4_K_M against
// llama.cpp's (ckb/gates/vectors/llamacpp_greedy_qwen.txt, made by scripts/anchor/). Runs when
// METAINFER_REAL_MODEL names the model file; otherwise it reports itself skipped.

#[test]
fn greedy_matches_llama_cpp() {
    let Some(model) = std::env::var_os("METAINFER_REAL_MODEL").map(std::path::PathBuf::from).filter(|p| p.exists()) else {
        println!("GATE greedy_real skipped reason=\"METAINFER_REAL_MODEL is not set to an existing model file\"");
        return;
    };
    let data = std::path::PathBuf::from(std::env::var("METAINFER_GATE_DATA").expect("METAINFER_GATE_DATA names ckb/gates"));
    let text = std::fs::read_to_string(data.join("vectors/llamacpp_greedy_qwen.txt")).expect("llama.cpp greedy vectors");
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).collect();
    let mut engine = Engine::load(&model).expect("real model loads");
    let (mut cases, mut matched, mut total) = (0, 0, 0);
    let mut failures = Vec::new();
    for pair in lines.chunks(2) {
        let prompt: String = rt::serde_json::from_str(pair[0]).expect("prompt line is a JSON string");
        let want: Vec<u32> = pair[1].split(',').map(|s| s.trim().parse().expect("id")).collect();
        let ids = engine.tokenizer().encode(&prompt, true);
        let p = rt::GenParams::greedy(want.len());
        let (got, _) = engine.generate_ids(&ids, &p, &mut |_, _| true).expect("generate");
        let same = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
        println!("greedy_real: {prompt:?}: {same}/{} tokens match", want.len());
        cases += 1;
        matched += same;
        total += want.len();
        if got != want {
            failures.push(format!("{prompt:?}: got {got:?}, llama.cpp {want:?}"));
        }
    }
    println!("GATE greedy_real cases={cases} tokens_matched={matched} tokens={total}");
    assert!(failures.is_empty(), "greedy tokens differ from llama.cpp's:\n{}", failures.join("\n"));
}
