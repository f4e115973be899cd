// AVX-512 VNNI Q4_K kernel for prefill and batched steps: the AVX2 realization's 8 x 4 tile in
// the gemm order (eight rows interleaved four quants at a time: decode8_q4_k_avx2 and the float
// part dot8x4_q4_k in avx2.rs), with one 256-bit vpdpbusd per quant group and token serving the
// eight rows (the AVX2 tile needs a maddubs and an add, and a madd per sub-block). This replaced
// a 2 x 4 tile (both rows of a pair in one 512-bit register, maddubs + vpdpwssd, then
// horizontal sums per pair). The single-row dot and the scale unpacking come from avx2.rs.

/// dot8x4_q4_k_avx2 with VNNI, for eight rows decoded by decode8_q4_k_avx2 and four activations:
/// each row's exact i32 sub-block sum A_j by one vpdpbusd per quant group and token, then S_p =
/// sc_2p * A_2p + sc_2p+1 * A_2p+1 in f32, exactly (|A_j| <= 32 * 15 * 128 and sc_j <= 63, so
/// each product and the sum are integers below 2^23), so the results are the bits of
/// dot8x4_q4_k_avx2. Requires AVX2, FMA and AVX-512 F + VL + VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot8x4_q4_k_avx512(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 8] {
    dot8x4_q4_k(rows, xs, |base, y, p| unsafe {
        // a[h][t]: A_2p+h of token t; the two sub-blocks' groups interleaved (eight chains)
        let mut a = [[_mm256_setzero_si256(); 4]; 2];
        for g in 0..8 {
            for h in 0..2 {
                let gg = 8 * (2 * p + h) + g;
                let wq = _mm256_load_si256(base.add(32 * gg) as *const __m256i);
                for t in 0..4 {
                    a[h][t] = _mm256_dpbusd_epi32(a[h][t], wq, bcast4(y[t].qs.as_ptr().add(4 * gg)));
                }
            }
        }
        // sc_2p+h of row r: i16 lanes 2r and 2r + 1 of the tile's scale line, i.e. the high half
        // of i32 lane r
        let sc = [0, 1].map(|h| unsafe { _mm256_cvtepi32_ps(_mm256_srli_epi32::<16>(_mm256_load_si256(base.add(2048 + 32 * (2 * p + h)) as *const __m256i))) });
        std::array::from_fn(|t| unsafe { _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[1][t]), sc[1], _mm256_mul_ps(_mm256_cvtepi32_ps(a[0][t]), sc[0])) })
    })
}
