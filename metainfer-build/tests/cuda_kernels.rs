//! The CUDA kernels (ckb/realizations/kernels_cuda/cuda.cu) on a GPU, against Rust references:
//! every dequant GEMV/GEMM/get_rows against the CPU realizations' own `dequant_row_<t>`
//! (included from ckb/realizations/dot_<t>/blocks.rs) on random blocks, AWQ against its
//! formula, and RMSNorm, NeoX and normal rope, the f16 KV cache, attention, SwiGLU, add, argmax and top-k
//! sampling against plain Rust.
//!
//! The CUDA driver (libcuda.so.1) is loaded at run time; without it the test prints
//! `skipped: no CUDA driver (<reason>)` and passes, unless `METAINFER_REQUIRE_CUDA=1`. The PTX
//! comes from `$METAINFER_PTX_DIR/kernels_cuda.cuda.sm_XX.ptx` where that is set (the cache
//! entries' PTX, which the engines load: scripts/device-check.sh sets it, and a test binary
//! carried to a GPU machine cannot read the source at its build-time path), else from NVRTC for
//! the device's arch (`metainfer_build::nvrtc`).
#![allow(
    clippy::disallowed_methods,
    reason = "a test harness reads its own knobs and hands cargo's variables on"
)]
#![allow(clippy::too_many_arguments)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};

// ---- the CPU realizations' block layouts, as the reference ------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
#[allow(dead_code, non_camel_case_types)]
enum ActKind {
    F32,
    F16,
    Q8_0,
    Q8K,
}

fn fp16_to_f32(h: u16) -> f32 {
    let s = if h >> 15 == 1 { -1.0f32 } else { 1.0 };
    let e = ((h >> 10) & 31) as i32;
    let m = (h & 1023) as f32;
    match e {
        0 => s * m * (2.0f32).powi(-24),
        31 => {
            if m == 0.0 {
                s * f32::INFINITY
            } else {
                f32::NAN
            }
        }
        _ => s * (1.0 + m / 1024.0) * (2.0f32).powi(e - 15),
    }
}

macro_rules! blocks {
    ($m:ident, $file:literal) => {
        #[allow(
            dead_code,
            clippy::manual_is_multiple_of,
            reason = "CKB realization text, kept as the generated engines have it"
        )]
        mod $m {
            use super::*;
            include!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../ckb/realizations/",
                $file
            ));
        }
    };
}
blocks!(b_f32, "dot_f32/blocks.rs");
blocks!(b_f16, "dot_f16/blocks.rs");
blocks!(b_q8_0, "dot_q8_0/blocks.rs");
blocks!(b_q5_0, "dot_q5_0/blocks.rs");
blocks!(b_q4_k, "dot_q4_k/blocks.rs");
blocks!(b_q6_k, "dot_q6_k/blocks.rs");
blocks!(b_awq_int4, "dot_awq_int4/blocks.rs");

// ---- a minimal CUDA driver binding ------------------------------------------------------

type CuRes = c_int;
type Ptr = u64;

struct Cuda {
    _lib: libloading::Library,
    module_load: unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> CuRes,
    get_function: unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const c_char) -> CuRes,
    alloc: unsafe extern "C" fn(*mut Ptr, usize) -> CuRes,
    free: unsafe extern "C" fn(Ptr) -> CuRes,
    htod: unsafe extern "C" fn(Ptr, *const c_void, usize) -> CuRes,
    dtoh: unsafe extern "C" fn(*mut c_void, Ptr, usize) -> CuRes,
    launch: unsafe extern "C" fn(
        *mut c_void,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        *mut c_void,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> CuRes,
    sync: unsafe extern "C" fn() -> CuRes,
    err_str: unsafe extern "C" fn(CuRes, *mut *const c_char) -> CuRes,
    arch: String,
    name: String,
}

