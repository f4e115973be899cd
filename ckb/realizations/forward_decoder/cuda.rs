// The forward pass on a CUDA GPU (cudarc; libcuda is loaded at run time). The file's tensor
// data is uploaded once, as one block, and each matrix is a pointer into it; the small f32
// vectors (norms, biases) are uploaded from the host copies the weights section made. One
// stream runs every step: the kernels of the entry's kernels/<slot>.<arch>.ptx (kernels_cuda,
// compiled with NVRTC when the engine was generated) read the token ids and positions from
// device buffers, so a decode step copies 8 bytes in and, when the sampler allows sampling on
// the device, 4 bytes (the token) out; that copy is the step's only host sync. The launches of a
// decode step do not change from token to token (every argument is a fixed buffer or size; the
// position is read on the device), so the first decode step is captured into a CUDA graph and
// later steps replay it: one launch per token instead of ~14 per layer.

use rt::cudarc::driver::{CudaContext, CudaFunction, CudaGraph, CudaSlice, CudaStream, DevicePtr, DriverError, LaunchConfig, PushKernelArg};
use std::collections::HashMap;
use std::sync::Arc;

/// Tokens per prefill chunk: the activation buffers (and forward_all's logits) hold this many.
pub(crate) const BATCH: usize = 64;
/// The context the engine allocates when neither the constraints nor the caller say otherwise.
pub(crate) const DEFAULT_MAX_SEQ: usize = 4096;
const WARPS: u32 = 4; // warps per block of the GEMV/GEMM/get_rows kernels (one output row each)
const GEMM_TOK: usize = 8; // tokens per block of the GEMM kernels (GEMM_TOK in the .cu file)
const TOPK_MAX: usize = 256; // the largest top_k sample_topk_f32 handles (TOPK_MAX in the .cu file)

fn dev_err(e: DriverError) -> rt::Error {
    rt::Error::Device(format!("{e:?}"))
}

/// The GPU: a context on device 0, its stream, and every kernel of the PTX by name.
pub(crate) struct Gpu {
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) name: String,
    funcs: HashMap<&'static str, CudaFunction>,
}

impl Gpu {
    /// Device 0, checked to be at least the arch the PTX was generated for; the kernels loaded.
    pub(crate) fn open() -> rt::Result<Gpu> {
        let other = "run on a machine with an NVIDIA GPU and its driver, or regenerate the engine with hw = \"x86_64-avx2\" or \"generic\"";
        // SAFETY: only probes whether the driver library can be loaded.
        if !unsafe { rt::cudarc::driver::sys::is_culib_present() } {
            return Err(rt::Error::NoDevice(format!("the CUDA driver library (libcuda.so.1) is not installed; {other}")));
        }
        let n = CudaContext::device_count().map_err(|e| rt::Error::NoDevice(format!("the CUDA driver does not start ({e:?}); {other}")))?;
        if n < 1 {
            return Err(rt::Error::NoDevice(format!("the CUDA driver sees no GPU; {other}")));
        }
        let ctx = CudaContext::new(0).map_err(|e| rt::Error::NoDevice(format!("cannot open GPU 0: {e:?}")))?;
        // One stream, so cudarc's per-buffer event tracking is not needed.
        // SAFETY: no buffer exists yet.
        unsafe { ctx.disable_event_tracking() };
        let name = ctx.name().unwrap_or_else(|_| "GPU 0".into());
        let (major, minor) = ctx.compute_capability().map_err(dev_err)?;
        let want: i32 = CUDA_ARCH.trim_start_matches("sm_").parse().unwrap_or(0);
        if major * 10 + minor < want {
            return Err(rt::Error::NoDevice(format!(
                "{name} is sm_{major}{minor}, older than {CUDA_ARCH}, the arch this engine was generated for; regenerate with hw = \"sm_{major}{minor}\" if the ckb has that target"
            )));
        }
        let ptx = METAINFER_KERNELS
            .iter()
            .find(|(n, _)| *n == KERNELS_CUDA_PTX)
            .and_then(|(_, b)| std::str::from_utf8(b).ok())
            .ok_or_else(|| rt::Error::Device(format!("the engine carries no {KERNELS_CUDA_PTX}; regenerate its cache entry")))?;
        let module = ctx
            .load_module(rt::cudarc::nvrtc::Ptx::from_src(ptx))
            .map_err(|e| rt::Error::Device(format!("the driver refuses {KERNELS_CUDA_PTX} on {name}: {e:?}; update the NVIDIA driver")))?;
        let mut funcs = HashMap::new();
        for &k in KERNELS_CUDA_ENTRIES {
            let f = module.load_function(k).map_err(|e| rt::Error::Device(format!("kernel {k} is not in {KERNELS_CUDA_PTX}: {e:?}")))?;
            funcs.insert(k, f);
        }
        // A stream of its own: the legacy default stream cannot be captured into a graph.
        let stream = ctx.new_stream().map_err(dev_err)?;
        Ok(Gpu { stream, name, funcs })
    }

