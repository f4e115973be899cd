// Matrix-vector and matrix-matrix products over quantized weight rows, on a persistent pool of
// worker threads. Every output element is computed entirely by one thread, so results are
// bitwise identical for any thread count: in `matvec` by one call of the generated
// `dot_row(ty, row, x)`; in `matmul` tokens 4k..4k+4 (k < n_tok / 4) by the type's four-token
// kernel `dot_row4` when it has one (it mirrors llama.cpp's gemm, whose float order differs from
// its gemv), or, for a type with a tiled form, by `dot_dec` on tiles of `tile_rows(ty)` rows
// decoded once (`dec_rows`; the results of the type's tiled order), the other tokens by `dot_row`.
//
// The pool: one atomic word holds (job epoch, task count, next task); tasks are claimed from it
// by compare-and-swap, by the caller and by the workers alike. The caller publishes a job (a
// pointer to the borrowed closure, then the word with a new epoch), works on the tasks itself,
// and then waits only for the tasks already claimed by workers to finish: a worker that is slow
// to wake (a busy machine) never delays a run, and once every task is claimed a late worker can
// no longer claim anything of that job, so the closure is never used after `run` returns.
// Idle workers spin briefly, then yield, then sleep on a condvar.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

type PoolTask = dyn Fn(usize) + Sync;

// Idle workers: pure spinning (lowest wake-up latency), then spinning with yields, then sleeping.
const POOL_SPIN: Duration = Duration::from_micros(50);
const POOL_YIELD: Duration = Duration::from_millis(2);
// Tasks per job, as encoded in the job word (16 bits each for the count and the next index).
const POOL_MAX_TASKS: usize = 0xFFFF;

// The job word: epoch in bits 32..64, task count in bits 16..32, next unclaimed task in bits 0..16.
fn pool_word(epoch: u32, n_tasks: usize, next: usize) -> u64 {
    ((epoch as u64) << 32) | ((n_tasks as u64) << 16) | next as u64
}

struct PoolShared {
    word: AtomicU64,                       // (epoch, n_tasks, next) of the current job
    job: AtomicPtr<&'static PoolTask>,     // the current job's closure (see Pool::run)
    done: AtomicUsize,                     // tasks of the current job finished by workers
    panicked: AtomicBool,                  // a worker's task of the current job panicked
    sleepers: AtomicUsize,                 // workers waiting (or about to wait) on the condvar
    stop: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

/// A fixed set of worker threads; `n_threads` includes the calling thread.
pub(crate) struct Pool {
    shared: Arc<PoolShared>,
    workers: Vec<std::thread::JoinHandle<()>>,
    busy: AtomicBool, // a `run` is in progress (a concurrent `run` then works inline)
}

// Claims the next task of the job with epoch `epoch`; None when the job has no unclaimed task
// left (or a newer job has been published).
fn pool_claim(sh: &PoolShared, epoch: u32) -> Option<usize> {
    let mut w = sh.word.load(Ordering::Acquire);
    loop {
        let (e, n, next) = ((w >> 32) as u32, ((w >> 16) & 0xFFFF) as usize, (w & 0xFFFF) as usize);
        if e != epoch || next >= n {
            return None;
        }
        match sh.word.compare_exchange_weak(w, w + 1, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(next),
            Err(cur) => w = cur,
        }
    }
}

fn pool_worker(sh: Arc<PoolShared>) {
    let mut seen = 0u32;
    loop {
        // Wait for a job with a new epoch.
        let start = Instant::now();
        let mut spins = 0u32;
        let epoch = loop {
            let e = (sh.word.load(Ordering::Acquire) >> 32) as u32;
            if e != seen || sh.stop.load(Ordering::Relaxed) {
                break e;
            }
            spins = spins.wrapping_add(1);
            if spins % 64 != 0 {
                std::hint::spin_loop();
                continue;
            }
            let waited = start.elapsed();
            if waited < POOL_SPIN {
                std::hint::spin_loop();
            } else if waited < POOL_YIELD {
                std::thread::yield_now();
            } else {
                let mut g = sh.lock.lock().unwrap_or_else(|e| e.into_inner());
                sh.sleepers.fetch_add(1, Ordering::SeqCst);
                while (sh.word.load(Ordering::SeqCst) >> 32) as u32 == seen && !sh.stop.load(Ordering::SeqCst) {
                    g = sh.cv.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                sh.sleepers.fetch_sub(1, Ordering::SeqCst);
            }
        };
        if sh.stop.load(Ordering::Acquire) {
            return;
        }
        seen = epoch;
        // The closure pointer is read after the word (acquire) showed this epoch, so it is this
        // job's; it is used only for tasks claimed while the job is unfinished (the caller waits
        // for every claimed task), so it is still valid when used.
        let f = sh.job.load(Ordering::Acquire);
        while let Some(i) = pool_claim(&sh, epoch) {
            // SAFETY: see above; `f` points to the caller's `&dyn Fn`, alive until `run` returns,
            // and `run` cannot return before this claimed task is counted in `done`.
            let task: &PoolTask = unsafe { *f };
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task(i))).is_err() {
                sh.panicked.store(true, Ordering::Relaxed);
            }
            sh.done.fetch_add(1, Ordering::Release);
        }
    }
}

