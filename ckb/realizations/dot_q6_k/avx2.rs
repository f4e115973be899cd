// AVX2 Q6_K x Q8_K dot, the operation order of ggml's current AVX2 ggml_vec_dot_q6_K_q8_K: per
// half (128 values) the unsigned 6-bit quants are rebuilt from ql/qh, multiplied with the Q8_K
// quants by maddubs and pairwise with the per-16 scales by madd into eight i32 lanes; the -32
// offset is taken off per lane as 32 * (bsums . scales) (madd of bsums with the scales); per
// super-block one fma by d_x*d into eight f32 lanes, reduced at the end. Integer parts are exact;
// the lane split is ggml's, so the result is bitwise that of llama.cpp's AVX2 path. Prefill goes
// through the 8 x 4 tile of avx2_tile.rs in the block order (the avx2 realization's `with`; the
// avx512 one replaces it with its VNNI 2 x 4 tile in this order).

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

// Values 32k..32k + 32 (k < 8) of a block as unsigned 6-bit quants, rebuilt from ql and qh as
// ggml's AVX2 kernel does (for k in a loop that unrolls, the shifts are constants).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn q6_k_quants(b: &BlockQ6K, k: usize) -> __m256i {
    let (h, j) = (k / 4, k % 4);
    let lo = _mm256_loadu_si256(b.ql.as_ptr().add(64 * h + 32 * (j % 2)) as *const __m256i);
    let hi = _mm256_loadu_si256(b.qh.as_ptr().add(32 * h) as *const __m256i);
    let lo = _mm256_and_si256(_mm256_srl_epi16(lo, _mm_cvtsi32_si128(4 * (j / 2) as i32)), _mm256_set1_epi8(0x0F));
    let hi = _mm256_and_si256(_mm256_srl_epi16(hi, _mm_cvtsi32_si128(2 * j as i32)), _mm256_set1_epi8(3));
    _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4))
}

/// row . x for a Q6_K row; reads x's Q8_K form. Requires AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot_q6_k_avx2(row: &[u8], x: &Act) -> f32 {
    let w = q6_k_blocks(row);
    let a = &x.q8_k[..];
    assert_eq!(w.len(), a.len(), "Q6_K row of {} blocks for a Q8_K activation of {} blocks", w.len(), a.len());
    assert_eq!(a.len() * 256, x.f32.len(), "activation lacks its Q8_K form");
    let mut acc = _mm256_setzero_ps();
    for (b, y) in w.iter().zip(a) {
        let d = y.d * fp16_to_f32(u16::from_le_bytes(b.d));
        let scales = _mm_loadu_si128(b.scales.as_ptr() as *const __m128i);
        let q8sums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
        let q8sclsub = _mm256_slli_epi32(_mm256_madd_epi16(q8sums, _mm256_cvtepi8_epi16(scales)), 5);
        let mut sumi = _mm256_setzero_si256();
        for k in 0..8 {
            // Unsigned 6-bit quants (< 64) times signed q8: pair sums fit i16 without saturation.
            let q = q6_k_quants(b, k);
            let q8 = _mm256_loadu_si256(y.qs.as_ptr().add(32 * k) as *const __m256i);
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(q6_k_scale_pair(scales, k as i64), _mm256_maddubs_epi16(q, q8)));
        }
        sumi = _mm256_sub_epi32(sumi, q8sclsub);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_f32x8(acc)
}