    fn func(&self, name: &str) -> rt::Result<&CudaFunction> {
        self.funcs.get(name).ok_or_else(|| rt::Error::Device(format!("kernel {name} is not loaded")))
    }

    /// Launches kernel `name` on the stream with `args`, plain values in the kernel's parameter
    /// order (device pointers as u64).
    fn launch(&self, name: &str, grid: (u32, u32, u32), block: (u32, u32, u32), args: &[KArg]) -> rt::Result<()> {
        let mut b = self.stream.launch_builder(self.func(name)?);
        for a in args {
            match a {
                KArg::U64(v) => b.arg(v),
                KArg::I32(v) => b.arg(v),
                KArg::F32(v) => b.arg(v),
            };
        }
        let cfg = LaunchConfig { grid_dim: grid, block_dim: block, shared_mem_bytes: 0 };
        // SAFETY: the arguments follow the kernel's signature in kernels_cuda (its interface
        // and shapes), every pointer is a live device buffer of the sizes given.
        unsafe { b.launch(cfg) }.map_err(dev_err)?;
        Ok(())
    }

    /// A zeroed device buffer of `n` elements.
    fn zeros<T: rt::cudarc::driver::DeviceRepr + rt::cudarc::driver::ValidAsZeroBits>(&self, n: usize) -> rt::Result<CudaSlice<T>> {
        self.stream.alloc_zeros::<T>(n.max(1)).map_err(dev_err)
    }

    fn ptr<T>(&self, s: &CudaSlice<T>) -> u64 {
        s.device_ptr(&self.stream).0
    }
}

/// One kernel argument.
#[derive(Clone, Copy, Debug)]
enum KArg {
    U64(u64),
    I32(i32),
    F32(f32),
}

impl From<u64> for KArg {
    fn from(v: u64) -> KArg { KArg::U64(v) }
}
impl From<i32> for KArg {
    fn from(v: i32) -> KArg { KArg::I32(v) }
}
impl From<f32> for KArg {
    fn from(v: f32) -> KArg { KArg::F32(v) }
}

/// The captured launches of one decode step (n = 1, logits of the token).
pub(crate) struct DecodeGraph(CudaGraph);

// SAFETY: the graph is only launched through `&mut Engine`, so from one thread at a time, and
// every launch binds the context to the calling thread first (CudaGraph::launch).
unsafe impl Send for DecodeGraph {}

/// A matrix in device memory: a pointer into the uploaded tensor data.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DevMat {
    pub(crate) ty: GgmlType,
    pub(crate) rows: usize, // output features
    pub(crate) cols: usize, // input features
    pub(crate) ptr: u64,
}

/// One layer's device pointers.
pub(crate) struct DevLayer {
    pub(crate) attn_norm: u64, // [n_embd] f32
    pub(crate) wq: DevMat,
    pub(crate) wk: DevMat,
    pub(crate) wv: DevMat,
    pub(crate) bq: u64, // [q_dim] f32, or 0 (null) when the family has no q/k/v biases
    pub(crate) bk: u64, // [kv_dim] f32, or 0
    pub(crate) bv: u64, // [kv_dim] f32, or 0
    pub(crate) wo: DevMat,
    pub(crate) ffn_norm: u64, // [n_embd] f32
    pub(crate) w_gate: DevMat,
    pub(crate) w_up: DevMat,
    pub(crate) w_down: DevMat,
}

