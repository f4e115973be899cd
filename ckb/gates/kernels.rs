// Kernel gates, compiled inside the engine crate (`use super::*` sees every engine item). They
// reference only items every type selection has: COMPILED_TYPES, dot_row, dot_row4, dot_rows4, tile_rows,
// dec_rows, dot_dec, dequant_row, act_kind, Act, DecRows, Pool, QMatrix, matvec, matvec_many, matmul, the act_quant
// helpers and vec_ops.
//
// kernel_<t>:         dot_row on pseudo-random rows and activations of several lengths against
//                     an f64 dot of dequant_row(row) with the activation the kernel effectively
//                     reads (x rebuilt from its Q8 blocks, or x rounded to f16/bf16). Checks each
//                     kernel (the compiled one: AVX2 or scalar) against its own dequantization.
// kernel_<t>_vectors: dequant_row and dot_row on committed vectors made by gguf-py
//                     (ckb/gates/make_vectors.py): dequantization must match gguf-py (relative
//                     1e-6), and the dot the f64 reference dot(dequant(row), x) within the bound
//                     of the activation's quantization error.
// dot4_bits:          dot_row4 (where the type has a four-token kernel) against four calls of
//                     dot_row, bitwise, over the lengths of kernel_<t> (partial groups of blocks
//                     included); for Q4_K, whose four-token kernels may mirror llama.cpp's
//                     repacked gemm and sum in its order, bitwise dot_row or the gemm order of
//                     gate_q4_k_gemm (an independent scalar reading of the block bytes);
//                     and dot_rows4 (where the type has a four-row gemv kernel) against dot_row
//                     of each of its four rows, bitwise, over the same lengths.
// dec_bits:           dot_dec on tiles of tile_rows(ty) rows decoded by dec_rows (where the
//                     type has a tiled form) against dot_row of each (row, token) pair (Q4_K: or
//                     gate_q4_k_gemm; Q5_0 and Q6_K: or gate_q5_0_block / gate_q6_k_block, the
//                     block order of their 8 x 4 tiles), bitwise, over the same lengths; the decoded buffers are reused
//                     across lengths, as matmul does.
// matvec:             matvec, matvec_many (three matrices as one job) and matmul against a naive loop of dot_row (for matmul's groups of
//                     four tokens: dot_dec on the row's tile where the type has a tiled form,
//                     else dot_row4), for 1, 2 and 3 threads (must be bitwise equal).
// vec_ops:            ggml_expf, swiglu and softmax_exp (vec_ops): ggml_expf within 2e-7
//                     (relative) of f64 exp over [-87, 88]; on committed vectors recorded from
//                     ggml's own ggml_v_expf / ggml_v_silu (scripts/anchor/ggml-expf-vectors.sh),
//                     expf and swiglu bitwise; softmax_exp's values and sum in ggml's order;
//                     attend_many bitwise the lane forms (attend_lanes) for each of its
//                     queries, and attend with a token's g queries at once likewise for 32 and
//                     8 lanes (windowed and full spans, head sizes with and without a partial
//                     lane group, spans over several row blocks).
// flash_attn:         attend_flash bitwise the lane forms (attend_flash_lanes) for every query;
//                     each token's queries alone bitwise the same as in the tile (a query's
//                     value depends on its span alone); within 2e-3 of max|V| of llama.cpp's
//                     order (attend_many) — causal and windowed spans, head sizes that are and
//                     are not multiples of 16, spans starting inside a block, one to eleven
//                     blocks.
// Each gate prints one line `GATE <id> key=value ...` before asserting.

struct GateRng(u64);

