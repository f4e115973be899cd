/// Model dimensions, read from the file's metadata (and checked against `PRESET` when the
/// engine was generated for a known size).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Config {
    pub(crate) n_layer: usize,
    pub(crate) n_embd: usize,
    pub(crate) n_head: usize,
    pub(crate) n_head_kv: usize,
    pub(crate) head_dim: usize, // K_HEAD_DIM where the family names it and the file has it, else n_embd / n_head
    pub(crate) q_dim: usize,    // n_head * head_dim
    pub(crate) kv_dim: usize,   // n_head_kv * head_dim
    pub(crate) n_ff: usize,
    pub(crate) n_vocab: usize,
    pub(crate) context_length: usize,
    pub(crate) rope_theta: f32,       // the global layers' rope base
    pub(crate) rope_theta_local: f32, // the local (sliding-window) layers' (ROPE_THETA_LOCAL)
    pub(crate) window: usize,         // K_SLIDING_WINDOW: positions a local layer sees (0: none)
    pub(crate) rms_eps: f32,
}

impl Config {
    /// Reads the family's metadata keys (`K_*`); every missing or inconsistent value is an error
    /// naming the key.
    pub(crate) fn from_gguf(g: &Gguf) -> rt::Result<Config> {
        let arch = g.get_str(K_ARCH)?;
        if arch != MODEL_ARCH {
            return Err(rt::Error::Mismatch {
                what: K_ARCH.into(),
                expected: format!("{MODEL_ARCH:?}"),
                found: format!("{arch:?}"),
                fix: format!(
                    "this engine was generated for {MODEL_ARCH} files; load it with a {MODEL_ARCH} file, or generate an engine with model = \"{arch}\" (cargo metainfer ckb ls shows the families the ckb knows)"
                ),
            });
        }
        let get = |k: &str| -> rt::Result<usize> { Ok(g.get_u32(k)? as usize) };
        let n_embd = get(K_N_EMBD)?;
        let n_head = get(K_N_HEAD)?;
        let n_head_kv = get(K_N_HEAD_KV)?;
        let n_vocab = match g.tensor(T_TOKEN_EMBD) {
            Ok(t) if t.dims.len() == 2 => t.dims[1] as usize,
            Ok(t) => return Err(rt::Error::format(format!("tensor '{T_TOKEN_EMBD}'.dims"), format!("expected 2 dims, found {:?}", t.dims))),
            Err(e) => return Err(e),
        };
        // the head dim: the family's key (attention.key_length) where the file has it, else
        // n_embd / n_head (llama.cpp's default for every architecture)
        let key_length = K_HEAD_DIM.filter(|k| g.meta(k).is_some()).map(get).transpose()?;
        if n_head == 0 || n_head_kv == 0 || (key_length.is_none() && n_embd % n_head != 0) || n_head % n_head_kv != 0 {
            return Err(rt::Error::format(
                K_N_HEAD,
                format!("{n_head} heads / {n_head_kv} kv heads do not divide embedding_length {n_embd}"),
            ));
        }
        let head_dim = key_length.unwrap_or(n_embd / n_head);
        let rope_theta = g.get_f32(K_ROPE_THETA)?;
        if head_dim == 0 || head_dim % 2 != 0 {
            let key = K_HEAD_DIM.filter(|_| key_length.is_some()).unwrap_or(K_N_HEAD); // where it came from
            return Err(rt::Error::format(key, format!("head dim {head_dim} must be even for rope")));
        }
        // rope on part of a head, or scaled (llama.cpp reads the factor as linear scaling without a type)
        let rope = |k: &str| format!("{MODEL_ARCH}.rope.{k}");
        let number = |k: &str| g.meta(k).map(|_| g.get_f32(k)).transpose();
        if let Some(d) = number(&rope("dimension_count"))?.filter(|&d| d as usize != head_dim) {
            return Err(lacks(rope("dimension_count"), format!("{d}, not the head dim {head_dim} (partial rope)")));
        }
        // a head dim the family does not read, or values of another width than keys
        for k in ["key_length", "value_length"].map(|k| format!("{MODEL_ARCH}.attention.{k}")) {
            if let Some(v) = number(&k)?.filter(|&v| v as usize != head_dim) {
                return Err(lacks(k, format!("{v}, not the head dim {head_dim}")));
            }
        }
        if let Some(s) = g.get_str_opt(&rope("scaling.type"))?.filter(|&s| s != "none" && s != "linear") {
            return Err(lacks(rope("scaling.type"), format!("{s:?}")));
        }
        for k in [rope("scaling.factor"), rope("scale_linear")] {
            if let Some(f) = number(&k)?.filter(|&f| f != 0.0 && f != 1.0) {
                return Err(lacks(k, format!("{f} (scaled rope)")));
            }
        }
        let cfg = Config {
            n_layer: get(K_N_LAYER)?,
            n_embd,
            n_head,
            n_head_kv,
            head_dim,
            q_dim: n_head * head_dim,
            kv_dim: n_head_kv * head_dim,
            n_ff: get(K_N_FF)?,
            n_vocab,
            context_length: get(K_CONTEXT_LENGTH)?,
            rope_theta,
            rope_theta_local: ROPE_THETA_LOCAL.unwrap_or(rope_theta),
            window: K_SLIDING_WINDOW.map_or(Ok(0), get)?,
            rms_eps: g.get_f32(K_RMS_EPS)?,
        };
        if cfg.n_layer == 0 || cfg.n_ff == 0 || cfg.context_length == 0 || (SWA_PATTERN > 0 && cfg.window == 0) {
            return Err(rt::Error::format(K_N_LAYER, format!("{K_N_LAYER}, {K_N_FF}, {K_CONTEXT_LENGTH} (and a sliding window) must be > 0")));
        }
        if let Some(p) = PRESET {
            let diffs: Vec<String> = [
                (K_N_LAYER, p.n_layer, cfg.n_layer),
                (K_N_EMBD, p.n_embd, cfg.n_embd),
                (K_N_HEAD, p.n_head, cfg.n_head),
                (K_N_HEAD_KV, p.n_head_kv, cfg.n_head_kv),
                (K_N_FF, p.n_ff, cfg.n_ff),
                ("vocab size", p.n_vocab, cfg.n_vocab),
            ]
            .iter()
            .filter(|(_, want, got)| want != got)
            .map(|(k, want, got)| format!("{k} {got} (expected {want})"))
            .collect();
            if !diffs.is_empty() {
                return Err(rt::Error::Mismatch {
                    what: "model dims".into(),
                    expected: format!("preset {PRESET_NAME}"),
                    found: diffs.join(", "),
                    fix: format!("regenerate with model = \"{MODEL_ARCH}\" (dims read from the file) or the preset of this size"),
                });
            }
        }
        Ok(cfg)
    }

