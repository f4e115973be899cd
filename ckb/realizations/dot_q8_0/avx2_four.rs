// The AVX2 four-token Q8_0 kernel (prefill and batched steps of the avx2 realization; the avx512
// one has 8 x 4 tiles instead): each weight block dotted with four tokens in ggml's order.

/// row . xs[t] for a Q8_0 row and four activations (prefill): each weight block is loaded
/// (and its |w| formed) once and dotted with the four tokens; per token the float operations
/// are those of dot_q8_0_avx2 in the same order, so result t is bitwise dot_q8_0_avx2(row, xs[t]).
/// Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot4_q8_0_avx2(row: &[u8], xs: [&Act; 4]) -> [f32; 4] {
    let w = q8_0_blocks(row);
    for x in xs {
        assert_eq!(w.len(), x.q8_0.len(), "Q8_0 row of {} blocks for a Q8_0 activation of {} blocks", w.len(), x.q8_0.len());
        assert!(x.q8_0.len() * 32 == x.f32.len() && x.q8_0_d.len() == x.q8_0.len(), "activation lacks its Q8_0 form");
    }
    let mut acc = [_mm256_setzero_ps(); 4];
    let ones = _mm256_set1_epi16(1);
    let mut dd = [[0f32; 8]; 4]; // [token][block of the group]: d_w * d_x, parked on the stack
    for (g, wb) in w.chunks(8).enumerate() {
        let wd = f16x8_scales(wb.len(), |k| wb[k].d);
        for t in 0..4 {
            _mm256_storeu_ps(dd[t].as_mut_ptr(), _mm256_mul_ps(wd, f32x8_head(&xs[t].q8_0_d[8 * g..8 * g + wb.len()])));
        }
        for (k, b) in wb.iter().enumerate() {
            let qx = _mm256_loadu_si256(b.qs.as_ptr() as *const __m256i);
            let ax = _mm256_sign_epi8(qx, qx);
            for t in 0..4 {
                let qy = _mm256_loadu_si256(xs[t].q8_0[8 * g + k].qs.as_ptr() as *const __m256i);
                let p = _mm256_cvtepi32_ps(_mm256_madd_epi16(ones, _mm256_maddubs_epi16(ax, _mm256_sign_epi8(qy, qx))));
                acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dd[t][k]), p, acc[t]);
            }
        }
    }
    hsum_f32x8_rows(acc)
}
