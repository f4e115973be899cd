// AVX-512 VNNI tiled Q5_0 prefill kernel (256-bit, so it also pays on cores that split 512-bit
// operations, as Zen 4 does; a 512-bit form packing both rows in one register measured only
// 1.05-1.09x over AVX2 there, this one 1.24-1.32x). vpdpbusd sums the four u8 x s8 products of
// each i32 lane exactly as ggml's maddubs + madd do (|q| <= 16, |y| <= 127: no saturation), so
// the lane sums, the scale products and the fma chain are those of dot_q5_0_avx2. The decoder,
// the single-row dot and the scale helpers come from avx2.rs.

/// rows[i] . xs[t] for two rows decoded by decode_q5_0_avx2 and four activations (prefill), as
/// dot2x4_q5_0_avx2 but with one vpdpbusd per (row, token, block) in place of maddubs + madd:
/// result [i][t] is bitwise dot_q5_0_avx2(row i, xs[t]). Requires AVX2, FMA and AVX-512 VL +
/// VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot2x4_q5_0_avx512(rows: [&DecRow; 2], xs: [&Act; 4]) -> [[f32; 4]; 2] {
    let n = q5_0_tile_blocks(rows, xs);
    let (r0, r1) = (rows[0], rows[1]);
    let mut acc = [[_mm256_setzero_ps(); 4]; 2];
    // The scale products of eight blocks, parked on the stack and broadcast block by block.
    let mut dd = [[[0f32; 8]; 4]; 2];
    let zero = _mm256_setzero_si256();
    let mut g = 0;
    while g < n {
        let e = (g + 8).min(n);
        let wd0 = q5_0_xscales8(&r0.d[g..e]);
        let wd1 = q5_0_xscales8(&r1.d[g..e]);
        for t in 0..4 {
            let xd = q5_0_xscales8(&xs[t].q8_0_d[g..e]);
            _mm256_storeu_ps(dd[0][t].as_mut_ptr(), _mm256_mul_ps(wd0, xd));
            _mm256_storeu_ps(dd[1][t].as_mut_ptr(), _mm256_mul_ps(wd1, xd));
        }
        for k in g..e {
            // SAFETY (indexing): k < n, the length of every slice indexed (q5_0_tile_blocks).
            // Aligned loads: a DecBlock is one 64-byte line, q then a.
            let (b0, b1) = (r0.b.get_unchecked(k), r1.b.get_unchecked(k));
            let (qx0, ax0) = (_mm256_load_si256(b0.q.as_ptr() as *const __m256i), _mm256_load_si256(b0.a.as_ptr() as *const __m256i));
            let (qx1, ax1) = (_mm256_load_si256(b1.q.as_ptr() as *const __m256i), _mm256_load_si256(b1.a.as_ptr() as *const __m256i));
            for t in 0..4 {
                let qy = _mm256_loadu_si256(xs[t].q8_0.get_unchecked(k).qs.as_ptr() as *const __m256i);
                let p0 = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(zero, ax0, _mm256_sign_epi8(qy, qx0)));
                acc[0][t] = _mm256_fmadd_ps(_mm256_broadcast_ss(dd[0][t].get_unchecked(k - g)), p0, acc[0][t]);
                let p1 = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(zero, ax1, _mm256_sign_epi8(qy, qx1)));
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
