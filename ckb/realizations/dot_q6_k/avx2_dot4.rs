// AVX2 four-token Q6_K prefill kernel over the helpers of avx2.rs: each super-block's quants
// and scales are rebuilt once for four tokens.

/// row . xs[t] for a Q6_K row and four activations (prefill): each super-block's 6-bit quants
/// and scales are unpacked once and dotted with the four tokens. The integer sums are exact (so
/// their order is free); per token the float operations (d = d_x * d_w, one fma per
/// super-block, the final reduction) are those of dot_q6_k_avx2 in the same order, so result t
/// is bitwise dot_q6_k_avx2(row, xs[t]). Requires AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot4_q6_k_avx2(row: &[u8], xs: [&Act; 4]) -> [f32; 4] {
    let w = q6_k_blocks(row);
    for x in xs {
        assert_eq!(w.len(), x.q8_k.len(), "Q6_K row of {} blocks for a Q8_K activation of {} blocks", w.len(), x.q8_k.len());
        assert_eq!(x.q8_k.len() * 256, x.f32.len(), "activation lacks its Q8_K form");
    }
    let (a0, a1, a2, a3) = (&xs[0].q8_k[..], &xs[1].q8_k[..], &xs[2].q8_k[..], &xs[3].q8_k[..]);
    let mut acc = [_mm256_setzero_ps(); 4];
    for (i, b) in w.iter().enumerate() {
        let ys = [&a0[i], &a1[i], &a2[i], &a3[i]];
        let wd = fp16_to_f32(u16::from_le_bytes(b.d));
        let scales = _mm_loadu_si128(b.scales.as_ptr() as *const __m128i);
        let mut sumi = [_mm256_setzero_si256(); 4];
        for k in 0..8 {
            let (q, sc) = (q6_k_quants(b, k), q6_k_scale_pair(scales, k as i64));
            for t in 0..4 {
                let q8 = _mm256_loadu_si256(ys[t].qs.as_ptr().add(32 * k) as *const __m256i);
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(sc, _mm256_maddubs_epi16(q, q8)));
            }
        }
        let sc16 = _mm256_cvtepi8_epi16(scales);
        for t in 0..4 {
            let y = ys[t];
            let d = y.d * wd;
            let q8sums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
            let q8sclsub = _mm256_slli_epi32(_mm256_madd_epi16(q8sums, sc16), 5);
            let s = _mm256_sub_epi32(sumi[t], q8sclsub);
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(s), acc[t]);
        }
    }
    [hsum_f32x8(acc[0]), hsum_f32x8(acc[1]), hsum_f32x8(acc[2]), hsum_f32x8(acc[3])]
}