impl Cuda {
    fn open() -> Result<Cuda, String> {
        // SAFETY: loading the driver runs its initialisers, which have no preconditions.
        let lib = unsafe { libloading::Library::new("libcuda.so.1") }.map_err(|e| e.to_string())?;
        macro_rules! sym {
            ($n:literal) => {{
                // SAFETY: the driver API function of that name, typed as in cuda.h.
                let s = unsafe { lib.get($n) }.map_err(|e| e.to_string())?;
                *s
            }};
        }
        let init: unsafe extern "C" fn(c_uint) -> CuRes = sym!(b"cuInit\0");
        let dev_get: unsafe extern "C" fn(*mut c_int, c_int) -> CuRes = sym!(b"cuDeviceGet\0");
        let attr: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> CuRes =
            sym!(b"cuDeviceGetAttribute\0");
        let dev_name: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> CuRes =
            sym!(b"cuDeviceGetName\0");
        let retain: unsafe extern "C" fn(*mut *mut c_void, c_int) -> CuRes =
            sym!(b"cuDevicePrimaryCtxRetain\0");
        let set_cur: unsafe extern "C" fn(*mut c_void) -> CuRes = sym!(b"cuCtxSetCurrent\0");
        let mut c = Cuda {
            module_load: sym!(b"cuModuleLoadData\0"),
            get_function: sym!(b"cuModuleGetFunction\0"),
            alloc: sym!(b"cuMemAlloc_v2\0"),
            free: sym!(b"cuMemFree_v2\0"),
            htod: sym!(b"cuMemcpyHtoD_v2\0"),
            dtoh: sym!(b"cuMemcpyDtoH_v2\0"),
            launch: sym!(b"cuLaunchKernel\0"),
            sync: sym!(b"cuCtxSynchronize\0"),
            err_str: sym!(b"cuGetErrorString\0"),
            arch: String::new(),
            name: String::new(),
            _lib: lib,
        };
        let (mut dev, mut major, mut minor, mut ctx) = (0, 0, 0, std::ptr::null_mut());
        let mut name = [0 as c_char; 256];
        // SAFETY: every out-pointer is valid for its write; 75/76 are
        // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR.
        unsafe {
            c.ck(init(0), "cuInit")?;
            c.ck(dev_get(&mut dev, 0), "cuDeviceGet")?;
            c.ck(attr(&mut major, 75, dev), "cuDeviceGetAttribute")?;
            c.ck(attr(&mut minor, 76, dev), "cuDeviceGetAttribute")?;
            c.ck(dev_name(name.as_mut_ptr(), 256, dev), "cuDeviceGetName")?;
            c.ck(retain(&mut ctx, dev), "cuDevicePrimaryCtxRetain")?;
            c.ck(set_cur(ctx), "cuCtxSetCurrent")?;
            c.name = CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned();
        }
        c.arch = format!("sm_{major}{minor}");
        Ok(c)
    }

    fn ck(&self, r: CuRes, what: &str) -> Result<(), String> {
        if r == 0 {
            return Ok(());
        }
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: s is valid for a write; the driver returns a static string or leaves it null.
        unsafe { (self.err_str)(r, &mut s) };
        let msg = if s.is_null() {
            String::new()
        } else {
            // SAFETY: non-null static NUL-terminated string.
            unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
        };
        Err(format!("{what} failed: cuda error {r} {msg}"))
    }

    fn module(&self, ptx: &str) -> *mut c_void {
        let ptx = CString::new(ptx).unwrap();
        let mut m = std::ptr::null_mut();
        // SAFETY: m valid for a write; ptx NUL-terminated.
        self.ck(
            unsafe { (self.module_load)(&mut m, ptx.as_ptr() as *const c_void) },
            "cuModuleLoadData",
        )
        .unwrap();
        m
    }

    fn func(&self, m: *mut c_void, name: &str) -> *mut c_void {
        let n = CString::new(name).unwrap();
        let mut f = std::ptr::null_mut();
        // SAFETY: m is a loaded module; f valid for a write.
        self.ck(unsafe { (self.get_function)(&mut f, m, n.as_ptr()) }, name)
            .unwrap();
        f
    }

    fn upload<T: Copy>(&self, data: &[T]) -> Ptr {
        let bytes = std::mem::size_of_val(data).max(4);
        let mut p = 0;
        // SAFETY: p valid for a write; the copy reads size_of_val(data) bytes of data.
        unsafe {
            self.ck((self.alloc)(&mut p, bytes), "cuMemAlloc").unwrap();
            if !data.is_empty() {
                self.ck(
                    (self.htod)(
                        p,
                        data.as_ptr() as *const c_void,
                        std::mem::size_of_val(data),
                    ),
                    "cuMemcpyHtoD",
                )
                .unwrap();
            }
        }
        p
    }

    fn zeros<T: Copy + Default>(&self, n: usize) -> Ptr {
        self.upload(&vec![T::default(); n])
    }

    fn download<T: Copy + Default>(&self, p: Ptr, n: usize) -> Vec<T> {
        let mut v = vec![T::default(); n];
        // SAFETY: v holds n T's; p was allocated with at least that many bytes by the caller.
        self.ck(
            unsafe {
                (self.dtoh)(
                    v.as_mut_ptr() as *mut c_void,
                    p,
                    std::mem::size_of_val(&v[..]),
                )
            },
            "cuMemcpyDtoH",
        )
        .unwrap();
        v
    }

