/// A loaded model: the mapped file, its weights, the KV cache and everything needed to
/// turn a prompt into tokens.
pub struct Engine {
    pub(crate) gguf: Gguf,                      // the mapped model file
    pub(crate) cfg: Config,                     // dims read from (and checked against) the file
    pub(crate) w: Weights,                      // tensor locations inside `gguf`
    pub(crate) kv: KvCache,                     // [n_layer][n_head_kv][max_seq][head_dim] f16 keys and values
    pub(crate) st: RunState,                    // [BATCH]-token activation buffers
    pub(crate) pool: Pool,                      // worker threads for the matrix products
    pub(crate) tok: std::sync::Arc<Tokenizer>,  // from the file's tokenizer.ggml.* keys
    pub(crate) template: Option<std::sync::Arc<ChatTemplate>>, // tokenizer.chat_template, when present
    pub(crate) history: Vec<u32>,               // [n_past] tokens whose K/V are in `kv`
    pub(crate) slots: Vec<(KvCache, Vec<u32>)>, // KV slots 1.. of `step` (slot 0: kv, history), made on first use
}

/// Most KV slots (sequences) `Engine::step` serves at once.
pub const MAX_SLOTS: usize = 64;

/// One sequence's part of an [`Engine::step`] (rt::Work; slot 0 is the one `forward` uses).
pub use rt::Work;

impl Engine {
    /// Maps and validates the model file, checks that it is what this engine was generated for,
    /// and allocates the run state. Threads default to the machine's available parallelism.
    pub fn load(path: &std::path::Path) -> rt::Result<Engine> {
        check_cpu()?;
        let gguf = Gguf::open(path)?;
        let cfg = Config::from_gguf(&gguf)?;
        let w = Weights::from_gguf(&gguf, &cfg)?;
        let tok = Tokenizer::from_gguf(&gguf)?;
        if tok.n_vocab() > cfg.n_vocab {
            return Err(rt::Error::format(
                "tokenizer.ggml.tokens",
                format!("{} tokens but token_embd.weight has {} rows", tok.n_vocab(), cfg.n_vocab),
            ));
        }
        let template = ChatTemplate::from_gguf(&gguf)?.map(std::sync::Arc::new);
        // The model's trained context, or the constraints' max_seq where smaller. The cache is
        // allocated zeroed (calloc: pages come as positions fill), so a long context costs
        // memory only as it is used.
        let max_seq = MAX_SEQ.map_or(cfg.context_length, |m| m.min(cfg.context_length));
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        Ok(Engine {
            kv: KvCache::new(&cfg, max_seq),
            st: RunState::new(&cfg),
            pool: Pool::new(threads),
            gguf,
            cfg,
            w,
            tok: std::sync::Arc::new(tok),
            template,
            history: Vec::new(),
            slots: Vec::new(),
        })
    }

    /// Uses `n` threads (including the caller) for the matrix products.
    pub fn set_threads(&mut self, n: usize) {
        self.pool = Pool::new(n.max(1));
    }

    /// Most positions the KV cache holds.
    pub fn max_seq(&self) -> usize {
        self.kv.max_seq
    }

    /// Rows of the output matrix.
    pub fn n_vocab(&self) -> usize {
        self.cfg.n_vocab
    }

