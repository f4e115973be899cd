//! The gemma3 engines (generated from ckb/models/gemma3.toml: the family-generic decoder with
//! gemma3's q/k norms, post norms, GeGLU and sliding-window layers; the SentencePiece tokenizer)
//! on the real gemma-3-270m Q4_K_M: greedy tokens and perplexity against llama.cpp's, and chat
//! with the CKB's default template (the file has none). Skips with a printed reason when the
//! model file is absent (scripts/fetch-model.sh gemma3 fetches it).

mod common;
use demo_engine::{load, Which};
use metainfer::Message;

#[test]
fn gemma3_greedy_tokens_match_llama_cpp() {
    if let Some(path) = common::gemma3() {
        common::greedy_against_llama_cpp(&path, "gemma3", Which::Auto);
    }
}

#[test]
fn gemma3_generic_engine_matches_llama_cpp_too() {
    if let Some(path) = common::gemma3() {
        common::greedy_against_llama_cpp(&path, "gemma3", Which::Generic);
    }
}

#[test]
fn gemma3_perplexity_within_one_percent_of_llama_cpp() {
    if let Some(path) = common::gemma3() {
        common::perplexity_against_llama_cpp(&path, "gemma3");
    }
}

#[test]
fn gemma3_chat_renders_the_ckb_template_and_follows_llama_cpp() {
    let Some(path) = common::gemma3() else {
        return;
    };
    let mut m = load(&path, Which::Auto).unwrap();
    m.set_threads(2);
    let msgs = [Message::user("Write a haiku about the sea.")];
    let prompt = m.render_chat(&msgs, true).unwrap();
    assert_eq!(
        prompt,
        "<bos><start_of_turn>user\nWrite a haiku about the sea.<end_of_turn>\n<start_of_turn>model\n"
    );
    let ids = m.encode(&prompt);
    assert_eq!(
        ids.iter().filter(|&&i| Some(i) == m.bos_to_add()).count(),
        1,
        "one BOS"
    );
    common::chat_follows_llama_cpp(m.as_mut(), "gemma3", &prompt);
}
