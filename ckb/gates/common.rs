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
/// path, or several joined like PATH) whose `general.architecture` is MODEL_ARCH and whose
/// tensor types the engine compiles (a family's engines of two quants share the list). None
/// after printing `GATE <gate> skipped reason=...` when there is none (or the engine loads
/// another format than GGUF).
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
        let Ok(g) = Gguf::open(f) else { continue };
        if g.get_str("general.architecture").ok() == Some(MODEL_ARCH) && g.tensors.iter().all(|t| COMPILED_TYPES.contains(&t.ty)) {
            return Some(f.clone());
        }
    }
    skip(format!("none of the {} existing file(s) in METAINFER_REAL_MODEL is a {MODEL_ARCH} GGUF of this engine's quant ({QUANT})", files.len()))
}

/// Whether this machine can run the engine's code: false, after printing `GATE <gate> skipped
/// reason=...`, where the cpu lacks an instruction set the engine was generated for
/// (`check_cpu`: an x86_64-avx512 engine generated on an AVX2-only host). The gate cannot run
/// there and says so, as a cuda engine's does without a GPU, instead of dying of SIGILL.
pub(crate) fn gate_cpu_runs(gate: &str) -> bool {
    match check_cpu() {
        Ok(()) => true,
        Err(e) => {
            println!("GATE {gate} skipped reason=\"{}\"", e.to_string().replace('"', "'"));
            false
        }
    }
}

/// The engine on `model`, or None after printing `GATE <gate> skipped reason=...` where it
/// cannot run here: a cpu engine on a cpu without its instruction sets (`gate_cpu_runs`), a CUDA
/// engine without a usable GPU (no driver, no device). Any other load error fails the gate with
/// `what`.
pub(crate) fn gate_load_or_skip(model: &std::path::Path, gate: &str, what: &str) -> Option<Engine> {
    if !gate_cpu_runs(gate) {
        return None;
    }
    match Engine::load(model) {
        Err(rt::Error::NoDevice(why)) => {
            println!("GATE {gate} skipped reason=\"{}\"", why.replace('"', "'"));
            None
        }
        r => Some(r.expect(what)),
    }
}

/// A file a gate writes into the candidate crate's directory (an edited model), removed again
/// when dropped, also when the gate panics on the way.
pub(crate) struct GateTempFile(pub(crate) std::path::PathBuf);

impl GateTempFile {
    pub(crate) fn new(name: &str, bytes: &[u8]) -> GateTempFile {
        std::fs::write(name, bytes).unwrap_or_else(|e| panic!("cannot write the gate's file {name}: {e}"));
        GateTempFile(std::path::PathBuf::from(name))
    }
}

impl Drop for GateTempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `gguf` (a GGUF file's bytes) with `kvs` (key, GGUF value type, value bytes) added to its
/// metadata (in place of the file's own value of a key) and `tensors` (name, dims, GGML type,
/// data) to its directory and data, the header kept a whole number of alignments longer (a
/// `general.pad` string) so that every existing tensor offset stays valid. Parses the file
/// itself: the gates also compile into engines that read other formats.
pub(crate) fn gate_gguf_with(gguf: &[u8], kvs: &[(&str, u32, Vec<u8>)], tensors: &[(&str, &[u64], u32, Vec<u8>)]) -> Vec<u8> {
    let u64_at = |i: usize| u64::from_le_bytes(gguf[i..i + 8].try_into().unwrap()) as usize;
    let u32_at = |i: usize| u32::from_le_bytes(gguf[i..i + 4].try_into().unwrap());
    let scalar = |ty: u32| [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8][ty as usize];
    // past one value of type `ty` at `i` (strings, and arrays of scalars or strings)
    let value_end = |ty: u32, i: usize| -> usize {
        match ty {
            8 => i + 8 + u64_at(i),
            9 => (0..u64_at(i + 4)).fold(i + 12, |j, _| if u32_at(i) == 8 { j + 8 + u64_at(j) } else { j + scalar(u32_at(i)) }),
            t => i + scalar(t),
        }
    };
    let (n_tensors, n_kv) = (u64_at(8), u64_at(16));
    let (mut at, mut align, mut kept, mut n_kept) = (24, 32, Vec::new(), 0);
    for _ in 0..n_kv {
        let key_end = at + 8 + u64_at(at);
        let key = &gguf[at + 8..key_end];
        if key == b"general.alignment" {
            align = u32_at(key_end + 4) as usize;
        }
        let end = value_end(u32_at(key_end), key_end + 4);
        if !kvs.iter().any(|(k, _, _)| k.as_bytes() == key) {
            kept.extend_from_slice(&gguf[at..end]);
            n_kept += 1;
        }
        at = end;
    }
    let kv_end = at;
    for _ in 0..n_tensors {
        at += 8 + u64_at(at);
        at += 4 + 8 * u32_at(at) as usize + 4 + 8;
    }
    let up = |n: usize| n.div_ceil(align) * align;
    let (dir_end, data_start) = (at, up(at));
    let s = gate_gguf_str;
    let mut kv: Vec<u8> = kvs.iter().flat_map(|(k, ty, v)| [s(k), ty.to_le_bytes().to_vec(), v.clone()].concat()).collect();
    let (mut dir, mut data) = (Vec::new(), gguf[data_start..].to_vec());
    for (name, dims, ty, bytes) in tensors {
        data.resize(up(data.len()), 0);
        let dims: Vec<u8> = dims.iter().flat_map(|d| d.to_le_bytes()).collect();
        dir.extend([s(name), (dims.len() as u32 / 8).to_le_bytes().to_vec(), dims, ty.to_le_bytes().to_vec(), (data.len() as u64).to_le_bytes().to_vec()].concat());
        data.extend(bytes);
    }
    let pad_kv = |n: usize| [s("general.pad"), 8u32.to_le_bytes().to_vec(), s(&" ".repeat(n))].concat();
    let grown = (kept.len() + kv.len() + dir.len() + pad_kv(0).len()) as isize - (kv_end - 24) as isize;
    kv.extend(pad_kv((-grown).rem_euclid(align as isize) as usize));
    let mut head = gguf[..24].to_vec();
    head[8..16].copy_from_slice(&((n_tensors + tensors.len()) as u64).to_le_bytes());
    head[16..24].copy_from_slice(&((n_kept + kvs.len() + 1) as u64).to_le_bytes());
    [head, kept, kv, gguf[kv_end..dir_end].to_vec(), dir, gguf[dir_end..data_start].to_vec(), data].concat()
}

/// A GGUF string: its length (u64, little-endian), then its bytes.
pub(crate) fn gate_gguf_str(s: &str) -> Vec<u8> {
    [(s.len() as u64).to_le_bytes().to_vec(), s.as_bytes().to_vec()].concat()
}