impl Pool {
    /// A pool of `n_threads` threads in all: the caller plus `n_threads - 1` workers (0 means 1).
    pub(crate) fn new(n_threads: usize) -> Pool {
        let shared = Arc::new(PoolShared {
            word: AtomicU64::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            done: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        });
        let mut workers = Vec::new();
        for k in 1..n_threads.max(1) {
            let sh = Arc::clone(&shared);
            let spawned = std::thread::Builder::new().name(format!("metainfer-worker-{k}")).spawn(move || pool_worker(sh));
            match spawned {
                Ok(h) => workers.push(h),
                Err(_) => break, // fewer threads: still correct, just slower
            }
        }
        Pool { shared, workers, busy: AtomicBool::new(false) }
    }

    /// Threads in all, including the caller.
    pub(crate) fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Calls `f(i)` for every i in 0..n_tasks, spread over the workers and the calling thread;
    /// returns when all calls are done. A panic in any task is re-raised here after all finished.
    pub(crate) fn run(&self, n_tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        if n_tasks == 0 {
            return;
        }
        if n_tasks > POOL_MAX_TASKS {
            // More indices than the job word can count: run them in POOL_MAX_TASKS groups.
            let per = n_tasks.div_ceil(POOL_MAX_TASKS);
            let g = move |k: usize| (k * per..((k + 1) * per).min(n_tasks)).for_each(f);
            return self.run(n_tasks.div_ceil(per), &g);
        }
        if self.workers.is_empty()
            || n_tasks == 1
            || self.busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err()
        {
            return (0..n_tasks).for_each(f);
        }
        let sh = &*self.shared;
        // SAFETY: the lifetime of `f` is erased to publish it to the workers. They use it only
        // for tasks they claim while this job is unfinished, and this function does not return
        // (tasks' panics are caught below) before every claimed task has finished.
        let f_static: &'static PoolTask = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static PoolTask>(f) };
        let slot: &'static PoolTask = f_static;
        let slot_ptr = &slot as *const &'static PoolTask as *mut &'static PoolTask;
        sh.job.store(slot_ptr, Ordering::Relaxed);
        sh.done.store(0, Ordering::Relaxed);
        sh.panicked.store(false, Ordering::Relaxed);
        let epoch = ((sh.word.load(Ordering::Relaxed) >> 32) as u32).wrapping_add(1);
        sh.word.store(pool_word(epoch, n_tasks, 0), Ordering::SeqCst);
        if sh.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = sh.lock.lock().unwrap_or_else(|e| e.into_inner());
            sh.cv.notify_all();
        }
        let mut mine = 0usize;
        let mut my_panic = None;
        while let Some(i) = pool_claim(sh, epoch) {
            if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(i))) {
                my_panic.get_or_insert(p);
            }
            mine += 1;
        }
        // Every task is claimed; wait for the ones the workers claimed.
        let mut spins = 0u32;
        while sh.done.load(Ordering::Acquire) + mine < n_tasks {
            spins = spins.wrapping_add(1);
            if spins < 4096 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        sh.job.store(std::ptr::null_mut(), Ordering::Relaxed);
        self.busy.store(false, Ordering::Release);
        if let Some(p) = my_panic {
            std::panic::resume_unwind(p);
        }
        if sh.panicked.load(Ordering::Relaxed) {
            panic!("a task of the thread pool panicked");
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let sh = &*self.shared;
        sh.stop.store(true, Ordering::SeqCst);
        {
            let _g = sh.lock.lock().unwrap_or_else(|e| e.into_inner());
            sh.cv.notify_all();
        }
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }
}

/// A row-major weight matrix of one ggml type: `rows` rows of `cols` values, each row
/// `row_bytes` bytes (cols / block_elems * block_bytes), rows contiguous.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QMatrix<'a> {
    pub(crate) ty: GgmlType,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) row_bytes: usize,
    pub(crate) data: &'a [u8], // [rows][row_bytes]
}

