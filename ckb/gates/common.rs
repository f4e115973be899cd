// Helpers the gates share. Not a gate: the verifier includes this file once into every
// candidate crate, before the gates, as module `gate_common`; each gate module sees its items
// through `use super::*`.

/// The tiny fixture model of this engine's format: the synthetic qwen2 GGUF, or the synthetic
/// AWQ checkpoint for safetensors engines (both made by the committed scripts beside them in
/// the ckb's gates/fixtures/, so a gate never depends on the directory a build runs from).
pub(crate) fn gate_tiny_model() -> std::path::PathBuf {
    let gates = std::env::var("METAINFER_GATE_DATA").expect("METAINFER_GATE_DATA names the ckb's gates/ directory");
    let name = if MODEL_FORMAT == "safetensors" { "tiny-qwen2-awq" } else { "tiny-qwen2.gguf" };
    std::path::PathBuf::from(gates).join("fixtures").join(name)
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
