//! The llama-family engines (generated from ckb/models/llama.toml, no llama-specific Rust) on the
//! real SmolLM2-135M-Instruct Q4_1: greedy tokens against llama.cpp's, perplexity against
//! llama.cpp's, chat. (Files of another family: tests/model_files.rs.) Skips with a printed reason
//! when the model file is absent (scripts/fetch-model.sh fetches it).

mod common;
use demo_engine::{load, Which};
use metainfer::Message;

fn greedy_against_llama_cpp(which: Which) {
    if let Some(path) = common::smollm2() {
        common::greedy_against_llama_cpp(&path, "llama", which);
    }
}

#[test]
fn smollm2_greedy_tokens_match_llama_cpp() {
    greedy_against_llama_cpp(Which::Auto);
}

#[test]
fn smollm2_generic_engine_matches_llama_cpp_too() {
    greedy_against_llama_cpp(Which::Generic);
}

/// The llama Q4_K_M engines (`LlamaQ4k`, `LlamaQ4kAvx512`: Q4_K, Q5_0, Q6_K and Q8_0 kernels in
/// the llama decoder) on a real llama-family Q4_K_M file against llama.cpp's ids on that file
/// (ckb/gates/vectors/llamacpp_greedy_llama_q4_k_m.txt). Skips where the file was not made.
#[test]
fn smollm2_q4_k_m_greedy_tokens_match_llama_cpp() {
    let Some(path) = common::smollm2_q4_k_m() else {
        return;
    };
    if !demo_engine::has_avx2() {
        println!("skipped: the x86 llama Q4_K_M engines need AVX2 (the generic one is held to llama.cpp's perplexity below)");
        return;
    }
    let mut which = vec![Which::Auto, Which::Avx2];
    if demo_engine::has_avx512() {
        which.push(Which::Avx512);
    }
    for w in which {
        common::greedy_against_llama_cpp(&path, "llama_q4_k_m", w);
    }
}

/// The llama Q4_K_M engines' perplexity on the same file within 1% of llama.cpp's
/// (vectors/llamacpp_ppl_llama_q4_k_m.txt), the generic one (`LlamaQ4kPortable`) included: its
/// scalar kernels sum in another order than llama.cpp's and its greedy ids leave llama.cpp's at a
/// pick whose margin is 0.348 (above the near tie, so the greedy_real gate does not hold it to
/// them), while its perplexity stays as close as the AVX2 engine's.
#[test]
fn smollm2_q4_k_m_perplexity_within_one_percent_of_llama_cpp() {
    let Some(path) = common::smollm2_q4_k_m() else {
        return;
    };
    let mut which = vec![Which::Generic];
    if demo_engine::has_avx2() {
        which.push(Which::Avx2);
    }
    for w in which {
        common::perplexity_of_engine_against_llama_cpp(&path, "llama_q4_k_m", w);
    }
}

#[test]
fn smollm2_perplexity_within_one_percent_of_llama_cpp() {
    if let Some(path) = common::smollm2() {
        common::perplexity_against_llama_cpp(&path, "llama");
    }
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
    // llama.cpp case is that exact text. (llama.cpp itself answers this with "L'Étoile, la
    // Marseillaise, ...": the 135M model, greedy, does not name Paris here; what is checked is
    // that we say what llama.cpp says.)
    let must = common::chat_follows_llama_cpp(m.as_mut(), "llama", &prompt);
    assert!(
        must > 0,
        "the recorded case has a near tie at its first step"
    );
}