/// The model and the run state in device memory.
pub(crate) struct Device {
    _data: CudaSlice<u8>,        // the file's tensor data, bytes lo..hi
    _vecs: Vec<CudaSlice<f32>>,  // norms and biases
    pub(crate) token_embd: DevMat,
    pub(crate) output: DevMat,
    pub(crate) output_norm: u64,
    pub(crate) layers: Vec<DevLayer>,
    x: CudaSlice<f32>,      // [BATCH][n_embd] residual stream
    xb: CudaSlice<f32>,     // [BATCH][n_embd] normed input of a projection
    q: CudaSlice<f32>,      // [BATCH][q_dim] (n_head * head_dim)
    k: CudaSlice<f32>,      // [BATCH][kv_dim]
    v: CudaSlice<f32>,      // [BATCH][kv_dim]
    att: CudaSlice<f32>,    // [BATCH][q_dim]
    proj: CudaSlice<f32>,   // [BATCH][n_embd]
    gate: CudaSlice<f32>,   // [BATCH][n_ff]
    up: CudaSlice<f32>,     // [BATCH][n_ff]
    logits: CudaSlice<f32>, // [BATCH][n_vocab]
    ids: CudaSlice<i32>,    // [BATCH] token ids of the chunk
    pos: CudaSlice<i32>,    // [BATCH] their positions
    tok: CudaSlice<i32>,    // [1] the sampled token
    k_cache: CudaSlice<u16>, // [n_layer][max_seq][kv_dim] f16
    v_cache: CudaSlice<u16>, // [n_layer][max_seq][kv_dim] f16
}

impl Device {
    fn upload(gpu: &Gpu, file: &[u8], c: &Config, w: &Weights, max_seq: usize) -> rt::Result<Device> {
        let mut mats: Vec<&TensorRef> = vec![&w.token_embd, &w.output];
        for l in &w.layers {
            mats.extend([&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]);
        }
        let lo = mats.iter().map(|m| m.offset).min().unwrap_or(0);
        let hi = mats.iter().map(|m| m.offset + m.rows * m.row_bytes).max().unwrap_or(lo);
        let data = gpu.stream.clone_htod(&file[lo..hi]).map_err(|e| {
            rt::Error::Device(format!("cannot upload {} MB of weights to {}: {e:?}", (hi - lo) >> 20, gpu.name))
        })?;
        let base = gpu.ptr(&data);
        let mat = |t: &TensorRef| DevMat { ty: t.ty, rows: t.rows, cols: t.cols, ptr: base + (t.offset - lo) as u64 };
        let mut vecs = Vec::new();
        let mut vec_ptr = |v: &[f32]| -> rt::Result<u64> {
            let s = gpu.stream.clone_htod(v).map_err(dev_err)?;
            let p = gpu.ptr(&s);
            vecs.push(s);
            Ok(p)
        };
        let mut layers = Vec::with_capacity(w.layers.len());
        for l in &w.layers {
            layers.push(DevLayer {
                attn_norm: vec_ptr(&l.attn_norm)?,
                wq: mat(&l.wq),
                wk: mat(&l.wk),
                wv: mat(&l.wv),
                bq: l.bq.as_deref().map(&mut vec_ptr).transpose()?.unwrap_or(0),
                bk: l.bk.as_deref().map(&mut vec_ptr).transpose()?.unwrap_or(0),
                bv: l.bv.as_deref().map(&mut vec_ptr).transpose()?.unwrap_or(0),
                wo: mat(&l.wo),
                ffn_norm: vec_ptr(&l.ffn_norm)?,
                w_gate: mat(&l.w_gate),
                w_up: mat(&l.w_up),
                w_down: mat(&l.w_down),
            });
        }
        let output_norm = vec_ptr(&w.output_norm)?;
        let (b, e, kvd) = (BATCH, c.n_embd, c.kv_dim);
        let cache = c.n_layer * max_seq * kvd;
        Ok(Device {
            token_embd: mat(&w.token_embd),
            output: mat(&w.output),
            output_norm,
            layers,
            _vecs: vecs,
            _data: data,
            x: gpu.zeros(b * e)?,
            xb: gpu.zeros(b * e)?,
            q: gpu.zeros(b * c.q_dim)?,
            k: gpu.zeros(b * kvd)?,
            v: gpu.zeros(b * kvd)?,
            att: gpu.zeros(b * c.q_dim)?,
            proj: gpu.zeros(b * e)?,
            gate: gpu.zeros(b * c.n_ff)?,
            up: gpu.zeros(b * c.n_ff)?,
            logits: gpu.zeros(b * c.n_vocab)?,
            ids: gpu.zeros(b)?,
            pos: gpu.zeros(b)?,
            tok: gpu.zeros(1)?,
            k_cache: gpu.zeros(cache)?,
            v_cache: gpu.zeros(cache)?,
        })
    }
}

