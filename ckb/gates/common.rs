// Helpers the gates share. Not a gate: the verifier includes this file once into every
// candidate crate, before the gates, as module `gate_common`; each gate module sees its items
// through `use super::*`.

/// The tiny fixture model of this engine's family and format: the synthetic
/// `tiny-<MODEL_ARCH>.gguf`, or the synthetic AWQ checkpoint `tiny-<MODEL_ARCH>-awq/` for
/// safetensors engines (each made by the committed script beside it in the ckb's
/// gates/fixtures/, so a gate never depends on the directory a build runs from).
pub(crate) fn gate_tiny_model() -> std::path::PathBuf {
    let gates = std::env::var("METAINFER_GATE_DATA").expect("METAINFER_GATE_DATA names the ckb's gates/ directory");
    let name = if MODEL_FORMAT == "safetensors" { format!("tiny-{MODEL_ARCH}-awq") } else { format!("tiny-{MODEL_ARCH}.gguf") };
    std::path::PathBuf::from(gates).join("fixtures").join(name)
}

/// The real model file of this engine's family: the first file in METAINFER_REAL_MODEL (one
/// path, or several joined like PATH) whose `general.architecture` is MODEL_ARCH. None after
/// printing `GATE <gate> skipped reason=...` when there is none (or the engine loads another
/// format than GGUF).
pub(crate) fn gate_real_model(gate: &str) -> Option<std::path::PathBuf> {
    let skip = |why: String| {
        println!("GATE {gate} skipped reason=\"{}\"", why.replace('"', "'"));
        None
    };
    if MODEL_FORMAT != "gguf" {
        return skip(format!("the real models are GGUF files; this engine loads {MODEL_FORMAT} checkpoints"));
    }
    let Some(list) = std::env::var_os("METAINFER_REAL_MODEL") else {
        return skip("METAINFER_REAL_MODEL is not set".into());
    };
    let files: Vec<std::path::PathBuf> = std::env::split_paths(&list).filter(|p| p.is_file()).collect();
    for f in &files {
        if Gguf::open(f).ok().and_then(|g| g.get_str("general.architecture").ok().map(|a| a == MODEL_ARCH)) == Some(true) {
            return Some(f.clone());
        }
    }
    skip(format!("none of the {} existing file(s) in METAINFER_REAL_MODEL is a {MODEL_ARCH} GGUF", files.len()))
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