    fn free(&self, p: Ptr) {
        // SAFETY: p came from cuMemAlloc and is freed once.
        unsafe { (self.free)(p) };
    }

    /// Launches and synchronises (the test wants each kernel's errors at its own call).
    fn run(&self, f: *mut c_void, grid: (u32, u32), block: (u32, u32), args: &[Arg], what: &str) {
        // Each argument in its own 8-byte slot; the kernel reads 4 or 8 bytes (little endian).
        let mut slots: Vec<u64> = args
            .iter()
            .map(|a| match *a {
                Arg::P(p) => p,
                Arg::I(i) => i as u32 as u64,
                Arg::F(x) => x.to_bits() as u64,
            })
            .collect();
        let mut ptrs: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|s| s as *mut u64 as *mut c_void)
            .collect();
        // SAFETY: ptrs points at one live slot per kernel parameter, in order, typed as the
        // kernel's parameters (device pointers, int, float); the default stream.
        unsafe {
            self.ck(
                (self.launch)(
                    f,
                    grid.0,
                    grid.1,
                    1,
                    block.0,
                    block.1,
                    1,
                    0,
                    std::ptr::null_mut(),
                    ptrs.as_mut_ptr(),
                    std::ptr::null_mut(),
                ),
                what,
            )
            .unwrap();
            self.ck((self.sync)(), what).unwrap();
        }
    }
}

#[derive(Clone, Copy)]
enum Arg {
    P(Ptr),
    I(i32),
    F(f32),
}
use Arg::{F, I, P};

const NULL: Arg = P(0);

// ---- random data ------------------------------------------------------------------------

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn f(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    /// f16 bits of a finite value of magnitude about 2^-6 .. 2^1, random sign.
    fn f16(&mut self) -> u16 {
        let r = self.next();
        let e = 9 + (r % 7) as u16;
        ((r >> 8) as u16 & 0x8000) | (e << 10) | ((r >> 20) as u16 & 0x3FF)
    }
}

/// Random weight rows of type `t`: random bytes with every f16 scale field made finite.
fn random_rows(t: &str, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let (elems, bytes, f16_at): (usize, usize, &[usize]) = match t {
        "f32" => (1, 4, &[]),
        "f16" => (1, 2, &[0]),
        "q8_0" => (32, 34, &[0]),
        "q5_0" => (32, 22, &[0]),
        "q4_k" => (256, 144, &[0, 2]),
        "q6_k" => (256, 210, &[208]),
        "awq_int4" => (128, 68, &[0]), // z (bytes 2..4) stays random: kernel and loader mask it to 0..=15
        _ => unreachable!(),
    };
    let n_blocks = rows * cols / elems;
    let mut w = rng.bytes(n_blocks * bytes);
    for b in 0..n_blocks {
        if t == "f32" {
            w[b * 4..b * 4 + 4].copy_from_slice(&rng.f().to_le_bytes());
        }
        for &o in f16_at {
            let h = rng.f16().to_le_bytes();
            w[b * bytes + o..b * bytes + o + 2].copy_from_slice(&h);
        }
    }
    w
}

fn dequant(t: &str, row: &[u8], out: &mut [f32]) {
    match t {
        "f32" => b_f32::dequant_row_f32(row, out),
        "f16" => b_f16::dequant_row_f16(row, out),
        "q8_0" => b_q8_0::dequant_row_q8_0(row, out),
        "q5_0" => b_q5_0::dequant_row_q5_0(row, out),
        "q4_k" => b_q4_k::dequant_row_q4_k(row, out),
        "q6_k" => b_q6_k::dequant_row_q6_k(row, out),
        "awq_int4" => b_awq_int4::dequant_row_awq_int4(row, out),
        _ => unreachable!(),
    }
}

/// Relative error of `got` against `want`, measured on the scale of `mag` (Σ|terms|).
fn close(got: f32, want: f64, mag: f64, rel: f64) -> bool {
    ((got as f64) - want).abs() <= rel * mag.max(1e-30) && got.is_finite()
}

struct Report {
    failures: Vec<String>,
    passed: usize,
}
impl Report {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if ok {
            self.passed += 1;
        } else if self.failures.len() < 40 {
            self.failures.push(what());
        }
    }
}

