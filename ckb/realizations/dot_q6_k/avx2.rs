// AVX2 Q6_K x Q8_K dot, the operation order of ggml's current AVX2 ggml_vec_dot_q6_K_q8_K: per
// half (128 values) the unsigned 6-bit quants are rebuilt from ql/qh, multiplied with the Q8_K
// quants by maddubs and pairwise with the per-16 scales by madd into eight i32 lanes; the -32
// offset is taken off per lane as 32 * (bsums . scales) (madd of bsums with the scales); per
// super-block one fma by d_x*d into eight f32 lanes, reduced at the end. Integer parts are exact;
// the lane split is ggml's, so the result is bitwise that of llama.cpp's AVX2 path.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

// i16 x 16 of scales[2i] (x8) and scales[2i+1] (x8).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn q6_k_scale_pair(scales: __m128i, i: i64) -> __m256i {
    let shuf = _mm_set_epi64x(0x0101010101010101 * (2 * i + 1), 0x0101010101010101 * (2 * i));
    _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, shuf))
}

/// row . x for a Q6_K row; reads x's Q8_K form. Requires AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot_q6_k_avx2(row: &[u8], x: &Act) -> f32 {
    let w = q6_k_blocks(row);
    let a = &x.q8_k[..];
    assert_eq!(w.len(), a.len(), "Q6_K row of {} blocks for a Q8_K activation of {} blocks", w.len(), a.len());
    assert_eq!(a.len() * 256, x.f32.len(), "activation lacks its Q8_K form");
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(3);
    let mut acc = _mm256_setzero_ps();
    for (b, y) in w.iter().zip(a) {
        let d = y.d * fp16_to_f32(u16::from_le_bytes(b.d));
        let scales = _mm_loadu_si128(b.scales.as_ptr() as *const __m128i);
        let q8sums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
        let q8sclsub = _mm256_slli_epi32(_mm256_madd_epi16(q8sums, _mm256_cvtepi8_epi16(scales)), 5);
        let mut sumi = _mm256_setzero_si256();
        for h in 0..2usize {
            let q4 = b.ql.as_ptr().add(64 * h);
            let qh = b.qh.as_ptr().add(32 * h);
            let q8 = y.qs.as_ptr().add(128 * h);
            let is = 4 * h as i64;

            let q4bits1 = _mm256_loadu_si256(q4 as *const __m256i);
            let q4bits2 = _mm256_loadu_si256(q4.add(32) as *const __m256i);
            let q4bits_h = _mm256_loadu_si256(qh as *const __m256i);
            let q4h_0 = _mm256_slli_epi16(_mm256_and_si256(q4bits_h, m2), 4);
            let q4h_1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q4bits_h, 2), m2), 4);
            let q4h_2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q4bits_h, 4), m2), 4);
            let q4h_3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q4bits_h, 6), m2), 4);
            let q4_0 = _mm256_or_si256(_mm256_and_si256(q4bits1, m4), q4h_0);
            let q4_1 = _mm256_or_si256(_mm256_and_si256(q4bits2, m4), q4h_1);
            let q4_2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits1, 4), m4), q4h_2);
            let q4_3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits2, 4), m4), q4h_3);

            let q8_0 = _mm256_loadu_si256(q8 as *const __m256i);
            let q8_1 = _mm256_loadu_si256(q8.add(32) as *const __m256i);
            let q8_2 = _mm256_loadu_si256(q8.add(64) as *const __m256i);
            let q8_3 = _mm256_loadu_si256(q8.add(96) as *const __m256i);

            // Unsigned 6-bit quants (< 64) times signed q8: pair sums fit i16 without saturation.
            let p16_0 = _mm256_madd_epi16(q6_k_scale_pair(scales, is), _mm256_maddubs_epi16(q4_0, q8_0));
            let p16_1 = _mm256_madd_epi16(q6_k_scale_pair(scales, is + 1), _mm256_maddubs_epi16(q4_1, q8_1));
            let p16_2 = _mm256_madd_epi16(q6_k_scale_pair(scales, is + 2), _mm256_maddubs_epi16(q4_2, q8_2));
            let p16_3 = _mm256_madd_epi16(q6_k_scale_pair(scales, is + 3), _mm256_maddubs_epi16(q4_3, q8_3));

            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16_0, p16_1));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16_2, p16_3));
        }
        sumi = _mm256_sub_epi32(sumi, q8sclsub);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_f32x8(acc)
}

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
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(3);
    let mut acc = [_mm256_setzero_ps(); 4];
    for (i, b) in w.iter().enumerate() {
        let ys = [&a0[i], &a1[i], &a2[i], &a3[i]];
        let wd = fp16_to_f32(u16::from_le_bytes(b.d));
        let scales = _mm_loadu_si128(b.scales.as_ptr() as *const __m128i);
        let mut sumi = [_mm256_setzero_si256(); 4];
        for h in 0..2usize {
            let q4 = b.ql.as_ptr().add(64 * h);
            let qh = b.qh.as_ptr().add(32 * h);
            let is = 4 * h as i64;
            let q4bits1 = _mm256_loadu_si256(q4 as *const __m256i);
            let q4bits2 = _mm256_loadu_si256(q4.add(32) as *const __m256i);
            let q4bits_h = _mm256_loadu_si256(qh as *const __m256i);
            for j in 0..4usize {
                let (lo, sh) = match j {
                    0 => (_mm256_and_si256(q4bits1, m4), q4bits_h),
                    1 => (_mm256_and_si256(q4bits2, m4), _mm256_srli_epi16(q4bits_h, 2)),
                    2 => (_mm256_and_si256(_mm256_srli_epi16(q4bits1, 4), m4), _mm256_srli_epi16(q4bits_h, 4)),
                    _ => (_mm256_and_si256(_mm256_srli_epi16(q4bits2, 4), m4), _mm256_srli_epi16(q4bits_h, 6)),
                };
                let q = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(sh, m2), 4));
                let sc = q6_k_scale_pair(scales, is + j as i64);
                for t in 0..4 {
                    let q8 = _mm256_loadu_si256(ys[t].qs.as_ptr().add(128 * h + 32 * j) as *const __m256i);
                    sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(sc, _mm256_maddubs_epi16(q, q8)));
                }
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
