// Hugging Face checkpoint reader: config.json, model.safetensors (or the shards named by
// model.safetensors.index.json), tokenizer.json and tokenizer_config.json of one directory.
// Every safetensors header is validated before any tensor is read: u64 LE header length, JSON
// {name: {dtype, shape, data_offsets}}, each range inside the data and disjoint from the
// others. The tensors the qwen2 graph reads are copied into one arena under their GGUF names
// (AutoAWQ GEMM layers repacked into AWQ_INT4 rows), and config.json is presented as <model_type>.*
// metadata: the sections after this one use the GGUF reader's interface unchanged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The element encodings a checkpoint's tensors take in the engine (the GGUF reader's names).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum GgmlType {
    F32,
    F16,
    BF16,
    AWQ_INT4,
}

// (type, id, name, elements per block, bytes per block); ids as ggml's where ggml has the type.
const HF_TYPES: &[(GgmlType, u32, &str, usize, usize)] = &[
    (GgmlType::F32, 0, "F32", 1, 4),
    (GgmlType::F16, 1, "F16", 1, 2),
    (GgmlType::BF16, 30, "BF16", 1, 2),
    (GgmlType::AWQ_INT4, 1000, "AWQ_INT4", 128, 68),
];

impl GgmlType {
    fn entry(self) -> &'static (GgmlType, u32, &'static str, usize, usize) {
        HF_TYPES.iter().find(|e| e.0 == self).unwrap_or(&HF_TYPES[0])
    }
    /// A stable numeric id (ggml's for F32/F16/BF16).
    pub(crate) fn id(self) -> u32 { self.entry().1 }
    /// The type's name, e.g. "AWQ_INT4".
    pub(crate) fn name(self) -> &'static str { self.entry().2 }
    /// Elements per block (1 for the plain types).
    pub(crate) fn block_elems(self) -> usize { self.entry().3 }
    /// Bytes per block.
    pub(crate) fn block_bytes(self) -> usize { self.entry().4 }
    /// Bytes of a row of `n` elements; None when `n` is not a multiple of the block size.
    pub(crate) fn row_bytes(self, n: usize) -> Option<usize> {
        if n % self.block_elems() != 0 {
            return None;
        }
        (n / self.block_elems()).checked_mul(self.block_bytes())
    }
}

/// A tensor of the arena, under its GGUF name.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TensorInfo {
    pub(crate) name: String,
    pub(crate) dims: Vec<u64>, // [cols] or [cols, rows]: dims[0] = row length (input features)
    pub(crate) ty: GgmlType,
    pub(crate) offset: usize,  // bytes from the start of the arena, 64-aligned
    pub(crate) n_bytes: usize, // rows * row_bytes
}

impl TensorInfo {
    /// Elements per row.
    pub(crate) fn row_len(&self) -> usize { self.dims.first().copied().unwrap_or(1) as usize }
    /// Number of rows.
    pub(crate) fn n_rows(&self) -> usize { self.dims.iter().skip(1).product::<u64>() as usize }
    /// Bytes of one row.
    pub(crate) fn row_bytes(&self) -> usize { self.row_len() / self.ty.block_elems() * self.ty.block_bytes() }
}

/// One tensor of a safetensors file, validated: `data` is its byte range in the map.
struct StEntry {
    file: usize,            // index into `files`
    dtype: String,          // "F16", "I32", ...
    shape: Vec<usize>,      // row-major, outermost first
    data: (usize, usize),   // absolute [begin, end) in the file
}

fn st_dtype_size(dtype: &str) -> Option<usize> {
    Some(match dtype {
        "F64" | "I64" | "U64" => 8,
        "F32" | "I32" | "U32" => 4,
        "F16" | "BF16" | "I16" | "U16" => 2,
        "I8" | "U8" | "BOOL" | "F8_E4M3" | "F8_E5M2" => 1,
        _ => return None,
    })
}

