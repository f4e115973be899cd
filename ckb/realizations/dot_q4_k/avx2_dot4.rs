// AVX2 four-token Q4_K prefill kernel over the helpers of avx2.rs, in the float order of
// llama.cpp's repacked gemm.

/// row . xs[t] for four activations with the float operation order of llama.cpp's AVX2 gemm for
/// repacked Q4_K weights (ggml_gemm_q4_K_8x8_q8_K, used for each group of four tokens of a
/// prefill): per super-block and per pair of sub-blocks p (0..4) the exact integers
/// S_p = sc_2p * (q . x_q)_2p + sc_2p+1 * (q . x_q)_2p+1 and M_p = m_2p * bsum32_2p +
/// m_2p+1 * bsum32_2p+1, then acc = fma(f32(S_p), d*d_x, acc), acc_m = fma(f32(M_p),
/// dmin*d_x, acc_m) in that order (four steps per super-block, not one as in the gemv);
/// result = acc - acc_m. Lane t of the float accumulators is token t. Requires AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot4_q4_k_avx2(row: &[u8], xs: [&Act; 4]) -> [f32; 4] {
    let w = q4_k_blocks(row);
    for x in xs {
        assert_eq!(w.len(), x.q8_k.len(), "Q4_K row of {} blocks for a Q8_K activation of {} blocks", w.len(), x.q8_k.len());
        assert_eq!(x.q8_k.len() * 256, x.f32.len(), "activation lacks its Q8_K form");
    }
    let a = [&xs[0].q8_k[..], &xs[1].q8_k[..], &xs[2].q8_k[..], &xs[3].q8_k[..]];
    let m4 = _mm256_set1_epi8(0x0F);
    let mut acc = _mm_setzero_ps();
    let mut acc_m = _mm_setzero_ps();
    for (i, b) in w.iter().enumerate() {
        // [d, dmin], each times the four tokens' d_x (one rounding, as d*d_x); 16 x i16: scales
        // 0..8 then mins 0..8.
        let dw = q4_k_d_dmin(b);
        let dx = _mm_set_ps(a[3][i].d, a[2][i].d, a[1][i].d, a[0][i].d);
        let dd = _mm_mul_ps(_mm_shuffle_ps::<0x00>(dw, dw), dx);
        let dm = _mm_mul_ps(_mm_shuffle_ps::<0x55>(dw, dw), dx);
        let mins_and_scales = q4_k_scales_mins(&b.scales);
        let mins = _mm256_extracti128_si256(mins_and_scales, 1);
        let sc128 = _mm256_castsi256_si128(mins_and_scales);
        let scales = _mm256_set_m128i(sc128, sc128);
        let mut scale_l = [_mm256_setzero_si256(); 4];
        let mut scale_h = [_mm256_setzero_si256(); 4];
        for j in 0..4 {
            // The i16 scales 2j and 2j+1, broadcast.
            scale_l[j] = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(((4 * j + 1) << 8 | (4 * j)) as i16));
            scale_h[j] = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(((4 * j + 3) << 8 | (4 * j + 2)) as i16));
        }
        let q4 = b.qs.as_ptr();
        // Per token t: [S_0, S_1, S_2, S_3] and [M_0, M_1, M_2, M_3] (exact i32).
        let mut sv = [_mm_setzero_si128(); 4];
        let mut mv = [_mm_setzero_si128(); 4];
        for t in 0..4 {
            let y = &a[t][i];
            let q8 = y.qs.as_ptr();
            let mut p = [_mm256_setzero_si256(); 4];
            for j in 0..4 {
                let q4bits = _mm256_loadu_si256(q4.add(32 * j) as *const __m256i);
                let q4l = _mm256_and_si256(q4bits, m4);
                let q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
                let q8l = _mm256_loadu_si256(q8.add(64 * j) as *const __m256i);
                let q8h = _mm256_loadu_si256(q8.add(64 * j + 32) as *const __m256i);
                let p16l = _mm256_madd_epi16(scale_l[j], _mm256_maddubs_epi16(q4l, q8l));
                let p16h = _mm256_madd_epi16(scale_h[j], _mm256_maddubs_epi16(q4h, q8h));
                p[j] = _mm256_add_epi32(p16l, p16h);
            }
            let h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
            sv[t] = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            let q8sums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
            let q8s = _mm_hadd_epi16(_mm256_castsi256_si128(q8sums), _mm256_extracti128_si256(q8sums, 1));
            mv[t] = _mm_madd_epi16(mins, q8s);
        }
        // Transpose so that vector p holds pair p of the four tokens, then the fma chains.
        let st = q4_k_transpose4(sv);
        let mt = q4_k_transpose4(mv);
        for p in 0..4 {
            acc = _mm_fmadd_ps(_mm_cvtepi32_ps(st[p]), dd, acc);
            acc_m = _mm_fmadd_ps(_mm_cvtepi32_ps(mt[p]), dm, acc_m);
        }
    }
    let mut out = [0f32; 4];
    _mm_storeu_ps(out.as_mut_ptr(), _mm_sub_ps(acc, acc_m));
    out
}

// 4 x 4 transpose of i32 lanes: out[p][t] = r[t][p].
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn q4_k_transpose4(r: [__m128i; 4]) -> [__m128i; 4] {
    let t0 = _mm_unpacklo_epi32(r[0], r[1]);
    let t1 = _mm_unpacklo_epi32(r[2], r[3]);
    let t2 = _mm_unpackhi_epi32(r[0], r[1]);
    let t3 = _mm_unpackhi_epi32(r[2], r[3]);
    [_mm_unpacklo_epi64(t0, t1), _mm_unpackhi_epi64(t0, t1), _mm_unpacklo_epi64(t2, t3), _mm_unpackhi_epi64(t2, t3)]
}
