use rt::half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};

/// Tokens the prefill processes per batch; longer prompts are processed in several batches.
pub(crate) const BATCH: usize = 64;

/// The key/value cache: one row of `head_dim` per layer, kv head and position, in f16 as
/// llama.cpp's default cache type stores it (attention widens a block of rows at a time), each
/// head's positions contiguous so attention streams them; allocated zeroed (calloc), so the pages
/// are touched only as positions fill.
pub(crate) struct KvCache {
    pub(crate) max_seq: usize,
    pub(crate) n_head_kv: usize,
    pub(crate) head_dim: usize,
    pub(crate) k: Vec<u16>, // [n_layer][n_head_kv][max_seq][head_dim], f16 bits
    pub(crate) v: Vec<u16>, // [n_layer][n_head_kv][max_seq][head_dim], f16 bits
}

impl KvCache {
    pub(crate) fn new(cfg: &Config, max_seq: usize) -> KvCache {
        let n = cfg.n_layer * max_seq * cfg.kv_dim;
        KvCache { max_seq, n_head_kv: cfg.n_head_kv, head_dim: cfg.head_dim, k: vec![0; n], v: vec![0; n] }
    }

    /// Index of (layer, kv head, position) in `k` / `v`.
    #[inline]
    pub(crate) fn at(&self, layer: usize, head: usize, pos: usize) -> usize {
        ((layer * self.n_head_kv + head) * self.max_seq + pos) * self.head_dim
    }

    /// Stores the keys and values (`[n][n_head_kv * head_dim]`) of `n` positions from `pos`,
    /// rounded to f16 (round to nearest even, as ggml's f32 -> f16 conversion).
    pub(crate) fn store(&mut self, layer: usize, pos: usize, k: &[f32], v: &[f32]) {
        for (i, (kh, vh)) in k.chunks_exact(self.head_dim).zip(v.chunks_exact(self.head_dim)).enumerate() {
            let at = self.at(layer, i % self.n_head_kv, pos + i / self.n_head_kv);
            self.k[at..at + kh.len()].reinterpret_cast_mut::<rt::half::f16>().convert_from_f32_slice(kh);
            self.v[at..at + vh.len()].reinterpret_cast_mut::<rt::half::f16>().convert_from_f32_slice(vh);
        }
    }

    /// The keys and values of kv head `head` at positions `0..end` of `layer`: `[end][head_dim]` each.
    pub(crate) fn head(&self, layer: usize, head: usize, end: usize) -> (&[rt::half::f16], &[rt::half::f16]) {
        let r = self.at(layer, head, 0)..self.at(layer, head, end);
        (self.k[r.clone()].reinterpret_cast(), self.v[r].reinterpret_cast())
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
