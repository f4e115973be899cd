// Gate greedy_real: greedy tokens on a real model of the family (Qwen2.5-Coder-0.5B-Instruct
// Q4_K_M for qwen2; SmolLM2-135M-Instruct Q4_1, and the same requantized to Q4_K_M by
// scripts/anchor/llama-quantize.sh, for llama; gemma-3-270m Q4_K_M for gemma3) against
// llama.cpp's (ckb/gates/vectors/llamacpp_greedy_<arch>*.txt, made by scripts/anchor/: the file
// whose `# model bytes:` line is the model's size). Runs when METAINFER_REAL_MODEL names a file
// of the engine's family and quant that such vectors were recorded on; otherwise it reports
// itself skipped.
//
// Each case must match llama.cpp token for token up to the first step where llama.cpp's own
// top-1/top-2 logit margin (recorded in the vectors file) is below the near tie: there two
// correct engines may pick differently. The near tie is 0.1, or the file's `# near tie:` line
// where the recorder found llama.cpp flipping its own picks at larger margins (its batch
// evaluation against its step-by-step decode). Cases that match all the way are counted in
// `full_matches`.

const NEAR_TIE: f32 = 0.1;

#[test]
fn greedy_matches_llama_cpp() {
    let Some(model) = gate_real_model("greedy_real") else { return };
    let data = std::path::PathBuf::from(std::env::var("METAINFER_GATE_DATA").expect("METAINFER_GATE_DATA names ckb/gates"));
    // the vectors recorded on this very file (its size in bytes on their `# model bytes:` line)
    let size = std::fs::metadata(&model).expect("the real model's size").len();
    let recorded_on = |t: &str| t.lines().find_map(|l| l.strip_prefix("# model bytes:")).and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok());
    let prefix = format!("llamacpp_greedy_{MODEL_ARCH}");
    let mut vectors: Vec<_> = std::fs::read_dir(data.join("vectors")).expect("ckb/gates/vectors").filter_map(|e| e.ok()).map(|e| e.path()).collect();
    vectors.sort();
    let name_ok = |p: &std::path::Path| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".txt"));
    let found = vectors.iter().filter(|p| name_ok(p)).map(|p| std::fs::read_to_string(p).expect("llama.cpp greedy vectors")).find(|t| recorded_on(t) == Some(size));
    let Some(text) = found else {
        println!("GATE greedy_real skipped reason=\"no ckb/gates/vectors/{prefix}*.txt was recorded on {} ({size} bytes); record llama.cpp's ids on it with scripts/anchor/llama-greedy.sh --record\"", model.display());
        return;
    };
    // cases: (margins, prompt, ids); a margins comment precedes each prompt line
    let mut cases: Vec<(Vec<f32>, String, Vec<u32>)> = Vec::new();
    let mut margins = Vec::new();
    let mut prompt: Option<String> = None;
    let mut near_tie = NEAR_TIE;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(t) = line.strip_prefix("# near tie:") {
            near_tie = t.split_whitespace().next().and_then(|v| v.parse().ok()).expect("near tie value");
        } else if let Some(m) = line.strip_prefix("# top1-top2 logit margin per step:") {
            margins = m.split_whitespace().map(|v| v.parse().expect("margin")).collect();
        } else if line.starts_with('#') {
        } else if let Some(p) = prompt.take() {
            let ids = line.split(',').map(|s| s.trim().parse().expect("id")).collect();
            cases.push((std::mem::take(&mut margins), p, ids));
        } else {
            prompt = Some(rt::serde_json::from_str(line).expect("prompt line is a JSON string"));
        }
    }
    assert!(cases.len() >= 3, "the vectors file holds {} cases", cases.len());
    let Some(mut engine) = gate_load_or_skip(&model, "greedy_real", "real model loads") else { return };
    let (mut full, mut matched, mut total, mut failures) = (0, 0, 0, Vec::new());
    for (margins, prompt, want) in &cases {
        let ids = engine.tokenizer().encode(prompt, true);
        let (mut got, stats) = engine.generate_ids(&ids, &rt::GenParams::greedy(want.len()), &mut |_, _| true).expect("generate");
        // llama.cpp's list ends with the end-of-generation token it stopped at; ours stops before it
        if let (rt::FinishReason::Stop, Some(&last)) = (stats.finish, want.last()) {
            if engine.tokenizer().is_eog(last) {
                got.push(last);
            }
        }
        let same = got.iter().zip(want).take_while(|(a, b)| a == b).count();
        let must = margins.iter().position(|&m| m < near_tie).unwrap_or(want.len()).min(want.len());
        println!("greedy_real: {prompt:?}: {same}/{} tokens match (required: {must})", want.len());
        total += want.len();
        matched += same;
        if same == want.len() && got.len() == want.len() {
            full += 1;
        } else if same < must {
            failures.push(format!("{prompt:?}: diverges at step {same} (llama.cpp margin {:?}): got {got:?}, llama.cpp {want:?}", margins.get(same)));
        }
    }
    println!(
        "GATE greedy_real cases={} full_matches={full} tokens_matched={matched} tokens={total} near_tie={near_tie}",
        cases.len()
    );
    assert!(failures.is_empty(), "greedy tokens differ from llama.cpp's before a near tie:\n{}", failures.join("\n"));
}