impl<'a> QMatrix<'a> {
    fn check(&self) {
        assert_eq!(Some(self.row_bytes), self.ty.row_bytes(self.cols), "QMatrix: row_bytes does not match {} x {}", self.cols, self.ty.name());
        assert!(self.data.len() >= self.rows * self.row_bytes, "QMatrix: {} bytes of data for {} rows of {} bytes", self.data.len(), self.rows, self.row_bytes);
    }
}

// A pointer to the output shared by the tasks; each task writes a disjoint set of elements.
#[derive(Clone, Copy)]
struct MatvecOut(*mut f32);
// SAFETY: tasks write disjoint elements and `Pool::run` joins them before the buffer is reused.
unsafe impl Send for MatvecOut {}
unsafe impl Sync for MatvecOut {}

// Rows per task: about four tasks per thread for balance, a multiple of `align` rows, at least
// `align` rows.
fn matvec_chunk(rows: usize, threads: usize, align: usize) -> usize {
    let tasks = if threads <= 1 { 1 } else { 4 * threads };
    let c = rows.div_ceil(tasks).max(1);
    c.div_ceil(align) * align
}

/// out[r] = dot_row(w.ty, row r of w, x) for every row; rows are split in contiguous chunks
/// over the pool's threads. Panics when the shapes do not match.
pub(crate) fn matvec(pool: &Pool, w: &QMatrix, x: &Act, out: &mut [f32]) {
    matvec_many(pool, &[w], x, &mut [out]);
}

/// outs[i][r] = dot_row(ws[i].ty, row r of ws[i], x) (bitwise; by `dot_rows4` four rows at a time
/// where the type has a four-row kernel) for matrices that read the same activation
/// (a layer's q, k and v; gate and up) as one job of the pool: one wait instead of one per
/// matrix, the threads' chunks balanced over all of them, each element bitwise what `matvec`
/// gives. Panics when the shapes do not match.
pub(crate) fn matvec_many(pool: &Pool, ws: &[&QMatrix], x: &Act, outs: &mut [&mut [f32]]) {
    assert_eq!(ws.len(), outs.len(), "matvec_many: {} matrices for {} outputs", ws.len(), outs.len());
    // (first task, rows per task, matrix, output) per matrix
    let mut jobs: Vec<(usize, usize, QMatrix, MatvecOut)> = Vec::with_capacity(ws.len());
    let mut n_tasks = 0;
    for (w, out) in ws.iter().zip(outs.iter_mut()) {
        w.check();
        assert_eq!(out.len(), w.rows, "matvec: output of {} for {} rows", out.len(), w.rows);
        assert_eq!(x.len(), w.cols, "matvec: activation of {} for {} columns", x.len(), w.cols);
        let chunk = matvec_chunk(w.rows, pool.threads(), 16);
        jobs.push((n_tasks, chunk, **w, MatvecOut(out.as_mut_ptr())));
        n_tasks += w.rows.div_ceil(chunk);
    }
    let jobs = &jobs;
    pool.run(n_tasks, &move |t| {
        let &(first, chunk, w, o) = jobs.iter().rev().find(|j| j.0 <= t).expect("task 0 is the first matrix's");
        let r0 = (t - first) * chunk;
        let r1 = (r0 + chunk).min(w.rows);
        // SAFETY: rows r0..r1 of this matrix belong to task t only; `outs` outlive `pool.run`.
        let dst = unsafe { std::slice::from_raw_parts_mut(o.0.add(r0), r1 - r0) };
        let (rb, data) = (w.row_bytes, w.data);
        let (start, end) = (r0 * rb, r1 * rb);
        prefetch(&data[start..(start + PREFETCH_AHEAD).min(end)]);
        let row = |r: usize| &data[r * rb..(r + 1) * rb];
        // four rows per call where the type has a four-row kernel, else (and for the last
        // rows % 4) one
        let mut k = 0;
        while k + 4 <= dst.len() {
            let r = r0 + k;
            prefetch_past(data, rb, r..r + 4, end);
            let Some(v) = dot_rows4(w.ty, [row(r), row(r + 1), row(r + 2), row(r + 3)], x) else { break };
            dst[k..k + 4].copy_from_slice(&v);
            k += 4;
        }
        for (k, d) in dst.iter_mut().enumerate().skip(k) {
            let r = r0 + k;
            prefetch_past(data, rb, r..r + 1, end);
            *d = dot_row(w.ty, row(r), x);
        }
    });
}

