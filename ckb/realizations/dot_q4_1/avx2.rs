// AVX2 Q4_1 x Q8_0 dot in the operation order of llama.cpp's AVX2 ggml_vec_dot_q4_1_q8_1 (which
// llama.cpp uses for every Q4_1 product, prefill included: it has no repacked or tiled Q4_1
// kernel), so that the result is bitwise llama.cpp's: per block the nibbles are spread to 32
// bytes (low nibbles = values 0..16, high = 16..32) and, being unsigned, multiplied directly with
// the signed Q8_0 quants (maddubs, then madd into eight i32 lane sums; |pair| <= 2*15*127),
// converted to f32 and accumulated with one fma by d_w*d_x into eight f32 lanes, in block order;
// the min term is a scalar fma chain in block order, summs = fma(m_w, s_x, summs) (gcc contracts
// ggml's `summs += m * s` so; s_x is Act.q8_0_s, ggml's q8_1 `s`); result hsum(acc) + summs.
// Checked bitwise against ggml's function built with the anchor's flags (gcc -O3 -march=native
// -std=gnu11) in a /tmp harness include!-ing this file: 0 mismatches in 2048 row x token dots.
//
// The f16 scales and mins of eight blocks are converted at once with F16C (exact), their scale
// products formed at once; a row's last n % 8 blocks convert theirs one by one (the same values).
// The four-token form (prefill) runs four tokens' chains side by side, each with the operations
// of the one-token kernel in the same order (bit for bit four calls of it), and decodes each
// block's nibbles and scales once for the four. Harness, 2-core AMD EPYC, 256 rows, best of 15,
// ns per row and token at 576 / 1536 columns: one token 40.4 / 94.7 (integer f16 conversion and
// 16 word inserts per eight blocks: 47.6 / 116.7; ggml's function: 66.6 / 161.5 in a noisier
// run where ours took 56.8 / 119.5); four tokens 22.9 / 52.3. Two rows side by side did not pay
// then (39.7 / 96.2 per row). The gemv's four-row form (dot_rows4_q4_1_avx2: each activation block
// loaded once for four rows, four rows' chains side by side, each row's operations those of the
// one-row kernel in the same order) does since the nibbles are spread by a load and one shift:
// same harness, 256 rows, ns per row at 576 / 1536 columns: one row 36.1 / 88.2, with the new
// nibble spread 34.2 / 83.3, four rows 28.1 / 63.3.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

// The 32 nibbles of a block as bytes 0..=15 (value order): the 16 bytes loaded into both halves
// (a load, no shuffle), the upper half's shifted by 4, masked.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1_nibbles(b: &BlockQ4_1) -> __m256i {
    let both = _mm256_broadcastsi128_si256(_mm_loadu_si128(b.qs.as_ptr() as *const __m128i));
    _mm256_and_si256(_mm256_set1_epi8(0x0F), _mm256_srlv_epi64(both, _mm256_set_epi64x(4, 4, 0, 0)))
}

// acc + d * (the eight i32 lane sums of qx . block y, as f32).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1_step(acc: __m256, d: f32, qx: __m256i, y: &BlockQ8_0) -> __m256 {
    let qy = _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i);
    let p = _mm256_madd_epi16(_mm256_set1_epi16(1), _mm256_maddubs_epi16(qx, qy));
    _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(p), acc)
}

// The f16 scales and mins of eight blocks as f32 (exact): one 4-byte load (d, m) per block, the
// d and m halves sorted apart with a byte shuffle, then one F16C conversion each.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1_scales_mins(b: &[BlockQ4_1]) -> (__m256, __m256) {
    let dm = |k: usize| i32::from_le_bytes([b[k].d[0], b[k].d[1], b[k].m[0], b[k].m[1]]);
    let v = _mm256_setr_epi32(dm(0), dm(1), dm(2), dm(3), dm(4), dm(5), dm(6), dm(7));
    // per 128-bit lane: [d0 m0 d1 m1 d2 m2 d3 m3] -> [d0 d1 d2 d3 m0 m1 m2 m3]
    let split = _mm256_setr_epi8(
        0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, //
        0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
    );
    // [d0..d3 | m0..m3 | d4..d7 | m4..m7] -> [d0..d7 | m0..m7]
    let v = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_shuffle_epi8(v, split));
    (_mm256_cvtph_ps(_mm256_castsi256_si128(v)), _mm256_cvtph_ps(_mm256_extracti128_si256::<1>(v)))
}

/// row . x for a Q4_1 row; reads x's Q8_0 form and its block sums (q8_0_s). Requires AVX2, FMA
/// and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q4_1_avx2(row: &[u8], x: &Act) -> f32 {
    dot_q4_1_avx2_n::<1>(row, [x])[0]
}

/// row . xs[t] for four activations (prefill), bit for bit four calls of dot_q4_1_avx2.
/// Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot4_q4_1_avx2(row: &[u8], xs: [&Act; 4]) -> [f32; 4] {
    dot_q4_1_avx2_n::<4>(row, xs)
}

/// rows[r] . x for four Q4_1 rows (the gemv's four-row form: each activation block is loaded once
/// for the four rows; per row the float operations are those of dot_q4_1_avx2, in the same order,
/// so rows[r]'s result is bitwise dot_q4_1_avx2(rows[r], x)). Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_rows4_q4_1_avx2(rows: [&[u8]; 4], x: &Act) -> [f32; 4] {
    dot_rows_q4_1(rows, x, |qx, qy| unsafe { _mm256_madd_epi16(_mm256_set1_epi16(1), _mm256_maddubs_epi16(qx, qy)) })
}

