// Helpers the gates share. Not a gate: the verifier includes this file once into every
// candidate crate, before the gates, as module `gate_common`; each gate module sees its items
// through `use super::*`.

/// The tiny fixture model of this engine's format: the synthetic qwen2 GGUF, or the synthetic
/// AWQ checkpoint for safetensors engines (both made by committed scripts under tests/).
pub(crate) fn gate_tiny_model() -> std::path::PathBuf {
    let fixtures = std::env::var("METAINFER_FIXTURES").expect("METAINFER_FIXTURES names tests/fixtures");
    let name = if MODEL_FORMAT == "safetensors" { "tiny-qwen2-awq" } else { "tiny-qwen2.gguf" };
    std::path::PathBuf::from(fixtures).join(name)
}

/// The engine on `model`, or None after printing `GATE <gate> skipped reason=...` where a CUDA
/// engine finds no usable GPU (no driver, no device): the gate cannot run there, and says so.
/// Any other load error fails the gate with `what`.
pub(crate) fn gate_load_or_skip(model: &std::path::Path, gate: &str, what: &str) -> Option<Engine> {
    match Engine::load(model) {
        Err(rt::Error::NoDevice(why)) => {
            println!("GATE {gate} skipped reason=\"{}\"", why.replace('"', "'"));
            None
        }
        r => Some(r.expect(what)),
    }
}
