//! The CKB's typed schema. Every file under `ckb/` deserialises into one of these; unknown
//! fields are errors, so a typo in the knowledge base fails `cargo metainfer ckb check` instead of
//! being silently ignored.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `ckb/contracts/<id>.toml`: one component of an engine.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Contract {
    /// Unique id; also the file stem and the module name of the section in `engine.rs`.
    pub id: String,
    pub version: u32,
    /// Section title in the generated engine.
    pub title: String,
    pub summary: String,
    /// Items the section must expose, as Rust signatures (`pub(crate) fn dot_q4_k_scalar(row:
    /// &[u8], x: &Act) -> f32`, `pub struct Engine`, `pub(crate) const Q4_K_ACT: ActKind`).
    /// The spec-reviewer parses each with `syn` and checks the candidate has it.
    pub interface: Vec<String>,
    /// Contracts whose items this one uses.
    #[serde(default)]
    pub requires: Vec<String>,
    #[serde(default)]
    pub preconditions: Vec<String>,
    #[serde(default)]
    pub postconditions: Vec<String>,
    /// Shapes as formulas of config symbols, e.g. `row = "cols / 256 blocks of 144 bytes"`.
    #[serde(default)]
    pub shapes: BTreeMap<String, String>,
    /// Copy-ready pseudocode of the algorithm.
    #[serde(default)]
    pub pseudocode: String,
    /// Named numeric tolerances the gates use (`max_abs_rel = 1e-5`).
    #[serde(default)]
    pub tolerances: BTreeMap<String, f64>,
    /// Gate ids (in `ckb/gates/*.toml`) that verify a realization of this contract.
    #[serde(default)]
    pub gates: Vec<String>,
    /// Failure-mode ids (in `ckb/failure_modes.toml`) this contract guards against.
    #[serde(default)]
    pub failure_modes: Vec<String>,
    /// Whether a realization may contain `unsafe` (kernels, the mmap reader).
    #[serde(default)]
    pub unsafe_allowed: bool,
    /// Whether a realization may touch the file system (only the model file reader).
    #[serde(default)]
    pub file_access: bool,
    /// Further entries of the section's code allowlist (paths or modules, e.g. `rt::server`),
    /// beyond the base every section has and what `unsafe_allowed` / `file_access` add.
    #[serde(default)]
    pub may_use: Vec<String>,
    /// Verified realizations, in preference order.
    #[serde(default)]
    pub realizations: Vec<RealizationRef>,
}

/// One verified realization of a contract.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RealizationRef {
    /// `scalar`, `avx2`, `mmap`, … — the file is `realizations/<contract>/<variant>.rs`.
    pub variant: String,
    /// Instruction sets it needs (`[]` = portable; `["avx2", "fma"]`).
    #[serde(default)]
    pub isa: Vec<String>,
    /// Other variants of the same contract that must be included with it (an AVX2 kernel
    /// builds on the scalar file's block structs and keeps the scalar reference beside it).
    #[serde(default)]
    pub with: Vec<String>,
    /// The function the dispatch calls, when the contract is a dot kernel.
    #[serde(default)]
    pub entry: Option<String>,
    /// Whether calling `entry` is unsafe (a `#[target_feature]` function).
    #[serde(default)]
    pub entry_unsafe: bool,
    /// For dot kernels with a four-token form: the function the dispatch's `dot_row4` calls
    /// (`fn(row: &[u8], xs: [&Act; 4]) -> [f32; 4]`); unsafe exactly when `entry` is.
    #[serde(default)]
    pub entry4: Option<String>,
    /// For dot kernels with a four-row gemv form: the function the dispatch's `dot_rows4` calls
    /// (`fn(rows: [&[u8]; 4], x: &Act) -> [f32; 4]`, each row bitwise `entry`); unsafe exactly
    /// when `entry` is.
    #[serde(default)]
    pub entry_rows4: Option<String>,
    /// For dot kernels with a tiled prefill form: the decoder of a tile's rows the dispatch's
    /// `dec_rows` calls (`fn(rows: [&[u8]; R], out: &mut DecRows)`, R = `tile_rows`), given
    /// together with `entry_tiled`; unsafe exactly when `entry` is.
    #[serde(default)]
    pub entry_dec: Option<String>,
    /// The R-row x 4-token kernel on a decoded tile the dispatch's `dot_dec` calls
    /// (`fn(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; R]`); unsafe exactly when `entry` is.
    #[serde(default)]
    pub entry_tiled: Option<String>,
    /// R, the rows of a tile: 2 (the default), 4 or 8.
    #[serde(default)]
    pub tile_rows: Option<usize>,
}

