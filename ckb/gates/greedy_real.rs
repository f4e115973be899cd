// Gate greedy_real: greedy tokens on the family's real model (Qwen2.5-Coder-0.5B-Instruct Q4_K_M
// for qwen2, SmolLM2-135M-Instruct Q4_1 for llama) against llama.cpp's
// (ckb/gates/vectors/llamacpp_greedy_<arch>.txt, made by scripts/anchor/). Runs when
// METAINFER_REAL_MODEL names a file of the engine's family; otherwise it reports itself skipped.
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
    let text = std::fs::read_to_string(data.join(format!("vectors/llamacpp_greedy_{MODEL_ARCH}.txt"))).expect("llama.cpp greedy vectors");
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