/// Parses and checks the header of the safetensors file `bytes` (named `file` in errors).
fn st_parse(bytes: &[u8], file: &str, index: usize, out: &mut HashMap<String, StEntry>) -> rt::Result<()> {
    let field = |f: &str| format!("{file}: {f}");
    let head = bytes.get(..8).ok_or_else(|| rt::Error::format(field("header length"), format!("the file has {} bytes, fewer than 8", bytes.len())))?;
    let n = u64::from_le_bytes(head.try_into().unwrap_or([0; 8]));
    if n > 100 << 20 || n > (bytes.len() - 8) as u64 {
        return Err(rt::Error::format(field("header length"), format!("{n} bytes, but the file has {} after the length (and at most 100 MB are allowed)", bytes.len() - 8)));
    }
    let start = 8 + n as usize;
    let json: rt::serde_json::Value = rt::serde_json::from_slice(&bytes[8..start])
        .map_err(|e| rt::Error::format(field("header"), format!("not valid JSON: {e}")))?;
    let obj = json.as_object().ok_or_else(|| rt::Error::format(field("header"), "is not a JSON object"))?;
    let data_len = bytes.len() - start;
    let mut ranges: Vec<(usize, usize, String)> = Vec::new();
    for (name, v) in obj {
        if name == "__metadata__" {
            continue;
        }
        let f = |what: &str| field(&format!("tensor '{name}'.{what}"));
        let dtype = v.get("dtype").and_then(|d| d.as_str()).ok_or_else(|| rt::Error::format(f("dtype"), "missing or not a string"))?;
        let size = st_dtype_size(dtype).ok_or_else(|| rt::Error::format(f("dtype"), format!("unknown dtype {dtype:?}")))?;
        let shape: Option<Vec<usize>> = v.get("shape").and_then(|s| s.as_array()).and_then(|a| a.iter().map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok())).collect());
        let shape = shape.ok_or_else(|| rt::Error::format(f("shape"), "missing or not an array of non-negative integers"))?;
        let offs: Option<Vec<usize>> = v.get("data_offsets").and_then(|s| s.as_array()).and_then(|a| a.iter().map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok())).collect());
        let (b, e) = match offs.as_deref() {
            Some(&[b, e]) if b <= e && e <= data_len => (b, e),
            _ => return Err(rt::Error::format(f("data_offsets"), format!("must be [begin, end] with begin <= end <= {data_len} (the data's length), found {}", v.get("data_offsets").map(|o| o.to_string()).unwrap_or_default()))),
        };
        let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if numel.and_then(|n| n.checked_mul(size)) != Some(e - b) {
            return Err(rt::Error::format(f("data_offsets"), format!("{} bytes for shape {shape:?} of {dtype}", e - b)));
        }
        ranges.push((b, e, name.clone()));
        out.insert(name.clone(), StEntry { file: index, dtype: dtype.to_string(), shape, data: (start + b, start + e) });
    }
    ranges.sort();
    for w in ranges.windows(2) {
        if w[1].0 < w[0].1 {
            return Err(rt::Error::format(field(&format!("tensor '{}'.data_offsets", w[1].2)), format!("overlaps tensor '{}'", w[0].2)));
        }
    }
    Ok(())
}

/// A config.json / tokenizer_config.json value as GGUF-style metadata.
#[derive(Clone, Debug)]
enum HfMeta {
    Str(String),
    U32(u32),
    F32(f32),
}

/// A Hugging Face checkpoint, loaded: the arena of tensors the engine reads, the metadata
/// (<model_type>.* keys from config.json) and the tokenizer files.
pub(crate) struct HfCheckpoint {
    pub(crate) dir: PathBuf,
    pub(crate) arena: Vec<u8>,                  // every tensor, 64-aligned (see TensorInfo.offset)
    pub(crate) tensors: Vec<TensorInfo>,        // under their GGUF names
    meta: Vec<(String, HfMeta, String)>,        // (GGUF key, value, the source it came from)
    pub(crate) config: rt::serde_json::Value,   // config.json
    pub(crate) tokenizer_json: Vec<u8>,         // tokenizer.json (empty when absent)
    pub(crate) tokenizer_config: rt::serde_json::Value, // tokenizer_config.json (null when absent)
}

/// The engine's name for the loaded model file: a checkpoint, through the GGUF reader's interface.
pub(crate) type Gguf = HfCheckpoint;

// HF tensor-name stems of a layer and their GGUF names.
const HF_LAYER_NAMES: [(&str, &str); 9] = [
    ("input_layernorm", "attn_norm"),
    ("post_attention_layernorm", "ffn_norm"),
    ("self_attn.q_proj", "attn_q"),
    ("self_attn.k_proj", "attn_k"),
    ("self_attn.v_proj", "attn_v"),
    ("self_attn.o_proj", "attn_output"),
    ("mlp.gate_proj", "ffn_gate"),
    ("mlp.up_proj", "ffn_up"),
    ("mlp.down_proj", "ffn_down"),
];