    /// The tokenizer read from the model file.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tok
    }

    /// Forgets the KV cache (every slot).
    pub fn reset(&mut self) {
        self.history.clear();
        self.slots.iter_mut().for_each(|s| s.1.clear());
    }

    /// The token ids whose keys and values KV slot `slot` holds.
    pub fn cached(&self, slot: usize) -> &[u32] {
        match slot {
            0 => &self.history,
            s => self.slots.get(s - 1).map_or(&[], |s| &s.1),
        }
    }

    /// One step over several sequences, each in its own KV slot (at most `MAX_SLOTS`, each at most
    /// once, all tokens together at most `BATCH`); returns the logits of each work's last token,
    /// `[work.len()][n_vocab]`. A step of one work computes exactly what `forward` does. A step of
    /// several sends all their tokens through the weights together, each row read once for all,
    /// every token by the four-token kernels (matmul_toks: its values do not depend on the other
    /// tokens nor on its lane), attention per work on its slot: so a work's values are bitwise
    /// the same whichever others share the step (and within the four-token kernels' tolerance
    /// of `forward`'s).
    pub fn step(&mut self, work: &[Work]) -> rt::Result<&mut [f32]> {
        let n: usize = work.iter().map(|w| w.tokens.len()).sum();
        if work.is_empty() || n > BATCH {
            return Err(rt::Error::Params(format!("a step takes 1 to {BATCH} tokens, not {n}")));
        }
        for (i, wk) in work.iter().enumerate() {
            if wk.slot >= MAX_SLOTS || work[..i].iter().any(|o| o.slot == wk.slot) {
                return Err(rt::Error::Params(format!("slot {} is out of range (0..{MAX_SLOTS}) or given twice", wk.slot)));
            }
            self.check(wk.tokens, wk.pos, self.cached(wk.slot).len())?;
        }
        while work.iter().any(|w| w.slot > self.slots.len()) {
            self.slots.push((KvCache::new(&self.cfg, self.kv.max_seq), Vec::new()));
        }
        self.batch(work, true, None, work.len() > 1);
        for wk in work {
            let h = if wk.slot == 0 { &mut self.history } else { &mut self.slots[wk.slot - 1].1 };
            h.truncate(wk.pos);
            h.extend_from_slice(wk.tokens);
        }
        Ok(&mut self.st.logits[..work.len() * self.cfg.n_vocab])
    }

    /// Refuses `tokens` at `pos` of a slot holding `cached` positions, with what is wrong.
    fn check(&self, tokens: &[u32], pos: usize, cached: usize) -> rt::Result<()> {
        if tokens.is_empty() {
            return Err(rt::Error::Params("forward needs at least one token".into()));
        }
        if pos > cached {
            return Err(rt::Error::Params(format!("position {pos} is past the {cached} cached tokens")));
        }
        if pos + tokens.len() > self.kv.max_seq {
            return Err(rt::Error::ContextFull { needed: pos + tokens.len(), limit: self.kv.max_seq });
        }
        match tokens.iter().find(|&&t| t as usize >= self.cfg.n_vocab) {
            Some(&bad) => Err(rt::Error::Params(format!("token id {bad} is out of range (vocab {})", self.cfg.n_vocab))),
            None => Ok(()),
        }
    }

    /// Runs `tokens` at positions `pos..pos + tokens.len()` (dropping any cached positions from
    /// `pos` on) and returns the logits of the last token.
    pub fn forward(&mut self, tokens: &[u32], pos: usize) -> rt::Result<&[f32]> {
        self.run(tokens, pos, None)?;
        Ok(&self.st.logits[..self.cfg.n_vocab])
    }

    /// Like [`Engine::forward`], but returns the logits of every token: `[tokens.len()][n_vocab]`.
    pub fn forward_all(&mut self, tokens: &[u32], pos: usize) -> rt::Result<Vec<f32>> {
        let mut all = vec![0.0f32; tokens.len() * self.cfg.n_vocab];
        self.run(tokens, pos, Some(&mut all))?;
        Ok(all)
    }

    /// Runs `tokens` like [`Engine::forward`] and draws the next token from the last logits
    /// with `sampler` (`recent`: the ids its repetition penalty looks at).
    pub(crate) fn forward_sample(&mut self, tokens: &[u32], pos: usize, sampler: &mut Sampler, recent: &[u32]) -> rt::Result<u32> {
        self.run(tokens, pos, None)?;
        Ok(sampler.sample(&mut self.st.logits[..self.cfg.n_vocab], recent))
    }

    fn run(&mut self, tokens: &[u32], pos: usize, mut all: Option<&mut [f32]>) -> rt::Result<()> {
        self.check(tokens, pos, self.history.len())?;
        self.history.truncate(pos);
        let n_vocab = self.cfg.n_vocab;
        for (b, chunk) in tokens.chunks(BATCH).enumerate() {
            let p = pos + b * BATCH;
            let last = b * BATCH + chunk.len() == tokens.len();
            let out = all.as_deref_mut().map(|a| &mut a[b * BATCH * n_vocab..(b * BATCH + chunk.len()) * n_vocab]);
            self.batch(&[Work { slot: 0, tokens: chunk, pos: p }], last, out, false);
            self.history.extend_from_slice(chunk);
        }
        Ok(())
    }

    /// One batch of the works' tokens (`n <= BATCH` in all, their rows in the works' order; the
    /// slots exist); with `logits`, each work's last-token logits into `st.logits`, with `all`
    /// (one work) every token's. `toks`: every token through the four-token kernels (step).
    fn batch(&mut self, work: &[Work], logits: bool, all: Option<&mut [f32]>, toks: bool) {
        let c = self.cfg;
        let (e, qd, kvd, hd) = (c.n_embd, c.q_dim, c.kv_dim, c.head_dim);
        let file = self.gguf.bytes();
        let Engine { st, pool, w, kv, slots, .. } = self;
        let mut slot_kv: Vec<Option<&mut KvCache>> = std::iter::once(kv).chain(slots.iter_mut().map(|s| &mut s.0)).map(Some).collect();
        let mut kvs: Vec<&mut KvCache> = work.iter().map(|wk| slot_kv[wk.slot].take().expect("distinct slots")).collect();
        // the works' first rows
        let row0: Vec<usize> = work.iter().scan(0, |r, wk| Some(std::mem::replace(r, *r + wk.tokens.len()))).collect();
        let n = row0.last().map_or(0, |r| r + work[work.len() - 1].tokens.len());

        // embeddings: x[t] = token_embd[tokens[t]] (· sqrt(n_embd) where the family scales them)
        for (t, &id) in work.iter().flat_map(|wk| wk.tokens).enumerate() {
            w.token_embd.dequant_row_into(file, id as usize, &mut st.x[t * e..(t + 1) * e]);
        }
        if EMBD_SCALE_SQRT { st.x[..n * e].iter_mut().for_each(|v| *v *= (e as f32).sqrt()) }

        // every row's cos/sin, of the global layers and of the local (sliding-window) ones
        let ff = w.rope_freqs.as_deref();
        let table = |base: f32| work.iter().flat_map(|wk| rope_table(wk.tokens.len(), wk.pos, hd, base, ff)).collect::<Vec<_>>();
        let rots = [table(c.rope_theta), if SWA_PATTERN > 0 { table(c.rope_theta_local) } else { Vec::new() }];
        for (l, lw) in w.layers.iter().enumerate() {
            let local = c.is_local(l);
            let rot = &rots[local as usize];
            // attention: xb = rmsnorm(x) ; q, k, v projections (+ biases where the family has them)
            par_rmsnorm(pool, &st.x[..n * e], &lw.attn_norm, c.rms_eps, &mut st.xb[..n * e]);
            prepare(pool, &mut st.acts[..n], &st.xb[..n * e], e, &lw.qkv_acts);
            let (wq, wk, wv) = (lw.wq.mat(file), lw.wk.mat(file), lw.wv.mat(file));
            let qkv: &mut [&mut [f32]] = &mut [&mut st.q[..n * qd], &mut st.k[..n * kvd], &mut st.v[..n * kvd]];
            products(pool, &[&wq, &wk, &wv], &st.acts[..n], qkv, toks);
            // per token: biases (where the family has them), per-head q/k norms (where it has
            // them), rope
            let (bq, bk) = (&lw.bq, &lw.bk);
            let mut rows: Vec<(&mut [f32], &mut [f32])> = st.q[..n * qd].chunks_mut(qd).zip(st.k[..n * kvd].chunks_mut(kvd)).collect();
            par_chunks_mut(pool, &mut rows, 1, &|t, r| {
                let (q, k) = &mut r[0];
                if let (Some(bq), Some(bk)) = (bq, bk) {
                    add_rows(q, bq);
                    add_rows(k, bk);
                }
                norm_opt(q, &lw.q_norm, c.rms_eps);
                norm_opt(k, &lw.k_norm, c.rms_eps);
                rope(q, &rot[t * hd / 2..][..hd / 2]);
                rope(k, &rot[t * hd / 2..][..hd / 2]);
            });
            drop(rows);
            if let Some(bv) = &lw.bv {
                add_rows(&mut st.v[..n * kvd], bv);
            }
            for ((wk, kv), &r) in work.iter().zip(kvs.iter_mut()).zip(&row0) {
                let rows = r * kvd..(r + wk.tokens.len()) * kvd;
                kv.store(l, wk.pos, &st.k[rows.clone()], &st.v[rows]);
            }
            let window = if local { c.window } else { usize::MAX };
            let kvr: Vec<&KvCache> = kvs.iter().map(|k| &**k).collect();
            attention(pool, &kvr, work, l, window, &c, &st.q[..n * qd], &mut st.att[..n * qd]);

            // x += post_norm(wo · att)
            prepare(pool, &mut st.acts[..n], &st.att[..n * qd], qd, &lw.o_acts);
            products(pool, &[&lw.wo.mat(file)], &st.acts[..n], &mut [&mut st.proj[..n * e]], toks);
            residual(pool, &mut st.x[..n * e], &mut st.proj[..n * e], e, &lw.attn_post_norm, c.rms_eps);

            // ffn: x += post_norm(w_down · (act(w_gate · xb) * (w_up · xb))), xb = rmsnorm(x), act = glu's
            par_rmsnorm(pool, &st.x[..n * e], &lw.ffn_norm, c.rms_eps, &mut st.xb[..n * e]);
            prepare(pool, &mut st.acts[..n], &st.xb[..n * e], e, &lw.gate_up_acts);
            let f = c.n_ff;
            let (wg, wu) = (lw.w_gate.mat(file), lw.w_up.mat(file));
            products(pool, &[&wg, &wu], &st.acts[..n], &mut [&mut st.gate[..n * f], &mut st.up[..n * f]], toks);
            let up = &st.up[..n * f];
            par_chunks_mut(pool, &mut st.gate[..n * f], f, &|t, g| glu(g, &up[t * f..(t + 1) * f]));
            prepare(pool, &mut st.acts[..n], &st.gate[..n * f], f, &lw.down_acts);
            products(pool, &[&lw.w_down.mat(file)], &st.acts[..n], &mut [&mut st.proj[..n * e]], toks);
            residual(pool, &mut st.x[..n * e], &mut st.proj[..n * e], e, &lw.ffn_post_norm, c.rms_eps);
        }

        // logits of each work's last token (or of every token for forward_all)
        let (out_mat, nv, m) = (w.output.mat(file), c.n_vocab, work.len());
        match all {
            Some(all) => {
                rmsnorm_rows(&st.x[..n * e], &w.output_norm, c.rms_eps, &mut st.xb[..n * e]);
                prepare(pool, &mut st.acts[..n], &st.xb[..n * e], e, &w.output_acts);
                products(pool, &[&out_mat], &st.acts[..n], &mut [all], toks);
                if logits {
                    st.logits[..nv].copy_from_slice(&all[(n - 1) * nv..]);
                }
            }
            None if logits => {
                for (i, (wk, &r)) in work.iter().zip(&row0).enumerate() {
                    let last = r + wk.tokens.len() - 1;
                    rmsnorm_rows(&st.x[last * e..(last + 1) * e], &w.output_norm, c.rms_eps, &mut st.xb[i * e..(i + 1) * e]);
                }
                prepare(pool, &mut st.acts[..m], &st.xb[..m * e], e, &w.output_acts);
                if st.logits.len() < m * nv {
                    st.logits.resize(m * nv, 0.0);
                }
                products(pool, &[&out_mat], &st.acts[..m], &mut [&mut st.logits[..m * nv]], toks);
            }
            None => {}
        }
    }
}

