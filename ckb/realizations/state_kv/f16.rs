/// Tokens the prefill processes per batch; longer prompts are processed in several batches.
pub(crate) const BATCH: usize = 64;

/// The key/value cache: one f16 row of `kv_dim` per layer and position, as llama.cpp's
/// default cache type, so attention sees the same rounded keys and values.
pub(crate) struct KvCache {
    pub(crate) max_seq: usize,
    pub(crate) kv_dim: usize,
    pub(crate) k: Vec<rt::half::f16>, // [n_layer][max_seq][kv_dim]
    pub(crate) v: Vec<rt::half::f16>, // [n_layer][max_seq][kv_dim]
}

impl KvCache {
    pub(crate) fn new(cfg: &Config, max_seq: usize) -> KvCache {
        let n = cfg.n_layer * max_seq * cfg.kv_dim;
        KvCache {
            max_seq,
            kv_dim: cfg.kv_dim,
            k: vec![rt::half::f16::ZERO; n],
            v: vec![rt::half::f16::ZERO; n],
        }
    }

    /// Index of (layer, position) in `k` / `v`.
    #[inline]
    pub(crate) fn at(&self, layer: usize, pos: usize) -> usize {
        (layer * self.max_seq + pos) * self.kv_dim
    }

    /// Stores the keys and values of `n` consecutive positions starting at `pos`.
    pub(crate) fn store(&mut self, layer: usize, pos: usize, k: &[f32], v: &[f32]) {
        let i = self.at(layer, pos);
        for (dst, &src) in self.k[i..i + k.len()].iter_mut().zip(k) {
            *dst = rt::half::f16::from_f32(src);
        }
        for (dst, &src) in self.v[i..i + v.len()].iter_mut().zip(v) {
            *dst = rt::half::f16::from_f32(src);
        }
    }
}

/// Activation buffers for a batch of up to `BATCH` tokens; allocated once at load.
pub(crate) struct RunState {
    pub(crate) x: Vec<f32>,      // [BATCH][n_embd] residual stream
    pub(crate) xb: Vec<f32>,     // [BATCH][n_embd] normalised input of a sub-layer
    pub(crate) q: Vec<f32>,      // [BATCH][n_embd] queries
    pub(crate) k: Vec<f32>,      // [BATCH][kv_dim] keys of the batch
    pub(crate) v: Vec<f32>,      // [BATCH][kv_dim] values of the batch
    pub(crate) att: Vec<f32>,    // [BATCH][n_embd] attention output (heads concatenated)
    pub(crate) proj: Vec<f32>,   // [BATCH][n_embd] output of wo / w_down
    pub(crate) gate: Vec<f32>,   // [BATCH][n_ff] gate projection, then silu(gate) * up
    pub(crate) up: Vec<f32>,     // [BATCH][n_ff] up projection
    pub(crate) acts: Vec<Act>,   // [BATCH] prepared activations of the current input
    pub(crate) logits: Vec<f32>, // [n_vocab] logits of the last token
    pub(crate) kvf: Vec<f32>,    // [2][pos + n][kv_dim] one layer's K then V widened (attention)
}

impl RunState {
    pub(crate) fn new(cfg: &Config) -> RunState {
        let b = BATCH;
        RunState {
            x: vec![0.0; b * cfg.n_embd],
            xb: vec![0.0; b * cfg.n_embd],
            q: vec![0.0; b * cfg.n_embd],
            k: vec![0.0; b * cfg.kv_dim],
            v: vec![0.0; b * cfg.kv_dim],
            att: vec![0.0; b * cfg.n_embd],
            proj: vec![0.0; b * cfg.n_embd],
            gate: vec![0.0; b * cfg.n_ff],
            up: vec![0.0; b * cfg.n_ff],
            acts: (0..b).map(|_| Act::new(&[], &[])).collect(),
            logits: vec![0.0; cfg.n_vocab],
            kvf: Vec::new(),
        }
    }
}