/// A loaded model: the mapped file, its weights on the GPU, the KV cache there, and everything
/// needed to turn a prompt into tokens.
pub struct Engine {
    pub(crate) gguf: Gguf,                     // the mapped model file
    pub(crate) cfg: Config,                    // dims read from (and checked against) the file
    pub(crate) w: Weights,                     // tensor locations inside `gguf`, f32 vectors
    pub(crate) gpu: Gpu,                       // context, stream, kernels
    pub(crate) dev: Device,                    // weights, activations, KV cache on the GPU
    pub(crate) max_seq: usize,                 // positions the KV cache holds
    pub(crate) logits: Vec<f32>,               // [n_vocab] the last token's logits, on the host
    pub(crate) tok: Arc<Tokenizer>,            // from the file's tokenizer.ggml.* keys
    pub(crate) template: Option<Arc<ChatTemplate>>, // tokenizer.chat_template, when present
    pub(crate) history: Vec<u32>,              // [n_past] tokens whose K/V are in the cache
    pub(crate) graph: Option<DecodeGraph>,     // the decode step, captured on first use
    pub(crate) use_graph: bool,                // false after a capture failed, or when asked
}

impl Engine {
    /// Maps and validates the model file, checks that it is what this engine was generated for,
    /// opens the GPU and uploads the weights.
    pub fn load(path: &std::path::Path) -> rt::Result<Engine> {
        let gguf = Gguf::open(path)?;
        let cfg = Config::from_gguf(&gguf)?;
        if cfg.head_dim % 32 != 0 || cfg.head_dim > 256 {
            return Err(rt::Error::Mismatch {
                what: "head dim".into(),
                expected: "a multiple of 32 up to 256 (the cuda attention kernel)".into(),
                found: cfg.head_dim.to_string(),
                fix: "use a cpu hw (x86_64-avx2, generic) for this model".into(),
            });
        }
        let w = Weights::from_gguf(&gguf, &cfg)?;
        if w.rope_freqs.is_some() {
            return Err(rt::Error::Mismatch {
                what: format!("tensor '{}'", T_ROPE_FREQS.unwrap_or_default()),
                expected: "files without rope frequency factors (the cuda rope kernel has none yet)".into(),
                found: "in the file".into(),
                fix: "use a cpu hw (x86_64-avx2, x86_64-avx512, generic) for this model".into(),
            });
        }
        let tok = Tokenizer::from_gguf(&gguf)?;
        if tok.n_vocab() > cfg.n_vocab {
            return Err(rt::Error::format(
                "tokenizer.ggml.tokens",
                format!("{} tokens but token_embd.weight has {} rows", tok.n_vocab(), cfg.n_vocab),
            ));
        }
        let template = ChatTemplate::from_gguf(&gguf)?.map(Arc::new);
        let max_seq = cfg.context_length.min(MAX_SEQ.unwrap_or(DEFAULT_MAX_SEQ));
        let gpu = Gpu::open()?;
        let dev = Device::upload(&gpu, gguf.bytes(), &cfg, &w, max_seq)?;
        Ok(Engine { logits: vec![0.0; cfg.n_vocab], gguf, cfg, w, gpu, dev, max_seq, tok: Arc::new(tok), template, history: Vec::new(), graph: None, use_graph: true })
    }

    /// Host threads do not take part in the forward pass of a CUDA engine; kept for the
    /// interface every engine has.
    pub fn set_threads(&mut self, n: usize) {
        let _ = n;
    }

    /// Most positions the KV cache holds.
    pub fn max_seq(&self) -> usize {
        self.max_seq
    }

    /// Rows of the output matrix.
    pub fn n_vocab(&self) -> usize {
        self.cfg.n_vocab
    }

