// AVX-512 VNNI Q6_K kernel for prefill and batched steps: the AVX2 realization's 8 x 4 tile in
// the block order (eight rows interleaved four quants at a time, as q + 32: decode8_q6_k_avx2
// and the float part dot8x4_q6_k in avx2.rs), with one 256-bit vpdpbusd per quant group and
// token serving the eight rows (the AVX2 tile needs a maddubs, and per two groups an add and a
// madd). This replaced a 2 x 4 tile in the single-row dot's lane order (both rows of a pair in
// one 512-bit register). The single-row dot and the quant rebuilding come from avx2.rs.

/// dot8x4_q6_k_avx2 with VNNI, for eight rows decoded by decode8_q6_k_avx2 and four activations:
/// per sub-block (16 values, four quant groups) each row's exact i32 Σ (q + 32) * x_q by four
/// vpdpbusd, times the row's scale (vpmulld), summed over the sub-blocks: the same integers, so
/// the bits of dot8x4_q6_k_avx2. Requires AVX2, FMA and AVX-512 F + VL + VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot8x4_q6_k_avx512(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 8] {
    dot8x4_q6_k(rows, xs, |base, y| unsafe {
        let mut s = [_mm256_setzero_si256(); 4];
        for sb in 0..16 {
            // the scale of sub-block sb, row r: i16 lanes 2r and 2r + 1 of its line, i.e. the
            // high half of i32 lane r (signed)
            let sc = _mm256_srai_epi32::<16>(_mm256_load_si256(base.add(2048 + 32 * sb) as *const __m256i));
            let mut a = [_mm256_setzero_si256(); 4];
            for g in 4 * sb..4 * sb + 4 {
                let w = _mm256_load_si256(base.add(32 * g) as *const __m256i);
                for t in 0..4 {
                    a[t] = _mm256_dpbusd_epi32(a[t], w, bcast4(y[t].qs.as_ptr().add(4 * g)));
                }
            }
            s = std::array::from_fn(|t| unsafe { _mm256_add_epi32(s[t], _mm256_mullo_epi32(a[t], sc)) });
        }
        s
    })
}