impl TensorRef {
    /// The located matrix as the matvec's view of the file's bytes.
    pub(crate) fn mat<'a>(&self, file: &'a [u8]) -> QMatrix<'a> {
        QMatrix { ty: self.ty, rows: self.rows, cols: self.cols, row_bytes: self.row_bytes, data: self.bytes(file) }
    }
}

/// Quantizes each row of `x` (`[n][cols]`) into `acts[t]` in the forms `kinds`, a token per task.
fn prepare(pool: &Pool, acts: &mut [Act], x: &[f32], cols: usize, kinds: &[ActKind]) {
    par_chunks_mut(pool, acts, 1, &|t, a: &mut [Act]| a[0].set(&x[t * cols..(t + 1) * cols], kinds));
}

/// `outs[i][t][r] = row r of ws[i] · xs[t]` for matrices that read the same activations: one pool
/// job for all of them for one token (matvec_many), matmul per matrix for a batch, matmul_toks
/// (every token by the four-token kernels) for a step's tokens (`toks`).
fn products(pool: &Pool, ws: &[&QMatrix], xs: &[Act], outs: &mut [&mut [f32]], toks: bool) {
    if xs.len() == 1 && !toks {
        matvec_many(pool, ws, &xs[0], outs);
    } else {
        let mm = if toks { matmul_toks } else { matmul };
        ws.iter().zip(outs.iter_mut()).for_each(|(w, out)| mm(pool, w, xs, out));
    }
}