    /// The tokenizer read from the model file.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tok
    }

    /// Whether decode steps replay a captured CUDA graph (the default) or launch every kernel.
    pub fn set_cuda_graph(&mut self, on: bool) {
        self.use_graph = on;
        self.graph = None;
    }

    /// The GPU the engine runs on.
    pub fn device_name(&self) -> &str {
        &self.gpu.name
    }

    /// Forgets the KV cache.
    pub fn reset(&mut self) {
        self.history.clear();
    }

    /// Runs `tokens` at positions `pos..pos + tokens.len()` (dropping any cached positions from
    /// `pos` on) and returns the logits of the last token.
    pub fn forward(&mut self, tokens: &[u32], pos: usize) -> rt::Result<&[f32]> {
        self.run(tokens, pos, None)?;
        self.copy_logits()?;
        Ok(&self.logits)
    }

    /// Like [`Engine::forward`], but returns the logits of every token: `[tokens.len()][n_vocab]`.
    pub fn forward_all(&mut self, tokens: &[u32], pos: usize) -> rt::Result<Vec<f32>> {
        let mut all = vec![0.0f32; tokens.len() * self.cfg.n_vocab];
        self.run(tokens, pos, Some(&mut all))?;
        Ok(all)
    }

    /// Runs `tokens` like [`Engine::forward`] and draws the next token: on the device (argmax, or
    /// temperature + top-k with u from the sampler's RNG) when the sampler's settings allow,
    /// copying back only the token; otherwise from the logits copied to the host.
    pub(crate) fn forward_sample(&mut self, tokens: &[u32], pos: usize, sampler: &mut Sampler, recent: &[u32]) -> rt::Result<u32> {
        self.run(tokens, pos, None)?;
        let Some((top_k, temperature, u)) = device_draw(sampler) else {
            self.copy_logits()?;
            return Ok(sampler.sample(&mut self.logits, recent));
        };
        let (g, d) = (&self.gpu, &self.dev);
        let (logits, out) = (g.ptr(&d.logits), g.ptr(&d.tok));
        let n = self.cfg.n_vocab as i32;
        if top_k <= 1 {
            g.launch("argmax_f32", (1, 1, 1), (1024, 1, 1), &[logits.into(), n.into(), out.into()])?;
        } else {
            g.launch("sample_topk_f32", (1, 1, 1), (1024, 1, 1), &[logits.into(), n.into(), (top_k as i32).into(), temperature.into(), u.into(), out.into()])?;
        }
        let mut id = [0i32; 1];
        g.stream.memcpy_dtoh(&d.tok, &mut id[..]).map_err(dev_err)?;
        g.stream.synchronize().map_err(dev_err)?;
        Ok(id[0] as u32)
    }

    /// The last token's logits (row 0 of the device logits) to `self.logits`.
    fn copy_logits(&mut self) -> rt::Result<()> {
        let nv = self.cfg.n_vocab;
        self.gpu.stream.memcpy_dtoh(&self.dev.logits.slice(0..nv), &mut self.logits[..]).map_err(dev_err)?;
        self.gpu.stream.synchronize().map_err(dev_err)
    }

    fn run(&mut self, tokens: &[u32], pos: usize, mut all: Option<&mut [f32]>) -> rt::Result<()> {
        if tokens.is_empty() {
            return Err(rt::Error::Params("forward needs at least one token".into()));
        }
        if pos > self.history.len() {
            return Err(rt::Error::Params(format!("position {pos} is past the {} cached tokens", self.history.len())));
        }
        if pos + tokens.len() > self.max_seq {
            return Err(rt::Error::ContextFull { needed: pos + tokens.len(), limit: self.max_seq });
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= self.cfg.n_vocab) {
            return Err(rt::Error::Params(format!("token id {bad} is out of range (vocab {})", self.cfg.n_vocab)));
        }
        self.history.truncate(pos);
        let nv = self.cfg.n_vocab;
        for (b, chunk) in tokens.chunks(BATCH).enumerate() {
            let p = pos + b * BATCH;
            let last = b * BATCH + chunk.len() == tokens.len();
            let want_all = all.is_some();
            self.batch(chunk, p, last, want_all)?;
            if let Some(all) = all.as_deref_mut() {
                let out = &mut all[b * BATCH * nv..(b * BATCH + chunk.len()) * nv];
                self.gpu.stream.memcpy_dtoh(&self.dev.logits.slice(0..chunk.len() * nv), out).map_err(dev_err)?;
                self.gpu.stream.synchronize().map_err(dev_err)?;
            }
            self.history.extend_from_slice(chunk);
        }
        Ok(())
    }

    /// One chunk of `n <= BATCH` tokens at positions `pos..pos + n`, queued on the stream; the
    /// logits of the last token (of every token when `all`) end in `dev.logits`.
    fn batch(&mut self, tokens: &[u32], pos: usize, last: bool, all: bool) -> rt::Result<()> {
        let n = tokens.len();
        let (g, d) = (&self.gpu, &mut self.dev);
        let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
        let ps: Vec<i32> = (pos..pos + n).map(|p| p as i32).collect();
        g.stream.memcpy_htod(&ids[..], &mut d.ids).map_err(dev_err)?;
        g.stream.memcpy_htod(&ps[..], &mut d.pos).map_err(dev_err)?;
        if n > 1 || !last || all || !self.use_graph {
            return self.launches(n, last, all);
        }
        if self.graph.is_none() {
            // Capture (launches are recorded, not run); on any failure fall back to launching.
            let stream = &self.gpu.stream;
            if stream.begin_capture(rt::cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).is_err() {
                self.use_graph = false;
                return self.launches(1, true, false);
            }
            let recorded = self.launches(1, true, false);
            let ended = stream.end_capture(rt::cudarc::driver::sys::CUgraphInstantiate_flags(0));
            match (recorded, ended) {
                (Ok(()), Ok(Some(graph))) => self.graph = Some(DecodeGraph(graph)),
                _ => {
                    self.use_graph = false;
                    return self.launches(1, true, false);
                }
            }
        }
        match &self.graph {
            Some(graph) => graph.0.launch().map_err(dev_err),
            None => self.launches(1, true, false),
        }
    }

    /// The kernels of one chunk of `n` tokens whose ids and positions are in `dev.ids` / `dev.pos`.
    fn launches(&self, n: usize, last: bool, all: bool) -> rt::Result<()> {
        let c = self.cfg;
        let (g, d) = (&self.gpu, &self.dev);
        let p = |s: &CudaSlice<f32>| g.ptr(s);
        let (x, xb, q, k, v, att, proj, gate, up) = (p(&d.x), p(&d.xb), p(&d.q), p(&d.k), p(&d.v), p(&d.att), p(&d.proj), p(&d.gate), p(&d.up));
        let (idp, posp) = (g.ptr(&d.ids), g.ptr(&d.pos));
        let (e, kvd, f) = (c.n_embd as i32, c.kv_dim as i32, c.n_ff as i32);
        let nt = n as i32;
        let threads = |count: usize| (((count + 255) / 256) as u32, 1, 1);

        // x[t] = token_embd[tokens[t]]
        let te = d.token_embd;
        g.launch(&format!("get_rows_{}", cuda_suffix(te.ty)), (n as u32, 1, 1), (32 * WARPS, 1, 1), &[te.ptr.into(), idp.into(), x.into(), e.into()])?;
        for (l, lw) in d.layers.iter().enumerate() {
            let layer_off = (l * self.max_seq * c.kv_dim * 2) as u64; // bytes into each cache
            let (kc, vc) = (g.ptr(&d.k_cache) + layer_off, g.ptr(&d.v_cache) + layer_off);
            // attention: xb = rmsnorm(x); q, k, v (+ biases, where the family has them); rope; cache; attend
            g.launch("rmsnorm_f32", (n as u32, 1, 1), (256, 1, 1), &[x.into(), lw.attn_norm.into(), xb.into(), e.into(), c.rms_eps.into()])?;
            mat(g, &lw.wq, xb, q, lw.bq, n)?;
            mat(g, &lw.wk, xb, k, lw.bk, n)?;
            mat(g, &lw.wv, xb, v, lw.bv, n)?;
            let (nh, nkv, hd) = (c.n_head as i32, c.n_head_kv as i32, c.head_dim as i32);
            g.launch(if ROPE_NEOX { "rope_neox_f32" } else { "rope_norm_f32" }, threads(n * (c.n_head + c.n_head_kv) * c.head_dim / 2), (256, 1, 1), &[q.into(), k.into(), posp.into(), nt.into(), nh.into(), nkv.into(), hd.into(), c.rope_theta.into()])?;
            g.launch("kv_append_f16", threads(n * c.kv_dim), (256, 1, 1), &[k.into(), v.into(), kc.into(), vc.into(), posp.into(), nt.into(), kvd.into()])?;
            let scale = 1.0f32 / (c.head_dim as f32).sqrt();
            g.launch("attention_f16kv", (c.n_head as u32, n as u32, 1), (128, 1, 1), &[q.into(), kc.into(), vc.into(), att.into(), posp.into(), nt.into(), nh.into(), nkv.into(), hd.into(), scale.into()])?;
            // x += wo · att
            mat(g, &lw.wo, att, proj, 0, n)?;
            g.launch("add_f32", threads(n * c.n_embd), (256, 1, 1), &[x.into(), proj.into(), (nt * e).into()])?;
            // ffn: x += w_down · (silu(w_gate · xb) * (w_up · xb)), xb = rmsnorm(x)
            g.launch("rmsnorm_f32", (n as u32, 1, 1), (256, 1, 1), &[x.into(), lw.ffn_norm.into(), xb.into(), e.into(), c.rms_eps.into()])?;
            mat(g, &lw.w_gate, xb, gate, 0, n)?;
            mat(g, &lw.w_up, xb, up, 0, n)?;
            g.launch("swiglu_f32", threads(n * c.n_ff), (256, 1, 1), &[gate.into(), up.into(), gate.into(), (nt * f).into()])?;
            mat(g, &lw.w_down, gate, proj, 0, n)?;
            g.launch("add_f32", threads(n * c.n_embd), (256, 1, 1), &[x.into(), proj.into(), (nt * e).into()])?;
        }
        // logits of the last token (of every token for forward_all)
        let logits = g.ptr(&d.logits);
        if all {
            g.launch("rmsnorm_f32", (n as u32, 1, 1), (256, 1, 1), &[x.into(), d.output_norm.into(), xb.into(), e.into(), c.rms_eps.into()])?;
            mat(g, &d.output, xb, logits, 0, n)?;
        } else if last {
            let x_last = x + ((n - 1) * c.n_embd * 4) as u64;
            g.launch("rmsnorm_f32", (1, 1, 1), (256, 1, 1), &[x_last.into(), d.output_norm.into(), xb.into(), e.into(), c.rms_eps.into()])?;
            mat(g, &d.output, xb, logits, 0, 1)?;
        }
        Ok(())
    }
}