/// `ckb/models/<family>.toml`: a model family.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelFamily {
    /// Family name as used in `model = "…"`.
    pub family: String,
    pub summary: String,
    /// `general.architecture` in GGUF files of this family.
    pub gguf_arch: String,
    /// The engine's sections in data-path order: contract ids, or the generated pseudo-sections
    /// `header`, `dot_kernels` (expanded to one `dot_<t>` per selected tensor type) and
    /// `dispatch`.
    pub graph: Vec<String>,
    /// Contract ids appended to the graph when the constraints ask for a feature
    /// (`server = ["server_openai"]`).
    #[serde(default)]
    pub feature_sections: BTreeMap<String, Vec<String>>,
    /// Per model-file format other than GGUF: graph sections replaced by others
    /// (`safetensors = { gguf_reader = "hf_reader", tokenizer_bpe = "tokenizer_hf" }`).
    #[serde(default)]
    pub format_sections: BTreeMap<Format, BTreeMap<String, String>>,
    /// The graph for targets of another kind (`cuda`), by target kind; `graph` otherwise.
    #[serde(default)]
    pub target_graphs: BTreeMap<TargetKind, Vec<String>>,
    /// How rope pairs the dimensions of a head.
    pub rope: RopeStyle,
    /// The normalisation before attention, before the FFN and before the output.
    #[serde(default)]
    pub norm: NormKind,
    /// The FFN's gate activation (`act(gate) * up`).
    #[serde(default)]
    pub activation: Activation,
    /// Whether q, k and v have biases (`attn_{q,k,v}_bias` in `tensors` exactly when true).
    pub qkv_bias: bool,
    /// Whether the output matrix may be missing and the embedding reused.
    pub tied_embeddings_allowed: bool,
    /// How the embedding rows are scaled before the first block.
    #[serde(default)]
    pub embedding_scale: EmbeddingScale,
    /// Sliding-window attention on some layers (`None`: every layer attends to every position).
    #[serde(default)]
    pub sliding_window: Option<SlidingWindow>,
    /// GGUF tensor names (`{n}` is the layer index).
    pub tensors: TensorNames,
    /// GGUF metadata keys (`{arch}` is gguf_arch).
    pub metadata: MetadataKeys,
    /// The tokenizer files of this family carry.
    pub tokenizer: TokenizerSpec,
    /// Where the chat template comes from (`gguf:tokenizer.chat_template`).
    pub chat_template: String,
    /// A Jinja chat template used when the file has none (`None`: chat needs the file's own).
    #[serde(default)]
    pub default_chat_template: Option<String>,
    /// Sizes whose exact dims are known and baked into the engine.
    #[serde(default)]
    pub presets: Vec<Preset>,
    #[serde(default)]
    pub failure_modes: Vec<String>,
}

/// How rope pairs the dimensions of a head (llama.cpp's rope types).
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RopeStyle {
    /// Pairs `(i, i + head_dim / 2)` (LLAMA_ROPE_TYPE_NEOX: qwen2, gemma).
    Neox,
    /// Adjacent pairs `(2i, 2i + 1)` (LLAMA_ROPE_TYPE_NORM: llama, mistral).
    Normal,
}