/// `1 / sqrt(mean(x²) + eps)` of one row (squares in f32 summed in f64, as ggml).
fn rms_scale(x: &[f32], eps: f32) -> f32 {
    let ss: f64 = x.iter().map(|&v| (v * v) as f64).sum();
    1.0 / ((ss / x.len() as f64) as f32 + eps).sqrt()
}

/// `out = x / sqrt(mean(x²) + eps) * weight`, row by row.
fn rmsnorm_rows(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    for (xr, or) in x.chunks_exact(weight.len()).zip(out.chunks_exact_mut(weight.len())) {
        let scale = rms_scale(xr, eps);
        or.iter_mut().zip(xr).zip(weight).for_each(|((o, &v), &g)| *o = v * scale * g);
    }
}

/// `x = rmsnorm(x) * w` over each `w.len()` elements (a head, or a row), when the family has `w`;
/// in place, the bits of rmsnorm_rows.
fn norm_opt(x: &mut [f32], w: &Option<Vec<f32>>, eps: f32) {
    let Some(w) = w else { return };
    for xr in x.chunks_exact_mut(w.len()) {
        let scale = rms_scale(xr, eps);
        xr.iter_mut().zip(w).for_each(|(v, &g)| *v = *v * scale * g);
    }
}

/// rmsnorm_rows with a token (row) per task.
fn par_rmsnorm(pool: &Pool, x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let d = weight.len();
    par_chunks_mut(pool, out, d, &|t, o| rmsnorm_rows(&x[t * d..(t + 1) * d], weight, eps, o));
}