/// What the device can sample without the logits leaving it: `(top_k, temperature, u)` for
/// argmax (`top_k` 1) or temperature + top-k with `top_k <= TOPK_MAX` (`u` drawn from the
/// sampler's RNG, as `Sampler::sample` would); None when top-p, min-p, a penalty, a logit bias or
/// an unbounded top-k need the CPU path over the logits.
fn device_draw(s: &mut Sampler) -> Option<(usize, f32, f32)> {
    let p = &s.p;
    if p.repeat_penalty != 1.0 || p.frequency_penalty != 0.0 || p.presence_penalty != 0.0 || !p.logit_bias.is_empty() {
        return None;
    }
    if !(p.temperature > 0.0) {
        return Some((1, 0.0, 0.0));
    }
    if p.top_p < 1.0 || p.min_p > 0.0 || p.top_k == 0 || p.top_k > TOPK_MAX {
        return None;
    }
    Some((p.top_k, p.temperature, s.rng.next_f64() as f32))
}

/// y[t] = m · x[t] (+ bias) for `n` tokens: the type's GEMV for one token, its GEMM for more.
fn mat(g: &Gpu, m: &DevMat, x: u64, y: u64, bias: u64, n: usize) -> rt::Result<()> {
    let (rows, cols) = (m.rows as i32, m.cols as i32);
    let blocks = (m.rows as u32).div_ceil(WARPS);
    if n == 1 {
        g.launch(&format!("gemv_{}", cuda_suffix(m.ty)), (blocks, 1, 1), (32 * WARPS, 1, 1), &[m.ptr.into(), x.into(), y.into(), bias.into(), rows.into(), cols.into()])?;
    } else {
        let tiles = n.div_ceil(GEMM_TOK) as u32;
        g.launch(&format!("gemm_{}", cuda_suffix(m.ty)), (blocks, tiles, 1), (32 * WARPS, 1, 1), &[m.ptr.into(), x.into(), y.into(), bias.into(), rows.into(), cols.into(), (n as i32).into()])?;
    }
    Ok(())
}