/// How the embedding rows are scaled before the first block.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EmbeddingScale {
    /// As stored.
    #[default]
    None,
    /// Times `sqrt(n_embd)` (gemma: llama.cpp's `ggml_scale(inpL, sqrtf(n_embd))`).
    SqrtNEmbd,
}

/// Sliding-window attention: the local layers attend only to the last `window` positions
/// (`metadata.sliding_window`), the global ones to all; each kind with its own rope base.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlidingWindow {
    /// Every `pattern`-th layer is global (layer `l` is local when `(l + 1) % pattern != 0`;
    /// llama.cpp's `set_swa_pattern`).
    pub pattern: u32,
    /// The rope base of the local layers (the global ones use `metadata.rope_theta`).
    pub rope_theta_local: f32,
}

/// The family's normalisation.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum NormKind {
    /// `x / sqrt(mean(x²) + eps) * w`, eps from `metadata.rms_eps`.
    #[default]
    Rms,
}

/// The FFN's gate activation.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// `x * sigmoid(x)` (SwiGLU).
    #[default]
    Silu,
    /// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x³)))` (GeGLU, gemma's `gelu_pytorch_tanh`).
    GeluTanh,
}

impl Activation {
    /// The contract and function that compute `act(gate) * up` (the forward's `glu`); the
    /// contract must be in the family's graph.
    pub fn glu(self) -> (&'static str, &'static str) {
        match self {
            Activation::Silu => ("vec_ops", "swiglu"),
            Activation::GeluTanh => ("geglu", "geglu"),
        }
    }
}

/// The GGUF tensor names a dense decoder reads (`{n}`: the layer index).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TensorNames {
    pub token_embd: String,
    pub output_norm: String,
    /// Missing from files with tied embeddings (allowed when `tied_embeddings_allowed`).
    pub output: String,
    pub attn_norm: String,
    pub attn_q: String,
    pub attn_k: String,
    pub attn_v: String,
    #[serde(default)]
    pub attn_q_bias: Option<String>,
    #[serde(default)]
    pub attn_k_bias: Option<String>,
    #[serde(default)]
    pub attn_v_bias: Option<String>,
    pub attn_output: String,
    pub ffn_norm: String,
    pub ffn_gate: String,
    pub ffn_up: String,
    pub ffn_down: String,
    /// Per-head RMSNorm of q and k after the projections (`[head_dim]` weights; both or none).
    #[serde(default)]
    pub attn_q_norm: Option<String>,
    #[serde(default)]
    pub attn_k_norm: Option<String>,
    /// RMSNorm of the attention output before the residual add.
    #[serde(default)]
    pub attn_post_norm: Option<String>,
    /// RMSNorm of the FFN output before the residual add.
    #[serde(default)]
    pub ffn_post_norm: Option<String>,
    /// Rope frequency factors (`[head_dim / 2]` f32, one tensor for all layers; Llama 3.1+
    /// files): each pair's rope angle is divided by its factor. Optional in a file even when the
    /// family names it (Llama 3.0 files have none).
    #[serde(default)]
    pub rope_freqs: Option<String>,
}

