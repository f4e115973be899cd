// AVX2 Q4_1 x Q8_0 dot: nibbles are spread to 32 bytes (low nibbles = values 0..16, high =
// 16..32) and, being unsigned, multiplied directly with the signed Q8_0 quants (maddubs, then
// madd into eight i32 lane sums; no sign trick and no offset needed, |pair| <= 2*15*127),
// converted to f32 and accumulated with one fma by d_w*d_x. The min term needs no per-block
// work: for eight blocks at once, their f16 mins times the activation's block sums d_x * Σ q_x
// (Act.q8_0_s, exact in f32) go into a second accumulator with one fma. Both accumulators'
// lanes are reduced at the end.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

// acc + d * (the eight i32 lane sums of nibbles(b) . block y, as f32).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn q4_1_step(acc: __m256, d: __m256, b: &BlockQ4_1, y: &BlockQ8_0) -> __m256 {
    let tmp = _mm_loadu_si128(b.qs.as_ptr() as *const __m128i);
    let qx = _mm256_and_si256(
        _mm256_set1_epi8(0x0F),
        _mm256_set_m128i(_mm_srli_epi16(tmp, 4), tmp),
    );
    let qy = _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i);
    let p = _mm256_madd_epi16(_mm256_set1_epi16(1), _mm256_maddubs_epi16(qx, qy));
    _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc)
}

/// row . x for a Q4_1 row; reads x's Q8_0 form and its block sums (q8_0_s). Requires AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot_q4_1_avx2(row: &[u8], x: &Act) -> f32 {
    let w = q4_1_blocks(row);
    let a = &x.q8_0[..];
    let ad = &x.q8_0_d[..];
    let sx = &x.q8_0_s[..];
    assert_eq!(
        w.len(),
        a.len(),
        "Q4_1 row of {} blocks for a Q8_0 activation of {} blocks",
        w.len(),
        a.len()
    );
    assert!(
        a.len() * 32 == x.f32.len() && ad.len() == a.len() && sx.len() == a.len(),
        "activation lacks its Q8_0 form"
    );
    let mut acc = _mm256_setzero_ps();
    let mut acc_m = _mm256_setzero_ps();
    // Eight blocks per step: their eight scale products are formed at once, then each block's
    // product is broadcast from its lane; the eight min terms are one fma.
    for (((wb, ab), adb), sxb) in w
        .chunks(8)
        .zip(a.chunks(8))
        .zip(ad.chunks(8))
        .zip(sx.chunks(8))
    {
        let dd = _mm256_mul_ps(f16x8_scales(wb.len(), |k| wb[k].d), f32x8_head(adb));
        acc_m = _mm256_fmadd_ps(f16x8_scales(wb.len(), |k| wb[k].m), f32x8_head(sxb), acc_m);
        if let (Ok(wb), Ok(ab)) = (
            <&[BlockQ4_1; 8]>::try_from(wb),
            <&[BlockQ8_0; 8]>::try_from(ab),
        ) {
            // Full group: written out, with constant lane indices.
            acc = q4_1_step(
                acc,
                _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(0)),
                &wb[0],
                &ab[0],
            );
            acc = q4_1_step(
                acc,
                _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(1)),
                &wb[1],
                &ab[1],
            );
            acc = q4_1_step(
                acc,
                _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(2)),
                &wb[2],
                &ab[2],
            );
            acc = q4_1_step(
                acc,
                _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(3)),
                &wb[3],
                &ab[3],
            );
            acc = q4_1_step(
                acc,
                _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(4)),
                &wb[4],
                &ab[4],
            );
            acc = q4_1_step(
                acc,
                _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(5)),
                &wb[5],
                &ab[5],
            );
            acc = q4_1_step(
                acc,
                _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(6)),
                &wb[6],
                &ab[6],
            );
            acc = q4_1_step(
                acc,
                _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(7)),
                &wb[7],
                &ab[7],
            );
        } else {
            for (k, (b, y)) in wb.iter().zip(ab).enumerate() {
                acc = q4_1_step(
                    acc,
                    _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(k as i32)),
                    b,
                    y,
                );
            }
        }
    }
    hsum_f32x8(_mm256_add_ps(acc, acc_m))
}
