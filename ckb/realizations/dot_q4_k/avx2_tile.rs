// AVX2 tiled Q4_K prefill kernel in the float order of llama.cpp's repacked gemm
// (ggml_gemm_q4_K_8x8_q8_K), laid out as that gemm lays out its weights: eight rows decoded
// together, their 4-bit quants interleaved four at a time, so one maddubs serves the eight rows
// of a token (a row per i32 lane) and the per-pair sums come out per row without horizontal adds.
// The decoder (decode8_q4_k_avx2) and the kernel's float part (dot8x4_q4_k) are in avx2.rs,
// shared with the avx512 realization's VNNI form of this tile.

/// rows[r] . xs[t] for eight rows decoded by decode8_q4_k_avx2 (avx2.rs) and four activations
/// (prefill): dot8x4_q4_k with S_p from one maddubs per quant group and token serving the eight
/// rows, the eight groups of a sub-block summed in i16 (|sum| <= 8 * 2 * 15 * 127 < 2^15) before
/// madd with the scales. Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot8x4_q4_k_avx2(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 8] {
    dot8x4_q4_k(rows, xs, |base, y, p| unsafe {
        let mut s = [_mm256_setzero_si256(); 4];
        for j in [2 * p, 2 * p + 1] {
            let mut sum = [_mm256_setzero_si256(); 4];
            for g in 8 * j..8 * j + 8 {
                let wq = _mm256_load_si256(base.add(32 * g) as *const __m256i);
                for t in 0..4 {
                    sum[t] = _mm256_add_epi16(sum[t], _mm256_maddubs_epi16(wq, bcast4(y[t].qs.as_ptr().add(4 * g))));
                }
            }
            let scv = _mm256_load_si256(base.add(2048 + 32 * j) as *const __m256i);
            for t in 0..4 {
                s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(sum[t], scv));
            }
        }
        s.map(|s| _mm256_cvtepi32_ps(s))
    })
}