impl TensorNames {
    /// The tensors a family may or may not have, each with its name when it has it.
    pub fn optional(&self) -> [(&'static str, &Option<String>); 8] {
        [
            ("attn_q_bias", &self.attn_q_bias),
            ("attn_k_bias", &self.attn_k_bias),
            ("attn_v_bias", &self.attn_v_bias),
            ("attn_q_norm", &self.attn_q_norm),
            ("attn_k_norm", &self.attn_k_norm),
            ("attn_post_norm", &self.attn_post_norm),
            ("ffn_post_norm", &self.ffn_post_norm),
            ("rope_freqs", &self.rope_freqs),
        ]
    }

    /// Every (logical name, GGUF name) pair, optional ones where present.
    pub fn all(&self) -> Vec<(&'static str, &str)> {
        let mut v = vec![
            ("token_embd", self.token_embd.as_str()),
            ("output_norm", self.output_norm.as_str()),
            ("output", self.output.as_str()),
            ("attn_norm", self.attn_norm.as_str()),
            ("attn_q", self.attn_q.as_str()),
            ("attn_k", self.attn_k.as_str()),
            ("attn_v", self.attn_v.as_str()),
        ];
        for (k, t) in [
            ("attn_q_bias", &self.attn_q_bias),
            ("attn_k_bias", &self.attn_k_bias),
            ("attn_v_bias", &self.attn_v_bias),
        ] {
            if let Some(t) = t {
                v.push((k, t.as_str()));
            }
        }
        v.extend([
            ("attn_output", self.attn_output.as_str()),
            ("ffn_norm", self.ffn_norm.as_str()),
            ("ffn_gate", self.ffn_gate.as_str()),
            ("ffn_up", self.ffn_up.as_str()),
            ("ffn_down", self.ffn_down.as_str()),
        ]);
        for (k, t) in self.optional().into_iter().skip(3) {
            if let Some(t) = t {
                v.push((k, t.as_str()));
            }
        }
        v
    }
}

/// The GGUF metadata keys a dense decoder reads (`{arch}`: the family's gguf_arch).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MetadataKeys {
    pub arch: String,
    pub n_layer: String,
    pub n_embd: String,
    pub n_ff: String,
    pub n_head: String,
    pub n_head_kv: String,
    pub context_length: String,
    pub rope_theta: String,
    pub rms_eps: String,
    pub file_type: String,
    /// The key of the head dim (`{arch}.attention.key_length`) where it may differ from
    /// `n_embd / n_head` (gemma; llama files such as Mistral Nemo's); a file without the key uses
    /// `n_embd / n_head`.
    #[serde(default)]
    pub head_dim: Option<String>,
    /// The local layers' window (with `sliding_window` in the family).
    #[serde(default)]
    pub sliding_window: Option<String>,
}

impl MetadataKeys {
    /// Every (logical name, key pattern) pair.
    pub fn all(&self) -> [(&'static str, &str); 10] {
        [
            ("arch", self.arch.as_str()),
            ("n_layer", self.n_layer.as_str()),
            ("n_embd", self.n_embd.as_str()),
            ("n_ff", self.n_ff.as_str()),
            ("n_head", self.n_head.as_str()),
            ("n_head_kv", self.n_head_kv.as_str()),
            ("context_length", self.context_length.as_str()),
            ("rope_theta", self.rope_theta.as_str()),
            ("rms_eps", self.rms_eps.as_str()),
            ("file_type", self.file_type.as_str()),
        ]
    }

    /// The keys a family may or may not have, each with its pattern when it has it.
    pub fn optional(&self) -> [(&'static str, &Option<String>); 2] {
        [
            ("head_dim", &self.head_dim),
            ("sliding_window", &self.sliding_window),
        ]
    }
}

/// The tokenizer a family's files carry.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TokenizerSpec {
    /// `tokenizer.ggml.model` (`gpt2`: byte-level BPE).
    pub model: String,
    /// `tokenizer.ggml.pre` values this family's files use → the split regexes llama.cpp applies
    /// for it, in order (each splits the pieces of the one before).
    pub pre: BTreeMap<String, Vec<String>>,
    /// Whether BOS is prepended when the file has no `tokenizer.ggml.add_bos_token` (llama.cpp's
    /// default for the tokenizer model).
    pub add_bos_default: bool,
    /// Pre-tokenizers (keys of `pre`) whose files get BOS when they do not say, whatever
    /// `add_bos_default` is (llama.cpp sets `add_bos` for them, e.g. `llama-bpe`).
    #[serde(default)]
    pub add_bos_for: Vec<String>,
    /// Pre-tokenizers (keys of `pre`) with llama.cpp's `ignore_merges`: a piece that is itself a
    /// vocab token is that token, without BPE merges (`llama-bpe`).
    #[serde(default)]
    pub ignore_merges: Vec<String>,
}

/// Exact dims of a known model size (`model = "qwen2.5-0.5b"`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Preset {
    pub name: String,
    pub n_layer: u32,
    pub n_embd: u32,
    pub n_head: u32,
    pub n_head_kv: u32,
    pub n_ff: u32,
    pub n_vocab: u32,
    pub rope_theta: f64,
    pub rms_eps: f64,
    pub context_length: u32,
}

