/// Tokens the prefill processes per batch; longer prompts are processed in several batches.
pub(crate) const BATCH: usize = 64;

/// The key/value cache: one row of `kv_dim` per layer and position, rounded to f16 as
/// llama.cpp's default cache type rounds it (so attention sees the same keys and values), held
/// widened as f32 so attention reads it without converting: twice the bytes of an f16 cache,
/// allocated zeroed (calloc), so the pages are touched only as positions fill.
pub(crate) struct KvCache {
    pub(crate) max_seq: usize,
    pub(crate) kv_dim: usize,
    pub(crate) k: Vec<f32>, // [n_layer][max_seq][kv_dim], f16 values
    pub(crate) v: Vec<f32>, // [n_layer][max_seq][kv_dim], f16 values
}

impl KvCache {
    pub(crate) fn new(cfg: &Config, max_seq: usize) -> KvCache {
        let n = cfg.n_layer * max_seq * cfg.kv_dim;
        KvCache {
            max_seq,
            kv_dim: cfg.kv_dim,
            k: vec![0.0; n],
            v: vec![0.0; n],
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
        let f16 = |x: f32| rt::half::f16::from_f32(x).to_f32();
        self.k[i..i + k.len()].iter_mut().zip(k).for_each(|(dst, &src)| *dst = f16(src));
        self.v[i..i + v.len()].iter_mut().zip(v).for_each(|(dst, &src)| *dst = f16(src));
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
        }
    }
}