/// `x += post_norm(y)` for each row of `d` values (`post_norm`: rmsnorm times its weight where
/// the family has one), a token per task.
fn residual(pool: &Pool, x: &mut [f32], y: &mut [f32], d: usize, post_norm: &Option<Vec<f32>>, eps: f32) {
    let mut rows: Vec<(&mut [f32], &mut [f32])> = x.chunks_mut(d).zip(y.chunks_mut(d)).collect();
    par_chunks_mut(pool, &mut rows, 1, &|_, r| {
        let (x, y) = &mut r[0];
        norm_opt(y, post_norm, eps);
        add_rows(x, y);
    });
}

/// `x += y`, y repeated over x's rows when it is one row (a bias).
fn add_rows(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y.iter().cycle()).for_each(|(a, &b)| *a += b);
}

/// ggml's rope cache for positions `pos..pos + n`: `[n][head_dim / 2]` (sin, cos) of
/// pos · base^(-2i/head_dim), the angle stepped by repeated multiplication as ggml steps it, and
/// divided by the file's frequency factor `ff[i]` where it has them (T_ROPE_FREQS).
fn rope_table(n: usize, pos: usize, head_dim: usize, base: f32, ff: Option<&[f32]>) -> Vec<(f32, f32)> {
    let theta_scale = base.powf(-2.0 / head_dim as f32);
    let angles = |p: usize| (0..head_dim / 2).scan(p as f32, move |t, _| Some(std::mem::replace(t, *t * theta_scale)));
    let factor = |i: usize| ff.map_or(1.0, |f| f[i]);
    (pos..pos + n).flat_map(|p| angles(p).enumerate().map(|(i, t)| t / factor(i))).map(f32::sin_cos).collect()
}