/// `ckb/quants/<id>.toml`: a tensor type (`kind = "tensor_type"`) or a file-level
/// quantization (`kind = "mixture"`: which tensor types such a file may contain).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Quant {
    pub id: String,
    pub kind: QuantKind,
    pub summary: String,
    pub format: Format,
    /// For a tensor type: the ggml type id.
    #[serde(default)]
    pub ggml_type: Option<u32>,
    /// For a tensor type: the variant name of `GgmlType` in the engine (`Q4_K`).
    #[serde(default)]
    pub engine_name: Option<String>,
    #[serde(default)]
    pub block_elems: Option<u32>,
    #[serde(default)]
    pub block_bytes: Option<u32>,
    /// Byte layout of one block, field by field.
    #[serde(default)]
    pub layout: Vec<String>,
    /// The dequantization formula.
    #[serde(default)]
    pub dequant: String,
    /// The activation form its dot kernel consumes: `f32`, `q8_0`, `q8_k`.
    #[serde(default)]
    pub activation: Option<String>,
    /// The dot-kernel contract for this type.
    #[serde(default)]
    pub contract: Option<String>,
    /// For a mixture: the tensor types (quant ids) it may contain.
    #[serde(default)]
    pub tensor_types: Vec<String>,
    /// For a mixture: GGUF `general.file_type` values it covers.
    #[serde(default)]
    pub file_types: Vec<u32>,
}

/// The model-file format a quant belongs to.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// A GGUF file (ggml quant types).
    Gguf,
    /// A Hugging Face checkpoint directory (config.json, *.safetensors, tokenizer.json).
    Safetensors,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Gguf => "gguf",
            Format::Safetensors => "safetensors",
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of machine a target is.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    Cpu,
    Cuda,
}

impl TargetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Cpu => "cpu",
            TargetKind::Cuda => "cuda",
        }
    }
}

impl std::fmt::Display for TargetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum QuantKind {
    TensorType,
    Mixture,
}

/// `ckb/targets/<id>.toml`: a hardware target.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub id: String,
    pub summary: String,
    pub kind: TargetKind,
    /// `x86_64`, `any`, or `sm_89`-style compute capability.
    pub arch: String,
    /// Instruction-set features the engine may use (checked at load time).
    #[serde(default)]
    pub features: Vec<String>,
    pub vector_bits: u32,
    /// How the engine uses threads.
    pub threads: String,
    /// Realization variants that fit this target, in preference order.
    pub variants: Vec<String>,
}

/// `ckb/failure_modes.toml`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FailureModes {
    #[serde(rename = "mode")]
    pub modes: Vec<FailureMode>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FailureMode {
    pub id: String,
    pub symptom: String,
    pub check: String,
    pub fix: String,
}

/// `ckb/gates/<id>.toml`: one gate.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Gate {
    pub id: String,
    pub summary: String,
    /// `kernel`, `tokenizer`, `sampler`, `e2e`.
    pub kind: String,
    /// The test code (relative to `ckb/gates/`), compiled inside the candidate engine crate.
    pub source: String,
    /// Committed inputs it reads, relative to the ckb root (everything a gate reads lives
    /// under the ckb, never in the workspace a build runs from).
    #[serde(default)]
    pub vectors: Vec<String>,
    /// Contracts it verifies.
    #[serde(default)]
    pub contracts: Vec<String>,
    /// The script that made the vectors (relative to the ckb root).
    #[serde(default)]
    pub made_by: Option<String>,
    /// Target kinds (`cpu`, `cuda`) whose engines it applies to; empty: every kind.
    #[serde(default)]
    pub target_kinds: Vec<TargetKind>,
}
