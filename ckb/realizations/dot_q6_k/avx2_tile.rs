// AVX2 tiled Q6_K prefill kernel in the block order: eight rows decoded together, their quants
// (as q + 32, unsigned) interleaved four at a time, so one maddubs serves the eight rows of a
// token (a row per i32 lane); a super-block's sum is exact in integers before its one fma.
// The decoder (decode8_q6_k_avx2) and the kernel's float part (dot8x4_q6_k) are in avx2.rs,
// shared with the avx512 realization's VNNI form of this tile.

/// rows[r] . xs[t] for eight rows decoded by decode8_q6_k_avx2 (avx2.rs) and four activations
/// (prefill): dot8x4_q6_k with one maddubs per quant group and token serving the eight rows, two
/// groups summed in i16 (|sum| <= 2 * 2 * 63 * 127 < 2^15) before madd with the scales. Requires
/// AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot8x4_q6_k_avx2(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 8] {
    dot8x4_q6_k(rows, xs, |base, y| unsafe {
        let mut s = [_mm256_setzero_si256(); 4];
        for sb in 0..16 {
            let scv = _mm256_load_si256(base.add(2048 + 32 * sb) as *const __m256i);
            for half in 0..2 {
                let g = 4 * sb + 2 * half;
                let (w0, w1) = (_mm256_load_si256(base.add(32 * g) as *const __m256i), _mm256_load_si256(base.add(32 * g + 32) as *const __m256i));
                for t in 0..4 {
                    let (y0, y1) = (bcast4(y[t].qs.as_ptr().add(4 * g)), bcast4(y[t].qs.as_ptr().add(4 * g + 4)));
                    let sum = _mm256_add_epi16(_mm256_maddubs_epi16(w0, y0), _mm256_maddubs_epi16(w1, y1));
                    s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(sum, scv));
                }
            }
        }
        s
    })
}
