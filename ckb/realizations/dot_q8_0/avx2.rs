// AVX2 Q8_0 x Q8_0 dot, the operation order of ggml's AVX2 ggml_vec_dot_q8_0_q8_0: per block the
// 32 products are summed pairwise into eight i32 lanes (maddubs on |w| and sign-adjusted x, then
// madd), converted to f32 and accumulated with one fma by d_w*d_x into eight f32 lanes; the lanes
// are reduced at the end (hsum_float_8). The scales of eight blocks are converted and multiplied at once
// (F16C, the activation's scales precomputed as f32); the fma chain keeps
// ggml's block order, so the result is bitwise that of llama.cpp's AVX2 path.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// row . x for a Q8_0 row; reads x's Q8_0 form. Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q8_0_avx2(row: &[u8], x: &Act) -> f32 {
    dot_rows_q8_0([row], x, |qx, qy, _| unsafe { mul_sum_i8_pairs_float(qx, qy) })[0]
}

/// The gemv's four-row form (`dot_rows4` in the dispatch): dot_rows_q8_0 of four rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_rows4_q8_0_avx2(rows: [&[u8]; 4], x: &Act) -> [f32; 4] {
    dot_rows_q8_0(rows, x, |qx, qy, _| unsafe { mul_sum_i8_pairs_float(qx, qy) })
}

/// rows[r] . x for N Q8_0 rows (the gemv takes four at a time: each activation block is loaded
/// once for the four, one call and one reduction serve them); per row the operations and their
/// order are those of one row, so rows[r]'s result is bitwise dot_q8_0_avx2(rows[r], x).
/// `sums(w's quants, y's quants, the block's index)` gives the block's eight lane sums Σ w * y
/// over four quants, exactly, as f32: ggml's mul_sum_i8_pairs_float here, a vpdpbusd in
/// avx512.rs. Inlined into its callers, whose instruction sets it uses.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn dot_rows_q8_0<const N: usize>(rows: [&[u8]; N], x: &Act, sums: impl Fn(__m256i, __m256i, usize) -> __m256) -> [f32; N] {
    let w = rows.map(q8_0_blocks);
    let (a, ad) = (&x.q8_0[..], &x.q8_0_d[..]);
    for w in &w {
        assert_eq!(w.len(), a.len(), "Q8_0 row of {} blocks for a Q8_0 activation of {} blocks", w.len(), a.len());
    }
    assert!(a.len() * 32 == x.f32.len() && ad.len() == a.len() && x.q8_0_neg16.len() == a.len(), "activation lacks its Q8_0 form");
    let mut acc = [_mm256_setzero_ps(); N];
    // Eight blocks per step: their eight scale products are formed at once and parked on the
    // stack, then broadcast from there block by block (a load rather than a lane permute on the
    // vector ports); each row's fma chain is in block order.
    let mut dd = [[0f32; 8]; N];
    for (g, (ab, adb)) in a.chunks(8).zip(ad.chunks(8)).enumerate() {
        let (xd, n) = (f32x8_head(adb), ab.len());
        for r in 0..N {
            let wb = &w[r][8 * g..8 * g + n];
            _mm256_storeu_ps(dd[r].as_mut_ptr(), _mm256_mul_ps(f16x8_scales(n, |k| wb[k].d), xd));
        }
        for (k, y) in ab.iter().enumerate() {
            let qy = _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i);
            for r in 0..N {
                let qx = _mm256_loadu_si256(w[r][8 * g + k].qs.as_ptr() as *const __m256i);
                acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dd[r][k]), sums(qx, qy, 8 * g + k), acc[r]);
            }
        }
    }
    hsum_f32x8_rows(acc)
}
