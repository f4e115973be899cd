// The AVX-512 helper the avx512 realizations' pair tiles share (over the AVX2 helpers).

// Lanes 0..8 and lanes 8..16 of four 512-bit accumulators, each eight summed as hsum_f32x8
// does: [low halves, high halves] (the two rows of an AVX-512 pair tile, four tokens).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,avx512f")]
pub(crate) unsafe fn hsum_halves4(acc: [__m512; 4]) -> [[f32; 4]; 2] {
    let mut out = [[0f32; 4]; 2];
    for (t, a) in acc.into_iter().enumerate() {
        out[0][t] = hsum_f32x8(_mm512_castps512_ps256(a));
        out[1][t] = hsum_f32x8(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(a))));
    }
    out
}