// The GGUF name of an HF tensor stem (without .weight/.bias/.qweight...), if the graph reads it.
fn hf_gguf_name(stem: &str) -> Option<String> {
    match stem {
        "model.embed_tokens" => return Some("token_embd".into()),
        "lm_head" => return Some("output".into()),
        "model.norm" => return Some("output_norm".into()),
        _ => {}
    }
    let rest = stem.strip_prefix("model.layers.")?;
    let (n, part) = rest.split_once('.')?;
    let n: usize = n.parse().ok()?;
    HF_LAYER_NAMES.iter().find(|(hf, _)| *hf == part).map(|(_, g)| format!("blk.{n}.{g}"))
}

// config.json integer keys and the <model_type>.* metadata keys they become.
const HF_CONFIG_INTS: [(&str, &str); 6] = [
    ("num_hidden_layers", "block_count"),
    ("hidden_size", "embedding_length"),
    ("intermediate_size", "feed_forward_length"),
    ("num_attention_heads", "attention.head_count"),
    ("num_key_value_heads", "attention.head_count_kv"),
    ("max_position_embeddings", "context_length"),
];

// AutoAWQ's GEMM packing puts output 8c + j at nibble AWQ_SHIFT[j] of word c.
const AWQ_SHIFT: [u32; 8] = [0, 16, 4, 20, 8, 24, 12, 28];

fn read_file(path: &Path) -> rt::Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| rt::Error::Io { path: path.to_path_buf(), source })
}

fn read_json(path: &Path) -> rt::Result<rt::serde_json::Value> {
    let bytes = read_file(path)?;
    rt::serde_json::from_slice(&bytes).map_err(|e| rt::Error::format(path.display().to_string(), format!("not valid JSON: {e}")))
}

impl HfCheckpoint {
    /// Loads the checkpoint in directory `path` (or the directory of the file `path`).
    pub(crate) fn open(path: &std::path::Path) -> rt::Result<HfCheckpoint> {
        let dir = if path.is_dir() { path.to_path_buf() } else { path.parent().unwrap_or(Path::new(".")).to_path_buf() };
        if !dir.join("config.json").is_file() {
            return Err(rt::Error::Mismatch {
                what: format!("model path {}", path.display()),
                expected: "a Hugging Face checkpoint directory with config.json and model.safetensors".into(),
                found: if path.is_file() { "a file with no config.json beside it".into() } else { "a directory with no config.json".into() },
                fix: "pass the checkpoint directory; for a .gguf file use an engine generated with a gguf quant (q4_k_m, q8_0, f32...)".into(),
            });
        }
        let config = read_json(&dir.join("config.json"))?;
        let tok_path = dir.join("tokenizer.json");
        let tokenizer_json = if tok_path.is_file() { read_file(&tok_path)? } else { Vec::new() };
        let tc_path = dir.join("tokenizer_config.json");
        let tokenizer_config = if tc_path.is_file() { read_json(&tc_path)? } else { rt::serde_json::Value::Null };

        // The safetensors files: one, or the shards of the index.
        let mut names: Vec<String> = vec!["model.safetensors".into()];
        if !dir.join("model.safetensors").is_file() {
            let index = dir.join("model.safetensors.index.json");
            let idx = read_json(&index).map_err(|_| rt::Error::format(format!("{}", dir.display()), "has neither model.safetensors nor a readable model.safetensors.index.json"))?;
            let map = idx.get("weight_map").and_then(|m| m.as_object()).ok_or_else(|| rt::Error::format("model.safetensors.index.json: weight_map", "missing or not an object"))?;
            names = map.values().filter_map(|v| v.as_str().map(String::from)).collect();
            names.sort();
            names.dedup();
            if names.iter().any(|n| n.contains('/') || n.contains('\\') || n.starts_with('.')) {
                return Err(rt::Error::format("model.safetensors.index.json: weight_map", "names a file outside the checkpoint directory"));
            }
        }
        let mut maps = Vec::new();
        let mut entries = HashMap::new();
        for (i, name) in names.iter().enumerate() {
            let p = dir.join(name);
            let io = |source: std::io::Error| rt::Error::Io { path: p.clone(), source };
            let file = std::fs::File::open(&p).map_err(io)?;
            // SAFETY: read-only private map; the checkpoint must not change while it loads (the
            // tensors are copied into the arena, so afterwards the files are no longer read).
            let mmap = unsafe { rt::memmap2::Mmap::map(&file) }.map_err(io)?;
            st_parse(&mmap, name, i, &mut entries)?;
            maps.push(mmap);
        }
        let mut ck = HfCheckpoint { dir, arena: Vec::new(), tensors: Vec::new(), meta: Vec::new(), config, tokenizer_json, tokenizer_config };
        ck.read_config()?;
        // (GGUF name, suffix, HF stem) of every tensor the graph reads, in a stable order.
        let mut parts: Vec<(String, &str, &str)> = Vec::new();
        for name in entries.keys() {
            for suffix in [".weight", ".bias", ".qweight"] {
                if let Some(stem) = name.strip_suffix(suffix) {
                    if let Some(g) = hf_gguf_name(stem) {
                        parts.push((g, suffix, stem));
                    }
                }
            }
        }
        parts.sort();
        for (g, suffix, stem) in parts {
            let get = |n: &str| entries.get(n).map(|e| (e, &maps[e.file][e.data.0..e.data.1]));
            match suffix {
                ".qweight" => ck.add_awq(stem, &g, get)?,
                ".bias" => ck.add_plain(&format!("{stem}.bias"), &format!("{g}.bias"), get)?,
                _ => ck.add_plain(&format!("{stem}.weight"), &format!("{g}.weight"), get)?,
            }
        }
        Ok(ck)
    }

