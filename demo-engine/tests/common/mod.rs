//! Shared by the demo's integration tests.
#![allow(dead_code)]
#![allow(
    clippy::disallowed_methods,
    reason = "a test harness reads its own knobs and hands cargo's variables on"
)]

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

/// SmolLM2-135M-Instruct requantized to Q4_K_M by llama.cpp's own quantizer
/// (`models/SmolLM2-135M-Instruct.Q4_K_M.gguf`, made by scripts/anchor/llama-quantize.sh from the
/// Q4_1 file; no registry these machines reach has a llama-family Q4_K_M file), or `None` with the
/// reason printed.
pub fn smollm2_q4_k_m() -> Option<PathBuf> {
    let p = root().join("models/SmolLM2-135M-Instruct.Q4_K_M.gguf");
    let how = format!(
        "make it with scripts/anchor/llama-quantize.sh models/SmolLM2-135M-Instruct.Q4_1.gguf {} (needs the llama.cpp of scripts/anchor/build-llama-cpp.sh)",
        p.display()
    );
    present(p, &how)
}

/// The file `var` names, else `models/<default>`, when it exists.
fn model_file(var: &str, default: &str) -> Option<PathBuf> {
    let p = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("models").join(default));
    present(p, "run scripts/fetch-model.sh")
}

/// `p` when it exists, else `None` after printing that the test skips and `how` to get it.
fn present(p: PathBuf, how: &str) -> Option<PathBuf> {
    if p.exists() {
        Some(p)
    } else {
        println!("skipped: {} is absent; {how}", p.display());
        None
    }
}

pub fn tiny_model() -> PathBuf {
    root().join("ckb/gates/fixtures/tiny-qwen2.gguf")
}

/// The synthetic llama-family fixture (all F32, tied output).
pub fn tiny_llama() -> PathBuf {
    root().join("ckb/gates/fixtures/tiny-llama.gguf")
}

/// The llama fixture whose head dim (32, llama.attention.key_length) is not embedding / heads (48).
pub fn tiny_llama_head_dim() -> PathBuf {
    root().join("ckb/gates/fixtures/tiny-llama-head-dim.gguf")
}

/// The synthetic qwen3-family fixture (all F32, tied output, head dim 64 != embedding / heads,
/// Qwen3's chat template).
pub fn tiny_qwen3() -> PathBuf {
    root().join("ckb/gates/fixtures/tiny-qwen3.gguf")
}

/// The engine this machine runs best.
pub fn which() -> demo_engine::Which {
    demo_engine::Which::Auto
}

/// llama.cpp's per-step margins, the prompt, llama.cpp's greedy ids.
pub type Case = (Vec<f32>, String, Vec<u32>);

/// The near tie (see ckb/gates/greedy_real.rs) and the cases, from the committed vectors.
pub fn llama_cpp_greedy_cases(arch: &str) -> (f32, Vec<Case>) {
    let path = root().join(format!("ckb/gates/vectors/llamacpp_greedy_{arch}.txt"));
    let (near_tie, cases) = llama_cpp_greedy_file(&path);
    let cases = cases
        .into_iter()
        .map(|c| (c.margins, c.prompt, c.ids))
        .collect();
    (near_tie, cases)
}

/// One case of a llama.cpp greedy vectors file.
pub struct GreedyCase {
    /// llama.cpp's top1-top2 logit margin at each step.
    pub margins: Vec<f32>,
    pub prompt: String,
    /// llama.cpp's tokenization of the prompt (empty where the file has no `# prompt ids:`).
    pub prompt_ids: Vec<u32>,
    /// llama.cpp's greedy ids.
    pub ids: Vec<u32>,
}

/// The near tie and the cases of the greedy vectors file at `path` (the format of
/// ckb/gates/vectors/llamacpp_greedy_qwen2.txt).
pub fn llama_cpp_greedy_file(path: &std::path::Path) -> (f32, Vec<GreedyCase>) {
    let text = std::fs::read_to_string(path).unwrap();
    let ids = |s: &str| -> Vec<u32> { s.split(',').map(|v| v.trim().parse().unwrap()).collect() };
    let (mut cases, mut margins, mut prompt_ids) = (Vec::new(), Vec::new(), Vec::new());
    let mut prompt = None::<String>;
    let mut near_tie = 0.1f32;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(t) = line.strip_prefix("# near tie:") {
            near_tie = t.split_whitespace().next().unwrap().parse().unwrap();
        } else if let Some(m) = line.strip_prefix("# top1-top2 logit margin per step:") {
            margins = m.split_whitespace().map(|v| v.parse().unwrap()).collect();
        } else if let Some(p) = line.strip_prefix("# prompt ids:") {
            prompt_ids = ids(p);
        } else if line.starts_with('#') {
            continue;
        } else if let Some(p) = prompt.take() {
            cases.push(GreedyCase {
                margins: std::mem::take(&mut margins),
                prompt: p,
                prompt_ids: std::mem::take(&mut prompt_ids),
                ids: ids(line),
            });
        } else {
            prompt = Some(metainfer::rt::serde_json::from_str(line).unwrap());
        }
    }
    (near_tie, cases)
}