/// dot_rows4_q4_1_avx2 for N rows with `sums(nibbles, y's quants)` giving the block's eight i32
/// lane sums (lane i: Σ of the products of values 4i..4i + 4) exactly: maddubs + madd here, one
/// vpdpbusd in avx512.rs (the same integers). Inlined into its callers, whose instruction sets
/// it uses.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn dot_rows_q4_1<const N: usize>(rows: [&[u8]; N], x: &Act, sums: impl Fn(__m256i, __m256i) -> __m256i) -> [f32; N] {
    let step = |acc: __m256, d: f32, qx: __m256i, y: &BlockQ8_0| unsafe {
        let qy = _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i);
        _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sums(qx, qy)), acc)
    };
    let w = rows.map(q4_1_blocks);
    let n = x.q8_0.len();
    for w in &w {
        assert_eq!(w.len(), n, "Q4_1 row of {} blocks for a Q8_0 activation of {n} blocks", w.len());
    }
    assert!(n * 32 == x.f32.len() && x.q8_0_d.len() == n && x.q8_0_s.len() == n, "activation lacks its Q8_0 form");
    let (mut acc, mut summs) = ([_mm256_setzero_ps(); N], [0.0f32; N]);
    let (mut dd, mut mw) = ([[0.0f32; 8]; N], [[0.0f32; 8]; N]); // [row][block of the group]: d_w * d_x, m_w
    let full = n / 8 * 8;
    for g in (0..full).step_by(8) {
        let xd = _mm256_loadu_ps(x.q8_0_d[g..g + 8].as_ptr());
        for r in 0..N {
            let (wd, wm) = q4_1_scales_mins(&w[r][g..g + 8]);
            _mm256_storeu_ps(mw[r].as_mut_ptr(), wm);
            _mm256_storeu_ps(dd[r].as_mut_ptr(), _mm256_mul_ps(wd, xd));
        }
        for k in 0..8 {
            for r in 0..N {
                summs[r] = mw[r][k].mul_add(x.q8_0_s[g + k], summs[r]);
                acc[r] = step(acc[r], dd[r][k], q4_1_nibbles(&w[r][g + k]), &x.q8_0[g + k]);
            }
        }
    }
    for i in full..n {
        for r in 0..N {
            let b = &w[r][i];
            let (d, m) = (fp16_to_f32(u16::from_le_bytes(b.d)), fp16_to_f32(u16::from_le_bytes(b.m)));
            summs[r] = m.mul_add(x.q8_0_s[i], summs[r]);
            acc[r] = step(acc[r], d * x.q8_0_d[i], q4_1_nibbles(b), &x.q8_0[i]);
        }
    }
    let h = hsum_f32x8_rows(acc);
    std::array::from_fn(|r| h[r] + summs[r])
}

// The kernel for T tokens: T chains, each in llama.cpp's order.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q4_1_avx2_n<const T: usize>(row: &[u8], xs: [&Act; T]) -> [f32; T] {
    let w = q4_1_blocks(row);
    let n = w.len();
    for x in xs {
        assert_eq!(n, x.q8_0.len(), "Q4_1 row of {n} blocks for a Q8_0 activation of {} blocks", x.q8_0.len());
        assert!(n * 32 == x.f32.len() && x.q8_0_d.len() == n && x.q8_0_s.len() == n, "activation lacks its Q8_0 form");
    }
    let mut acc = [_mm256_setzero_ps(); T];
    let mut summs = [0.0f32; T];
    let mut dd = [[0.0f32; 8]; T]; // [token][block of the group]: d_w * d_x
    let mut mw = [0.0f32; 8]; // [block of the group]: m_w
    let full = n / 8 * 8;
    for g in (0..full).step_by(8) {
        let (wd, wm) = q4_1_scales_mins(&w[g..g + 8]);
        _mm256_storeu_ps(mw.as_mut_ptr(), wm);
        for t in 0..T {
            let ddt = _mm256_mul_ps(wd, _mm256_loadu_ps(xs[t].q8_0_d[g..g + 8].as_ptr()));
            _mm256_storeu_ps(dd[t].as_mut_ptr(), ddt);
        }
        for k in 0..8 {
            let qx = q4_1_nibbles(&w[g + k]);
            for t in 0..T {
                summs[t] = mw[k].mul_add(xs[t].q8_0_s[g + k], summs[t]);
                acc[t] = q4_1_step(acc[t], dd[t][k], qx, &xs[t].q8_0[g + k]);
            }
        }
    }
    // The last n % 8 blocks (two of a 576-column row), converted one by one.
    for (i, b) in w.iter().enumerate().skip(full) {
        let (d, m) = (fp16_to_f32(u16::from_le_bytes(b.d)), fp16_to_f32(u16::from_le_bytes(b.m)));
        let qx = q4_1_nibbles(b);
        for t in 0..T {
            summs[t] = m.mul_add(xs[t].q8_0_s[i], summs[t]);
            acc[t] = q4_1_step(acc[t], d * xs[t].q8_0_d[i], qx, &xs[t].q8_0[i]);
        }
    }
    let mut out = [0.0f32; T];
    for t in 0..T {
        out[t] = hsum_f32x8(acc[t]) + summs[t];
    }
    out
}
