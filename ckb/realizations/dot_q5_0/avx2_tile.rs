// AVX2 tiled Q5_0 prefill kernel over rows decoded by decode_q5_0_avx2 (avx2.rs): 2 rows x 4
// tokens per call, each decoded block loaded once for the four tokens and each activation block
// once for the two rows.

/// rows[i] . xs[t] for a row pair decoded by decode_q5_0_avx2 and four activations (prefill): a
/// 2 x 4 register tile, each decoded block loaded once for the four tokens and each activation
/// block once for the two rows. Per pair the float operations are those of dot_q5_0_avx2 in
/// the same order, so result [i][t] is bitwise dot_q5_0_avx2(row i, xs[t]). Requires AVX2 and
/// FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot2x4_q5_0_avx2(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 2] {
    let n = q5_0_tile_blocks(rows, xs, 2, 2);
    let (d0, d1) = rows.d.split_at(n);
    let mut acc = [[_mm256_setzero_ps(); 4]; 2];
    // The scale products of eight blocks, parked on the stack and broadcast block by block.
    let mut dd = [[[0f32; 8]; 4]; 2];
    let ones = _mm256_set1_epi16(1);
    let mut g = 0;
    while g < n {
        let e = (g + 8).min(n);
        let wd0 = f32x8_head(&d0[g..e]);
        let wd1 = f32x8_head(&d1[g..e]);
        for t in 0..4 {
            let xd = f32x8_head(&xs[t].q8_0_d[g..e]);
            _mm256_storeu_ps(dd[0][t].as_mut_ptr(), _mm256_mul_ps(wd0, xd));
            _mm256_storeu_ps(dd[1][t].as_mut_ptr(), _mm256_mul_ps(wd1, xd));
        }
        for k in g..e {
            // SAFETY (indexing): k < n and 2k + 1 < 2n, the lengths of the slices indexed
            // (q5_0_tile_blocks). Aligned loads: a DecLine is 64-byte aligned, q then |q|.
            let (b0, b1) = (rows.b.get_unchecked(2 * k).0.as_ptr(), rows.b.get_unchecked(2 * k + 1).0.as_ptr());
            let (qx0, ax0) = (_mm256_load_si256(b0 as *const __m256i), _mm256_load_si256(b0.add(32) as *const __m256i));
            let (qx1, ax1) = (_mm256_load_si256(b1 as *const __m256i), _mm256_load_si256(b1.add(32) as *const __m256i));
            for t in 0..4 {
                let qy = _mm256_loadu_si256(xs[t].q8_0.get_unchecked(k).qs.as_ptr() as *const __m256i);
                let p0 = _mm256_cvtepi32_ps(_mm256_madd_epi16(ones, _mm256_maddubs_epi16(ax0, _mm256_sign_epi8(qy, qx0))));
                acc[0][t] = _mm256_fmadd_ps(_mm256_broadcast_ss(dd[0][t].get_unchecked(k - g)), p0, acc[0][t]);
                let p1 = _mm256_cvtepi32_ps(_mm256_madd_epi16(ones, _mm256_maddubs_epi16(ax1, _mm256_sign_epi8(qy, qx1))));
                acc[1][t] = _mm256_fmadd_ps(_mm256_broadcast_ss(dd[1][t].get_unchecked(k - g)), p1, acc[1][t]);
            }
        }
        g = e;
    }
    // Written out: a closure here would not inherit the target features (acc kept in memory).
    let [a, b] = acc;
    [
        [hsum_f32x8(a[0]), hsum_f32x8(a[1]), hsum_f32x8(a[2]), hsum_f32x8(a[3])],
        [hsum_f32x8(b[0]), hsum_f32x8(b[1]), hsum_f32x8(b[2]), hsum_f32x8(b[3])],
    ]
}