    /// Whether layer `l` attends only to the last `window` positions (every SWA_PATTERN-th is global).
    pub(crate) fn is_local(&self, l: usize) -> bool { SWA_PATTERN > 0 && (l + 1) % SWA_PATTERN != 0 }
}

/// A matrix located in the mapped file: `rows` rows of `cols` elements of type `ty`.
#[derive(Debug, Clone)]
pub(crate) struct TensorRef {
    pub(crate) ty: GgmlType,
    pub(crate) rows: usize,      // output features
    pub(crate) cols: usize,      // input features (ne0)
    pub(crate) row_bytes: usize, // cols / block_elems * block_bytes
    pub(crate) offset: usize,    // absolute byte offset in the file
}

impl TensorRef {
    /// The matrix's bytes inside the file's bytes.
    pub(crate) fn bytes<'a>(&self, file: &'a [u8]) -> &'a [u8] {
        &file[self.offset..self.offset + self.rows * self.row_bytes]
    }

    /// Row `r`, dequantized into `out` (`out.len() == cols`).
    pub(crate) fn dequant_row_into(&self, file: &[u8], r: usize, out: &mut [f32]) {
        let start = self.offset + r * self.row_bytes;
        dequant_row(self.ty, &file[start..start + self.row_bytes], out);
    }
}