/// Bytes of a task's weight stream requested ahead of the dot kernels: left to the hardware
/// prefetchers alone, the matvecs of a decode step read the weights at about half the
/// machine's read bandwidth (2 KiB ahead: 1.26x on the 0.5B model's decode matvecs, 2 threads).
/// 3 KiB since the hint is T1: decode medians over 2 KiB in two sets of 5-6 runs on an AVX-512
/// Xeon (avx512 engines, 2 threads): gemma3 +10%/+5%, SmolLM2 +4%/+2%, a 1B llama +6%/+1%, qwen2
/// +5%/-1%; 1 KiB lost 8-15%, 4 and 6 KiB were no better than 3. On a Zen 3 EPYC (the avx2
/// qwen3 engine, a Qwen3-0.6B-shaped file, 2 threads, 4 alternations): none 49.6-51.3 tok/s,
/// 1.5 KiB 52.2-56.2, 3 KiB 51.8-56.1, 6 KiB 53.7-55.2: the prefetch pays, its distance is noise.
const PREFETCH_AHEAD: usize = 3072;

/// Prefetches the weights PREFETCH_AHEAD bytes past `rows` (of `rb` bytes each in `data`), as
/// far as they go before byte `end` (the end of the task's rows).
#[inline]
fn prefetch_past(data: &[u8], rb: usize, rows: std::ops::Range<usize>, end: usize) {
    prefetch(&data[(rows.start * rb + PREFETCH_AHEAD).min(end)..(rows.end * rb + PREFETCH_AHEAD).min(end)]);
}

/// Asks the cache for `bytes` (weights a task reads soon), a line at a time; only a hint. Into
/// L2 (T1), not L1: on an AVX-512 Xeon the gemv's `prefetcht0`s stalled for fill buffers (~40% of a
/// qwen2 decode step's cycles on the instruction after one) and T1 decoded 3-16% faster with the
/// avx512 engines (avx2 engine: the same), 2 threads; on Zen 3 a four-row Q4_K gemv streamed
/// alike with either hint (session 18).
#[inline]
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        // SAFETY: a prefetch reads no data and never faults; the address is inside `bytes`.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(line.as_ptr() as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// Rows of a weight tile in `matmul`: read once from memory, then dotted with every token (a
/// multiple of every type's `tile_rows`: 2, 4 or 8).
const MATMUL_TILE_ROWS: usize = 8;

/// out[t * rows + r] = row r of w . xs[t] for every token t and row r (prefill): dot_row4 for
/// tokens in groups of four from the first (where the type has a four-token kernel), dot_row for
/// the last n_tok % 4 tokens (and for every token of a type without one). For a type with a
/// tiled form the groups of four go through `dot_dec` instead: each tile of `tile_rows(ty)` rows
/// is decoded once (`dec_rows`) for all tokens and dotted with four tokens at a time (a short
/// last tile repeats the last row).
/// Each task takes a contiguous range of rows and walks it in tiles of a few rows, dotting each
/// tile with all tokens, so a weight row is fetched from memory once for all tokens.
pub(crate) fn matmul(pool: &Pool, w: &QMatrix, xs: &[Act], out: &mut [f32]) {
    matmul_in(pool, w, xs, out, false);
}

/// matmul with every token through the four-token (or tiled) kernel: the tokens padded to a
/// multiple of four by repeating the last one (the padding's values are not kept), so that each
/// token's values are those of its own four-token lane whatever the others are: out[t][r] ==
/// dot_row4(w.ty, row r, [.., xs[t], ..])[lane of t] (or dot_dec's) for every t, bit for bit. For
/// several sequences decoding together (a token each): the weights read once for all, and a
/// sequence's values independent of which others share the step.
pub(crate) fn matmul_toks(pool: &Pool, w: &QMatrix, xs: &[Act], out: &mut [f32]) {
    matmul_in(pool, w, xs, out, true);
}

