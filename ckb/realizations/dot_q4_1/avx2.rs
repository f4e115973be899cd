// AVX2 Q4_1 x Q8_0 dot in the operation order of llama.cpp's AVX2 ggml_vec_dot_q4_1_q8_1 (which
// llama.cpp uses for every Q4_1 product, prefill included: it has no repacked or tiled Q4_1
// kernel), so that the result is bitwise llama.cpp's: per block the nibbles are spread to 32
// bytes (low nibbles = values 0..16, high = 16..32) and, being unsigned, multiplied directly with
// the signed Q8_0 quants (maddubs, then madd into eight i32 lane sums; |pair| <= 2*15*127),
// converted to f32 and accumulated with one fma by d_w*d_x into eight f32 lanes, in block order;
// the min term is a scalar fma chain in block order, summs = fma(m_w, s_x, summs) (gcc contracts
// ggml's `summs += m * s` so; s_x is Act.q8_0_s, ggml's q8_1 `s`); result hsum(acc) + summs. The
// f16 scales and mins of eight blocks are converted at once (exact), their scale products formed
// at once; a row's last n % 8 blocks convert theirs one by one (the same values).
//
// One row's chain of fmas is latency-bound, so the kernel is written for R rows x T tokens with
// R * T independent chains, each with the operations of the one-row one-token kernel in the
// same order (so every form is bitwise that kernel): the two-row form (decode matvec, rows in
// pairs) shares the activation's loads, the four-token form (prefill) decodes each block's
// nibbles and scales once for the four tokens. Measured on the 2-core AMD EPYC (AVX2), 256 rows,
// best of 15, /tmp harness include!-ing this file, ns per row and token: 576 columns one row
// 46.0, four tokens 25.8; 1536 columns 113.7 and 63.3 (two rows: see the issue 19 note).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

// The 32 nibbles of a block as bytes 0..=15 (value order).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn q4_1_nibbles(b: &BlockQ4_1) -> __m256i {
    let tmp = _mm_loadu_si128(b.qs.as_ptr() as *const __m128i);
    _mm256_and_si256(
        _mm256_set1_epi8(0x0F),
        _mm256_set_m128i(_mm_srli_epi16(tmp, 4), tmp),
    )
}

// acc + d * (the eight i32 lane sums of qx . qy, as f32).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn q4_1_step(acc: __m256, d: f32, qx: __m256i, qy: __m256i) -> __m256 {
    let p = _mm256_madd_epi16(_mm256_set1_epi16(1), _mm256_maddubs_epi16(qx, qy));
    _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(p), acc)
}

// A block's 32 activation quants.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn q8_0_quants(y: &BlockQ8_0) -> __m256i {
    _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i)
}

// Checks that x is a Q8_0 activation (with its block sums) for a row of n blocks.
fn q4_1_check(n: usize, x: &Act) {
    assert_eq!(
        n,
        x.q8_0.len(),
        "Q4_1 row of {n} blocks for a Q8_0 activation of {} blocks",
        x.q8_0.len()
    );
    assert!(
        n * 32 == x.f32.len() && x.q8_0_d.len() == n && x.q8_0_s.len() == n,
        "activation lacks its Q8_0 form"
    );
}

/// row . x for a Q4_1 row; reads x's Q8_0 form and its block sums (q8_0_s). Requires AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot_q4_1_avx2(row: &[u8], x: &Act) -> f32 {
    dot_q4_1_avx2_rt::<1, 1>([row], [x])[0][0]
}

/// rows[i] . x for two Q4_1 rows (decode), bit for bit two calls of dot_q4_1_avx2.
/// Requires AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot2_q4_1_avx2(rows: [&[u8]; 2], x: &Act) -> [f32; 2] {
    let v = dot_q4_1_avx2_rt::<2, 1>(rows, [x]);
    [v[0][0], v[1][0]]
}

/// row . xs[t] for four activations (prefill), bit for bit four calls of dot_q4_1_avx2.
/// Requires AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot4_q4_1_avx2(row: &[u8], xs: [&Act; 4]) -> [f32; 4] {
    dot_q4_1_avx2_rt::<1, 4>([row], xs)[0]
}

// The kernel for R rows and T tokens: R * T chains, each in llama.cpp's order.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_q4_1_avx2_rt<const R: usize, const T: usize>(rows: [&[u8]; R], xs: [&Act; T]) -> [[f32; T]; R] {
    let w = rows.map(q4_1_blocks);
    let n = w[0].len();
    for wr in w {
        assert_eq!(wr.len(), n, "Q4_1 rows of {} and {n} blocks in one call", wr.len());
    }
    for x in xs {
        q4_1_check(n, x);
    }
    let mut acc = [[_mm256_setzero_ps(); T]; R];
    let mut summs = [[0.0f32; T]; R];
    let mut dd = [[[0.0f32; 8]; T]; R]; // [row][token][block of the group]: d_w * d_x
    let mut mw = [[0.0f32; 8]; R]; // [row][block of the group]: m_w
    let full = n / 8 * 8;
    for g in (0..full).step_by(8) {
        for r in 0..R {
            let wb = &w[r][g..g + 8];
            let wd = f16x8_scales(8, |k| wb[k].d);
            _mm256_storeu_ps(mw[r].as_mut_ptr(), f16x8_scales(8, |k| wb[k].m));
            for t in 0..T {
                let ddt = _mm256_mul_ps(wd, _mm256_loadu_ps(xs[t].q8_0_d[g..g + 8].as_ptr()));
                _mm256_storeu_ps(dd[r][t].as_mut_ptr(), ddt);
            }
        }
        for k in 0..8 {
            let qx = w.map(|wr| q4_1_nibbles(&wr[g + k]));
            let qy = xs.map(|x| q8_0_quants(&x.q8_0[g + k]));
            for r in 0..R {
                for t in 0..T {
                    summs[r][t] = mw[r][k].mul_add(xs[t].q8_0_s[g + k], summs[r][t]);
                    acc[r][t] = q4_1_step(acc[r][t], dd[r][t][k], qx[r], qy[t]);
                }
            }
        }
    }
    // The last n % 8 blocks (two of a 576-column row), converted one by one.
    for i in full..n {
        let qy = xs.map(|x| q8_0_quants(&x.q8_0[i]));
        for r in 0..R {
            let b = &w[r][i];
            let (d, m) = (fp16_to_f32(u16::from_le_bytes(b.d)), fp16_to_f32(u16::from_le_bytes(b.m)));
            let qx = q4_1_nibbles(b);
            for t in 0..T {
                summs[r][t] = m.mul_add(xs[t].q8_0_s[i], summs[r][t]);
                acc[r][t] = q4_1_step(acc[r][t], d * xs[t].q8_0_d[i], qx, qy[t]);
            }
        }
    }
    let mut out = [[0.0f32; T]; R];
    for r in 0..R {
        for t in 0..T {
            out[r][t] = hsum_f32x8(acc[r][t]) + summs[r][t];
        }
    }
    out
}