/// One transformer block's weights.
pub(crate) struct LayerWeights {
    pub(crate) attn_norm: Vec<f32>, // [n_embd]
    pub(crate) wq: TensorRef,       // [n_embd] -> [q_dim]
    pub(crate) wk: TensorRef,       // [n_embd] -> [kv_dim]
    pub(crate) wv: TensorRef,       // [n_embd] -> [kv_dim]
    pub(crate) bq: Option<Vec<f32>>, // [q_dim], when the family has q/k/v biases (T_ATTN_Q_BIAS)
    pub(crate) bk: Option<Vec<f32>>, // [kv_dim]
    pub(crate) bv: Option<Vec<f32>>, // [kv_dim]
    pub(crate) q_norm: Option<Vec<f32>>, // [head_dim], per-head norms when the family has them (T_ATTN_Q_NORM)
    pub(crate) k_norm: Option<Vec<f32>>, // [head_dim]
    pub(crate) wo: TensorRef,       // [q_dim] -> [n_embd]
    pub(crate) attn_post_norm: Option<Vec<f32>>, // [n_embd], of the attention output (T_ATTN_POST_NORM)
    pub(crate) ffn_post_norm: Option<Vec<f32>>,  // [n_embd], of the FFN output (T_FFN_POST_NORM)
    pub(crate) ffn_norm: Vec<f32>,  // [n_embd]
    pub(crate) w_gate: TensorRef,   // [n_embd] -> [n_ff]
    pub(crate) w_up: TensorRef,     // [n_embd] -> [n_ff]
    pub(crate) w_down: TensorRef,   // [n_ff] -> [n_embd]
    pub(crate) qkv_acts: Vec<ActKind>,  // activation forms wq, wk, wv consume
    pub(crate) o_acts: Vec<ActKind>,    // ... wo consumes
    pub(crate) gate_up_acts: Vec<ActKind>, // ... w_gate, w_up consume
    pub(crate) down_acts: Vec<ActKind>, // ... w_down consumes
}

/// Every tensor the forward pass reads.
pub(crate) struct Weights {
    pub(crate) token_embd: TensorRef, // [n_vocab] rows of [n_embd]
    pub(crate) output_norm: Vec<f32>, // [n_embd]
    pub(crate) output: TensorRef,     // [n_embd] -> [n_vocab] (token_embd when tied)
    pub(crate) output_acts: Vec<ActKind>,
    pub(crate) layers: Vec<LayerWeights>, // [n_layer]
    pub(crate) rope_freqs: Option<Vec<f32>>, // [head_dim / 2] rope angle divisors (T_ROPE_FREQS), when the file has them
}

