// AVX2 Q4_K x Q8_K dot with the float operation order of llama.cpp's AVX2 path for Q4_K weights
// (the repacked ggml_gemv_q4_K_8x8_q8_K, which llama.cpp uses on AVX2 CPUs for every Q4_K matrix
// with a multiple of 8 rows): per super-block the exact integers S = sum_j sc_j * (q . x_q) and
// M = sum_j m_j * bsum32_j, then acc = fma(f32(S), d*d_x, acc), acc_m = fma(f32(M), dmin*d_x,
// acc_m), result = acc - acc_m. The integer parts are formed with ggml's vec_dot_q4_K_q8_K
// instructions (utmp scale unpacking, maddubs/madd, hadd of the bsums) and reduced per block.
// The four-token prefill kernel (the gemm's order) is avx2_dot4.rs (the avx2 realization's
// `with`; the avx512 one replaces it with its tile).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

// The eight 6-bit scales then the eight 6-bit mins of a block as 16 x i16 (ggml's utmp
// unpacking of get_scale_min_k4).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn q4_k_scales_mins(s: &[u8; 12]) -> __m256i {
    const KMASK1: u32 = 0x3f3f3f3f;
    const KMASK2: u32 = 0x0f0f0f0f;
    const KMASK3: u32 = 0x03030303;
    let mut u0 = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    let mut u1 = u32::from_le_bytes([s[4], s[5], s[6], s[7]]);
    let mut u2 = u32::from_le_bytes([s[8], s[9], s[10], s[11]]);
    let u3 = ((u2 >> 4) & KMASK2) | (((u1 >> 6) & KMASK3) << 4);
    let uaux = u1 & KMASK1;
    u1 = (u2 & KMASK2) | (((u0 >> 6) & KMASK3) << 4);
    u2 = uaux;
    u0 &= KMASK1;
    _mm256_cvtepu8_epi16(_mm_set_epi32(u3 as i32, u2 as i32, u1 as i32, u0 as i32))
}

// [d, dmin] of a block (adjacent f16 fields) as f32, exactly, in lanes 0 and 1.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn q4_k_d_dmin(b: &BlockQ4K) -> __m128 {
    let dh = _mm_cvtsi32_si128(i32::from_le_bytes([b.d[0], b.d[1], b.dmin[0], b.dmin[1]]));
    _mm256_castps256_ps128(f16x8_to_f32(dh))
}

/// row . x for a Q4_K row; reads x's Q8_K form. Requires AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot_q4_k_avx2(row: &[u8], x: &Act) -> f32 {
    let w = q4_k_blocks(row);
    let a = &x.q8_k[..];
    assert_eq!(w.len(), a.len(), "Q4_K row of {} blocks for a Q8_K activation of {} blocks", w.len(), a.len());
    assert_eq!(a.len() * 256, x.f32.len(), "activation lacks its Q8_K form");
    let m4 = _mm256_set1_epi8(0x0F);
    // Lane 0 accumulates f32(S) * (d * d_x), lane 1 f32(M) * (dmin * d_x): two independent
    // fma chains, lane by lane the same arithmetic as two scalar fmas.
    let mut acc = _mm_setzero_ps();
    for (b, y) in w.iter().zip(a) {
        // [d, dmin] times d_x; 16 x i16: scales 0..8 then mins 0..8.
        let dd = _mm_mul_ps(q4_k_d_dmin(b), _mm_set1_ps(y.d));
        let mins_and_scales = q4_k_scales_mins(&b.scales);

        let q8sums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
        let q8s = _mm_hadd_epi16(_mm256_castsi256_si128(q8sums), _mm256_extracti128_si256(q8sums, 1));
        let prod = _mm_madd_epi16(_mm256_extracti128_si256(mins_and_scales, 1), q8s);

        let sc128 = _mm256_castsi256_si128(mins_and_scales);
        let scales = _mm256_set_m128i(sc128, sc128);
        let q4 = b.qs.as_ptr();
        let q8 = y.qs.as_ptr();
        let mut sumi = _mm256_setzero_si256();
        for j in 0..4 {
            // Broadcast the i16 scales 2j and 2j+1.
            let scale_l = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(((4 * j + 1) << 8 | (4 * j)) as i16));
            let scale_h = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(((4 * j + 3) << 8 | (4 * j + 2)) as i16));
            let q4bits = _mm256_loadu_si256(q4.add(32 * j) as *const __m256i);
            let q4l = _mm256_and_si256(q4bits, m4);
            let q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
            let q8l = _mm256_loadu_si256(q8.add(64 * j) as *const __m256i);
            let p16l = _mm256_madd_epi16(scale_l, _mm256_maddubs_epi16(q4l, q8l));
            let q8h = _mm256_loadu_si256(q8.add(64 * j + 32) as *const __m256i);
            let p16h = _mm256_madd_epi16(scale_h, _mm256_maddubs_epi16(q4h, q8h));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16l, p16h));
        }
        // [S, M, S, M]: exact integer reductions of the scales and mins terms.
        let s4 = _mm_add_epi32(_mm256_castsi256_si128(sumi), _mm256_extracti128_si256(sumi, 1));
        let sm = _mm_hadd_epi32(s4, prod);
        let sm = _mm_hadd_epi32(sm, sm);
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(sm), dd, acc);
    }
    _mm_cvtss_f32(_mm_sub_ss(acc, _mm_movehdup_ps(acc)))
}
