//! Loading model files: the tiny synthetic qwen2 GGUF works with both generated engines, and
//! files the engines were not generated for, or that are malformed, are refused with an error
//! that says what differs — never a panic.

mod common;
use demo_engine::{load, Which};
use metainfer::GenParams;

fn tiny_bytes() -> Vec<u8> {
    std::fs::read(common::tiny_model()).unwrap()
}

fn write_temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let dir = common::root().join("target/test-model-files");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Byte offset just past the GGUF string `s` (u64 length + bytes) in `b`.
fn after_string(b: &[u8], s: &str) -> usize {
    let mut pat = (s.len() as u64).to_le_bytes().to_vec();
    pat.extend_from_slice(s.as_bytes());
    b.windows(pat.len()).position(|w| w == pat).unwrap_or_else(|| panic!("{s} not in file")) + pat.len()
}

fn load_err(bytes: &[u8], name: &str, which: Which) -> String {
    match load(&write_temp(name, bytes), which) {
        Ok(_) => panic!("{name} loaded but should be refused"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn tiny_model_generates_with_both_engines() {
    for which in [Which::Auto, Which::Generic] {
        let mut m = load(&common::tiny_model(), which).unwrap();
        let ids = m.encode("hello world");
        let mut p = GenParams::greedy(8);
        p.stop_at_eos = false;
        let (gen, stats) = m.generate_ids(&ids, &p, &mut |_, _| true).unwrap();
        assert_eq!(gen.len(), 8);
        assert_eq!(stats.prompt_tokens, ids.len());
    }
}

#[test]
fn other_architecture_is_refused_with_what_differs() {
    let mut b = tiny_bytes();
    let at = after_string(&b, "general.architecture") + 4; // value type u32
    let val = after_string(&b[at..], "qwen2") + at - 5;
    b[val..val + 5].copy_from_slice(b"llama");
    let msg = load_err(&b, "arch.gguf", Which::Generic);
    assert!(msg.contains("general.architecture") && msg.contains("llama") && msg.contains("qwen2"), "{msg}");
}

#[test]
fn tensor_type_not_compiled_in_is_refused() {
    // blk.1.ffn_gate.weight is F32; relabel it F16 (a smaller, still valid tensor)
    let mut b = tiny_bytes();
    let at = after_string(&b, "blk.1.ffn_gate.weight");
    let n_dims = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
    let ty = at + 4 + 8 * n_dims;
    assert_eq!(u32::from_le_bytes(b[ty..ty + 4].try_into().unwrap()), 0, "fixture tensor is F32");
    b[ty..ty + 4].copy_from_slice(&1u32.to_le_bytes());
    let msg = load_err(&b, "f16.gguf", Which::Generic);
    assert!(msg.contains("blk.1.ffn_gate.weight") && msg.contains("F16") && msg.contains("regenerate"), "{msg}");
}

#[test]
fn truncated_and_garbage_files_are_format_errors() {
    let b = tiny_bytes();
    for cut in [0, 3, 7, 23, 100, 4096, b.len() / 2, b.len() - 1] {
        let msg = load_err(&b[..cut], "cut.gguf", Which::Generic);
        assert!(msg.starts_with("malformed model file") || msg.contains("cannot read"), "cut at {cut}: {msg}");
    }
    let msg = load_err(b"this is not a gguf file at all", "text.gguf", Which::Generic);
    assert!(msg.contains("magic"), "{msg}");
    let missing = common::root().join("target/does-not-exist.gguf");
    let msg = load(&missing, Which::Generic).err().unwrap().to_string();
    assert!(msg.contains("does-not-exist.gguf"), "{msg}");
}