/// The distinct activation forms a set of matrices consumes.
pub(crate) fn acts_for(ms: &[&TensorRef]) -> Vec<ActKind> {
    let mut kinds: Vec<ActKind> = Vec::new();
    for m in ms {
        let k = act_kind(m.ty);
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    kinds
}

impl Weights {
    /// Locates every tensor and checks its type and shape against `cfg`; a tensor the family
    /// does not name (rope frequency factors where the family has none, biases, experts) is refused.
    pub(crate) fn from_gguf(g: &Gguf, cfg: &Config) -> rt::Result<Weights> {
        let e = cfg.n_embd;
        let layer = [T_ATTN_NORM, T_ATTN_Q, T_ATTN_K, T_ATTN_V, T_ATTN_OUTPUT, T_FFN_NORM, T_FFN_GATE, T_FFN_UP, T_FFN_DOWN];
        let opts = [T_ATTN_Q_BIAS, T_ATTN_K_BIAS, T_ATTN_V_BIAS, T_ATTN_Q_NORM, T_ATTN_K_NORM, T_ATTN_POST_NORM, T_FFN_POST_NORM, T_ROPE_FREQS];
        let known: Vec<&str> = [T_TOKEN_EMBD, T_OUTPUT, T_OUTPUT_NORM].into_iter().chain(layer).chain(opts.into_iter().flatten()).collect();
        let in_layer = |r: &(&str, &str)| r.0.parse::<usize>().is_ok_and(|n| n < cfg.n_layer);
        let pattern = |name: &str| name.strip_prefix("blk.").and_then(|r| r.split_once('.')).filter(in_layer).map_or(name.to_string(), |(_, rest)| format!("blk.{{n}}.{rest}"));
        if let Some(t) = g.tensors.iter().find(|t| !known.contains(&pattern(&t.name).as_str())) {
            return Err(lacks(format!("tensor '{}'", t.name), "in the file".into()));
        }
        let matrix = |name: &str, cols: usize, rows: usize| locate(g, name, &[cols, rows]);
        let vector = |name: &str, len: usize| -> rt::Result<Vec<f32>> {
            let t = locate(g, name, &[len])?;
            let mut out = vec![0.0f32; len];
            t.dequant_row_into(g.bytes(), 0, &mut out);
            Ok(out)
        };
        let token_embd = matrix(T_TOKEN_EMBD, e, cfg.n_vocab)?;
        let output = match g.tensor(T_OUTPUT) {
            Ok(_) => matrix(T_OUTPUT, e, cfg.n_vocab)?,
            Err(_) if TIED_OUTPUT_ALLOWED => token_embd.clone(), // tied embeddings
            Err(err) => return Err(err),
        };
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for n in 0..cfg.n_layer {
            let name = |pattern: &str| pattern.replace("{n}", &n.to_string());
            let opt = |pattern: Option<&str>, len: usize| pattern.map(|p| vector(&name(p), len)).transpose();
            let wq = matrix(&name(T_ATTN_Q), e, cfg.q_dim)?;
            let wk = matrix(&name(T_ATTN_K), e, cfg.kv_dim)?;
            let wv = matrix(&name(T_ATTN_V), e, cfg.kv_dim)?;
            let wo = matrix(&name(T_ATTN_OUTPUT), cfg.q_dim, e)?;
            let w_gate = matrix(&name(T_FFN_GATE), e, cfg.n_ff)?;
            let w_up = matrix(&name(T_FFN_UP), e, cfg.n_ff)?;
            let w_down = matrix(&name(T_FFN_DOWN), cfg.n_ff, e)?;
            layers.push(LayerWeights {
                attn_norm: vector(&name(T_ATTN_NORM), e)?,
                bq: opt(T_ATTN_Q_BIAS, cfg.q_dim)?,
                bk: opt(T_ATTN_K_BIAS, cfg.kv_dim)?,
                bv: opt(T_ATTN_V_BIAS, cfg.kv_dim)?,
                q_norm: opt(T_ATTN_Q_NORM, cfg.head_dim)?,
                k_norm: opt(T_ATTN_K_NORM, cfg.head_dim)?,
                attn_post_norm: opt(T_ATTN_POST_NORM, e)?,
                ffn_post_norm: opt(T_FFN_POST_NORM, e)?,
                ffn_norm: vector(&name(T_FFN_NORM), e)?,
                qkv_acts: acts_for(&[&wq, &wk, &wv]),
                o_acts: acts_for(&[&wo]),
                gate_up_acts: acts_for(&[&w_gate, &w_up]),
                down_acts: acts_for(&[&w_down]),
                wq, wk, wv, wo, w_gate, w_up, w_down,
            });
        }
        // optional in a file even where the family names it; a factor of 0 or NaN would poison every angle
        let rope_freqs = T_ROPE_FREQS.filter(|&t| g.tensor(t).is_ok()).map(|t| vector(t, cfg.head_dim / 2)).transpose()?;
        if let Some(f) = rope_freqs.as_ref().and_then(|fs| fs.iter().find(|f| !(f.is_finite() && **f > 0.0))) {
            return Err(rt::Error::format(format!("tensor '{}'", T_ROPE_FREQS.unwrap_or_default()), format!("a rope frequency factor is {f}; each must be finite and > 0")));
        }
        Ok(Weights {
            rope_freqs,
            output_norm: vector(T_OUTPUT_NORM, e)?,
            output_acts: acts_for(&[&output]),
            token_embd,
            output,
            layers,
        })
    }
}

/// A part of the file this engine does not implement: refused, since ignoring it would change
/// the outputs without a word.
fn lacks(what: String, found: String) -> rt::Error {
    let fix = format!("the {MODEL_ARCH} engine does not implement this part; use a file without it, or teach the family the part (ckb/models/{MODEL_ARCH}.toml and its sections)");
    rt::Error::Mismatch { what, found, expected: format!("{MODEL_ARCH} files without it"), fix }
}

/// Finds tensor `name`, checks its dims (`[cols]` or `[cols, rows]`, ne0 first) and that its
/// type is compiled in, and returns where its rows are.
fn locate(g: &Gguf, name: &str, dims: &[usize]) -> rt::Result<TensorRef> {
    let t = g.tensor(name)?;
    let found: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
    if found != dims {
        return Err(rt::Error::Mismatch {
            what: format!("shape of tensor '{name}'"),
            expected: format!("{dims:?}"),
            found: format!("{found:?}"),
            fix: "use a model file whose metadata matches its tensors".into(),
        });
    }
    if !COMPILED_TYPES.contains(&t.ty) {
        let compiled: Vec<&str> = COMPILED_TYPES.iter().map(|t| t.name()).collect();
        return Err(rt::Error::Mismatch {
            what: format!("type of tensor '{name}'"),
            expected: format!("one of {} (quant = \"{QUANT}\")", compiled.join(", ")),
            found: t.ty.name().to_string(),
            fix: format!("regenerate the engine with the quant of this file (it has {} tensors), or use a {QUANT} file", t.ty.name()),
        });
    }
    let data = g.tensor_data(t);
    let offset = data.as_ptr() as usize - g.bytes().as_ptr() as usize;
    let cols = dims[0];
    let rows = dims.get(1).copied().unwrap_or(1);
    let row_bytes = cols / t.ty.block_elems() * t.ty.block_bytes();
    Ok(TensorRef { ty: t.ty, rows, cols, row_bytes, offset })
}
