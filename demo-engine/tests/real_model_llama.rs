//! The llama-family engines (generated from ckb/models/llama.toml, no llama-specific Rust) on the
//! real SmolLM2-135M-Instruct Q4_1: greedy tokens against llama.cpp's, perplexity against
//! llama.cpp's, chat. (Files of another family: tests/model_files.rs.) Skips with a printed reason
//! when the model file is absent (scripts/fetch-model.sh fetches it).

mod common;
use demo_engine::{load, perplexity, Which};
use metainfer::{GenParams, Message};

/// The near tie (see ckb/gates/greedy_real.rs) and (llama.cpp's per-step margins, prompt,
/// llama.cpp's greedy ids) per case, from the committed vectors.
fn llama_cases() -> (f32, Vec<(Vec<f32>, String, Vec<u32>)>) {
    let text =
        std::fs::read_to_string(common::root().join("ckb/gates/vectors/llamacpp_greedy_llama.txt"))
            .unwrap();
    let (mut cases, mut margins, mut prompt) = (Vec::new(), Vec::new(), None::<String>);
    let mut near_tie = 0.1f32;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(t) = line.strip_prefix("# near tie:") {
            near_tie = t.split_whitespace().next().unwrap().parse().unwrap();
        } else if let Some(m) = line.strip_prefix("# top1-top2 logit margin per step:") {
            margins = m.split_whitespace().map(|v| v.parse().unwrap()).collect();
        } else if line.starts_with('#') {
            continue;
        } else if let Some(p) = prompt.take() {
            cases.push((
                std::mem::take(&mut margins),
                p,
                line.split(',').map(|s| s.trim().parse().unwrap()).collect(),
            ));
        } else {
            prompt = Some(metainfer::rt::serde_json::from_str(line).unwrap());
        }
    }
    (near_tie, cases)
}

fn greedy_against_llama_cpp(which: Which) {
    let Some(path) = common::smollm2() else {
        return;
    };
    let mut m = load(&path, which).unwrap();
    m.set_threads(2);
    let (near_tie, cases) = llama_cases();
    assert!(
        cases.len() >= 4,
        "the vectors file holds {} cases",
        cases.len()
    );
    let mut full = 0;
    for (margins, prompt, want) in &cases {
        let ids = m.encode(prompt);
        let (mut got, stats) = m
            .generate_ids(&ids, &GenParams::greedy(want.len()), &mut |_, _| true)
            .unwrap();
        // llama.cpp's list ends with the end-of-generation token it stopped at; ours stops before it
        if let (metainfer::rt::FinishReason::Stop, Some(&last)) = (stats.finish, want.last()) {
            if m.is_eog(last) {
                got.push(last);
            }
        }
        let same = got.iter().zip(want).take_while(|(a, b)| a == b).count();
        let must = margins
            .iter()
            .position(|&x| x < near_tie)
            .unwrap_or(want.len());
        println!(
            "{} {prompt:?}: {same}/{} match (first near tie at step {must})",
            m.hw(),
            want.len()
        );
        assert!(
            same >= must.min(want.len()),
            "{prompt:?} diverges from llama.cpp at step {same}: {got:?} vs {want:?}"
        );
        full += (same == want.len()) as usize;
    }
    println!(
        "{} of {} prompts match llama.cpp all the way",
        full,
        cases.len()
    );
}

#[test]
fn smollm2_greedy_tokens_match_llama_cpp() {
    greedy_against_llama_cpp(Which::Auto);
}

#[test]
fn smollm2_generic_engine_matches_llama_cpp_too() {
    greedy_against_llama_cpp(Which::Generic);
}

#[test]
fn smollm2_perplexity_within_one_percent_of_llama_cpp() {
    let Some(path) = common::smollm2() else {
        return;
    };
    let anchor =
        std::fs::read_to_string(common::root().join("ckb/gates/vectors/llamacpp_ppl_llama.txt"))
            .unwrap();
    let line = anchor.lines().find(|l| l.starts_with("ppl ")).unwrap();
    let f: Vec<&str> = line.split_whitespace().collect();
    let (llama, chunks_want, ctx): (f64, usize, usize) = (
        f[1].parse().unwrap(),
        f[5].parse().unwrap(),
        f[7].parse().unwrap(),
    );
    let text =
        std::fs::read_to_string(common::root().join("ckb/gates/vectors/ppl_text.txt")).unwrap();
    let mut m = load(&path, Which::Auto).unwrap();
    m.set_threads(2);
    let tokens = m.encode(&text);
    let (ppl, _, chunks) = perplexity(m.as_mut(), &tokens, ctx, |_, _| {}).unwrap();
    let rel = (ppl - llama).abs() / llama;
    println!("perplexity {ppl:.4} over {chunks} chunks of {ctx}; llama.cpp {llama:.4}; relative difference {rel:.2e}");
    assert_eq!(chunks, chunks_want);
    assert!(
        rel < 0.01,
        "perplexity {ppl} is not within 1% of llama.cpp's {llama}"
    );
}

#[test]
fn smollm2_chat_renders_the_files_template_and_follows_llama_cpp() {
    let Some(path) = common::smollm2() else {
        return;
    };
    let mut m = load(&path, Which::Auto).unwrap();
    m.set_threads(2);
    let msgs = [Message::user("What is the capital of France?")];
    let prompt = m.render_chat(&msgs, true).unwrap();
    // SmolLM2's template adds its default system prompt when there is none; the recorded
    // llama.cpp case is that exact text.
    let (near_tie, cases) = llama_cases();
    let Some((margins, _, want)) = cases.iter().find(|c| c.1 == prompt) else {
        panic!("no llama.cpp case renders as {prompt:?}: the template differs from llama.cpp's");
    };
    let ids = m.encode(&prompt);
    let (gen, _) = m
        .generate_ids(&ids, &GenParams::greedy(want.len()), &mut |_, _| true)
        .unwrap();
    // (llama.cpp itself answers this with "L'Étoile, la Marseillaise, ...": the 135M model,
    // greedy, does not name Paris here; what is checked is that we say what llama.cpp says.)
    let must = margins
        .iter()
        .position(|&x| x < near_tie)
        .unwrap_or(want.len());
    let same = gen.iter().zip(want).take_while(|(a, b)| a == b).count();
    println!(
        "chat: {same}/{} ids as llama.cpp's (first near tie at step {must}): {:?}",
        want.len(),
        m.decode(&gen)
    );
    assert!(
        must > 0,
        "the recorded case has a near tie at its first step"
    );
    assert!(
        same >= must,
        "chat reply diverges from llama.cpp at step {same}: {gen:?} vs {want:?}"
    );
}