fn ptx_for(arch: &str) -> Result<String, String> {
    if let Ok(dir) = std::env::var("METAINFER_PTX_DIR") {
        let f = std::path::Path::new(&dir).join(format!("kernels_cuda.cuda.{arch}.ptx"));
        return std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()));
    }
    let src_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../ckb/realizations/kernels_cuda/cuda.cu"
    );
    metainfer_build::nvrtc::available()
        .map_err(|e| format!("no nvrtc ({e}) and METAINFER_PTX_DIR unset"))?;
    let src = std::fs::read_to_string(src_path).map_err(|e| format!("{src_path}: {e}"))?;
    metainfer_build::nvrtc::compile_ptx(&src, "ckb/realizations/kernels_cuda/cuda.cu", arch)
        .map_err(|e| e.to_string())
}

#[test]
fn cuda_kernels() {
    let require = std::env::var("METAINFER_REQUIRE_CUDA").as_deref() == Ok("1");
    let cu = match Cuda::open() {
        Ok(c) => c,
        Err(why) => {
            assert!(
                !require,
                "METAINFER_REQUIRE_CUDA=1 but no CUDA driver: {why}"
            );
            println!("skipped: no CUDA driver ({why})");
            return;
        }
    };
    // Kernels are compiled for the CKB's cuda targets; the newest one not above the device.
    let cc: u32 = cu.arch[3..].parse().unwrap_or(0);
    let arch = match cc {
        90.. => "sm_90",
        89 => "sm_89",
        _ => "sm_80",
    };
    assert!(
        cc >= 80,
        "device {} is {}; the cuda targets start at sm_80",
        cu.name,
        cu.arch
    );
    println!("device: {} ({}), kernels for {arch}", cu.name, cu.arch);
    let ptx = ptx_for(arch).unwrap_or_else(|e| panic!("no ptx: {e}"));
    let m = cu.module(&ptx);
    let mut rep = Report {
        failures: Vec::new(),
        passed: 0,
    };
    let mut rng = Rng(42);

    // -- GGUF GEMV / GEMM / get_rows --
    let (rows, cols, n_tok) = (37usize, 512usize, 11usize);
    for t in ["f32", "f16", "q8_0", "q5_0", "q4_k", "q6_k", "awq_int4"] {
        let w = random_rows(t, rows, cols, &mut rng);
        let row_bytes = w.len() / rows;
        let mut wf = vec![0f32; rows * cols];
        for r in 0..rows {
            dequant(
                t,
                &w[r * row_bytes..(r + 1) * row_bytes],
                &mut wf[r * cols..(r + 1) * cols],
            );
        }
        let x: Vec<f32> = (0..n_tok * cols).map(|_| rng.f()).collect();
        let bias: Vec<f32> = (0..rows).map(|_| rng.f()).collect();
        let (dw, dx, db) = (cu.upload(&w), cu.upload(&x), cu.upload(&bias));
        let dy = cu.zeros::<f32>(n_tok * rows);
        let warps = 4u32;
        let gx = rows.div_ceil(warps as usize) as u32;
        cu.run(
            cu.func(m, &format!("gemv_{t}")),
            (gx, 1),
            (32 * warps, 1),
            &[P(dw), P(dx), P(dy), P(db), I(rows as i32), I(cols as i32)],
            t,
        );
        let y1: Vec<f32> = cu.download(dy, rows);
        cu.run(
            cu.func(m, &format!("gemm_{t}")),
            (gx, n_tok.div_ceil(8) as u32),
            (32 * warps, 1),
            &[
                P(dw),
                P(dx),
                P(dy),
                NULL,
                I(rows as i32),
                I(cols as i32),
                I(n_tok as i32),
            ],
            t,
        );
        let yn: Vec<f32> = cu.download(dy, n_tok * rows);
        for tok in 0..n_tok {
            for r in 0..rows {
                let (mut s, mut mag) = (0f64, 0f64);
                for i in 0..cols {
                    let p = wf[r * cols + i] as f64 * x[tok * cols + i] as f64;
                    s += p;
                    mag += p.abs();
                }
                if tok == 0 {
                    let want = s + bias[r] as f64;
                    rep.check(close(y1[r], want, mag + bias[r].abs() as f64, 1e-5), || {
                        format!("gemv_{t}: y[{r}] = {} want {want}", y1[r])
                    });
                }
                let got = yn[tok * rows + r];
                rep.check(close(got, s, mag, 1e-5), || {
                    format!("gemm_{t}: y[{tok}][{r}] = {got} want {s}")
                });
            }
        }
        let ids: Vec<i32> = vec![3, 0, 36, 3];
        let (di, dout) = (cu.upload(&ids), cu.zeros::<f32>(ids.len() * cols));
        cu.run(
            cu.func(m, &format!("get_rows_{t}")),
            (ids.len() as u32, 1),
            (128, 1),
            &[P(dw), P(di), P(dout), I(cols as i32)],
            t,
        );
        let out: Vec<f32> = cu.download(dout, ids.len() * cols);
        for (k, &id) in ids.iter().enumerate() {
            let want = &wf[id as usize * cols..(id as usize + 1) * cols];
            let got = &out[k * cols..(k + 1) * cols];
            let bad = got
                .iter()
                .zip(want)
                .position(|(a, b)| a.to_bits() != b.to_bits());
            rep.check(bad.is_none(), || {
                format!("get_rows_{t}: row {id} differs from dequant_row_{t} at {bad:?}")
            });
        }
        for p in [dw, dx, db, dy, di, dout] {
            cu.free(p);
        }
    }

    // -- AWQ --
    let (inn, out, n_tok) = (256usize, 72usize, 11usize);
    let qw: Vec<i32> = (0..inn * out / 8).map(|_| rng.next() as i32).collect();
    let qz: Vec<i32> = (0..inn / 128 * out / 8)
        .map(|_| rng.next() as i32)
        .collect();
    let sc: Vec<u16> = (0..inn / 128 * out).map(|_| rng.f16() & 0x7FFF).collect();
    let order = [0usize, 2, 4, 6, 1, 3, 5, 7]; // AutoAWQ: nibble k of the int32 holds column order[k]
    let nib = |v: i32, c: usize| -> f64 {
        let k = order.iter().position(|&o| o == c).unwrap();
        ((v as u32 >> (4 * k)) & 15) as f64
    };
    let wawq = |i: usize, o: usize| -> f64 {
        let q = nib(qw[i * out / 8 + o / 8], o % 8);
        let z = nib(qz[(i / 128) * out / 8 + o / 8], o % 8);
        (q - z) * fp16_to_f32(sc[(i / 128) * out + o]) as f64
    };
    let x: Vec<f32> = (0..n_tok * inn).map(|_| rng.f()).collect();
    let bias: Vec<f32> = (0..out).map(|_| rng.f()).collect();
    let (dqw, dqz, dsc, dx, db) = (
        cu.upload(&qw),
        cu.upload(&qz),
        cu.upload(&sc),
        cu.upload(&x),
        cu.upload(&bias),
    );
    let dy = cu.zeros::<f32>(n_tok * out);
    let gx = out.div_ceil(256) as u32;
    cu.run(
        cu.func(m, "gemv_awq"),
        (gx, 1),
        (32, 8),
        &[
            P(dqw),
            P(dqz),
            P(dsc),
            P(dx),
            P(dy),
            P(db),
            I(inn as i32),
            I(out as i32),
        ],
        "gemv_awq",
    );
    let y1: Vec<f32> = cu.download(dy, out);
    cu.run(
        cu.func(m, "gemm_awq"),
        (gx, n_tok.div_ceil(8) as u32),
        (32, 8),
        &[
            P(dqw),
            P(dqz),
            P(dsc),
            P(dx),
            P(dy),
            NULL,
            I(inn as i32),
            I(out as i32),
            I(n_tok as i32),
        ],
        "gemm_awq",
    );
    let yn: Vec<f32> = cu.download(dy, n_tok * out);
    for tok in 0..n_tok {
        for o in 0..out {
            let (mut s, mut mag) = (0f64, 0f64);
            for i in 0..inn {
                let p = wawq(i, o) * x[tok * inn + i] as f64;
                s += p;
                mag += p.abs();
            }
            if tok == 0 {
                let want = s + bias[o] as f64;
                rep.check(close(y1[o], want, mag + 1.0, 1e-5), || {
                    format!("gemv_awq: y[{o}] = {} want {want}", y1[o])
                });
            }
            let got = yn[tok * out + o];
            rep.check(close(got, s, mag, 1e-5), || {
                format!("gemm_awq: y[{tok}][{o}] = {got} want {s}")
            });
        }
    }
    for p in [dqw, dqz, dsc, dx, db, dy] {
        cu.free(p);
    }

    // -- RMSNorm --
    let (n_tok, n, eps) = (3usize, 896usize, 1e-6f32);
    let x: Vec<f32> = (0..n_tok * n).map(|_| rng.f() * 3.0).collect();
    let wt: Vec<f32> = (0..n).map(|_| rng.f()).collect();
    let (dx, dw, dy) = (cu.upload(&x), cu.upload(&wt), cu.zeros::<f32>(n_tok * n));
    cu.run(
        cu.func(m, "rmsnorm_f32"),
        (n_tok as u32, 1),
        (256, 1),
        &[P(dx), P(dw), P(dy), I(n as i32), F(eps)],
        "rmsnorm_f32",
    );
    let y: Vec<f32> = cu.download(dy, n_tok * n);
    for t in 0..n_tok {
        let xs = &x[t * n..(t + 1) * n];
        let ss: f64 = xs.iter().map(|&v| v as f64 * v as f64).sum();
        let scale = 1.0 / (ss / n as f64 + eps as f64).sqrt();
        for i in 0..n {
            let want = xs[i] as f64 * scale * wt[i] as f64;
            let got = y[t * n + i];
            rep.check(close(got, want, want.abs() + 1e-6, 1e-5), || {
                format!("rmsnorm_f32: y[{t}][{i}] = {got} want {want}")
            });
        }
    }
    for p in [dx, dw, dy] {
        cu.free(p);
    }

    // -- rope: NeoX (pairs (i, i + d/2)) and normal (pairs (2i, 2i + 1)) --
    for (kernel, neox) in [("rope_neox_f32", true), ("rope_norm_f32", false)] {
        let (n_tok, n_head, n_kv, hd, theta) = (3usize, 14usize, 2usize, 64usize, 1e6f32);
        let pos: Vec<i32> = vec![0, 5, 1000];
        let q: Vec<f32> = (0..n_tok * n_head * hd).map(|_| rng.f()).collect();
        let k: Vec<f32> = (0..n_tok * n_kv * hd).map(|_| rng.f()).collect();
        let (dq, dk, dp) = (cu.upload(&q), cu.upload(&k), cu.upload(&pos));
        let total = (n_tok * (n_head + n_kv) * hd / 2) as u32;
        cu.run(
            cu.func(m, kernel),
            (total.div_ceil(256), 1),
            (256, 1),
            &[
                P(dq),
                P(dk),
                P(dp),
                I(n_tok as i32),
                I(n_head as i32),
                I(n_kv as i32),
                I(hd as i32),
                F(theta),
            ],
            kernel,
        );
        let (gq, gk): (Vec<f32>, Vec<f32>) = (cu.download(dq, q.len()), cu.download(dk, k.len()));
        let rope_ref = |v: &[f32], p: i32| -> Vec<f64> {
            let mut o: Vec<f64> = v.iter().map(|&x| x as f64).collect();
            for i in 0..hd / 2 {
                let a = p as f64 * (theta as f64).powf(-2.0 * i as f64 / hd as f64);
                let (s, c) = a.sin_cos();
                let (ia, ib) = if neox {
                    (i, i + hd / 2)
                } else {
                    (2 * i, 2 * i + 1)
                };
                let (x0, x1) = (v[ia] as f64, v[ib] as f64);
                o[ia] = x0 * c - x1 * s;
                o[ib] = x0 * s + x1 * c;
            }
            o
        };
        for (name, orig, got, heads) in [("q", &q, &gq, n_head), ("k", &k, &gk, n_kv)] {
            for (t, &p) in pos.iter().enumerate().take(n_tok) {
                for h in 0..heads {
                    let at = (t * heads + h) * hd;
                    let want = rope_ref(&orig[at..at + hd], p);
                    for i in 0..hd {
                        // f32 angle pos * freq: absolute error grows with pos (1000 * 2^-24 rad)
                        rep.check(close(got[at + i], want[i], 1.0, 2e-4), || {
                            format!(
                                "{kernel} {name}: [{t}][{h}][{i}] = {} want {}",
                                got[at + i],
                                want[i]
                            )
                        });
                    }
                }
            }
        }
        for p in [dq, dk, dp] {
            cu.free(p);
        }
    }

    // -- KV append + attention (prefill: causal, 20 tokens; decode: the last one) --
    let (n_tok, n_head, n_kv, hd, max_seq) = (20usize, 14usize, 2usize, 64usize, 64usize);
    let kv_dim = n_kv * hd;
    let kx: Vec<f32> = (0..n_tok * kv_dim).map(|_| rng.f()).collect();
    let vx: Vec<f32> = (0..n_tok * kv_dim).map(|_| rng.f()).collect();
    let q: Vec<f32> = (0..n_tok * n_head * hd).map(|_| rng.f()).collect();
    let pos: Vec<i32> = (0..n_tok as i32).collect();
    let (dk, dv, dp, dq) = (
        cu.upload(&kx),
        cu.upload(&vx),
        cu.upload(&pos),
        cu.upload(&q),
    );
    let (kc, vc) = (
        cu.zeros::<u16>(max_seq * kv_dim),
        cu.zeros::<u16>(max_seq * kv_dim),
    );
    let nkv = (n_tok * kv_dim) as u32;
    cu.run(
        cu.func(m, "kv_append_f16"),
        (nkv.div_ceil(256), 1),
        (256, 1),
        &[
            P(dk),
            P(dv),
            P(kc),
            P(vc),
            P(dp),
            I(n_tok as i32),
            I(kv_dim as i32),
        ],
        "kv_append_f16",
    );
    let kh: Vec<u16> = cu.download(kc, max_seq * kv_dim);
    let vh: Vec<u16> = cu.download(vc, max_seq * kv_dim);
    let kf: Vec<f32> = kh.iter().map(|&h| fp16_to_f32(h)).collect();
    let vf: Vec<f32> = vh.iter().map(|&h| fp16_to_f32(h)).collect();
    for i in 0..n_tok * kv_dim {
        rep.check(
            (kf[i] - kx[i]).abs() <= kx[i].abs() * (1.0 / 2048.0) + 1e-7,
            || format!("kv_append_f16: k[{i}] = {} from {}", kf[i], kx[i]),
        );
        rep.check(
            (vf[i] - vx[i]).abs() <= vx[i].abs() * (1.0 / 2048.0) + 1e-7,
            || format!("kv_append_f16: v[{i}] = {} from {}", vf[i], vx[i]),
        );
    }
    let scale = 1.0 / (hd as f32).sqrt();
    let attn_ref = |t: usize, h: usize| -> Vec<f64> {
        let kvh = h / (n_head / n_kv);
        let qh = &q[(t * n_head + h) * hd..][..hd];
        let s: Vec<f64> = (0..=pos[t] as usize)
            .map(|p| {
                (0..hd)
                    .map(|d| qh[d] as f64 * kf[p * kv_dim + kvh * hd + d] as f64)
                    .sum::<f64>()
                    * scale as f64
            })
            .collect();
        let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|v| (v - mx).exp()).collect();
        let z: f64 = e.iter().sum();
        (0..hd)
            .map(|d| {
                e.iter()
                    .enumerate()
                    .map(|(p, w)| w * vf[p * kv_dim + kvh * hd + d] as f64)
                    .sum::<f64>()
                    / z
            })
            .collect()
    };
    let dout = cu.zeros::<f32>(n_tok * n_head * hd);
    cu.run(
        cu.func(m, "attention_f16kv"),
        (n_head as u32, n_tok as u32),
        (128, 1),
        &[
            P(dq),
            P(kc),
            P(vc),
            P(dout),
            P(dp),
            I(n_tok as i32),
            I(n_head as i32),
            I(n_kv as i32),
            I(hd as i32),
            F(scale),
        ],
        "attention_f16kv",
    );
    let o: Vec<f32> = cu.download(dout, n_tok * n_head * hd);
    for t in 0..n_tok {
        for h in 0..n_head {
            let want = attn_ref(t, h);
            for d in 0..hd {
                let got = o[(t * n_head + h) * hd + d];
                rep.check(close(got, want[d], 1.0, 1e-5), || {
                    format!(
                        "attention_f16kv prefill: [{t}][{h}][{d}] = {got} want {}",
                        want[d]
                    )
                });
            }
        }
    }
    // decode: one query at the last position, reading the same cache
    let t_last = n_tok - 1;
    let dq1 = cu.upload(&q[t_last * n_head * hd..]);
    let dp1 = cu.upload(&pos[t_last..]);
    cu.run(
        cu.func(m, "attention_f16kv"),
        (n_head as u32, 1),
        (128, 1),
        &[
            P(dq1),
            P(kc),
            P(vc),
            P(dout),
            P(dp1),
            I(1),
            I(n_head as i32),
            I(n_kv as i32),
            I(hd as i32),
            F(scale),
        ],
        "attention_f16kv decode",
    );
    let o1: Vec<f32> = cu.download(dout, n_head * hd);
    for h in 0..n_head {
        let want = attn_ref(t_last, h);
        for d in 0..hd {
            rep.check(close(o1[h * hd + d], want[d], 1.0, 1e-5), || {
                format!(
                    "attention_f16kv decode: [{h}][{d}] = {} want {}",
                    o1[h * hd + d],
                    want[d]
                )
            });
        }
    }
    for p in [dk, dv, dp, dq, kc, vc, dout, dq1, dp1] {
        cu.free(p);
    }

    // -- SwiGLU, add --
    let n = 1000usize;
    let g: Vec<f32> = (0..n).map(|_| rng.f() * 8.0).collect();
    let u: Vec<f32> = (0..n).map(|_| rng.f()).collect();
    let (dg, du, dy) = (cu.upload(&g), cu.upload(&u), cu.zeros::<f32>(n));
    cu.run(
        cu.func(m, "swiglu_f32"),
        (4, 1),
        (256, 1),
        &[P(dg), P(du), P(dy), I(n as i32)],
        "swiglu_f32",
    );
    let y: Vec<f32> = cu.download(dy, n);
    for i in 0..n {
        let want = g[i] as f64 / (1.0 + (-g[i] as f64).exp()) * u[i] as f64;
        rep.check(close(y[i], want, want.abs() + 1e-6, 1e-5), || {
            format!("swiglu_f32: [{i}] = {} want {want}", y[i])
        });
    }
    cu.run(
        cu.func(m, "add_f32"),
        (4, 1),
        (256, 1),
        &[P(dg), P(du), I(n as i32)],
        "add_f32",
    );
    let s: Vec<f32> = cu.download(dg, n);
    for i in 0..n {
        rep.check(s[i] == g[i] + u[i], || {
            format!("add_f32: [{i}] = {} want {}", s[i], g[i] + u[i])
        });
    }
    for p in [dg, du, dy] {
        cu.free(p);
    }

    // -- argmax, top-k sampling --
    let n = 151_936usize;
    let mut logits: Vec<f32> = (0..n).map(|_| rng.f() * 10.0).collect();
    logits[7] = f32::NAN;
    logits[100_000] = 20.0;
    logits[5_000] = 20.0; // tie: the lower id wins
    logits[9] = f32::NEG_INFINITY;
    let (dl, dout) = (cu.upload(&logits), cu.zeros::<i32>(1));
    cu.run(
        cu.func(m, "argmax_f32"),
        (1, 1),
        (1024, 1),
        &[P(dl), I(n as i32), P(dout)],
        "argmax_f32",
    );
    let a: Vec<i32> = cu.download(dout, 1);
    rep.check(a[0] == 5_000, || format!("argmax_f32 = {} want 5000", a[0]));
    let mut order: Vec<usize> = (0..n).filter(|&i| logits[i].is_finite()).collect();
    order.sort_by(|&a, &b| logits[b].partial_cmp(&logits[a]).unwrap().then(a.cmp(&b)));
    let top_k = 40usize;
    let top: Vec<usize> = order[..top_k].to_vec();
    let sample = |k: i32, temp: f32, u: f32| -> i32 {
        cu.run(
            cu.func(m, "sample_topk_f32"),
            (1, 1),
            (1024, 1),
            &[P(dl), I(n as i32), I(k), F(temp), F(u), P(dout)],
            "sample_topk_f32",
        );
        cu.download::<i32>(dout, 1)[0]
    };
    rep.check(sample(40, 0.0, 0.5) == 5_000, || {
        "sample_topk_f32 at temperature 0 is not argmax".into()
    });
    rep.check(sample(1, 1.0, 0.9) == 5_000, || {
        "sample_topk_f32 with top_k 1 is not argmax".into()
    });
    // the draw: reference softmax over the top-k, cumulative, at a few u
    let p: Vec<f64> = top
        .iter()
        .map(|&i| ((logits[i] - logits[top[0]]) as f64 / 0.7).exp())
        .collect();
    let z: f64 = p.iter().sum();
    for u in [0.0f32, 0.3, 0.55, 0.8, 0.97, 0.999] {
        let (mut run, mut want) = (0.0, top[top_k - 1]);
        for (j, &pj) in p.iter().enumerate() {
            run += pj;
            if run > u as f64 * z {
                want = top[j];
                break;
            }
        }
        let got = sample(top_k as i32, 0.7, u);
        rep.check(
            got as usize == want
                || top.contains(&(got as usize)) && (run - u as f64 * z).abs() < 1e-4 * z,
            || format!("sample_topk_f32(u = {u}) = {got} want {want}"),
        );
    }
    let mut inf_logits = logits.clone();
    inf_logits[123] = f32::INFINITY;
    let dl2 = cu.upload(&inf_logits);
    cu.run(
        cu.func(m, "sample_topk_f32"),
        (1, 1),
        (1024, 1),
        &[P(dl2), I(n as i32), I(40), F(1.0), F(0.99), P(dout)],
        "sample_topk_f32 inf",
    );
    let gi: Vec<i32> = cu.download(dout, 1);
    rep.check(gi[0] == 123, || {
        format!("sample_topk_f32 with a +inf logit = {} want 123", gi[0])
    });
    for p in [dl, dl2, dout] {
        cu.free(p);
    }

    println!(
        "cuda kernels: {} checks passed, {} failed",
        rep.passed,
        rep.failures.len()
    );
    assert!(
        rep.failures.is_empty(),
        "cuda kernels:\n{}",
        rep.failures.join("\n")
    );
}