fn matmul_in(pool: &Pool, w: &QMatrix, xs: &[Act], out: &mut [f32], pad: bool) {
    w.check();
    let rows = w.rows;
    let n_tok = xs.len();
    assert_eq!(out.len(), n_tok * rows, "matmul: output of {} for {} tokens x {} rows", out.len(), n_tok, rows);
    for (t, x) in xs.iter().enumerate() {
        assert_eq!(x.len(), w.cols, "matmul: activation {t} of {} for {} columns", x.len(), w.cols);
    }
    if n_tok == 0 || rows == 0 {
        return;
    }
    let chunk = matvec_chunk(rows, pool.threads(), MATMUL_TILE_ROWS);
    let n_tasks = rows.div_ceil(chunk);
    let o = MatvecOut(out.as_mut_ptr());
    let rb = w.row_bytes;
    let data = w.data;
    let ty = w.ty;
    pool.run(n_tasks, &move |task| {
        let o = o;
        let r0 = task * chunk;
        let r1 = (r0 + chunk).min(rows);
        // Tokens 0..n4 in groups of four with the type's four-token or tiled kernel where it has
        // one, the last n_tok % 4 one by one (llama.cpp's split between its gemm and gemv); or,
        // padded, every token in a group of four.
        let n4 = if pad { n_tok.div_ceil(4) * 4 } else { n_tok - n_tok % 4 };
        let x_at = |t: usize| &xs[t.min(n_tok - 1)];
        // The type's tile: `tile_n` rows decoded together (0: no tiled form, or no group of four).
        let tile_n = if n4 > 0 { tile_rows(ty) } else { 0 };
        // [weight tile rows / tile_n] decoded tiles, in a buffer kept between tasks
        let mut dec = DEC_SCRATCH.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_default();
        prefetch(&data[r0 * rb..(r0 * rb + PREFETCH_AHEAD).min(r1 * rb)]);
        let mut tr = r0;
        while tr < r1 {
            let te = (tr + MATMUL_TILE_ROWS).min(r1);
            if tile_n > 0 {
                // a short last tile repeats the last row, so every row takes the tiled kernel
                let tiles = (te - tr).div_ceil(tile_n);
                if dec.len() < tiles {
                    dec.resize_with(tiles, DecRows::default);
                }
                let row = |r: usize| &data[r.min(te - 1) * rb..(r.min(te - 1) + 1) * rb];
                for (p, d) in dec[..tiles].iter_mut().enumerate() {
                    // the weights PREFETCH_AHEAD bytes past the rows decoded now, as much as they
                    // are: a step of few tokens otherwise waits on memory here and idles it in
                    // the dots (as matvec, a steady stream of requests rather than bursts)
                    prefetch_past(data, rb, tr + p * tile_n..tr + (p + 1) * tile_n, r1 * rb);
                    let rows: [&[u8]; MATMUL_TILE_ROWS] = std::array::from_fn(|i| row(tr + p * tile_n + i));
                    assert!(dec_rows(ty, &rows[..tile_n], d), "tile_rows and dec_rows disagree on {}", ty.name());
                }
            }
            for t0 in (0..n4).step_by(4) {
                let g = [x_at(t0), x_at(t0 + 1), x_at(t0 + 2), x_at(t0 + 3)];
                let mut r = tr;
                while r < te {
                    // Rows r .. r + tile_n (or to the tile's end) through the tiled kernel, else row
                    // r through dot_row4 / dot_row.
                    let (n, v) = if tile_n > 0 {
                        ((te - r).min(tile_n), dot_dec(ty, &dec[(r - tr) / tile_n], g))
                    } else {
                        let row = &data[r * rb..(r + 1) * rb];
                        if t0 == 0 {
                            // as the tiled kernels' decode above: the weights PREFETCH_AHEAD bytes on
                            prefetch_past(data, rb, r..r + 1, r1 * rb);
                        }
                        let mut v = [[0.0; 4]; 8];
                        v[0] = dot_row4(ty, row, g).unwrap_or_else(|| g.map(|x| dot_row(ty, row, x)));
                        (1, v)
                    };
                    for (i, vi) in v.iter().take(n).enumerate() {
                        for (k, &vk) in vi.iter().enumerate().take(n_tok - t0) {
                            // SAFETY: element (t0 + k, r + i) belongs to this task only (r + i in r0..r1).
                            unsafe { *o.0.add((t0 + k) * rows + r + i) = vk };
                        }
                    }
                    r += n;
                }
            }
            for (t, x) in xs.iter().enumerate().skip(n4) {
                for r in tr..te {
                    let v = dot_row(ty, &data[r * rb..(r + 1) * rb], x);
                    // SAFETY: element (t, r) belongs to this task only (r in r0..r1).
                    unsafe { *o.0.add(t * rows + r) = v };
                }
            }
            tr = te;
        }
        DEC_SCRATCH.lock().unwrap_or_else(|e| e.into_inner()).push(dec);
    });
}

/// Decoded-tile buffers that matmul tasks borrow and give back (as many as tasks ever ran at once):
/// a step of few tokens runs ~1,000 tasks, and allocating their tiles afresh took ~3% of it.
static DEC_SCRATCH: Mutex<Vec<Vec<DecRows>>> = Mutex::new(Vec::new());