/// `m`'s greedy ids for the prompt `ids` (as many as `want` holds) and how many of them lead
/// equal to llama.cpp's `want`. llama.cpp's list ends with the end-of-generation token it stopped
/// at, ours stops before it: that token is appended where ours stopped at it.
pub fn greedy_prefix(
    m: &mut dyn demo_engine::Model,
    ids: &[u32],
    want: &[u32],
) -> (Vec<u32>, usize) {
    let params = metainfer::GenParams::greedy(want.len());
    let (mut got, stats) = m.generate_ids(ids, &params, &mut |_, _| true).unwrap();
    if let (metainfer::rt::FinishReason::Stop, Some(&last)) = (stats.finish, want.last()) {
        if m.is_eog(last) {
            got.push(last);
        }
    }
    let same = got.iter().zip(want).take_while(|(a, b)| a == b).count();
    (got, same)
}

/// Greedy ids of the engine `which` of the file's family against llama.cpp's recorded ones
/// (vectors/llamacpp_greedy_<arch>.txt): equal up to the first step whose llama.cpp margin is
/// below the file's near tie.
pub fn greedy_against_llama_cpp(path: &std::path::Path, arch: &str, which: demo_engine::Which) {
    let mut m = demo_engine::load(path, which).unwrap();
    m.set_threads(2);
    let (near_tie, cases) = llama_cpp_greedy_cases(arch);
    assert!(
        cases.len() >= 4,
        "the vectors file holds {} cases",
        cases.len()
    );
    let mut full = 0;
    for (margins, prompt, want) in &cases {
        let ids = m.encode(prompt);
        let (got, same) = greedy_prefix(m.as_mut(), &ids, want);
        let must = margins
            .iter()
            .position(|&x| x < near_tie)
            .unwrap_or(want.len());
        // where it diverges, llama.cpp's margin there (at or above the near tie: a divergence
        // after a near tie that both engines resolved alike, which the rule does not hold)
        let at = margins
            .get(same)
            .filter(|_| same < want.len())
            .map_or(String::new(), |x| {
                format!(", llama.cpp margin {x:.3} at the divergence")
            });
        println!(
            "{} [{arch}] {prompt:?}: {same}/{} match (first near tie at step {must}{at})",
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

/// Perplexity over ckb/gates/vectors/ppl_text.txt within 1% of llama-perplexity's recorded
/// figure (vectors/llamacpp_ppl_<arch>.txt: same chunks, same context), with the `auto` engine.
pub fn perplexity_against_llama_cpp(path: &std::path::Path, arch: &str) {
    perplexity_of_engine_against_llama_cpp(path, arch, demo_engine::Which::Auto);
}

/// perplexity_against_llama_cpp with the engine `which` picks.
pub fn perplexity_of_engine_against_llama_cpp(
    path: &std::path::Path,
    arch: &str,
    which: demo_engine::Which,
) {
    let anchor =
        std::fs::read_to_string(root().join(format!("ckb/gates/vectors/llamacpp_ppl_{arch}.txt")))
            .unwrap();
    let line = anchor.lines().find(|l| l.starts_with("ppl ")).unwrap();
    let f: Vec<&str> = line.split_whitespace().collect();
    let (llama, chunks_want, ctx): (f64, usize, usize) = (
        f[1].parse().unwrap(),
        f[5].parse().unwrap(),
        f[7].parse().unwrap(),
    );
    let text = std::fs::read_to_string(root().join("ckb/gates/vectors/ppl_text.txt")).unwrap();
    let mut m = demo_engine::load(path, which).unwrap();
    m.set_threads(2);
    let tokens = m.encode(&text);
    let (ppl, _, chunks) = demo_engine::perplexity(m.as_mut(), &tokens, ctx, |_, _| {}).unwrap();
    let rel = (ppl - llama).abs() / llama;
    println!(
        "perplexity {ppl:.4} ({}) over {chunks} chunks of {ctx}; llama.cpp {llama:.4}; relative difference {rel:.2e}",
        m.name()
    );
    assert_eq!(chunks, chunks_want);
    assert!(
        rel < 0.01,
        "perplexity {ppl} is not within 1% of llama.cpp's {llama}"
    );
}

/// The real gemma3 model (gemma-3-270m Q4_K_M, or `METAINFER_REAL_MODEL_GEMMA3`), or `None` with
/// the reason printed.
pub fn gemma3() -> Option<PathBuf> {
    model_file("METAINFER_REAL_MODEL_GEMMA3", "gemma-3-270m-q4_k_m.gguf")
}

/// Greedy-decodes the rendered chat `prompt` with `m` and checks the reply against llama.cpp's
/// recorded one for the same text (vectors/llamacpp_greedy_<arch>.txt): equal up to the first
/// step whose llama.cpp margin is below the file's near tie. Returns that step.
pub fn chat_follows_llama_cpp(m: &mut dyn demo_engine::Model, arch: &str, prompt: &str) -> usize {
    let (near_tie, cases) = llama_cpp_greedy_cases(arch);
    let Some((margins, _, want)) = cases.iter().find(|c| c.1 == prompt) else {
        panic!("no llama.cpp case renders as {prompt:?}: the template differs from llama.cpp's");
    };
    let ids = m.encode(prompt);
    let (gen, _) = m
        .generate_ids(
            &ids,
            &metainfer::GenParams::greedy(want.len()),
            &mut |_, _| true,
        )
        .unwrap();
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
        same >= must,
        "chat reply diverges from llama.cpp at step {same}: {gen:?} vs {want:?}"
    );
    must
}