    // config.json (and tokenizer_config.json's chat template) as <model_type>.* metadata.
    fn read_config(&mut self) -> rt::Result<()> {
        let c = self.config.clone();
        let arch = c.get("model_type").and_then(|v| v.as_str()).ok_or_else(|| rt::Error::format("config.json: model_type", "missing or not a string"))?.to_string();
        self.meta.push(("general.architecture".into(), HfMeta::Str(arch.clone()), "config.json: model_type".into()));
        for (hf, g) in HF_CONFIG_INTS {
            if let Some(v) = c.get(hf) {
                let n = v.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| rt::Error::format(format!("config.json: {hf}"), format!("{v} is not an integer in u32 range")))?;
                self.meta.push((format!("{arch}.{g}"), HfMeta::U32(n), format!("config.json: {hf}")));
            }
        }
        for (hf, g, default) in [("rope_theta", "rope.freq_base", Some(10000.0)), ("rms_norm_eps", "attention.layer_norm_rms_epsilon", None)] {
            let v = match (c.get(hf), default) {
                (Some(v), _) => v.as_f64().ok_or_else(|| rt::Error::format(format!("config.json: {hf}"), format!("{v} is not a number")))?,
                (None, Some(d)) => d,
                (None, None) => continue,
            };
            self.meta.push((format!("{arch}.{g}"), HfMeta::F32(v as f32), format!("config.json: {hf}")));
        }
        // rope scaling, as a GGUF file states it (the weights section refuses what it lacks)
        if let Some(s) = c.get("rope_scaling").filter(|s| !s.is_null()) {
            let kind = s.get("rope_type").or(s.get("type")).and_then(|t| t.as_str()).map_or("linear", |t| if t == "default" { "none" } else { t });
            self.meta.push((format!("{arch}.rope.scaling.type"), HfMeta::Str(kind.into()), "config.json: rope_scaling".into()));
            let factor = s.get("factor").and_then(|f| f.as_f64()).unwrap_or(1.0) as f32;
            self.meta.push((format!("{arch}.rope.scaling.factor"), HfMeta::F32(factor), "config.json: rope_scaling.factor".into()));
        }
        // The quantization this engine was generated for (quant = "awq").
        let q = c.get("quantization_config");
        let qget = |k: &str| q.and_then(|q| q.get(k)).map(|v| v.to_string().trim_matches('"').to_lowercase());
        let found = format!(
            "quant_method {}, bits {}, group_size {}, zero_point {}, version {}",
            qget("quant_method").unwrap_or("-".into()), qget("bits").unwrap_or("-".into()), qget("group_size").unwrap_or("-".into()),
            qget("zero_point").unwrap_or("-".into()), qget("version").unwrap_or("-".into())
        );
        if found != "quant_method awq, bits 4, group_size 128, zero_point true, version gemm" {
            return Err(rt::Error::Mismatch {
                what: "config.json: quantization_config".into(),
                expected: "quant_method awq, bits 4, group_size 128, zero_point true, version gemm".into(),
                found,
                fix: format!("use an AutoAWQ GEMM 4-bit checkpoint with group size 128, or regenerate the engine for this checkpoint's quantization (this one: quant = \"{QUANT}\")"),
            });
        }
        if let Some(t) = self.tokenizer_config.get("chat_template") {
            let text = match t {
                rt::serde_json::Value::String(s) => Some(s.clone()),
                // A list of named templates: the default one.
                rt::serde_json::Value::Array(a) => a.iter().find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default")).and_then(|t| t.get("template")).and_then(|t| t.as_str()).map(String::from),
                _ => None,
            };
            if let Some(text) = text {
                self.meta.push(("tokenizer.chat_template".into(), HfMeta::Str(text), "tokenizer_config.json: chat_template".into()));
            }
        }
        Ok(())
    }

    // Appends `bytes` to the arena as tensor `name`, 64-byte aligned.
    fn push(&mut self, name: &str, ty: GgmlType, dims: Vec<u64>, bytes: &[u8]) {
        let offset = self.arena.len().div_ceil(64) * 64;
        self.arena.resize(offset, 0);
        self.arena.extend_from_slice(bytes);
        self.tensors.push(TensorInfo { name: name.to_string(), dims, ty, offset, n_bytes: bytes.len() });
    }

    // A plain (unquantized) tensor: HF [out, in] or [n] becomes GGUF dims [in, out] / [n].
    fn add_plain<'m>(&mut self, hf: &str, gguf: &str, get: impl Fn(&str) -> Option<(&'m StEntry, &'m [u8])>) -> rt::Result<()> {
        let Some((e, data)) = get(hf) else { return Ok(()) };
        let ty = match e.dtype.as_str() {
            "F32" => GgmlType::F32,
            "F16" => GgmlType::F16,
            "BF16" => GgmlType::BF16,
            other => return Err(rt::Error::format(format!("tensor '{hf}'.dtype"), format!("{other}, but the engine reads F16, BF16 or F32 for unquantized tensors"))),
        };
        let dims: Vec<u64> = e.shape.iter().rev().map(|&d| d as u64).collect();
        if dims.is_empty() || dims.len() > 2 {
            return Err(rt::Error::format(format!("tensor '{hf}'.shape"), format!("{:?}: expected 1 or 2 dims", e.shape)));
        }
        self.push(gguf, ty, dims, data);
        Ok(())
    }

    // An AutoAWQ GEMM layer (`stem`.qweight/.qzeros/.scales), repacked into AWQ_INT4 rows.
    fn add_awq<'m>(&mut self, stem: &str, gguf: &str, get: impl Fn(&str) -> Option<(&'m StEntry, &'m [u8])>) -> rt::Result<()> {
        let part = |s: &str| -> rt::Result<(&'m StEntry, &'m [u8])> {
            get(&format!("{stem}.{s}")).ok_or_else(|| rt::Error::format(format!("tensor '{stem}.{s}'"), "missing: an AWQ layer needs qweight, qzeros and scales"))
        };
        let ((qw, qw_b), (qz, qz_b), (sc, sc_b)) = (part("qweight")?, part("qzeros")?, part("scales")?);
        let bad = |s: &str, why: String| rt::Error::format(format!("tensor '{stem}.{s}'"), why);
        let (n_in, packs) = match qw.shape[..] {
            [i, p] if qw.dtype == "I32" && i % 128 == 0 && i > 0 && p > 0 => (i, p),
            _ => return Err(bad("qweight", format!("{} {:?}: expected I32 [in, out / 8] with in a multiple of 128 (group size)", qw.dtype, qw.shape))),
        };
        let (groups, n_out) = (n_in / 128, packs * 8);
        if qz.dtype != "I32" || qz.shape != [groups, packs] {
            return Err(bad("qzeros", format!("{} {:?}: expected I32 [{groups}, {packs}] for qweight {:?}", qz.dtype, qz.shape, qw.shape)));
        }
        if sc.dtype != "F16" || sc.shape != [groups, n_out] {
            return Err(bad("scales", format!("{} {:?}: expected F16 [{groups}, {n_out}] for qweight {:?}", sc.dtype, sc.shape, qw.shape)));
        }
        let word = |b: &[u8], k: usize| u32::from_le_bytes([b[4 * k], b[4 * k + 1], b[4 * k + 2], b[4 * k + 3]]);
        let row_bytes = groups * 68;
        let mut out = vec![0u8; n_out * row_bytes];
        for o in 0..n_out {
            let (c, shift) = (o / 8, AWQ_SHIFT[o % 8]);
            for g in 0..groups {
                let blk = &mut out[o * row_bytes + g * 68..o * row_bytes + g * 68 + 68];
                blk[..2].copy_from_slice(&sc_b[2 * (g * n_out + o)..2 * (g * n_out + o) + 2]);
                let z = (word(qz_b, g * packs + c) >> shift) & 15;
                blk[2..4].copy_from_slice(&(z as u16).to_le_bytes());
                for k in 0..4 {
                    for j in 0..16 {
                        let i = g * 128 + 32 * k + j;
                        let lo = (word(qw_b, i * packs + c) >> shift) & 15;
                        let hi = (word(qw_b, (i + 16) * packs + c) >> shift) & 15;
                        blk[4 + 16 * k + j] = (lo | hi << 4) as u8;
                    }
                }
            }
        }
        self.push(&format!("{gguf}.weight"), GgmlType::AWQ_INT4, vec![n_in as u64, n_out as u64], &out);
        Ok(())
    }

    /// The arena: every tensor's bytes (what the GGUF reader calls the file).
    pub(crate) fn bytes(&self) -> &[u8] { &self.arena }

    /// The data of tensor `t` (empty for a tensor that is not of this checkpoint).
    pub(crate) fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        self.arena.get(t.offset..t.offset.saturating_add(t.n_bytes)).unwrap_or(&[])
    }

    /// Tensor `name` (a GGUF name, e.g. `blk.0.attn_q.weight`).
    pub(crate) fn tensor(&self, name: &str) -> rt::Result<&TensorInfo> {
        let t = self.tensors.iter().find(|t| t.name == name);
        t.ok_or_else(|| rt::Error::format(format!("tensor '{name}'"), format!("missing from the checkpoint {} (HF names: model.layers.N.self_attn.q_proj.qweight and the like)", self.dir.display())))
    }

    fn meta_of(&self, key: &str) -> Option<&(String, HfMeta, String)> {
        self.meta.iter().find(|m| m.0 == key)
    }

    /// Where config.json gave the value under GGUF key `key` (None: it gave none).
    pub(crate) fn meta(&self, key: &str) -> Option<&str> { self.meta_of(key).map(|m| m.2.as_str()) }

    fn missing(&self, key: &str) -> rt::Error {
        let suffix = key.split_once('.').map_or(key, |(_, s)| s);
        let hf = HF_CONFIG_INTS.iter().find(|(_, g)| *g == suffix).map(|(hf, _)| *hf).or(match suffix {
            "attention.layer_norm_rms_epsilon" => Some("rms_norm_eps"),
            _ => None,
        });
        match hf {
            Some(hf) => rt::Error::format(format!("config.json: {hf}"), format!("missing from {}", self.dir.join("config.json").display())),
            None => rt::Error::format(key.to_string(), format!("missing: config.json of {} lacks the key it comes from", self.dir.display())),
        }
    }

    /// A string value (None when absent).
    pub(crate) fn get_str_opt(&self, key: &str) -> rt::Result<Option<&str>> {
        match self.meta_of(key) {
            None => Ok(None),
            Some((_, HfMeta::Str(s), _)) => Ok(Some(s)),
            Some((_, _, src)) => Err(rt::Error::format(src.clone(), "expected a string")),
        }
    }

    /// A string value.
    pub(crate) fn get_str(&self, key: &str) -> rt::Result<&str> {
        self.get_str_opt(key)?.ok_or_else(|| self.missing(key))
    }

    /// An integer value.
    pub(crate) fn get_u32(&self, key: &str) -> rt::Result<u32> {
        match self.meta_of(key) {
            Some((_, HfMeta::U32(n), _)) => Ok(*n),
            Some((_, _, src)) => Err(rt::Error::format(src.clone(), "expected an integer")),
            None => Err(self.missing(key)),
        }
    }

    /// A number.
    pub(crate) fn get_f32(&self, key: &str) -> rt::Result<f32> {
        match self.meta_of(key) {
            Some((_, HfMeta::F32(x), _)) => Ok(*x),
            Some((_, HfMeta::U32(n), _)) => Ok(*n as f32),
            Some((_, _, src)) => Err(rt::Error::format(src.clone(), "expected a number")),
            None => Err(self.missing(key)),
        }
    }
}