impl GateRng {
    fn new(seed: u64) -> GateRng {
        GateRng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next_u64(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    // Uniform in [0, 1).
    fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    // Uniform in [-1, 1).
    fn sym(&mut self) -> f32 {
        2.0 * self.unit() - 1.0
    }
    // Roughly normal (sum of four uniforms), unit variance.
    fn normal(&mut self) -> f32 {
        (self.sym() + self.sym() + self.sym() + self.sym()) * 0.866
    }
}

fn gate_tag(ty: GgmlType) -> String {
    ty.name().to_ascii_lowercase()
}

fn gate_put_f16(row: &mut [u8], at: usize, v: f32) {
    row[at..at + 2].copy_from_slice(&f32_to_fp16(v).to_le_bytes());
}

// A random but valid row of `cols` values of type `ty`: random bytes, with every f16 scale field
// set to a small finite value of random sign. Panics for a type whose layout the gate lacks.
fn gate_random_row(ty: GgmlType, cols: usize, rng: &mut GateRng) -> Vec<u8> {
    let n = ty.row_bytes(cols).expect("cols is a multiple of the block size");
    let mut row: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
    let bb = ty.block_bytes();
    let scale = |rng: &mut GateRng| {
        let s = 1e-3 * (1.0 + 30.0 * rng.unit());
        if rng.next_u64() & 1 == 0 { s } else { -s }
    };
    // By name: the engine's GgmlType has only the variants of its model reader.
    match ty.name() {
        "F32" => {
            for c in row.chunks_exact_mut(4) {
                c.copy_from_slice(&rng.sym().to_le_bytes());
            }
        }
        "F16" => {
            for c in row.chunks_exact_mut(2) {
                c.copy_from_slice(&f32_to_fp16(rng.sym()).to_le_bytes());
            }
        }
        "BF16" => {
            for c in row.chunks_exact_mut(2) {
                c.copy_from_slice(&f32_to_bf16(rng.sym()).to_le_bytes());
            }
        }
        "Q4_0" | "Q5_0" | "Q8_0" => {
            for b in 0..n / bb {
                let s = scale(rng);
                gate_put_f16(&mut row, b * bb, s);
            }
        }
        "Q4_1" => {
            // d and m of either sign (real files: d >= 0, m <= 0)
            for b in 0..n / bb {
                let (s, m) = (scale(rng), scale(rng));
                gate_put_f16(&mut row, b * bb, s);
                gate_put_f16(&mut row, b * bb + 2, m);
            }
        }
        "Q4_K" => {
            for b in 0..n / bb {
                let (s, m) = (scale(rng).abs(), scale(rng).abs());
                gate_put_f16(&mut row, b * bb, s);
                gate_put_f16(&mut row, b * bb + 2, m);
            }
        }
        "Q6_K" => {
            for b in 0..n / bb {
                let s = scale(rng);
                gate_put_f16(&mut row, b * bb + 208, s);
            }
        }
        "AWQ_INT4" => {
            // f16 scale (either sign), zero point 0..=15, random nibbles.
            for b in 0..n / bb {
                let s = scale(rng);
                gate_put_f16(&mut row, b * bb, s);
                let z = (rng.next_u64() % 16) as u16;
                row[b * bb + 2..b * bb + 4].copy_from_slice(&z.to_le_bytes());
            }
        }
        other => panic!("gate_random_row has no block layout for {other}; extend ckb/gates/kernels.rs"),
    }
    row
}

// Activation vectors of length n in several regimes (normal, wide range, zero blocks, ties).
fn gate_random_x(n: usize, case: usize, rng: &mut GateRng) -> Vec<f32> {
    match case % 5 {
        0 => (0..n).map(|_| rng.normal()).collect(),
        1 => (0..n).map(|i| rng.normal() * 10f32.powi((i % 7) as i32 - 3)).collect(),
        2 => (0..n).map(|i| if (i / 256) % 2 == 0 && (i / 32) % 3 != 1 { rng.normal() * 3.0 } else { 0.0 }).collect(),
        3 => (0..n).map(|i| ((i % 9) as f32 - 4.0) * 0.25).collect(),
        _ => (0..n).map(|_| rng.normal() * 1e-3).collect(),
    }
}

fn gate_lengths(ty: GgmlType) -> Vec<usize> {
    match ty.block_elems() {
        1 => vec![1, 7, 31, 32, 33, 64, 100, 256, 896, 1000],
        256 => vec![256, 512, 768, 1024, 4864],
        be => vec![be, 2 * be, 3 * be, 7 * be, 256, 896, 4864].into_iter().filter(|n| n % be == 0).collect(),
    }
}

// f64 reference dot of the dequantized row with the effective activation; returns (dot, sum |w x|).
fn gate_ref_dot(w: &[f32], xe: &[f64]) -> (f64, f64) {
    let mut dot = 0.0f64;
    let mut mag = 0.0f64;
    for (&a, &b) in w.iter().zip(xe) {
        dot += a as f64 * b;
        mag += (a as f64 * b).abs();
    }
    (dot, mag)
}

// Q4_K row . x in the float order of llama.cpp's repacked gemm (ggml_gemm_q4_K_8x8_q8_K), read
// from the block bytes (d, dmin, scales[12], qs[128]): per super-block and pair p of sub-blocks
// the exact S_p = sum sc_j (q . x_q)_j and M_p = sum m_j bsum32_j (j = 2p, 2p + 1), then
// acc = fma(S_p, d d_x, acc), acc_m = fma(M_p, dmin d_x, acc_m); result acc - acc_m.
fn gate_q4_k_gemm(row: &[u8], x: &Act) -> f32 {
    let (mut acc, mut acc_m) = (0.0f32, 0.0f32);
    for (b, y) in row.chunks_exact(144).zip(&x.q8_k) {
        let d = fp16_to_f32(u16::from_le_bytes([b[0], b[1]])) * y.d;
        let dmin = fp16_to_f32(u16::from_le_bytes([b[2], b[3]])) * y.d;
        let sc = &b[4..16];
        for p in 0..4 {
            let (mut s, mut m) = (0i32, 0i32);
            for j in [2 * p, 2 * p + 1] {
                // ggml's get_scale_min_k4
                let (scj, mj) = if j < 4 {
                    (sc[j] & 63, sc[j + 4] & 63)
                } else {
                    ((sc[j + 4] & 15) | ((sc[j - 4] >> 6) << 4), (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4))
                };
                let q = |l: usize| (if j % 2 == 0 { b[16 + 32 * p + l] & 15 } else { b[16 + 32 * p + l] >> 4 }) as i32;
                s += scj as i32 * (0..32).map(|l| q(l) * y.qs[32 * j + l] as i32).sum::<i32>();
                m += mj as i32 * (y.bsums[2 * j] as i32 + y.bsums[2 * j + 1] as i32);
            }
            acc = (s as f32).mul_add(d, acc);
            acc_m = (m as f32).mul_add(dmin, acc_m);
        }
    }
    acc - acc_m
}

// Q4_1's min term m_w * s_x reads the activation's block sums as ggml's q8_1 stores them
// (Act.q8_0_s: f16(amax / 127 * Σq)), not as the exact d_x * Σq of the effective activation:
// Σ_b m_b * (s_b - d_b Σq_b), which the reference adds to take the same form.
fn gate_q4_1_s_correction(row: &[u8], x: &Act) -> f64 {
    let mut c = 0.0f64;
    for (b, blk) in row.chunks_exact(20).enumerate() {
        let m = fp16_to_f32(u16::from_le_bytes([blk[2], blk[3]])) as f64;
        let exact = x.q8_0_d[b] as f64 * x.q8_0[b].qs.iter().map(|&q| q as i32).sum::<i32>() as f64;
        c += m * (x.q8_0_s[b] as f64 - exact);
    }
    c
}

// The block order of Q5_0's 8 x 4 tiles, read from the block bytes (an independent scalar form of
// dot8x4_q5_0_avx2): per block the exact integer sum of (5-bit value - 16) * q_x, then one fma by
// d_w * d_x, blocks in order.
fn gate_q5_0_block(row: &[u8], x: &Act) -> f32 {
    let mut acc = 0.0f32;
    for ((b, y), &dy) in row.chunks_exact(22).zip(&x.q8_0).zip(&x.q8_0_d) {
        let d = fp16_to_f32(u16::from_le_bytes([b[0], b[1]]));
        let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
        let q = |j: usize| {
            let nib = if j < 16 { b[6 + j] & 15 } else { b[6 + j - 16] >> 4 };
            (nib | (((qh >> j) & 1) as u8) << 4) as i32 - 16
        };
        let s: i32 = (0..32).map(|j| q(j) * y.qs[j] as i32).sum();
        acc = (s as f32).mul_add(d * dy, acc);
    }
    acc
}

// The block order of Q6_K's 8 x 4 tiles, read from the block bytes (ql[128], qh[64], i8
// scales[16], f16 d): per super-block the exact integer Σ_v sc[v / 16] * (q6_v - 32) * q_x[v],
// then one fma by d_w * d_x, super-blocks in order.
fn gate_q6_k_block(row: &[u8], x: &Act) -> f32 {
    let mut acc = 0.0f32;
    for (b, y) in row.chunks_exact(210).zip(&x.q8_k) {
        let (ql, qh, sc) = (&b[..128], &b[128..192], &b[192..208]);
        let q = |v: usize| {
            let (h, c, l) = (v / 128, v % 128 / 32, v % 32);
            let lo = ql[64 * h + l + 32 * (c % 2)] >> (4 * (c / 2)) & 15;
            let hi = qh[32 * h + l] >> (2 * c) & 3;
            (lo | hi << 4) as i32 - 32
        };
        let s: i32 = (0..256).map(|v| sc[v / 16] as i8 as i32 * q(v) * y.qs[v] as i32).sum();
        acc = (s as f32).mul_add(fp16_to_f32(u16::from_le_bytes([b[208], b[209]])) * y.d, acc);
    }
    acc
}

// Whether a four-token or tiled kernel's result `v` for (row, x) is bitwise what the type's
// orders allow: dot_row, or for Q4_K also the gemm order, for Q5_0 and Q6_K also the block order.
fn gate_four_token_ok(ty: GgmlType, row: &[u8], x: &Act, v: f32) -> bool {
    let other = match ty.name() {
        "Q4_K" => Some(gate_q4_k_gemm(row, x)),
        "Q5_0" => Some(gate_q5_0_block(row, x)),
        "Q6_K" => Some(gate_q6_k_block(row, x)),
        _ => None,
    };
    v.to_bits() == dot_row(ty, row, x).to_bits() || other.is_some_and(|o| v.to_bits() == o.to_bits())
}

#[test]
fn gate_kernel_dots() {
    if !gate_cpu_runs("kernel_dots") {
        return;
    }
    let mut failures = Vec::new();
    for &ty in COMPILED_TYPES {
        let tag = gate_tag(ty);
        let kind = act_kind(ty);
        let mut rng = GateRng::new(0x5EED_0000 + ty.id() as u64);
        let (mut max_abs, mut max_rel, mut cases) = (0.0f64, 0.0f64, 0usize);
        let mut bad = 0usize;
        for n in gate_lengths(ty) {
            for case in 0..10 {
                let row = gate_random_row(ty, n, &mut rng);
                let x = gate_random_x(n, case, &mut rng);
                let act = Act::new(&x, &[kind]);
                let got = dot_row(ty, &row, &act) as f64;
                let mut w = vec![0.0f32; n];
                dequant_row(ty, &row, &mut w);
                let xe = gate_effective(&act, kind);
                let (mut want, mag) = gate_ref_dot(&w, &xe);
                if ty.name() == "Q4_1" {
                    want += gate_q4_1_s_correction(&row, &act);
                }
                let err = (got - want).abs();
                let rel = if mag > 0.0 { err / mag } else { err };
                max_abs = max_abs.max(err);
                max_rel = max_rel.max(rel);
                cases += 1;
                // f32 accumulation over at most a few hundred blocks: 1e-5 of sum |w x| is ample.
                if !(err <= 1e-5 * mag + 1e-30) {
                    bad += 1;
                    if bad <= 3 {
                        failures.push(format!("{tag} n={n} case={case}: got {got}, want {want} (sum|wx| {mag})"));
                    }
                }
            }
        }
        println!("GATE kernel_{tag} max_abs_err={max_abs:e} max_rel_err={max_rel:e} cases={cases}");
    }
    assert!(failures.is_empty(), "kernel gates failed:\n{}", failures.join("\n"));
}

// One case of a vector file.
struct GateVector {
    cols: usize,
    row: Vec<u8>,
    x: Vec<f32>,
    deq: Vec<f32>,
    dot: f64,
}

fn gate_parse_hex_bytes(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

fn gate_parse_f32_bits(s: &str) -> Option<Vec<f32>> {
    s.split_ascii_whitespace().map(|h| u32::from_str_radix(h, 16).ok().map(f32::from_bits)).collect()
}

// Format (one item per line): `case <type> <cols>`, `row <hex bytes>`, `x <f32 bits hex>...`,
// `deq <f32 bits hex>...`, `dot <f64>`, `end`; `#` starts a comment line.
fn gate_parse_vectors(text: &str, ty: GgmlType) -> Result<Vec<GateVector>, String> {
    let mut out = Vec::new();
    let mut cur: Option<GateVector> = None;
    for (ln, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        let bad = || format!("line {}: cannot parse '{key}'", ln + 1);
        match key {
            "case" => {
                let mut it = rest.split_ascii_whitespace();
                let t = it.next().ok_or_else(bad)?;
                if !t.eq_ignore_ascii_case(ty.name()) {
                    return Err(format!("line {}: case of type {t} in the {} file", ln + 1, ty.name()));
                }
                let cols = it.next().and_then(|c| c.parse().ok()).ok_or_else(bad)?;
                cur = Some(GateVector { cols, row: Vec::new(), x: Vec::new(), deq: Vec::new(), dot: f64::NAN });
            }
            "row" => cur.as_mut().ok_or_else(bad)?.row = gate_parse_hex_bytes(rest).ok_or_else(bad)?,
            "x" => cur.as_mut().ok_or_else(bad)?.x = gate_parse_f32_bits(rest).ok_or_else(bad)?,
            "deq" => cur.as_mut().ok_or_else(bad)?.deq = gate_parse_f32_bits(rest).ok_or_else(bad)?,
            "dot" => cur.as_mut().ok_or_else(bad)?.dot = rest.trim().parse().map_err(|_| bad())?,
            "end" => {
                let v = cur.take().ok_or_else(bad)?;
                if v.x.len() != v.cols || v.deq.len() != v.cols || Some(v.row.len()) != ty.row_bytes(v.cols) {
                    return Err(format!("line {}: case with inconsistent sizes", ln + 1));
                }
                out.push(v);
            }
            _ => return Err(bad()),
        }
    }
    Ok(out)
}

#[test]
fn gate_kernel_vectors() {
    if !gate_cpu_runs("kernel_vectors") {
        return;
    }
    let dir = std::env::var_os("METAINFER_GATE_DATA").map(std::path::PathBuf::from);
    let mut failures = Vec::new();
    for &ty in COMPILED_TYPES {
        let tag = gate_tag(ty);
        let Some(dir) = dir.as_ref() else {
            println!("GATE kernel_{tag}_vectors skipped reason=METAINFER_GATE_DATA_not_set");
            continue;
        };
        let path = dir.join("vectors").join(format!("dot_{tag}.txt"));
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                println!("GATE kernel_{tag}_vectors skipped reason=vector_file_absent path={} error={}", path.display(), e.kind());
                continue;
            }
        };
        let vectors = match gate_parse_vectors(&text, ty) {
            Ok(v) => v,
            Err(e) => {
                println!("GATE kernel_{tag}_vectors max_abs_err=nan max_rel_err=nan cases=0 error=bad_vector_file");
                failures.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        let kind = act_kind(ty);
        let (mut max_abs, mut max_rel, mut deq_rel, mut deq_abs) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        for (k, v) in vectors.iter().enumerate() {
            let mut w = vec![0.0f32; v.cols];
            dequant_row(ty, &v.row, &mut w);
            for (i, (&a, &b)) in w.iter().zip(&v.deq).enumerate() {
                let err = (a as f64 - b as f64).abs();
                let rel = if b != 0.0 { err / (b as f64).abs() } else { err };
                deq_abs = deq_abs.max(err);
                deq_rel = deq_rel.max(rel);
                if !(err <= 1e-6 * (b as f64).abs() + 1e-30) {
                    failures.push(format!("{tag} case {k}: dequant[{i}] = {a}, gguf-py {b}"));
                    break;
                }
            }
            let act = Act::new(&v.x, &[kind]);
            let got = dot_row(ty, &v.row, &act) as f64;
            let xe = gate_effective(&act, kind);
            // Bound: the activation's quantization (or rounding) error, plus f32 summation.
            let mut qerr = 0.0f64;
            let mut mag = 0.0f64;
            for ((&wi, &xi), &ei) in v.deq.iter().zip(&v.x).zip(&xe) {
                qerr += (wi as f64).abs() * (xi as f64 - ei).abs();
                mag += (wi as f64 * xi as f64).abs();
            }
            let err = (got - v.dot).abs();
            let rel = if mag > 0.0 { err / mag } else { err };
            max_abs = max_abs.max(err);
            max_rel = max_rel.max(rel);
            if !(err <= qerr * (1.0 + 1e-6) + 1e-5 * mag + 1e-30) {
                failures.push(format!("{tag} case {k}: dot {got}, gguf-py reference {} (bound {})", v.dot, qerr + 1e-5 * mag));
            }
        }
        println!(
            "GATE kernel_{tag}_vectors max_abs_err={max_abs:e} max_rel_err={max_rel:e} deq_max_abs_err={deq_abs:e} deq_max_rel_err={deq_rel:e} cases={}",
            vectors.len()
        );
    }
    assert!(failures.is_empty(), "vector gates failed:\n{}", failures.join("\n"));
}

#[test]
fn gate_dot4_bits() {
    if !gate_cpu_runs("dot4_bits") {
        return;
    }
    let (mut cases, mut mismatches, mut types, mut rows4_types) = (0usize, 0usize, Vec::new(), Vec::new());
    let mut failures = Vec::new();
    for &ty in COMPILED_TYPES {
        let kind = act_kind(ty);
        let mut rng = GateRng::new(0xD074_0000 + ty.id() as u64);
        let mut has4 = false;
        for n in gate_lengths(ty) {
            for rep in 0..5 {
                let row = gate_random_row(ty, n, &mut rng);
                let xs: Vec<Act> = (0..4).map(|t| Act::new(&gate_random_x(n, rep + t, &mut rng), &[kind])).collect();
                let Some(v) = dot_row4(ty, &row, [&xs[0], &xs[1], &xs[2], &xs[3]]) else { break };
                has4 = true;
                for t in 0..4 {
                    cases += 1;
                    if !gate_four_token_ok(ty, &row, &xs[t], v[t]) {
                        mismatches += 1;
                        if failures.len() < 5 {
                            failures.push(format!("{} n={n} rep={rep} t={t}: dot_row4 {} vs dot_row {}", gate_tag(ty), v[t], dot_row(ty, &row, &xs[t])));
                        }
                    }
                }
            }
        }
        if has4 {
            types.push(gate_tag(ty));
        }
        for n in gate_lengths(ty) {
            let x = Act::new(&gate_random_x(n, 7, &mut rng), &[kind]);
            let rows: Vec<Vec<u8>> = (0..4).map(|_| gate_random_row(ty, n, &mut rng)).collect();
            let Some(v) = dot_rows4(ty, [&rows[0], &rows[1], &rows[2], &rows[3]], &x) else { break };
            rows4_types.push(gate_tag(ty));
            for (r, row) in rows.iter().enumerate() {
                cases += 1;
                if v[r].to_bits() != dot_row(ty, row, &x).to_bits() {
                    mismatches += 1;
                    if failures.len() < 5 {
                        failures.push(format!("{} n={n} row {r}: dot_rows4 {} vs dot_row {}", gate_tag(ty), v[r], dot_row(ty, row, &x)));
                    }
                }
            }
        }
    }
    rows4_types.dedup();
    println!("GATE dot4_bits mismatches={mismatches} cases={cases} types=\"{}\" rows4_types=\"{}\"", types.join(","), rows4_types.join(","));
    assert!(failures.is_empty(), "dot_row4 / dot_rows4 differ bitwise from dot_row (and for Q4_K from the gemm order):\n{}", failures.join("\n"));
}

#[test]
fn gate_dec_bits() {
    if !gate_cpu_runs("dec_bits") {
        return;
    }
    let (mut cases, mut mismatches, mut types) = (0usize, 0usize, Vec::new());
    let mut failures = Vec::new();
    for &ty in COMPILED_TYPES {
        let kind = act_kind(ty);
        let mut rng = GateRng::new(0xDEC2_0000 + ty.id() as u64);
        let mut has = false;
        let mut dec = DecRows::default();
        let tile_n = tile_rows(ty);
        for n in gate_lengths(ty) {
            for rep in 0..5 {
                if tile_n == 0 {
                    break;
                }
                let rows: Vec<Vec<u8>> = (0..tile_n).map(|_| gate_random_row(ty, n, &mut rng)).collect();
                let xs: Vec<Act> = (0..4).map(|t| Act::new(&gate_random_x(n, rep + t, &mut rng), &[kind])).collect();
                let views: Vec<&[u8]> = rows.iter().map(|r| r.as_slice()).collect();
                assert!(dec_rows(ty, &views, &mut dec), "tile_rows({}) = {tile_n} but dec_rows has no tiled form", gate_tag(ty));
                has = true;
                let v = dot_dec(ty, &dec, [&xs[0], &xs[1], &xs[2], &xs[3]]);
                for i in 0..tile_n {
                    for t in 0..4 {
                        cases += 1;
                        if !gate_four_token_ok(ty, &rows[i], &xs[t], v[i][t]) {
                            mismatches += 1;
                            if failures.len() < 5 {
                                let want = dot_row(ty, &rows[i], &xs[t]);
                                failures.push(format!("{} n={n} rep={rep} row={i} t={t}: dot_dec {} vs dot_row {}", gate_tag(ty), v[i][t], want));
                            }
                        }
                    }
                }
            }
        }
        if has {
            types.push(gate_tag(ty));
        }
    }
    println!("GATE dec_bits mismatches={mismatches} cases={cases} types=\"{}\"", types.join(","));
    assert!(failures.is_empty(), "dot_dec differs bitwise from dot_row (and for Q4_K from the gemm order, for Q5_0 and Q6_K from the block order):\n{}", failures.join("\n"));
}

#[test]
fn gate_matvec() {
    if !gate_cpu_runs("matvec") {
        return;
    }
    let mut mismatches = 0usize;
    let mut max_abs = 0.0f64;
    let mut cases = 0usize;
    let mut dot4_off = 0usize;
    let pools: Vec<Pool> = [1usize, 2, 3].iter().map(|&t| Pool::new(t)).collect();
    let mut rng = GateRng::new(0x3A7_7EC);
    for &ty in COMPILED_TYPES {
        let kind = act_kind(ty);
        for &(rows, cols) in &[(37usize, 512usize), (300, 256), (1, 768)] {
            let row_bytes = ty.row_bytes(cols).expect("block multiple");
            let mut data = Vec::with_capacity(rows * row_bytes);
            for _ in 0..rows {
                data.extend(gate_random_row(ty, cols, &mut rng));
            }
            let w = QMatrix { ty, rows, cols, row_bytes, data: &data };
            let xs: Vec<Act> = (0..5).map(|c| Act::new(&gate_random_x(cols, c, &mut rng), &[kind])).collect();
            let naive: Vec<Vec<f32>> =
                xs.iter().map(|x| (0..rows).map(|r| dot_row(ty, &data[r * row_bytes..(r + 1) * row_bytes], x)).collect()).collect();
            // Tokens 0..4 through the tiled kernel on the row's tile (a short last tile repeating
            // its last row), else the four-token kernel, else dot_row; they may sum in another order
            // than dot_row, so they are held to the dot tolerance only.
            let mut naive4: Vec<Vec<f32>> = vec![Vec::with_capacity(rows); 4];
            let g = [&xs[0], &xs[1], &xs[2], &xs[3]];
            let mut dec = DecRows::default();
            let tile_n = tile_rows(ty);
            for r in 0..rows {
                let row = |r: usize| &data[r.min(rows - 1) * row_bytes..(r.min(rows - 1) + 1) * row_bytes];
                let v = if tile_n > 0 {
                    // r's tile: rows from r rounded down to a multiple of tile_n, the last repeated
                    let tile: Vec<&[u8]> = (0..tile_n).map(|i| row(r - r % tile_n + i)).collect();
                    assert!(dec_rows(ty, &tile, &mut dec), "tile_rows({}) = {tile_n} but dec_rows has no tiled form", gate_tag(ty));
                    dot_dec(ty, &dec, g)[r % tile_n]
                } else {
                    dot_row4(ty, row(r), g).unwrap_or_else(|| g.map(|x| dot_row(ty, row(r), x)))
                };
                for t in 0..4 {
                    naive4[t].push(v[t]);
                }
            }
            for t in 0..4 {
                let scale = naive[t].iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-30);
                for (a, b) in naive4[t].iter().zip(&naive[t]) {
                    if ((a - b).abs() / scale) as f64 > 1e-5 {
                        dot4_off += 1;
                    }
                }
            }
            for pool in &pools {
                for rep in 0..3 {
                    let mut out = vec![f32::NAN; rows];
                    matvec(pool, &w, &xs[rep], &mut out);
                    for (a, b) in out.iter().zip(&naive[rep]) {
                        max_abs = max_abs.max((*a as f64 - *b as f64).abs());
                        mismatches += (a.to_bits() != b.to_bits()) as usize;
                    }
                    cases += 1;
                }
                // several matrices as one job (q, k, v): each output bitwise its own matvec's
                let mut outs = vec![vec![f32::NAN; rows]; 3];
                let mut views: Vec<&mut [f32]> = outs.iter_mut().map(|o| o.as_mut_slice()).collect();
                matvec_many(pool, &[&w, &w, &w], &xs[4], &mut views);
                for out in &outs {
                    for (a, b) in out.iter().zip(&naive[4]) {
                        max_abs = max_abs.max((*a as f64 - *b as f64).abs());
                        mismatches += (a.to_bits() != b.to_bits()) as usize;
                    }
                }
                cases += 1;
                // every token through the four-token kernels (matmul_toks): a token's values do
                // not depend on the other tokens nor on its lane in the group
                let toks = |xs: &[Act]| {
                    let mut out = vec![f32::NAN; xs.len() * rows];
                    matmul_toks(pool, &w, xs, &mut out);
                    out
                };
                let (five, shifted, alone) = (toks(&xs), toks(&xs[1..]), toks(&xs[4..]));
                for r in 0..rows {
                    let mut same = |a: f32, b: f32| {
                        max_abs = max_abs.max((a as f64 - b as f64).abs());
                        mismatches += (a.to_bits() != b.to_bits()) as usize;
                    };
                    (0..4).for_each(|t| same(five[t * rows + r], naive4[t][r]));
                    (1..4).for_each(|t| same(shifted[(t - 1) * rows + r], naive4[t][r]));
                    same(five[4 * rows + r], alone[r]);
                    same(shifted[3 * rows + r], alone[r]);
                }
                cases += 1;
                for n_tok in [1usize, 2, 5] {
                    let mut out = vec![f32::NAN; n_tok * rows];
                    matmul(pool, &w, &xs[..n_tok], &mut out);
                    for t in 0..n_tok {
                        // matmul's split: tokens in groups of four with the tiled or four-token
                        // kernel (where the type has one), the last n_tok % 4 with dot_row.
                        let reference = if t < n_tok - n_tok % 4 { &naive4[t] } else { &naive[t] };
                        for (a, b) in out[t * rows..(t + 1) * rows].iter().zip(reference) {
                            max_abs = max_abs.max((*a as f64 - *b as f64).abs());
                            mismatches += (a.to_bits() != b.to_bits()) as usize;
                        }
                    }
                    cases += 1;
                }
            }
        }
    }
    // Many small jobs back to back: the pool must neither lose nor repeat a task.
    let counter = std::sync::atomic::AtomicUsize::new(0);
    for pool in &pools {
        for n in 0..200usize {
            counter.store(0, std::sync::atomic::Ordering::SeqCst);
            pool.run(n % 17, &|i| {
                counter.fetch_add(i + 1, std::sync::atomic::Ordering::SeqCst);
            });
            let m = n % 17;
            if counter.load(std::sync::atomic::Ordering::SeqCst) != m * (m + 1) / 2 {
                mismatches += 1;
            }
            cases += 1;
        }
    }
    println!("GATE matvec max_abs_err={max_abs:e} mismatches={mismatches} dot4_off={dot4_off} cases={cases}");
    assert_eq!(mismatches, 0, "matvec/matmul differ from the naive loop of dot_row / dot_dec / dot_row4");
    assert_eq!(dot4_off, 0, "the four-token kernels differ from dot_row by more than 1e-5 of the output's scale");
}

#[test]
fn gate_vec_ops() {
    if !gate_cpu_runs("vec_ops") {
        return;
    }
    let mut failures = Vec::new();
    // independent of any vectors: the approximation is within 2e-7 of exp where exp is normal
    let mut max_rel = 0.0f64;
    for i in -87_000..88_000 {
        let x = i as f32 / 1000.0;
        let (got, want) = (ggml_expf(x) as f64, (x as f64).exp());
        max_rel = max_rel.max(((got - want) / want).abs());
    }
    if !(max_rel < 2e-7) {
        failures.push(format!("ggml_expf is {max_rel:e} (relative) from exp"));
    }
    // softmax_exp: the values are ggml_expf's, the sum ggml's fold of each group of 8 in f64
    let s0: Vec<f32> = (0..16).map(|i| if i < 13 { (i as f32 * 0.7).sin() * 5.0 } else { f32::NEG_INFINITY }).collect();
    let max = s0.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let mut s = s0.clone();
    let sum = softmax_exp(&mut s, max);
    let e: Vec<f32> = s0.iter().map(|&v| ggml_expf(v - max)).collect();
    let fold = |g: &[f32]| (((g[0] + g[4]) + (g[2] + g[6])) + ((g[1] + g[5]) + (g[3] + g[7]))) as f64;
    let want = fold(&e[..8]) + fold(&e[8..]);
    if s.iter().zip(&e).any(|(a, b)| a.to_bits() != b.to_bits()) || sum.to_bits() != want.to_bits() || s[13..] != [0.0; 3] {
        failures.push(format!("softmax_exp: {s:?} sum {sum}, want {e:?} sum {want}"));
    }
    let mut cases = 0usize;
    let mut mismatches = 0usize;
    match std::env::var_os("METAINFER_GATE_DATA").map(|d| std::path::PathBuf::from(d).join("vectors/ggml_expf.txt")) {
        None => println!("GATE vec_ops_vectors skipped reason=METAINFER_GATE_DATA_not_set"),
        Some(path) => match std::fs::read_to_string(&path) {
            Err(e) => failures.push(format!("{}: {e}", path.display())),
            Ok(text) => {
                for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
                    let b: Vec<u32> = line.split_whitespace().filter_map(|h| u32::from_str_radix(h, 16).ok()).collect();
                    let [x, e, si] = b[..] else {
                        failures.push(format!("{}: bad line {line:?}", path.display()));
                        break;
                    };
                    let x = f32::from_bits(x);
                    let mut g = [x; 8];
                    swiglu(&mut g, &[1.0; 8]);
                    cases += 1;
                    if ggml_expf(x).to_bits() != e || g[0].to_bits() != si {
                        mismatches += 1;
                        if mismatches <= 5 {
                            failures.push(format!("x = {x:e}: expf {:e} silu {:e}, ggml {:e} {:e}", ggml_expf(x), g[0], f32::from_bits(e), f32::from_bits(si)));
                        }
                    }
                }
                if cases == 0 {
                    failures.push(format!("{}: no cases", path.display()));
                }
            }
        },
    }
    // attend_many: each query's output has the bits of the lane forms (attend_lanes) on its own
    // rows (batch form), for
    // head sizes with and without a partial lane group, 1 to 7 heads per token (the kernels' tiles
    // of up to four queries and their remainders), spans of a causal window (each token's rows
    // shifted by one, ends unaligned with the lanes and the row blocks, spans over several row
    // blocks of both lane counts) and of a full prefix
    let mut rng = GateRng::new(41);
    let mut attend_cases = 0usize;
    let shapes = [(64usize, 7usize, 3usize, 150usize, 0usize), (256, 4, 3, 97, 40), (40, 5, 2, 170, 0), (128, 3, 4, 33, 9), (8, 1, 1, 1, 0), (36, 2, 4, 21, 0), (24, 6, 2, 75, 30), (64, 4, 2, 600, 0), (32, 3, 2, 530, 300)];
    for (hd, g, nt, rows_n, window) in shapes {
        let to16 = |v: f32| rt::half::f16::from_f32(v);
        let (k, v): (Vec<rt::half::f16>, Vec<rt::half::f16>) = (0..rows_n * hd).map(|_| (to16(rng.normal()), to16(rng.normal()))).unzip();
        let q: Vec<f32> = (0..nt * g * hd).map(|_| 2.0 * rng.normal()).collect();
        let spans: Vec<std::ops::Range<usize>> = (0..nt)
            .map(|t| {
                let end = rows_n - (nt - 1 - t);
                if window == 0 { 0..end } else { end.saturating_sub(window)..end }
            })
            .collect();
        let mut out = vec![0.0f32; nt * g * hd];
        attend_many(&q, hd, &spans, (&k, &v), &mut out);
        for j in 0..nt * g {
            let sp = &spans[j / g];
            let mut want = vec![0.0f32; hd];
            attend_lanes(&q[j * hd..][..hd], hd, (&k[sp.start * hd..sp.end * hd], &v[sp.start * hd..sp.end * hd]), false, &mut want);
            attend_cases += 1;
            if want.iter().zip(&out[j * hd..][..hd]).any(|(a, b)| a.to_bits() != b.to_bits()) {
                failures.push(format!("attend_many: hd {hd}, query {} of token {} over rows {sp:?} differs from attend", j % g, j / g));
            }
        }
        // attend with the g queries of the last token at once (decode: the rows widened once
        // for the heads sharing them, the realization's kernels): each query bitwise the lane
        // forms alone (attend_lanes), for both lane counts
        let (qt, sp) = (&q[(nt - 1) * g * hd..], &spans[nt - 1]);
        let kv = (&k[sp.start * hd..sp.end * hd], &v[sp.start * hd..sp.end * hd]);
        for one in [true, false] {
            let mut all = vec![0.0f32; g * hd];
            attend(qt, hd, kv, one, &mut all);
            for u in 0..g {
                let mut want = vec![0.0f32; hd];
                attend_lanes(&qt[u * hd..][..hd], hd, kv, one, &mut want);
                attend_cases += 1;
                if want.iter().zip(&all[u * hd..][..hd]).any(|(a, b)| a.to_bits() != b.to_bits()) {
                    failures.push(format!("attend: hd {hd}, query {u} of {g} (one = {one}) differs from the lane forms"));
                }
            }
        }
    }
    println!("GATE vec_ops exp_max_rel_err={max_rel:e} vector_cases={cases} vector_mismatches={mismatches} attend_many_cases={attend_cases}");
    assert!(failures.is_empty(), "vec_ops gate failed:\n{}", failures.join("\n"));
}

#[test]
fn gate_flash_attn() {
    if !gate_cpu_runs("flash_attn") {
        return;
    }
    let mut failures = Vec::new();
    let (mut cases, mut max_err) = (0usize, 0.0f32);
    let mut rng = GateRng::new(43);
    // (head_dim, heads per kv head, tokens, rows, window: 0 = causal from row 0)
    let shapes = [(64usize, 7usize, 4usize, 700usize, 0usize), (256, 4, 3, 300, 200), (40, 5, 2, 170, 0), (128, 3, 4, 133, 70), (8, 1, 1, 1, 0), (64, 2, 4, 1100, 600), (24, 6, 2, 75, 30), (64, 3, 5, 130, 0)];
    for (hd, g, nt, rows_n, window) in shapes {
        let to16 = |v: f32| rt::half::f16::from_f32(v);
        let (k, v): (Vec<rt::half::f16>, Vec<rt::half::f16>) = (0..rows_n * hd).map(|_| (to16(rng.normal()), to16(rng.normal()))).unzip();
        let vmax = v.iter().map(|x| x.to_f32().abs()).fold(0.0f32, f32::max);
        let q: Vec<f32> = (0..nt * g * hd).map(|_| 2.0 * rng.normal()).collect();
        let spans: Vec<std::ops::Range<usize>> = (0..nt)
            .map(|t| {
                let end = rows_n - (nt - 1 - t);
                if window == 0 { 0..end } else { end.saturating_sub(window)..end }
            })
            .collect();
        let (mut out, mut want, mut exact) = (vec![0.0f32; nt * g * hd], vec![0.0f32; nt * g * hd], vec![0.0f32; nt * g * hd]);
        attend_flash(&q, hd, &spans, (&k, &v), &mut out);
        attend_flash_lanes(&q, hd, &spans, (&k, &v), &mut want);
        attend_many(&q, hd, &spans, (&k, &v), &mut exact);
        for t in 0..nt {
            let r = t * g * hd..(t + 1) * g * hd;
            let mut alone = vec![0.0f32; g * hd];
            attend_flash(&q[r.clone()], hd, &spans[t..t + 1], (&k, &v), &mut alone);
            cases += 1;
            if out[r.clone()].iter().zip(&want[r.clone()]).any(|(a, b)| a.to_bits() != b.to_bits()) {
                failures.push(format!("attend_flash: hd {hd}, token {t} of {nt} over rows {:?} differs from the lane forms", spans[t]));
            }
            if out[r.clone()].iter().zip(&alone).any(|(a, b)| a.to_bits() != b.to_bits()) {
                failures.push(format!("attend_flash: hd {hd}, token {t} of {nt} over rows {:?} differs from the token alone", spans[t]));
            }
            let err = out[r.clone()].iter().zip(&exact[r]).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max) / vmax;
            max_err = max_err.max(err);
            if !(err <= 2e-3) {
                failures.push(format!("attend_flash: hd {hd}, token {t} over rows {:?} is {err:e} of max|V| from llama.cpp's order", spans[t]));
            }
        }
    }
    println!("GATE flash_attn tokens={cases} max_err_vs_llama_order={max_err:e}");
    assert!(failures.is_empty(), "flash_attn gate failed:\n{}", failures.join("\n"));
}

/// The activation the kernel of form `kind` effectively multiplies with, in f64 (exact): x
/// itself for F32, the rounded x for F16/BF16, d*q for the quantized forms.
fn gate_effective(act: &Act, kind: ActKind) -> Vec<f64> {
    match kind {
        ActKind::F32 => act.f32.iter().map(|&v| v as f64).collect(),
        ActKind::F16 => act.f16.iter().map(|&v| v as f64).collect(),
        ActKind::BF16 => act.bf16.iter().map(|&v| v as f64).collect(),
        ActKind::Q8_0 => act.q8_0.iter().flat_map(|b| b.qs.iter().map(move |&q| fp16_to_f32(b.d) as f64 * q as f64)).collect(),
        ActKind::Q8K => act.q8_k.iter().flat_map(|b| b.qs.iter().map(move |&q| b.d as f64 * q as f64)).collect(),
    }
}
