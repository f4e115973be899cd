use rt::half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};

/// Tokens the prefill processes per batch; longer prompts are processed in several batches.
pub(crate) const BATCH: usize = 128;

/// The key/value cache: one row of `head_dim` per layer, kv head and position, in f16 as
/// llama.cpp's default cache type stores it (attention widens a block of rows at a time), each
/// head's positions contiguous so attention streams them; allocated zeroed (calloc), so the pages
/// are touched only as positions fill. A local (sliding-window) layer holds only a ring of
/// `window + BATCH - 1` positions (its window plus a batch's new ones), each stored twice (at
/// p % cap and p % cap + cap) so that any run of up to `cap` positions is one slice.
pub(crate) struct KvCache {
    pub(crate) max_seq: usize,
    pub(crate) n_head_kv: usize,
    pub(crate) head_dim: usize,
    cap: Vec<usize>,        // [n_layer] positions a layer holds: max_seq, or its ring's size
    base: Vec<usize>,       // [n_layer + 1] start of each layer in `k` / `v`
    pub(crate) k: Vec<u16>, // per layer [n_head_kv][max_seq or 2 * cap][head_dim], f16 bits
    pub(crate) v: Vec<u16>, // the same for the values
}

impl KvCache {
    pub(crate) fn new(cfg: &Config, max_seq: usize) -> KvCache {
        let ring = cfg.window + BATCH - 1;
        let cap: Vec<usize> = (0..cfg.n_layer).map(|l| if cfg.is_local(l) && ring < max_seq { ring } else { max_seq }).collect();
        let rows = |c: usize| if c < max_seq { 2 * c } else { c };
        let base: Vec<usize> = std::iter::once(0).chain(cap.iter().scan(0, |b, &c| { *b += rows(c) * cfg.kv_dim; Some(*b) })).collect();
        let n = base[cfg.n_layer];
        KvCache { max_seq, n_head_kv: cfg.n_head_kv, head_dim: cfg.head_dim, cap, base, k: vec![0; n], v: vec![0; n] }
    }

    /// Index of (layer, kv head, position) in `k` / `v` (the first copy in a ring).
    #[inline]
    pub(crate) fn at(&self, layer: usize, head: usize, pos: usize) -> usize {
        let c = self.cap[layer];
        self.base[layer] + (head * if c < self.max_seq { 2 * c } else { c } + pos % c) * self.head_dim
    }

    /// Stores the keys and values (`[n][n_head_kv * head_dim]`) of `n` positions from `pos`,
    /// rounded to f16 (round to nearest even, as ggml's f32 -> f16 conversion).
    pub(crate) fn store(&mut self, layer: usize, pos: usize, k: &[f32], v: &[f32]) {
        let copies = if self.cap[layer] < self.max_seq { 2 } else { 1 };
        for (i, (kh, vh)) in k.chunks_exact(self.head_dim).zip(v.chunks_exact(self.head_dim)).enumerate() {
            for c in 0..copies {
                let at = self.at(layer, i % self.n_head_kv, pos + i / self.n_head_kv) + c * self.cap[layer] * self.head_dim;
                self.k[at..at + kh.len()].reinterpret_cast_mut::<rt::half::f16>().convert_from_f32_slice(kh);
                self.v[at..at + vh.len()].reinterpret_cast_mut::<rt::half::f16>().convert_from_f32_slice(vh);
            }
        }
    }

    /// The keys and values of kv head `head` at positions `lo..end` of `layer` (`end - lo` at
    /// most the layer's window, for a local one): `[end - lo][head_dim]` each.
    pub(crate) fn head(&self, layer: usize, head: usize, lo: usize, end: usize) -> (&[rt::half::f16], &[rt::half::f16]) {
        let at = self.at(layer, head, lo);
        let r = at..at + (end - lo) * self.head_dim;
        (self.k[r.clone()].reinterpret_cast(), self.v[r].reinterpret_cast())
    }

    /// Bytes the cache holds (keys and values).
    pub fn bytes(&self) -> usize { 2 * 2 * self.k.len() }
}

/// Activation buffers for a batch of up to `BATCH` tokens; allocated once at load.
pub(crate) struct RunState {
    pub(crate) x: Vec<f32>,      // [BATCH][n_embd] residual stream
    pub(crate) xb: Vec<f32>,     // [BATCH][n_embd] normalised input of a sub-layer
    pub(crate) q: Vec<f32>,      // [BATCH][q_dim] queries
    pub(crate) k: Vec<f32>,      // [BATCH][kv_dim] keys of the batch
    pub(crate) v: Vec<f32>,      // [BATCH][kv_dim] values of the batch
    pub(crate) att: Vec<f32>,    // [BATCH][q_dim] attention output (heads concatenated)
    pub(crate) proj: Vec<f32>,   // [BATCH][n_embd] output of wo / w_down
    pub(crate) gate: Vec<f32>,   // [BATCH][n_ff] gate projection, then act(gate) * up
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
            q: vec![0.0; b * cfg.q_dim],
            k: vec![0.0; b * cfg.kv_dim],
            v: vec![0.0; b * cfg.kv_dim],
            att: vec![0.0; b * cfg.q_dim],
            proj: vec![0.0; b * cfg.n_embd],
            gate: vec![0.0; b * cfg.n_ff],
            up: vec![0.0; b * cfg.n_ff],
            acts: (0..b).map(|_| Act::new(&[], &[])).collect(),
            logits: vec![0.0; cfg.n_vocab],
        }
    }
}