/// Rope on every head of `x` (`[n_heads][head_dim]`) with one position's `rot` (rope_table): the
/// pairs are (i, i + head_dim/2) when `ROPE_NEOX` (NeoX), else (2i, 2i + 1) (ggml's normal mode).
fn rope(x: &mut [f32], rot: &[(f32, f32)]) {
    let half = rot.len();
    for head in x.chunks_exact_mut(2 * half) {
        for (i, &(sin, cos)) in rot.iter().enumerate() {
            let (ia, ib) = if ROPE_NEOX { (i, i + half) } else { (2 * i, 2 * i + 1) };
            let (a, b) = (head[ia], head[ib]);
            // gcc contracts ggml's `x0*cos - x1*sin` and `x0*sin + x1*cos` into these fmas
            head[ia] = a.mul_add(cos, -(b * sin));
            head[ib] = a.mul_add(sin, b * cos);
        }
    }
}

/// Causal GQA attention for each work's queries, at its positions `pos..pos + n`, on its slot's
/// cache: `att[t][h] = softmax(q[t][h] · K[lo..=pos+t] / sqrt(head_dim)) · V`, lo = pos + t + 1 -
/// window (the last `window` positions; 0 for a global layer), in llama.cpp's order of operations
/// (no flash attention), so the same bits: q rounded to f16; the head's products and softmax as
/// vec_ops' `attend` (llama.cpp's f16 matmuls: a batch sums as tinyBLAS, one token as
/// ggml_vec_dot_f16). A one-token work: a task per group of the heads sharing a kv head (`attend`,
/// its rows widened once for them; groups sized so that every thread has one); a longer work:
/// tiles of ATT_TILE tokens, a task each, the last (longest) first, and per kv head the tile's
/// queries of every head sharing it in one `attend_many` — or, for the tile's queries that attend
/// to more than FLASH_FROM positions, in one `attend_flash` (blocks with an online softmax: not
/// llama.cpp's order, within flash_attn's tolerance of it; a query's choice depends on its span
/// alone). All works' tasks in one pool job.
fn attention(pool: &Pool, kvs: &[&KvCache], work: &[Work], layer: usize, window: usize, c: &Config, q: &[f32], att: &mut [f32]) {
    const ATT_TILE: usize = 4;
    // spans up to this many positions in llama.cpp's order (perplexity at -c 512 stays its bits)
    const FLASH_FROM: usize = 512;
    type Out<'a> = std::sync::Mutex<&'a mut [f32]>;
    let (hd, qd, g) = (c.head_dim, c.q_dim, c.n_head / c.n_head_kv);
    let n_one = work.iter().filter(|wk| wk.tokens.len() == 1).count();
    let per = g.div_ceil(pool.threads().div_ceil(c.n_head_kv * n_one.max(1)).min(g));
    // (work, first row of the work, kv head, heads) of each group; (work, first row, tile's first
    // token in the work) of each tile
    let (mut groups, mut tiles): (Vec<(usize, usize, usize, std::ops::Range<usize>, Out)>, Vec<(usize, usize, usize, Out)>) = (Vec::new(), Vec::new());
    let (mut rest, mut r0) = (att, 0);
    for (i, wk) in work.iter().enumerate() {
        let (mut mine, r) = std::mem::take(&mut rest).split_at_mut(wk.tokens.len() * qd);
        rest = r;
        if wk.tokens.len() == 1 {
            for (kh, j) in (0..c.n_head_kv).flat_map(|kh| (0..g).step_by(per).map(move |j| (kh, j))) {
                let (h0, h1) = (kh * g + j, kh * g + (j + per).min(g));
                let (o, m) = std::mem::take(&mut mine).split_at_mut((h1 - h0) * hd);
                groups.push((i, r0, kh, h0..h1, std::sync::Mutex::new(o)));
                mine = m;
            }
        } else {
            let mut mine: Vec<(usize, usize, usize, Out)> = mine.chunks_mut(ATT_TILE * qd).enumerate().map(|(k, o)| (i, r0, k * ATT_TILE, std::sync::Mutex::new(o))).collect();
            mine.reverse();
            tiles.append(&mut mine);
        }
        r0 += wk.tokens.len();
    }
    pool.run(tiles.len() + groups.len(), &|task| {
        if task >= tiles.len() {
            let (i, r0, kh, hs, o) = &groups[task - tiles.len()];
            let pos = work[*i].pos;
            let kv = kvs[*i].head(layer, *kh, (pos + 1).saturating_sub(window), pos + 1);
            let q = &q[r0 * qd + hs.start * hd..r0 * qd + hs.end * hd];
            return attend(q, hd, kv, true, &mut o.lock().unwrap_or_else(|e| e.into_inner()));
        }
        let (i, r0, t0, o) = &tiles[task];
        let (pos, mut out) = (work[*i].pos, o.lock().unwrap_or_else(|e| e.into_inner()));
        let (t0, tn, q) = (*t0, out.len() / qd, &q[r0 * qd..]);
        let lo = (pos + t0 + 1).saturating_sub(window);
        let spans: Vec<std::ops::Range<usize>> = (t0..t0 + tn).map(|t| (pos + t + 1).saturating_sub(window) - lo..pos + t + 1 - lo).collect();
        let (mut qs, mut os) = (vec![0.0f32; tn * g * hd], vec![0.0f32; tn * g * hd]);
        // the tokens attending to more than FLASH_FROM positions (a suffix: spans grow) by blocks
        let e = spans.partition_point(|s| s.len() <= FLASH_FROM);
        for kh in 0..c.n_head_kv {
            let at = |t: usize| (t0 + t) * qd + kh * g * hd..(t0 + t) * qd + (kh + 1) * g * hd;
            (0..tn).for_each(|t| qs[t * g * hd..][..g * hd].copy_from_slice(&q[at(t)]));
            let ((qa, qb), (oa, ob)) = (qs.split_at(e * g * hd), os.split_at_mut(e * g * hd));
            if e > 0 {
                attend_many(qa, hd, &spans[..e], kvs[*i].head(layer, kh, lo, pos + t0 + tn), oa);
            }
            if e < tn {
                // rows from a multiple of FLASH_KB (a query's blocks are then its span's alone)
                let base = (lo + spans[e].start) / FLASH_KB * FLASH_KB;
                let fs: Vec<std::ops::Range<usize>> = spans[e..].iter().map(|s| s.start + lo - base..s.end + lo - base).collect();
                attend_flash(qb, hd, &fs, kvs[*i].head(layer, kh, base, pos + t0 + tn), ob);
            }
            (0..tn).for_each(|t| out[at(t).start - t0 * qd..][..g * hd].copy_from_slice(&os[t * g * hd..][..g * hd]));
        }
    });
}

/// Runs `f(i, chunk_i)` over the `chunk`-sized pieces of `out` on the pool. Each piece is
/// handed out behind its own (uncontended) lock, which keeps this safe code.
fn par_chunks_mut<T: Send>(pool: &Pool, out: &mut [T], chunk: usize, f: &(dyn Fn(usize, &mut [T]) + Sync)) {
    let pieces: Vec<std::sync::Mutex<&mut [T]>> = out.chunks_mut(chunk).map(std::sync::Mutex::new).collect();
    pool.run(pieces.len(), &|i| {
        let mut piece = pieces[i].lock().unwrap_or_else(|e| e.into_inner());
        f(i, &mut piece);
    });
}
